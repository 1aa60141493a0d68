// MappedFile: mmap of a regular file (mapped_file.hpp), owned by common/file_mapping.hpp's
// FileMapping (the owner libtinyfin-onnx shares).
#include <memory>

#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/mapped_file.hpp>

#include "file_mapping.hpp"

namespace tinyfin::llm {

MappedFile::MappedFile(const std::string &path) : path_(path) {
    auto mapping = std::make_shared<tf_common::FileMapping>();
    std::string why;
    if (!mapping->map(path, why)) throw FileError("FileError: cannot open model file '" + path + "': " + why);
    size_ = mapping->size();
    // The aliasing constructor: data_ points at the bytes and owns the mapping.
    data_ = std::shared_ptr<const std::byte>(mapping, mapping->data());
}

}  // namespace tinyfin::llm
