// The cpu plugin's kernels for the OWN ops (conv2d and its gradients, pooling, softmax, norms,
// rope, attention, embedding, cross_entropy, one_hot) called directly through the plugin ABI,
// with no core. Results are compared against references written here from the ops' definitions
// (naive loops in double) and against hand-computed values.
#include <doctest/doctest.h>

#include <tinyfin/plugin.h>

#include "plugin_closer.hpp"

#include <dlfcn.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#ifndef TF_CPU_PLUGIN_PATH
#error "build with -DTF_CPU_PLUGIN_PATH=\"/path/to/tinyfin-cpu.so\""
#endif

namespace {

// ---- Loading the plugin -------------------------------------------------------------------

void host_log(int32_t, const char *, const char *) {}
const char *host_get_env(const char *name) { return std::getenv(name); }
const tf_host_api k_host = {sizeof(tf_host_api), TF_ABI_VERSION, host_log, host_get_env};

using DlCloser = PluginCloser<&k_host>;

const tf_plugin &P() {
    static const std::unique_ptr<void, DlCloser> handle(dlopen(TF_CPU_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL));
    static const tf_plugin *table = [] {
        const char *why = dlerror();
        INFO("dlopen(" TF_CPU_PLUGIN_PATH "): ", why ? why : "");
        REQUIRE(handle != nullptr);
        auto entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(handle.get(), TF_PLUGIN_ENTRY_NAME));
        REQUIRE((entry != nullptr));
        const tf_plugin *t = entry(&k_host);
        REQUIRE(t != nullptr);
        tf_error err{};
        err.struct_size = sizeof err;
        REQUIRE(t->init(&err) == TF_STATUS_OK);
        return t;
    }();
    return *table;
}

// ---- Test tensors -------------------------------------------------------------------------

using Dims = std::vector<int64_t>;
using Values = std::vector<double>;

constexpr unsigned char k_sentinel = 0xab;

size_t size_of(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F32:
    case TF_DTYPE_I32: return 4;
    case TF_DTYPE_F16:
    case TF_DTYPE_BF16: return 2;
    case TF_DTYPE_I64: return 8;
    default: return 1;
    }
}

// f16 bits of a value f16 holds exactly (normal numbers and 0 only: all the tests need).
uint16_t f16_bits(double v) {
    if (v == 0) return std::signbit(v) ? 0x8000 : 0;
    int e = 0;
    const double f = std::frexp(std::fabs(v), &e);  // |v| = f * 2^e, f in [0.5, 1)
    const double mant = (f * 2 - 1) * 1024;
    REQUIRE_MESSAGE((mant == std::floor(mant) && e - 1 >= -14 && e - 1 <= 15), "test bug: ", v, " is not an f16");
    return static_cast<uint16_t>((v < 0 ? 0x8000 : 0) | (e - 1 + 15) << 10 | static_cast<int>(mant));
}

double f16_value(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

void put(char *p, int32_t dtype, double v) {
    switch (dtype) {
    case TF_DTYPE_F32: {
        const auto f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        return;
    }
    case TF_DTYPE_F16: {
        const uint16_t b = f16_bits(v);
        std::memcpy(p, &b, 2);
        return;
    }
    case TF_DTYPE_BF16: {
        const uint32_t b = std::bit_cast<uint32_t>(static_cast<float>(v));
        REQUIRE_MESSAGE(((b & 0xffff) == 0 && static_cast<float>(v) == v), "test bug: ", v, " is not a bf16");
        const auto h = static_cast<uint16_t>(b >> 16);
        std::memcpy(p, &h, 2);
        return;
    }
    case TF_DTYPE_I32: {
        const auto i = static_cast<int32_t>(v);
        std::memcpy(p, &i, 4);
        return;
    }
    case TF_DTYPE_I64: {
        const auto i = static_cast<int64_t>(v);
        std::memcpy(p, &i, 8);
        return;
    }
    default: *reinterpret_cast<unsigned char *>(p) = v != 0; return;
    }
}

double take(const char *p, int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    case TF_DTYPE_F16: {
        uint16_t b;
        std::memcpy(&b, p, 2);
        return f16_value(b);
    }
    case TF_DTYPE_BF16: {
        uint16_t b;
        std::memcpy(&b, p, 2);
        return std::bit_cast<float>(uint32_t{b} << 16);
    }
    case TF_DTYPE_I32: {
        int32_t i;
        std::memcpy(&i, p, 4);
        return i;
    }
    case TF_DTYPE_I64: {
        int64_t i;
        std::memcpy(&i, p, 8);
        return static_cast<double>(i);
    }
    default: return *reinterpret_cast<const unsigned char *>(p);
    }
}

// Storage from the plugin's buffer_alloc, filled with sentinel bytes.
struct Block {
    tf_buffer *buffer = nullptr;
    char *data = nullptr;
    size_t bytes = 0;

    explicit Block(size_t n) : bytes(n) {
        tf_error err{};
        err.struct_size = sizeof err;
        REQUIRE(P().buffer_alloc(0, n > 0 ? n : 1, &buffer, &err) == TF_STATUS_OK);
        data = static_cast<char *>(P().buffer_host_ptr(buffer));
        std::memset(data, k_sentinel, n);
    }
    ~Block() { P().buffer_free(buffer); }
    Block(const Block &) = delete;
    Block &operator=(const Block &) = delete;
};

struct TensorDesc {
    std::shared_ptr<Block> mem;
    tf_tensor_desc d{};
};

int64_t count_of(const Dims &shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

Dims contiguous_strides(const Dims &shape) {
    Dims strides(shape.size());
    int64_t s = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = s;
        s *= shape[i];
    }
    return strides;
}

tf_tensor_desc describe(int32_t dtype, const Dims &shape, const Dims &strides, int64_t offset_elems) {
    tf_tensor_desc d{};
    d.struct_size = sizeof d;
    d.dtype = dtype;
    d.rank = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
        d.shape[i] = shape[i];
        d.strides[i] = strides[i];
    }
    d.offset = static_cast<uint64_t>(offset_elems) * size_of(dtype);
    return d;
}

// A view with its own strides and offset (elements) into fresh storage of storage_elems elements.
TensorDesc strided(int32_t dtype, const Dims &shape, const Dims &strides, int64_t offset_elems, int64_t storage_elems) {
    TensorDesc t;
    t.mem = std::make_shared<Block>(static_cast<size_t>(storage_elems) * size_of(dtype));
    t.d = describe(dtype, shape, strides, offset_elems);
    t.d.buffer = t.mem->buffer;
    t.d.data = t.mem->data;
    return t;
}

TensorDesc make(int32_t dtype, const Dims &shape) {
    return strided(dtype, shape, contiguous_strides(shape), 0, count_of(shape));
}

// A descriptor without memory, as supports() may see it.
tf_tensor_desc no_data(int32_t dtype, const Dims &shape) {
    return describe(dtype, shape, contiguous_strides(shape), 0);
}

std::vector<size_t> element_offsets(const tf_tensor_desc &d) {
    std::vector<size_t> offsets;
    int64_t n = 1;
    for (int i = 0; i < d.rank; ++i) n *= d.shape[i];
    std::vector<int64_t> idx(static_cast<size_t>(d.rank), 0);
    for (int64_t e = 0; e < n; ++e) {
        int64_t off = 0;
        for (int i = 0; i < d.rank; ++i) off += idx[static_cast<size_t>(i)] * d.strides[i];
        offsets.push_back(d.offset + static_cast<size_t>(off) * size_of(d.dtype));
        for (int i = d.rank - 1; i >= 0; --i) {
            if (++idx[static_cast<size_t>(i)] < d.shape[i]) break;
            idx[static_cast<size_t>(i)] = 0;
        }
    }
    return offsets;
}

void set(const TensorDesc &t, const Values &v) {
    const auto offsets = element_offsets(t.d);
    REQUIRE(offsets.size() == v.size());
    for (size_t i = 0; i < v.size(); ++i) put(t.mem->data + offsets[i], t.d.dtype, v[i]);
}

Values get(const TensorDesc &t) {
    Values v;
    for (size_t off : element_offsets(t.d)) v.push_back(take(t.mem->data + off, t.d.dtype));
    return v;
}

TensorDesc make(int32_t dtype, const Dims &shape, const Values &v) {
    TensorDesc t = make(dtype, shape);
    set(t, v);
    return t;
}

TensorDesc f32(const Dims &shape, const Values &v) { return make(TF_DTYPE_F32, shape, v); }

// True when no byte of t's storage outside t's elements changed from the sentinel.
bool only_elements_written(const TensorDesc &t) {
    std::vector<bool> mine(t.mem->bytes, false);
    for (size_t off : element_offsets(t.d))
        for (size_t b = 0; b < size_of(t.d.dtype); ++b) mine[off + b] = true;
    for (size_t b = 0; b < t.mem->bytes; ++b)
        if (!mine[b] && static_cast<unsigned char>(t.mem->data[b]) != k_sentinel) return false;
    return true;
}

bool untouched(const TensorDesc &t) {
    for (size_t b = 0; b < t.mem->bytes; ++b)
        if (static_cast<unsigned char>(t.mem->data[b]) != k_sentinel) return false;
    return true;
}

// Random values that f32, f16 and bf16 all hold exactly: multiples of 1/8 in [-2, 2].
Values random_values(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> pick(-16, 16);
    Values v(n);
    for (double &x : v) x = pick(rng) / 8.0;
    return v;
}

// Random f32 values in [-1, 1).
Values random_f32(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
    Values v(n);
    for (double &x : v) x = pick(rng);
    return v;
}

void check_close(const Values &got, const Values &expected, double tol) {
    REQUIRE(got.size() == expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("element ", i, ": got ", got[i], ", expected ", expected[i]);
        if (std::isnan(expected[i])) {
            CHECK(std::isnan(got[i]));
            continue;
        }
        if (std::isinf(expected[i])) {
            CHECK(got[i] == expected[i]);
            continue;
        }
        CHECK(std::fabs(got[i] - expected[i]) <= tol * (1 + std::fabs(expected[i])));
    }
}

// ---- Calling ops --------------------------------------------------------------------------

struct Call {
    tf_op_desc op{};
    std::vector<tf_tensor_desc> inputs;
    tf_tensor_desc output{};

    Call(uint32_t id, std::vector<tf_tensor_desc> ins, tf_tensor_desc out, const void *params)
        : inputs(std::move(ins)), output(out) {
        op.struct_size = sizeof op;
        op.op = id;
        op.n_inputs = static_cast<uint32_t>(inputs.size());
        op.n_outputs = 1;
        op.inputs = inputs.empty() ? nullptr : inputs.data();
        op.outputs = &output;
        op.params = params;
    }
    Call(uint32_t id, std::initializer_list<const TensorDesc *> ins, const TensorDesc &out, const void *params)
        : Call(id, descs(ins), out.d, params) {}

