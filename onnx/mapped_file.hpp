// The model and its external-data files, mapped read-only through common/file_mapping.hpp (the
// mmap owner libtinyfin-llm shares): a failure is a ModelError naming the file. Files tinyfin
// reads by a name it was given are opened as regular files only.
#pragma once

#include <cstddef>
#include <string>

#include "file_mapping.hpp"

namespace tinyfin::onnx::detail {

class MappedFile {
public:
    // Maps path; throws ModelError naming it when it cannot be opened, is not a regular file or
    // cannot be mapped.
    explicit MappedFile(const std::string &path);

    const std::byte *data() const { return mapping_.data(); }
    std::size_t size() const { return mapping_.size(); }
    // Where the opened descriptor leads after every symbolic link (from /proc/self/fd).
    const std::string &real_path() const { return real_path_; }

private:
    tf_common::FileMapping mapping_;
    std::string real_path_;
};

}  // namespace tinyfin::onnx::detail
