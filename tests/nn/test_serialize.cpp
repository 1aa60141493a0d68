// save/load: bitwise round trips, the documented byte layout, and a clear ValueError for every
// way a file can be wrong.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>
#include <zlib.h>

#include "tinyfin/nn.hpp"

using namespace tinyfin;
using F = std::vector<float>;
using Bytes = std::vector<uint8_t>;

namespace {

// A fresh path in the test's temporary directory, removed at scope exit.
struct TempFile {
    std::string path;
    explicit TempFile(const std::string &name) {
        const char *dir = std::getenv("TMPDIR");
        path = std::string(dir && *dir ? dir : "/tmp") + "/tinyfin-nn-" + std::to_string(::getpid()) +
               "-" + name;
    }
    ~TempFile() { std::remove(path.c_str()); }
};

Bytes read_bytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string &path, const Bytes &bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Rewrites the trailing CRC so a deliberate edit is judged by the later checks.
void fix_crc(Bytes &bytes) {
    std::size_t n = bytes.size() - 4;
    uint32_t crc = static_cast<uint32_t>(crc32(0L, bytes.data(), static_cast<uInt>(n)));
    for (int i = 0; i < 4; ++i) bytes[n + i] = static_cast<uint8_t>(crc >> (8 * i));
}

// load must throw ValueError whose message contains each of the fragments.
void check_load_error(const std::string &path, const nn::NamedTensors &into,
                      std::initializer_list<std::string> fragments) {
    try {
        nn::load(path, into);
        FAIL("load of " << path << " did not throw");
    } catch (const ValueError &e) {
        std::string what = e.what();
        INFO(what);
        CHECK(what.rfind("ValueError: load: ", 0) == 0);
        for (const std::string &f : fragments) CHECK(what.find(f) != std::string::npos);
    }
}

std::shared_ptr<nn::Sequential> small_model(uint64_t seed) {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(5, 4, true, seed), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(4, 3, false, seed + 1)});
}

} // namespace

TEST_CASE("save/load round-trips a model bitwise") {
    TempFile file("model.tfnn");
    auto a = small_model(1), b = small_model(2);
    CHECK(a->parameters()[0].to_vector<float>() != b->parameters()[0].to_vector<float>());
    nn::save(file.path, *a);
    nn::load(file.path, *b);
    auto pa = a->named_parameters(), pb = b->named_parameters();
    REQUIRE(pa.size() == pb.size());
    for (std::size_t i = 0; i < pa.size(); ++i) {
        INFO(pa[i].first);
        F va = pa[i].second.to_vector<float>(), vb = pb[i].second.to_vector<float>();
        CHECK(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0);
        CHECK(pb[i].second.requires_grad());
    }
    // Saving again gives the identical file.
    TempFile again("again.tfnn");
    nn::save(again.path, *b);
    CHECK(read_bytes(file.path) == read_bytes(again.path));
}

TEST_CASE("save/load keeps every dtype, rank 0, non-contiguous views and special floats") {
    TempFile file("mixed.tfnn");
    F specials = {0.0f, -0.0f, 1e-45f, 3.4e38f, INFINITY, -INFINITY, NAN, 1.0f / 3};
    uint8_t flags[3] = {1, 0, 1};
    Tensor transposed = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
    nn::NamedTensors out = {
        {"specials", from_vector(specials, {8})},
        {"i64", from_vector<int64_t>({-1, 1ll << 40, 7}, {3})},
        {"i32", from_vector<int32_t>({-5, 2147483647}, {2})},
        {"flags", from_host(flags, {3}, DType::boolean)},
        {"scalar", scalar(2.5)},
        {"view", transposed},
    };
    nn::save(file.path, out);
    nn::NamedTensors all = nn::load_all(file.path);
    REQUIRE(all.size() == out.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
        CHECK(all[i].first == out[i].first);
        CHECK(all[i].second.dtype() == out[i].second.dtype());
        CHECK(all[i].second.shape() == out[i].second.shape());
    }
    F got = all[0].second.to_vector<float>();
    CHECK(std::memcmp(got.data(), specials.data(), sizeof(float) * specials.size()) == 0);
    CHECK(all[1].second.to_vector<int64_t>() == std::vector<int64_t>{-1, 1ll << 40, 7});
    CHECK(all[2].second.to_vector<int32_t>() == std::vector<int32_t>{-5, 2147483647});
    CHECK(all[3].second.to_vector<bool>() == std::vector<bool>{true, false, true});
    CHECK(all[4].second.item<float>() == 2.5f);
    CHECK(all[5].second.to_vector<float>() == F{1, 4, 2, 5, 3, 6});

    // load into existing tensors matches by name, whatever the order.
    nn::NamedTensors into = {{"scalar", scalar(0)}, {"view", zeros({3, 2})},
                             {"flags", zeros({3}, DType::boolean)}, {"i32", zeros({2}, DType::i32)},
                             {"i64", zeros({3}, DType::i64)}, {"specials", zeros({8})}};
    nn::load(file.path, into);
    CHECK(into[0].second.item<float>() == 2.5f);
    CHECK(into[1].second.to_vector<float>() == F{1, 4, 2, 5, 3, 6});
}

