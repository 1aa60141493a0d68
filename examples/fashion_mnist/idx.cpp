#include "idx.hpp"

#include <cerrno>
#include <cstring>
#include <memory>

#include <sys/stat.h>
#include <zlib.h>

namespace fmnist {

namespace {

struct GzClose {
    void operator()(gzFile_s *f) const noexcept { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzClose>;

[[noreturn]] void fail(const std::string &path, const std::string &what) {
    throw DataError("fashion-mnist: " + path + ": " + what);
}

// Reads exactly size bytes; returns how many were read before the end of the stream.
std::size_t read_some(gzFile f, const std::string &path, uint8_t *dst, std::size_t size) {
    std::size_t done = 0;
    while (done < size) {
        unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(size - done, 1u << 30));
        int n = gzread(f, dst + done, chunk);
        if (n < 0) {
            int code = 0;
            const char *msg = gzerror(f, &code);
            fail(path, std::string("corrupt gzip stream: ") + (msg ? msg : "unknown error"));
        }
        if (n == 0) break;
        done += static_cast<std::size_t>(n);
    }
    return done;
}

std::string location_hint() { return " (install Debian's dataset-fashion-mnist package or pass --data DIR)"; }

}  // namespace

IdxArray read_idx(const std::string &path, int expected_rank) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) fail(path, std::string(std::strerror(errno)) + location_hint());
    if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
    GzFile f(gzopen(path.c_str(), "rb"));
    if (!f) fail(path, std::string("cannot open: ") + std::strerror(errno));

    uint8_t magic[4];
    if (read_some(f.get(), path, magic, 4) != 4) fail(path, "truncated: shorter than the 4-byte magic");
    if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08)
        fail(path, "bad magic " + std::to_string(magic[0]) + "," + std::to_string(magic[1]) + "," +
                       std::to_string(magic[2]) + " (expected 0,0,8: an IDX file of unsigned bytes)");
    if (magic[3] != expected_rank)
        fail(path, "has rank " + std::to_string(magic[3]) + ", expected " + std::to_string(expected_rank));

    IdxArray out;
    uint64_t total = 1;
    for (int i = 0; i < expected_rank; ++i) {
        uint8_t b[4];
        if (read_some(f.get(), path, b, 4) != 4) fail(path, "truncated inside the dimensions");
        uint32_t dim = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
        if (dim == 0 || dim > (1u << 24)) fail(path, "implausible dimension " + std::to_string(dim));
        out.dims.push_back(dim);
        total *= dim;
        if (total > (uint64_t{1} << 34)) fail(path, "dimensions describe more than 16 GiB");
    }
    out.data.resize(static_cast<std::size_t>(total));
    std::size_t got = read_some(f.get(), path, out.data.data(), out.data.size());
    if (got != out.data.size())
        fail(path, "truncated: " + std::to_string(got) + " data bytes, the dimensions need " +
                       std::to_string(out.data.size()));
    uint8_t extra;
    if (read_some(f.get(), path, &extra, 1) != 0) fail(path, "trailing bytes after the data");
    return out;
}

Split read_split(const std::string &dir, const std::string &name) {
    std::string images_path = dir + "/" + name + "-images-idx3-ubyte.gz";
    std::string labels_path = dir + "/" + name + "-labels-idx1-ubyte.gz";
    IdxArray images = read_idx(images_path, 3);
    IdxArray labels = read_idx(labels_path, 1);
    if (images.dims[0] != labels.dims[0])
        throw DataError("fashion-mnist: " + images_path + " has " + std::to_string(images.dims[0]) + " images but " +
                        labels_path + " has " + std::to_string(labels.dims[0]) + " labels");
    for (std::size_t i = 0; i < labels.data.size(); ++i)
        if (labels.data[i] > 9)
            fail(labels_path,
                 "label " + std::to_string(labels.data[i]) + " at index " + std::to_string(i) + " is outside 0..9");
    Split split;
    split.count = images.dims[0];
    split.rows = images.dims[1];
    split.cols = images.dims[2];
    split.images = std::move(images.data);
    split.labels = std::move(labels.data);
    return split;
}

}  // namespace fmnist
