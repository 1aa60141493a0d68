// f16 and bf16 storage on the GPU plugins against the cpu plugin: conversions bit for bit
// (every f16 and bf16 pattern, f32 edge cases, integers, fills), every claimed op within a stated
// tolerance in units in the last place of the 16-bit result, stores into odd offsets and
// interleaved views (16-bit elements share a 32-bit word, so a racing store would lose one), and
// a small training step in bf16 storage. Built for vulkan and opengl like the other sources here.
#include "device_parity.hpp"

#include <bit>
#include <cstring>
#include <limits>

using namespace vt;
namespace tf = tinyfin;

namespace {

constexpr DType halves[] = {DType::f16, DType::bf16};

std::vector<uint16_t> bits16(const Tensor &t) {
    std::vector<uint16_t> out(static_cast<std::size_t>(t.numel()));
    t.contiguous().copy_to_host(out.data(), out.size() * 2);
    return out;
}

// Same bytes on both sides.
void check_bits(const Tensor &got, const Tensor &want, const std::string &what) {
    INFO(what);
    REQUIRE(got.dtype() == want.dtype());
    REQUIRE(got.shape() == want.shape());
    REQUIRE(got.device() == gpu_device);
    const std::size_t size = got.nbytes() / static_cast<std::size_t>(std::max<int64_t>(got.numel(), 1));
    std::vector<uint8_t> g(static_cast<std::size_t>(got.numel()) * size), w(g.size());
    got.contiguous().copy_to_host(g.data(), g.size());
    want.contiguous().copy_to_host(w.data(), w.size());
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < g.size(); i += size)
        if (std::memcmp(&g[i], &w[i], size) != 0 && bad++ == 0) first = i / size;
    if (bad) {
        uint64_t gv = 0, wv = 0;
        std::memcpy(&gv, &g[first * size], size);
        std::memcpy(&wv, &w[first * size], size);
        char text[160];
        std::snprintf(text, sizeof text,
                      "%zu of %lld elements differ; first at %zu: " TF_TEST_BACKEND " 0x%llx, cpu 0x%llx", bad,
                      static_cast<long long>(got.numel()), first, static_cast<unsigned long long>(gv),
                      static_cast<unsigned long long>(wv));
        FAIL_CHECK(text);
    }
}

double half_value(uint16_t b, DType d) {
    if (d == DType::bf16) return std::bit_cast<float>(uint32_t{b} << 16);
    const int e = (b >> 10) & 0x1f, m = b & 0x3ff;
    const double s = (b & 0x8000) ? -1 : 1;
    if (e == 0x1f) return m ? std::numeric_limits<double>::quiet_NaN() : s * INFINITY;
    return s * (e ? std::ldexp(1024 + m, e - 25) : std::ldexp(m, -24));
}

// Position on the number line in units in the last place (monotonic in the value).
int64_t ordinal(uint16_t b) { return (b & 0x8000) ? -static_cast<int64_t>(b & 0x7fff) : static_cast<int64_t>(b); }

// A 16-bit result against cpu's: NaN where cpu has NaN, the same infinity, else within ulps
// units in the last place or atol absolutely (results that cancel towards 0).
struct HalfTol {
    int ulps = 1;
    double atol = 0;
};

