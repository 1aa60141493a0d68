// A read-only memory map of a regular file (the model, its external-data files): one owner, unmapped
// when it goes. Files tinyfin reads by a name it was given are opened as regular files only.
#pragma once

#include <cstddef>
#include <string>

namespace tinyfin::onnx::detail {

class MappedFile {
public:
    // Maps path; throws ModelError naming it when it cannot be opened, is not a regular file or
    // cannot be mapped. `real_path` receives the opened file's resolved path.
    explicit MappedFile(const std::string &path);
    MappedFile(const MappedFile &) = delete;
    MappedFile &operator=(const MappedFile &) = delete;
    ~MappedFile();

    const std::byte *data() const { return data_; }
    std::size_t size() const { return size_; }
    // Where the opened descriptor leads after every symbolic link (from /proc/self/fd).
    const std::string &real_path() const { return real_path_; }

private:
    const std::byte *data_ = nullptr;
    std::size_t size_ = 0;
    std::string real_path_;
};

}  // namespace tinyfin::onnx::detail
