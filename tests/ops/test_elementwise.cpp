// Elementwise ops against <cmath> on the host: pow, maximum, minimum, the
// comparisons and where with broadcasting; every unary op (both gelu forms,
// erf, clamp) on contiguous, transposed and step-sliced inputs; rank 0 and
// zero-size tensors.
#include "reference.hpp"

using namespace tinyfin;
using ref::D;
using ref::F;

namespace {

std::vector<bool> bools(const Tensor &t) {
    REQUIRE(t.dtype() == DType::boolean);
    return t.to_vector<bool>();
}

// Reference of a comparison with broadcasting, as bools.
std::vector<bool> compare_ref(const D &a, const Shape &sa, const D &b, const Shape &sb,
                              const std::function<bool(double, double)> &f) {
    D r = ref::binary(a, sa, b, sb, [&](double x, double y) { return f(x, y) ? 1.0 : 0.0; });
    std::vector<bool> out;
    for (double v : r) out.push_back(v != 0);
    return out;
}

struct UnaryCase {
    const char *name;
    std::function<Tensor(const Tensor &)> op;
    std::function<double(double)> reference;
    double lo, hi;  // input domain
};

std::vector<UnaryCase> unary_cases() {
    return {
        {"neg", [](const Tensor &x) { return neg(x); }, [](double x) { return -x; }, -3, 3},
        {"exp", [](const Tensor &x) { return exp(x); }, [](double x) { return std::exp(x); }, -3, 3},
        {"relu", [](const Tensor &x) { return relu(x); }, [](double x) { return x > 0 ? x : 0; }, -3, 3},
        {"abs", [](const Tensor &x) { return abs(x); }, [](double x) { return std::abs(x); }, -3, 3},
        {"log", [](const Tensor &x) { return log(x); }, [](double x) { return std::log(x); }, 0.05, 5},
        {"sqrt", [](const Tensor &x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0, 5},
        {"rsqrt", [](const Tensor &x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.05, 5},
        {"sin", [](const Tensor &x) { return sin(x); }, [](double x) { return std::sin(x); }, -4, 4},
        {"cos", [](const Tensor &x) { return cos(x); }, [](double x) { return std::cos(x); }, -4, 4},
        {"tanh", [](const Tensor &x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -4, 4},
        {"erf", [](const Tensor &x) { return erf(x); }, [](double x) { return std::erf(x); }, -3, 3},
        {"sigmoid", [](const Tensor &x) { return sigmoid(x); }, ref::sigmoid, -6, 6},
        {"gelu", [](const Tensor &x) { return gelu(x); }, ref::gelu_erf, -4, 4},
        {"gelu_tanh", [](const Tensor &x) { return gelu(x, true); }, ref::gelu_tanh, -4, 4},
        {"silu", [](const Tensor &x) { return silu(x); }, [](double x) { return x * ref::sigmoid(x); }, -6, 6},
        {"square", [](const Tensor &x) { return square(x); }, [](double x) { return x * x; }, -3, 3},
        {"clamp", [](const Tensor &x) { return clamp(x, -0.5, 0.75); },
         [](double x) { return std::min(std::max(x, -0.5), 0.75); }, -2, 2},
    };
}

}  // namespace

TEST_CASE("pow broadcasts and matches std::pow") {
    F a = ref::values(6, 1, 0.5, 2), b = ref::values(3, 2, -2, 2);
    ref::check_close(pow(ref::tensor(a, {2, 3}), ref::tensor(b, {3})),
                     ref::binary(ref::to_double(a), {2, 3}, ref::to_double(b), {3},
                                 [](double x, double y) { return std::pow(x, y); }),
                     {2, 3});
    // [4,1,3] ^ [2,1] -> [4,2,3], integral exponents
    F c = ref::values(12, 3, 0.2, 1.5);
    F e{2, 3};
    ref::check_close(pow(ref::tensor(c, {4, 1, 3}), ref::tensor(e, {2, 1})),
                     ref::binary(ref::to_double(c), {4, 1, 3}, ref::to_double(e), {2, 1},
                                 [](double x, double y) { return std::pow(x, y); }),
                     {4, 2, 3});
    // Negative bases with integral exponents, 0^0, 0^-1, a negative base with a fractional one.
    Tensor x = ref::tensor({-2, -1.5f, 3, 0, 0, -2}, {6});
    Tensor y = ref::tensor({3, 2, -1, 0, -1, 0.5f}, {6});
    ref::check_close(pow(x, y), D{-8, 2.25, 1.0 / 3, 1, INFINITY, NAN}, {6});
    // rank 0 and a scalar exponent
    CHECK(pow(scalar(2), scalar(10)).item<float>() == 1024);
    CHECK(pow(scalar(9), scalar(0.5)).rank() == 0);
    ref::check_close(pow(ref::tensor({1, 4, 9}, {3}), scalar(0.5)), D{1, 2, 3}, {3});
}

TEST_CASE("maximum and minimum broadcast, f32 and i32") {
    F a = ref::values(12, 4), b = ref::values(2, 5);
    D da = ref::to_double(a), db = ref::to_double(b);
    Tensor ta = ref::tensor(a, {4, 1, 3}), tb = ref::tensor(b, {2, 1});
    ref::check_close(maximum(ta, tb),
                     ref::binary(da, {4, 1, 3}, db, {2, 1}, [](double x, double y) { return std::max(x, y); }),
                     {4, 2, 3}, 0, 0);
    ref::check_close(minimum(ta, tb),
                     ref::binary(da, {4, 1, 3}, db, {2, 1}, [](double x, double y) { return std::min(x, y); }),
                     {4, 2, 3}, 0, 0);
    // operand order does not matter
    CHECK(maximum(tb, ta).to_vector<float>() == maximum(ta, tb).to_vector<float>());
    Tensor i = from_vector(std::vector<int32_t>{-5, 3, 7, 0}, {4});
    Tensor j = from_vector(std::vector<int32_t>{2}, {1});
    CHECK(maximum(i, j).to_vector<int32_t>() == std::vector<int32_t>{2, 3, 7, 2});
    CHECK(minimum(i, j).to_vector<int32_t>() == std::vector<int32_t>{-5, 2, 2, 0});
    CHECK(maximum(scalar(-1), scalar(2)).item<float>() == 2);
    CHECK(minimum(scalar(-1), scalar(2)).rank() == 0);
}

TEST_CASE("comparisons broadcast and return bool for f32, i32 and i64") {
    F a{1, 2, 3, 4, 5, 6}, b{2, 5, 3};
    D da = ref::to_double(a), db = ref::to_double(b);
    Tensor ta = ref::tensor(a, {2, 3}), tb = ref::tensor(b, {3});
    CHECK(bools(eq(ta, tb)) == compare_ref(da, {2, 3}, db, {3}, [](double x, double y) { return x == y; }));
    CHECK(bools(ne(ta, tb)) == compare_ref(da, {2, 3}, db, {3}, [](double x, double y) { return x != y; }));
    CHECK(bools(lt(ta, tb)) == compare_ref(da, {2, 3}, db, {3}, [](double x, double y) { return x < y; }));
    CHECK(bools(le(ta, tb)) == compare_ref(da, {2, 3}, db, {3}, [](double x, double y) { return x <= y; }));
    CHECK(bools(gt(ta, tb)) == compare_ref(da, {2, 3}, db, {3}, [](double x, double y) { return x > y; }));
    CHECK(bools(ge(ta, tb)) == compare_ref(da, {2, 3}, db, {3}, [](double x, double y) { return x >= y; }));
    CHECK(eq(ta, tb).shape() == Shape{2, 3});
    // [2,1] vs [1,3]
    Tensor col = ref::tensor({1, 3}, {2, 1}), row = ref::tensor({0, 1, 3}, {1, 3});
    CHECK(bools(lt(col, row)) == std::vector<bool>{false, false, true, false, false, false});
    // integers, including values an f32 could not tell apart
    int64_t big = (int64_t(1) << 40) + 1;
    Tensor x = from_vector(std::vector<int64_t>{big, big - 1, -3}, {3});
    Tensor y = from_vector(std::vector<int64_t>{big}, {1});
    CHECK(bools(eq(x, y)) == std::vector<bool>{true, false, false});
    CHECK(bools(lt(x, y)) == std::vector<bool>{false, true, true});
    Tensor p = from_vector(std::vector<int32_t>{-1, 0, 1}, {3});
    CHECK(bools(ge(p, from_vector(std::vector<int32_t>{0}, {}))) == std::vector<bool>{false, true, true});
    // NaN compares unequal to everything (IEEE)
    Tensor n = ref::tensor({NAN, 1}, {2});
    CHECK(bools(eq(n, n)) == std::vector<bool>{false, true});
    CHECK(bools(ne(n, n)) == std::vector<bool>{true, false});
    CHECK(bools(lt(n, scalar(2))) == std::vector<bool>{false, true});
    CHECK(bools(ge(n, scalar(2))) == std::vector<bool>{false, false});
    // rank 0
    Tensor s = gt(scalar(2), scalar(1));
    CHECK(s.rank() == 0);
    CHECK(bools(s) == std::vector<bool>{true});
}

TEST_CASE("where broadcasts condition and both branches") {
    uint8_t c[2] = {1, 0};
    Tensor cond = from_host(c, {2, 1}, DType::boolean);
    Tensor a = ref::tensor({1, 2, 3}, {3});
    Tensor out = where(cond, a, scalar(-1));
    ref::check_close(out, D{1, 2, 3, -1, -1, -1}, {2, 3}, 0, 0);
    // condition from a comparison, i32 branches
    Tensor x = from_vector(std::vector<int32_t>{5, -2, 7, -9}, {4});
    Tensor zero = from_vector(std::vector<int32_t>{0}, {});
    CHECK(where(gt(x, zero), x, zero).to_vector<int32_t>() == std::vector<int32_t>{5, 0, 7, 0});
    // [2,1,3] cond, [4,1] a, [3] b -> [2,4,3]
    F fa = ref::values(4, 7), fb = ref::values(3, 8);
    std::vector<uint8_t> raw{1, 0, 1, 0, 0, 1};
    Tensor cc = from_host(raw.data(), {2, 1, 3}, DType::boolean);
    Tensor r = where(cc, ref::tensor(fa, {4, 1}), ref::tensor(fb, {3}));
    Shape so{2, 4, 3};
    D want(24);
    for (int64_t i = 0; i < 24; ++i) {
        auto k = ref::unravel(i, so);
        want[i] = raw[ref::broadcast_index(k, {2, 1, 3})] ? fa[ref::broadcast_index(k, {4, 1})]
                                                          : fb[ref::broadcast_index(k, {3})];
    }
    ref::check_close(r, want, so, 0, 0);
    // a transposed condition
    Tensor ct = cc.reshape({2, 3}).transpose(0, 1);  // [3,2]: rows (1,0), (0,0), (1,1)
    ref::check_close(where(ct, ones({3, 2}), zeros({3, 2})), D{1, 0, 0, 0, 1, 1}, {3, 2}, 0, 0);
    CHECK(where(gt(scalar(1), scalar(0)), scalar(4), scalar(5)).item<float>() == 4);
}

TEST_CASE("every unary op matches its reference on contiguous and strided inputs") {
    for (const UnaryCase &u : unary_cases()) {
        INFO("op " << std::string(u.name));
        F v = ref::values(24, 11, u.lo, u.hi);
        D dv = ref::to_double(v);
        Tensor x = ref::tensor(v, {4, 6});
        ref::check_close(u.op(x), ref::unary(dv, u.reference), {4, 6}, 1e-6, 1e-5);
        // transposed: [6,4]
        Tensor xt = x.transpose(0, 1);
        REQUIRE_FALSE(xt.is_contiguous());
        ref::check_close(u.op(xt), ref::unary(ref::transpose2(dv, 4, 6), u.reference), {6, 4}, 1e-6, 1e-5);
        // every third column, starting at 1: columns 1 and 4
        Tensor xs = x.slice(1, 1, 6, 3);
        D sliced;
        for (int r = 0; r < 4; ++r) sliced.insert(sliced.end(), {dv[r * 6 + 1], dv[r * 6 + 4]});
        ref::check_close(u.op(xs), ref::unary(sliced, u.reference), {4, 2}, 1e-6, 1e-5);
        // an expanded (stride-0) input
        Tensor xe = ref::tensor({v[0], v[1]}, {2, 1}).expand({2, 3});
        ref::check_close(u.op(xe), ref::unary(D{dv[0], dv[0], dv[0], dv[1], dv[1], dv[1]}, u.reference), {2, 3}, 1e-6,
                         1e-5);
        // rank 0 and zero-size
        Tensor s = u.op(scalar(v[5]));
        CHECK(s.rank() == 0);
        CHECK(ref::close(s.item<float>(), u.reference(dv[5]), 1e-6, 1e-5));
        Tensor z = u.op(zeros({0, 3}));
        CHECK(z.shape() == Shape{0, 3});
        CHECK(z.dtype() == DType::f32);
    }
}

TEST_CASE("unary ops at the edges of their domains") {
    ref::check_close(log(ref::tensor({0, -1, INFINITY}, {3})), D{-INFINITY, NAN, INFINITY}, {3});
    ref::check_close(sqrt(ref::tensor({0, -1, INFINITY}, {3})), D{0, NAN, INFINITY}, {3});
    ref::check_close(rsqrt(ref::tensor({0, 4, INFINITY}, {3})), D{INFINITY, 0.5, 0}, {3});
    // saturating ops stay finite far out in the tails
    ref::check_close(sigmoid(ref::tensor({-100, 100, 0}, {3})), D{0, 1, 0.5}, {3}, 1e-6, 0);
    ref::check_close(tanh(ref::tensor({-50, 50}, {2})), D{-1, 1}, {2}, 1e-6, 0);
    ref::check_close(erf(ref::tensor({-10, 10, 0}, {3})), D{-1, 1, 0}, {3}, 1e-6, 0);
    ref::check_close(silu(ref::tensor({-100, 100}, {2})), D{0, 100}, {2}, 1e-6, 1e-6);
    ref::check_close(gelu(ref::tensor({-10, 10}, {2})), D{0, 10}, {2}, 1e-6, 1e-6);
    ref::check_close(gelu(ref::tensor({-10, 10}, {2}), true), D{0, 10}, {2}, 1e-6, 1e-6);
    // NaN passes through (relu and clamp are left out: their NaN handling is not specified)
    for (const UnaryCase &u : unary_cases()) {
        if (std::string(u.name) == "relu" || std::string(u.name) == "clamp") continue;
        INFO("op " << std::string(u.name));
        CHECK(std::isnan(u.op(scalar(NAN)).item<float>()));
    }
}

TEST_CASE("the two gelu forms are distinct functions") {
    // At x = 1.5 erf-gelu and tanh-gelu differ by about 2.3e-4: each op computes its own form.
    float x = 1.5f;
    float exact = gelu(scalar(x)).item<float>(), approx = gelu(scalar(x), true).item<float>();
    CHECK(exact == doctest::Approx(ref::gelu_erf(x)).epsilon(1e-6));
    CHECK(approx == doctest::Approx(ref::gelu_tanh(x)).epsilon(1e-6));
    CHECK(std::abs(exact - approx) > 1e-4);
}

TEST_CASE("clamp with both bounds, one open side, and a degenerate interval") {
    F v{-3, -1, -0.25f, 0, 0.5f, 2, 7};
    Tensor x = ref::tensor(v, {7});
    ref::check_close(clamp(x, -1, 1), D{-1, -1, -0.25, 0, 0.5, 1, 1}, {7}, 0, 0);
    ref::check_close(clamp(x, -INFINITY, 0), D{-3, -1, -0.25, 0, 0, 0, 0}, {7}, 0, 0);
    ref::check_close(clamp(x, 0.5, INFINITY), D{0.5, 0.5, 0.5, 0.5, 0.5, 2, 7}, {7}, 0, 0);
    ref::check_close(clamp(x, -INFINITY, INFINITY), ref::to_double(v), {7}, 0, 0);
    ref::check_close(clamp(x, 2, 2), D(7, 2.0), {7}, 0, 0);
    ref::check_close(clamp(x.slice(0, 0, 7, 2), -2, 1), D{-2, -0.25, 0.5, 1}, {4}, 0, 0);
    CHECK(clamp(scalar(5), 0, 1).item<float>() == 1);
}

TEST_CASE("binary ops and where broadcast at the maximum rank (8)") {
    Shape sa{2, 1, 2, 1, 2, 1, 2, 3}, sb{3, 2, 1, 2, 1, 1, 1};
    F a = ref::values(48, 30, 0.5, 2), b = ref::values(12, 31, -1, 1);
    D da = ref::to_double(a), db = ref::to_double(b);
    Tensor ta = ref::tensor(a, sa), tb = ref::tensor(b, sb);
    Shape so = broadcast_shapes(sa, sb);
    REQUIRE(so.size() == 8);
    ref::check_close(pow(ta, tb), ref::binary(da, sa, db, sb, [](double x, double y) { return std::pow(x, y); }), so);
    ref::check_close(minimum(ta, tb), ref::binary(da, sa, db, sb, [](double x, double y) { return std::min(x, y); }),
                     so, 0, 0);
    std::vector<bool> want;
    for (double c : ref::binary(da, sa, db, sb, [](double x, double y) { return x > y ? 1.0 : 0.0; }))
        want.push_back(c != 0);
    CHECK(bools(gt(ta, tb)) == want);
    ref::check_close(where(gt(ta, tb), ta, tb),
                     ref::binary(da, sa, db, sb, [](double x, double y) { return x > y ? x : y; }), so, 0, 0);
}

TEST_CASE("binary ops with non-contiguous operands and zero-size shapes") {
    F v = ref::values(12, 21, 0.5, 2);
    D dv = ref::to_double(v);
    Tensor m = ref::tensor(v, {3, 4});
    Tensor mt = m.transpose(0, 1);  // [4,3]
    Tensor ms = m.slice(1, 0, 4, 2);  // [3,2]: columns 0, 2
    D dt = ref::transpose2(dv, 3, 4);
    D ds{dv[0], dv[2], dv[4], dv[6], dv[8], dv[10]};
    Tensor e = ref::tensor({2, 0.5f, 3}, {3});
    ref::check_close(pow(mt, e),
                     ref::binary(dt, {4, 3}, D{2, 0.5, 3}, {3}, [](double x, double y) { return std::pow(x, y); }),
                     {4, 3});
    ref::check_close(maximum(mt, ref::tensor({1}, {1})), ref::unary(dt, [](double x) { return std::max(x, 1.0); }),
                     {4, 3}, 0, 0);
    ref::check_close(minimum(ms, ms.transpose(0, 1).transpose(0, 1)), ds, {3, 2}, 0, 0);
    CHECK(bools(gt(ms, scalar(1))) == compare_ref(ds, {3, 2}, D{1}, {}, [](double x, double y) { return x > y; }));
    // zero-size
    CHECK(pow(zeros({0, 3}), ones({3})).shape() == Shape{0, 3});
    CHECK(maximum(zeros({2, 0}), zeros({1, 0})).shape() == Shape{2, 0});
    CHECK(eq(zeros({0}), zeros({0})).dtype() == DType::boolean);
    CHECK(where(eq(zeros({0}), zeros({0})), zeros({0}), zeros({0})).numel() == 0);
}

TEST_CASE("unary and binary ops on f16 and bf16 inputs") {
    for (const ref::Half &half : ref::halves) {
        INFO(std::string(dtype_name(half.dtype)));
        for (const UnaryCase &u : unary_cases()) {
            INFO("op " << std::string(u.name));
            auto [x, dx] = ref::half_input(ref::values(12, 12, u.lo, u.hi), {3, 4}, half.dtype);
            ref::check_half(u.op(x), half, ref::unary(dx, u.reference), {3, 4});
            ref::check_half(u.op(x.transpose(0, 1)), half, ref::unary(ref::transpose2(dx, 3, 4), u.reference), {4, 3});
        }
        auto [a, da] = ref::half_input(ref::values(6, 13, 0.5, 2), {2, 3}, half.dtype);
        auto [b, db] = ref::half_input(ref::values(3, 14, -2, 2), {3}, half.dtype);
        ref::check_half(pow(a, b), half,
                        ref::binary(da, {2, 3}, db, {3}, [](double x, double y) { return std::pow(x, y); }), {2, 3});
        ref::check_half(maximum(a, b), half,
                        ref::binary(da, {2, 3}, db, {3}, [](double x, double y) { return std::max(x, y); }), {2, 3});
        ref::check_half(a * b, half, ref::binary(da, {2, 3}, db, {3}, [](double x, double y) { return x * y; }),
                        {2, 3});
        ref::check_half(a / b, half, ref::binary(da, {2, 3}, db, {3}, [](double x, double y) { return x / y; }),
                        {2, 3});
        CHECK(bools(lt(a, b)) == compare_ref(da, {2, 3}, db, {3}, [](double x, double y) { return x < y; }));
        ref::check_half(where(lt(a, b), a, b), half,
                        ref::binary(da, {2, 3}, db, {3}, [](double x, double y) { return x < y ? x : y; }), {2, 3});
    }
}