void check_half(const Tensor &got, const Tensor &want, HalfTol tol, const std::string &what) {
    INFO(what << " (" << std::string(tf::dtype_name(want.dtype())) << ")");
    REQUIRE(got.defined());
    CHECK(got.device() == gpu_device);
    REQUIRE(got.dtype() == want.dtype());
    REQUIRE(got.shape() == want.shape());
    const DType d = want.dtype();
    const std::vector<uint16_t> g = bits16(got), w = bits16(want);
    int64_t bad = 0, first = -1, worst = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const double gv = half_value(g[i], d), wv = half_value(w[i], d);
        bool ok;
        if (std::isnan(wv))
            ok = std::isnan(gv);
        else if (std::isinf(wv))
            ok = gv == wv;
        else if (std::isnan(gv) || std::isinf(gv))
            ok = false;
        else
            ok = std::llabs(ordinal(g[i]) - ordinal(w[i])) <= tol.ulps || std::abs(gv - wv) <= tol.atol;
        if (!std::isnan(wv) && !std::isnan(gv))
            worst = std::max<int64_t>(worst, std::llabs(ordinal(g[i]) - ordinal(w[i])));
        if (ok) continue;
        if (first < 0) first = static_cast<int64_t>(i);
        ++bad;
    }
    MESSAGE(what << " " << std::string(tf::dtype_name(d)) << ": max " << worst << " ulp");
    if (bad > 0)
        FAIL_CHECK(bad << " of " << g.size() << " elements differ; first at " << first << ": " TF_TEST_BACKEND " "
                       << half_value(g[first], d) << ", cpu " << half_value(w[first], d));
}

// f on cpu and on the GPU with the operands cast to dtype d first (on cpu, so both sides start
// from the same 16-bit values).
template <class F>
void half_parity(const std::string &what, DType d, const std::vector<Pair> &operands, F &&f, HalfTol tol = {}) {
    std::vector<Tensor> a, b;
    for (const Pair &p : operands) {
        const bool fl = p.cpu.dtype() == DType::f32;
        Tensor c = fl ? tf::cast(p.cpu, d) : p.cpu;
        a.push_back(c);
        b.push_back(c.to(gpu_device));
    }
    Tensor want = f(a), got = f(b);
    if (want.dtype() == DType::f16 || want.dtype() == DType::bf16)
        check_half(got, want, tol, what);
    else
        check(got, want, 0, 0, what);
}

std::vector<float> f32_edges() {
    std::vector<float> v = {
        0.0f,           -0.0f,          INFINITY,       -INFINITY,       1.0f,           -1.0f,      65504.0f,
        65519.99f,      65520.0f,       -65520.0f,      65536.0f,        1e-30f,         -1e-30f,    6.1035156e-05f,
        6.0975552e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f,  8.9406967e-08f, 1e-40f,     -1e-45f,
        3.4028235e38f,  -3.4028235e38f, 3.3961775e38f,  1.0009766f,      1.0004883f,     1.0014648f, 1.00390625f,
        1.01171875f,    0.1f,           3.14159f,       1.17549435e-38f, 1.1754942e-38f, 1e-39f};
    // NaNs with payloads, quiet and signalling, both signs.
    for (uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa5a5a5u, 0xff812345u, 0x7fffffffu})
        v.push_back(std::bit_cast<float>(b));
    // Every f16 and bf16 rounding boundary neighbourhood in a range of binades: ties and off-ties.
    for (int e = -26; e <= 17; ++e)
        for (uint32_t m :
             {0x1000u, 0x0fffu, 0x1001u, 0x3000u, 0x8000u, 0x7fffu, 0x8001u, 0x18000u, 0x7ff000u, 0x7fffffu})
            for (float s : {1.0f, -1.0f}) v.push_back(s * std::ldexp(std::bit_cast<float>(0x3f800000u | m), e));
    return v;
}

}  // namespace

