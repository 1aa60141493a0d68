// The blas plugin through its ABI, without the core: layouts the core never produces today
// (column-major and strided outputs, packed weights, stride-0 rows), supports() answers, and
// which descriptors OpenBLAS runs (the feature openblas.ops counts them) and which cpu's kernels
// in blas run. The test dlopens the plugin built beside it with a stub host table.
#include <doctest/doctest.h>

#include <tinyfin/plugin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <dlfcn.h>

namespace {

void host_log(int32_t level, const char *plugin, const char *message) {
    if (level >= TF_LOG_WARN) std::fprintf(stderr, "%s: %s\n", plugin ? plugin : "?", message ? message : "");
}

const char *host_get_env(const char *name) { return name ? std::getenv(name) : nullptr; }

const tf_host_api k_host = {sizeof(tf_host_api), TF_ABI_VERSION, host_log, host_get_env};

struct DlCloser {
    void operator()(void *handle) const noexcept { dlclose(handle); }
};

const tf_plugin *g_table = nullptr;

// The plugin, loaded and initialised once for the whole test binary, shut down at exit before
// it is closed.
const tf_plugin &plugin() {
    static const tf_plugin *table = [] {
        static std::unique_ptr<void, DlCloser> handle(dlopen(TF_BLAS_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL));
        REQUIRE_MESSAGE(handle, dlerror());
        auto entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(handle.get(), TF_PLUGIN_ENTRY_NAME));
        REQUIRE(reinterpret_cast<void *>(entry) != nullptr);
        const tf_plugin *p = entry(&k_host);
        REQUIRE(p != nullptr);
        tf_error err{sizeof(tf_error), {}};
        REQUIRE(p->probe(&err) == TF_STATUS_OK);
        REQUIRE_MESSAGE(p->init(&err) == TF_STATUS_OK, err.message);
        g_table = p;
        std::atexit([] { g_table->shutdown(); });  // runs before the handle's destructor
        return p;
    }();
    return *table;
}

// A tensor over host memory: shape and strides in elements, offset in elements.
tf_tensor_desc tensor(std::vector<float> &memory, std::initializer_list<int64_t> shape,
                      std::initializer_list<int64_t> strides, int64_t offset = 0, int32_t dtype = TF_DTYPE_F32) {
    tf_tensor_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.dtype = dtype;
    d.rank = static_cast<int32_t>(shape.size());
    int i = 0;
    for (int64_t s : shape) d.shape[i++] = s;
    i = 0;
    for (int64_t s : strides) d.strides[i++] = s;
    d.offset = static_cast<uint64_t>(offset) * sizeof(float);
    d.data = memory.data();
    return d;
}

tf_op_desc op_desc(tf_op op, const tf_tensor_desc *inputs, uint32_t n_inputs, const tf_tensor_desc *output,
                   const void *params = nullptr) {
    tf_op_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.op = op;
    d.n_inputs = n_inputs;
    d.n_outputs = 1;
    d.inputs = inputs;
    d.outputs = output;
    d.params = params;
    return d;
}

// Ops run through OpenBLAS so far (the plugin's feature openblas.ops).
uint64_t openblas_ops() {
    std::string value;
    plugin().list_features(
        [](void *user, const char *key, const char *v) {
            if (std::strcmp(key, "openblas.ops") == 0) *static_cast<std::string *>(user) = v;
        },
        &value);
    REQUIRE(!value.empty());
    return std::stoull(value);
}

void run(const tf_op_desc &op) {
    REQUIRE(plugin().supports(0, &op));
    tf_error err{sizeof(tf_error), {}};
    REQUIRE_MESSAGE(plugin().run(0, &op, &err) == TF_STATUS_OK, err.message);
}

// Who ran a descriptor: "openblas", "cpu" (cpu's kernels in blas) or "none" (supports() says no).
std::string runner(const tf_op_desc &op) {
    if (!plugin().supports(0, &op)) return "none";
    const uint64_t before = openblas_ops();
    run(op);
    return openblas_ops() > before ? "openblas" : "cpu";
}

std::vector<float> values(size_t n, uint32_t seed) {
    std::vector<float> v(n);
    for (float &x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
    }
    return v;
}

