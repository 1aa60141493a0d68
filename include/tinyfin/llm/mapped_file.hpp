// A read-only memory map of a whole regular file: the byte source of every model-file parser.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>

namespace tinyfin::llm {

// Owns one mapping (move-only; a moved-from file is empty). Opening refuses anything but a
// regular file (a directory, a FIFO or a device is a FileError, without blocking). An empty file
// maps to an empty span.
class MappedFile {
public:
    explicit MappedFile(const std::string &path);
    MappedFile(MappedFile &&other) noexcept
        : path_(std::move(other.path_)), data_(std::move(other.data_)), size_(std::exchange(other.size_, 0)) {}
    MappedFile &operator=(MappedFile &&other) noexcept {
        path_ = std::move(other.path_);
        data_ = std::move(other.data_);
        size_ = std::exchange(other.size_, 0);
        return *this;
    }
    MappedFile(const MappedFile &) = delete;
    MappedFile &operator=(const MappedFile &) = delete;

    std::span<const std::byte> bytes() const { return {data_.get(), size_}; }
    std::size_t size() const { return size_; }
    const std::string &path() const { return path_; }

private:
    std::string path_;
    // The bytes; it shares the ownership of the mapping (unmapped with the last owner).
    std::shared_ptr<const std::byte> data_;
    std::size_t size_ = 0;
};

}  // namespace tinyfin::llm