TEST_CASE("mixed: conversions to and from f16 and bf16 are the cpu plugin's, bit for bit") {
    const std::vector<float> edges = f32_edges();
    const Pair f = both(edges, {static_cast<int64_t>(edges.size())});
    // Every 16-bit pattern.
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<int32_t> i32 = {0,          1,          -1,         2047,        2049,     4097,       65504,
                                65519,      65520,      -65520,     16777217,    33554435, 2147483647, -2147483647 - 1,
                                0x01018000, 0x01008000, 0x01028000, -0x01018001, 123456789};
    std::vector<int64_t> i64 = {0,
                                1,
                                -1,
                                65519,
                                65520,
                                INT64_MAX,
                                INT64_MIN,
                                (int64_t{1} << 40) + (int64_t{1} << 32),
                                (int64_t{1} << 40) + (int64_t{1} << 32) + 1,
                                (int64_t{1} << 62) + (int64_t{3} << 54),
                                -(int64_t{1} << 62) - (int64_t{1} << 54),
                                0x0101800000000000ll,
                                0x0100800000000001ll};
    const Pair ints32 = both(i32, {static_cast<int64_t>(i32.size())});
    const Pair ints64 = both(i64, {static_cast<int64_t>(i64.size())});
    const Pair flags = booleans({13}, 3);
    for (DType d : halves) {
        const std::string n = tf::dtype_name(d);
        check_bits(tf::cast(f.vk, d), tf::cast(f.cpu, d), "f32 -> " + n);
        const Tensor every_c = tf::from_host(all.data(), {65536}, d, cpu_device);
        const Tensor every_g = every_c.to(gpu_device);
        for (DType to : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean})
            check_bits(tf::cast(every_g, to), tf::cast(every_c, to),
                       n + " -> " + tf::dtype_name(to) + ", every pattern");
        check_bits(tf::cast(ints32.vk, d), tf::cast(ints32.cpu, d), "i32 -> " + n);
        check_bits(tf::cast(ints64.vk, d), tf::cast(ints64.cpu, d), "i64 -> " + n);
        check_bits(tf::cast(flags.vk, d), tf::cast(flags.cpu, d), "bool -> " + n);
        // Fills round from the double once.
        for (double v :
             {0.1, -1e-7, 65519.0, 65520.0, 1e300, -1e-300, 3.0000001, 1.00048828125, 1.0009765625 + 1e-12,
              std::numeric_limits<double>::quiet_NaN(), -double(INFINITY), 3.3961775e38, 5.9604644775390625e-08 * 1.5})
            check_bits(tf::full({3}, v, d, gpu_device), tf::full({3}, v, d, cpu_device),
                       n + " fill " + std::to_string(v));
    }
}

