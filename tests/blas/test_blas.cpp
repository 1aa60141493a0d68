// The blas plugin through the C++ API, with TINYFIN_BACKEND=blas: matmul and conv2d against the
// cpu plugin (and a double-precision reference), which of them OpenBLAS runs (the rest runs on
// the cpu kernels blas links), that every op runs on blas itself, and that sharing host memory
// with cpu moves no bytes. Test cases named fallback-error:* run under TINYFIN_FALLBACK=error
// and runtime:* in a process of their own (see meson.build), the others without it.
#include <doctest/doctest.h>

#include <tinyfin/tinyfin.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace tinyfin;

namespace {

const Device k_cpu{"cpu", 0};
const Device k_blas{"blas", 0};

// The plugin's thresholds in multiply-adds per sgemm call (matmul) and per op (conv2d): below
// them blas runs the op on cpu's kernels instead of OpenBLAS.
constexpr int64_t k_matmul_min_work = 16 * 16 * 16;
constexpr int64_t k_conv_min_work = 32 * 32 * 32;
// Stride-1 convolutions with this many taps per output, not pointwise, are left to cpu's kernels.
constexpr int64_t k_conv_cpu_taps = 32;

uint64_t ops_on(const char *backend) {
    const Stats s = stats();
    const Stats::Backend *b = s.backend(backend);
    return b ? b->ops : 0;
}

// A feature of a backend's report, "" when absent.
std::string feature(const char *backend, const char *key) {
    for (const auto &[k, v] : backend_report(backend).features)
        if (k == key) return v;
    return "";
}

// Ops blas ran through OpenBLAS since it was initialised (its feature openblas.ops).
uint64_t openblas_ops() { return std::stoull(feature("blas", "openblas.ops")); }

// No bytes between host and either host backend: blas and cpu address the same memory.
void check_nothing_moved() {
    const Stats s = stats();
    for (const char *name : {"blas", "cpu"}) {
        const Stats::Backend *b = s.backend(name);
        REQUIRE(b != nullptr);
        CHECK_MESSAGE(b->bytes_to_device == 0, name);
        CHECK_MESSAGE(b->bytes_to_host == 0, name);
    }
}

// Row-major [..., M, K] x [..., K, N] in double, with |a| |b| beside it for the error bound.
struct Reference {
    std::vector<double> value, magnitude;
};

// a and b are read back in row-major order and broadcast like the op does; batch = product of
// the output's batch axes, a_batch/b_batch 1 when that operand is broadcast over them.
Reference matmul_reference(const std::vector<float> &a, const std::vector<float> &b, int64_t batch, bool a_batched,
                           bool b_batched, int64_t m, int64_t k, int64_t n) {
    Reference r{std::vector<double>(batch * m * n), std::vector<double>(batch * m * n)};
    for (int64_t t = 0; t < batch; ++t) {
        const float *pa = a.data() + (a_batched ? t * m * k : 0);
        const float *pb = b.data() + (b_batched ? t * k * n : 0);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double v = 0, mag = 0;
                for (int64_t q = 0; q < k; ++q) {
                    v += double(pa[i * k + q]) * pb[q * n + j];
                    mag += std::abs(double(pa[i * k + q]) * pb[q * n + j]);
                }
                r.value[(t * m + i) * n + j] = v;
                r.magnitude[(t * m + i) * n + j] = mag;
            }
    }
    return r;
}

// Any summation order of k float products stays within ~k * eps * sum |a b| of the exact value.
void check_close(const std::vector<float> &got, const Reference &want, int64_t k, const std::string &what) {
    REQUIRE(got.size() == want.value.size());
    const double eps = std::numeric_limits<float>::epsilon();
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double bound = 2.0 * (k + 2) * eps * want.magnitude[i] + 1e-30;
        if (!(std::abs(got[i] - want.value[i]) <= bound) && bad++ < 3)
            FAIL_CHECK(what << ": element " << i << " is " << got[i] << ", expected " << want.value[i] << " +- "
                            << bound);
    }
    CHECK_MESSAGE(bad == 0, what << ": " << bad << " elements out of bounds");
}

void check_same(const std::vector<float> &got, const std::vector<float> &want, double tolerance,
                const std::string &what) {
    REQUIRE(got.size() == want.size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, double(std::abs(got[i] - want[i])));
        scale = std::max(scale, double(std::abs(want[i])));
    }
    CHECK_MESSAGE(worst <= tolerance * std::max(scale, 1.0),
                  what << ": max difference " << worst << " at scale " << scale);
}

