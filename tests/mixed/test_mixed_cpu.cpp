// f16 and bf16 on the cpu plugin through the C++ API:
//   - conversions (cast, the staging every f16/bf16 kernel reads through) against an
//     independent host rounding in double, over every 16-bit pattern and a spread of f32 ones,
//     dense and strided (the vectorised and the element-by-element paths);
//   - matmul: exactly the f32 product of the converted operands rounded once (the portable path),
//     and within the stated tolerance of a double reference;
//   - the other op families in f16/bf16 against the same op in f32 on the same (rounded) inputs,
//     within the tolerances of docs/numerics.md.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "../ops/reference.hpp"
#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

const Device cpu{"cpu", 0};

// Round-to-nearest-even of x (a finite double) to a binary format with `bits` significand bits
// (implicit one included), minimum normal exponent emin and largest finite value max: plain
// double arithmetic, no bit tricks, so it is independent of the plugin's code.
double round_format(double x, int bits, int emin, double max) {
    if (x == 0 || std::isnan(x) || std::isinf(x)) return x;
    int e = 0;
    std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
    const int exponent = std::max(e - 1, emin);
    const double quantum = std::ldexp(1.0, exponent - (bits - 1));
    const double r = std::nearbyint(x / quantum) * quantum;  // exact: a power-of-two scaling
    if (std::fabs(r) > max) return std::copysign(INFINITY, x);
    return r;
}
double to_bf16(double x) { return round_format(x, 8, -126, 0x1.fep127); }
double to_f16(double x) { return round_format(x, 11, -14, 65504.0); }

float bits_f(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

std::vector<float> spread_of_floats() {
    std::vector<float> v;
    std::mt19937 rng(7);
    for (int i = 0; i < 200000; ++i) v.push_back(bits_f(static_cast<uint32_t>(rng())));
    // Ties and near-ties at both formats' rounding points, subnormals, overflow edges, specials.
    for (uint32_t base : {0x3f800000u, 0x477fe000u, 0x477ff000u, 0x38800000u, 0x33800000u, 0x7f7f0000u, 0x00010000u})
        for (uint32_t d = 0; d < 0x20000; d += 0x7ff) {
            v.push_back(bits_f(base + d));
            v.push_back(bits_f((base + d) | 0x80000000u));
        }
    for (float s : {0.0f, -0.0f, INFINITY, -INFINITY, 65504.0f, 65520.0f, 65519.99f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f,
                    std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()})
        v.push_back(s);
    return v;
}

void check_cast_from_f32(DType dtype, double (*round)(double)) {
    std::vector<float> x = spread_of_floats();
    // NaNs aside: checked separately (any NaN must stay NaN).
    for (float &f : x)
        if (std::isnan(f)) f = 1.5f;
    const auto n = static_cast<int64_t>(x.size());
    Tensor t = from_vector(x, {n}, cpu);
    // Dense (vectorised runs) and a strided view (one element at a time).
    for (bool strided : {false, true}) {
        CAPTURE(strided);
        Tensor src = strided ? stack({t, t}, 1).slice(1, 0, 1) : t.view({n, 1});
        std::vector<float> g = cast(src, dtype).to(DType::f32).to_vector<float>();
        int bad = 0;
        for (int64_t i = 0; i < n && bad < 5; ++i) {
            const double want = round(static_cast<double>(x[i]));
            if (static_cast<double>(g[i]) != want || std::signbit(g[i]) != std::signbit(want)) {
                ++bad;
                FAIL_CHECK("x = " << x[i] << ": got " << g[i] << ", want " << want);
            }
        }
    }
}

}  // namespace

TEST_CASE("cast f32 -> bf16 and f32 -> f16 round to nearest even once, dense and strided") {
    check_cast_from_f32(DType::bf16, to_bf16);
    check_cast_from_f32(DType::f16, to_f16);
}

