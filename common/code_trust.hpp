// The trust rules for every file tinyfin hands to dlopen: plugins (TINYFIN_PLUGIN_PATH, the
// install and build-tree directories), TINYFIN_PIN_LIBRARIES, TINYFIN_VULKAN_LOADER
// (docs/security.md, "Code tinyfin loads"). Header-only: the core and the vulkan plugin share it.
//
// Whoever can write the file, or the directory holding its name, can make this process run their
// code. So a path naming code must be absolute and outside /proc (/proc/self/cwd and
// /proc/self/fd/N name whatever the reading process has open: the current directory by another
// name), must resolve to a regular file, and that file, the directory holding it and the directory
// holding the name (where a symlink lives) must belong to root or to this user and be writable by
// nobody else; a sticky directory (/tmp) is fine, since others cannot replace our files there.
//
// The check is done on the path, then dlopen opens the path again: the residual race needs write
// access to one of those directories, which the check has just refused to anyone but root and us.
#pragma once

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "regular_file.hpp"

namespace tf_common {

inline std::string parent_directory(const std::string &path) {
    const std::size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? std::string("/") : path.substr(0, slash);
}

inline bool starts_with_proc(const std::string &path) { return path == "/proc" || path.rfind("/proc/", 0) == 0; }

// Why a file or directory may not be trusted (owner, mode); "" when it may.
inline std::string owner_mode_problem(const std::string &path, const struct stat &st, const char *what) {
    if (st.st_uid != 0 && st.st_uid != ::geteuid() && st.st_uid != ::getuid())
        return std::string(what) + " " + path + " is owned by uid " + std::to_string(st.st_uid) +
               ", not by root or the current user (uid " + std::to_string(::geteuid()) + ")";
    const bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !sticky_dir) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        const char *who = (st.st_mode & S_IWOTH) ? "others" : "its group";
        return std::string(what) + " " + path + " is writable by " + who + " (mode " + mode + "); run chmod go-w on it";
    }
    return {};
}

inline std::string path_owner_mode_problem(const std::string &path, const char *what) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return std::string("cannot stat ") + path + ": " + std::strerror(errno);
    return owner_mode_problem(path, st, what);
}

enum class CodeVerdict {
    trusted,
    not_a_file,  // no regular file there (FIFO, device, directory, missing): never loadable
    untrusted,  // owner or mode: TINYFIN_ALLOW_INSECURE_PLUGINS=1 overrides
};

// Whether the code file `path` may be loaded, and `why` not. `resolved` receives its realpath.
inline CodeVerdict check_code_file(const std::string &path, std::string &resolved, std::string &why,
                                   const char *what = "plugin file") {
    resolved = path;
    if (path.empty() || path[0] != '/') {
        why = std::string(what) + " '" + path + "' is not an absolute path";
        return CodeVerdict::untrusted;
    }
    if (starts_with_proc(path)) {
        why = std::string(what) + " " + path +
              " is under /proc, which names files by the reading process (its current directory,"
              " its open files); name the file itself";
        return CodeVerdict::untrusted;
    }
    char buffer[PATH_MAX];
    if (!::realpath(path.c_str(), buffer)) {
        why = std::string("cannot resolve ") + path + ": " + std::strerror(errno);
        return CodeVerdict::not_a_file;
    }
    resolved = buffer;
    // Non-blocking open and fstat: a FIFO or device is refused without blocking or reading it.
    struct stat st;
    const int fd = open_regular_file(resolved, st, why);
    if (fd < 0) {
        why = std::string(what) + " " + path + ": " + why;
        return CodeVerdict::not_a_file;
    }
    ::close(fd);
    if (starts_with_proc(resolved)) {
        why = std::string(what) + " " + path + " resolves to " + resolved + ", under /proc";
        return CodeVerdict::untrusted;
    }
    why = owner_mode_problem(resolved, st, what);
    if (why.empty()) why = path_owner_mode_problem(parent_directory(path), "directory");
    if (why.empty() && parent_directory(resolved) != parent_directory(path))
        why = path_owner_mode_problem(parent_directory(resolved), "directory");
    return why.empty() ? CodeVerdict::trusted : CodeVerdict::untrusted;
}

}  // namespace tf_common