TEST_CASE("the byte layout is the documented one") {
    TempFile file("layout.tfnn");
    nn::save(file.path, {{"w", from_vector<float>({1.0f, -2.0f}, {1, 2})}});
    Bytes b = read_bytes(file.path);
    // header 24 + name len 4 + "w" 1 + dtype 4 + rank 4 + shape 16 + nbytes 8 + data 8 + crc 4.
    REQUIRE(b.size() == 73);
    CHECK(std::memcmp(b.data(), "TFNN", 4) == 0);
    CHECK(b[4] == 1); // version 1, little-endian u32
    CHECK(b[8] == 1); // count
    CHECK(b[16] == 73); // file size
    CHECK(b[24] == 1); // name length
    CHECK(b[28] == 'w');
    CHECK(b[29] == 0); // dtype f32
    CHECK(b[33] == 2); // rank
    CHECK(b[37] == 1); // shape[0]
    CHECK(b[45] == 2); // shape[1]
    CHECK(b[53] == 8); // data bytes
    float v[2];
    std::memcpy(v, &b[61], 8);
    CHECK(v[0] == 1.0f);
    CHECK(v[1] == -2.0f);
    uint32_t crc = static_cast<uint32_t>(crc32(0L, b.data(), 69));
    CHECK((b[69] | b[70] << 8 | b[71] << 16 | uint32_t(b[72]) << 24) == crc);
}

TEST_CASE("load errors name the file and the problem") {
    TempFile file("good.tfnn"), bad("bad.tfnn");
    auto model = small_model(3);
    nn::save(file.path, *model);
    const Bytes good = read_bytes(file.path);
    nn::NamedTensors into = small_model(4)->named_parameters();
    F before = into[0].second.to_vector<float>();

    SUBCASE("missing file") {
        check_load_error(bad.path + ".nope", into, {bad.path + ".nope", "cannot open", "No such file"});
    }
    SUBCASE("bad magic") {
        Bytes b = good;
        b[0] = 'X';
        write_bytes(bad.path, b);
        check_load_error(bad.path, into, {bad.path, "not a TFNN file", "XFNN"});
    }
    SUBCASE("empty file") {
        write_bytes(bad.path, {});
        check_load_error(bad.path, into, {bad.path, "not a TFNN file"});
    }
    SUBCASE("unsupported version") {
        Bytes b = good;
        b[4] = 9;
        write_bytes(bad.path, b);
        check_load_error(bad.path, into, {bad.path, "version 9"});
    }
    SUBCASE("truncated file") {
        Bytes b(good.begin(), good.begin() + static_cast<long>(good.size() / 2));
        write_bytes(bad.path, b);
        check_load_error(bad.path, into, {bad.path, "truncated", std::to_string(good.size())});
    }
    SUBCASE("truncated inside the header") {
        Bytes b(good.begin(), good.begin() + 10);
        write_bytes(bad.path, b);
        check_load_error(bad.path, into, {bad.path, "truncated"});
    }
    SUBCASE("trailing bytes") {
        Bytes b = good;
        b.push_back(0);
        write_bytes(bad.path, b);
        check_load_error(bad.path, into, {bad.path, "after the end"});
    }
    SUBCASE("a flipped byte in the data fails the CRC") {
        Bytes b = good;
        b[good.size() - 10] ^= 0x01;
        write_bytes(bad.path, b);
        check_load_error(bad.path, into, {bad.path, "corrupt", "CRC32 mismatch"});
    }
    SUBCASE("a flipped byte in a name fails the CRC") {
        Bytes b = good;
        b[28] ^= 0x20;
        write_bytes(bad.path, b);
        check_load_error(bad.path, into, {bad.path, "CRC32 mismatch"});
    }
    SUBCASE("a malformed entry with a valid CRC") {
        Bytes b = good;
        b[24] = 0xff; // first name length far past the end
        b[25] = 0xff;
        fix_crc(b);
        write_bytes(bad.path, b);
        check_load_error(bad.path, into, {bad.path, "malformed", "entry 0"});
    }
    SUBCASE("shape mismatch") {
        nn::NamedTensors other = {{"0.weight", zeros({4, 6})}, {"0.bias", zeros({4})},
                                  {"2.weight", zeros({3, 4})}};
        check_load_error(file.path, other, {file.path, "'0.weight'", "[4,5]", "[4,6]"});
    }
    SUBCASE("dtype mismatch") {
        nn::NamedTensors other = {{"0.weight", zeros({4, 5}, DType::i32)}, {"0.bias", zeros({4})},
                                  {"2.weight", zeros({3, 4})}};
        check_load_error(file.path, other, {file.path, "'0.weight'", "f32", "i32"});
    }
    SUBCASE("a name the file does not have") {
        nn::NamedTensors other = {{"0.weight", zeros({4, 5})}, {"0.bias", zeros({4})},
                                  {"2.weight", zeros({3, 4})}, {"2.bias", zeros({3})}};
        check_load_error(file.path, other, {file.path, "no tensor '2.bias'", "0.weight, 0.bias, 2.weight"});
    }
    SUBCASE("a name the destination does not have") {
        nn::NamedTensors other = {{"0.weight", zeros({4, 5})}, {"0.bias", zeros({4})}};
        check_load_error(file.path, other, {file.path, "'2.weight'", "destination does not have"});
    }
    // A failed load leaves the destination untouched.
    CHECK(into[0].second.to_vector<float>() == before);
}

TEST_CASE("save errors: repeated names, undefined tensors, unwritable path") {
    TempFile file("dup.tfnn");
    CHECK_THROWS_AS(nn::save(file.path, {{"a", zeros({1})}, {"a", zeros({1})}}), ValueError);
    CHECK_THROWS_AS(nn::save(file.path, {{"a", Tensor()}}), ValueError);
    CHECK_THROWS_AS(nn::save(file.path, {{"", zeros({1})}}), ValueError);
    CHECK_THROWS_WITH_AS(nn::save("/nonexistent-dir/x.tfnn", {{"a", zeros({1})}}),
                         doctest::Contains("/nonexistent-dir/x.tfnn"), ValueError);
}