    static std::vector<tf_tensor_desc> descs(std::initializer_list<const TensorDesc *> ins) {
        std::vector<tf_tensor_desc> d;
        for (const TensorDesc *t : ins) d.push_back(t->d);
        return d;
    }

    int32_t supports() const { return P().supports(0, &op); }
    tf_status run(std::string *message = nullptr) const {
        tf_error err{};
        err.struct_size = sizeof err;
        const tf_status status = P().run(0, &op, &err);
        if (message) *message = err.message;
        return status;
    }
};

void run_ok(uint32_t id, std::initializer_list<const TensorDesc *> ins, const TensorDesc &out,
            const void *params = nullptr) {
    const Call c(id, ins, out, params);
    INFO("op ", id);
    REQUIRE(c.supports() == 1);
    std::string message;
    const tf_status status = c.run(&message);
    INFO("message: ", message);
    REQUIRE(status == TF_STATUS_OK);
}

// Runs a call that must fail; returns its message.
std::string run_fails(tf_status expected, uint32_t id, std::initializer_list<const TensorDesc *> ins,
                      const TensorDesc &out, const void *params = nullptr) {
    const Call c(id, ins, out, params);
    std::string message;
    CHECK(c.run(&message) == expected);
    return message;
}

bool contains(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

// ---- References ---------------------------------------------------------------------------

tf_params_conv2d conv_params(int sh, int sw, int ph, int pw, int dh, int dw, int groups) {
    return {sizeof(tf_params_conv2d), {sh, sw}, {ph, pw}, {dh, dw}, groups};
}

struct ConvCase {
    int64_t n, c, h, w, o, kh, kw;
    tf_params_conv2d p;
    int64_t oh() const { return (h + 2 * p.padding[0] - p.dilation[0] * (kh - 1) - 1) / p.stride[0] + 1; }
    int64_t ow() const { return (w + 2 * p.padding[1] - p.dilation[1] * (kw - 1) - 1) / p.stride[1] + 1; }
    Dims x_shape() const { return {n, c, h, w}; }
    Dims w_shape() const { return {o, c / p.groups, kh, kw}; }
    Dims y_shape() const { return {n, o, oh(), ow()}; }
};

// Direct convolution and its two adjoints, in double, from the definition:
// y[n,o,i,j] = sum over c, a, b of x[n, g*C/G + c, i*s - p + a*d, j*s - p + b*d] * w[o, c, a, b].
void naive_conv(const ConvCase &k, const Values &x, const Values &w, const Values &dy, Values &y, Values &dx,
                Values &dw) {
    const int64_t oh = k.oh(), ow = k.ow(), cg = k.c / k.p.groups, og = k.o / k.p.groups;
    y.assign(static_cast<size_t>(k.n * k.o * oh * ow), 0);
    dx.assign(x.size(), 0);
    dw.assign(w.size(), 0);
    for (int64_t n = 0; n < k.n; ++n)
        for (int64_t o = 0; o < k.o; ++o)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    const size_t yi = static_cast<size_t>(((n * k.o + o) * oh + i) * ow + j);
                    for (int64_t c = 0; c < cg; ++c)
                        for (int64_t a = 0; a < k.kh; ++a)
                            for (int64_t b = 0; b < k.kw; ++b) {
                                const int64_t ih = i * k.p.stride[0] - k.p.padding[0] + a * k.p.dilation[0];
                                const int64_t iw = j * k.p.stride[1] - k.p.padding[1] + b * k.p.dilation[1];
                                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                                const int64_t ch = (o / og) * cg + c;
                                const size_t xi = static_cast<size_t>(((n * k.c + ch) * k.h + ih) * k.w + iw);
                                const size_t wi = static_cast<size_t>(((o * cg + c) * k.kh + a) * k.kw + b);
                                y[yi] += x[xi] * w[wi];
                                dx[xi] += dy[yi] * w[wi];
                                dw[wi] += dy[yi] * x[xi];
                            }
                }
}

double dot(const Values &a, const Values &b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// Runs conv2d and both gradients in f32 for one case and checks them against naive_conv and
// against each other (<conv(x), dy> = <x, grad_input(dy)> = <w, grad_weight(dy)>).
void check_conv_case(const ConvCase &k, uint32_t seed) {
    INFO("conv N", k.n, " C", k.c, " H", k.h, " W", k.w, " O", k.o, " K", k.kh, "x", k.kw, " stride ", k.p.stride[0],
         "x", k.p.stride[1], " pad ", k.p.padding[0], "x", k.p.padding[1], " dil ", k.p.dilation[0], "x",
         k.p.dilation[1], " groups ", k.p.groups);
    const Values xv = random_f32(static_cast<size_t>(count_of(k.x_shape())), seed);
    const Values wv = random_f32(static_cast<size_t>(count_of(k.w_shape())), seed + 1);
    const Values dyv = random_f32(static_cast<size_t>(count_of(k.y_shape())), seed + 2);
    Values y_ref, dx_ref, dw_ref;
    naive_conv(k, xv, wv, dyv, y_ref, dx_ref, dw_ref);

    const TensorDesc x = f32(k.x_shape(), xv), w = f32(k.w_shape(), wv), dy = f32(k.y_shape(), dyv);
    const TensorDesc y = make(TF_DTYPE_F32, k.y_shape()), dx = make(TF_DTYPE_F32, k.x_shape()),
                     dw = make(TF_DTYPE_F32, k.w_shape());
    run_ok(TF_OP_CONV2D, {&x, &w}, y, &k.p);
    run_ok(TF_OP_CONV2D_GRAD_INPUT, {&dy, &w}, dx, &k.p);
    run_ok(TF_OP_CONV2D_GRAD_WEIGHT, {&dy, &x}, dw, &k.p);
    // f32 sums of up to `terms` products against double. Beyond about 1000 terms the partial sums
    // grow (~sqrt(terms)) far past results that cancel to near 0, and the rounding error with
    // them: the 5184-tap case sums 7442 products per weight and is off by up to 1.2e-4 there.
    // An indexing error would be off by the size of a product (~0.1) or more.
    const double terms = static_cast<double>(std::max(k.c / k.p.groups * k.kh * k.kw, k.n * k.oh() * k.ow()));
    const double tol = terms <= 1000 ? 1e-5 : 1e-5 * std::sqrt(terms / 20.0);
    check_close(get(y), y_ref, tol);
    check_close(get(dx), dx_ref, tol);
    check_close(get(dw), dw_ref, tol);
    const double forward = dot(get(y), dyv);
    CHECK(dot(xv, get(dx)) == doctest::Approx(forward).epsilon(1e-5));
    CHECK(dot(wv, get(dw)) == doctest::Approx(forward).epsilon(1e-5));
}

tf_params_pool2d pool_params(int kh, int kw, int sh, int sw, int ph, int pw, bool include_pad = false) {
    return {sizeof(tf_params_pool2d), {kh, kw}, {sh, sw}, {ph, pw}, include_pad ? 1 : 0};
}

}  // namespace

// ---- conv2d ---------------------------------------------------------------------------------

TEST_CASE("conv2d and its gradients match a direct convolution") {
    const ConvCase cases[] = {
        {2, 3, 7, 6, 4, 3, 2, conv_params(1, 1, 0, 0, 1, 1, 1)},
        {2, 3, 8, 9, 5, 3, 3, conv_params(2, 2, 1, 1, 1, 1, 1)},  // stride 2, padding
        {1, 2, 9, 8, 3, 3, 3, conv_params(1, 1, 2, 1, 2, 2, 1)},  // dilation 2
        {2, 4, 6, 7, 6, 3, 2, conv_params(1, 2, 1, 0, 1, 1, 2)},  // groups 2
        {3, 2, 5, 9, 4, 5, 3, conv_params(3, 2, 2, 1, 1, 2, 1)},  // odd sizes everywhere
        {2, 5, 4, 6, 3, 1, 1, conv_params(1, 1, 0, 0, 1, 1, 1)},  // 1x1: no column matrix
        {2, 4, 5, 5, 8, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 4)},  // depthwise
        {2, 6, 9, 10, 4, 3, 2, conv_params(2, 1, 2, 1, 2, 3, 2)},  // groups, dilation and stride at once
        {2, 32, 9, 9, 20, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},  // Kg = 288: several GEMM blocks
        {1, 2, 3, 3, 2, 3, 3, conv_params(1, 1, 0, 0, 1, 1, 1)},  // 1x1 output
        {1, 1, 28, 28, 32, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},  // the Fashion-MNIST first layer
        // Kg = 64 * 9 * 9 = 5184 taps by OW = 61: the column matrix goes in bands of 13 output
        // rows (16 MiB), the last one short; stride 2 in W, 2 images for the gradient's sum.
        {2, 64, 61, 121, 3, 9, 9, conv_params(1, 2, 4, 4, 1, 1, 1)},
        // Stride 1 with at least 32 taps (4 images and more for the weight gradient): the path
        // that reads a padded image in place (kernels_conv.cpp), with several bands of output
        // rows, groups, dilation, uneven padding, a padding the flipped convolution of
        // grad_input cannot express (3 > (3 - 1) * 1: that gradient takes the column matrix).
        {8, 32, 9, 11, 20, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {4, 16, 10, 9, 16, 3, 3, conv_params(1, 1, 2, 1, 2, 1, 2)},
        {5, 8, 7, 12, 12, 5, 3, conv_params(1, 1, 0, 0, 1, 1, 1)},
        {4, 8, 6, 6, 8, 3, 3, conv_params(1, 1, 3, 3, 1, 1, 1)},
        {4, 64, 30, 30, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {8, 64, 12, 12, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},  // whole images per task, 3 bands each
    };
    uint32_t seed = 100;
    for (const ConvCase &k : cases) check_conv_case(k, seed += 10);
}

TEST_CASE("conv2d gradients keep infinities where the definition puts them") {
    // The padded-image path computes discarded positions (and, for grad_input, multiplies the
    // zeros around dy by the weights): an infinity there would turn into a NaN the definition
    // does not have. An infinite input in the last column (read only by discarded positions of
    // taps in the first column) and an infinite weight must give the reference's infinities and
    // NaNs, nothing more.
    const ConvCase k{4, 16, 6, 7, 8, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)};
    Values xv = random_f32(static_cast<size_t>(count_of(k.x_shape())), 31);
    Values wv = random_f32(static_cast<size_t>(count_of(k.w_shape())), 32);
    const Values dyv = random_f32(static_cast<size_t>(count_of(k.y_shape())), 33);
    xv[static_cast<size_t>(((1 * k.c + 3) * k.h + 2) * k.w + k.w - 1)] = INFINITY;
    wv[static_cast<size_t>(((2 * k.c + 5) * k.kh + 0) * k.kw + 0)] = -INFINITY;
    Values y_ref, dx_ref, dw_ref;
    naive_conv(k, xv, wv, dyv, y_ref, dx_ref, dw_ref);
    const TensorDesc x = f32(k.x_shape(), xv), w = f32(k.w_shape(), wv), dy = f32(k.y_shape(), dyv);
    const TensorDesc dx = make(TF_DTYPE_F32, k.x_shape()), dw = make(TF_DTYPE_F32, k.w_shape());
    run_ok(TF_OP_CONV2D_GRAD_INPUT, {&dy, &w}, dx, &k.p);
    run_ok(TF_OP_CONV2D_GRAD_WEIGHT, {&dy, &x}, dw, &k.p);
    check_close(get(dx), dx_ref, 1e-5);
    check_close(get(dw), dw_ref, 1e-5);
}

