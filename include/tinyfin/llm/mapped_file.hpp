// A read-only memory map of a whole regular file: the byte source of every model-file parser.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace tinyfin::llm {

// Owns one mapping (move-only). Opening refuses anything but a regular file (a directory, a
// FIFO or a device is a FileError, without blocking). An empty file maps to an empty span.
class MappedFile {
public:
    explicit MappedFile(const std::string &path);
    ~MappedFile();
    MappedFile(MappedFile &&other) noexcept;
    MappedFile &operator=(MappedFile &&other) noexcept;
    MappedFile(const MappedFile &) = delete;
    MappedFile &operator=(const MappedFile &) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    std::size_t size() const { return size_; }
    const std::string &path() const { return path_; }

private:
    void reset() noexcept;
    std::string path_;
    const std::byte *data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace tinyfin::llm
