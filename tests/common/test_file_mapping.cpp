// common/file_mapping.hpp, the mmap owner of libtinyfin-llm and libtinyfin-onnx: the bytes of
// the file, an empty file, what it refuses (without blocking on a FIFO), the resolved path and
// ownership across moves.
#include <doctest/doctest.h>

#include "file_mapping.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

// A fresh directory under TMPDIR, removed with its files at the end.
struct ScratchDir {
    std::string path;
    ScratchDir() {
        const char *tmp = std::getenv("TMPDIR");
        std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tf-file-mapping-XXXXXX";
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~ScratchDir() { std::system(("rm -rf -- '" + path + "'").c_str()); }
    std::string write(const std::string &name, const std::string &bytes) const {
        const std::string file = path + "/" + name;
        std::ofstream(file, std::ios::binary) << bytes;
        return file;
    }
};

std::string text(const tf_common::FileMapping &m) {
    return std::string(reinterpret_cast<const char *>(m.data()), m.size());
}

}  // namespace

TEST_CASE("a regular file maps to its bytes; an empty one to no mapping") {
    ScratchDir dir;
    tf_common::FileMapping m;
    std::string why;
    REQUIRE(m.map(dir.write("model.bin", std::string("ab\0cd", 5)), why));
    CHECK(m.size() == 5);
    CHECK(text(m) == std::string("ab\0cd", 5));
    REQUIRE(m.map(dir.write("empty.bin", ""), why));
    CHECK(m.data() == nullptr);
    CHECK(m.size() == 0);
}

TEST_CASE("a directory, a FIFO, a device and a missing file are refused with a reason") {
    ScratchDir dir;
    tf_common::FileMapping m;
    std::string why;
    CHECK_FALSE(m.map(dir.path, why));
    CHECK(why.find("directory") != std::string::npos);
    const std::string fifo = dir.path + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_FALSE(m.map(fifo, why));  // no writer: a blocking open would never return
    CHECK(why.find("FIFO") != std::string::npos);
    CHECK_FALSE(m.map("/dev/zero", why));
    CHECK(why.find("character device") != std::string::npos);
    CHECK_FALSE(m.map(dir.path + "/missing", why));
    CHECK(why.find("No such file") != std::string::npos);
    CHECK(m.data() == nullptr);
}

TEST_CASE("the resolved path follows symbolic links to the file opened") {
    ScratchDir dir;
    const std::string target = dir.write("weights.bin", "xyz");
    const std::string link = dir.path + "/link.bin";
    REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
    tf_common::FileMapping m;
    std::string why, real;
    REQUIRE(m.map(link, why, &real));
    char resolved[4096];
    REQUIRE(::realpath(target.c_str(), resolved) != nullptr);
    CHECK(real == resolved);
    CHECK(text(m) == "xyz");
}

TEST_CASE("ownership moves; the bytes stay mapped after the file is removed") {
    ScratchDir dir;
    const std::string file = dir.write("data.bin", "hello");
    tf_common::FileMapping a;
    std::string why;
    REQUIRE(a.map(file, why));
    REQUIRE(::unlink(file.c_str()) == 0);
    tf_common::FileMapping b(std::move(a));
    CHECK(a.data() == nullptr);
    CHECK(a.size() == 0);
    CHECK(text(b) == "hello");
    tf_common::FileMapping c;
    c = std::move(b);
    CHECK(b.data() == nullptr);
    CHECK(text(c) == "hello");
    c.reset();
    CHECK(c.data() == nullptr);
    CHECK(c.size() == 0);
}
