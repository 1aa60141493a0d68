// MappedFile: mmap of a regular file (mapped_file.hpp).
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/mapped_file.hpp>

#include "regular_file.hpp"

namespace tinyfin::llm {

MappedFile::MappedFile(const std::string &path) : path_(path) {
    struct stat st {};
    std::string why;
    const int fd = tf_common::open_regular_file(path, st, why);
    if (fd < 0) throw FileError("FileError: cannot open model file '" + path + "': " + why);
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
        void *p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        const int err = errno;
        ::close(fd);
        if (p == MAP_FAILED) throw FileError("FileError: cannot map model file '" + path + "': " + std::strerror(err));
        data_ = static_cast<const std::byte *>(p);
    } else {
        ::close(fd);
    }
}

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile &&other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
    if (this != &other) {
        reset();
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

void MappedFile::reset() noexcept {
    if (data_) ::munmap(const_cast<std::byte *>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace tinyfin::llm
