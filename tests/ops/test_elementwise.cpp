// Elementwise ops against <cmath> on the host: pow, maximum, minimum, the
// comparisons and where with broadcasting; every unary op (both gelu forms,
// erf, clamp) on contiguous, transposed and step-sliced inputs; rank 0 and
// zero-size tensors; then, on the backend under test, every elementwise op, cast,
// copy and fill against cpu.
#include "device_parity.hpp"
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
        {"asin", [](const Tensor &x) { return asin(x); }, [](double x) { return std::asin(x); }, -0.99, 0.99},
        {"acos", [](const Tensor &x) { return acos(x); }, [](double x) { return std::acos(x); }, -0.99, 0.99},
        {"atan", [](const Tensor &x) { return atan(x); }, [](double x) { return std::atan(x); }, -8, 8},
        {"asinh", [](const Tensor &x) { return asinh(x); }, [](double x) { return std::asinh(x); }, -8, 8},
        {"acosh", [](const Tensor &x) { return acosh(x); }, [](double x) { return std::acosh(x); }, 1, 8},
        {"atanh", [](const Tensor &x) { return atanh(x); }, [](double x) { return std::atanh(x); }, -0.99, 0.99},
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

// The inverse functions at their domains' ends, out of them, and far from 1, where a formula
// through log or sqrt would lose the relative accuracy (tiny arguments, acos near 1, acosh near 1):
// relative to float64 within a few ulp, the sign of zero kept.
TEST_CASE("inverse trigonometric and hyperbolic functions at the edges of their domains") {
    using Fn = Tensor (*)(const Tensor &);
    struct Edge {
        const char *name;
        Fn op;
        double (*reference)(double);
        F x;
    };
    const float tiny = 1e-20f, small = 3e-4f, near_one = 1 - 0x1p-20f;
    const Edge edges[] = {
        {"asin", asin, std::asin, {1, -1, 0, tiny, -small, 0.5f, -0.75f, near_one, 2, -1.5f, INFINITY}},
        {"acos", acos, std::acos, {1, -1, 0, tiny, -small, 0.5f, -0.75f, near_one, -near_one, 2, -INFINITY}},
        {"atan", atan, std::atan, {0, tiny, -small, 0.4f, -0.45f, 2.4f, -2.5f, 1e30f, INFINITY, -INFINITY}},
        {"asinh", asinh, std::asinh, {0, tiny, -small, 0.49f, -0.51f, 1499, -1501, 1e30f, INFINITY, -INFINITY}},
        {"acosh", acosh, std::acosh, {1, 1 + 0x1p-20f, 1.25f, 1.49f, 1.51f, 1e30f, INFINITY, 0.5f, 0, -2}},
        {"atanh", atanh, std::atanh, {1, -1, 0, tiny, -small, 0.49f, -0.51f, near_one, 1.5f, -INFINITY}},
    };
    for (const Edge &e : edges) {
        INFO("op " << std::string(e.name));
        const int64_t n = static_cast<int64_t>(e.x.size());
        const F got = e.op(ref::tensor(e.x, {n})).to_vector<float>();
        for (int64_t i = 0; i < n; ++i) {
            const double want = e.reference(e.x[i]);
            INFO("x = " << e.x[i] << ": got " << got[i] << ", want " << want);
            if (std::isnan(want)) {
                CHECK(std::isnan(got[i]));
            } else if (std::isinf(want) || want == 0) {
                CHECK(got[i] == want);
                CHECK(std::signbit(got[i]) == std::signbit(want));
            } else {
                CHECK(std::abs(got[i] - want) <= 2e-6 * std::abs(want));
            }
        }
    }
    // -0 keeps its sign where the function is odd.
    for (Fn odd : {Fn(asin), Fn(atan), Fn(asinh), Fn(atanh)}) CHECK(std::signbit(odd(scalar(-0.0f)).item<float>()));
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

// ---- On the backend under test (suite "device") ---------------------------------------------------
// ops-elementwise-<backend> runs these with TINYFIN_BACKEND=vulkan, opengl or opencl and no fallback: each
// op on the backend's tensors against the same op on cpu tensors (held to the host references by
// the cases above), with odd sizes, broadcasting, views, rank 0, empty tensors, every dtype the
// kernels take and special values. The cpu run leaves the suite out.

TEST_SUITE_BEGIN("device");
namespace on_device {

using namespace vt;
namespace tf = tinyfin;

using UnaryFn = Tensor (*)(const Tensor &);

TEST_CASE("elementwise: unary float ops on views and special values") {
    struct Op {
        const char *name;
        UnaryFn fn;
        double lo, hi;
        Tolerance tol;
    };
    const Op ops[] = {
        {"neg", tf::neg, -3, 3, {}},
        {"exp", tf::exp, -10, 10, {1e-6, 2e-6}},
        {"relu", tf::relu, -3, 3, {}},
        {"abs", tf::abs, -3, 3, {}},
        {"log", tf::log, 1e-3, 50, {1e-6, 2e-6}},
        {"sqrt", tf::sqrt, 0, 50, {}},
        {"rsqrt", tf::rsqrt, 1e-3, 50, {1e-6, 2e-6}},
        {"sin", tf::sin, -6, 6, {2e-6, 1e-5}},
        {"cos", tf::cos, -6, 6, {2e-6, 1e-5}},
        {"tanh", tf::tanh, -6, 6, {1e-6, 2e-6}},
        {"sigmoid", tf::sigmoid, -20, 20, {1e-6, 2e-6}},
        {"silu", tf::silu, -20, 20, {1e-6, 2e-6}},
        {"square", tf::square, -30, 30, {}},
        {"erf", tf::erf, -4, 4, {1e-6, 2e-6}},
        {"asin", tf::asin, -1, 1, {1e-6, 2e-6}},
        {"acos", tf::acos, -1, 1, {1e-6, 2e-6}},
        {"atan", tf::atan, -20, 20, {1e-6, 2e-6}},
        {"asinh", tf::asinh, -20, 20, {1e-6, 2e-6}},
        {"acosh", tf::acosh, 1, 20, {1e-6, 2e-6}},
        {"atanh", tf::atanh, -1, 1, {1e-6, 2e-6}},
        {"gelu", [](const Tensor &x) { return tf::gelu(x, false); }, -8, 8, {2e-6, 2e-6}},
        {"gelu_tanh", [](const Tensor &x) { return tf::gelu(x, true); }, -8, 8, {2e-6, 2e-6}},
    };
    for (const Op &o : ops) {
        Pair x = random({13, 29}, 11, o.lo, o.hi);
        parity(
            std::string(o.name) + " contiguous", {x}, [&](auto &t) { return o.fn(t[0]); }, o.tol);
        parity(
            std::string(o.name) + " transposed", {x}, [&](auto &t) { return o.fn(t[0].transpose(0, 1)); }, o.tol);
        parity(
            std::string(o.name) + " stepped slice", {x}, [&](auto &t) { return o.fn(t[0].slice(1, 1, 29, 3)); }, o.tol);
        parity(
            std::string(o.name) + " special values", {specials({7, 12})}, [&](auto &t) { return o.fn(t[0]); }, o.tol);
        parity(
            std::string(o.name) + " rank 0", {random({}, 3, o.lo, o.hi)}, [&](auto &t) { return o.fn(t[0]); }, o.tol);
        parity(
            std::string(o.name) + " empty", {random({0, 5}, 3)}, [&](auto &t) { return o.fn(t[0]); }, o.tol);
    }
    Pair x = specials({9, 11});
    parity("clamp", {x}, [](auto &t) { return tf::clamp(t[0], -0.75, 2.1); });
    parity("clamp open below", {x}, [](auto &t) { return tf::clamp(t[0], -INFINITY, 0.3); });
    parity("clamp min > max", {x}, [](auto &t) { return tf::clamp(t[0].transpose(0, 1), 1.0, 1.0); });
}

TEST_CASE("elementwise: binary float ops with broadcasting") {
    using BinaryFn = Tensor (*)(const Tensor &, const Tensor &);
    const std::pair<const char *, BinaryFn> ops[] = {
        {"add", tf::add}, {"sub", tf::sub},         {"mul", tf::mul},
        {"div", tf::div}, {"maximum", tf::maximum}, {"minimum", tf::minimum},
    };
    Pair a = random({5, 1, 7}, 21, -3, 3), b = random({3, 1}, 22, -3, 3), c = random({7, 5}, 23, 0.5, 3);
    Pair s = random({}, 24, 1, 2);
    for (auto [name, fn] : ops) {
        parity(std::string(name) + " [5,1,7] x [3,1]", {a, b}, [&](auto &t) { return fn(t[0], t[1]); });
        parity(std::string(name) + " transposed x scalar", {c, s},
               [&](auto &t) { return fn(t[0].transpose(0, 1), t[1]); });
        parity(std::string(name) + " special values", {specials({6, 8}), random({8}, 9, -2, 2)},
               [&](auto &t) { return fn(t[0], t[1]); });
        parity(std::string(name) + " both special", {specials({12, 12}), both(values(144, 3, -4, 4), {12, 12})},
               [&](auto &t) { return fn(t[1], t[0].transpose(0, 1)); });
    }
    // pow: positive bases anywhere; negative bases with integral exponents; C's special cases.
    parity("pow", {random({6, 9}, 31, 0.1, 4), random({9}, 32, -3, 3)}, [](auto &t) { return tf::pow(t[0], t[1]); },
           {1e-6, 1e-5});
    std::vector<float> base = {-2, -2, -0.5f, 0, -0.0f, 0, inf, -inf, qnan, 1, -1, -1, 2, 3, -3, 0.5f};
    std::vector<float> expo = {2, 3, -3, -1, -1, 0, 0.5f, 3, 0, qnan, inf, 2.5f, -inf, 2, 1, 1};
    parity("pow special cases", {both(base, {16}), both(expo, {16})}, [](auto &t) { return tf::pow(t[0], t[1]); });
    // 1 / x tells -0 (-inf) from +0 (inf).
    const Pair zeros_a = both(std::vector<float>{-0.0f, 0.0f, -0.0f}, {3}),
               zeros_b = both(std::vector<float>{0.0f, -0.0f, -0.0f}, {3});
    parity("maximum(-0, +0) is +0", {zeros_a, zeros_b},
           [](auto &t) { return tf::div(tf::scalar_like(t[0], 1), tf::maximum(t[0], t[1])); });
    parity("minimum(-0, +0) is -0", {zeros_a, zeros_b},
           [](auto &t) { return tf::div(tf::scalar_like(t[0], 1), tf::minimum(t[0], t[1])); });
}

TEST_CASE("elementwise: integer arithmetic wraps like the cpu plugin") {
    Pair a32 = integers<int32_t>({4, 9}, 41, -2000000000, 2000000000), b32 = integers<int32_t>({9}, 42, -70000, 70000);
    Pair a64 = integers<int64_t>({4, 9}, 43, -4000000000000ll, 4000000000000ll),
         b64 = integers<int64_t>({9}, 44, -7000000, 7000000);
    for (const auto &[a, b, name] : {std::tuple{a32, b32, "i32"}, std::tuple{a64, b64, "i64"}}) {
        const std::string n = name;
        parity(n + " add", {a, b}, [](auto &t) { return tf::add(t[0], t[1]); });
        parity(n + " sub", {a, b}, [](auto &t) { return tf::sub(t[1], t[0].transpose(0, 1).transpose(0, 1)); });
        parity(n + " mul", {a, b}, [](auto &t) { return tf::mul(t[0], t[1]); });
        parity(n + " maximum", {a, b}, [](auto &t) { return tf::maximum(t[0], t[1]); });
        parity(n + " minimum", {a, b}, [](auto &t) { return tf::minimum(t[0], t[1]); });
        parity(n + " neg", {a}, [](auto &t) { return tf::neg(t[0]); });
        parity(n + " abs", {a}, [](auto &t) { return tf::abs(t[0]); });
        parity(n + " relu", {a}, [](auto &t) { return tf::relu(t[0].transpose(0, 1)); });
        parity(n + " square", {a}, [](auto &t) { return tf::square(t[0]); });
    }
    std::vector<int64_t> edge = {INT64_MIN, INT64_MAX, -1, 0, 1, 4294967296ll, -4294967296ll, 4294967295ll};
    Pair e = both(edge, {8});
    parity("i64 add carries", {e, both(std::vector<int64_t>{-1, 1, 1, -1, 4294967295ll, -1, 1, 1}, {8})},
           [](auto &t) { return tf::add(t[0], t[1]); });
    parity("i64 mul low bits", {e, e}, [](auto &t) { return tf::mul(t[0], t[1]); });
    parity("i64 neg, abs of MIN", {e}, [](auto &t) { return tf::add(tf::neg(t[0]), tf::abs(t[0])); });
}

TEST_CASE("elementwise: comparisons and where on every dtype") {
    using CompareFn = Tensor (*)(const Tensor &, const Tensor &);
    const std::pair<const char *, CompareFn> ops[] = {
        {"eq", tf::eq}, {"ne", tf::ne}, {"lt", tf::lt}, {"le", tf::le}, {"gt", tf::gt}, {"ge", tf::ge},
    };
    // Small integer ranges make ties common.
    Pair f = integers<int32_t>({7, 11}, 51, -3, 3), g = integers<int32_t>({11}, 52, -3, 3);
    std::vector<std::tuple<std::string, Pair, Pair>> inputs = {
        {"f32",
         {tf::cast(f.cpu, DType::f32), tf::cast(f.vk, DType::f32)},
         {tf::cast(g.cpu, DType::f32), tf::cast(g.vk, DType::f32)}},
        {"i32", f, g},
        {"i64", integers<int64_t>({7, 11}, 53, -3000000000ll, 3000000000ll),
         integers<int64_t>({11}, 54, -3000000000ll, 3000000000ll)},
        {"bool", booleans({7, 11}, 55), booleans({11}, 56)},
        {"f32 special", specials({7, 11}), random({11}, 57, -4, 4)},
    };
    for (const auto &[dtype, a, b] : inputs) {
        for (auto [name, fn] : ops) {
            parity(std::string(name) + " " + dtype, {a, b}, [&](auto &t) { return fn(t[0], t[1]); });
            parity(std::string(name) + " " + dtype + " transposed", {a, b}, [&](auto &t) {
                return fn(t[0].transpose(0, 1), t[1].view({11, 1}));
            });
        }
    }
    // Odd sizes, so the last word of the bool output is partial, and an odd-offset bool output.
    parity("gt bool output of 13 elements", {random({13}, 58), random({13}, 59)},
           [](auto &t) { return tf::gt(t[0], t[1]); });
    Pair cond = booleans({5, 1, 9}, 60);
    parity("where f32 broadcast", {cond, random({3, 9}, 61), random({5, 3, 1}, 62)},
           [](auto &t) { return tf::where(t[0], t[1], t[2]); });
    parity("where i64",
           {cond, integers<int64_t>({9}, 63, -9, 9), integers<int64_t>({5, 1, 9}, 64, INT32_MIN, INT32_MAX)},
           [](auto &t) { return tf::where(t[0], t[1], t[2]); });
    parity("where i32 on a sliced condition",
           {booleans({6, 18}, 65), integers<int32_t>({6, 9}, 66, -9, 9), integers<int32_t>({9}, 67, -9, 9)},
           [](auto &t) { return tf::where(t[0].slice(1, 1, 18, 2), t[1], t[2]); });
    parity("where bool", {cond, booleans({9}, 68), booleans({5, 3, 9}, 69)},
           [](auto &t) { return tf::where(t[0], t[1], t[2]); });
}

TEST_CASE("elementwise: cast between every pair, contiguous copies, fill") {
    const DType dtypes[] = {DType::f32, DType::i32, DType::i64, DType::boolean};
    std::vector<float> f = values(60, 71, -3e9, 3e9);
    const float edge[] = {qnan,     inf,  -inf,  2147483648.0f, -2147483648.0f, 9.3e18f,
                          -9.3e18f, 0.5f, -0.5f, -0.0f,         16777217.0f,    1.5f};
    for (std::size_t i = 0; i < sizeof edge / sizeof edge[0]; ++i) f[i * 5] = edge[i];
    std::vector<int64_t> i64 = {INT64_MIN,
                                INT64_MAX,
                                (1ll << 53) + 1,
                                -((1ll << 40) + 3),
                                16777217,
                                -16777219,
                                0,
                                1,
                                -1,
                                (1ll << 62) + (1ll << 38) + 1,
                                3000000000ll,
                                -3000000000ll};
    const std::vector<Pair> sources = {
        both(f, {6, 10}),
        integers<int32_t>({6, 10}, 72, INT32_MIN, INT32_MAX),
        both(i64, {3, 4}),
        booleans({6, 10}, 73),
    };
    for (const Pair &src : sources) {
        for (DType to : dtypes) {
            if (to == src.cpu.dtype()) continue;
            const std::string name =
                std::string("cast ") + tf::dtype_name(src.cpu.dtype()) + " -> " + tf::dtype_name(to);
            parity(name, {src}, [&](auto &t) { return tf::cast(t[0], to); });
            parity(name + " transposed", {src}, [&](auto &t) { return tf::cast(t[0].transpose(0, 1), to); });
        }
        const std::string dt = tf::dtype_name(src.cpu.dtype());
        parity("contiguous " + dt + " transposed", {src}, [](auto &t) { return t[0].transpose(0, 1).contiguous(); });
        parity("contiguous " + dt + " stepped", {src},
               [](auto &t) { return t[0].slice(1, 1, t[0].size(1), 2).contiguous(); });
        parity("contiguous " + dt + " broadcast", {src}, [](auto &t) {
            return t[0].slice(0, 1, 2).expand({5, 1, t[0].size(1)}).contiguous();
        });
    }
    for (DType d : dtypes) {
        for (double v :
             {0.0, 1.0, -2.75, 3e9, -1e20, 7.0e-46, static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
            const std::string name = std::string("fill ") + tf::dtype_name(d) + " " + std::to_string(v);
            Tensor want = tf::full({3, 5}, v, d, cpu_device);
            Tensor got = tf::full({3, 5}, v, d, gpu_device);
            check(got, want, 0, 0, name);
        }
        check(tf::full({}, 2.5, d, gpu_device), tf::full({}, 2.5, d, cpu_device), 0, 0, "fill rank 0");
        check(tf::full({17}, 1, d, gpu_device), tf::full({17}, 1, d, cpu_device), 0, 0, "fill 17");
    }
}

TEST_CASE("elementwise: writes into strided views leave the other elements alone") {
    const DType dtypes[] = {DType::f32, DType::i32, DType::i64, DType::boolean};
    for (DType d : dtypes) {
        INFO(tf::dtype_name(d));
        // Sentinels everywhere, then a strided view of it overwritten: the gaps must survive.
        Tensor base_cpu = tf::full({7, 9}, 3, d, cpu_device), base_vk = tf::full({7, 9}, 3, d, gpu_device);
        Pair src = booleans({3, 4}, 81);
        Tensor src_cpu = tf::cast(src.cpu, d), src_vk = tf::cast(src.vk, d);
        base_cpu.slice(0, 1, 7, 2).slice(1, 2, 9, 2).assign_(src_cpu);
        base_vk.slice(0, 1, 7, 2).slice(1, 2, 9, 2).assign_(src_vk);
        check(base_vk, base_cpu, 0, 0, "assign_ into a stepped view");
        // A transposed destination and a broadcast source.
        Tensor row_cpu = tf::cast(random({1, 7}, 82, -5, 5).cpu, d);
        Tensor row_vk = tf::cast(tf::from_vector(values(7, 82, -5, 5), {1, 7}, gpu_device), d);
        base_cpu.transpose(0, 1).slice(0, 0, 5).assign_(row_cpu);
        base_vk.transpose(0, 1).slice(0, 0, 5).assign_(row_vk);
        check(base_vk, base_cpu, 0, 0, "assign_ into a transposed view");
        // Single bool bytes at odd offsets, inside words shared with their neighbours.
        base_cpu.slice(1, 3, 4).assign_(tf::full({7, 1}, 0, d, cpu_device));
        base_vk.slice(1, 3, 4).assign_(tf::full({7, 1}, 0, d, gpu_device));
        check(base_vk, base_cpu, 0, 0, "assign_ one column");
    }
}

}  // namespace on_device

TEST_SUITE_END();