// Element (i, j) of a strided 2-D view.
float at(const std::vector<float> &m, int64_t offset, int64_t rs, int64_t cs, int64_t i, int64_t j) {
    return m[offset + i * rs + j * cs];
}

void check_matmul(const std::vector<float> &a, int64_t ao, int64_t ars, int64_t acs, const std::vector<float> &b,
                  int64_t bo, int64_t brs, int64_t bcs, const std::vector<float> &c, int64_t co, int64_t crs,
                  int64_t ccs, int64_t m, int64_t k, int64_t n) {
    const double eps = std::numeric_limits<float>::epsilon();
    int bad = 0;
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double want = 0, mag = 0;
            for (int64_t q = 0; q < k; ++q) {
                const double p = double(at(a, ao, ars, acs, i, q)) * at(b, bo, brs, bcs, q, j);
                want += p;
                mag += std::abs(p);
            }
            if (std::abs(at(c, co, crs, ccs, i, j) - want) > 2.0 * (k + 2) * eps * mag) ++bad;
        }
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("matmul writes a column-major output as C^T = B^T A^T") {
    const int64_t m = 40, k = 50, n = 60;
    std::vector<float> a = values(m * k, 1), b = values(k * n, 2), c(m * n + 16, 7.0f);
    // C [m, n] stored column-major (strides 1, m) at offset 16.
    const tf_tensor_desc in[] = {tensor(a, {m, k}, {k, 1}), tensor(b, {k, n}, {n, 1})};
    const tf_tensor_desc out = tensor(c, {m, n}, {1, m}, 16);
    run(op_desc(TF_OP_MATMUL, in, 2, &out));
    check_matmul(a, 0, k, 1, b, 0, n, 1, c, 16, 1, m, m, k, n);
    for (int i = 0; i < 16; ++i) CHECK(c[i] == 7.0f);  // nothing written before the offset
}

TEST_CASE("matmul output with a padded leading dimension leaves the gaps alone") {
    const int64_t m = 33, k = 40, n = 35, ldc = 48;
    std::vector<float> a = values(m * k, 3), b = values(k * n, 4), c(m * ldc, 7.0f);
    const tf_tensor_desc in[] = {tensor(a, {m, k}, {k, 1}), tensor(b, {k, n}, {n, 1})};
    const tf_tensor_desc out = tensor(c, {m, n}, {ldc, 1});
    run(op_desc(TF_OP_MATMUL, in, 2, &out));
    check_matmul(a, 0, k, 1, b, 0, n, 1, c, 0, ldc, 1, m, k, n);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = n; j < ldc; ++j) CHECK(c[i * ldc + j] == 7.0f);
}

TEST_CASE("batched matmul over a broadcast batch axis with an interleaved output") {
    // a [3, m, k] with batch stride 0 (one matrix broadcast), b [3, k, n], c [3, m, n] with the
    // batch axis innermost in memory: strides (1, n*3, 3).
    const int64_t m = 32, k = 36, n = 40, batch = 3;
    std::vector<float> a = values(m * k, 5), b = values(batch * k * n, 6), c(batch * m * n);
    const tf_tensor_desc in[] = {tensor(a, {batch, m, k}, {0, k, 1}), tensor(b, {batch, k, n}, {k * n, n, 1})};
    const tf_tensor_desc out = tensor(c, {batch, m, n}, {1, n * batch, batch});
    // Unit stride on neither axis of a C matrix: sgemm cannot write it, cpu's kernel does.
    CHECK(runner(op_desc(TF_OP_MATMUL, in, 2, &out)) == "cpu");
    for (int64_t t = 0; t < batch; ++t) check_matmul(a, 0, k, 1, b, t * k * n, n, 1, c, t, n * batch, batch, m, k, n);
    const tf_tensor_desc dense = tensor(c, {batch, m, n}, {m * n, n, 1});
    CHECK(runner(op_desc(TF_OP_MATMUL, in, 2, &dense)) == "openblas");
    for (int64_t t = 0; t < batch; ++t) check_matmul(a, 0, k, 1, b, t * k * n, n, 1, c, t * m * n, n, 1, m, k, n);
}