TEST_CASE("cast bf16/f16 -> f32 is exact for all 65536 patterns; NaN stays NaN both ways") {
    std::vector<int32_t> patterns(65536);
    for (int i = 0; i < 65536; ++i) patterns[i] = i;
    // The patterns as 16-bit elements: i32 -> the low halves through a host buffer.
    std::vector<uint16_t> raw(patterns.begin(), patterns.end());
    for (DType dtype : {DType::bf16, DType::f16}) {
        CAPTURE(dtype_name(dtype));
        Tensor h = from_host(raw.data(), {65536}, dtype, cpu);
        std::vector<float> got = h.to(DType::f32).to_vector<float>();
        for (int i = 0; i < 65536; ++i) {
            const uint16_t b = raw[i];
            double want;
            if (dtype == DType::bf16) {
                want = bits_f(uint32_t{b} << 16);
            } else {
                const int e = (b >> 10) & 0x1f, m = b & 0x3ff;
                want = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
                if (b & 0x8000) want = -want;
            }
            if (std::isnan(want)) {
                CHECK(std::isnan(got[i]));
                continue;
            }
            if (static_cast<double>(got[i]) != want)
                FAIL_CHECK("pattern " << b << ": got " << got[i] << ", want " << want);
        }
        // And back: every non-NaN pattern survives the round trip bit for bit.
        std::vector<uint16_t> back(65536);
        from_vector(got, {65536}, cpu).to(dtype).copy_to_host(back.data(), back.size() * 2);
        int mismatches = 0;
        for (int i = 0; i < 65536; ++i)
            if (!std::isnan(got[i]) && back[i] != raw[i]) ++mismatches;
        CHECK(mismatches == 0);
        Tensor nan = full({16}, NAN, DType::f32, cpu).to(dtype).to(DType::f32);
        for (float v : nan.to_vector<float>()) CHECK(std::isnan(v));
    }
}

TEST_CASE("f16/bf16 matmul: the f32 product of the converted operands, rounded once") {
    const bool dot = [] {
        for (auto &[k, v] : backend_report("cpu").features)
            if (k == "bf16_matmul") return v == "avx512bf16";
        return false;
    }();
    // Transposed operands are the layouts of a linear layer (x W^T) and its gradients (g W,
    // g^T x): their conversion follows the operand's memory order (kernels_matmul.cpp).
    struct Case {
        Shape a, b;
        bool transpose_a, transpose_b = false;
    };
    for (const Case &c :
         {Case{{7, 13}, {13, 5}, false}, Case{{65, 130}, {130, 67}, false}, Case{{3, 40, 33}, {33, 17}, false},
          Case{{2, 64, 257}, {2, 257, 31}, true}, Case{{37, 70}, {70, 45}, false, true},
          Case{{70, 37}, {37, 45}, true, true}, Case{{3, 21, 19}, {19, 26}, true, true},
          // Few rows against a transposed weight (generation's x W^T: the matvec's dot kernel),
          // K with whole 16-element steps and a tail.
          Case{{5, 300}, {300, 37}, false, true}, Case{{1, 2, 64}, {64, 9}, false, true}}) {
        for (DType dtype : {DType::bf16, DType::f16}) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(shape_str(c.a));
            CAPTURE(c.transpose_a);
            CAPTURE(c.transpose_b);
            Tensor a32 = from_vector(ref::values(ref::numel(c.a), 1), c.a, cpu);
            Tensor b32 = from_vector(ref::values(ref::numel(c.b), 2), c.b, cpu);
            Tensor a = a32.to(dtype), b = b32.to(dtype);
            if (c.transpose_a) a = a.transpose(-1, -2).contiguous().transpose(-1, -2);
            if (c.transpose_b) b = b.transpose(-1, -2).contiguous().transpose(-1, -2);
            Tensor got = matmul(a, b);
            CHECK(got.dtype() == dtype);
            std::vector<float> g = got.to(DType::f32).to_vector<float>();
            // Exact expectation of the portable path.
            std::vector<float> want =
                matmul(a.to(DType::f32), b.to(DType::f32)).to(dtype).to(DType::f32).to_vector<float>();
            // Double reference with |a||b| bound: k products each exact in f32, the f32 sums' error
            // and one final rounding of the format.
            std::vector<float> af = a.to(DType::f32).contiguous().to_vector<float>();
            std::vector<float> bf = b.to(DType::f32).contiguous().to_vector<float>();
            const int64_t k = c.b[c.b.size() - 2], n = c.b.back(), m = c.a[c.a.size() - 2];
            const int64_t batches = static_cast<int64_t>(g.size()) / (m * n);
            const double unit = dtype == DType::bf16 ? 0x1p-8 : 0x1p-11;
            const bool b_batched = c.b.size() == 3;
            for (int64_t t = 0; t < batches; ++t)
                for (int64_t i = 0; i < m; ++i)
                    for (int64_t j = 0; j < n; ++j) {
                        double exact = 0, mag = 0;
                        for (int64_t p = 0; p < k; ++p) {
                            const double x = af[(t * m + i) * k + p], y = bf[((b_batched ? t : 0) * k + p) * n + j];
                            exact += x * y;
                            mag += std::fabs(x * y);
                        }
                        const size_t o = static_cast<size_t>((t * m + i) * n + j);
                        const double bound = unit * std::fabs(exact) + k * 0x1p-23 * mag + 1e-30;
                        if (std::fabs(g[o] - exact) > bound)
                            FAIL_CHECK("out[" << o << "] = " << g[o] << ", exact " << exact << ", bound " << bound);
                        if (!dot && g[o] != want[o])
                            FAIL_CHECK("out[" << o << "] = " << g[o] << " differs from the f32 path's " << want[o]);
                    }
        }
    }
}

