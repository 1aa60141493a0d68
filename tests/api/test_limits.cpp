// Sizes at the edge of 64 bits (issue 15, item 10): every call either gives the right answer or
// raises a typed error naming the problem, in bounded time; nothing wraps silently and nothing
// escapes as std::bad_alloc. Runs on the default backend and, for set_grad, across backends.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

constexpr int64_t big = int64_t{1} << 62;
constexpr int64_t max64 = std::numeric_limits<int64_t>::max();

template <typename E, typename F>
std::string message_of(F &&call) {
    try {
        call();
    } catch (const E &e) {
        return e.what();
    }
    FAIL("no exception of the expected type");
    return {};
}

std::string temp_path(const char *name) { return "/tmp/tinyfin-limits-" + std::to_string(::getpid()) + "-" + name; }

}  // namespace

TEST_CASE("split refuses sizes whose sum overflows") {
    Tensor a = arange(0, 5);
    std::string what = message_of<ShapeError>([&] { split(a, {max64, max64, 7}); });
    CHECK(what.find("split") != std::string::npos);
    CHECK(what.find("64 bits") != std::string::npos);
    // Sums that fit still work.
    std::vector<Tensor> pieces = split(a, {2, 3});
    CHECK(pieces[1].to_vector<float>() == std::vector<float>{2, 3, 4});
}

TEST_CASE("nbytes of a huge broadcast view is right or raises") {
    Tensor v = ones({1}).expand({big});
    CHECK(v.numel() == big);
    std::string what = message_of<ShapeError>([&] { (void)v.nbytes(); });
    CHECK(what.find("2^64 bytes") != std::string::npos);
    CHECK(ones({1}).expand({int64_t{1} << 40}).nbytes() == (std::size_t{4} << 40));
    CHECK(ones({1}, DType::i64).expand({int64_t{1} << 60}).nbytes() == (std::size_t{8} << 60));
}

TEST_CASE("saving a huge broadcast view refuses with a typed error and keeps the old file") {
    std::string path = temp_path("view.tfnn");
    nn::save(path, {{"w", ones({2})}});
    // Beyond what a file holds (load refuses more than 2^48 elements).
    std::string what = message_of<ValueError>([&] { nn::save(path, {{"w", ones({1}).expand({big})}}); });
    CHECK(what.find("'w'") != std::string::npos);
    CHECK(what.find("2^48") != std::string::npos);
    // Within the format but beyond memory: 4 TiB.
    what = message_of<OutOfMemoryError>([&] { nn::save(path, {{"w", ones({1}).expand({int64_t{1} << 40})}}); });
    CHECK(what.find("host memory") != std::string::npos);
    // The earlier file is intact.
    nn::NamedTensors back = nn::load_all(path);
    REQUIRE(back.size() == 1);
    CHECK(back[0].second.to_vector<float>() == std::vector<float>{1, 1});
    // A small broadcast view saves its values densely.
    nn::save(path, {{"v", from_vector(std::vector<float>{1, 2}, {1, 2}).expand({3, 2})}});
    back = nn::load_all(path);
    REQUIRE(back.size() == 1);
    CHECK(back[0].second.shape() == Shape{3, 2});
    CHECK(back[0].second.to_vector<float>() == std::vector<float>{1, 2, 1, 2, 1, 2});
    std::remove(path.c_str());
}

TEST_CASE("arange raises instead of wrapping past the dtype's range") {
    std::string what = message_of<ValueError>([] { arange(2147483640.0, 2147483650.0, 1, DType::i32); });
    CHECK(what.find("i32") != std::string::npos);
    CHECK_THROWS_AS(arange(-2147483650.0, -2147483640.0, 1, DType::i32), ValueError);
    CHECK_THROWS_AS(arange(9.3e18, 9.4e18, 1e16, DType::i64), ValueError);
    // Right up to the edge is fine.
    Tensor edge = arange(2147483645.0, 2147483648.0, 1, DType::i32);
    CHECK(edge.to_vector<int32_t>() == std::vector<int32_t>{2147483645, 2147483646, 2147483647});
    Tensor wide = arange(2147483646.0, 2147483650.0, 1, DType::i64);
    CHECK(wide.to_vector<int64_t>() == std::vector<int64_t>{2147483646, 2147483647, 2147483648, 2147483649});
}

TEST_CASE("an empty tensor with a huge axis is a valid tensor") {
    for (DType dtype : {DType::f32, DType::i32, DType::i64, DType::boolean}) {
        CAPTURE(dtype_name(dtype));
        Tensor z = zeros({0, big}, dtype);
        CHECK(z.numel() == 0);
        CHECK(z.nbytes() == 0);
        CHECK(z.shape() == Shape{0, big});
        Tensor t = ones({big, 0}, dtype);
        CHECK(t.numel() == 0);
        CHECK(t.shape() == Shape{big, 0});
    }
    // On every usable backend, and through ops that read it.
    for (const PluginReport &plugin : report().plugins) {
        if (!plugin.initialised) continue;
        CAPTURE(plugin.name);
        const Device device{plugin.name, 0};
        Tensor z = zeros({0, big}, DType::f32, device);
        CHECK(z.device() == device);
        CHECK(z.to_vector<float>().empty());
        CHECK(sum(z).item<float>() == 0.0f);
        CHECK(sum(z, {1}).shape() == Shape{0});
        CHECK(add(z, z).numel() == 0);
        CHECK(z.transpose(0, 1).contiguous().shape() == Shape{big, 0});
    }
}

TEST_CASE("reducing an enormous broadcast view ends at once with a clear error") {
    std::string what = message_of<ValueError>([] { sum(ones({1}).expand({max64})); });
    CHECK(what.find("sum") != std::string::npos);
    CHECK(what.find("2^40") != std::string::npos);
    CHECK_THROWS_AS(mean(ones({1}).expand({max64})), ValueError);
    CHECK_THROWS_AS(argmax(ones({1}).expand({max64}), 0), ValueError);
    CHECK_THROWS_AS(matmul(ones({1, 1}).expand({1, big}), ones({1, 1}).expand({big, 1})), ValueError);
    // Small broadcast views still reduce normally.
    CHECK(sum(ones({3}).expand({4, 3})).item<float>() == 12.0f);
}

TEST_CASE("set_grad refuses a gradient of another shape, dtype or device") {
    Tensor w = zeros({2, 3}).requires_grad_();
    CHECK_THROWS_AS(w.set_grad(zeros({3, 2})), ShapeError);
    std::string what = message_of<DTypeError>([&] { w.set_grad(zeros({2, 3}, DType::i32)); });
    CHECK(what.find("i32") != std::string::npos);
    CHECK_FALSE(w.grad().defined());
    w.set_grad(ones({2, 3}));
    CHECK(w.grad().to_vector<float>() == std::vector<float>(6, 1.0f));

    // Another device: every usable backend other than w's.
    int others = 0;
    for (const PluginReport &plugin : report().plugins) {
        if (!plugin.initialised || plugin.name == w.device().backend) continue;
        ++others;
        CAPTURE(plugin.name);
        Tensor g = ones({2, 3}, DType::f32, Device{plugin.name, 0});
        CHECK_THROWS_AS(w.set_grad(g), DeviceError);
        Tensor v = zeros({2, 3}, DType::f32, Device{plugin.name, 0}).requires_grad_();
        CHECK_THROWS_AS(v.set_grad(ones({2, 3})), DeviceError);
    }
    MESSAGE("set_grad device check ran against " << others << " other backend(s)");
}