TEST_CASE("conv2d reads strided inputs, writes a strided output and is deterministic") {
    const ConvCase k{2, 3, 6, 5, 4, 3, 3, conv_params(2, 1, 1, 1, 1, 1, 1)};
    const Values xv = random_f32(static_cast<size_t>(count_of(k.x_shape())), 7);
    const Values wv = random_f32(static_cast<size_t>(count_of(k.w_shape())), 8);
    const Values dyv(static_cast<size_t>(count_of(k.y_shape())), 0.0);
    Values y_ref, dx_ref, dw_ref;
    naive_conv(k, xv, wv, dyv, y_ref, dx_ref, dw_ref);

    // x stored NHWC, viewed as NCHW; w at an offset with a gap between output channels.
    const TensorDesc x =
        strided(TF_DTYPE_F32, k.x_shape(), {k.h * k.w * k.c, 1, k.w * k.c, k.c}, 0, count_of(k.x_shape()));
    set(x, xv);
    const int64_t per_o = 3 * 3 * 3;
    const TensorDesc w = strided(TF_DTYPE_F32, k.w_shape(), {per_o + 2, 9, 3, 1}, 5, 5 + 4 * (per_o + 2));
    set(w, wv);
    // y: every other column of a wider buffer.
    const Dims ys = k.y_shape();
    const TensorDesc y = strided(TF_DTYPE_F32, ys, {ys[1] * ys[2] * ys[3] * 2, ys[2] * ys[3] * 2, ys[3] * 2, 2}, 1,
                                 count_of(ys) * 2 + 1);
    run_ok(TF_OP_CONV2D, {&x, &w}, y, &k.p);
    check_close(get(y), y_ref, 1e-5);
    CHECK(only_elements_written(y));

    const TensorDesc y2 = make(TF_DTYPE_F32, ys);
    run_ok(TF_OP_CONV2D, {&x, &w}, y2, &k.p);
    const Values first = get(y2);
    run_ok(TF_OP_CONV2D, {&x, &w}, y2, &k.p);
    CHECK(get(y2) == first);  // bit for bit
    CHECK(get(y) == first);  // the layouts do not change the arithmetic
}

TEST_CASE("conv2d in f16 and bf16 computes in f32 and rounds once") {
    const ConvCase k{2, 4, 5, 6, 4, 3, 3, conv_params(1, 2, 1, 1, 1, 1, 2)};
    const Values xv = random_values(static_cast<size_t>(count_of(k.x_shape())), 21);
    const Values wv = random_values(static_cast<size_t>(count_of(k.w_shape())), 22);
    const Values dyv = random_values(static_cast<size_t>(count_of(k.y_shape())), 23);
    Values y_ref, dx_ref, dw_ref;
    naive_conv(k, xv, wv, dyv, y_ref, dx_ref, dw_ref);
    for (int32_t dtype : {TF_DTYPE_F16, TF_DTYPE_BF16}) {
        INFO("dtype ", dtype);
        // Sums of products of multiples of 1/8 are multiples of 1/64, exact in f32; rounding the
        // result once to the narrow type is the only error.
        const double tol = dtype == TF_DTYPE_F16 ? 1.0 / 1024 : 1.0 / 128;
        const TensorDesc x = make(dtype, k.x_shape(), xv), w = make(dtype, k.w_shape(), wv),
                         dy = make(dtype, k.y_shape(), dyv);
        const TensorDesc y = make(dtype, k.y_shape()), dx = make(dtype, k.x_shape()), dw = make(dtype, k.w_shape());
        run_ok(TF_OP_CONV2D, {&x, &w}, y, &k.p);
        run_ok(TF_OP_CONV2D_GRAD_INPUT, {&dy, &w}, dx, &k.p);
        run_ok(TF_OP_CONV2D_GRAD_WEIGHT, {&dy, &x}, dw, &k.p);
        check_close(get(y), y_ref, tol);
        check_close(get(dx), dx_ref, tol);
        check_close(get(dw), dw_ref, tol);
    }
}

TEST_CASE("conv2d supports() checks shapes, params and dtypes without data") {
    const tf_params_conv2d p = conv_params(1, 1, 0, 0, 1, 1, 1);
    auto supports = [](uint32_t op, std::vector<tf_tensor_desc> in, tf_tensor_desc out, const void *params) {
        return Call(op, std::move(in), out, params).supports();
    };
    const auto x = no_data(TF_DTYPE_F32, {1, 2, 5, 5}), w = no_data(TF_DTYPE_F32, {3, 2, 3, 3}),
               y = no_data(TF_DTYPE_F32, {1, 3, 3, 3});
    CHECK(supports(TF_OP_CONV2D, {x, w}, y, &p) == 1);
    CHECK(supports(TF_OP_CONV2D_GRAD_INPUT, {y, w}, x, &p) == 1);
    CHECK(supports(TF_OP_CONV2D_GRAD_WEIGHT, {y, x}, w, &p) == 1);
    for (int32_t dtype : {TF_DTYPE_F16, TF_DTYPE_BF16})
        CHECK(supports(TF_OP_CONV2D, {no_data(dtype, {1, 2, 5, 5}), no_data(dtype, {3, 2, 3, 3})},
                       no_data(dtype, {1, 3, 3, 3}), &p) == 1);

    CHECK(supports(TF_OP_CONV2D, {x, w}, no_data(TF_DTYPE_F32, {1, 3, 4, 3}), &p) == 0);  // wrong OH
    CHECK(supports(TF_OP_CONV2D, {x, w}, no_data(TF_DTYPE_F32, {2, 3, 3, 3}), &p) == 0);  // wrong N
    CHECK(supports(TF_OP_CONV2D, {x, no_data(TF_DTYPE_F32, {3, 1, 3, 3})}, y, &p) == 0);  // C != weight[1]
    CHECK(supports(TF_OP_CONV2D, {x, no_data(TF_DTYPE_F32, {3, 2, 3})}, y, &p) == 0);  // rank 3
    CHECK(supports(TF_OP_CONV2D, {no_data(TF_DTYPE_I32, {1, 2, 5, 5}), no_data(TF_DTYPE_I32, {3, 2, 3, 3})},
                   no_data(TF_DTYPE_I32, {1, 3, 3, 3}), &p) == 0);
    CHECK(supports(TF_OP_CONV2D, {x, no_data(TF_DTYPE_F16, {3, 2, 3, 3})}, y, &p) == 0);  // mixed dtypes
    CHECK(supports(TF_OP_CONV2D, {x, w}, y, nullptr) == 0);
    tf_params_conv2d small = p;
    small.struct_size = sizeof small - 4;
    CHECK(supports(TF_OP_CONV2D, {x, w}, y, &small) == 0);
    for (tf_params_conv2d bad : {conv_params(0, 1, 0, 0, 1, 1, 1), conv_params(1, 1, -1, 0, 1, 1, 1),
                                 conv_params(1, 1, 0, 0, 1, 0, 1), conv_params(1, 1, 0, 0, 1, 1, 0)})
        CHECK(supports(TF_OP_CONV2D, {x, w}, y, &bad) == 0);
    CHECK(supports(TF_OP_CONV2D, {x}, y, &p) == 0);

    // Groups: C = 4 = weight[1] * 2 and O = 6 divisible by 2; O = 5 is not.
    const tf_params_conv2d g2 = conv_params(1, 1, 1, 1, 1, 1, 2);
    const auto x4 = no_data(TF_DTYPE_F32, {1, 4, 5, 5});
    CHECK(supports(TF_OP_CONV2D, {x4, no_data(TF_DTYPE_F32, {6, 2, 3, 3})}, no_data(TF_DTYPE_F32, {1, 6, 5, 5}), &g2) ==
          1);
    CHECK(supports(TF_OP_CONV2D, {x4, no_data(TF_DTYPE_F32, {5, 2, 3, 3})}, no_data(TF_DTYPE_F32, {1, 5, 5, 5}), &g2) ==
          0);
    CHECK(supports(TF_OP_CONV2D, {x4, no_data(TF_DTYPE_F32, {6, 4, 3, 3})}, no_data(TF_DTYPE_F32, {1, 6, 5, 5}), &g2) ==
          0);
    // Stride 2 on H = 6 gives OH = 3 from several H: grad_input takes H from its output.
    const tf_params_conv2d s2 = conv_params(2, 2, 0, 0, 1, 1, 1);
    CHECK(supports(TF_OP_CONV2D_GRAD_INPUT, {no_data(TF_DTYPE_F32, {1, 3, 2, 2}), w},
                   no_data(TF_DTYPE_F32, {1, 2, 6, 6}), &s2) == 1);
    CHECK(supports(TF_OP_CONV2D_GRAD_INPUT, {no_data(TF_DTYPE_F32, {1, 3, 2, 2}), w},
                   no_data(TF_DTYPE_F32, {1, 2, 7, 7}), &s2) == 0);

    const TensorDesc xt = make(TF_DTYPE_F32, {1, 2, 5, 5}), wt = make(TF_DTYPE_F32, {3, 2, 3, 3}),
                     yt = make(TF_DTYPE_F32, {1, 3, 4, 3});
    const std::string message = run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_CONV2D, {&xt, &wt}, yt, &p);
    CHECK(contains(message, "conv2d"));
    CHECK(contains(message, "[1, 3, 4, 3]"));
    CHECK(contains(message, "[1, 3, 3, 3]"));
    CHECK(untouched(yt));
}

