// Every first op through the C++ API against hand-computed values: broadcasting,
// non-contiguous views, rank 0, zero-size tensors and every dtype the op takes.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "tinyfin/tinyfin.hpp"

#include "../auto_backend.hpp"

using namespace tinyfin;
using F = std::vector<float>;

static Tensor t(const F &values, const Shape &shape) { return from_vector(values, shape); }

TEST_CASE("add/sub/mul/div of same-shape f32 tensors") {
    Tensor a = t({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor b = t({6, 5, 4, 3, 2, 1}, {2, 3});
    CHECK((a + b).to_vector<float>() == F{7, 7, 7, 7, 7, 7});
    CHECK((a - b).to_vector<float>() == F{-5, -3, -1, 1, 3, 5});
    CHECK((a * b).to_vector<float>() == F{6, 10, 12, 12, 10, 6});
    CHECK((a / b).to_vector<float>() == F{1.f / 6, 2.f / 5, 3.f / 4, 4.f / 3, 5.f / 2, 6.f / 1});
    CHECK((a + b).shape() == Shape{2, 3});
}

TEST_CASE("binary ops broadcast rows, columns, scalars and leading axes") {
    Tensor a = t({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK((a + t({10, 20, 30}, {3})).to_vector<float>() == F{11, 22, 33, 14, 25, 36});
    CHECK((a * t({2, 3}, {2, 1})).to_vector<float>() == F{2, 4, 6, 12, 15, 18});
    CHECK((a - scalar(1)).to_vector<float>() == F{0, 1, 2, 3, 4, 5});
    CHECK((scalar(12) / a).to_vector<float>() == F{12, 6, 4, 3, 12.f / 5, 2});
    // [2,1] + [1,3] -> [2,3]; [4,1,3] + [2,1] -> [4,2,3]
    Tensor col = t({1, 2}, {2, 1}), row = t({10, 20, 30}, {1, 3});
    CHECK((col + row).to_vector<float>() == F{11, 21, 31, 12, 22, 32});
    Tensor c = add(zeros({4, 1, 3}), col);
    CHECK(c.shape() == Shape{4, 2, 3});
    CHECK(sum(c).item<float>() == doctest::Approx(4 * 3 * (1 + 2)));
}

TEST_CASE("binary ops on non-contiguous views") {
    Tensor a = t({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor at = a.transpose(0, 1);  // [[1,4],[2,5],[3,6]]
    CHECK_FALSE(at.is_contiguous());
    CHECK((at + t({100, 200}, {2})).to_vector<float>() == F{101, 204, 102, 205, 103, 206});
    Tensor every_other = arange(0.0, 10).slice(0, 1, 10, 2);  // 1 3 5 7 9
    CHECK((every_other * every_other).to_vector<float>() == F{1, 9, 25, 49, 81});
    Tensor x = arange(0.0, 24).reshape({2, 3, 4}).permute({2, 0, 1});  // [4,2,3]
    Tensor y = x - x.contiguous();
    CHECK(y.to_vector<float>() == F(24, 0.f));
}

TEST_CASE("rank-0 and zero-size tensors") {
    Tensor s = scalar(3) * scalar(4);
    CHECK(s.rank() == 0);
    CHECK(s.numel() == 1);
    CHECK(s.item<float>() == 12);
    Tensor z = zeros({0, 3});
    CHECK((z + z).shape() == Shape{0, 3});
    CHECK((z + z).numel() == 0);
    CHECK((z + t({1, 2, 3}, {3})).shape() == Shape{0, 3});
    CHECK(sum(z).item<float>() == 0);
    CHECK(sum(z, {0}).to_vector<float>() == F{0, 0, 0});
    CHECK(sum(z, {1}).shape() == Shape{0});
    CHECK(matmul(zeros({2, 0}), zeros({0, 3})).to_vector<float>() == F(6, 0.f));
    CHECK(exp(z).numel() == 0);
    CHECK(z.contiguous().numel() == 0);
}

TEST_CASE("integer dtypes through binary ops, including division semantics") {
    std::vector<int32_t> a{7, -7, 9, 0}, b{2, 2, -4, 5};
    Tensor x = from_vector(a, {4}), y = from_vector(b, {4});
    CHECK((x + y).to_vector<int32_t>() == std::vector<int32_t>{9, -5, 5, 5});
    CHECK((x * y).to_vector<int32_t>() == std::vector<int32_t>{14, -14, -36, 0});
    // Integer division truncates toward zero, like C.
    CHECK((x / y).to_vector<int32_t>() == std::vector<int32_t>{3, -3, -2, 0});
    std::vector<int64_t> big{int64_t(1) << 40, 5};
    Tensor z = from_vector(big, {2});
    CHECK((z + z).to_vector<int64_t>() == std::vector<int64_t>{int64_t(1) << 41, 10});
    CHECK(neg(z).to_vector<int64_t>() == std::vector<int64_t>{-(int64_t(1) << 40), -5});
}

TEST_CASE("integer division by zero is a ValueError, not a crash") {
    Tensor x = from_vector(std::vector<int32_t>{1, 2}, {2});
    Tensor y = from_vector(std::vector<int32_t>{1, 0}, {2});
    CHECK_THROWS_AS(x / y, ValueError);
    CHECK((x / x).to_vector<int32_t>() == std::vector<int32_t>{1, 1});  // still working
}

TEST_CASE("neg, exp and relu") {
    Tensor a = t({-2, -0.5f, 0, 0.5f, 2}, {5});
    CHECK(neg(a).to_vector<float>() == F{2, 0.5f, 0, -0.5f, -2});
    CHECK(relu(a).to_vector<float>() == F{0, 0, 0, 0.5f, 2});
    F e = exp(a).to_vector<float>();
    for (int i = 0; i < 5; ++i) CHECK(e[i] == doctest::Approx(std::exp(a.to_vector<float>()[i])));
    CHECK(std::isinf(exp(scalar(1000)).item<float>()));
    CHECK(exp(scalar(-1000)).item<float>() == 0);
    Tensor m = t({-1, 2, -3, 4}, {2, 2}).transpose(0, 1);
    CHECK(relu(m).to_vector<float>() == F{0, 0, 2, 4});
    CHECK(relu(from_vector(std::vector<int32_t>{-3, 3}, {2})).to_vector<int32_t>() == std::vector<int32_t>{0, 3});
}

TEST_CASE("sum over axes with and without keepdim") {
    Tensor a = arange(1.0, 7).reshape({2, 3});  // [[1,2,3],[4,5,6]]
    CHECK(sum(a).item<float>() == 21);
    CHECK(sum(a).rank() == 0);
    CHECK(sum(a, {0}).to_vector<float>() == F{5, 7, 9});
    CHECK(sum(a, {1}).to_vector<float>() == F{6, 15});
    CHECK(sum(a, {-1}, true).shape() == Shape{2, 1});
    CHECK(sum(a, {0, 1}, true).shape() == Shape{1, 1});
    CHECK(sum(a.transpose(0, 1), {1}).to_vector<float>() == F{5, 7, 9});
    Tensor b = arange(0.0, 24).reshape({2, 3, 4});
    // Axes 0 and 2: for j, sum over i,k of (12 i + 4 j + k) = 2*4*4j + 4*12 + 2*6
    CHECK(sum(b, {0, 2}).to_vector<float>() == F{60, 92, 124});
    CHECK(sum(scalar(5)).item<float>() == 5);
    CHECK(sum(from_vector(std::vector<int64_t>{1, 2, 3}, {3})).item<int64_t>() == 6);
}

TEST_CASE("matmul: 2-D, 1-D, batched with broadcast batch dims, transposed views") {
    Tensor a = arange(1.0, 7).reshape({2, 3});  // [[1,2,3],[4,5,6]]
    Tensor b = arange(1.0, 7).reshape({3, 2});  // [[1,2],[3,4],[5,6]]
    CHECK(matmul(a, b).to_vector<float>() == F{22, 28, 49, 64});
    CHECK(matmul(a, b).shape() == Shape{2, 2});
    // a @ a^T through a transposed view, no copy needed by the caller
    CHECK(matmul(a, a.transpose(0, 1)).to_vector<float>() == F{14, 32, 32, 77});
    Tensor v = t({1, 0, -1}, {3});
    CHECK(matmul(a, v).to_vector<float>() == F{-2, -2});
    CHECK(matmul(a, v).shape() == Shape{2});
    CHECK(matmul(t({1, 1}, {2}), a).to_vector<float>() == F{5, 7, 9});
    CHECK(matmul(v, v).item<float>() == 2);
    // [2,2,3] x [3,2] (batch broadcast) -> [2,2,2]; batch 1 is a scaled copy of batch 0
    Tensor batch = add(a.reshape({1, 2, 3}), zeros({2, 1, 1}));
    batch = batch * t({1, 2}, {2, 1, 1});
    Tensor out = matmul(batch, b);
    CHECK(out.shape() == Shape{2, 2, 2});
    CHECK(out.to_vector<float>() == F{22, 28, 49, 64, 44, 56, 98, 128});
    // [3,1,2,3] x [2,3,4] -> [3,2,2,4]
    Tensor c = matmul(ones({3, 1, 2, 3}), ones({2, 3, 4}));
    CHECK(c.shape() == Shape{3, 2, 2, 4});
    CHECK(c.to_vector<float>() == F(48, 3.f));
}

TEST_CASE("matmul checks inner dimensions") {
    CHECK_THROWS_AS(matmul(zeros({2, 3}), zeros({4, 5})), ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 3}), zeros({4, 5})), doctest::Contains("inner dimensions 3 and 4 differ"),
                         ShapeError);
    CHECK_THROWS_AS(matmul(zeros({2, 2, 3}), zeros({3, 3, 2})), ShapeError);  // batch 2 vs 3
    CHECK_THROWS_AS(matmul(scalar(1), zeros({2})), ShapeError);
}

TEST_CASE("contiguous copies strided views in row-major order") {
    Tensor a = arange(0.0, 12).reshape({3, 4});
    Tensor c = a.transpose(0, 1).contiguous();
    CHECK(c.is_contiguous());
    CHECK(c.to_vector<float>() == F{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
    CHECK(a.contiguous().impl() == a.impl());  // already contiguous: same tensor
    Tensor s = a.slice(1, 1, 4, 2).contiguous();  // columns 1 and 3
    CHECK(s.to_vector<float>() == F{1, 3, 5, 7, 9, 11});
    Tensor e = t({1, 2}, {2, 1}).expand({2, 3}).contiguous();
    CHECK(e.to_vector<float>() == F{1, 1, 1, 2, 2, 2});
}

TEST_CASE("cast between all dtypes") {
    Tensor f = t({-2.7f, -0.5f, 0, 1.5f, 3.9f}, {5});
    CHECK(cast(f, DType::i32).to_vector<int32_t>() == std::vector<int32_t>{-2, 0, 0, 1, 3});
    CHECK(cast(f, DType::i64).to_vector<int64_t>() == std::vector<int64_t>{-2, 0, 0, 1, 3});
    CHECK(cast(f, DType::boolean).to_vector<bool>() == std::vector<bool>{true, true, false, true, true});
    // f16 and bf16 hold these values exactly
    Tensor g = t({-2, 0.5f, 0, 1.5f, 1024}, {5});
    CHECK(cast(cast(g, DType::f16), DType::f32).to_vector<float>() == g.to_vector<float>());
    CHECK(cast(cast(g, DType::bf16), DType::f32).to_vector<float>() == g.to_vector<float>());
    // bf16 keeps 8 mantissa bits: 1 + 2^-9 rounds to 1
    CHECK(cast(cast(scalar(1.0f + 1.0f / 512), DType::bf16), DType::f32).item<float>() == 1.0f);
    // f16 overflows to inf above 65504
    CHECK(std::isinf(cast(cast(scalar(70000), DType::f16), DType::f32).item<float>()));
    Tensor i = from_vector(std::vector<int32_t>{-1, 0, 7}, {3});
    CHECK(cast(i, DType::f32).to_vector<float>() == F{-1, 0, 7});
    CHECK(cast(i, DType::boolean).to_vector<bool>() == std::vector<bool>{true, false, true});
    CHECK(cast(cast(i, DType::boolean), DType::i64).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
    CHECK(cast(i, DType::i32).impl() == i.impl());  // same dtype: no copy
    // a strided source
    CHECK(cast(arange(0.0, 6).slice(0, 0, 6, 3), DType::i32).to_vector<int32_t>() == std::vector<int32_t>{0, 3});
}

TEST_CASE("factories: full, zeros, ones, arange, from_host, rand, randn") {
    CHECK(full({2, 2}, 2.5).to_vector<float>() == F{2.5f, 2.5f, 2.5f, 2.5f});
    CHECK(zeros({3}, DType::i64).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
    CHECK(ones({2}, DType::boolean).to_vector<bool>() == std::vector<bool>{true, true});
    CHECK(full({2}, -3, DType::i32).to_vector<int32_t>() == std::vector<int32_t>{-3, -3});
    CHECK(arange(0.0, 5).to_vector<float>() == F{0, 1, 2, 3, 4});
    CHECK(arange(1, 2, 0.25).to_vector<float>() == F{1, 1.25f, 1.5f, 1.75f});
    CHECK(arange(5, 0, -2, DType::i32).to_vector<int32_t>() == std::vector<int32_t>{5, 3, 1});
    CHECK(arange(3.0, 3).numel() == 0);
    uint8_t raw[3] = {1, 0, 1};
    CHECK(from_host(raw, {3}, DType::boolean).to_vector<bool>() == std::vector<bool>{true, false, true});

    Tensor r1 = rand({1000}, 42), r2 = rand({1000}, 42), r3 = rand({1000}, 43);
    CHECK(r1.to_vector<float>() == r2.to_vector<float>());
    CHECK(r1.to_vector<float>() != r3.to_vector<float>());
    F r = r1.to_vector<float>();
    for (float v : r) REQUIRE((v >= 0 && v < 1));
    double mean = sum(r1).item<float>() / 1000.0;
    CHECK(mean == doctest::Approx(0.5).epsilon(0.1));
    F n = randn({10000}, 7).to_vector<float>();
    double m = 0, v = 0;
    for (float x : n) m += x;
    m /= n.size();
    for (float x : n) v += (x - m) * (x - m);
    v /= n.size();
    CHECK(std::abs(m) < 0.05);
    CHECK(v == doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("stats count ops per backend and allocations") {
    reset_stats();
    Tensor a = ones({4}, DType::f32, Device{"cpu", 0});
    Tensor b = a + a;
    Stats s = stats();
    const Stats::Backend *cpu = s.backend("cpu");
    REQUIRE(cpu != nullptr);
    CHECK(cpu->ops == 2);  // fill, add
    CHECK(cpu->allocations == 2);
    CHECK(cpu->bytes_allocated == 32);
    CHECK(s.total_fallbacks == 0);
    CHECK(cpu->bytes_to_host == 0);  // host memory: nothing moves
}

TEST_CASE("backend selection from C++") {
    const std::string automatic = test_support::auto_backend();
    CHECK(backend_name() == automatic);
    CHECK(default_device() == Device{automatic, 0});
    CHECK(available_backends().back() == "cpu");
    CHECK_FALSE(set_backend("no-such-backend"));  // nothing usable listed: cpu remains
    CHECK(backend_name() == "cpu");
    CHECK(set_backend("cpu"));
    CHECK(backend_name() == "cpu");
    CHECK(default_device().str() == "cpu");
    CHECK(Device::parse("cpu:0") == Device{"cpu", 0});
    CHECK_THROWS_AS(Device::parse("cpu:1"), DeviceError);
    CHECK_THROWS_AS(Device::parse("nosuch:0"), DeviceError);
    CHECK_THROWS_AS(Device::parse("cpu:x"), DeviceError);
    Tensor a = ones({2});
    CHECK(a.to("cpu").impl() == a.impl());
    CHECK(set_backend("auto"));
    CHECK(backend_name() == automatic);
}

TEST_CASE("comparisons with a scalar, both orders, against the comparison in double") {
    using Cmp = Tensor (*)(const Tensor &, double);
    using Rcmp = Tensor (*)(double, const Tensor &);
    struct Form {
        const char *name;
        Cmp tensor_first;
        Rcmp scalar_first;
        bool (*holds)(double, double);
    };
    const Form forms[] = {
        {"eq", eq, eq, [](double x, double s) { return x == s; }},
        {"ne", ne, ne, [](double x, double s) { return x != s; }},
        {"lt", lt, lt, [](double x, double s) { return x < s; }},
        {"le", le, le, [](double x, double s) { return x <= s; }},
        {"gt", gt, gt, [](double x, double s) { return x > s; }},
        {"ge", ge, ge, [](double x, double s) { return x >= s; }},
    };
    // x OP s (tensor first) and s OP x (scalar first) for every element of x.
    auto check = [&](const Tensor &x, const std::vector<double> &values, double s, double s_in_dtype) {
        for (const Form &f : forms) {
            const std::string name = f.name;
            CAPTURE(name);
            CAPTURE(s);
            std::vector<bool> want, want_mirrored;
            for (double v : values) {
                want.push_back(f.holds(v, s_in_dtype));
                want_mirrored.push_back(f.holds(s_in_dtype, v));
            }
            Tensor got = f.tensor_first(x, s);
            CHECK(got.dtype() == DType::boolean);
            CHECK(got.shape() == x.shape());
            CHECK(got.to_vector<bool>() == want);
            CHECK(f.scalar_first(s, x).to_vector<bool>() == want_mirrored);
        }
    };
    SUBCASE("f32: the scalar rounded to f32") {
        const F vf{-1, 0, 0.5, 0.25, 2, -0.0f, 1e30f};
        const std::vector<double> v(vf.begin(), vf.end());
        Tensor x = from_vector(vf, {7});
        for (double s : {0.5, 0.0, -1.0, 2.0, 0.1, 1e30}) check(x, v, s, static_cast<double>(static_cast<float>(s)));
        check(x, v, NAN, NAN);
    }
    SUBCASE("bf16: the scalar rounded to bf16 (0.1 is 0.10009765625 there)") {
        const std::vector<double> v{0.1000976562500, 0.099609375, -3, 0.5};
        Tensor x = cast(from_vector(F(v.begin(), v.end()), {4}), DType::bf16);
        check(x, v, 0.1, 0.10009765625);
        check(x, v, 0.5, 0.5);
    }
    SUBCASE("i32 and i64: the scalar's exact value, fractions and out-of-range values included") {
        const std::vector<double> v{-3, -1, 0, 1, 2, 2147483647, -2147483648.0};
        Tensor x32 = from_vector(std::vector<int32_t>{-3, -1, 0, 1, 2, 2147483647, INT32_MIN}, {7});
        Tensor x64 = from_vector(std::vector<int64_t>{-3, -1, 0, 1, 2, 2147483647, INT32_MIN}, {7});
        for (double s : {0.5, -0.5, 1.0, 2.0, -3.0, 1.5, 3e9, -3e9, 2147483647.0, 2147483647.5, -2147483648.5}) {
            check(x32, v, s, s);
            check(x64, v, s, s);
        }
        check(x32, v, NAN, NAN);
        const std::vector<double> big{-9223372036854775808.0, 0, 4611686018427387904.0};
        Tensor xbig = from_vector(std::vector<int64_t>{INT64_MIN, 0, int64_t(1) << 62}, {3});
        for (double s : {9223372036854775808.0, -9223372036854775808.0, 4611686018427387904.0, 1e19, -1e19})
            check(xbig, big, s, s);
    }
    SUBCASE("bool: false and true against 0.5, 1, 2") {
        Tensor b = cast(from_vector(F{0, 1}, {2}), DType::boolean);
        for (double s : {0.5, 1.0, 0.0, 2.0, -1.0}) check(b, {0, 1}, s, s);
    }
    // The form from the issue compiles and selects elements.
    Tensor x = t({0.25f, 0.75f, 0.5f}, {3});
    CHECK(where(gt(x, 0.5), x, 0.0).to_vector<float>() == F{0, 0.75f, 0});
}