std::string dims(int64_t m, int64_t k, int64_t n) {
    return std::to_string(m) + "x" + std::to_string(k) + " @ " + std::to_string(k) + "x" + std::to_string(n);
}

// ---- conv2d reference in double -----------------------------------------------------------------

struct ConvCase {
    const char *name;
    int64_t n, c, h, w, o, kh, kw;
    Conv2dOptions options;
};

int64_t conv_out(int64_t in, int64_t k, int stride, int pad, int dilation) {
    return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}

struct ConvDims {
    int64_t oh, ow, cg, og;
};

ConvDims dims_of(const ConvCase &cc) {
    const Conv2dOptions &o = cc.options;
    return {conv_out(cc.h, cc.kh, o.stride_h, o.pad_h, o.dilation_h),
            conv_out(cc.w, cc.kw, o.stride_w, o.pad_w, o.dilation_w), cc.c / o.groups, cc.o / o.groups};
}

// Calls f(n, o, oy, ox, c, ky, kx, x_index, w_index, y_index) for every valid product of the conv.
template <class F>
void for_each_tap(const ConvCase &cc, F &&f) {
    const ConvDims d = dims_of(cc);
    const Conv2dOptions &o = cc.options;
    for (int64_t n = 0; n < cc.n; ++n)
        for (int64_t oc = 0; oc < cc.o; ++oc) {
            const int64_t grp = oc / d.og;
            for (int64_t oy = 0; oy < d.oh; ++oy)
                for (int64_t ox = 0; ox < d.ow; ++ox)
                    for (int64_t c = 0; c < d.cg; ++c)
                        for (int64_t ky = 0; ky < cc.kh; ++ky)
                            for (int64_t kx = 0; kx < cc.kw; ++kx) {
                                const int64_t iy = oy * o.stride_h - o.pad_h + ky * o.dilation_h;
                                const int64_t ix = ox * o.stride_w - o.pad_w + kx * o.dilation_w;
                                if (iy < 0 || iy >= cc.h || ix < 0 || ix >= cc.w) continue;
                                const int64_t xi = ((n * cc.c + grp * d.cg + c) * cc.h + iy) * cc.w + ix;
                                const int64_t wi = ((oc * d.cg + c) * cc.kh + ky) * cc.kw + kx;
                                const int64_t yi = ((n * cc.o + oc) * d.oh + oy) * d.ow + ox;
                                f(xi, wi, yi);
                            }
        }
}

// y, dx and dw of one conv case in double, with magnitudes for the error bounds.
struct ConvReference {
    Reference y, dx, dw;
};

ConvReference conv_reference_of(const ConvCase &cc, const std::vector<float> &x, const std::vector<float> &w,
                                const std::vector<float> &dy) {
    const ConvDims d = dims_of(cc);
    ConvReference r;
    auto sized = [](Reference &ref, size_t n) {
        ref.value.assign(n, 0.0);
        ref.magnitude.assign(n, 0.0);
    };
    sized(r.y, size_t(cc.n * cc.o * d.oh * d.ow));
    sized(r.dx, x.size());
    sized(r.dw, w.size());
    for_each_tap(cc, [&](int64_t xi, int64_t wi, int64_t yi) {
        r.y.value[yi] += double(x[xi]) * w[wi];
        r.y.magnitude[yi] += std::abs(double(x[xi]) * w[wi]);
        r.dx.value[xi] += double(dy[yi]) * w[wi];
        r.dx.magnitude[xi] += std::abs(double(dy[yi]) * w[wi]);
        r.dw.value[wi] += double(dy[yi]) * x[xi];
        r.dw.magnitude[wi] += std::abs(double(dy[yi]) * x[xi]);
    });
    return r;
}