TEST_CASE("mixed: 16-bit stores at odd offsets and interleaved views keep their neighbours") {
    for (DType d : halves) {
        const std::string n = tf::dtype_name(d);
        // Odd counts and an odd start: the first and last words are shared with untouched elements.
        const Pair src = random({2, 333}, 7, -5, 5);
        Tensor want = tf::cast(tf::full({669}, 9.0, DType::f32, cpu_device), d);
        Tensor got = want.to(gpu_device);
        want.slice(0, 1, 334).assign_(src.cpu.slice(0, 0, 1).reshape({333}));
        got.slice(0, 1, 334).assign_(src.vk.slice(0, 0, 1).reshape({333}));
        want.slice(0, 335, 668).assign_(tf::exp(tf::cast(src.cpu.slice(0, 1, 2).reshape({333}), d)));
        got.slice(0, 335, 668).assign_(tf::exp(tf::cast(src.vk.slice(0, 1, 2).reshape({333}), d)));
        check_half(got, want, {1, 0}, n + " odd slices");
        // Every other element by one op, then the others by another: each word has two writers.
        Tensor w2 = tf::cast(tf::zeros({26, 2}, DType::f32, cpu_device), d), g2 = w2.to(gpu_device);
        const Pair a = random({26}, 8), b = random({26}, 9);
        w2.slice(1, 0, 1).reshape({26}).assign_(a.cpu);
        g2.slice(1, 0, 1).reshape({26}).assign_(a.vk);
        w2.slice(1, 1, 2).reshape({26}).assign_(b.cpu);
        g2.slice(1, 1, 2).reshape({26}).assign_(b.vk);
        check_bits(g2, w2, n + " interleaved halves");
        // One dispatch whose neighbouring elements are written by different invocations: a
        // transposed output, and binary ops into strided out= views.
        const Pair x = random({7, 9}, 10, -3, 3);
        Tensor wt = tf::cast(tf::zeros({9, 7}, DType::f32, cpu_device), d), gt = wt.to(gpu_device);
        wt.transpose(0, 1).assign_(x.cpu);
        gt.transpose(0, 1).assign_(x.vk);
        check_bits(gt, wt, n + " transposed store");
        const Tensor xa = tf::cast(x.cpu, d), xb = tf::cast(random({7, 9}, 11).cpu, d);
        Tensor wo = tf::cast(tf::full({9, 15}, -2.0, DType::f32, cpu_device), d), go = wo.to(gpu_device);
        tf::add(xa.transpose(0, 1), xb.transpose(0, 1), wo.slice(1, 1, 15, 2));
        tf::add(xa.transpose(0, 1).to(gpu_device), xb.transpose(0, 1).to(gpu_device), go.slice(1, 1, 15, 2));
        tf::mul(xa.transpose(0, 1), xb.transpose(0, 1), wo.slice(1, 0, 14, 2));
        tf::mul(xa.transpose(0, 1).to(gpu_device), xb.transpose(0, 1).to(gpu_device), go.slice(1, 0, 14, 2));
        check_bits(go, wo, n + " strided out= views");
        // The packed path: a contiguous output from an odd base takes the per-element path.
        Tensor wp = tf::cast(tf::full({1001}, 1.5, DType::f32, cpu_device), d), gp = wp.to(gpu_device);
        tf::sub(xa.reshape({63}), xb.reshape({63}), wp.slice(0, 3, 66));
        tf::sub(xa.reshape({63}).to(gpu_device), xb.reshape({63}).to(gpu_device), gp.slice(0, 3, 66));
        tf::sub(xa.reshape({63}), xb.reshape({63}), wp.slice(0, 66, 129));
        tf::sub(xa.reshape({63}).to(gpu_device), xb.reshape({63}).to(gpu_device), gp.slice(0, 66, 129));
        check_bits(gp, wp, n + " neighbouring contiguous outputs");
    }
}