namespace {

// Best of `runs` calls of fn, in wall time and in this thread's CPU time (which other processes
// on a busy machine do not inflate).
std::pair<double, double> best_time(int runs, const std::function<void()> &fn) {
    fn();
    double wall = 1e30, cpu = 1e30;
    for (int i = 0; i < runs; ++i) {
        timespec c0{}, c1{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        const auto w0 = std::chrono::steady_clock::now();
        fn();
        wall = std::min(wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        cpu = std::min(cpu, static_cast<double>(c1.tv_sec - c0.tv_sec) +
                                static_cast<double>(c1.tv_nsec - c0.tv_nsec) * 1e-9);
    }
    return {wall, cpu};
}

}  // namespace

TEST_CASE("speed of the Fashion-MNIST CNN's conv and pool shapes" * doctest::skip(std::getenv("TF_BENCH") == nullptr)) {
    const ConvCase k{64, 32, 14, 14, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)};
    const TensorDesc x = f32(k.x_shape(), random_f32(static_cast<size_t>(count_of(k.x_shape())), 1));
    const TensorDesc w = f32(k.w_shape(), random_f32(static_cast<size_t>(count_of(k.w_shape())), 2));
    const TensorDesc y = make(TF_DTYPE_F32, k.y_shape()), dx = make(TF_DTYPE_F32, k.x_shape()),
                     dw = make(TF_DTYPE_F32, k.w_shape());
    const double flops = 2.0 * 64 * 64 * 14 * 14 * 32 * 9;
    struct {
        const char *name;
        uint32_t op;
        const TensorDesc *a, *b, *out;
    } const convs[] = {{"conv2d", TF_OP_CONV2D, &x, &w, &y},
                       {"conv2d_grad_input", TF_OP_CONV2D_GRAD_INPUT, &y, &w, &dx},
                       {"conv2d_grad_weight", TF_OP_CONV2D_GRAD_WEIGHT, &y, &x, &dw}};
    for (const auto &c : convs) {
        const auto [wall, cpu] = best_time(10, [&] { run_ok(c.op, {c.a, c.b}, *c.out, &k.p); });
        MESSAGE(std::string(c.name), " [64,32,14,14] x [64,32,3,3] pad 1: ", wall * 1e3, " ms wall (",
                flops / wall / 1e9, " GFLOP/s), ", cpu * 1e3, " ms cpu (", flops / cpu / 1e9, " GFLOP/s)");
    }

    // The first layer's 2x2 max pool, [64, 32, 28, 28] -> [64, 32, 14, 14].
    const TensorDesc px = f32({64, 32, 28, 28}, random_f32(64 * 32 * 28 * 28, 3));
    const TensorDesc py = make(TF_DTYPE_F32, {64, 32, 14, 14}), pdx = make(TF_DTYPE_F32, {64, 32, 28, 28});
    const tf_params_pool2d pp = pool_params(2, 2, 2, 2, 0, 0);
    const auto fwd = best_time(10, [&] { run_ok(TF_OP_MAX_POOL2D, {&px}, py, &pp); });
    const auto bwd = best_time(10, [&] { run_ok(TF_OP_MAX_POOL2D_BACKWARD, {&py, &px}, pdx, &pp); });
    MESSAGE("max_pool2d [64,32,28,28] 2x2: ", fwd.first * 1e3, " ms wall, ", fwd.second * 1e3, " ms cpu; backward ",
            bwd.first * 1e3, " ms wall, ", bwd.second * 1e3, " ms cpu");
}

// ---- Pooling --------------------------------------------------------------------------------

TEST_CASE("max_pool2d: windows, ties, padding as -inf, gradient to the first maximum") {
    // 4x4, 2x2 windows, stride 2. The top-left window ties (5 twice): the first one wins.
    const TensorDesc x = f32({1, 1, 4, 4}, {5, 1, 2, 3, 0, 5, 9, 4, -1, -2, 7, 7, -3, -4, 7, 6});
    const tf_params_pool2d p = pool_params(2, 2, 2, 2, 0, 0);
    const TensorDesc y = make(TF_DTYPE_F32, {1, 1, 2, 2});
    run_ok(TF_OP_MAX_POOL2D, {&x}, y, &p);
    CHECK(get(y) == Values{5, 9, -1, 7});
    const TensorDesc dy = f32({1, 1, 2, 2}, {1, 2, 3, 4});
    const TensorDesc dx = make(TF_DTYPE_F32, {1, 1, 4, 4});
    run_ok(TF_OP_MAX_POOL2D_BACKWARD, {&dy, &x}, dx, &p);
    CHECK(get(dx) == Values{1, 0, 0, 0, 0, 0, 2, 0, 3, 0, 4, 0, 0, 0, 0, 0});

    // Negative inputs with padding 1: padding must never win. 3x3 windows, stride 2, on 3x3.
    const TensorDesc xn = f32({1, 1, 3, 3}, {-5, -4, -3, -6, -9, -2, -7, -8, -1});
    const tf_params_pool2d pp = pool_params(3, 3, 2, 2, 1, 1);
    const TensorDesc yn = make(TF_DTYPE_F32, {1, 1, 2, 2});
    run_ok(TF_OP_MAX_POOL2D, {&xn}, yn, &pp);
    CHECK(get(yn) == Values{-4, -2, -6, -1});
    const TensorDesc dyn = f32({1, 1, 2, 2}, {1, 1, 1, 1});
    const TensorDesc dxn = make(TF_DTYPE_F32, {1, 1, 3, 3});
    run_ok(TF_OP_MAX_POOL2D_BACKWARD, {&dyn, &xn}, dxn, &pp);
    CHECK(get(dxn) == Values{0, 1, 0, 1, 0, 1, 0, 0, 1});

    // Overlapping windows (stride 1) add their gradients; NaN is the maximum.
    const TensorDesc xo = f32({1, 1, 1, 4}, {1, 3, NAN, 2});
    const tf_params_pool2d po = pool_params(1, 2, 1, 1, 0, 0);
    const TensorDesc yo = make(TF_DTYPE_F32, {1, 1, 1, 3});
    run_ok(TF_OP_MAX_POOL2D, {&xo}, yo, &po);
    const Values got = get(yo);
    CHECK(got[0] == 3);
    CHECK(std::isnan(got[1]));
    CHECK(std::isnan(got[2]));
    const TensorDesc dyo = f32({1, 1, 1, 3}, {10, 20, 40});
    const TensorDesc dxo = make(TF_DTYPE_F32, {1, 1, 1, 4});
    run_ok(TF_OP_MAX_POOL2D_BACKWARD, {&dyo, &xo}, dxo, &po);
    CHECK(get(dxo) == Values{0, 10, 60, 0});
}

// Values match exactly (check_close with no tolerance), and so do the signs of the non-NaN
// ones (-0 and +0 compare equal).
void check_same_floats(const Values &got, const Values &expected) {
    check_close(got, expected, 0.0);
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("element ", i, ": got ", got[i], ", expected ", expected[i]);
        if (!std::isnan(expected[i])) CHECK(std::signbit(got[i]) == std::signbit(expected[i]));
    }
}

TEST_CASE(
    "max_pool2d 2x2 stride 2 (the vector path): odd sizes, ties, NaN and signed zeros against a naive reference") {
    // Widths below, at and past the four windows per step (a last group overlapping the one
    // before), odd heights and widths (a last row and column no window reads), odd numbers of
    // output rows, the example CNN's 14- and 7-wide outputs; values from a small set so that
    // windows tie often.
    const std::vector<Dims> shapes = {{2, 3, 7, 9},  {1, 2, 6, 21},  {1, 1, 5, 4},   {3, 1, 2, 2},
                                      {1, 2, 4, 17}, {2, 3, 28, 28}, {1, 3, 15, 14}, {2, 1, 10, 11}};
    const double pool[] = {0.5, -0.5, 1.0, 0.0, -0.0, NAN, -1.0, 0.5};
    const tf_params_pool2d p = pool_params(2, 2, 2, 2, 0, 0);
    uint32_t seed = 40;
    for (const Dims &s : shapes) {
        CAPTURE(s[2]);
        CAPTURE(s[3]);
        std::mt19937 rng(seed++);
        std::uniform_int_distribution<int> pick(0, 7);
        Values xv(static_cast<size_t>(count_of(s)));
        for (double &v : xv) v = pool[pick(rng)];
        const int64_t planes = s[0] * s[1], h = s[2], w = s[3], oh = h / 2, ow = w / 2;
        Values dyv = random_f32(static_cast<size_t>(planes * oh * ow), seed++);
        dyv[0] = -0.0;  // dx gets 0 + dy, as in the general path: +0
        dyv[1] = NAN;
        Values want_y(dyv.size()), want_dx(xv.size(), 0.0);
        for (int64_t pl = 0; pl < planes; ++pl)
            for (int64_t oy = 0; oy < oh; ++oy)
                for (int64_t ox = 0; ox < ow; ++ox) {
                    // The first maximum in window order; NaN beats numbers, the first NaN wins.
                    size_t at = static_cast<size_t>((pl * h + 2 * oy) * w + 2 * ox);
                    for (int64_t i = 0; i < 2; ++i)
                        for (int64_t j = 0; j < 2; ++j) {
                            const size_t e = static_cast<size_t>((pl * h + 2 * oy + i) * w + 2 * ox + j);
                            if (xv[e] > xv[at] || (std::isnan(xv[e]) && !std::isnan(xv[at]))) at = e;
                        }
                    const size_t o = static_cast<size_t>((pl * oh + oy) * ow + ox);
                    want_y[o] = xv[at];
                    want_dx[at] = static_cast<double>(0.0f + static_cast<float>(dyv[o]));
                }
        const TensorDesc x = f32(s, xv), y = make(TF_DTYPE_F32, {s[0], s[1], oh, ow});
        run_ok(TF_OP_MAX_POOL2D, {&x}, y, &p);
        check_same_floats(get(y), want_y);
        const TensorDesc dy = f32({s[0], s[1], oh, ow}, dyv), dx = make(TF_DTYPE_F32, s);
        run_ok(TF_OP_MAX_POOL2D_BACKWARD, {&dy, &x}, dx, &p);
        check_same_floats(get(dx), want_dx);
    }
}