const ConvCase k_conv_cases[] = {
    // The Fashion-MNIST example's layers (batch 4 here; the benchmark runs batch 64).
    {"cnn conv1 1->32 3x3 p1 28x28", 4, 1, 28, 28, 32, 3, 3, {1, 1, 1, 1, 1, 1, 1}},
    {"cnn conv2 32->64 3x3 p1 14x14", 2, 32, 14, 14, 64, 3, 3, {1, 1, 1, 1, 1, 1, 1}},
    {"stride 2, no padding, odd sizes", 3, 5, 17, 13, 7, 3, 3, {2, 2, 0, 0, 1, 1, 1}},
    {"rectangular kernel, asymmetric stride and padding", 2, 6, 15, 19, 9, 2, 5, {1, 2, 1, 2, 1, 1, 1}},
    {"dilation 2", 2, 8, 16, 16, 16, 3, 3, {1, 1, 2, 2, 2, 2, 1}},
    {"groups 2", 2, 8, 12, 12, 16, 3, 3, {1, 1, 1, 1, 1, 1, 2}},
    {"pointwise 1x1", 2, 16, 10, 10, 32, 1, 1, {1, 1, 0, 0, 1, 1, 1}},
    {"1x1 stride 2", 2, 16, 10, 10, 32, 1, 1, {2, 2, 0, 0, 1, 1, 1}},
    // One image per sgemm call: operands read and written in place.
    {"one image, pointwise", 1, 32, 20, 20, 48, 1, 1, {1, 1, 0, 0, 1, 1, 1}},
    {"one image, 3x3", 1, 16, 24, 24, 32, 3, 3, {1, 1, 1, 1, 1, 1, 1}},
    {"large planes, 3x3", 2, 3, 64, 64, 8, 3, 3, {1, 1, 1, 1, 1, 1, 1}},
    // Stride 1 with fewer than 32 taps: blas's dilation and groups code, which the 72- and
    // 36-tap cases above leave to cpu.
    {"dilation 2, 2 channels", 2, 2, 16, 16, 16, 3, 3, {1, 1, 2, 2, 2, 2, 1}},
    {"groups 2, 3 channels each", 2, 6, 12, 12, 16, 3, 3, {1, 1, 1, 1, 1, 1, 2}},
};

// Claimed by blas when N * O * OH * OW * C/groups * KH * KW reaches the threshold, unless cpu's
// stride-1 kernels are the faster ones.
bool conv_claimed(const ConvCase &cc) {
    const ConvDims d = dims_of(cc);
    const auto &o = cc.options;
    const bool pointwise = cc.kh == 1 && cc.kw == 1 && o.pad_h == 0 && o.pad_w == 0;
    if (o.stride_h == 1 && o.stride_w == 1 && !pointwise && d.cg * cc.kh * cc.kw >= k_conv_cpu_taps) return false;
    return cc.n * cc.o * d.oh * d.ow * d.cg * cc.kh * cc.kw >= k_conv_min_work;
}

}  // namespace

TEST_CASE("blas is selected and shares host memory") {
    REQUIRE(backend_name() == "blas");
    CHECK(default_device() == k_blas);
    const std::vector<std::string> available = available_backends();
    const auto blas = std::find(available.begin(), available.end(), "blas");
    REQUIRE(blas != available.end());
    CHECK(available.back() == "cpu");
    Tensor a = ones({4});
    CHECK(a.device() == k_blas);
}

TEST_CASE("from_blob on blas wraps host memory in place") {
    std::vector<float> host(6 * 5);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) - 7.0f;
    int released = 0;
    {
        // A transposed view of a [6, 5] row-major array, as a mapped weight is seen by linear.
        Tensor t = from_blob(
            host.data(), {5, 6}, {1, 5}, DType::f32, [&] { ++released; }, k_blas);
        CHECK(t.device() == k_blas);
        CHECK(t.host_data() == host.data());  // no copy: the tensor's memory is the array
        host[5 * 2 + 3] = 100.0f;  // element (3, 2) of t, written through the array
        CHECK(t.to(k_cpu).to_vector<float>()[3 * 6 + 2] == 100.0f);
        // An op on blas reads it in place: x [1, 5] times t [5, 6] against the sums by hand.
        Tensor x = from_vector(std::vector<float>{1, -2, 3, 0.5f, 4}, {1, 5});
        const std::vector<float> got = matmul(x, t).to_vector<float>();
        const float xs[5] = {1, -2, 3, 0.5f, 4};
        for (int j = 0; j < 6; ++j) {
            double want = 0;
            for (int p = 0; p < 5; ++p) want += static_cast<double>(xs[p]) * host[static_cast<std::size_t>(j * 5 + p)];
            CHECK(got[static_cast<std::size_t>(j)] == doctest::Approx(want).epsilon(1e-6));
        }
        CHECK(released == 0);
    }
    CHECK(released == 1);
    // Devices that are not host memory, or not there at all, are refused (the release still runs).
    CHECK_THROWS_AS(from_blob(
                        host.data(), {4}, {1}, DType::f32, [&] { ++released; }, Device{"blas", 7}),
                    DeviceError);
    CHECK(released == 2);
    for (const std::string &name : available_backends()) {
        if (name != "vulkan" && name != "opengl" && name != "opencl" && name != "cuda") continue;
        CAPTURE(name);
        CHECK_THROWS_AS(from_blob(
                            host.data(), {4}, {1}, DType::f32, [] {}, Device{name, 0}),
                        BackendError);
    }
}