TEST_CASE("mixed: elementwise, compare and where in f16 and bf16") {
    using UnaryFn = Tensor (*)(const Tensor &);
    struct Op {
        const char *name;
        UnaryFn fn;
        double lo, hi;
    };
    const Op unary[] = {
        {"neg", tf::neg, -3, 3},
        {"exp", tf::exp, -8, 8},
        {"relu", tf::relu, -3, 3},
        {"abs", tf::abs, -3, 3},
        {"log", tf::log, 1e-3, 50},
        {"sqrt", tf::sqrt, 0, 50},
        {"rsqrt", tf::rsqrt, 1e-3, 50},
        {"sin", tf::sin, -6, 6},
        {"cos", tf::cos, -6, 6},
        {"tanh", tf::tanh, -6, 6},
        {"sigmoid", tf::sigmoid, -20, 20},
        {"silu", tf::silu, -20, 20},
        {"square", tf::square, -30, 30},
        {"erf", tf::erf, -4, 4},
        {"gelu", [](const Tensor &x) { return tf::gelu(x, false); }, -8, 8},
        {"gelu_tanh", [](const Tensor &x) { return tf::gelu(x, true); }, -8, 8},
    };
    std::vector<float> sv = values(84, 5, -4, 4);
    const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 1e-30f, 88.0f, -88.0f, 0.5f, 70000.0f};
    for (std::size_t i = 0; i < sv.size(); i += 3) sv[i] = edge[(i / 3) % 12];
    const Pair special = both(sv, {7, 12});
    for (DType d : halves) {
        for (const Op &o : unary) {
            const Pair x = random({13, 29}, 11, o.lo, o.hi);
            // sin and cos near their zeros: 1 ulp of a tiny result is below the f32 difference.
            const HalfTol tol{1, 2e-6};
            half_parity(
                std::string(o.name), d, {x}, [&](auto &t) { return o.fn(t[0].transpose(0, 1)); }, tol);
            half_parity(
                std::string(o.name) + " special values", d, {special}, [&](auto &t) { return o.fn(t[0]); }, tol);
        }
        half_parity("clamp", d, {special}, [](auto &t) { return tf::clamp(t[0], -0.75, 2.1); });
        using BinaryFn = Tensor (*)(const Tensor &, const Tensor &);
        const std::pair<const char *, BinaryFn> binary[] = {
            {"add", tf::add},
            {"sub", tf::sub},
            {"mul", tf::mul},
            {"div", tf::div},
            {"maximum", tf::maximum},
            {"minimum", tf::minimum},
            {"relu_backward", tf::relu_backward},
            {"gelu_backward", tf::gelu_backward},
        };
        const Pair a = random({5, 1, 7}, 21, -3, 3), b = random({3, 1}, 22, -3, 3);
        for (auto [name, fn] : binary) {
            half_parity(std::string(name) + " broadcast", d, {a, b}, [&](auto &t) { return fn(t[0], t[1]); });
            half_parity(std::string(name) + " special", d, {special, random({12}, 9, -2, 2)},
                        [&](auto &t) { return fn(t[0], t[1]); });
        }
        half_parity("pow", d, {random({6, 9}, 31, 0.1, 4), random({9}, 32, -3, 3)},
                    [](auto &t) { return tf::pow(t[0], t[1]); }, {2, 0});
        using CmpFn = Tensor (*)(const Tensor &, const Tensor &);
        const std::pair<const char *, CmpFn> cmps[] = {{"eq", tf::eq}, {"ne", tf::ne}, {"lt", tf::lt},
                                                       {"le", tf::le}, {"gt", tf::gt}, {"ge", tf::ge}};
        const Pair p = random({9, 11}, 41, -2, 2), q = random({11}, 42, -2, 2);
        for (auto [name, fn] : cmps) {
            half_parity(name, d, {special, special}, [&](auto &t) { return fn(t[0], tf::mul(t[1], 1.0)); });
            half_parity(std::string(name) + " broadcast", d, {p, q}, [&](auto &t) { return fn(t[0], t[1]); });
            half_parity(std::string(name) + " special, shifted", d, {special},
                        [&](auto &t) { return fn(t[0].slice(1, 0, 11), t[0].slice(1, 1, 12)); });
        }
        half_parity("where", d, {p, q}, [&](auto &t) { return tf::where(tf::gt(t[0], t[1]), t[0], t[1]); }, {0, 0});
        half_parity("contiguous", d, {p}, [](auto &t) { return t[0].transpose(0, 1).contiguous(); }, {0, 0});
        half_parity("one_hot", d, {integers<int64_t>({17}, 3, 0, 5)}, [&](auto &t) { return tf::one_hot(t[0], 5, d); },
                    {0, 0});
    }
}

namespace {

// f through autograd on both devices with f16 or bf16 parameters: the output and every float
// operand's gradient for the loss sum(f(x) * r), r fixed values of the output's shape and dtype.
template <class F>
void half_grad_parity(const std::string &what, DType d, const std::vector<Pair> &operands, F &&f, HalfTol tol) {
    std::vector<Tensor> results[2];
    for (int side = 0; side < 2; ++side) {
        const Device &device = side == 0 ? cpu_device : gpu_device;
        std::vector<Tensor> leaves;
        for (const Pair &p : operands) {
            Tensor leaf = p.cpu.dtype() == DType::f32 ? tf::cast(p.cpu, d).to(device) : p.cpu.to(device);
            if (leaf.dtype() == d) leaf.requires_grad_();
            leaves.push_back(leaf);
        }
        Tensor out = f(leaves);
        Tensor weights =
            tf::cast(tf::from_vector(values(out.numel(), 977, -1, 1), out.shape(), cpu_device), d).to(device);
        tf::sum(tf::mul(out, weights)).backward();
        results[side].push_back(out.detach());
        for (const Tensor &leaf : leaves)
            if (leaf.requires_grad()) results[side].push_back(leaf.grad());
    }
    check_half(results[1][0], results[0][0], tol, what + ": forward");
    for (std::size_t i = 1; i < results[0].size(); ++i)
        check_half(results[1][i], results[0][i], tol, what + ": gradient " + std::to_string(i));
}

}  // namespace

