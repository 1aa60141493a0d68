#include "mapped_file.hpp"

#include "tinyfin/onnx.hpp"

namespace tinyfin::onnx::detail {

MappedFile::MappedFile(const std::string &path) {
    std::string why;
    if (!mapping_.map(path, why, &real_path_)) throw ModelError("ModelError: cannot open '" + path + "': " + why);
}

}  // namespace tinyfin::onnx::detail