TEST_CASE("avg_pool2d with and without count_include_pad, and its backward") {
    const TensorDesc x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    const TensorDesc y = make(TF_DTYPE_F32, {1, 1, 2, 2});
    // 2x2 windows, stride 2, padding 1: windows {1}, {2,3}, {4,7}, {5,6,8,9}.
    const tf_params_pool2d ex = pool_params(2, 2, 2, 2, 1, 1, false);
    run_ok(TF_OP_AVG_POOL2D, {&x}, y, &ex);
    CHECK(get(y) == Values{1, 2.5, 5.5, 7});
    const tf_params_pool2d in = pool_params(2, 2, 2, 2, 1, 1, true);
    run_ok(TF_OP_AVG_POOL2D, {&x}, y, &in);
    CHECK(get(y) == Values{0.25, 1.25, 2.75, 7});

    const TensorDesc dy = f32({1, 1, 2, 2}, {4, 8, 12, 16});
    const TensorDesc dx = make(TF_DTYPE_F32, {1, 1, 3, 3});
    run_ok(TF_OP_AVG_POOL2D_BACKWARD, {&dy}, dx, &ex);
    CHECK(get(dx) == Values{4, 4, 4, 6, 4, 4, 6, 4, 4});
    run_ok(TF_OP_AVG_POOL2D_BACKWARD, {&dy}, dx, &in);
    CHECK(get(dx) == Values{1, 2, 2, 3, 4, 4, 3, 4, 4});

    // Overlapping 3x3 windows, stride 1, padding 1: the backward is the forward's adjoint.
    const Values xv = random_f32(2 * 3 * 5 * 4, 5), dyv = random_f32(2 * 3 * 5 * 4, 6);
    const TensorDesc xr = f32({2, 3, 5, 4}, xv), yr = make(TF_DTYPE_F32, {2, 3, 5, 4});
    const TensorDesc dyr = f32({2, 3, 5, 4}, dyv), dxr = make(TF_DTYPE_F32, {2, 3, 5, 4});
    for (bool include : {false, true}) {
        const tf_params_pool2d p = pool_params(3, 3, 1, 1, 1, 1, include);
        run_ok(TF_OP_AVG_POOL2D, {&xr}, yr, &p);
        run_ok(TF_OP_AVG_POOL2D_BACKWARD, {&dyr}, dxr, &p);
        CHECK(dot(get(yr), dyv) == doctest::Approx(dot(xv, get(dxr))).epsilon(1e-6));
    }
}

TEST_CASE("pooling on strided f16 input, and supports() on pooling descriptors") {
    // x [1, 2, 2, 4] stored as [1, 2, 4, 2] transposed in the last two axes.
    const TensorDesc x = strided(TF_DTYPE_F16, {1, 2, 2, 4}, {16, 8, 1, 2}, 0, 16);
    set(x, {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8});
    const TensorDesc y = make(TF_DTYPE_F16, {1, 2, 1, 2});
    const tf_params_pool2d p = pool_params(2, 2, 2, 2, 0, 0);
    run_ok(TF_OP_MAX_POOL2D, {&x}, y, &p);
    CHECK(get(y) == Values{6, 8, -1, -3});
    run_ok(TF_OP_AVG_POOL2D, {&x}, y, &p);
    CHECK(get(y) == Values{3.5, 5.5, -3.5, -5.5});

    auto supports = [](uint32_t op, std::vector<tf_tensor_desc> in, tf_tensor_desc out, const void *params) {
        return Call(op, std::move(in), out, params).supports();
    };
    const auto xd = no_data(TF_DTYPE_F32, {1, 2, 4, 4}), yd = no_data(TF_DTYPE_F32, {1, 2, 2, 2});
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, yd, &p) == 1);
    CHECK(supports(TF_OP_AVG_POOL2D, {xd}, yd, &p) == 1);
    CHECK(supports(TF_OP_MAX_POOL2D_BACKWARD, {yd, xd}, xd, &p) == 1);
    CHECK(supports(TF_OP_AVG_POOL2D_BACKWARD, {yd}, xd, &p) == 1);
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, no_data(TF_DTYPE_F32, {1, 2, 3, 2}), &p) == 0);
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, no_data(TF_DTYPE_F32, {1, 3, 2, 2}), &p) == 0);
    CHECK(supports(TF_OP_MAX_POOL2D_BACKWARD, {yd, xd}, no_data(TF_DTYPE_F32, {1, 2, 5, 4}), &p) == 0);
    CHECK(supports(TF_OP_MAX_POOL2D_BACKWARD, {yd, no_data(TF_DTYPE_F32, {1, 2, 5, 4})}, xd, &p) == 0);
    CHECK(supports(TF_OP_MAX_POOL2D, {no_data(TF_DTYPE_I64, {1, 2, 4, 4})}, no_data(TF_DTYPE_I64, {1, 2, 2, 2}), &p) ==
          0);
    const tf_params_pool2d too_much_pad = pool_params(2, 2, 2, 2, 2, 0);
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, no_data(TF_DTYPE_F32, {1, 2, 4, 2}), &too_much_pad) == 0);
    const tf_params_pool2d zero_stride = pool_params(2, 2, 0, 2, 0, 0);
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, yd, &zero_stride) == 0);
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, yd, nullptr) == 0);
}

// ---- softmax, log_softmax -------------------------------------------------------------------

TEST_CASE("softmax and log_softmax: hand values, huge logits, rows sum to 1, any axis") {
    const tf_params_axis last{sizeof(tf_params_axis), 1};
    const TensorDesc x = f32({2, 3}, {0, std::log(2.0f), std::log(5.0f), 1000, 1000, -INFINITY});
    const TensorDesc y = make(TF_DTYPE_F32, {2, 3});
    run_ok(TF_OP_SOFTMAX, {&x}, y, &last);
    check_close(get(y), {0.125, 0.25, 0.625, 0.5, 0.5, 0}, 1e-6);
    run_ok(TF_OP_LOG_SOFTMAX, {&x}, y, &last);
    check_close(get(y), {std::log(0.125), std::log(0.25), std::log(0.625), std::log(0.5), std::log(0.5), -INFINITY},
                1e-6);

    // A row of -inf has no maximum to shift by: NaN, as in torch.
    const TensorDesc all_inf = f32({1, 2}, {-INFINITY, -INFINITY});
    const TensorDesc out = make(TF_DTYPE_F32, {1, 2});
    run_ok(TF_OP_SOFTMAX, {&all_inf}, out, &last);
    CHECK(std::isnan(get(out)[0]));

    // Axis 1 of [3, 4, 5], viewed through a transposed layout.
    const Values v = random_f32(60, 3);
    const TensorDesc xs = strided(TF_DTYPE_F32, {3, 4, 5}, {1, 15, 3}, 0, 60);
    set(xs, v);
    const tf_params_axis mid{sizeof(tf_params_axis), 1};
    const TensorDesc ys = make(TF_DTYPE_F32, {3, 4, 5}), ls = make(TF_DTYPE_F32, {3, 4, 5});
    run_ok(TF_OP_SOFTMAX, {&xs}, ys, &mid);
    run_ok(TF_OP_LOG_SOFTMAX, {&xs}, ls, &mid);
    const Values xv = get(xs), sv = get(ys), lv = get(ls);
    for (int a = 0; a < 3; ++a)
        for (int c = 0; c < 5; ++c) {
            double sum = 0, max = -INFINITY;
            for (int b = 0; b < 4; ++b) max = std::max(max, xv[static_cast<size_t>((a * 4 + b) * 5 + c)]);
            for (int b = 0; b < 4; ++b) sum += std::exp(xv[static_cast<size_t>((a * 4 + b) * 5 + c)] - max);
            double total = 0;
            for (int b = 0; b < 4; ++b) {
                const size_t i = static_cast<size_t>((a * 4 + b) * 5 + c);
                CHECK(sv[i] == doctest::Approx(std::exp(xv[i] - max) / sum).epsilon(1e-6));
                CHECK(lv[i] == doctest::Approx(xv[i] - max - std::log(sum)).epsilon(1e-6));
                total += sv[i];
            }
            CHECK(total == doctest::Approx(1.0).epsilon(1e-6));
        }

    const tf_params_axis bad{sizeof(tf_params_axis), 3};
    CHECK(Call(TF_OP_SOFTMAX, {no_data(TF_DTYPE_F32, {3, 4, 5})}, no_data(TF_DTYPE_F32, {3, 4, 5}), &bad).supports() ==
          0);
    CHECK(Call(TF_OP_SOFTMAX, {no_data(TF_DTYPE_F32, {3, 4, 5})}, no_data(TF_DTYPE_F32, {3, 4, 5}), &mid).supports() ==
          1);
    CHECK(Call(TF_OP_SOFTMAX, {no_data(TF_DTYPE_F32, {3, 4, 5})}, no_data(TF_DTYPE_F32, {3, 5, 4}), &mid).supports() ==
          0);
    CHECK(Call(TF_OP_LOG_SOFTMAX, {no_data(TF_DTYPE_I32, {3})}, no_data(TF_DTYPE_I32, {3}), &last).supports() == 0);
}

TEST_CASE("softmax and log_softmax along the last axis (vectorized rows) match double exp") {
    // Row lengths around the 16 lanes and long rows; logits over [-40, 40] so that some
    // exponentials underflow; then rows with -inf entries, a NaN, +inf and all -inf.
    const tf_params_axis last{sizeof(tf_params_axis), 1};
    std::mt19937 rng(21);
    std::uniform_real_distribution<float> pick(-40.0f, 40.0f);
    for (int64_t len : {1, 15, 16, 17, 100, 4099}) {
        CAPTURE(len);
        const int64_t rows = 7;
        Values v(static_cast<size_t>(rows * len));
        for (double &e : v) e = pick(rng);
        v[static_cast<size_t>(len)] = -INFINITY;  // row 1: one -inf
        for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(2 * len + i)] = -INFINITY;  // row 2: all -inf
        v[static_cast<size_t>(3 * len + len / 2)] = NAN;  // row 3: a NaN
        v[static_cast<size_t>(4 * len)] = INFINITY;  // row 4: +inf
        const TensorDesc x = f32({rows, len}, v);
        const TensorDesc y = make(TF_DTYPE_F32, {rows, len}), l = make(TF_DTYPE_F32, {rows, len});
        run_ok(TF_OP_SOFTMAX, {&x}, y, &last);
        run_ok(TF_OP_LOG_SOFTMAX, {&x}, l, &last);
        const Values sv = get(y), lv = get(l), xv = get(x);
        for (int64_t r = 0; r < rows; ++r) {
            CAPTURE(r);
            const double *row = xv.data() + r * len;
            double max = -INFINITY, sum = 0;
            bool nan = false;
            for (int64_t i = 0; i < len; ++i) {
                nan = nan || std::isnan(row[i]);
                max = std::max(max, row[i]);
            }
            for (int64_t i = 0; i < len; ++i) sum += std::exp(row[i] - max);
            for (int64_t i = 0; i < len; ++i) {
                const size_t k = static_cast<size_t>(r * len + i);
                if (std::isinf(max) || nan) {  // all -inf, a +inf maximum, a NaN
                    CHECK((r >= 1 && r <= 4));  // row 1 too when it is a single -inf
                    CHECK(std::isnan(sv[k]));
                    CHECK(std::isnan(lv[k]));
                    continue;
                }
                const double p = std::exp(row[i] - max) / sum, lp = (row[i] - max) - std::log(sum);
                if (p == 0) {  // a -inf logit
                    CHECK(sv[k] == 0);
                    CHECK(lv[k] == -INFINITY);
                    continue;
                }
                // x - max rounded to f32 (relative error 2^-24 |x - max| in the exponential), exp
                // within 2 ulp, one scaling; results below FLT_MIN may flush to 0.
                CHECK(std::fabs(sv[k] - p) <= (4e-7 + 0x1p-24 * std::fabs(row[i] - max)) * p + 0x1p-126);
                if (std::isinf(lp))
                    CHECK(lv[k] == lp);
                else
                    CHECK(std::fabs(lv[k] - lp) <= 2e-7 * std::fabs(lp) + 1e-6);
            }
        }
    }
}