TEST_CASE("matmul at odd sizes matches the cpu plugin and the exact result") {
    const int64_t sizes[] = {1, 7, 13, 63, 65, 257};
    uint64_t seed = 1;
    for (int64_t m : sizes)
        for (int64_t k : sizes)
            for (int64_t n : sizes) {
                const std::string what = dims(m, k, n);
                Tensor a = randn({m, k}, seed++), b = randn({k, n}, seed++);
                REQUIRE(a.device() == k_blas);
                reset_stats();
                const uint64_t before = openblas_ops();
                Tensor c = matmul(a, b);
                const bool claimed = m * n * k >= k_matmul_min_work;
                CHECK_MESSAGE(openblas_ops() - before == (claimed ? 1u : 0u), what);
                CHECK_MESSAGE(ops_on("blas") == 1u, what);
                CHECK_MESSAGE(stats().total_fallbacks == 0u, what);
                check_nothing_moved();
                CHECK(c.device() == k_blas);
                const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
                const std::vector<float> got = c.to_vector<float>();
                check_close(got, matmul_reference(av, bv, 1, false, false, m, k, n), k, what);
                // The cpu plugin on copies of the same operands.
                const std::vector<float> cpu = matmul(a.to(k_cpu), b.to(k_cpu)).to_vector<float>();
                check_same(got, cpu, 1e-5, what + " vs cpu");
            }
}

TEST_CASE("transposed and sliced views reach sgemm without copies") {
    const int64_t m = 65, k = 63, n = 257;
    const std::vector<float> expected_a = randn({m, k}, 11).to_vector<float>();
    const std::vector<float> expected_b = randn({k, n}, 12).to_vector<float>();
    const Reference want = matmul_reference(expected_a, expected_b, 1, false, false, m, k, n);

    // Each pair: a view of a [m, k] and of b [k, n] with the values above, built differently.
    struct Variant {
        const char *name;
        Tensor a, b;
        bool claimed;
    };
    Tensor at = randn({m, k}, 11).transpose(0, 1).contiguous().transpose(0, 1);  // unit row stride
    Tensor bt = randn({k, n}, 12).transpose(0, 1).contiguous().transpose(0, 1);
    // Columns 3 .. 3+k of a wider matrix: leading dimension k + 8, offset 3.
    Tensor wide_a = zeros({m, k + 8});
    wide_a.slice(1, 3, 3 + k).assign_(randn({m, k}, 11));
    Tensor wide_b = zeros({k + 1, n + 5});
    wide_b.slice(0, 1, k + 1).slice(1, 0, n).assign_(randn({k, n}, 12));
    // Every other column: no unit stride on either axis, which sgemm cannot read.
    Tensor gappy_a = zeros({m, 2 * k});
    gappy_a.slice(1, 0, 2 * k, 2).assign_(randn({m, k}, 11));
    const Variant variants[] = {
        {"a transposed", at, randn({k, n}, 12), true},
        {"b transposed", randn({m, k}, 11), bt, true},
        {"both transposed", at, bt, true},
        {"leading dimensions and offsets", wide_a.slice(1, 3, 3 + k), wide_b.slice(0, 1, k + 1).slice(1, 0, n), true},
        {"strided columns", gappy_a.slice(1, 0, 2 * k, 2), randn({k, n}, 12), false},
    };
    for (const Variant &v : variants) {
        REQUIRE(v.a.shape() == Shape{m, k});
        REQUIRE(v.b.shape() == Shape{k, n});
        reset_stats();
        const uint64_t before = openblas_ops();
        Tensor c = matmul(v.a, v.b);
        CHECK_MESSAGE(openblas_ops() - before == (v.claimed ? 1u : 0u), v.name);
        CHECK_MESSAGE(stats().total_fallbacks == 0u, v.name);
        // No contiguous() copy ran first: the only op is the matmul itself.
        CHECK_MESSAGE(ops_on("blas") == 1u, v.name);
        CHECK_MESSAGE(ops_on("cpu") == 0u, v.name);
        check_nothing_moved();
        check_close(c.to_vector<float>(), want, k, v.name);
    }
}