TEST_CASE(
    "f16/bf16 gelu, erf, exp, gelu_backward, tanh, sigmoid and silu: the f32 op on the same inputs, rounded once") {
    // Dense operands take the f32 rows on converted chunks (kernels_erf.cpp): bit for bit the f32
    // op's result rounded to the format. 1500 elements: whole chunks, a partial one, and pieces
    // for several tasks when threads split the rows. Strided operands take the element loops
    // (double, rounded once): within one unit of the format (or its smallest subnormal) of the same.
    std::vector<float> xs = ref::values(1501, 11, -7, 7);
    for (float s : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-30f, -1e-30f, 30.0f, -30.0f, 0.5f, -0.5f})
        xs.push_back(s);
    const auto n = static_cast<int64_t>(xs.size());
    const std::vector<float> dys = ref::values(static_cast<size_t>(n), 12, -3, 3);
    using Fn = std::function<Tensor(const Tensor &, const Tensor &)>;
    const std::pair<const char *, Fn> ops[] = {
        {"gelu", [](const Tensor &x, const Tensor &) { return gelu(x); }},
        {"erf", [](const Tensor &x, const Tensor &) { return erf(x); }},
        {"exp", [](const Tensor &x, const Tensor &) { return exp(x); }},
        {"gelu_backward", [](const Tensor &x, const Tensor &dy) { return gelu_backward(dy, x); }},
        {"tanh", [](const Tensor &x, const Tensor &) { return tanh(x); }},
        {"sigmoid", [](const Tensor &x, const Tensor &) { return sigmoid(x); }},
        {"silu", [](const Tensor &x, const Tensor &) { return silu(x); }},
    };
    for (DType dtype : {DType::bf16, DType::f16}) {
        for (const auto &[name, fn] : ops) {
            CAPTURE(dtype_name(dtype));
            CAPTURE(name);
            Tensor x = from_vector(xs, {n / 3, 3}, cpu).to(dtype), dy = from_vector(dys, {n / 3, 3}, cpu).to(dtype);
            std::vector<float> want =
                fn(x.to(DType::f32), dy.to(DType::f32)).to(dtype).to(DType::f32).to_vector<float>();
            std::vector<float> dense = fn(x, dy).to(DType::f32).to_vector<float>();
            // The same values through column views: not dense, so the element loops.
            Tensor xt = x.transpose(0, 1).contiguous().transpose(0, 1),
                   dyt = dy.transpose(0, 1).contiguous().transpose(0, 1);
            std::vector<float> strided = fn(xt, dyt).to(DType::f32).to_vector<float>();
            const double unit = dtype == DType::bf16 ? 0x1p-8 : 0x1p-11;
            const double tiny = dtype == DType::bf16 ? 0x1p-133 : 0x1p-24;
            REQUIRE(dense.size() == want.size());
            for (size_t i = 0; i < want.size(); ++i) {
                if (std::isnan(want[i])) {
                    CHECK(std::isnan(dense[i]));
                    CHECK(std::isnan(strided[i]));
                    continue;
                }
                if (std::memcmp(&dense[i], &want[i], sizeof(float)) != 0)
                    FAIL_CHECK("element " << i << " (x = " << xs[i] << "): dense " << dense[i] << ", want " << want[i]);
                if (!(std::fabs(strided[i] - want[i]) <= unit * std::fabs(want[i]) + tiny) && strided[i] != want[i])
                    FAIL_CHECK("element " << i << " (x = " << xs[i] << "): strided " << strided[i] << ", want "
                                          << want[i]);
            }
        }
    }
}