TEST_CASE("sgemm takes what it can do without losing; cpu's kernels the rest; supports says no to the invalid") {
    std::vector<float> a = values(64 * 64, 13), b = values(64 * 64, 14), c(64 * 64);
    const tf_tensor_desc out = tensor(c, {64, 64}, {64, 1});
    auto who = [&](tf_tensor_desc x, tf_tensor_desc y, tf_tensor_desc z) {
        const tf_tensor_desc in[] = {x, y};
        return runner(op_desc(TF_OP_MATMUL, in, 2, &z));
    };
    const tf_tensor_desc a_ok = tensor(a, {64, 64}, {64, 1}), b_ok = tensor(b, {64, 64}, {64, 1});
    CHECK(who(a_ok, b_ok, out) == "openblas");
    check_matmul(a, 0, 64, 1, b, 0, 64, 1, c, 0, 64, 1, 64, 64, 64);
    CHECK(who(tensor(a, {64, 64}, {0, 1}), b_ok, out) == "cpu");  // broadcast rows
    check_matmul(a, 0, 0, 1, b, 0, 64, 1, c, 0, 64, 1, 64, 64, 64);
    CHECK(who(tensor(a, {32, 64}, {128, 2}), b_ok, tensor(c, {32, 64}, {64, 1})) == "cpu");  // no unit stride
    check_matmul(a, 0, 128, 2, b, 0, 64, 1, c, 0, 64, 1, 32, 64, 64);
    CHECK(who(tensor(a, {64, 64}, {32, 1}), b_ok, out) == "cpu");  // overlapping rows: lda < K
    check_matmul(a, 0, 32, 1, b, 0, 64, 1, c, 0, 64, 1, 64, 64, 64);
    CHECK(who(tensor(a, {8, 8}, {8, 1}), tensor(b, {8, 8}, {8, 1}), tensor(c, {8, 8}, {8, 1})) == "cpu");  // too small
    check_matmul(a, 0, 8, 1, b, 0, 8, 1, c, 0, 8, 1, 8, 8, 8);
    std::fill(c.begin(), c.end(), 7.0f);
    CHECK(who(tensor(a, {64, 0}, {1, 1}), tensor(b, {0, 64}, {64, 1}), out) == "cpu");  // K = 0: zeros
    CHECK(std::all_of(c.begin(), c.end(), [](float v) { return v == 0.0f; }));
    // f16 x f16 is cpu's (sgemm is f32 only); mixed dtypes and a K mismatch are invalid.
    const tf_tensor_desc a16 = tensor(a, {64, 64}, {64, 1}, 0, TF_DTYPE_F16);
    CHECK(who(a16, tensor(b, {64, 64}, {64, 1}, 0, TF_DTYPE_F16), tensor(c, {64, 64}, {64, 1}, 0, TF_DTYPE_F16)) ==
          "cpu");
    CHECK(who(a16, b_ok, out) == "none");
    CHECK(who(a_ok, tensor(b, {63, 64}, {64, 1}), out) == "none");  // K mismatch

    // Every op has a row (cpu's): add runs; a malformed descriptor or an unknown op does not.
    const tf_tensor_desc in[] = {a_ok, b_ok};
    const tf_op_desc add = op_desc(TF_OP_ADD, in, 2, &out);
    CHECK(runner(add) == "cpu");
    CHECK(c[5] == a[5] + b[5]);
    for (uint32_t op : {uint32_t(TF_OP_EXP), uint32_t(TF_OP_SOFTMAX), uint32_t(TF_OP_COUNT_), 9999u}) {
        const tf_op_desc d = op_desc(static_cast<tf_op>(op), in, 2, &out);
        CHECK_FALSE(plugin().supports(0, &d));  // exp takes one input, softmax params
    }
    const tf_op_desc d = op_desc(TF_OP_MATMUL, in, 2, &out);
    CHECK_FALSE(plugin().supports(1, &d));  // one device
    CHECK_FALSE(plugin().supports(0, nullptr));
}