// ---- layer_norm, rms_norm -------------------------------------------------------------------

TEST_CASE("layer_norm and rms_norm match their formulas over 1 and 2 axes") {
    const Values xv = random_f32(2 * 3 * 4, 11);
    for (int n_axes : {1, 2}) {
        INFO("n_axes ", n_axes);
        const Dims s = n_axes == 1 ? Dims{4} : Dims{3, 4};
        const int64_t len = count_of(s), rows = 24 / len;
        const Values wv = random_f32(static_cast<size_t>(len), 12), bv = random_f32(static_cast<size_t>(len), 13);
        // x viewed through a layout with the first two axes swapped.
        const TensorDesc x = strided(TF_DTYPE_F32, {2, 3, 4}, {4, 8, 1}, 0, 24);
        set(x, xv);
        const TensorDesc w = f32(s, wv), b = f32(s, bv);
        const TensorDesc y = make(TF_DTYPE_F32, {2, 3, 4}), r = make(TF_DTYPE_F32, {2, 3, 4});
        const tf_params_norm p{sizeof(tf_params_norm), n_axes, 1e-5};
        run_ok(TF_OP_LAYER_NORM, {&x, &w, &b}, y, &p);
        run_ok(TF_OP_RMS_NORM, {&x, &w}, r, &p);
        Values y_ref, r_ref;
        for (int64_t row = 0; row < rows; ++row) {
            double mean = 0, var = 0, sq = 0;
            for (int64_t i = 0; i < len; ++i) mean += xv[static_cast<size_t>(row * len + i)] / static_cast<double>(len);
            for (int64_t i = 0; i < len; ++i) {
                const double v = xv[static_cast<size_t>(row * len + i)];
                var += (v - mean) * (v - mean) / static_cast<double>(len);
                sq += v * v / static_cast<double>(len);
            }
            for (int64_t i = 0; i < len; ++i) {
                const double v = xv[static_cast<size_t>(row * len + i)];
                y_ref.push_back((v - mean) / std::sqrt(var + 1e-5) * wv[static_cast<size_t>(i)] +
                                bv[static_cast<size_t>(i)]);
                r_ref.push_back(v / std::sqrt(sq + 1e-5) * wv[static_cast<size_t>(i)]);
            }
        }
        check_close(get(y), y_ref, 1e-5);
        check_close(get(r), r_ref, 1e-5);
    }
    const tf_params_norm p{sizeof(tf_params_norm), 1, 1e-5};
    const tf_params_norm three{sizeof(tf_params_norm), 3, 1e-5};
    const auto x = no_data(TF_DTYPE_F32, {2, 4}), s = no_data(TF_DTYPE_F32, {4});
    CHECK(Call(TF_OP_LAYER_NORM, {x, s, s}, x, &p).supports() == 1);
    CHECK(Call(TF_OP_RMS_NORM, {x, s}, x, &p).supports() == 1);
    CHECK(Call(TF_OP_LAYER_NORM, {x, s, no_data(TF_DTYPE_F32, {2})}, x, &p).supports() == 0);
    CHECK(Call(TF_OP_RMS_NORM, {x, no_data(TF_DTYPE_F32, {2, 4})}, x, &p).supports() == 0);
    CHECK(Call(TF_OP_RMS_NORM, {x, s}, x, &three).supports() == 0);
    CHECK(Call(TF_OP_RMS_NORM, {x, s}, x, nullptr).supports() == 0);
}

// ---- rope -----------------------------------------------------------------------------------

TEST_CASE("rope in both layouts matches the formula, and inverse undoes it") {
    const int64_t b = 2, t = 3, d = 8;
    const Values xv = random_f32(static_cast<size_t>(b * t * d), 31);
    for (int interleaved : {0, 1}) {
        INFO("interleaved ", interleaved);
        const tf_params_rope p{sizeof(tf_params_rope), interleaved, 0, 100.0, 5};
        const tf_params_rope inv{sizeof(tf_params_rope), interleaved, 1, 100.0, 5};
        // x viewed with the batch axis outermost in memory but T and D swapped.
        const TensorDesc x = strided(TF_DTYPE_F32, {b, t, d}, {t * d, 1, t}, 0, b * t * d);
        set(x, xv);
        const TensorDesc y = make(TF_DTYPE_F32, {b, t, d}), back = make(TF_DTYPE_F32, {b, t, d});
        run_ok(TF_OP_ROPE, {&x}, y, &p);
        run_ok(TF_OP_ROPE, {&y}, back, &inv);
        Values ref(xv.size());
        for (int64_t bb = 0; bb < b; ++bb)
            for (int64_t tt = 0; tt < t; ++tt)
                for (int64_t i = 0; i < d / 2; ++i) {
                    const double angle =
                        static_cast<double>(5 + tt) * std::pow(100.0, -2.0 * static_cast<double>(i) / d);
                    const int64_t j0 = interleaved ? 2 * i : i, j1 = interleaved ? 2 * i + 1 : i + d / 2;
                    const size_t base = static_cast<size_t>((bb * t + tt) * d);
                    const double x0 = xv[base + static_cast<size_t>(j0)], x1 = xv[base + static_cast<size_t>(j1)];
                    ref[base + static_cast<size_t>(j0)] = x0 * std::cos(angle) - x1 * std::sin(angle);
                    ref[base + static_cast<size_t>(j1)] = x0 * std::sin(angle) + x1 * std::cos(angle);
                }
        check_close(get(y), ref, 1e-6);
        check_close(get(back), xv, 1e-6);
    }
    const tf_params_rope p{sizeof(tf_params_rope), 0, 0, 10000.0, 0};
    CHECK(Call(TF_OP_ROPE, {no_data(TF_DTYPE_F32, {2, 4})}, no_data(TF_DTYPE_F32, {2, 4}), &p).supports() == 1);
    CHECK(Call(TF_OP_ROPE, {no_data(TF_DTYPE_F32, {2, 5})}, no_data(TF_DTYPE_F32, {2, 5}), &p).supports() == 0);
    CHECK(Call(TF_OP_ROPE, {no_data(TF_DTYPE_F32, {4})}, no_data(TF_DTYPE_F32, {4}), &p).supports() == 0);
    const tf_params_rope zero_theta{sizeof(tf_params_rope), 0, 0, 0.0, 0};
    CHECK(Call(TF_OP_ROPE, {no_data(TF_DTYPE_F32, {2, 4})}, no_data(TF_DTYPE_F32, {2, 4}), &zero_theta).supports() ==
          0);
}

// ---- attention ------------------------------------------------------------------------------

namespace {

// softmax(q k^T * scale + mask [+ causal]) v for one [..., T, D] batch laid out densely.
Values naive_attention(int64_t batches, int64_t tq, int64_t tk, int64_t d, int64_t dv, const Values &q, const Values &k,
                       const Values &v, const Values &mask, bool causal, double scale) {
    Values out(static_cast<size_t>(batches * tq * dv));
    for (int64_t b = 0; b < batches; ++b)
        for (int64_t i = 0; i < tq; ++i) {
            std::vector<double> s(static_cast<size_t>(tk));
            double max = -INFINITY;
            for (int64_t j = 0; j < tk; ++j) {
                double dotp = 0;
                for (int64_t e = 0; e < d; ++e)
                    dotp += q[static_cast<size_t>((b * tq + i) * d + e)] * k[static_cast<size_t>((b * tk + j) * d + e)];
                s[static_cast<size_t>(j)] = dotp * scale + mask[static_cast<size_t>((b * tq + i) * tk + j)];
                if (causal && j > i + (tk - tq)) s[static_cast<size_t>(j)] = -INFINITY;
                max = std::max(max, s[static_cast<size_t>(j)]);
            }
            double sum = 0;
            for (double &x : s) sum += (x = std::exp(x - max));
            for (int64_t e = 0; e < dv; ++e) {
                double acc = 0;
                for (int64_t j = 0; j < tk; ++j)
                    acc += s[static_cast<size_t>(j)] / sum * v[static_cast<size_t>((b * tk + j) * dv + e)];
                out[static_cast<size_t>((b * tq + i) * dv + e)] = max == -INFINITY ? NAN : acc;
            }
        }
    return out;
}

}  // namespace

