// save/load: bitwise round trips, the documented byte layout, and a clear ValueError for every
// way a file can be wrong.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
        path = std::string(dir && *dir ? dir : "/tmp") + "/tinyfin-nn-" + std::to_string(::getpid()) + "-" + name;
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

}  // namespace

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
    nn::NamedTensors into = {
        {"scalar", scalar(0)},           {"view", zeros({3, 2})},         {"flags", zeros({3}, DType::boolean)},
        {"i32", zeros({2}, DType::i32)}, {"i64", zeros({3}, DType::i64)}, {"specials", zeros({8})}};
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
    CHECK(b[4] == 1);  // version 1, little-endian u32
    CHECK(b[8] == 1);  // count
    CHECK(b[16] == 73);  // file size
    CHECK(b[24] == 1);  // name length
    CHECK(b[28] == 'w');
    CHECK(b[29] == 0);  // dtype f32
    CHECK(b[33] == 2);  // rank
    CHECK(b[37] == 1);  // shape[0]
    CHECK(b[45] == 2);  // shape[1]
    CHECK(b[53] == 8);  // data bytes
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
        b[24] = 0xff;  // first name length far past the end
        b[25] = 0xff;
        fix_crc(b);
        write_bytes(bad.path, b);
        check_load_error(bad.path, into, {bad.path, "malformed", "entry 0"});
    }
    SUBCASE("shape mismatch") {
        nn::NamedTensors other = {{"0.weight", zeros({4, 6})}, {"0.bias", zeros({4})}, {"2.weight", zeros({3, 4})}};
        check_load_error(file.path, other, {file.path, "'0.weight'", "[4,5]", "[4,6]"});
    }
    SUBCASE("dtype mismatch") {
        nn::NamedTensors other = {
            {"0.weight", zeros({4, 5}, DType::i32)}, {"0.bias", zeros({4})}, {"2.weight", zeros({3, 4})}};
        check_load_error(file.path, other, {file.path, "'0.weight'", "f32", "i32"});
    }
    SUBCASE("a name the file does not have") {
        nn::NamedTensors other = {
            {"0.weight", zeros({4, 5})}, {"0.bias", zeros({4})}, {"2.weight", zeros({3, 4})}, {"2.bias", zeros({3})}};
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

// ---- Saving safely: unique temp files, no writes through planted links, no garbage ----------

namespace {

// A private directory, removed with its contents at scope exit.
struct TempDir {
    std::string path;
    TempDir() {
        const char *dir = std::getenv("TMPDIR");
        path = std::string(dir && *dir ? dir : "/tmp") + "/tinyfin-nn-dir-XXXXXX";
        REQUIRE(mkdtemp(path.data()) != nullptr);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (const auto &entry : std::filesystem::directory_iterator(path))
            out.push_back(entry.path().filename().string());
        std::sort(out.begin(), out.end());
        return out;
    }
};

// A process id that is certainly not running: a child that has exited and been reaped.
pid_t dead_pid() {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    REQUIRE(pid > 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    return pid;
}

}  // namespace

TEST_CASE("save: threads saving one path never leave a damaged file") {
    TempDir dir;
    const std::string path = dir.path + "/model.tfnn";
    // Different sizes, so writes that share one file truncate each other's data.
    std::vector<nn::NamedTensors> models;
    for (int t = 0; t < 4; ++t) models.push_back({{"w", full({int64_t{1} << (12 + 2 * t)}, t + 1.0)}});
    for (int round = 0; round < 40; ++round) {
        std::atomic<int> failures{0};
        std::vector<std::thread> savers;
        for (const nn::NamedTensors &model : models)
            savers.emplace_back([&] {
                try {
                    nn::save(path, model);
                } catch (...) {
                    ++failures;
                }
            });
        for (std::thread &saver : savers) saver.join();
        CHECK(failures == 0);
        nn::NamedTensors loaded;
        REQUIRE_NOTHROW(loaded = nn::load_all(path));
        REQUIRE(loaded.size() == 1);
        const std::vector<float> values = loaded[0].second.to_vector<float>();
        const int which = static_cast<int>(values[0]) - 1;
        REQUIRE((which >= 0 && which < 4));
        CHECK(values.size() == (std::size_t{1} << (12 + 2 * which)));
        CHECK(dir.names() == std::vector<std::string>{"model.tfnn"});
    }
}

TEST_CASE("save: a symlink planted at the old temp name is not written through") {
    TempDir dir;
    const std::string path = dir.path + "/model.tfnn";
    const std::string victim = dir.path + "/victim";
    write_bytes(victim, {'k', 'e', 'e', 'p'});
    // The name the old code wrote to; and a directory entry of every other kind it might use.
    REQUIRE(symlink(victim.c_str(), (path + ".tmp." + std::to_string(getpid())).c_str()) == 0);
    nn::save(path, {{"w", ones({64})}});
    CHECK(read_bytes(victim) == Bytes{'k', 'e', 'e', 'p'});
    CHECK(nn::load_all(path)[0].second.to_vector<float>() == F(64, 1.0f));
    // Saving over a symlink replaces the link, never the file it points to.
    const std::string link = dir.path + "/link.tfnn";
    REQUIRE(symlink(victim.c_str(), link.c_str()) == 0);
    nn::save(link, {{"w", ones({2})}});
    CHECK(read_bytes(victim) == Bytes{'k', 'e', 'e', 'p'});
    CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(link)));
}