namespace {

struct ConvShape {
    int64_t n, c, h, w, o, kh, kw, oh, ow;
};

// y[n, o, oy, ox] over every tap, weights and inputs read through the given index functions.
template <class X, class W>
double conv_at(const ConvShape &s, const tf_params_conv2d &p, X x, W w, int64_t n, int64_t o, int64_t oy, int64_t ox,
               double *magnitude) {
    const int64_t cg = s.c / p.groups, og = s.o / p.groups, grp = o / og;
    double v = 0;
    *magnitude = 0;
    for (int64_t c = 0; c < cg; ++c)
        for (int64_t i = 0; i < s.kh; ++i)
            for (int64_t j = 0; j < s.kw; ++j) {
                const int64_t iy = oy * p.stride[0] - p.padding[0] + i * p.dilation[0];
                const int64_t ix = ox * p.stride[1] - p.padding[1] + j * p.dilation[1];
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                const double t = double(x(n, grp * cg + c, iy, ix)) * w(o, c, i, j);
                v += t;
                *magnitude += std::abs(t);
            }
    return v;
}

}  // namespace

TEST_CASE("conv2d with a permuted weight, a channels-last input and a strided output") {
    // One image: one sgemm call per group; two: both images in one call.
    for (const int64_t images : {1, 2}) {
        CAPTURE(images);
        const ConvShape s{images, 8, 12, 12, 16, 3, 3, 6, 6};
        const tf_params_conv2d p{sizeof(tf_params_conv2d), {2, 2}, {1, 1}, {1, 1}, 1};
        // x stored NHWC, viewed as NCHW; w stored [KH, KW, C, O], viewed as [O, C, KH, KW];
        // y written into every other float of a twice-as-large buffer.
        std::vector<float> x = values(s.n * s.h * s.w * s.c, 8), w = values(s.kh * s.kw * s.c * s.o, 9);
        std::vector<float> y(2 * s.n * s.o * s.oh * s.ow, 7.0f);
        const tf_tensor_desc in[] = {
            tensor(x, {s.n, s.c, s.h, s.w}, {s.h * s.w * s.c, 1, s.w * s.c, s.c}),
            tensor(w, {s.o, s.c, s.kh, s.kw}, {1, s.o, s.kw * s.c * s.o, s.c * s.o}),
        };
        const tf_tensor_desc out =
            tensor(y, {s.n, s.o, s.oh, s.ow}, {2 * s.o * s.oh * s.ow, 2 * s.oh * s.ow, 2 * s.ow, 2});
        run(op_desc(TF_OP_CONV2D, in, 2, &out, &p));
        auto xv = [&](int64_t n, int64_t c, int64_t i, int64_t j) { return x[((n * s.h + i) * s.w + j) * s.c + c]; };
        auto wv = [&](int64_t o, int64_t c, int64_t i, int64_t j) { return w[((i * s.kw + j) * s.c + c) * s.o + o]; };
        const double eps = std::numeric_limits<float>::epsilon();
        int bad = 0;
        for (int64_t n = 0; n < s.n; ++n)
            for (int64_t o = 0; o < s.o; ++o)
                for (int64_t i = 0; i < s.oh; ++i)
                    for (int64_t j = 0; j < s.ow; ++j) {
                        double mag = 0;
                        const double want = conv_at(s, p, xv, wv, n, o, i, j, &mag);
                        const size_t at = 2 * (((n * s.o + o) * s.oh + i) * s.ow + j);
                        if (std::abs(y[at] - want) > 2.0 * (s.c * 9 + 2) * eps * mag) ++bad;
                        if (y[at + 1] != 7.0f) ++bad;  // the gaps are untouched
                    }
        CHECK(bad == 0);
    }
}

