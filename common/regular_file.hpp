// Opening a file that must be a regular file, for every file tinyfin reads by a name it was
// given (nn::load, plugin files, the vulkan pipeline cache). Header-only: the core and the
// plugins share it.
//
// The open is non-blocking (a FIFO with no writer would block it forever) and the check is on
// the opened descriptor (fstat), so the file checked is the file read. A device (/dev/zero), a
// FIFO, a socket or a directory is refused before one byte is read.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tf_common {

// What kind of file a mode is, for messages.
inline const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

// Opens `path` read-only; the descriptor (blocking again) when it is a regular file, else -1
// with `why` set. `st` receives the file's status.
inline int open_regular_file(const std::string &path, struct stat &st, std::string &why) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        why = std::strerror(errno);
        return -1;
    }
    if (::fstat(fd, &st) != 0) {
        why = std::strerror(errno);
        ::close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        why = std::string("it is ") + file_kind(st.st_mode) + ", not a regular file";
        ::close(fd);
        return -1;
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

// Reads up to `limit` bytes from the start of a regular file into `out`; false with `why` set
// when the file is not regular, larger than `limit`, or a read fails.
template <typename Bytes>
bool read_regular_file(const std::string &path, std::size_t limit, Bytes &out, std::string &why) {
    struct stat st;
    const int fd = open_regular_file(path, st, why);
    if (fd < 0) return false;
    if (st.st_size < 0 || static_cast<unsigned long long>(st.st_size) > limit) {
        why = "it has " + std::to_string(st.st_size) + " bytes, more than the limit of " + std::to_string(limit);
        ::close(fd);
        return false;
    }
    out.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < out.size()) {
        const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            why = std::strerror(errno);
            ::close(fd);
            return false;
        }
        if (n == 0) break;  // shrank while reading: what was read is all there is
        done += static_cast<std::size_t>(n);
    }
    out.resize(done);
    ::close(fd);
    return true;
}

}  // namespace tf_common