TEST_CASE("f16/bf16 convolution, pooling and norms: the f32 kernel on the staged operands, rounded once") {
    // These kernels stage f16/bf16 operands as f32 in the scratch arena's staging slots
    // (kernels_own.cpp) and run the f32 kernel, so each result is bit for bit the f32 op's on the
    // converted inputs, rounded once. Sizes go big, small, big and a transposed input view is
    // mixed in, so a slot reused with stale contents from an earlier call would show.
    for (DType dtype : {DType::bf16, DType::f16}) {
        for (int64_t hw : {12, 5, 9}) {
            for (bool transposed : {false, true}) {
                CAPTURE(dtype_name(dtype));
                CAPTURE(hw);
                CAPTURE(transposed);
                Tensor x = from_vector(ref::values(2 * 3 * hw * hw, 21 + hw, -2, 2), {2, 3, hw, hw}, cpu).to(dtype);
                if (transposed) x = x.transpose(2, 3).contiguous().transpose(2, 3);
                Tensor w = from_vector(ref::values(4 * 3 * 3 * 3, 22), {4, 3, 3, 3}, cpu).to(dtype);
                Tensor g = from_vector(ref::values(hw, 23, 0.5, 1.5), {hw}, cpu).to(dtype);
                Tensor h = from_vector(ref::values(hw, 24), {hw}, cpu).to(dtype);
                const auto check = [&](const char *name, const Tensor &got, const Tensor &f32_result) {
                    CAPTURE(name);
                    CHECK(got.dtype() == dtype);
                    std::vector<float> a = got.to(DType::f32).to_vector<float>();
                    std::vector<float> b = f32_result.to(dtype).to(DType::f32).to_vector<float>();
                    REQUIRE(a.size() == b.size());
                    int bad = 0;
                    for (size_t i = 0; i < a.size(); ++i)
                        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && ++bad <= 3)
                            FAIL_CHECK("element " << i << ": got " << a[i] << ", f32 op rounded " << b[i]);
                };
                const Tensor xf = x.to(DType::f32), wf = w.to(DType::f32), gf = g.to(DType::f32), hf = h.to(DType::f32);
                const auto opts = Conv2dOptions{}.padding(1);
                check("conv2d", conv2d(x, w, Tensor(), opts), conv2d(xf, wf, Tensor(), opts));
                check("max_pool2d", max_pool2d(x), max_pool2d(xf));
                check("layer_norm", layer_norm(x, 1, g, h), layer_norm(xf, 1, gf, hf));
                check("rms_norm", rms_norm(x, 1, g), rms_norm(xf, 1, gf));
            }
        }
    }
}

TEST_CASE("f16/bf16 sum and mean: the exact sum of the converted inputs, rounded once") {
    // Dense operands take the f32 blocked sums on the staged input (kernels_reduce.cpp), strided
    // ones the element loops; both accumulate in double and round once, so each result is within
    // half a unit of the format (plus the double sums' negligible error) of the exact value.
    struct Case {
        Shape shape;
        Axes axes;
    };
    for (DType dtype : {DType::bf16, DType::f16}) {
        for (const Case &c :
             {Case{{300, 7}, {0}}, Case{{5, 6, 9, 11}, {0, 2, 3}}, Case{{4, 50}, {1}}, Case{{2, 3, 40}, {0, 1, 2}}}) {
            for (bool transposed : {false, true}) {
                CAPTURE(dtype_name(dtype));
                CAPTURE(shape_str(c.shape));
                CAPTURE(transposed);
                const int64_t n = ref::numel(c.shape);
                Tensor x = from_vector(ref::values(n, 31, -1, 3), c.shape, cpu).to(dtype);
                if (transposed) x = x.transpose(0, 1).contiguous().transpose(0, 1);
                std::vector<float> xs = x.to(DType::f32).contiguous().to_vector<float>();
                for (bool is_mean : {false, true}) {
                    CAPTURE(is_mean);
                    Tensor got = is_mean ? mean(x, c.axes) : sum(x, c.axes);
                    CHECK(got.dtype() == dtype);
                    // The exact sums in double (the inputs are few and small: no rounding here).
                    uint32_t mask = 0;
                    for (int64_t a : c.axes) mask |= 1u << a;
                    std::vector<double> want(static_cast<size_t>(got.numel()), 0.0);
                    std::vector<int64_t> idx(c.shape.size(), 0);
                    int64_t reduced = 1;
                    for (size_t a = 0; a < c.shape.size(); ++a)
                        if (mask >> a & 1) reduced *= c.shape[a];
                    for (int64_t e = 0; e < n; ++e) {
                        int64_t o = 0;
                        for (size_t a = 0; a < c.shape.size(); ++a)
                            if (!(mask >> a & 1)) o = o * c.shape[a] + idx[a];
                        want[static_cast<size_t>(o)] += xs[static_cast<size_t>(e)];
                        for (int a = static_cast<int>(c.shape.size()) - 1; a >= 0; --a) {
                            if (++idx[a] < c.shape[a]) break;
                            idx[a] = 0;
                        }
                    }
                    std::vector<float> g = got.to(DType::f32).to_vector<float>();
                    const int bits = dtype == DType::bf16 ? 8 : 11;
                    for (size_t i = 0; i < g.size(); ++i) {
                        const double w = is_mean ? want[i] / static_cast<double>(reduced) : want[i];
                        int e = 0;
                        std::frexp(w, &e);
                        const double half_ulp =
                            std::max(std::ldexp(1.0, e - bits - 1), dtype == DType::bf16 ? 0x1p-134 : 0x1p-25);
                        if (!(std::fabs(g[i] - w) <= half_ulp * (1 + 1e-9)))
                            FAIL_CHECK("out[" << i << "] = " << g[i] << ", exact " << w);
                    }
                }
            }
        }
    }
}