TEST_CASE("batched matmul with broadcast batch axes") {
    struct Batched {
        const char *name;
        Shape a, b;
        int64_t batch;
        bool a_batched, b_batched;
    };
    const Batched cases[] = {
        {"[5,33,40] @ [40,37] (b broadcast: one folded call)", {5, 33, 40}, {40, 37}, 5, true, false},
        {"[33,40] @ [5,40,37] (a broadcast)", {33, 40}, {5, 40, 37}, 5, false, true},
        {"[4,33,40] @ [4,40,37]", {4, 33, 40}, {4, 40, 37}, 4, true, true},
        {"[6,1,40] @ [40,257] (rows of a vector each)", {6, 1, 40}, {40, 257}, 6, true, false},
    };
    uint64_t seed = 100;
    for (const Batched &bc : cases) {
        Tensor a = randn(bc.a, seed++), b = randn(bc.b, seed++);
        const int64_t m = bc.a[bc.a.size() - 2], k = bc.a.back(), n = bc.b.back();
        reset_stats();
        const uint64_t before = openblas_ops();
        Tensor c = matmul(a, b);
        CHECK_MESSAGE(openblas_ops() - before == 1u, bc.name);
        CHECK_MESSAGE(ops_on("blas") == 1u, bc.name);
        CHECK_MESSAGE(stats().total_fallbacks == 0u, bc.name);
        check_nothing_moved();
        REQUIRE(c.shape() == Shape{bc.batch, m, n});
        check_close(
            c.to_vector<float>(),
            matmul_reference(a.to_vector<float>(), b.to_vector<float>(), bc.batch, bc.a_batched, bc.b_batched, m, k, n),
            k, bc.name);
    }

    // [2,1,M,K] @ [1,3,K,N] -> [2,3,M,N], each output batch against the cpu plugin.
    Tensor a = randn({2, 1, 40, 50}, 7), b = randn({1, 3, 50, 30}, 8);
    reset_stats();
    uint64_t before = openblas_ops();
    Tensor c = matmul(a, b);
    CHECK(openblas_ops() - before == 1u);
    CHECK(ops_on("blas") == 1u);
    check_nothing_moved();
    REQUIRE(c.shape() == Shape{2, 3, 40, 30});
    check_same(c.to_vector<float>(), matmul(a.to(k_cpu), b.to(k_cpu)).to_vector<float>(), 1e-5,
               "[2,1] x [1,3] batches");

    // A 1-D left operand arrives as [1, K]: one row, any row stride.
    Tensor v = randn({64}, 9), w = randn({64, 300}, 10);
    reset_stats();
    before = openblas_ops();
    Tensor vw = matmul(v, w);
    CHECK(openblas_ops() - before == 1u);
    CHECK(ops_on("blas") == 1u);
    check_nothing_moved();
    REQUIRE(vw.shape() == Shape{300});
    check_same(vw.to_vector<float>(), matmul(v.to(k_cpu), w.to(k_cpu)).to_vector<float>(), 1e-5, "vector @ matrix");
}