TEST_CASE("conv2d gradients into strided outputs") {
    for (const int64_t images : {1, 2}) {
        CAPTURE(images);
        const ConvShape s{images, 6, 12, 12, 12, 3, 3, 12, 12};
        const tf_params_conv2d p{sizeof(tf_params_conv2d), {1, 1}, {1, 1}, {1, 1}, 2};
        const int64_t cg = s.c / p.groups;
        std::vector<float> dy = values(s.n * s.o * s.oh * s.ow, 10), w = values(s.o * cg * s.kh * s.kw, 11);
        std::vector<float> x = values(s.n * s.c * s.h * s.w, 12);
        // dx and dw each written with every element doubled in stride: gaps must stay 7.
        std::vector<float> dx(2 * x.size(), 7.0f), dw(2 * w.size(), 7.0f);
        const tf_tensor_desc dy_d = tensor(dy, {s.n, s.o, s.oh, s.ow}, {s.o * s.oh * s.ow, s.oh * s.ow, s.ow, 1});
        const tf_tensor_desc w_d = tensor(w, {s.o, cg, s.kh, s.kw}, {cg * s.kh * s.kw, s.kh * s.kw, s.kw, 1});
        const tf_tensor_desc x_d = tensor(x, {s.n, s.c, s.h, s.w}, {s.c * s.h * s.w, s.h * s.w, s.w, 1});
        const tf_tensor_desc dx_d = tensor(dx, {s.n, s.c, s.h, s.w}, {2 * s.c * s.h * s.w, 2 * s.h * s.w, 2 * s.w, 2});
        const tf_tensor_desc dw_d =
            tensor(dw, {s.o, cg, s.kh, s.kw}, {2 * cg * s.kh * s.kw, 2 * s.kh * s.kw, 2 * s.kw, 2});
        const tf_tensor_desc gi_in[] = {dy_d, w_d}, gw_in[] = {dy_d, x_d};
        run(op_desc(TF_OP_CONV2D_GRAD_INPUT, gi_in, 2, &dx_d, &p));
        run(op_desc(TF_OP_CONV2D_GRAD_WEIGHT, gw_in, 2, &dw_d, &p));

        // The references: sum over every tap of dy * w into dx, and dy * x into dw.
        std::vector<double> want_dx(x.size()), mag_dx(x.size()), want_dw(w.size()), mag_dw(w.size());
        const int64_t og = s.o / p.groups;
        for (int64_t n = 0; n < s.n; ++n)
            for (int64_t o = 0; o < s.o; ++o)
                for (int64_t oy = 0; oy < s.oh; ++oy)
                    for (int64_t ox = 0; ox < s.ow; ++ox)
                        for (int64_t c = 0; c < cg; ++c)
                            for (int64_t i = 0; i < s.kh; ++i)
                                for (int64_t j = 0; j < s.kw; ++j) {
                                    const int64_t iy = oy - 1 + i, ix = ox - 1 + j;
                                    if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                                    const size_t xi = ((n * s.c + (o / og) * cg + c) * s.h + iy) * s.w + ix;
                                    const size_t wi = ((o * cg + c) * s.kh + i) * s.kw + j;
                                    const double g = dy[((n * s.o + o) * s.oh + oy) * s.ow + ox];
                                    want_dx[xi] += g * w[wi];
                                    mag_dx[xi] += std::abs(g * w[wi]);
                                    want_dw[wi] += g * x[xi];
                                    mag_dw[wi] += std::abs(g * x[xi]);
                                }
        const double eps = std::numeric_limits<float>::epsilon();
        int bad = 0;
        for (size_t i = 0; i < x.size(); ++i) {
            if (std::abs(dx[2 * i] - want_dx[i]) > 2.0 * (og * 9 + 2) * eps * mag_dx[i] + 1e-30) ++bad;
            if (dx[2 * i + 1] != 7.0f) ++bad;
        }
        for (size_t i = 0; i < w.size(); ++i) {
            if (std::abs(dw[2 * i] - want_dw[i]) > 2.0 * (s.n * s.oh * s.ow + 2) * eps * mag_dw[i] + 1e-30) ++bad;
            if (dw[2 * i + 1] != 7.0f) ++bad;
        }
        CHECK(bad == 0);
    }
}

