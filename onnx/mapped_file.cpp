#include "mapped_file.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <climits>

#include "regular_file.hpp"
#include "tinyfin/onnx.hpp"

namespace tinyfin::onnx::detail {

MappedFile::MappedFile(const std::string &path) {
    struct stat st;
    std::string why;
    const int fd = tf_common::open_regular_file(path, st, why);
    if (fd < 0) throw ModelError("ModelError: cannot open '" + path + "': " + why);
    char link[PATH_MAX + 1];
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(proc.c_str(), link, PATH_MAX);
    if (n <= 0) {
        ::close(fd);
        throw ModelError("ModelError: cannot resolve the path of '" + path + "'");
    }
    real_path_.assign(link, static_cast<std::size_t>(n));
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
        void *p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            ::close(fd);
            throw ModelError("ModelError: cannot map '" + path + "' (" + std::to_string(size_) + " bytes)");
        }
        data_ = static_cast<const std::byte *>(p);
    }
    ::close(fd);
}

MappedFile::~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte *>(data_), size_);
    data_ = nullptr;
}

}  // namespace tinyfin::onnx::detail
