// The Fashion-MNIST example's IDX reader on small files written here: a good one, and each way
// a file can be missing, corrupt or the wrong shape.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "idx.hpp"

using Bytes = std::vector<uint8_t>;

namespace {

std::string temp_path(const std::string &name) {
    const char *dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/tinyfin-idx-" + std::to_string(::getpid()) + "-" + name;
}

// IDX bytes: magic 0,0,8,rank, big-endian dims, data.
Bytes idx_bytes(const std::vector<uint32_t> &dims, const Bytes &data) {
    Bytes b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
    for (uint32_t d : dims)
        for (int shift : {24, 16, 8, 0}) b.push_back(static_cast<uint8_t>(d >> shift));
    b.insert(b.end(), data.begin(), data.end());
    return b;
}

void write_gz(const std::string &path, const Bytes &bytes) {
    gzFile f = gzopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
}

void write_raw(const std::string &path, const Bytes &bytes) {
    std::FILE *f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
}

Bytes read_raw(const std::string &path) {
    Bytes b;
    std::FILE *f = std::fopen(path.c_str(), "rb");
    int c;
    while ((c = std::fgetc(f)) != EOF) b.push_back(static_cast<uint8_t>(c));
    std::fclose(f);
    return b;
}

struct Removed {
    std::vector<std::string> paths;
    ~Removed() {
        for (const auto &p : paths) std::remove(p.c_str());
    }
};

void check_error(const std::string &path, int rank, const std::string &fragment) {
    try {
        fmnist::read_idx(path, rank);
        FAIL("read_idx(" << path << ") did not throw");
    } catch (const fmnist::DataError &e) {
        std::string what = e.what();
        INFO(what);
        CHECK(what.find(path) != std::string::npos);
        CHECK(what.find(fragment) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("read_idx parses gzip and plain IDX files") {
    Removed cleanup;
    std::string gz = temp_path("ok.gz"), plain = temp_path("ok.idx");
    cleanup.paths = {gz, plain};
    Bytes data = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    write_gz(gz, idx_bytes({2, 2, 3}, data));
    write_raw(plain, idx_bytes({12}, data));
    fmnist::IdxArray a = fmnist::read_idx(gz, 3);
    CHECK(a.dims == std::vector<int64_t>{2, 2, 3});
    CHECK(a.data == data);
    fmnist::IdxArray b = fmnist::read_idx(plain, 1);
    CHECK(b.dims == std::vector<int64_t>{12});
    CHECK(b.data == data);
}

TEST_CASE("read_idx errors: missing, bad magic, wrong rank, truncated, trailing, corrupt gzip") {
    Removed cleanup;
    std::string path = temp_path("bad.gz");
    cleanup.paths = {path};
    Bytes data(24, 7);

    check_error(temp_path("missing.gz"), 1, "No such file");
    check_error(temp_path("missing.gz"), 1, "dataset-fashion-mnist");

    Bytes b = idx_bytes({24}, data);
    b[2] = 0x0D;  // float data, not unsigned bytes
    write_gz(path, b);
    check_error(path, 1, "bad magic");

    write_gz(path, idx_bytes({4, 6}, data));
    check_error(path, 1, "rank 2, expected 1");

    write_gz(path, idx_bytes({25}, data));
    check_error(path, 1, "truncated: 24 data bytes, the dimensions need 25");

    write_gz(path, idx_bytes({23}, data));
    check_error(path, 1, "trailing bytes");

    write_gz(path, {0, 0});
    check_error(path, 1, "truncated");

    // A gzip stream cut in half, and one with its deflate data overwritten.
    write_gz(path, idx_bytes({2000}, Bytes(2000, 3)));
    Bytes gz = read_raw(path);
    write_raw(path, Bytes(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2)));
    CHECK_THROWS_AS(fmnist::read_idx(path, 1), fmnist::DataError);
    Bytes corrupt = gz;
    for (std::size_t i = 12; i < corrupt.size() - 8; ++i) corrupt[i] = 0xff;
    write_raw(path, corrupt);
    CHECK_THROWS_AS(fmnist::read_idx(path, 1), fmnist::DataError);
}

TEST_CASE("read_split checks counts and labels") {
    Removed cleanup;
    std::string dir = temp_path("split");
    REQUIRE(mkdir(dir.c_str(), 0700) == 0);
    std::string images = dir + "/x-images-idx3-ubyte.gz", labels = dir + "/x-labels-idx1-ubyte.gz";
    cleanup.paths = {images, labels};
    write_gz(images, idx_bytes({3, 2, 2}, Bytes(12, 1)));
    write_gz(labels, idx_bytes({3}, {0, 9, 4}));
    fmnist::Split s = fmnist::read_split(dir, "x");
    CHECK(s.count == 3);
    CHECK(s.rows == 2);
    CHECK(s.cols == 2);
    CHECK(s.labels == Bytes{0, 9, 4});

    write_gz(labels, idx_bytes({3}, {0, 10, 4}));
    CHECK_THROWS_WITH_AS(fmnist::read_split(dir, "x"), doctest::Contains("label 10 at index 1"), fmnist::DataError);
    write_gz(labels, idx_bytes({2}, {0, 1}));
    CHECK_THROWS_WITH_AS(fmnist::read_split(dir, "x"), doctest::Contains("3 images but"), fmnist::DataError);
    std::remove(images.c_str());
    std::remove(labels.c_str());
    rmdir(dir.c_str());
}