TEST_CASE("attention matches softmax(q k^T) v, with causal and a broadcast mask") {
    const int64_t heads = 2, batch = 2, d = 5, dv = 3;
    for (const std::pair<int64_t, int64_t> &sizes : {std::pair<int64_t, int64_t>{4, 4}, {3, 6}, {1, 5}}) {
        const int64_t tq = sizes.first, tk = sizes.second;
        for (int causal : {0, 1}) {
            INFO("Tq ", tq, " Tk ", tk, " causal ", causal);
            const int64_t nb = heads * batch;
            const Values qv = random_f32(static_cast<size_t>(nb * tq * d), 41),
                         kv = random_f32(static_cast<size_t>(nb * tk * d), 42),
                         vv = random_f32(static_cast<size_t>(nb * tk * dv), 43),
                         mrow = random_f32(static_cast<size_t>(tk), 44);
            // The mask is one row [Tk] broadcast to [batch, heads, Tq, Tk] with stride 0.
            const TensorDesc mask_row = f32({tk}, mrow);
            TensorDesc mask = mask_row;
            mask.d = describe(TF_DTYPE_F32, {batch, heads, tq, tk}, {0, 0, 0, 1}, 0);
            mask.d.data = mask_row.d.data;
            mask.d.buffer = mask_row.d.buffer;
            Values mv;
            for (int64_t r = 0; r < nb * tq; ++r) mv.insert(mv.end(), mrow.begin(), mrow.end());
            // k as a transposed view: stored [batch, heads, D, Tk].
            const TensorDesc q = f32({batch, heads, tq, d}, qv);
            const TensorDesc k =
                strided(TF_DTYPE_F32, {batch, heads, tk, d}, {heads * d * tk, d * tk, 1, tk}, 0, nb * tk * d);
            set(k, kv);
            const TensorDesc v = f32({batch, heads, tk, dv}, vv);
            const TensorDesc out = make(TF_DTYPE_F32, {batch, heads, tq, dv});
            const tf_params_attention p{sizeof(tf_params_attention), causal, 0, 0.5};
            run_ok(TF_OP_ATTENTION, {&q, &k, &v, &mask}, out, &p);
            check_close(get(out), naive_attention(nb, tq, tk, d, dv, qv, kv, vv, mv, causal != 0, 0.5), 1e-5);
        }
    }

    // The transformer's layout: q, k and v are the heads' column blocks of one [B, T, 3 H D]
    // projection (rows 3 H D floats apart, copied row by row), the mask one scalar broadcast to
    // every axis (stride 0 everywhere, filled once). A constant mask cancels in the softmax; -inf
    // hides every key, so every output is NaN, which tells the fill from a zero one.
    {
        const int64_t b = 2, h = 2, t = 5, dd = 4, row = 3 * h * dd;
        const Values all = random_f32(static_cast<size_t>(b * t * row), 45);
        const TensorDesc qkv = f32({b, t, row}, all);
        auto head_view = [&](int64_t part) {
            TensorDesc x = qkv;
            x.d = describe(TF_DTYPE_F32, {b, h, t, dd}, {t * row, dd, row, 1}, part * h * dd);
            x.d.data = qkv.d.data;
            x.d.buffer = qkv.d.buffer;
            return x;
        };
        const TensorDesc q = head_view(0), k = head_view(1), v = head_view(2);
        Values qd, kd, vd;  // the same heads dense, [b, h, t, dd]
        for (int64_t bb = 0; bb < b; ++bb)
            for (int64_t hh = 0; hh < h; ++hh)
                for (int64_t tt = 0; tt < t; ++tt)
                    for (int64_t e = 0; e < dd; ++e) {
                        const size_t at = static_cast<size_t>((bb * t + tt) * row + hh * dd + e);
                        qd.push_back(all[at]);
                        kd.push_back(all[at + static_cast<size_t>(h * dd)]);
                        vd.push_back(all[at + static_cast<size_t>(2 * h * dd)]);
                    }
        for (const double value : {0.75, static_cast<double>(-INFINITY)}) {
            INFO("scalar mask ", value);
            const TensorDesc scalar = f32({1}, {value});
            TensorDesc mask = scalar;
            mask.d = describe(TF_DTYPE_F32, {b, h, t, t}, {0, 0, 0, 0}, 0);
            mask.d.data = scalar.d.data;
            mask.d.buffer = scalar.d.buffer;
            const TensorDesc out = make(TF_DTYPE_F32, {b, h, t, dd});
            const tf_params_attention p{sizeof(tf_params_attention), 1, 0, 0.5};
            run_ok(TF_OP_ATTENTION, {&q, &k, &v, &mask}, out, &p);
            const Values mv(static_cast<size_t>(b * h * t * t), value);
            const Values ref = naive_attention(b * h, t, t, dd, dd, qd, kd, vd, mv, true, 0.5);
            const Values got = get(out);
            if (value == -INFINITY) {
                for (const double g : got) CHECK(std::isnan(g));
            } else {
                check_close(got, ref, 1e-5);
            }
        }
    }

    // Causal with Tq > Tk: the first Tq - Tk queries see no key and give NaN; so does a row
    // masked entirely with -inf.
    const TensorDesc q = f32({3, 2}, {1, 0, 0, 1, 1, 1}), k = f32({2, 2}, {1, 0, 0, 1}), v = f32({2, 1}, {10, 20});
    const TensorDesc mask = f32({3, 2}, {0, 0, -INFINITY, -INFINITY, 0, 0});
    const TensorDesc out = make(TF_DTYPE_F32, {3, 1});
    const tf_params_attention causal{sizeof(tf_params_attention), 1, 0, 1.0};
    const TensorDesc zeros = f32({3, 2}, {0, 0, 0, 0, 0, 0});
    run_ok(TF_OP_ATTENTION, {&q, &k, &v, &zeros}, out, &causal);
    Values got = get(out);
    CHECK(std::isnan(got[0]));
    CHECK(got[1] == doctest::Approx(10.0));  // sees key 0 only
    CHECK(got[2] == doctest::Approx(15.0));  // equal scores
    const tf_params_attention plain{sizeof(tf_params_attention), 0, 0, 1.0};
    run_ok(TF_OP_ATTENTION, {&q, &k, &v, &mask}, out, &plain);
    got = get(out);
    CHECK(got[0] == doctest::Approx((10 * std::exp(1.0) + 20) / (std::exp(1.0) + 1)));
    CHECK(std::isnan(got[1]));

    const auto qd = no_data(TF_DTYPE_F32, {2, 4}), kd = no_data(TF_DTYPE_F32, {3, 4}),
               vd = no_data(TF_DTYPE_F32, {3, 5}), md = no_data(TF_DTYPE_F32, {2, 3}),
               od = no_data(TF_DTYPE_F32, {2, 5});
    CHECK(Call(TF_OP_ATTENTION, {qd, kd, vd, md}, od, &plain).supports() == 1);
    CHECK(Call(TF_OP_ATTENTION, {qd, kd, vd, no_data(TF_DTYPE_F32, {2, 4})}, od, &plain).supports() == 0);
    CHECK(Call(TF_OP_ATTENTION, {qd, no_data(TF_DTYPE_F32, {3, 3}), vd, md}, od, &plain).supports() == 0);
    CHECK(Call(TF_OP_ATTENTION, {qd, kd, vd, md}, no_data(TF_DTYPE_F32, {2, 4}), &plain).supports() == 0);
    CHECK(Call(TF_OP_ATTENTION,
               {no_data(TF_DTYPE_F32, {2, 2, 4}), no_data(TF_DTYPE_F32, {1, 3, 4}), no_data(TF_DTYPE_F32, {2, 3, 5}),
                no_data(TF_DTYPE_F32, {2, 2, 3})},
               no_data(TF_DTYPE_F32, {2, 2, 5}), &plain)
              .supports() == 0);  // batch dims not expanded
    CHECK(Call(TF_OP_ATTENTION, {qd, kd, vd, no_data(TF_DTYPE_F16, {2, 3})}, od, &plain).supports() == 0);
}

// ---- embedding ------------------------------------------------------------------------------

TEST_CASE("embedding gathers rows, and its backward adds repeated indices") {
    Values table;
    for (int r = 0; r < 10; ++r)
        for (int c = 0; c < 3; ++c) table.push_back(r * 10 + c);
    const TensorDesc w = f32({10, 3}, table);
    for (int32_t idx_dtype : {TF_DTYPE_I32, TF_DTYPE_I64}) {
        const TensorDesc idx = make(idx_dtype, {2, 2}, {3, 0, 3, 9});
        const TensorDesc out = make(TF_DTYPE_F32, {2, 2, 3});
        run_ok(TF_OP_EMBEDDING, {&w, &idx}, out, nullptr);
        CHECK(get(out) == Values{30, 31, 32, 0, 1, 2, 30, 31, 32, 90, 91, 92});

        const TensorDesc dy = f32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
        const TensorDesc dw = make(TF_DTYPE_F32, {10, 3});
        run_ok(TF_OP_EMBEDDING_BACKWARD, {&dy, &idx}, dw, nullptr);
        Values expected(30, 0);
        for (int j = 0; j < 3; ++j) {
            expected[static_cast<size_t>(3 * 3 + j)] = (1 + j) + (7 + j);
            expected[static_cast<size_t>(0 * 3 + j)] = 4 + j;
            expected[static_cast<size_t>(9 * 3 + j)] = 10 + j;
        }
        CHECK(get(dw) == expected);
    }

    // An i64 table is copied bit for bit; the output may be strided.
    const TensorDesc wi = make(TF_DTYPE_I64, {3, 2});
    const int64_t big[] = {INT64_MIN, 1, 2, 3, INT64_MAX, -7};
    std::memcpy(wi.mem->data, big, sizeof big);
    const TensorDesc idx = make(TF_DTYPE_I32, {2}, {2, 0});
    const TensorDesc oi = strided(TF_DTYPE_I64, {2, 2}, {1, 2}, 0, 4);
    run_ok(TF_OP_EMBEDDING, {&wi, &idx}, oi, nullptr);
    int64_t got[4];
    std::memcpy(got, oi.mem->data, sizeof got);
    CHECK(got[0] == INT64_MAX);
    CHECK(got[1] == INT64_MIN);
    CHECK(got[2] == -7);
    CHECK(got[3] == 1);

    // Out of range: nothing written, the index and the range named.
    const TensorDesc bad = make(TF_DTYPE_I64, {3}, {1, 12, 2});
    const TensorDesc out = make(TF_DTYPE_F32, {3, 3});
    CHECK(run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_EMBEDDING, {&w, &bad}, out) ==
          "embedding: index 12 is out of range [0, 10)");
    CHECK(untouched(out));
    const TensorDesc negative = make(TF_DTYPE_I32, {1}, {-1});
    const TensorDesc out1 = make(TF_DTYPE_F32, {1, 3});
    CHECK(contains(run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_EMBEDDING, {&w, &negative}, out1), "index -1"));
    const TensorDesc dy = f32({3, 3}, Values(9, 1.0));
    const TensorDesc dw = make(TF_DTYPE_F32, {10, 3});
    CHECK(run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_EMBEDDING_BACKWARD, {&dy, &bad}, dw) ==
          "embedding_backward: index 12 is out of range [0, 10)");
    CHECK(untouched(dw));

    CHECK(Call(TF_OP_EMBEDDING, {no_data(TF_DTYPE_F32, {5, 3}), no_data(TF_DTYPE_I64, {2})},
               no_data(TF_DTYPE_F32, {2, 3}), nullptr)
              .supports() == 1);
    CHECK(Call(TF_OP_EMBEDDING, {no_data(TF_DTYPE_F32, {5, 3}), no_data(TF_DTYPE_F32, {2})},
               no_data(TF_DTYPE_F32, {2, 3}), nullptr)
              .supports() == 0);
    CHECK(Call(TF_OP_EMBEDDING, {no_data(TF_DTYPE_F32, {5, 3}), no_data(TF_DTYPE_I64, {2})},
               no_data(TF_DTYPE_F32, {2, 4}), nullptr)
              .supports() == 0);
    CHECK(Call(TF_OP_EMBEDDING_BACKWARD, {no_data(TF_DTYPE_F32, {2, 3}), no_data(TF_DTYPE_I64, {2})},
               no_data(TF_DTYPE_F32, {5, 3}), nullptr)
              .supports() == 1);
    CHECK(Call(TF_OP_EMBEDDING_BACKWARD, {no_data(TF_DTYPE_F32, {2, 3}), no_data(TF_DTYPE_I64, {3})},
               no_data(TF_DTYPE_F32, {5, 3}), nullptr)
              .supports() == 0);
}

// ---- cross_entropy --------------------------------------------------------------------------