TEST_CASE("f16/bf16 op families against the f32 op on the same inputs") {
    // The kernels compute in f32 from the converted inputs and round the result once: the
    // difference to the f32 op is the output's rounding (half a unit of the format) plus, for
    // ops that reduce, the f32 path's own ordering; 2 units of the format covers both.
    Tensor x32 = from_vector(ref::values(2 * 3 * 8 * 8, 3, -2, 2), {2, 3, 8, 8}, cpu);
    Tensor w32 = from_vector(ref::values(4 * 3 * 3 * 3, 4), {4, 3, 3, 3}, cpu);
    Tensor g32 = from_vector(ref::values(8, 5, 0.5, 1.5), {8}, cpu);
    Tensor h32 = from_vector(ref::values(8, 6), {8}, cpu);
    Tensor q32 = from_vector(ref::values(2 * 5 * 8, 7), {2, 5, 8}, cpu);
    Tensor e32 = from_vector(ref::values(10 * 8, 8), {10, 8}, cpu);
    Tensor idx = from_vector(std::vector<int64_t>{0, 3, 9, 3, 1}, {5}, cpu);
    Tensor labels = from_vector(std::vector<int64_t>{1, 7, 0, 5, 2, 3}, {6}, cpu);
    Tensor logits32 = from_vector(ref::values(6 * 8, 9, -3, 3), {6, 8}, cpu);
    using Fn = std::function<Tensor(const std::vector<Tensor> &)>;
    struct Family {
        const char *name;
        std::vector<Tensor> inputs;
        Fn fn;
    };
    const std::vector<Family> families = {
        {"exp", {x32}, [](auto &in) { return exp(in[0]); }},
        {"gelu", {x32}, [](auto &in) { return gelu(in[0]); }},
        {"sum",
         {x32},
         [](auto &in) {
             return sum(in[0], {1, 2});
         }},
        {"mean", {x32}, [](auto &in) { return mean(in[0], {-1}); }},
        {"var", {x32}, [](auto &in) { return var(in[0], {-1}); }},
        {"softmax", {x32}, [](auto &in) { return softmax(in[0], -1); }},
        {"log_softmax", {x32}, [](auto &in) { return log_softmax(in[0], 1); }},
        {"layer_norm", {x32, g32, h32}, [](auto &in) { return layer_norm(in[0], 1, in[1], in[2]); }},
        {"rms_norm", {x32, g32}, [](auto &in) { return rms_norm(in[0], 1, in[1]); }},
        {"conv2d", {x32, w32}, [](auto &in) { return conv2d(in[0], in[1], Tensor(), Conv2dOptions{}.padding(1)); }},
        {"max_pool2d", {x32}, [](auto &in) { return max_pool2d(in[0]); }},
        {"attention",
         {q32},
         [](auto &in) { return scaled_dot_product_attention(in[0], in[0], in[0], Tensor(), true); }},
        {"embedding", {e32}, [idx](auto &in) { return embedding(in[0], idx); }},
        {"cross_entropy", {logits32}, [labels](auto &in) { return cross_entropy(in[0], labels); }},
    };
    for (const Family &f : families) {
        for (DType dtype : {DType::bf16, DType::f16}) {
            CAPTURE(f.name);
            CAPTURE(dtype_name(dtype));
            std::vector<Tensor> low, rounded;
            for (const Tensor &t : f.inputs) {
                low.push_back(t.to(dtype));
                rounded.push_back(low.back().to(DType::f32));
            }
            Tensor got = f.fn(low);
            CHECK(got.dtype() == dtype);
            std::vector<float> g = got.to(DType::f32).to_vector<float>();
            std::vector<float> want = f.fn(rounded).to_vector<float>();
            REQUIRE(g.size() == want.size());
            const double unit = dtype == DType::bf16 ? 0x1p-8 : 0x1p-11;
            for (size_t i = 0; i < g.size(); ++i)
                if (std::fabs(g[i] - want[i]) > 2 * unit * std::fabs(want[i]) + 1e-6)
                    FAIL_CHECK("element " << i << ": got " << g[i] << ", f32 op gives " << want[i]);
        }
    }
}