TEST_CASE("conv2d forward and gradients match the reference and the cpu plugin") {
    uint64_t seed = 200;
    for (const ConvCase &cc : k_conv_cases) {
        CAPTURE(cc.name);
        const ConvDims d = dims_of(cc);
        Tensor x = randn({cc.n, cc.c, cc.h, cc.w}, seed++).requires_grad_();
        Tensor w = randn({cc.o, d.cg, cc.kh, cc.kw}, seed++).requires_grad_();
        Tensor dy = randn({cc.n, cc.o, d.oh, d.ow}, seed++);
        const ConvReference want =
            conv_reference_of(cc, x.to_vector<float>(), w.to_vector<float>(), dy.to_vector<float>());
        const bool claimed = conv_claimed(cc);

        reset_stats();
        uint64_t before = openblas_ops();
        Tensor y = conv2d(x, w, Tensor(), cc.options);
        CHECK(openblas_ops() - before == (claimed ? 1u : 0u));
        CHECK(ops_on("blas") == 1u);
        CHECK(stats().total_fallbacks == 0u);
        check_nothing_moved();
        REQUIRE(y.shape() == Shape{cc.n, cc.o, d.oh, d.ow});
        check_close(y.to_vector<float>(), want.y, d.cg * cc.kh * cc.kw, std::string(cc.name) + " y");

        // sum(y * dy) has gradient dy at y: backward runs conv2d_grad_input and _weight.
        reset_stats();
        before = openblas_ops();
        sum(mul(y, dy)).backward();
        CHECK(openblas_ops() - before == (claimed ? 2u : 0u));  // conv2d_grad_input and _weight
        CHECK(stats().total_fallbacks == 0u);
        check_nothing_moved();
        REQUIRE(x.grad().defined());
        REQUIRE(w.grad().defined());
        check_close(x.grad().to_vector<float>(), want.dx, cc.o / cc.options.groups * cc.kh * cc.kw,
                    std::string(cc.name) + " dx");
        check_close(w.grad().to_vector<float>(), want.dw, cc.n * d.oh * d.ow, std::string(cc.name) + " dw");

        {
            NoGradGuard no_grad;
            const std::vector<float> cpu =
                conv2d(x.detach().to(k_cpu), w.detach().to(k_cpu), Tensor(), cc.options).to_vector<float>();
            check_same(y.to_vector<float>(), cpu, 1e-5, std::string(cc.name) + " vs cpu");
        }
    }
}

TEST_CASE("conv2d gradients from a broadcast upstream gradient") {
    // sum(y) sends an expanded (stride 0) gradient into conv2d's backward: blas packs it.
    const ConvCase &cc = k_conv_cases[0];  // the example's first layer, which blas claims
    REQUIRE(conv_claimed(cc));
    const ConvDims d = dims_of(cc);
    Tensor x = randn({cc.n, cc.c, cc.h, cc.w}, 300).requires_grad_();
    Tensor w = randn({cc.o, d.cg, cc.kh, cc.kw}, 301).requires_grad_();
    const std::vector<float> ones_dy(size_t(cc.n * cc.o * d.oh * d.ow), 1.0f);
    const ConvReference want = conv_reference_of(cc, x.to_vector<float>(), w.to_vector<float>(), ones_dy);
    reset_stats();
    sum(conv2d(x, w, Tensor(), cc.options)).backward();
    check_nothing_moved();
    check_close(x.grad().to_vector<float>(), want.dx, cc.o * cc.kh * cc.kw, "dx");
    check_close(w.grad().to_vector<float>(), want.dw, cc.n * d.oh * d.ow, "dw");
}

TEST_CASE("ops OpenBLAS does not run are cpu's kernels on blas, bit for bit") {
    Tensor x = randn({1000}, 400);
    reset_stats();
    const uint64_t before = openblas_ops();
    Tensor y = exp(x);
    CHECK(y.device() == k_blas);
    CHECK(ops_on("blas") == 1);
    CHECK(ops_on("cpu") == 0);
    CHECK(stats().total_fallbacks == 0);
    CHECK(openblas_ops() == before);
    check_nothing_moved();
    const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
    for (size_t i = 0; i < xv.size(); ++i) CHECK(yv[i] == doctest::Approx(std::exp(xv[i])).epsilon(1e-6));
    // The same kernel as the cpu plugin's (one build of it, linked into both): the same bits.
    CHECK(exp(x.to(k_cpu)).to_vector<float>() == yv);

    // The result feeds an OpenBLAS op without leaving host memory.
    Tensor a = exp(randn({64, 64}, 401)), b = randn({64, 64}, 402);
    reset_stats();
    Tensor c = matmul(a, b);
    CHECK(ops_on("blas") == 1);
    CHECK(openblas_ops() == before + 1);
    check_nothing_moved();
}

namespace {

// softmax(q k^T / sqrt(d)) v in double, q, k, v [t, d] row-major.
std::vector<double> attention_reference(const std::vector<float> &q, const std::vector<float> &k,
                                        const std::vector<float> &v, int64_t tq, int64_t tk, int64_t d) {
    std::vector<double> out(static_cast<size_t>(tq * d));
    for (int64_t i = 0; i < tq; ++i) {
        std::vector<double> score(static_cast<size_t>(tk));
        double top = -INFINITY, total = 0;
        for (int64_t j = 0; j < tk; ++j) {
            for (int64_t c = 0; c < d; ++c) score[j] += double(q[i * d + c]) * k[j * d + c];
            score[j] /= std::sqrt(double(d));
            top = std::max(top, score[j]);
        }
        for (double &e : score) total += (e = std::exp(e - top));
        for (int64_t c = 0; c < d; ++c)
            for (int64_t j = 0; j < tk; ++j) out[i * d + c] += score[j] / total * v[j * d + c];
    }
    return out;
}

}  // namespace

