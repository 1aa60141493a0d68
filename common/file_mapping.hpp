// A read-only memory map of a whole regular file: the one mmap owner of the model readers
// (libtinyfin-llm's MappedFile, libtinyfin-onnx's model and external-data files). Header-only,
// as the other common/ helpers; the libraries turn a failure into their own typed error.
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "regular_file.hpp"

namespace tf_common {

// Owns one private read-only mapping (move-only); unmapped when it goes. An empty file has no
// mapping: data() is nullptr and size() 0.
class FileMapping {
public:
    FileMapping() = default;
    ~FileMapping() { reset(); }
    FileMapping(FileMapping &&other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    FileMapping &operator=(FileMapping &&other) noexcept {
        if (this != &other) {
            reset();
            data_ = std::exchange(other.data_, nullptr);
            size_ = std::exchange(other.size_, 0);
        }
        return *this;
    }
    FileMapping(const FileMapping &) = delete;
    FileMapping &operator=(const FileMapping &) = delete;

    // Opens `path` as a regular file only (open_regular_file: a directory, FIFO, socket or
    // device is refused without blocking) and maps all of it. False with `why` set when it
    // cannot; `real_path`, when given, receives where the opened descriptor leads after every
    // symbolic link (/proc/self/fd), so that the file checked is the file named.
    bool map(const std::string &path, std::string &why, std::string *real_path = nullptr) {
        reset();
        struct stat st {};
        const int fd = open_regular_file(path, st, why);
        if (fd < 0) return false;
        if (real_path) {
            char link[PATH_MAX + 1];
            const std::string proc = "/proc/self/fd/" + std::to_string(fd);
            const ssize_t n = ::readlink(proc.c_str(), link, PATH_MAX);
            if (n <= 0) {
                why = "cannot resolve its path";
                ::close(fd);
                return false;
            }
            real_path->assign(link, static_cast<std::size_t>(n));
        }
        const auto size = static_cast<std::size_t>(st.st_size);
        if (size > 0) {
            void *p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
            const int err = errno;
            ::close(fd);
            if (p == MAP_FAILED) {
                why = std::string("cannot map its ") + std::to_string(size) + " bytes: " + std::strerror(err);
                return false;
            }
            data_ = static_cast<const std::byte *>(p);
            size_ = size;
        } else {
            ::close(fd);
        }
        return true;
    }

    const std::byte *data() const { return data_; }
    std::size_t size() const { return size_; }

    void reset() noexcept {
        if (data_) ::munmap(const_cast<std::byte *>(data_), size_);
        data_ = nullptr;
        size_ = 0;
    }

private:
    const std::byte *data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace tf_common
