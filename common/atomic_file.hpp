// Replacing a file atomically and safely, for nn::save (core) and the vulkan pipeline cache
// (plugin). Header-only, so a plugin shares it without linking libtinyfin; no C++ type of it
// crosses the plugin ABI.
//
// The data goes to a new temp file in the target's directory, created exclusively
// (O_CREAT|O_EXCL|O_NOFOLLOW: a planted file or symlink is never written through) under an
// unpredictable name, is fsynced, renamed over the target, and the directory is fsynced. Every
// failure removes the temp file. A process killed mid-write leaves its temp file,
// ".<name>.tinyfin-tmp.<pid>.<random>": the next write of the same target removes the ones
// whose process no longer exists (docs/security.md, "Files tinyfin writes").
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace tf_common {

// Owns one file descriptor.
class UniqueFd {
public:
    explicit UniqueFd(int fd = -1) : fd_(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(const UniqueFd &) = delete;
    UniqueFd &operator=(const UniqueFd &) = delete;
    int get() const { return fd_; }
    int release() {
        int fd = fd_;
        fd_ = -1;
        return fd;
    }
    void reset(int fd = -1) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_;
};

// The directory part and the name part of a path ("." for a bare name).
inline void split_path(const std::string &path, std::string &dir, std::string &name) {
    const std::size_t slash = path.rfind('/');
    if (slash == std::string::npos) {
        dir = ".";
        name = path;
        return;
    }
    dir = slash == 0 ? std::string("/") : path.substr(0, slash);
    name = path.substr(slash + 1);
}

// Every temp file of `name` starts with this; a long name is cut so the whole fits NAME_MAX.
inline std::string temp_prefix(const std::string &name) {
    std::string prefix(1, '.');
    prefix.append(name, 0, 160);
    prefix += ".tinyfin-tmp.";
    return prefix;
}

// Removes the temp files of `name` in the directory whose writer process is gone (killed
// mid-save): only regular files of this user, only when kill(pid, 0) says no such process.
inline void remove_stale_temps(int dir_fd, const std::string &name) {
    const std::string prefix = temp_prefix(name);
    const int fd = ::dup(dir_fd);
    if (fd < 0) return;
    DIR *dir = ::fdopendir(fd);
    if (!dir) {
        ::close(fd);
        return;
    }
    ::rewinddir(dir);
    while (const dirent *entry = ::readdir(dir)) {
        const char *file = entry->d_name;
        if (std::strncmp(file, prefix.c_str(), prefix.size()) != 0) continue;
        char *end = nullptr;
        const long pid = std::strtol(file + prefix.size(), &end, 10);
        if (pid <= 0 || !end || *end != '.') continue;
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
        struct stat st;
        if (::fstatat(dir_fd, file, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
        ::unlinkat(dir_fd, file, 0);
    }
    ::closedir(dir);
}

inline std::string random_suffix() {
    uint64_t bits = 0;
    if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits)) {
        timespec now{};
        ::clock_gettime(CLOCK_MONOTONIC, &now);
        bits ^= static_cast<uint64_t>(now.tv_nsec) * 0x9E3779B97F4A7C15ull ^ reinterpret_cast<uintptr_t>(&now);
    }
    static const char digits[] = "0123456789abcdefghijklmnopqrstuv";
    std::string text;
    for (int i = 0; i < 12; ++i, bits >>= 5) text += digits[bits & 31];
    return text;
}

// Writes `size` bytes to `path` as described above; "" on success, else what failed (naming
// the file and the system's reason). `mode` is the new file's mode before the umask.
inline std::string write_file_atomically(const std::string &path, const void *data, std::size_t size, mode_t mode) {
    std::string dir, name;
    split_path(path, dir, name);
    if (name.empty() || name == "." || name == "..") return "'" + path + "' names a directory, not a file";
    UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir_fd.get() < 0) return "cannot open the directory '" + dir + "': " + std::strerror(errno);
    remove_stale_temps(dir_fd.get(), name);

    const std::string prefix = temp_prefix(name) + std::to_string(::getpid()) + ".";
    std::string temp;
    UniqueFd file;
    for (int attempt = 0; attempt < 64 && file.get() < 0; ++attempt) {
        temp = prefix + random_suffix();
        file.reset(::openat(dir_fd.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
        if (file.get() < 0 && errno != EEXIST)
            return "cannot create a temp file in '" + dir + "': " + std::strerror(errno);
    }
    if (file.get() < 0) return "cannot create a temp file in '" + dir + "': every name taken";

    auto fail = [&](const std::string &what, int error) {
        file.reset();
        ::unlinkat(dir_fd.get(), temp.c_str(), 0);
        return what + ": " + std::strerror(error);
    };
    const char *bytes = static_cast<const char *>(data);
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::write(file.get(), bytes + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return fail("cannot write '" + dir + "/" + temp + "'", n < 0 ? errno : ENOSPC);
        done += static_cast<std::size_t>(n);
    }
    if (::fsync(file.get()) != 0) return fail("cannot fsync '" + dir + "/" + temp + "'", errno);
    if (::close(file.release()) != 0) {
        const int error = errno;
        ::unlinkat(dir_fd.get(), temp.c_str(), 0);
        return "cannot close '" + dir + "/" + temp + "': " + std::strerror(error);
    }
    if (::renameat(dir_fd.get(), temp.c_str(), dir_fd.get(), name.c_str()) != 0)
        return fail("cannot rename '" + dir + "/" + temp + "' to '" + path + "'", errno);
    // The rename is durable once the directory is; filesystems that cannot fsync a directory
    // say EINVAL.
    if (::fsync(dir_fd.get()) != 0 && errno != EINVAL && errno != EROFS)
        return "cannot fsync the directory '" + dir + "': " + std::strerror(errno);
    return {};
}

}  // namespace tf_common