TEST_CASE("cross_entropy: each reduction, ignore_index, huge logits, bad labels") {
    const Values lv = {1, 2, 3, 0, 0, 0, 1000, 0, -1000, -1, 5, 2};
    const TensorDesc logits = f32({4, 3}, lv);
    const TensorDesc labels = make(TF_DTYPE_I64, {4}, {2, 1, 0, -100});
    auto row_loss = [&](int r, int label) {
        double max = -INFINITY, sum = 0;
        for (int c = 0; c < 3; ++c) max = std::max(max, lv[static_cast<size_t>(r * 3 + c)]);
        for (int c = 0; c < 3; ++c) sum += std::exp(lv[static_cast<size_t>(r * 3 + c)] - max);
        return max + std::log(sum) - lv[static_cast<size_t>(r * 3 + label)];
    };
    const double l0 = row_loss(0, 2), l1 = row_loss(1, 1), l2 = row_loss(2, 0);
    CHECK(l1 == doctest::Approx(std::log(3.0)));

    const tf_params_cross_entropy none{sizeof(tf_params_cross_entropy), TF_REDUCTION_NONE, -100};
    const TensorDesc per_row = make(TF_DTYPE_F32, {4});
    run_ok(TF_OP_CROSS_ENTROPY, {&logits, &labels}, per_row, &none);
    check_close(get(per_row), {l0, l1, l2, 0}, 1e-6);

    const TensorDesc scalar = make(TF_DTYPE_F32, {});
    const tf_params_cross_entropy sum{sizeof(tf_params_cross_entropy), TF_REDUCTION_SUM, -100};
    run_ok(TF_OP_CROSS_ENTROPY, {&logits, &labels}, scalar, &sum);
    check_close(get(scalar), {l0 + l1 + l2}, 1e-6);
    const tf_params_cross_entropy mean{sizeof(tf_params_cross_entropy), TF_REDUCTION_MEAN, -100};
    run_ok(TF_OP_CROSS_ENTROPY, {&logits, &labels}, scalar, &mean);
    check_close(get(scalar), {(l0 + l1 + l2) / 3}, 1e-6);

    // i32 labels, and every row ignored: mean is NaN, sum is 0.
    const TensorDesc ignored = make(TF_DTYPE_I32, {4}, {7, 7, 7, 7});
    const tf_params_cross_entropy mean7{sizeof(tf_params_cross_entropy), TF_REDUCTION_MEAN, 7};
    run_ok(TF_OP_CROSS_ENTROPY, {&logits, &ignored}, scalar, &mean7);
    CHECK(std::isnan(get(scalar)[0]));
    const tf_params_cross_entropy sum7{sizeof(tf_params_cross_entropy), TF_REDUCTION_SUM, 7};
    run_ok(TF_OP_CROSS_ENTROPY, {&logits, &ignored}, scalar, &sum7);
    CHECK(get(scalar) == Values{0});

    // Labels outside [0, C) that are not ignore_index: nothing written.
    const TensorDesc bad = make(TF_DTYPE_I64, {4}, {0, 3, 1, 1});
    const TensorDesc fresh = make(TF_DTYPE_F32, {});
    const std::string message =
        run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_CROSS_ENTROPY, {&logits, &bad}, fresh, &mean);
    CHECK(contains(message, "cross_entropy"));
    CHECK(contains(message, "label 3"));
    CHECK(contains(message, "[0, 3)"));
    CHECK(untouched(fresh));
    const TensorDesc negative = make(TF_DTYPE_I64, {4}, {0, -1, 1, 1});
    CHECK(contains(run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_CROSS_ENTROPY, {&logits, &negative}, fresh, &mean),
                   "label -1"));

    const auto ld = no_data(TF_DTYPE_F32, {2, 3}), yd = no_data(TF_DTYPE_I64, {2});
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, yd}, no_data(TF_DTYPE_F32, {}), &mean).supports() == 1);
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, yd}, no_data(TF_DTYPE_F32, {2}), &none).supports() == 1);
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, yd}, no_data(TF_DTYPE_F32, {2}), &mean).supports() == 0);
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, yd}, no_data(TF_DTYPE_F32, {}), &none).supports() == 0);
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, no_data(TF_DTYPE_I64, {3})}, no_data(TF_DTYPE_F32, {}), &mean).supports() ==
          0);
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, no_data(TF_DTYPE_F32, {2})}, no_data(TF_DTYPE_F32, {}), &mean).supports() ==
          0);
    const tf_params_cross_entropy bad_reduction{sizeof(tf_params_cross_entropy), 3, -100};
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, yd}, no_data(TF_DTYPE_F32, {}), &bad_reduction).supports() == 0);
}

// ---- one_hot --------------------------------------------------------------------------------

TEST_CASE("one_hot into float, integer and bool outputs; out-of-range labels fail") {
    const tf_params_one_hot p{sizeof(tf_params_one_hot), 3};
    const TensorDesc labels = make(TF_DTYPE_I32, {2, 2}, {0, 2, 1, 2});
    const Values expected = {1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1};
    for (int32_t dtype : {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_I64, TF_DTYPE_BOOL}) {
        INFO("dtype ", dtype);
        const TensorDesc out = make(dtype, {2, 2, 3});
        run_ok(TF_OP_ONE_HOT, {&labels}, out, &p);
        CHECK(get(out) == expected);
    }
    const TensorDesc labels64 = make(TF_DTYPE_I64, {3}, {2, 1, 0});
    const TensorDesc strided_out = strided(TF_DTYPE_F32, {3, 3}, {1, 3}, 0, 9);  // transposed
    run_ok(TF_OP_ONE_HOT, {&labels64}, strided_out, &p);
    CHECK(get(strided_out) == Values{0, 0, 1, 0, 1, 0, 1, 0, 0});

    const TensorDesc bad = make(TF_DTYPE_I64, {2}, {1, 3});
    const TensorDesc out = make(TF_DTYPE_F32, {2, 3});
    CHECK(run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_ONE_HOT, {&bad}, out, &p) ==
          "one_hot: label 3 is out of range [0, 3)");
    CHECK(untouched(out));

    CHECK(Call(TF_OP_ONE_HOT, {no_data(TF_DTYPE_I64, {2})}, no_data(TF_DTYPE_F32, {2, 3}), &p).supports() == 1);
    CHECK(Call(TF_OP_ONE_HOT, {no_data(TF_DTYPE_I64, {2})}, no_data(TF_DTYPE_F32, {2, 4}), &p).supports() == 0);
    CHECK(Call(TF_OP_ONE_HOT, {no_data(TF_DTYPE_F32, {2})}, no_data(TF_DTYPE_F32, {2, 3}), &p).supports() == 0);
    const tf_params_one_hot zero{sizeof(tf_params_one_hot), 0};
    CHECK(Call(TF_OP_ONE_HOT, {no_data(TF_DTYPE_I64, {2})}, no_data(TF_DTYPE_F32, {2, 0}), &zero).supports() == 0);
}

TEST_CASE("f16 and bf16 inputs give the f32 results rounded once") {
    // Inputs are multiples of 1/8 in [-2, 2], exact in all three dtypes; each narrow result must
    // be within one rounding of the f32 result.
    const Values x = random_values(4 * 6, 61), w = random_values(6, 62), b = random_values(6, 63);
    const Values q = random_values(2 * 3 * 4, 64), k = random_values(2 * 5 * 4, 65), v = random_values(2 * 5 * 2, 66);
    const Values mask = random_values(2 * 3 * 5, 67);
    const tf_params_axis axis{sizeof(tf_params_axis), 1};
    const tf_params_norm norm{sizeof(tf_params_norm), 1, 1e-5};
    const tf_params_rope rope{sizeof(tf_params_rope), 1, 0, 10000.0, 3};
    const tf_params_attention att{sizeof(tf_params_attention), 1, 0, 0.5};
    const tf_params_cross_entropy ce{sizeof(tf_params_cross_entropy), TF_REDUCTION_NONE, -100};
    const TensorDesc labels = make(TF_DTYPE_I64, {4}, {5, 0, 2, 3});
    // All results of one dtype, in a fixed order.
    auto run_all = [&](int32_t dtype) {
        Values all;
        auto append = [&](const TensorDesc &t) {
            const Values got = get(t);
            all.insert(all.end(), got.begin(), got.end());
        };
        const TensorDesc xt = make(dtype, {4, 6}, x), wt = make(dtype, {6}, w), bt = make(dtype, {6}, b);
        const TensorDesc out = make(dtype, {4, 6});
        for (uint32_t op : {TF_OP_SOFTMAX, TF_OP_LOG_SOFTMAX}) {
            run_ok(op, {&xt}, out, &axis);
            append(out);
        }
        run_ok(TF_OP_LAYER_NORM, {&xt, &wt, &bt}, out, &norm);
        append(out);
        run_ok(TF_OP_RMS_NORM, {&xt, &wt}, out, &norm);
        append(out);
        run_ok(TF_OP_ROPE, {&xt}, out, &rope);
        append(out);
        const TensorDesc qt = make(dtype, {2, 3, 4}, q), kt = make(dtype, {2, 5, 4}, k), vt = make(dtype, {2, 5, 2}, v),
                         mt = make(dtype, {2, 3, 5}, mask), ot = make(dtype, {2, 3, 2});
        run_ok(TF_OP_ATTENTION, {&qt, &kt, &vt, &mt}, ot, &att);
        append(ot);
        const TensorDesc loss = make(dtype, {4});
        run_ok(TF_OP_CROSS_ENTROPY, {&xt, &labels}, loss, &ce);
        append(loss);
        const TensorDesc dw = make(dtype, {6, 6});
        run_ok(TF_OP_EMBEDDING_BACKWARD, {&xt, &labels}, dw, nullptr);
        append(dw);
        return all;
    };
    const Values reference = run_all(TF_DTYPE_F32);
    check_close(run_all(TF_DTYPE_F16), reference, 1.0 / 1024);
    check_close(run_all(TF_DTYPE_BF16), reference, 1.0 / 128);
}

TEST_CASE("empty tensors run without touching memory they do not have") {
    // N = 0 images: nothing to compute; grad_weight of no images is zero.
    const tf_params_conv2d p = conv_params(1, 1, 1, 1, 1, 1, 1);
    const TensorDesc x = make(TF_DTYPE_F32, {0, 2, 4, 4}), w = f32({3, 2, 3, 3}, Values(54, 1.0));
    const TensorDesc y = make(TF_DTYPE_F32, {0, 3, 4, 4}), dw = make(TF_DTYPE_F32, {3, 2, 3, 3});
    run_ok(TF_OP_CONV2D, {&x, &w}, y, &p);
    run_ok(TF_OP_CONV2D_GRAD_WEIGHT, {&y, &x}, dw, &p);
    CHECK(get(dw) == Values(54, 0.0));
    // No indices: embedding_backward still zeroes the table.
    const TensorDesc idx = make(TF_DTYPE_I64, {0}), dy = make(TF_DTYPE_F32, {0, 3}), table = make(TF_DTYPE_F32, {4, 3});
    run_ok(TF_OP_EMBEDDING_BACKWARD, {&dy, &idx}, table, nullptr);
    CHECK(get(table) == Values(12, 0.0));
}