TEST_CASE("fallback-error: every op runs on blas") {
    Tensor a = randn({65, 63}, 500), b = randn({63, 257}, 501);
    reset_stats();
    const uint64_t before = openblas_ops();
    CHECK_NOTHROW(matmul(a, b));
    CHECK_NOTHROW(matmul(randn({63, 65}, 509).transpose(0, 1), b));
    CHECK_NOTHROW(matmul(randn({5, 33, 40}, 502), randn({40, 37}, 503)));
    CHECK(openblas_ops() == before + 3);
    for (const ConvCase &cc : k_conv_cases) {
        CAPTURE(cc.name);
        const ConvDims d = dims_of(cc);
        Tensor x = randn({cc.n, cc.c, cc.h, cc.w}, 504).requires_grad_();
        Tensor w = randn({cc.o, d.cg, cc.kh, cc.kw}, 505).requires_grad_();
        Tensor y;
        CHECK_NOTHROW(y = conv2d(x, w, Tensor(), cc.options));
        CHECK_NOTHROW(sum(mul(y, y)).backward());
    }
    // What OpenBLAS does not take: cpu's kernels, on blas.
    CHECK_NOTHROW(exp(a));
    CHECK_NOTHROW(matmul(randn({7, 7}, 507), randn({7, 7}, 508)));
    CHECK_NOTHROW(softmax(a, -1).to_vector<float>());
    CHECK_NOTHROW(a.to(DType::f16).transpose(0, 1).to_vector<float>());
    CHECK(stats().total_fallbacks == 0);
    CHECK(ops_on("cpu") == 0);

    // Attention without a mask (no mask operand at all: absent, ABI 1.1), against double.
    const int64_t tq = 3, tk = 5, d = 4;
    Tensor q = randn({tq, d}, 601), k = randn({tk, d}, 602), v = randn({tk, d}, 603);
    reset_stats();
    Tensor o = scaled_dot_product_attention(q, k, v);
    const Stats after = stats();
    CHECK(after.backend("blas")->allocations == 1);  // the output alone: no mask, not even one zero
    CHECK(after.total_fallbacks == 0);
    const std::vector<double> want =
        attention_reference(q.to_vector<float>(), k.to_vector<float>(), v.to_vector<float>(), tq, tk, d);
    const std::vector<float> got = o.to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
}

TEST_CASE("runtime: cpu's kernels in blas run on blas's own copy of cpu's runtime") {
    // A process of its own (meson.build): nothing ran on cpu before. TINYFIN_THREADS=2 there.
    REQUIRE(feature("blas", "threads") == "2");
    CHECK(feature("blas", "kernels") == feature("cpu", "kernels"));
    CHECK(feature("blas", "scratch_arenas") == "0");
    CHECK(feature("cpu", "scratch_arenas") == "0");
    // f16 softmax stages its rows in f32 scratch, split over the pool's threads.
    Tensor x = randn({256, 512}, 700).to(DType::f16);
    reset_stats();
    const std::vector<float> on_blas = softmax(x, -1).to_vector<float>();
    CHECK(ops_on("blas") >= 1);
    CHECK(ops_on("cpu") == 0);
    CHECK(feature("blas", "scratch_arenas") != "0");
    CHECK(std::stoull(feature("blas", "scratch_bytes")) > 0);
    // cpu's copy of the runtime was not touched: no arena, no pool of its own started by blas.
    CHECK(feature("cpu", "scratch_arenas") == "0");
    // The cpu plugin, on its own runtime, computes the same bits.
    const std::vector<float> on_cpu = softmax(x.to(k_cpu), -1).to_vector<float>();
    CHECK(feature("cpu", "scratch_arenas") != "0");
    CHECK(on_cpu == on_blas);
    // Each row sums to 1 (f16 outputs: each within 2^-11 of its value).
    for (int64_t r = 0; r < 256; ++r) {
        double total = 0;
        for (int64_t c = 0; c < 512; ++c) total += on_blas[size_t(r * 512 + c)];
        CHECK(total == doctest::Approx(1.0).epsilon(1e-3));
    }
}