TEST_CASE("conv2d: which geometries sgemm takes, and supports checks params and shapes") {
    std::vector<float> x(2 * 8 * 16 * 16), w(16 * 8 * 3 * 3), y(2 * 16 * 16 * 16);
    // 3 channels, 3x3: 27 taps per output, which OpenBLAS runs at stride 1.
    const tf_tensor_desc in[] = {tensor(x, {2, 3, 16, 16}, {768, 256, 16, 1}), tensor(w, {16, 3, 3, 3}, {27, 9, 3, 1})};
    const tf_tensor_desc out = tensor(y, {2, 16, 16, 16}, {4096, 256, 16, 1});
    tf_params_conv2d p{sizeof(tf_params_conv2d), {1, 1}, {1, 1}, {1, 1}, 1};
    CHECK(runner(op_desc(TF_OP_CONV2D, in, 2, &out, &p)) == "openblas");
    // 8 channels: 72 taps at stride 1 are cpu's kernels' (its shifted kernels are faster); at
    // stride 2, OpenBLAS's again.
    const tf_tensor_desc in8[] = {tensor(x, {2, 8, 16, 16}, {2048, 256, 16, 1}),
                                  tensor(w, {16, 8, 3, 3}, {72, 9, 3, 1})};
    CHECK(runner(op_desc(TF_OP_CONV2D, in8, 2, &out, &p)) == "cpu");
    const tf_tensor_desc out8 = tensor(y, {2, 16, 8, 8}, {1024, 64, 8, 1});
    tf_params_conv2d strided = p;
    strided.stride[0] = strided.stride[1] = 2;
    CHECK(runner(op_desc(TF_OP_CONV2D, in8, 2, &out8, &strided)) == "openblas");
    tf_params_conv2d bad = p;
    bad.padding[0] = 0;  // the output shape no longer fits
    tf_op_desc d = op_desc(TF_OP_CONV2D, in, 2, &out, &bad);
    CHECK_FALSE(plugin().supports(0, &d));
    bad = p;
    bad.groups = 2;  // 3 channels do not split in 2
    d = op_desc(TF_OP_CONV2D, in, 2, &out, &bad);
    CHECK_FALSE(plugin().supports(0, &d));
    bad = p;
    bad.struct_size = 8;
    d = op_desc(TF_OP_CONV2D, in, 2, &out, &bad);
    CHECK_FALSE(plugin().supports(0, &d));
    d = op_desc(TF_OP_CONV2D, in, 2, &out, nullptr);
    CHECK_FALSE(plugin().supports(0, &d));
}