// Tolerances: results that the GPU and cpu both compute in f32 and round once to 16 bits agree
// within 1 unit in the last place, except where f32 sums in a different order land on different
// sides of a rounding boundary (2 ulps) or cancel towards 0 (atol, relative to the operands'
// scale of about 1). On lavapipe and llvmpipe every case here is 0 ulps from cpu (each test
// prints its maximum): the margins are for other drivers' f32 math and summation orders.
TEST_CASE("mixed: matmul and conv2d with both gradients in f16 and bf16") {
    for (DType d : halves) {
        const HalfTol tol{2, d == DType::f16 ? 2e-3 : 1.6e-2};
        half_parity(
            "matmul 67x45 @ 45x93", d, {random({67, 45}, 111), random({45, 93}, 112)},
            [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
        half_parity(
            "matmul of transposed views", d, {random({45, 67}, 113), random({93, 45}, 114)},
            [](auto &t) { return tf::matmul(t[0].transpose(0, 1), t[1].transpose(0, 1)); }, tol);
        half_parity(
            "batched, broadcast batch", d, {random({3, 1, 19, 23}, 121), random({4, 23, 7}, 122)},
            [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
        // K split over workgroups: f32 partial sums, one rounding at the end.
        half_parity("long inner dimension (split K)", d, {random({9, 1500}, 127), random({1500, 11}, 128)},
                    [](auto &t) { return tf::matmul(t[0], t[1]); }, {2, d == DType::f16 ? 2e-2 : 1.2e-1});
        half_grad_parity(
            "matmul gradients", d, {random({6, 9}, 129), random({9, 5}, 130)},
            [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
        struct ConvCase {
            const char *name;
            Shape x, w;
            tf::Conv2dOptions o;
        };
        const ConvCase cases[] = {
            {"3x3", {2, 3, 11, 9}, {5, 3, 3, 3}, {}},
            {"stride 2, padding 1, odd widths", {2, 4, 7, 13}, {6, 4, 3, 3}, {2, 2, 1, 1, 1, 1, 1}},
            {"groups 2", {2, 6, 8, 8}, {4, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 2}},
            {"one input channel", {3, 1, 9, 9}, {7, 1, 3, 3}, {}},
        };
        for (const ConvCase &c : cases)
            half_grad_parity(
                std::string("conv2d ") + c.name, d, {random(c.x, 141), random(c.w, 142)},
                [&](auto &t) { return tf::conv2d(t[0], t[1], Tensor(), c.o); }, tol);
        half_grad_parity(
            "conv2d with bias", d, {random({2, 3, 9, 9}, 143), random({4, 3, 3, 3}, 144), random({4}, 145)},
            [](auto &t) {
                return tf::conv2d(t[0].permute({0, 1, 3, 2}), t[1], t[2]);
            },
            tol);
    }
}

TEST_CASE("mixed: reductions in f16 and bf16 accumulate in f32") {
    for (DType d : halves) {
        const HalfTol tol{1, d == DType::f16 ? 1e-3 : 8e-3};
        const Pair x = random({3, 5, 7, 2}, 91, -2, 2), longer = random({4, 1000}, 92, -2, 2);
        using ReduceFn = Tensor (*)(const Tensor &, const tf::Axes &, bool);
        const std::pair<const char *, ReduceFn> ops[] = {
            {"sum", tf::sum}, {"mean", tf::mean}, {"max", tf::max}, {"min", tf::min}};
        for (auto [name, fn] : ops) {
            half_parity(
                std::string(name) + " axes 1, 3", d, {x},
                [&](auto &t) {
                    return fn(t[0], {1, 3}, false);
                },
                tol);
            half_parity(
                std::string(name) + " all", d, {x},
                [&](auto &t) {
                    return fn(t[0], {0, 1, 2, 3}, true);
                },
                tol);
            half_parity(
                std::string(name) + " long rows", d, {longer}, [&](auto &t) { return fn(t[0], {1}, false); }, tol);
        }
        half_parity(
            "var", d, {x},
            [](auto &t) {
                return tf::var(t[0], {0, 2}, 1, false);
            },
            tol);
        half_parity(
            "var long rows", d, {longer}, [](auto &t) { return tf::var(t[0], {1}, 0, true); }, tol);
        half_parity("argmax", d, {x}, [](auto &t) { return tf::argmax(t[0], 2); });
        half_parity("argmin long rows", d, {longer}, [](auto &t) { return tf::argmin(t[0], 1); });
        half_grad_parity(
            "sum gradient", d, {x}, [](auto &t) { return tf::sum(t[0], {1}); }, tol);
    }
}

TEST_CASE("mixed: pooling, softmax, norms, cross_entropy, embedding, rope, attention in f16 and bf16") {
    for (DType d : halves) {
        const HalfTol tol{1, d == DType::f16 ? 1e-3 : 8e-3};
        const HalfTol loose{2, d == DType::f16 ? 4e-3 : 3e-2};  // several f32 steps, then a gradient chain
        half_grad_parity(
            "max_pool2d 3x3 stride 2 padding 1", d, {random({1, 2, 9, 12}, 151)},
            [](auto &t) {
                return tf::max_pool2d(t[0], {3, 3, 2, 2, 1, 1, true});
            },
            tol);
        half_grad_parity(
            "avg_pool2d 2x2", d, {random({2, 3, 10, 11}, 152)}, [](auto &t) { return tf::avg_pool2d(t[0]); }, tol);
        const Pair x = random({4, 7, 10}, 161, -5, 5);
        for (int axis : {0, 2}) {
            half_grad_parity(
                "softmax axis " + std::to_string(axis), d, {x}, [&](auto &t) { return tf::softmax(t[0], axis); },
                loose);
            half_grad_parity(
                "log_softmax axis " + std::to_string(axis), d, {x},
                [&](auto &t) { return tf::log_softmax(t[0], axis); }, loose);
        }
        const Pair w = random({7, 10}, 162), b = random({7, 10}, 163), w1 = random({10}, 164);
        half_grad_parity(
            "layer_norm over 2 axes", d, {x, w, b}, [](auto &t) { return tf::layer_norm(t[0], 2, t[1], t[2]); }, loose);
        half_grad_parity(
            "rms_norm", d, {x, w1}, [](auto &t) { return tf::rms_norm(t[0], 1, t[1]); }, loose);
        half_parity(
            "layer_norm of a view", d, {x, w1}, [](auto &t) { return tf::layer_norm(t[0].transpose(0, 1), 1, t[1]); },
            tol);
        const Pair logits = random({13, 7}, 171, -4, 4);
        const Pair labels = integers<int64_t>({13}, 172, 0, 7);
        half_grad_parity(
            "cross_entropy mean", d, {logits, labels}, [](auto &t) { return tf::cross_entropy(t[0], t[1]); }, loose);
        half_parity(
            "cross_entropy none", d, {logits, labels},
            [](auto &t) { return tf::cross_entropy(t[0], t[1], tf::Reduction::none); }, tol);
        half_parity(
            "cross_entropy sum", d, {logits, labels},
            [](auto &t) { return tf::cross_entropy(t[0], t[1], tf::Reduction::sum); }, tol);
        // Repeated indices: their rows' gradients add up in f32 and round once.
        const Pair table = random({11, 5}, 181), idx = integers<int64_t>({3, 7}, 182, 0, 11);
        half_grad_parity(
            "embedding", d, {table, idx}, [](auto &t) { return tf::embedding(t[0], t[1]); }, tol);
        half_grad_parity(
            "rope", d, {random({2, 3, 6, 8}, 191)}, [](auto &t) { return tf::rope(t[0], 10000.0, false, 3); }, tol);
        half_parity(
            "rope interleaved, far position", d, {random({5, 8}, 192)},
            [](auto &t) { return tf::rope(t[0], 10000.0, true, 1000000); }, tol);
        const Pair q = random({2, 5, 8}, 201), k = random({2, 7, 8}, 202), v = random({2, 7, 6}, 203),
                   m = random({5, 7}, 204);
        half_parity(
            "attention with a mask", d, {q, k, v, m},
            [](auto &t) { return tf::scaled_dot_product_attention(t[0], t[1], t[2], t[3]); }, loose);
        half_grad_parity(
            "attention causal", d, {q, k, v},
            [](auto &t) { return tf::scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), true); }, loose);
    }
}

namespace {

// A small CNN classifier's SGD steps with every parameter, activation and gradient in bf16
// (f32 only inside the kernels): losses and final parameters.
struct BF16Run {
    std::vector<float> losses;
    std::vector<Tensor> params;
};

BF16Run train_bf16(const Device &device) {
    const Shape shapes[] = {{4, 1, 3, 3}, {4}, {10, 64}, {10}};
    std::vector<Tensor> params;
    for (int i = 0; i < 4; ++i) {
        Tensor p = tf::cast(tf::from_vector(values(numel(shapes[i]), 500 + static_cast<uint64_t>(i), -0.4, 0.4),
                                            shapes[i], cpu_device),
                            DType::bf16)
                       .to(device);
        p.requires_grad_();
        params.push_back(p);
    }
    const Tensor x =
        tf::cast(tf::from_vector(values(8 * 64, 510, -1, 1), {8, 1, 8, 8}, cpu_device), DType::bf16).to(device);
    std::vector<int64_t> labels(8);
    for (int i = 0; i < 8; ++i) labels[static_cast<std::size_t>(i)] = (i * 3 + 1) % 10;
    const Tensor y = tf::from_vector(labels, {8}, device);
    BF16Run run;
    tf::Conv2dOptions pad1;
    pad1.pad_h = pad1.pad_w = 1;
    for (int step = 0; step < 3; ++step) {
        Tensor h = tf::max_pool2d(tf::relu(tf::conv2d(x, params[0], params[1], pad1)));
        Tensor logits = tf::linear(h.reshape({8, 64}), params[2], params[3]);
        Tensor loss = tf::cross_entropy(logits, y);
        loss.backward();
        run.losses.push_back(loss.item<float>());
        tf::NoGradGuard no_grad;
        for (Tensor &p : params) {
            p.assign_(p - p.grad() * 0.5);
            p.zero_grad();
        }
    }
    for (const Tensor &p : params) run.params.push_back(p.detach());
    return run;
}

}  // namespace

TEST_CASE("mixed: a bf16 training step on the backend matches cpu") {
    const BF16Run want = train_bf16(cpu_device);
    const BF16Run got = train_bf16(gpu_device);
    REQUIRE(got.losses.size() == want.losses.size());
    for (std::size_t i = 0; i < got.losses.size(); ++i) {
        MESSAGE("bf16 step " << i << " loss: " TF_TEST_BACKEND " " << got.losses[i] << ", cpu " << want.losses[i]);
        CHECK(std::isfinite(got.losses[i]));
        // One bf16 ulp of the loss (2^-7 relative), plus the steps' drift.
        CHECK(std::abs(got.losses[i] - want.losses[i]) <= 2e-2 * std::abs(want.losses[i]));
    }
    CHECK(want.losses.back() < want.losses.front());
    for (std::size_t i = 0; i < got.params.size(); ++i)
        check_half(got.params[i], want.params[i], {2, 1e-2}, "parameter " + std::to_string(i) + " after 3 steps");
}