TEST_CASE("save: a killed save's temp file is removed by the next save, a live one is kept") {
    TempDir dir;
    const std::string path = dir.path + "/model.tfnn";
    const std::string stale = dir.path + "/.model.tfnn.tinyfin-tmp." + std::to_string(dead_pid()) + ".abc";
    const std::string live = dir.path + "/.model.tfnn.tinyfin-tmp." + std::to_string(getpid()) + ".def";
    const std::string other = dir.path + "/.other.tfnn.tinyfin-tmp." + std::to_string(dead_pid()) + ".ghi";
    for (const std::string &file : {stale, live, other}) write_bytes(file, Bytes(100, 7));
    nn::save(path, {{"w", ones({4})}});
    std::vector<std::string> expected = {".model.tfnn.tinyfin-tmp." + std::to_string(getpid()) + ".def",
                                         std::filesystem::path(other).filename().string(), "model.tfnn"};
    std::sort(expected.begin(), expected.end());
    CHECK(dir.names() == expected);
}

TEST_CASE("save: a failed write removes its temp file and keeps the old file") {
    TempDir dir;
    const std::string path = dir.path + "/model.tfnn";
    nn::save(path, {{"w", ones({4})}});
    const Bytes before = read_bytes(path);
    // A file size limit makes the write fail part-way (EFBIG instead of SIGXFSZ).
    struct rlimit old_limit;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    struct rlimit small = old_limit;
    small.rlim_cur = 4096;
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    CHECK_THROWS_WITH_AS(nn::save(path, {{"w", ones({1 << 16})}}), doctest::Contains(dir.path.c_str()), ValueError);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    std::signal(SIGXFSZ, old_handler);
    CHECK(read_bytes(path) == before);
    CHECK(dir.names() == std::vector<std::string>{"model.tfnn"});
}

// ---- Loading only regular files, bounded by their real size ---------------------------------

TEST_CASE("load: devices, FIFOs, directories and /proc files are refused with a ValueError") {
    nn::NamedTensors into = {{"w", zeros({1})}};
    check_load_error("/dev/zero", into, {"/dev/zero", "a character device, not a regular file"});
    check_load_error("/dev/urandom", into, {"/dev/urandom", "a character device"});
    TempDir dir;
    check_load_error(dir.path, into, {dir.path, "a directory"});
    const std::string fifo = dir.path + "/fifo.tfnn";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    check_load_error(fifo, into, {fifo, "a FIFO"});  // no writer: must not block
    check_load_error("/proc/self/mem", into, {"/proc/self/mem"});
    CHECK_THROWS_WITH_AS(nn::load_all("/dev/zero"), doctest::Contains("/dev/zero"), ValueError);
    CHECK_THROWS_WITH_AS(nn::load_all(fifo), doctest::Contains("a FIFO"), ValueError);
}

TEST_CASE("load: a 64 GiB sparse file is judged by its header, not read") {
    TempDir dir;
    const std::string path = dir.path + "/sparse.tfnn";
    const uint64_t size = uint64_t{64} << 30;
    auto make = [&](const Bytes &head) {
        write_bytes(path, head);
        if (truncate(path.c_str(), static_cast<off_t>(size)) != 0) return false;
        return true;
    };
    nn::NamedTensors into = {{"w", zeros({1})}};
    if (!make({'T', 'F', 'N', 'N'})) {
        MESSAGE("skipped: the filesystem of " << path << " holds no 64 GiB sparse file");
        return;
    }
    check_load_error(path, into, {path, "version 0"});
    // A valid header recording the real size: the first entry is malformed (a 0-byte name).
    Bytes header = {'T', 'F', 'N', 'N', 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 8; ++i) header.push_back(static_cast<uint8_t>(size >> (8 * i)));
    REQUIRE(make(header));
    check_load_error(path, into, {path, "malformed", "entry 0"});
    CHECK_THROWS_AS(nn::load_all(path), ValueError);
    // A header claiming more than the file holds.
    header[16 + 7] = 0x7f;
    REQUIRE(make(header));
    check_load_error(path, into, {path, "truncated"});
}

TEST_CASE("load_all: crafted files with a valid CRC are refused") {
    TempDir dir;
    const std::string path = dir.path + "/crafted.tfnn";
    nn::save(path, {{"flag", full({3}, true, DType::boolean)}});
    const Bytes good = read_bytes(path);
    // name length 4 at 24, name at 28, dtype at 32, rank at 36, size at 40, data bytes at 48,
    // the three bools at 56.
    REQUIRE(good.size() == 63);
    SUBCASE("a bool that is neither 0 nor 1") {
        Bytes b = good;
        b[57] = 2;
        fix_crc(b);
        write_bytes(path, b);
        CHECK_THROWS_WITH_AS(nn::load_all(path), doctest::Contains("holds the byte 2"), ValueError);
    }
    SUBCASE("a name with a control character") {
        Bytes b = good;
        b[29] = 0x1b;  // ESC: would reach terminals through error messages
        fix_crc(b);
        write_bytes(path, b);
        CHECK_THROWS_WITH_AS(nn::load_all(path), doctest::Contains("not UTF-8 text"), ValueError);
    }
    SUBCASE("a name that is not UTF-8") {
        Bytes b = good;
        b[29] = 0xc0;  // an overlong lead byte
        fix_crc(b);
        write_bytes(path, b);
        CHECK_THROWS_WITH_AS(nn::load_all(path), doctest::Contains("not UTF-8 text"), ValueError);
    }
    SUBCASE("save refuses such names too") {
        CHECK_THROWS_AS(nn::save(path, {{"a\x1b[2Jb", ones({1})}}), ValueError);
        CHECK_THROWS_AS(nn::save(path, {{std::string("a\0b", 3), ones({1})}}), ValueError);
        CHECK_NOTHROW(nn::save(path, {{"couche.poids.é", ones({1})}}));
    }
}