TEST_CASE("buffers: alignment, bounds, and reuse of large freed blocks") {
    const tf_plugin &p = plugin();
    tf_error err{sizeof(tf_error), {}};
    auto alloc = [&](uint64_t size) {
        tf_buffer *b = nullptr;
        REQUIRE_MESSAGE(p.buffer_alloc(0, size, &b, &err) == TF_STATUS_OK, err.message);
        REQUIRE(b != nullptr);
        return b;
    };
    tf_buffer *small = alloc(100);
    const auto small_at = reinterpret_cast<uintptr_t>(p.buffer_host_ptr(small));
    CHECK(small_at % 64 == 0);
    const char bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    char back[8] = {};
    CHECK(p.buffer_write(small, 92, bytes, 8, &err) == TF_STATUS_OK);
    CHECK(p.buffer_read(small, 92, back, 8, &err) == TF_STATUS_OK);
    CHECK(std::memcmp(bytes, back, 8) == 0);
    CHECK(p.buffer_write(small, 93, bytes, 8, &err) == TF_STATUS_INVALID_ARGUMENT);  // one byte past the end
    CHECK(p.buffer_read(small, UINT64_MAX, back, 8, &err) == TF_STATUS_INVALID_ARGUMENT);
    p.buffer_free(small);

    // 3 MiB: a size class of the plugin kit's host cache (four per power of two: 2, 2.5, 3,
    // 3.5 MiB), 2 MiB-aligned huge-page memory; freed, it is handed out again (the cache cpu uses).
    tf_buffer *large = alloc(3u << 20);
    void *large_at = p.buffer_host_ptr(large);
    CHECK(reinterpret_cast<uintptr_t>(large_at) % (2u << 20) == 0);
    CHECK(p.buffer_write(large, (3u << 20) - 8, bytes, 8, &err) == TF_STATUS_OK);
    CHECK(p.buffer_write(large, (3u << 20) - 7, bytes, 8, &err) == TF_STATUS_INVALID_ARGUMENT);  // capacity is not size
    p.buffer_free(large);
    tf_buffer *again = alloc((3u << 20) - 100);  // same 3 MiB class
    CHECK(p.buffer_host_ptr(again) == large_at);
    tf_buffer *other = alloc(3u << 20);  // the cached block is taken: a fresh one
    CHECK(p.buffer_host_ptr(other) != large_at);
    p.buffer_free(again);
    p.buffer_free(other);

    tf_buffer *none = nullptr;
    CHECK(p.buffer_alloc(0, 0, &none, &err) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(p.buffer_alloc(0, UINT64_MAX, &none, &err) == TF_STATUS_OUT_OF_MEMORY);
    CHECK(none == nullptr);
    CHECK(p.buffer_alloc(1, 64, &none, &err) == TF_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("matmul_bias: sgemm then the bias where sgemm takes the product, else cpu's kernel; the bits of matmul "
          "then add") {
    // x [2, 40, 50] (batch folded into sgemm's M), w [50, 60] row-major or transposed; a
    // [3, 4] x [4, 5] product (below sgemm's threshold: cpu's kernel).
    struct Shape3 {
        int64_t batch, m, k, n;
        bool w_transposed;
        const char *who;
    };
    for (const Shape3 &s : {Shape3{2, 40, 50, 60, false, "openblas"}, Shape3{2, 40, 50, 60, true, "openblas"},
                            Shape3{1, 3, 4, 5, false, "cpu"}}) {
        CAPTURE(s.who);
        CAPTURE(s.w_transposed);
        std::vector<float> x = values(static_cast<size_t>(s.batch * s.m * s.k), 41),
                           w = values(static_cast<size_t>(s.k * s.n), 42), b = values(static_cast<size_t>(s.n), 43);
        std::vector<float> fused(static_cast<size_t>(s.batch * s.m * s.n)), product(fused.size()), sum(fused.size());
        const tf_tensor_desc wd = s.w_transposed ? tensor(w, {s.k, s.n}, {1, s.k}) : tensor(w, {s.k, s.n}, {s.n, 1});
        const tf_tensor_desc in[] = {tensor(x, {s.batch, s.m, s.k}, {s.m * s.k, s.k, 1}), wd, tensor(b, {s.n}, {1})};
        const tf_tensor_desc out = tensor(fused, {s.batch, s.m, s.n}, {s.m * s.n, s.n, 1});
        CHECK(runner(op_desc(TF_OP_MATMUL_BIAS, in, 3, &out)) == s.who);
        // matmul with w broadcast over the batch, then add with the bias broadcast over the rows.
        tf_tensor_desc wb = wd;
        wb.rank = 3;
        wb.shape[0] = s.batch;
        wb.shape[1] = s.k;
        wb.shape[2] = s.n;
        wb.strides[0] = 0;
        wb.strides[1] = wd.strides[0];
        wb.strides[2] = wd.strides[1];
        const tf_tensor_desc mm_in[] = {in[0], wb};
        const tf_tensor_desc mm_out = tensor(product, {s.batch, s.m, s.n}, {s.m * s.n, s.n, 1});
        CHECK(runner(op_desc(TF_OP_MATMUL, mm_in, 2, &mm_out)) == s.who);
        const tf_tensor_desc add_in[] = {mm_out, tensor(b, {s.batch, s.m, s.n}, {0, 0, 1})};
        const tf_tensor_desc add_out = tensor(sum, {s.batch, s.m, s.n}, {s.m * s.n, s.n, 1});
        run(op_desc(TF_OP_ADD, add_in, 2, &add_out));
        CHECK(std::memcmp(fused.data(), sum.data(), fused.size() * sizeof(float)) == 0);
        // And within the float64 bound of x w (+ the bias, exact next to it).
        for (size_t i = 0; i < product.size(); ++i) product[i] = fused[i] - b[i % static_cast<size_t>(s.n)];
        for (int64_t t = 0; t < s.batch; ++t)
            check_matmul(x, t * s.m * s.k, s.k, 1, w, 0, wd.strides[0], wd.strides[1], product, t * s.m * s.n, s.n, 1,
                         s.m, s.k, s.n);
    }
}
