// The cpu plugin's kernels for the ops added with the full op table (pow .. erf, ids 12..40, 58
// and 59 apart from the OWN ops), called directly through the plugin ABI with no core. Expected values
// are hand-computed or computed here with <cmath> from the same inputs, never with the plugin's
// own helpers. The harness (loading, test tensors, calls) is the one of test_cpu_kernels.cpp.
#include <doctest/doctest.h>

#include <tinyfin/plugin.h>

#include "plugin_closer.hpp"

#include <dlfcn.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#ifndef TF_CPU_PLUGIN_PATH
#error "build with -DTF_CPU_PLUGIN_PATH=\"/path/to/tinyfin-cpu.so\""
#endif

namespace {

// ---- Loading the plugin -------------------------------------------------------------------

std::vector<std::string> &log_lines() {
    static std::vector<std::string> lines;
    return lines;
}

void host_log(int32_t level, const char *plugin, const char *message) {
    log_lines().push_back(std::to_string(level) + " " + plugin + ": " + message);
}

const char *host_get_env(const char *name) { return std::getenv(name); }

const tf_host_api k_host = {sizeof(tf_host_api), TF_ABI_VERSION, host_log, host_get_env};

using DlCloser = PluginCloser<&k_host>;

struct LoadedPlugin {
    std::unique_ptr<void, DlCloser> handle;
    tf_plugin_entry_fn entry = nullptr;
    const tf_plugin *table = nullptr;
};

const LoadedPlugin &loaded() {
    static const LoadedPlugin plugin = [] {
        LoadedPlugin p;
        p.handle.reset(dlopen(TF_CPU_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL));
        const char *why = dlerror();
        INFO("dlopen(" TF_CPU_PLUGIN_PATH "): ", why ? why : "");
        REQUIRE(p.handle != nullptr);
        p.entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(p.handle.get(), TF_PLUGIN_ENTRY_NAME));
        REQUIRE((p.entry != nullptr));  // parenthesised: doctest cannot print function pointers
        p.table = p.entry(&k_host);
        REQUIRE(p.table != nullptr);
        tf_error err{sizeof(tf_error), {}};
        REQUIRE(p.table->probe(&err) == TF_STATUS_OK);
        REQUIRE(p.table->init(&err) == TF_STATUS_OK);
        return p;
    }();
    return plugin;
}

const tf_plugin &P() { return *loaded().table; }

tf_error make_error() {
    tf_error err{};
    err.struct_size = sizeof err;
    return err;
}

// ---- Test-side dtype handling, independent of the plugin's ----------------------------------

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

const char *name_of(int32_t dtype) {
    static const char *names[] = {"f32", "f16", "bf16", "i32", "i64", "bool"};
    return dtype >= 0 && dtype < TF_DTYPE_COUNT_ ? names[dtype] : "?";
}

double half_value(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

// The f16 pattern of a value f16 holds exactly (searched, so it cannot share a bug with the plugin).
uint16_t half_bits(double v) {
    for (uint32_t b = 0; b < 0x10000; ++b) {
        const double h = half_value(static_cast<uint16_t>(b));
        if (h == v && std::signbit(h) == std::signbit(v)) return static_cast<uint16_t>(b);
    }
    if (std::isnan(v)) return 0x7e00;
    FAIL("test bug: ", v, " is not exact in f16");
    return 0;
}

uint16_t bf16_bits(double v) {
    const float f = static_cast<float>(v);
    if (!std::isnan(v)) REQUIRE_MESSAGE(static_cast<double>(f) == v, "test bug: ", v, " is not exact in f32");
    const uint32_t b = std::bit_cast<uint32_t>(f);
    if (!std::isnan(v)) REQUIRE_MESSAGE((b & 0xffff) == 0, "test bug: ", v, " is not exact in bf16");
    return static_cast<uint16_t>(b >> 16);
}

double bf16_value(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

void put(char *p, int32_t dtype, double v) {
    switch (dtype) {
    case TF_DTYPE_F32: {
        const float f = static_cast<float>(v);
        if (!std::isnan(v)) REQUIRE_MESSAGE(static_cast<double>(f) == v, "test bug: ", v, " is not exact in f32");
        std::memcpy(p, &f, 4);
        return;
    }
    case TF_DTYPE_F16: {
        const uint16_t b = half_bits(v);
        std::memcpy(p, &b, 2);
        return;
    }
    case TF_DTYPE_BF16: {
        const uint16_t b = bf16_bits(v);
        std::memcpy(p, &b, 2);
        return;
    }
    case TF_DTYPE_I32: {
        const auto i = static_cast<int32_t>(v);
        REQUIRE(static_cast<double>(i) == v);
        std::memcpy(p, &i, 4);
        return;
    }
    case TF_DTYPE_I64: {
        const auto i = static_cast<int64_t>(v);
        REQUIRE(static_cast<double>(i) == v);
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
        return half_value(b);
    }
    case TF_DTYPE_BF16: {
        uint16_t b;
        std::memcpy(&b, p, 2);
        return bf16_value(b);
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

// ---- Test tensors -------------------------------------------------------------------------

constexpr unsigned char k_sentinel = 0xab;

// Storage from the plugin's own buffer_alloc, filled with sentinel bytes so a test can tell
// which bytes a kernel wrote.
struct Block {
    tf_buffer *buffer = nullptr;
    char *data = nullptr;
    size_t bytes = 0;

    explicit Block(size_t n) : bytes(n) {
        tf_error err = make_error();
        REQUIRE(P().buffer_alloc(0, n > 0 ? n : 1, &buffer, &err) == TF_STATUS_OK);
        data = static_cast<char *>(P().buffer_host_ptr(buffer));
        REQUIRE(data != nullptr);
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

using Dims = std::vector<int64_t>;

int64_t count_of(const Dims &shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
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

Dims contiguous_strides(const Dims &shape) {
    Dims strides(shape.size());
    int64_t s = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = s;
        s *= shape[i];
    }
    return strides;
}

TensorDesc make(int32_t dtype, const Dims &shape) {
    TensorDesc t;
    t.mem = std::make_shared<Block>(static_cast<size_t>(count_of(shape)) * size_of(dtype));
    t.d = describe(dtype, shape, contiguous_strides(shape), 0);
    t.d.buffer = t.mem->buffer;
    t.d.data = t.mem->data;
    return t;
}

// A view of base's storage with its own shape, strides (elements) and offset (elements).
TensorDesc view(const TensorDesc &base, const Dims &shape, const Dims &strides, int64_t offset_elems = 0) {
    TensorDesc t = base;
    t.d = describe(base.d.dtype, shape, strides, offset_elems);
    t.d.buffer = base.d.buffer;
    t.d.data = base.d.data;
    return t;
}

// Rank 2: the transpose as a view.
TensorDesc transposed(const TensorDesc &t) {
    return view(t, {t.d.shape[1], t.d.shape[0]}, {t.d.strides[1], t.d.strides[0]},
                static_cast<int64_t>(t.d.offset / size_of(t.d.dtype)));
}

// A tensor without storage: only valid with zero elements.
TensorDesc no_data(int32_t dtype, const Dims &shape) {
    TensorDesc t;
    t.d = describe(dtype, shape, contiguous_strides(shape), 0);
    return t;
}

// Byte offsets (from data) of the view's elements in row-major order.
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

void set(const TensorDesc &t, const std::vector<double> &values) {
    const auto offsets = element_offsets(t.d);
    REQUIRE(offsets.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) put(t.mem->data + offsets[i], t.d.dtype, values[i]);
}

std::vector<double> get(const TensorDesc &t) {
    std::vector<double> values;
    for (size_t off : element_offsets(t.d)) values.push_back(take(t.mem->data + off, t.d.dtype));
    return values;
}

// Raw element access for bit patterns and extreme integers.
template <class T>
void set_raw(const TensorDesc &t, const std::vector<T> &values) {
    REQUIRE(sizeof(T) == size_of(t.d.dtype));
    const auto offsets = element_offsets(t.d);
    REQUIRE(offsets.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) std::memcpy(t.mem->data + offsets[i], &values[i], sizeof(T));
}

template <class T>
std::vector<T> get_raw(const TensorDesc &t) {
    REQUIRE(sizeof(T) == size_of(t.d.dtype));
    std::vector<T> values;
    for (size_t off : element_offsets(t.d)) {
        T v;
        std::memcpy(&v, t.mem->data + off, sizeof(T));
        values.push_back(v);
    }
    return values;
}

TensorDesc make(int32_t dtype, const Dims &shape, const std::vector<double> &values) {
    TensorDesc t = make(dtype, shape);
    set(t, values);
    return t;
}

void check_values(const TensorDesc &t, const std::vector<double> &expected) {
    const auto got = get(t);
    REQUIRE(got.size() == expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO(name_of(t.d.dtype), " element ", i, ": got ", got[i], ", expected ", expected[i]);
        if (std::isnan(expected[i]))
            CHECK(std::isnan(got[i]));
        else
            CHECK(got[i] == expected[i]);
    }
}

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

// ---- Calling ops --------------------------------------------------------------------------

struct Call {
    tf_op_desc op{};
    std::vector<tf_tensor_desc> inputs;
    tf_tensor_desc output{};

    Call(uint32_t id, std::initializer_list<const TensorDesc *> ins, const TensorDesc &out,
         const void *params = nullptr) {
        for (const TensorDesc *t : ins) inputs.push_back(t->d);
        output = out.d;
        op.struct_size = sizeof op;
        op.op = id;
        op.n_inputs = static_cast<uint32_t>(inputs.size());
        op.n_outputs = 1;
        op.inputs = inputs.empty() ? nullptr : inputs.data();
        op.outputs = &output;
        op.params = params;
    }
    Call(const Call &) = delete;

    int32_t supports() const { return P().supports(0, &op); }
    tf_status run(std::string *message = nullptr) const {
        tf_error err = make_error();
        const tf_status status = P().run(0, &op, &err);
        if (message) *message = err.message;
        return status;
    }
};

void run_ok(uint32_t id, std::initializer_list<const TensorDesc *> ins, const TensorDesc &out,
            const void *params = nullptr) {
    const Call c(id, ins, out, params);
    INFO("op ", id, " dtype ", name_of(out.d.dtype));
    REQUIRE(c.supports() == 1);
    std::string message;
    const tf_status status = c.run(&message);
    INFO("message: ", message);
    REQUIRE(status == TF_STATUS_OK);
}

tf_params_reduce reduce_params(uint32_t mask) { return {sizeof(tf_params_reduce), mask}; }

constexpr int32_t k_numeric[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_I64};
constexpr int32_t k_float[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16};
constexpr int32_t k_all[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_I64, TF_DTYPE_BOOL};

bool is_float(int32_t dtype) { return dtype <= TF_DTYPE_BF16; }

uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }

// ---- Helpers for these ops -------------------------------------------------------------------

tf_params_var var_params(uint32_t mask, double correction) { return {sizeof(tf_params_var), mask, correction}; }
tf_params_axis axis_params(int32_t axis) { return {sizeof(tf_params_axis), axis}; }
tf_params_clamp clamp_params(double min, double max) { return {sizeof(tf_params_clamp), min, max}; }

// The plugin rounds a double result once, so it is within half an ulp of the exact value; this
// allows one ulp (relative to the value, or the smallest subnormal near zero).
double tolerance(int32_t dtype, double expected) {
    switch (dtype) {
    case TF_DTYPE_F16: return std::max(std::ldexp(std::fabs(expected), -10), 0x1p-24);
    case TF_DTYPE_BF16: return std::max(std::ldexp(std::fabs(expected), -7), 0x1p-133);
    default: return std::max(std::ldexp(std::fabs(expected), -23), 0x1p-149);
    }
}

void check_close(const TensorDesc &t, const std::vector<double> &expected) {
    const auto got = get(t);
    REQUIRE(got.size() == expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO(name_of(t.d.dtype), " element ", i, ": got ", got[i], ", expected ", expected[i]);
        if (std::isnan(expected[i]))
            CHECK(std::isnan(got[i]));
        else if (std::isinf(expected[i]))
            CHECK(got[i] == expected[i]);
        else
            CHECK(std::fabs(got[i] - expected[i]) <= tolerance(t.d.dtype, expected[i]));
    }
}

// run() for a call that must fail; returns the status, the message in *message.
tf_status run_fail(uint32_t id, std::initializer_list<const TensorDesc *> ins, const TensorDesc &out,
                   const void *params, std::string *message) {
    const Call c(id, ins, out, params);
    return c.run(message);
}

constexpr uint32_t k_compare_ops[] = {TF_OP_EQ, TF_OP_NE, TF_OP_LT, TF_OP_LE, TF_OP_GT, TF_OP_GE};

bool compare_on_host(uint32_t op, double a, double b) {
    switch (op) {
    case TF_OP_EQ: return a == b;
    case TF_OP_NE: return a != b;
    case TF_OP_LT: return a < b;
    case TF_OP_LE: return a <= b;
    case TF_OP_GT: return a > b;
    default: return a >= b;
    }
}

// Float-only unary ops with their definitions, written here from the formulas in ops.def and
// the brief (not the plugin's cancellation-free forms).
struct MathCase {
    uint32_t op;
    const char *name;
    double (*f)(double);
};

const MathCase k_math[] = {
    {TF_OP_EXP, "exp", [](double x) { return std::exp(x); }},
    {TF_OP_LOG, "log", [](double x) { return std::log(x); }},
    {TF_OP_SQRT, "sqrt", [](double x) { return std::sqrt(x); }},
    {TF_OP_RSQRT, "rsqrt", [](double x) { return 1 / std::sqrt(x); }},
    {TF_OP_SIN, "sin", [](double x) { return std::sin(x); }},
    {TF_OP_COS, "cos", [](double x) { return std::cos(x); }},
    {TF_OP_TANH, "tanh", [](double x) { return std::tanh(x); }},
    {TF_OP_ERF, "erf", [](double x) { return std::erf(x); }},
    {TF_OP_SIGMOID, "sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
    {TF_OP_SILU, "silu", [](double x) { return x / (1 + std::exp(-x)); }},
    {TF_OP_GELU, "gelu", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
    {TF_OP_GELU_TANH, "gelu_tanh",
     [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }},
};

// Row-major multi-index of element e of shape.
std::vector<int64_t> index_of(int64_t e, const Dims &shape) {
    std::vector<int64_t> idx(shape.size());
    for (size_t i = shape.size(); i-- > 0;) {
        idx[i] = e % shape[i];
        e /= shape[i];
    }
    return idx;
}

// Row-major index, in the output of a reduction over the axes in mask (kept with size 1), of the
// output element that input element e of shape goes to.
size_t reduced_index(int64_t e, const Dims &shape, const Dims &out_shape, uint32_t mask) {
    const auto idx = index_of(e, shape);
    int64_t o = 0;
    for (size_t a = 0; a < shape.size(); ++a) o = o * out_shape[a] + ((mask >> a & 1) ? 0 : idx[a]);
    return static_cast<size_t>(o);
}

}  // namespace

// ---- pow, maximum, minimum ------------------------------------------------------------------

TEST_CASE("pow: float dtypes against std::pow, exponent broadcast through stride 0") {
    const std::vector<double> base = {2, 0.5, -2, 0, 4, -1.5};
    const std::vector<double> exps = {2, -1, 3};
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {2, 3}, base);
        TensorDesc row = make(dt, {3}, exps);
        TensorDesc b = view(row, {2, 3}, {0, 1});  // [3] broadcast along axis 0
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_POW, {&a, &b}, out);
        std::vector<double> expected;
        for (size_t i = 0; i < base.size(); ++i) expected.push_back(std::pow(base[i], exps[i % 3]));
        check_close(out, expected);  // {4, 2, -8, 0, 0.25, -3.375}

        // Fractional exponents and C's special cases (torch follows them): 0^-1 = inf,
        // (-8)^0.5 = NaN, NaN^0 = 1, 1^NaN = 1, (-1)^inf = 1.
        TensorDesc x = make(dt, {7}, {2, 16, 0, -8, NAN, 1, -1});
        TensorDesc y = make(dt, {7}, {0.5, -0.25, -1, 0.5, 0, NAN, INFINITY});
        TensorDesc o = make(dt, {7});
        run_ok(TF_OP_POW, {&x, &y}, o);
        check_close(o, {std::sqrt(2.0), 0.5, INFINITY, NAN, 1, 1, 1});
    }
}

TEST_CASE("pow: integers take non-negative exponents and wrap") {
    for (int32_t dt : {TF_DTYPE_I32, TF_DTYPE_I64}) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {8}, {2, 3, -2, 0, 7, 1, -1, 0});
        TensorDesc b = make(dt, {8}, {10, 3, 3, 0, 0, 31, 5, 5});
        TensorDesc out = make(dt, {8});
        run_ok(TF_OP_POW, {&a, &b}, out);
        check_values(out, {1024, 27, -8, 1, 1, 1, -1, 0});  // 0^0 = 1

        // A negative exponent anywhere (here through a broadcast) fails before any write.
        TensorDesc e = make(dt, {}, {-1});
        TensorDesc be = view(e, {8}, {0});
        TensorDesc out2 = make(dt, {8});
        std::string message;
        CHECK(run_fail(TF_OP_POW, {&a, &be}, out2, nullptr, &message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("pow") == 0);
        CHECK(message.find("negative") != std::string::npos);
        CHECK(untouched(out2));
    }
    // Overflow wraps like repeated multiplication in the dtype: 2^31, 3^21 mod 2^32; 2^63, 3^40 mod 2^64.
    TensorDesc a32 = make(TF_DTYPE_I32, {2}, {2, 3});
    TensorDesc b32 = make(TF_DTYPE_I32, {2}, {31, 21});
    TensorDesc o32 = make(TF_DTYPE_I32, {2});
    run_ok(TF_OP_POW, {&a32, &b32}, o32);
    CHECK(get_raw<int32_t>(o32) == std::vector<int32_t>{INT32_MIN, 1870418611});
    TensorDesc a64 = make(TF_DTYPE_I64, {3}, {2, 3, 3});
    TensorDesc b64 = make(TF_DTYPE_I64, {3}, {63, 40, 39});
    TensorDesc o64 = make(TF_DTYPE_I64, {3});
    run_ok(TF_OP_POW, {&a64, &b64}, o64);
    CHECK(get_raw<int64_t>(o64) == std::vector<int64_t>{INT64_MIN, -6289078614652622815LL, 4052555153018976267LL});

    TensorDesc bl = make(TF_DTYPE_BOOL, {2});
    CHECK(Call(TF_OP_POW, {&bl, &bl}, bl).supports() == 0);
}

TEST_CASE("maximum and minimum: every numeric dtype, strided operands") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {2, 3}, {1, -2, 3, 5, 0, -7});
        TensorDesc b = make(dt, {2, 3}, {2, -3, 3, -7, 0, 8});
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_MAXIMUM, {&a, &b}, out);
        check_values(out, {2, -2, 3, 5, 0, 8});
        run_ok(TF_OP_MINIMUM, {&a, &b}, out);
        check_values(out, {1, -3, 3, -7, 0, -7});

        // Transposed input, broadcast column, transposed output.
        TensorDesc st = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6});
        TensorDesc t = transposed(st);  // [[1, 2, 3], [4, 5, 6]]
        TensorDesc col = make(dt, {2}, {2, 5});
        TensorDesc c = view(col, {2, 3}, {1, 0});
        TensorDesc storage = make(dt, {3, 2});
        TensorDesc out_t = transposed(storage);
        run_ok(TF_OP_MAXIMUM, {&t, &c}, out_t);
        check_values(out_t, {2, 2, 3, 5, 5, 6});
        check_values(storage, {2, 5, 2, 5, 3, 6});
        run_ok(TF_OP_MINIMUM, {&c, &t}, out_t);
        check_values(out_t, {1, 2, 2, 4, 5, 5});
    }
    // i64 compares exactly (2^53 + 1 is not a double).
    TensorDesc a = make(TF_DTYPE_I64, {2});
    TensorDesc b = make(TF_DTYPE_I64, {2});
    set_raw<int64_t>(a, {9007199254740993LL, INT64_MIN});
    set_raw<int64_t>(b, {9007199254740992LL, INT64_MAX});
    TensorDesc out = make(TF_DTYPE_I64, {2});
    run_ok(TF_OP_MAXIMUM, {&a, &b}, out);
    CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{9007199254740993LL, INT64_MAX});
    run_ok(TF_OP_MINIMUM, {&a, &b}, out);
    CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{9007199254740992LL, INT64_MIN});
}

TEST_CASE("maximum and minimum: NaN propagates from either side, -0 < +0") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {4}, {NAN, 1, NAN, -INFINITY});
        TensorDesc b = make(dt, {4}, {1, NAN, NAN, NAN});
        TensorDesc out = make(dt, {4});
        run_ok(TF_OP_MAXIMUM, {&a, &b}, out);
        check_values(out, {NAN, NAN, NAN, NAN});
        run_ok(TF_OP_MINIMUM, {&a, &b}, out);
        check_values(out, {NAN, NAN, NAN, NAN});
    }
    TensorDesc a = make(TF_DTYPE_F32, {2});
    TensorDesc b = make(TF_DTYPE_F32, {2});
    set_raw<float>(a, {-0.0f, 0.0f});
    set_raw<float>(b, {0.0f, -0.0f});
    TensorDesc out = make(TF_DTYPE_F32, {2});
    run_ok(TF_OP_MAXIMUM, {&a, &b}, out);
    CHECK(get_raw<uint32_t>(out) == std::vector<uint32_t>{0, 0});
    run_ok(TF_OP_MINIMUM, {&a, &b}, out);
    CHECK(get_raw<uint32_t>(out) == std::vector<uint32_t>{0x80000000u, 0x80000000u});
}

// ---- relu_backward --------------------------------------------------------------------------

TEST_CASE("relu_backward: dy where x > 0, every numeric dtype, strided and broadcast operands") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        // Dense: negative gradients pass where x > 0; x <= 0 stops any gradient.
        const TensorDesc grads = make(dt, {6}, {1, -2, 3, 5, 7, -7}), inputs = make(dt, {6}, {2, -3, 0, -1, 4, 1});
        const TensorDesc out = make(dt, {6});
        run_ok(TF_OP_RELU_BACKWARD, {&grads, &inputs}, out);
        check_values(out, {1, 0, 0, 0, 7, -7});
        // dy transposed ([[1, 2, 3], [4, 5, 6]]), x one row broadcast over both, output transposed.
        const TensorDesc dy_storage = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6}), x_row = make(dt, {3}, {1, 0, -1});
        const TensorDesc storage = make(dt, {3, 2});
        const TensorDesc dy = transposed(dy_storage), x = view(x_row, {2, 3}, {0, 1}), out_t = transposed(storage);
        run_ok(TF_OP_RELU_BACKWARD, {&dy, &x}, out_t);
        check_values(out_t, {1, 0, 0, 4, 0, 0});
        check_values(storage, {1, 4, 0, 0, 0, 0});
    }
}

TEST_CASE("relu_backward: NaN x passes dy, x = -0 gives +0, NaN dy stops at x <= 0") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc dy = make(dt, {5}, {NAN, 2, 3, NAN, INFINITY});
        TensorDesc x = make(dt, {5}, {-1, NAN, 0, 1, INFINITY});
        TensorDesc out = make(dt, {5});
        run_ok(TF_OP_RELU_BACKWARD, {&dy, &x}, out);
        check_values(out, {0, 2, 0, NAN, INFINITY});
    }
    TensorDesc dy = make(TF_DTYPE_F32, {3});
    TensorDesc x = make(TF_DTYPE_F32, {3});
    set_raw<float>(dy, {5.0f, -0.0f, -0.0f});
    set_raw<float>(x, {-0.0f, 1.0f, -1.0f});
    TensorDesc out = make(TF_DTYPE_F32, {3});
    run_ok(TF_OP_RELU_BACKWARD, {&dy, &x}, out);
    CHECK(get_raw<uint32_t>(out) == std::vector<uint32_t>{0, 0x80000000u, 0});
}

TEST_CASE("relu_backward: dense f32 (the vector rows, threaded when large) against the rule") {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{3} << 16}) {
        INFO("n = ", n);
        std::vector<float> dyv(static_cast<size_t>(n)), xv(static_cast<size_t>(n)), want(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            dyv[i] = u(rng);
            xv[i] = i % 7 == 0 ? 0.0f : i % 11 == 0 ? NAN : u(rng);
            want[i] = xv[i] <= 0 ? 0.0f : dyv[i];
        }
        // A leading axis of 4 lets the threaded split cut the rows.
        const Dims shape = n % 4 == 0 ? Dims{4, n / 4} : Dims{n};
        TensorDesc dy = make(TF_DTYPE_F32, shape), x = make(TF_DTYPE_F32, shape), out = make(TF_DTYPE_F32, shape);
        set_raw<float>(dy, dyv);
        set_raw<float>(x, xv);
        run_ok(TF_OP_RELU_BACKWARD, {&dy, &x}, out);
        const std::vector<float> got = get_raw<float>(out);
        bool same = true;
        for (int64_t i = 0; i < n; ++i) same &= std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]);
        CHECK(same);
    }
}

// ---- gelu_backward --------------------------------------------------------------------------

namespace {

// dy (Phi(x) + x phi(x)) in long double from <cmath>, written independently of the plugin.
double gelu_grad_reference(double dy, double x) {
    const long double xl = x;
    const long double cdf = 0.5L * std::erfc(-xl / std::sqrt(2.0L));
    const long double pdf = std::exp(-0.5L * xl * xl) / std::sqrt(2.0L * 3.14159265358979323846264338327950288L);
    return static_cast<double>(static_cast<long double>(dy) * (cdf + xl * pdf));
}

}  // namespace

TEST_CASE("gelu_backward: float dtypes against <cmath>, strided and broadcast operands") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        // Dense, across gelu's range: the root of Phi + x phi near -0.75, the tails, 0.
        const std::vector<double> xs = {-6, -3, -0.75, -0.5, 0, 0.25, 1, 2.5, 8};
        const std::vector<double> dys = {1, -2, 3, 0.5, -1, 4, -0.25, 1.5, 2};
        const auto n = static_cast<int64_t>(xs.size());
        TensorDesc dy = make(dt, {n}, dys), x = make(dt, {n}, xs), out = make(dt, {n});
        run_ok(TF_OP_GELU_BACKWARD, {&dy, &x}, out);
        const std::vector<double> dyq = get(dy), xq = get(x);  // the inputs as the dtype holds them
        // Within the dtype's tolerance, or 2^-21 of the terms' size |dy| (1 + |x| phi(x)) (the f32
        // lanes' accuracy; near x = -0.75 Phi and x phi cancel).
        const std::vector<double> got = get(out);
        for (int64_t i = 0; i < n; ++i) {
            INFO("x = ", xq[i]);
            const double want = gelu_grad_reference(dyq[i], xq[i]);
            const double terms =
                std::fabs(dyq[i]) * (1 + std::fabs(xq[i]) * std::exp(-0.5 * xq[i] * xq[i]) / std::sqrt(2 * M_PI));
            CHECK(std::fabs(got[i] - want) <= std::max(tolerance(dt, want), terms * 0x1p-21));
        }

        // dy transposed ([[1, 2, 3], [4, 5, 6]]), x one row broadcast over both, output transposed.
        const TensorDesc dy_storage = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6}), x_row = make(dt, {3}, {-1, 0.5, 2});
        const TensorDesc storage = make(dt, {3, 2});
        const TensorDesc dyt = transposed(dy_storage), xb = view(x_row, {2, 3}, {0, 1}), out_t = transposed(storage);
        run_ok(TF_OP_GELU_BACKWARD, {&dyt, &xb}, out_t);
        const std::vector<double> row = get(x_row);
        std::vector<double> want_t;
        for (int r = 0; r < 2; ++r)
            for (int c = 0; c < 3; ++c) want_t.push_back(gelu_grad_reference(1 + 3 * r + c, row[c]));
        check_close(out_t, want_t);
    }
    // Integers are outside the op's dtypes column: refused, nothing written.
    TensorDesc a = make(TF_DTYPE_I32, {2}, {1, 2}), b = make(TF_DTYPE_I32, {2}, {1, 2}), o = make(TF_DTYPE_I32, {2});
    std::string message;
    CHECK(run_fail(TF_OP_GELU_BACKWARD, {&a, &b}, o, nullptr, &message) != TF_STATUS_OK);
    CHECK(untouched(o));
}

TEST_CASE("gelu_backward: NaN stays NaN, +-inf give NaN (inf * 0), the tails give 0 and dy") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc dy = make(dt, {7}, {1, 1, 1, 2, 2, NAN, 3});
        TensorDesc x = make(dt, {7}, {NAN, INFINITY, -INFINITY, -30, 30, 1, 0});
        TensorDesc out = make(dt, {7});
        run_ok(TF_OP_GELU_BACKWARD, {&dy, &x}, out);
        check_values(out, {NAN, NAN, NAN, 0, 2, NAN, 1.5});
    }
}

TEST_CASE("gelu_backward: dense f32 (the vector rows, threaded when large) within 2^-21 of the terms' size") {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1, 1), wide(-20, 20);
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{3} << 16}) {
        INFO("n = ", n);
        std::vector<float> dyv(static_cast<size_t>(n)), xv(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            dyv[i] = u(rng);
            xv[i] = i % 5 == 0 ? wide(rng) : 4 * u(rng);
        }
        const Dims shape = n % 4 == 0 ? Dims{4, n / 4} : Dims{n};
        TensorDesc dy = make(TF_DTYPE_F32, shape), x = make(TF_DTYPE_F32, shape), out = make(TF_DTYPE_F32, shape);
        set_raw<float>(dy, dyv);
        set_raw<float>(x, xv);
        run_ok(TF_OP_GELU_BACKWARD, {&dy, &x}, out);
        const std::vector<float> got = get_raw<float>(out);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double want = gelu_grad_reference(dyv[i], xv[i]);
            // The f32 lanes' accuracy (vector_erf.hpp) measured against the size of the terms,
            // |dy| (1 + |x| phi(x)): they cancel near x = -0.75.
            const double pdf = std::exp(-0.5 * xv[i] * xv[i]) / std::sqrt(2 * M_PI);
            const double scale = std::fabs(dyv[i]) * (1 + std::fabs(xv[i]) * pdf) * 0x1p-21;
            bad += std::fabs(got[i] - want) > std::max(tolerance(TF_DTYPE_F32, want), scale);
        }
        CHECK(bad == 0);
    }
}

// ---- Comparisons and where ------------------------------------------------------------------

TEST_CASE("comparisons: six ops, every dtype, bool output") {
    for (int32_t dt : k_all) {
        INFO("dtype ", name_of(dt));
        const bool boolean = dt == TF_DTYPE_BOOL;
        const std::vector<double> av =
            boolean ? std::vector<double>{0, 0, 1, 1} : std::vector<double>{-1, 2, 2, 5, 0, 3};
        const std::vector<double> bv =
            boolean ? std::vector<double>{0, 1, 0, 1} : std::vector<double>{2, 2, -1, 5, 0, -4};
        const auto n = static_cast<int64_t>(av.size());
        TensorDesc a = make(dt, {n}, av);
        TensorDesc b = make(dt, {n}, bv);
        TensorDesc out = make(TF_DTYPE_BOOL, {n});
        for (uint32_t op : k_compare_ops) {
            CAPTURE(op);
            run_ok(op, {&a, &b}, out);
            std::vector<double> expected;
            for (size_t i = 0; i < av.size(); ++i) expected.push_back(compare_on_host(op, av[i], bv[i]));
            check_values(out, expected);
            CHECK(get_raw<uint8_t>(out) == std::vector<uint8_t>(expected.begin(), expected.end()));  // 0 or 1 bytes
        }
    }
}

TEST_CASE("comparisons: broadcast scalar, transposed input and output") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc st = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6});
        TensorDesc t = transposed(st);  // [[1, 2, 3], [4, 5, 6]]
        TensorDesc two = make(dt, {}, {3});
        TensorDesc s = view(two, {2, 3}, {0, 0});
        TensorDesc storage = make(TF_DTYPE_BOOL, {3, 2});
        TensorDesc out_t = transposed(storage);
        run_ok(TF_OP_LT, {&t, &s}, out_t);
        check_values(out_t, {1, 1, 0, 0, 0, 0});
        check_values(storage, {1, 0, 1, 0, 0, 0});
        run_ok(TF_OP_GE, {&s, &t}, out_t);
        check_values(out_t, {1, 1, 1, 0, 0, 0});

        // Output every other byte of a wider buffer.
        TensorDesc wide = make(TF_DTYPE_BOOL, {12});
        TensorDesc gaps = view(wide, {2, 3}, {6, 2}, 1);
        run_ok(TF_OP_EQ, {&t, &s}, gaps);
        check_values(gaps, {0, 0, 1, 0, 0, 0});
        CHECK(only_elements_written(gaps));
    }
}

TEST_CASE("comparisons and where on dense rows against one broadcast value (the vectorised rows)") {
    // 37 elements: past any vector width, with a remainder; the broadcast side on either hand.
    const size_t n = 37;
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        std::vector<double> av(n);
        for (size_t i = 0; i < n; ++i) av[i] = static_cast<double>(static_cast<int>(i * 7 % 11) - 5);
        TensorDesc a = make(dt, {n}, av);
        TensorDesc zero = make(dt, {}, {0});
        TensorDesc z = view(zero, {static_cast<int64_t>(n)}, {0});
        TensorDesc out = make(TF_DTYPE_BOOL, {n});
        for (uint32_t op : k_compare_ops) {
            CAPTURE(op);
            run_ok(op, {&a, &z}, out);
            std::vector<double> expected;
            for (double v : av) expected.push_back(compare_on_host(op, v, 0));
            check_values(out, expected);
            CHECK(get_raw<uint8_t>(out) == std::vector<uint8_t>(expected.begin(), expected.end()));
        }

        // where(a > 0, g, 0) and where(a > 0, 0, g), relu's backward and its mirror.
        std::vector<double> gv(n);
        for (size_t i = 0; i < n; ++i) gv[i] = static_cast<double>(i % 5) + 1;
        TensorDesc g = make(dt, {n}, gv);
        TensorDesc cond = make(TF_DTYPE_BOOL, {n});
        run_ok(TF_OP_GT, {&a, &z}, cond);
        TensorDesc picked = make(dt, {n});
        run_ok(TF_OP_WHERE, {&cond, &g, &z}, picked);
        std::vector<double> expected;
        for (size_t i = 0; i < n; ++i) expected.push_back(av[i] > 0 ? gv[i] : 0);
        check_values(picked, expected);
        run_ok(TF_OP_WHERE, {&cond, &z, &g}, picked);
        expected.clear();
        for (size_t i = 0; i < n; ++i) expected.push_back(av[i] > 0 ? 0 : gv[i]);
        check_values(picked, expected);
    }
    // Bits survive the branch-free select: a NaN payload and -0 against a broadcast NaN.
    TensorDesc cond = make(TF_DTYPE_BOOL, {5});
    set_raw<uint8_t>(cond, {1, 0, 9, 0, 1});  // 9 reads as true
    TensorDesc f = make(TF_DTYPE_F32, {5});
    set_raw<uint32_t>(f, {0x7fc00123u, 0x3f800000u, 0x80000000u, 0x3f800000u, 0x00000001u});
    TensorDesc nan = make(TF_DTYPE_F32, {1});
    set_raw<uint32_t>(nan, {0xffc00042u});
    TensorDesc s = view(nan, {5}, {0});
    TensorDesc fo = make(TF_DTYPE_F32, {5});
    run_ok(TF_OP_WHERE, {&cond, &f, &s}, fo);
    CHECK(get_raw<uint32_t>(fo) ==
          std::vector<uint32_t>{0x7fc00123u, 0xffc00042u, 0x80000000u, 0xffc00042u, 0x00000001u});
}

TEST_CASE("comparisons: NaN is unordered, -0 == +0, i64 exact, stray bool bytes") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {4}, {NAN, NAN, 1, -0.0});
        TensorDesc b = make(dt, {4}, {NAN, 1, NAN, 0});
        TensorDesc out = make(TF_DTYPE_BOOL, {4});
        const std::map<uint32_t, std::vector<double>> expected = {
            {TF_OP_EQ, {0, 0, 0, 1}}, {TF_OP_NE, {1, 1, 1, 0}}, {TF_OP_LT, {0, 0, 0, 0}},
            {TF_OP_LE, {0, 0, 0, 1}}, {TF_OP_GT, {0, 0, 0, 0}}, {TF_OP_GE, {0, 0, 0, 1}},
        };
        for (const auto &entry : expected) {
            const auto &[op, values] = entry;
            CAPTURE(entry.first);  // not a binding: clang 14 cannot capture one
            run_ok(op, {&a, &b}, out);
            check_values(out, values);
        }
    }
    TensorDesc a = make(TF_DTYPE_I64, {2});
    TensorDesc b = make(TF_DTYPE_I64, {2});
    set_raw<int64_t>(a, {9007199254740993LL, 9007199254740992LL});
    set_raw<int64_t>(b, {9007199254740992LL, 9007199254740993LL});
    TensorDesc out = make(TF_DTYPE_BOOL, {2});
    run_ok(TF_OP_EQ, {&a, &b}, out);
    check_values(out, {0, 0});
    run_ok(TF_OP_LT, {&a, &b}, out);
    check_values(out, {0, 1});

    TensorDesc x = make(TF_DTYPE_BOOL, {2});
    TensorDesc y = make(TF_DTYPE_BOOL, {2});
    set_raw<uint8_t>(x, {2, 0});
    set_raw<uint8_t>(y, {1, 0});
    run_ok(TF_OP_EQ, {&x, &y}, out);
    check_values(out, {1, 1});  // any non-zero byte is true
}

TEST_CASE("where: every dtype, broadcast condition and operand, transposed output") {
    for (int32_t dt : k_all) {
        INFO("dtype ", name_of(dt));
        const bool boolean = dt == TF_DTYPE_BOOL;
        TensorDesc cond_row = make(TF_DTYPE_BOOL, {3}, {1, 0, 1});
        TensorDesc cond = view(cond_row, {2, 3}, {0, 1});
        const std::vector<double> av =
            boolean ? std::vector<double>{1, 1, 0, 1, 1, 0} : std::vector<double>{1, 2, 3, 4, 5, 6};
        const double bv = boolean ? 0 : -1;
        TensorDesc a = make(dt, {2, 3}, av);
        TensorDesc scalar = make(dt, {}, {bv});
        TensorDesc b = view(scalar, {2, 3}, {0, 0});
        TensorDesc storage = make(dt, {3, 2});
        TensorDesc out_t = transposed(storage);
        run_ok(TF_OP_WHERE, {&cond, &a, &b}, out_t);
        std::vector<double> expected;
        for (size_t i = 0; i < av.size(); ++i) expected.push_back(i % 3 != 1 ? av[i] : bv);
        check_values(out_t, expected);

        // Strided output with gaps, condition and operands swapped in role.
        TensorDesc wide = make(dt, {13});
        TensorDesc gaps = view(wide, {2, 3}, {6, 2}, 1);
        run_ok(TF_OP_WHERE, {&cond, &b, &a}, gaps);
        expected.clear();
        for (size_t i = 0; i < av.size(); ++i) expected.push_back(i % 3 != 1 ? bv : av[i]);
        check_values(gaps, expected);
        CHECK(only_elements_written(gaps));
    }
}

TEST_CASE("where: copies elements bit for bit, normalises stray bool bytes") {
    TensorDesc cond = make(TF_DTYPE_BOOL, {3});
    set_raw<uint8_t>(cond, {1, 7, 0});  // 7 reads as true
    TensorDesc f = make(TF_DTYPE_F32, {3});
    TensorDesc g = make(TF_DTYPE_F32, {3});
    set_raw<uint32_t>(f, {0x7fc00123u, 0x80000000u, 0x7f800001u});  // NaN payload, -0, signalling NaN
    set_raw<uint32_t>(g, {0x3f800000u, 0x3f800000u, 0xffc00042u});
    TensorDesc fo = make(TF_DTYPE_F32, {3});
    run_ok(TF_OP_WHERE, {&cond, &f, &g}, fo);
    CHECK(get_raw<uint32_t>(fo) == std::vector<uint32_t>{0x7fc00123u, 0x80000000u, 0xffc00042u});

    for (int32_t dt : {TF_DTYPE_F16, TF_DTYPE_BF16}) {
        TensorDesc h = make(dt, {3});
        TensorDesc k = make(dt, {3});
        set_raw<uint16_t>(h, {0x7d01, 0x8000, 0x0001});
        set_raw<uint16_t>(k, {0x0000, 0x0000, 0xfd55});
        TensorDesc ho = make(dt, {3});
        run_ok(TF_OP_WHERE, {&cond, &h, &k}, ho);
        CHECK(get_raw<uint16_t>(ho) == std::vector<uint16_t>{0x7d01, 0x8000, 0xfd55});
    }

    TensorDesc x = make(TF_DTYPE_BOOL, {3});
    TensorDesc y = make(TF_DTYPE_BOOL, {3});
    set_raw<uint8_t>(x, {2, 5, 0});
    set_raw<uint8_t>(y, {0, 0, 3});
    TensorDesc bo = make(TF_DTYPE_BOOL, {3});
    run_ok(TF_OP_WHERE, {&cond, &x, &y}, bo);
    CHECK(get_raw<uint8_t>(bo) == std::vector<uint8_t>{1, 1, 1});

    TensorDesc i = make(TF_DTYPE_I64, {3});
    TensorDesc j = make(TF_DTYPE_I64, {3});
    set_raw<int64_t>(i, {INT64_MIN, 9007199254740993LL, 1});
    set_raw<int64_t>(j, {0, 0, INT64_MAX});
    TensorDesc io = make(TF_DTYPE_I64, {3});
    run_ok(TF_OP_WHERE, {&cond, &i, &j}, io);
    CHECK(get_raw<int64_t>(io) == std::vector<int64_t>{INT64_MIN, 9007199254740993LL, INT64_MAX});
}

// ---- Unary ----------------------------------------------------------------------------------

TEST_CASE("float unary math against <cmath>, strided input and output") {
    const std::vector<double> xs = {-3, -1.5, -0.5, -0.0, 0, 0.25, 1, 2.5, 4};
    const auto n = static_cast<int64_t>(xs.size());
    for (int32_t dt : k_float) {
        for (const MathCase &m : k_math) {
            INFO("dtype ", name_of(dt));
            INFO("op ", m.name);
            TensorDesc in_storage = make(dt, {2 * n});
            TensorDesc in = view(in_storage, {n}, {2}, 1);
            set(in, xs);
            TensorDesc out_storage = make(dt, {2 * n + 1});
            TensorDesc out = view(out_storage, {n}, {2}, 0);
            run_ok(m.op, {&in}, out, nullptr);
            std::vector<double> expected;
            for (double x : xs) expected.push_back(m.f(x));
            check_close(out, expected);
            CHECK(only_elements_written(out));
        }
    }
    // Signs the formulas fix: rsqrt(-0) = -inf, sqrt(-0) = -0, log(-0) = -inf.
    TensorDesc z = make(TF_DTYPE_F32, {}, {-0.0});
    TensorDesc o = make(TF_DTYPE_F32, {});
    run_ok(TF_OP_RSQRT, {&z}, o);
    CHECK(get_raw<float>(o)[0] == -INFINITY);
    run_ok(TF_OP_SQRT, {&z}, o);
    CHECK(get_raw<uint32_t>(o)[0] == 0x80000000u);
}

TEST_CASE("float unary math keeps NaN and handles infinities") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc x = make(dt, {3}, {NAN, INFINITY, -INFINITY});
        TensorDesc out = make(dt, {3});
        const std::map<uint32_t, std::vector<double>> expected = {
            {TF_OP_EXP, {NAN, INFINITY, 0}},  {TF_OP_LOG, {NAN, INFINITY, NAN}}, {TF_OP_SQRT, {NAN, INFINITY, NAN}},
            {TF_OP_RSQRT, {NAN, 0, NAN}},     {TF_OP_SIN, {NAN, NAN, NAN}},      {TF_OP_COS, {NAN, NAN, NAN}},
            {TF_OP_TANH, {NAN, 1, -1}},       {TF_OP_ERF, {NAN, 1, -1}},         {TF_OP_SIGMOID, {NAN, 1, 0}},
            {TF_OP_SILU, {NAN, INFINITY, 0}}, {TF_OP_GELU, {NAN, INFINITY, 0}},  {TF_OP_GELU_TANH, {NAN, INFINITY, 0}},
        };
        for (const auto &entry : expected) {
            const auto &[op, values] = entry;
            CAPTURE(entry.first);  // not a binding: clang 14 cannot capture one
            run_ok(op, {&x}, out);
            check_values(out, values);
        }
    }
}

TEST_CASE("sigmoid, silu, gelu and gelu_tanh stay accurate for large |x|") {
    for (int32_t dt : {TF_DTYPE_F32, TF_DTYPE_BF16}) {  // f16 cannot hold these inputs
        INFO("dtype ", name_of(dt));
        const std::vector<double> xs = {-1000, -100, -10, -5, 5, 10, 100, 1000};
        TensorDesc x = make(dt, {8}, xs);
        TensorDesc out = make(dt, {8});
        std::vector<double> sig, silu;
        for (double v : xs) {
            sig.push_back(1 / (1 + std::exp(-v)));  // fine in double for these: no inf / inf
            silu.push_back(v / (1 + std::exp(-v)));
        }
        run_ok(TF_OP_SIGMOID, {&x}, out);
        check_close(out, sig);  // sigmoid(-100) = 3.7e-44: an f32 subnormal, not 0
        run_ok(TF_OP_SILU, {&x}, out);
        check_close(out, silu);

        // x Phi(x) by hand: Phi(-10) = 7.6198530241605e-24, Phi(-5) = 2.8665157187919e-7.
        // 0.5 x (1 + erf(x / sqrt 2)) cancels to 0 below x = -8 in double; the kernel must not.
        run_ok(TF_OP_GELU, {&x}, out);
        check_close(out, {-0.0, -0.0, -7.6198530241605e-23, -1.4332578593960e-6, 4.9999985667421, 10, 100, 1000});

        // gelu_tanh(x) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3): 1 + tanh(u)
        // cancels for x = -10, this form does not.
        std::vector<double> gt;
        for (double v : xs) {
            const double u = std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v);
            gt.push_back(u < 0 ? v * std::exp(2 * u) / (1 + std::exp(2 * u)) : v / (1 + std::exp(-2 * u)));
        }
        run_ok(TF_OP_GELU_TANH, {&x}, out);
        check_close(out, gt);
        CHECK(get(out)[2] < 0);  // -1.1e-37, not 0
    }
}

TEST_CASE("abs and square: floats and integers") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc st = make(dt, {3, 2}, {-3, 7, 2, -1, 0, -12});
        TensorDesc x = transposed(st);  // [[-3, 2, 0], [7, -1, -12]]
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_ABS, {&x}, out);
        check_values(out, {3, 2, 0, 7, 1, 12});
        run_ok(TF_OP_SQUARE, {&x}, out);
        check_values(out, {9, 4, 0, 49, 1, 144});
    }
    // Integers wrap: abs(MIN) = MIN; 46341^2 and 3037000500^2 overflow.
    TensorDesc i = make(TF_DTYPE_I32, {4});
    set_raw<int32_t>(i, {INT32_MIN, -5, 65536, 46341});
    TensorDesc io = make(TF_DTYPE_I32, {4});
    run_ok(TF_OP_ABS, {&i}, io);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{INT32_MIN, 5, 65536, 46341});
    run_ok(TF_OP_SQUARE, {&i}, io);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{0, 25, 0, -2147479015});
    TensorDesc l = make(TF_DTYPE_I64, {2});
    set_raw<int64_t>(l, {INT64_MIN, 3037000500LL});
    TensorDesc lo = make(TF_DTYPE_I64, {2});
    run_ok(TF_OP_ABS, {&l}, lo);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{INT64_MIN, 3037000500LL});
    run_ok(TF_OP_SQUARE, {&l}, lo);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{0, -9223372036709301616LL});

    // Floats: abs clears the sign of -0, -inf and NaN; square rounds once and overflows to inf.
    TensorDesc f = make(TF_DTYPE_F32, {3});
    set_raw<float>(f, {-0.0f, -INFINITY, -NAN});
    TensorDesc fo = make(TF_DTYPE_F32, {3});
    run_ok(TF_OP_ABS, {&f}, fo);
    const auto r = get_raw<float>(fo);
    CHECK(f32_bits(r[0]) == 0);
    CHECK(r[1] == INFINITY);
    CHECK(std::isnan(r[2]));
    CHECK(!std::signbit(r[2]));
    run_ok(TF_OP_SQUARE, {&f}, fo);
    check_values(fo, {0, INFINITY, NAN});

    TensorDesc h = make(TF_DTYPE_F16, {2}, {300, 0.5});
    TensorDesc ho = make(TF_DTYPE_F16, {2});
    run_ok(TF_OP_SQUARE, {&h}, ho);
    check_values(ho, {INFINITY, 0.25});  // 90000 > 65504
    TensorDesc b = make(TF_DTYPE_BF16, {2}, {1.0078125, 3});  // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 -> 1 + 2^-6
    TensorDesc bo = make(TF_DTYPE_BF16, {2});
    run_ok(TF_OP_SQUARE, {&b}, bo);
    check_values(bo, {1.015625, 9});

    TensorDesc bl = make(TF_DTYPE_BOOL, {2});
    CHECK(Call(TF_OP_ABS, {&bl}, bl).supports() == 0);
    CHECK(Call(TF_OP_SQUARE, {&bl}, bl).supports() == 0);
}

TEST_CASE("clamp: both bounds, open bounds, NaN, min > max") {
    const std::vector<double> xs = {-5, -1, 0, 0.5, 3, NAN, -INFINITY, INFINITY};
    struct Row {
        double min, max;
        std::vector<double> expected;
    };
    const Row rows[] = {
        {-1, 2, {-1, -1, 0, 0.5, 2, NAN, -1, 2}},
        {-INFINITY, 1, {-5, -1, 0, 0.5, 1, NAN, -INFINITY, 1}},
        {0, INFINITY, {0, 0, 0, 0.5, 3, NAN, 0, INFINITY}},
        {-INFINITY, INFINITY, xs},
        {2, 1, {1, 1, 1, 1, 1, NAN, 1, 1}},  // min(max(x, 2), 1)
    };
    for (int32_t dt : k_float) {
        for (const Row &r : rows) {
            INFO("dtype ", name_of(dt));
            CAPTURE(r.min);
            CAPTURE(r.max);
            TensorDesc x = make(dt, {8}, xs);
            TensorDesc storage = make(dt, {16});
            TensorDesc out = view(storage, {8}, {2}, 1);
            const tf_params_clamp p = clamp_params(r.min, r.max);
            run_ok(TF_OP_CLAMP, {&x}, out, &p);
            check_values(out, r.expected);
            CHECK(only_elements_written(out));
        }
    }
    // A bound the dtype cannot hold is rounded with the result: 0.1 in f16 is 0x2e66.
    TensorDesc h = make(TF_DTYPE_F16, {2}, {0, 1});
    TensorDesc ho = make(TF_DTYPE_F16, {2});
    const tf_params_clamp tenth = clamp_params(0.1, 0.5);
    run_ok(TF_OP_CLAMP, {&h}, ho, &tenth);
    CHECK(get_raw<uint16_t>(ho) == std::vector<uint16_t>{0x2e66, 0x3800});
}

TEST_CASE("clamp: integers, bounds rounded inward and saturated") {
    TensorDesc i = make(TF_DTYPE_I32, {7});
    set_raw<int32_t>(i, {-5, -1, 0, 1, 3, INT32_MIN, INT32_MAX});
    TensorDesc io = make(TF_DTYPE_I32, {7});
    const tf_params_clamp frac = clamp_params(-1.5, 2.5);  // [-1, 2]
    run_ok(TF_OP_CLAMP, {&i}, io, &frac);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{-1, -1, 0, 1, 2, -1, 2});
    const tf_params_clamp open = clamp_params(-INFINITY, INFINITY);
    run_ok(TF_OP_CLAMP, {&i}, io, &open);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{-5, -1, 0, 1, 3, INT32_MIN, INT32_MAX});
    const tf_params_clamp huge = clamp_params(-1e30, 1e30);  // beyond i32: no effect
    run_ok(TF_OP_CLAMP, {&i}, io, &huge);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{-5, -1, 0, 1, 3, INT32_MIN, INT32_MAX});
    const tf_params_clamp upper = clamp_params(-INFINITY, 0);
    run_ok(TF_OP_CLAMP, {&i}, io, &upper);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{-5, -1, 0, 0, 0, INT32_MIN, 0});
    const tf_params_clamp positive = clamp_params(0.5, 2.5);  // [1, 2], not [0, 2]
    run_ok(TF_OP_CLAMP, {&i}, io, &positive);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{1, 1, 1, 1, 2, 1, 2});
    const tf_params_clamp negative = clamp_params(-INFINITY, -0.5);  // at most -1, not 0
    run_ok(TF_OP_CLAMP, {&i}, io, &negative);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{-5, -1, -1, -1, -1, INT32_MIN, -1});

    TensorDesc l = make(TF_DTYPE_I64, {3});
    set_raw<int64_t>(l, {INT64_MIN, 9007199254740993LL, INT64_MAX});
    TensorDesc lo = make(TF_DTYPE_I64, {3});
    const tf_params_clamp lower = clamp_params(9007199254740992.0, INFINITY);
    run_ok(TF_OP_CLAMP, {&l}, lo, &lower);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{9007199254740992LL, 9007199254740993LL, INT64_MAX});
    const tf_params_clamp above = clamp_params(1e30, INFINITY);  // saturates to INT64_MAX
    run_ok(TF_OP_CLAMP, {&l}, lo, &above);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{INT64_MAX, INT64_MAX, INT64_MAX});

    TensorDesc bl = make(TF_DTYPE_BOOL, {2});
    CHECK(Call(TF_OP_CLAMP, {&bl}, bl, &open).supports() == 0);
}

// ---- Reductions -----------------------------------------------------------------------------

// x[i][j][k] of a [2, 3, 4] tensor: small integers, exact in every dtype.
double cube_value(int64_t i, int64_t j, int64_t k) { return static_cast<double>((i * 12 + j * 4 + k) * 7 % 11 - 5); }

TEST_CASE("mean, max and min over axis masks, permuted input, strided output") {
    const Dims shape = {2, 3, 4};
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        // Storage [4, 3, 2] seen as [2, 3, 4]: element [i][j][k] at k * 6 + j * 2 + i.
        TensorDesc storage = make(dt, {4, 3, 2});
        TensorDesc x = view(storage, shape, {1, 2, 6});
        std::vector<double> values;
        for (int64_t e = 0; e < 24; ++e) {
            const auto idx = index_of(e, shape);
            values.push_back(cube_value(idx[0], idx[1], idx[2]));
        }
        set(x, values);

        for (uint32_t mask : {0b000u, 0b001u, 0b010u, 0b100u, 0b101u, 0b111u}) {
            CAPTURE(mask);
            Dims out_shape = shape;
            for (int a = 0; a < 3; ++a)
                if (mask >> a & 1) out_shape[static_cast<size_t>(a)] = 1;
            // Output in every other element of a larger buffer, with a wild stride on size-1 axes.
            const int64_t out_n = count_of(out_shape);
            TensorDesc out_storage = make(dt, {2 * out_n});
            Dims out_strides = contiguous_strides(out_shape);
            for (size_t a = 0; a < 3; ++a) out_strides[a] = out_shape[a] == 1 ? 1000 : out_strides[a] * 2;
            TensorDesc out = view(out_storage, out_shape, out_strides);

            std::vector<double> sum(static_cast<size_t>(out_n), 0), hi(static_cast<size_t>(out_n), -INFINITY),
                lo(static_cast<size_t>(out_n), INFINITY);
            std::vector<int> count(static_cast<size_t>(out_n), 0);
            for (int64_t e = 0; e < 24; ++e) {
                const size_t u = reduced_index(e, shape, out_shape, mask);
                sum[u] += values[static_cast<size_t>(e)];
                hi[u] = std::max(hi[u], values[static_cast<size_t>(e)]);
                lo[u] = std::min(lo[u], values[static_cast<size_t>(e)]);
                ++count[u];
            }
            const tf_params_reduce p = reduce_params(mask);
            run_ok(TF_OP_MAX, {&x}, out, &p);
            check_values(out, hi);
            run_ok(TF_OP_MIN, {&x}, out, &p);
            check_values(out, lo);
            if (is_float(dt)) {
                std::vector<double> mean;
                for (size_t u = 0; u < sum.size(); ++u) mean.push_back(sum[u] / count[u]);
                run_ok(TF_OP_MEAN, {&x}, out, &p);
                check_close(out, mean);
            }
            CHECK(only_elements_written(out));
        }
    }
}

TEST_CASE("max and min: NaN propagates, extremes of every integer") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc x = make(dt, {3, 3}, {1, NAN, 3, 4, 2, NAN, -INFINITY, -INFINITY, -INFINITY});
        TensorDesc out = make(dt, {3, 1});
        const tf_params_reduce p = reduce_params(0b10);
        run_ok(TF_OP_MAX, {&x}, out, &p);
        check_values(out, {NAN, NAN, -INFINITY});
        run_ok(TF_OP_MIN, {&x}, out, &p);
        check_values(out, {NAN, NAN, -INFINITY});
    }
    TensorDesc l = make(TF_DTYPE_I64, {4});
    set_raw<int64_t>(l, {9007199254740992LL, INT64_MIN, 9007199254740993LL, INT64_MAX});
    TensorDesc pairs = view(l, {2, 2}, {1, 2});  // rows {2^53, 2^53 + 1} and {MIN, MAX}
    const tf_params_reduce p = reduce_params(0b10);
    TensorDesc rows = make(TF_DTYPE_I64, {2, 1});
    run_ok(TF_OP_MAX, {&pairs}, rows, &p);
    CHECK(get_raw<int64_t>(rows) == std::vector<int64_t>{9007199254740993LL, INT64_MAX});
    run_ok(TF_OP_MIN, {&pairs}, rows, &p);
    CHECK(get_raw<int64_t>(rows) == std::vector<int64_t>{9007199254740992LL, INT64_MIN});

    TensorDesc i = make(TF_DTYPE_I32, {3});
    set_raw<int32_t>(i, {INT32_MAX, INT32_MIN, 0});
    TensorDesc io = make(TF_DTYPE_I32, {1});
    const tf_params_reduce all = reduce_params(1);
    run_ok(TF_OP_MAX, {&i}, io, &all);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{INT32_MAX});
    run_ok(TF_OP_MIN, {&i}, io, &all);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{INT32_MIN});
}

TEST_CASE("mean accumulates in double, in a fixed order") {
    // In f32, 1e8 + 1 == 1e8: a float accumulator gives 0.25, double gives 0.5.
    TensorDesc x = make(TF_DTYPE_F32, {4}, {1e8, 1, -1e8, 1});
    TensorDesc out = make(TF_DTYPE_F32, {1});
    const tf_params_reduce p = reduce_params(1);
    run_ok(TF_OP_MEAN, {&x}, out, &p);
    check_values(out, {0.5});
    TensorDesc v = make(TF_DTYPE_F32, {1});
    const tf_params_var pv = var_params(1, 0);
    run_ok(TF_OP_VAR, {&x}, v, &pv);
    // mean 0.5; deviations 1e8 - 0.5, 0.5, -1e8 - 0.5, 0.5 -> (2 (1e8 - .5)^2... ) / 4, by hand:
    // ((1e8 - 0.5)^2 + (1e8 + 0.5)^2 + 2 * 0.25) / 4 = (2e16 + 0.5 + 0.5) / 4 = 5e15 + 0.25
    check_close(v, {5e15 + 0.25});

    TensorDesc b = make(TF_DTYPE_BF16, {4}, {1, 2, 4, 8});
    TensorDesc bo = make(TF_DTYPE_BF16, {1});
    run_ok(TF_OP_MEAN, {&b}, bo, &p);
    check_values(bo, {3.75});
}

TEST_CASE("f32 sum and mean of dense tensors over every axis mask match double sums") {
    // Odd sizes put elements in every lane of the vectorized path and leave remainders; the
    // [2, 40000] rows cross its 16384-element chunks; masks that interleave take the walk.
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
    for (const Dims &shape : {Dims{3, 37, 5, 41}, Dims{2, 40000}, Dims{64, 1, 9}}) {
        const int rank = static_cast<int>(shape.size());
        const int64_t n = count_of(shape);
        std::vector<double> values(static_cast<size_t>(n));
        for (double &v : values) v = pick(rng);
        TensorDesc x = make(TF_DTYPE_F32, shape, values);
        for (uint32_t mask = 0; mask < (1u << rank); ++mask) {
            CAPTURE(shape.size());
            CAPTURE(mask);
            Dims out_shape = shape;
            for (int a = 0; a < rank; ++a)
                if (mask >> a & 1) out_shape[static_cast<size_t>(a)] = 1;
            std::vector<double> sum(static_cast<size_t>(count_of(out_shape)), 0);
            for (int64_t e = 0; e < n; ++e)
                sum[reduced_index(e, shape, out_shape, mask)] += values[static_cast<size_t>(e)];
            const double per_output = static_cast<double>(n) / static_cast<double>(sum.size());
            std::vector<double> mean;
            for (double v : sum) mean.push_back(v / per_output);
            TensorDesc out = make(TF_DTYPE_F32, out_shape);
            const tf_params_reduce p = reduce_params(mask);
            run_ok(TF_OP_SUM, {&x}, out, &p);
            check_close(out, sum);
            run_ok(TF_OP_MEAN, {&x}, out, &p);
            check_close(out, mean);
        }
    }
}

TEST_CASE("var: corrections 0 and 1, fractional, and n - correction <= 0") {
    const std::vector<double> values = {1, 2, 3, 4, 5, 7};  // [2, 3]
    auto host_var = [&](const std::vector<double> &xs, double correction) {
        long double mean = 0, squares = 0;
        for (double v : xs) mean += v;
        mean /= static_cast<long double>(xs.size());
        for (double v : xs) squares += (v - mean) * (v - mean);
        return static_cast<double>(
            squares / static_cast<long double>(std::max(static_cast<double>(xs.size()) - correction, 0.0)));
    };
    for (int32_t dt : k_float) {
        for (double correction : {0.0, 1.0, 0.5}) {
            INFO("dtype ", name_of(dt));
            CAPTURE(correction);
            TensorDesc st = make(dt, {3, 2}, {1, 4, 2, 5, 3, 7});
            TensorDesc x = transposed(st);  // [[1, 2, 3], [4, 5, 7]]
            TensorDesc wide = make(dt, {4});
            TensorDesc rows = view(wide, {2, 1}, {2, 7}, 1);
            const tf_params_var pr = var_params(0b10, correction);
            run_ok(TF_OP_VAR, {&x}, rows, &pr);
            check_close(rows, {host_var({1, 2, 3}, correction), host_var({4, 5, 7}, correction)});
            CHECK(only_elements_written(rows));

            TensorDesc cols = make(dt, {1, 3});
            const tf_params_var pc = var_params(0b01, correction);
            run_ok(TF_OP_VAR, {&x}, cols, &pc);
            check_close(cols,
                        {host_var({1, 4}, correction), host_var({2, 5}, correction), host_var({3, 7}, correction)});

            TensorDesc all = make(dt, {1, 1});
            const tf_params_var pa = var_params(0b11, correction);
            run_ok(TF_OP_VAR, {&x}, all, &pa);
            check_close(all, {host_var(values, correction)});
        }
        // The divisor max(n - correction, 0) hits 0: inf, or NaN when the deviations are 0 too.
        TensorDesc x = make(dt, {2, 3}, {1, 2, 3, 2, 2, 2});
        TensorDesc rows = make(dt, {2, 1});
        for (double correction : {3.0, 4.0}) {
            const tf_params_var p = var_params(0b10, correction);
            run_ok(TF_OP_VAR, {&x}, rows, &p);
            check_values(rows, {INFINITY, NAN});
        }
        // One element, correction 1: 0 / 0.
        TensorDesc one = make(dt, {1}, {5});
        TensorDesc o = make(dt, {1});
        const tf_params_var p1 = var_params(1, 1);
        run_ok(TF_OP_VAR, {&one}, o, &p1);
        check_values(o, {NAN});
        const tf_params_var p0 = var_params(1, 0);
        run_ok(TF_OP_VAR, {&one}, o, &p0);
        check_values(o, {0});
        // NaN and inf inputs give NaN.
        TensorDesc bad = make(dt, {2, 2}, {1, NAN, INFINITY, 1});
        TensorDesc bo = make(dt, {2, 1});
        const tf_params_var pb = var_params(0b10, 0);
        run_ok(TF_OP_VAR, {&bad}, bo, &pb);
        check_values(bo, {NAN, NAN});
    }
}

// ---- argmax, argmin -------------------------------------------------------------------------

TEST_CASE("argmax and argmin: first index of ties, every numeric dtype") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc x = make(dt, {3, 4}, {1, 3, 3, 2, 5, -1, 7, 7, -2, -2, -2, -2});
        TensorDesc out = make(TF_DTYPE_I64, {3, 1});
        const tf_params_axis p1 = axis_params(1);
        run_ok(TF_OP_ARGMAX, {&x}, out, &p1);
        CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{1, 2, 0});
        run_ok(TF_OP_ARGMIN, {&x}, out, &p1);
        CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{0, 1, 0});

        TensorDesc cols = make(TF_DTYPE_I64, {1, 4});
        const tf_params_axis p0 = axis_params(0);
        run_ok(TF_OP_ARGMAX, {&x}, cols, &p0);
        CHECK(get_raw<int64_t>(cols) == std::vector<int64_t>{1, 0, 1, 1});
        run_ok(TF_OP_ARGMIN, {&x}, cols, &p0);
        CHECK(get_raw<int64_t>(cols) == std::vector<int64_t>{2, 2, 2, 2});
    }
}

TEST_CASE("argmax and argmin: rank 3 on a permuted input, strided output, every axis") {
    const Dims shape = {2, 3, 4};
    for (int32_t dt : k_numeric) {
        TensorDesc storage = make(dt, {4, 3, 2});
        TensorDesc x = view(storage, shape, {1, 2, 6});
        std::vector<double> values;
        for (int64_t e = 0; e < 24; ++e) {
            const auto idx = index_of(e, shape);
            values.push_back(cube_value(idx[0], idx[1], idx[2]));
        }
        set(x, values);
        for (int32_t axis = 0; axis < 3; ++axis) {
            INFO("dtype ", name_of(dt));
            CAPTURE(axis);
            Dims out_shape = shape;
            out_shape[static_cast<size_t>(axis)] = 1;
            const int64_t out_n = count_of(out_shape);
            TensorDesc out_storage = make(TF_DTYPE_I64, {3 * out_n});
            Dims strides = contiguous_strides(out_shape);
            for (int64_t &s : strides) s *= 3;
            TensorDesc out = view(out_storage, out_shape, strides, 2);

            // The host's own scan: lowest index of the largest / smallest value along the axis.
            std::vector<double> best_max, best_min;
            for (int64_t o = 0; o < out_n; ++o) {
                auto idx = index_of(o, out_shape);
                int64_t imax = 0, imin = 0;
                double vmax = -INFINITY, vmin = INFINITY;
                for (int64_t j = 0; j < shape[static_cast<size_t>(axis)]; ++j) {
                    idx[static_cast<size_t>(axis)] = j;
                    const double v = cube_value(idx[0], idx[1], idx[2]);
                    if (v > vmax) {
                        vmax = v;
                        imax = j;
                    }
                    if (v < vmin) {
                        vmin = v;
                        imin = j;
                    }
                }
                best_max.push_back(static_cast<double>(imax));
                best_min.push_back(static_cast<double>(imin));
            }
            const tf_params_axis p = axis_params(axis);
            run_ok(TF_OP_ARGMAX, {&x}, out, &p);
            check_values(out, best_max);
            run_ok(TF_OP_ARGMIN, {&x}, out, &p);
            check_values(out, best_min);
            CHECK(only_elements_written(out));
        }
    }
}

TEST_CASE("argmax and argmin: the first NaN wins, -0 ties +0, i64 exact, broadcast input") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc x =
            make(dt, {4, 4},
                 {5, NAN, 7, NAN, 1, 2, 3, NAN, NAN, -INFINITY, 0, 1, -INFINITY, -INFINITY, -INFINITY, -INFINITY});
        TensorDesc out = make(TF_DTYPE_I64, {4, 1});
        const tf_params_axis p = axis_params(1);
        run_ok(TF_OP_ARGMAX, {&x}, out, &p);
        CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{1, 3, 0, 0});
        run_ok(TF_OP_ARGMIN, {&x}, out, &p);
        CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{1, 3, 0, 0});
    }
    TensorDesc z = make(TF_DTYPE_F32, {2});
    set_raw<float>(z, {-0.0f, 0.0f});
    TensorDesc zo = make(TF_DTYPE_I64, {1});
    const tf_params_axis p0 = axis_params(0);
    run_ok(TF_OP_ARGMAX, {&z}, zo, &p0);
    CHECK(get_raw<int64_t>(zo) == std::vector<int64_t>{0});
    run_ok(TF_OP_ARGMIN, {&z}, zo, &p0);
    CHECK(get_raw<int64_t>(zo) == std::vector<int64_t>{0});

    TensorDesc l = make(TF_DTYPE_I64, {3});
    set_raw<int64_t>(l, {9007199254740992LL, 9007199254740993LL, 9007199254740992LL});
    TensorDesc lo = make(TF_DTYPE_I64, {1});
    run_ok(TF_OP_ARGMAX, {&l}, lo, &p0);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{1});
    run_ok(TF_OP_ARGMIN, {&l}, lo, &p0);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{0});

    // A broadcast axis: every element equal, so index 0.
    TensorDesc one = make(TF_DTYPE_I32, {2}, {4, 9});
    TensorDesc b = view(one, {2, 5}, {1, 0});
    TensorDesc bo = make(TF_DTYPE_I64, {2, 1});
    const tf_params_axis p1 = axis_params(1);
    run_ok(TF_OP_ARGMAX, {&b}, bo, &p1);
    CHECK(get_raw<int64_t>(bo) == std::vector<int64_t>{0, 0});
}

TEST_CASE("argmax and argmin: empty axes fail cleanly, other empty axes are fine") {
    for (uint32_t op : {TF_OP_ARGMAX, TF_OP_ARGMIN}) {
        CAPTURE(op);
        TensorDesc x = no_data(TF_DTYPE_F32, {2, 0});
        TensorDesc out = make(TF_DTYPE_I64, {2, 1});
        const tf_params_axis p1 = axis_params(1);
        const Call c(op, {&x}, out, &p1);
        CHECK(c.supports() == 0);
        std::string message;
        CHECK(c.run(&message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("size 0") != std::string::npos);
        CHECK(untouched(out));
        TensorDesc both = no_data(TF_DTYPE_F32, {0, 0});
        TensorDesc none_out = no_data(TF_DTYPE_I64, {0, 1});
        CHECK(run_fail(op, {&both}, none_out, &p1, &message) == TF_STATUS_INVALID_ARGUMENT);

        TensorDesc rows = no_data(TF_DTYPE_I32, {0, 3});
        TensorDesc rows_out = no_data(TF_DTYPE_I64, {0, 1});
        run_ok(op, {&rows}, rows_out, &p1);
    }
}

// ---- Rank 0, zero-size ----------------------------------------------------------------------

TEST_CASE("rank-0 tensors through every new kind") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {}, {3});
        TensorDesc b = make(dt, {}, {2});
        TensorDesc out = make(dt, {});
        run_ok(TF_OP_POW, {&a, &b}, out);
        check_values(out, {9});
        run_ok(TF_OP_MAXIMUM, {&a, &b}, out);
        check_values(out, {3});
        run_ok(TF_OP_MINIMUM, {&a, &b}, out);
        check_values(out, {2});
        run_ok(TF_OP_ABS, {&b}, out);
        check_values(out, {2});
        run_ok(TF_OP_SQUARE, {&a}, out);
        check_values(out, {9});
        const tf_params_clamp c = clamp_params(0, 2.5);
        run_ok(TF_OP_CLAMP, {&a}, out, &c);
        check_values(out, {is_float(dt) ? 2.5 : 2});

        TensorDesc flag = make(TF_DTYPE_BOOL, {});
        for (uint32_t op : k_compare_ops) {
            run_ok(op, {&a, &b}, flag);
            check_values(flag, {compare_on_host(op, 3, 2) ? 1.0 : 0.0});
        }
        set(flag, {0});
        run_ok(TF_OP_WHERE, {&flag, &a, &b}, out);
        check_values(out, {2});

        const tf_params_reduce none = reduce_params(0);
        run_ok(TF_OP_MAX, {&a}, out, &none);
        check_values(out, {3});
        run_ok(TF_OP_MIN, {&a}, out, &none);
        check_values(out, {3});
        if (is_float(dt)) {
            run_ok(TF_OP_MEAN, {&a}, out, &none);
            check_values(out, {3});
            const tf_params_var v0 = var_params(0, 0), v1 = var_params(0, 1);
            run_ok(TF_OP_VAR, {&a}, out, &v0);
            check_values(out, {0});
            run_ok(TF_OP_VAR, {&a}, out, &v1);
            check_values(out, {NAN});
            for (const MathCase &m : k_math) {
                INFO("op ", m.name);
                run_ok(m.op, {&a}, out);
                check_close(out, {m.f(3)});
            }
        }
        // No axis to take: the ABI requires 0 <= axis < rank.
        TensorDesc idx = make(TF_DTYPE_I64, {});
        const tf_params_axis p0 = axis_params(0);
        CHECK(Call(TF_OP_ARGMAX, {&a}, idx, &p0).supports() == 0);
    }
    TensorDesc bl = make(TF_DTYPE_BOOL, {}, {1});
    TensorDesc cond = make(TF_DTYPE_BOOL, {}, {1});
    TensorDesc bo = make(TF_DTYPE_BOOL, {});
    run_ok(TF_OP_WHERE, {&cond, &bl, &cond}, bo);
    check_values(bo, {1});
}

TEST_CASE("zero-size tensors: no data needed, empty means and variances are NaN") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = no_data(dt, {0, 3});
        TensorDesc out = no_data(dt, {0, 3});
        TensorDesc flags = no_data(TF_DTYPE_BOOL, {0, 3});
        const tf_params_clamp c = clamp_params(-1, 1);
        for (uint32_t op : {TF_OP_POW, TF_OP_MAXIMUM, TF_OP_MINIMUM}) run_ok(op, {&a, &a}, out);
        for (uint32_t op : k_compare_ops) run_ok(op, {&a, &a}, flags);
        run_ok(TF_OP_WHERE, {&flags, &a, &a}, out);
        run_ok(TF_OP_ABS, {&a}, out);
        run_ok(TF_OP_SQUARE, {&a}, out);
        run_ok(TF_OP_CLAMP, {&a}, out, &c);
        // Keeping the empty axis: nothing to reduce into.
        TensorDesc kept = no_data(dt, {0, 1});
        const tf_params_reduce p1 = reduce_params(0b10);
        run_ok(TF_OP_MAX, {&a}, kept, &p1);
        run_ok(TF_OP_MIN, {&a}, kept, &p1);
        // Reducing the empty axis: max and min have no value to give.
        TensorDesc cols = make(dt, {1, 3});
        const tf_params_reduce p0 = reduce_params(0b01);
        for (uint32_t op : {TF_OP_MAX, TF_OP_MIN}) {
            const Call refused(op, {&a}, cols, &p0);
            CHECK(refused.supports() == 0);
            std::string message;
            CHECK(refused.run(&message) == TF_STATUS_INVALID_ARGUMENT);
            CHECK(message.find("size 0") != std::string::npos);
            CHECK(untouched(cols));
        }
        if (is_float(dt)) {
            for (const MathCase &m : k_math) run_ok(m.op, {&a}, out);
            run_ok(TF_OP_MEAN, {&a}, cols, &p0);
            check_values(cols, {NAN, NAN, NAN});
            for (double correction : {0.0, 1.0}) {
                const tf_params_var pv = var_params(0b01, correction);
                run_ok(TF_OP_VAR, {&a}, cols, &pv);
                check_values(cols, {NAN, NAN, NAN});
            }
            run_ok(TF_OP_MEAN, {&a}, kept, &p1);
        }
    }
}

// ---- supports() -----------------------------------------------------------------------------

TEST_CASE("supports answers descriptors without memory for every new op") {
    const tf_params_reduce rp = reduce_params(0b01);
    const tf_params_var vp = var_params(0b01, 1);
    const tf_params_axis ap = axis_params(1);
    const tf_params_clamp cp = clamp_params(-1, 1);
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        const TensorDesc x = no_data(dt, {2, 3}), reduced = no_data(dt, {1, 3});
        const TensorDesc flags = no_data(TF_DTYPE_BOOL, {2, 3}), index = no_data(TF_DTYPE_I64, {2, 1});
        for (uint32_t op : {TF_OP_POW, TF_OP_MAXIMUM, TF_OP_MINIMUM}) CHECK(Call(op, {&x, &x}, x).supports() == 1);
        for (uint32_t op : k_compare_ops) CHECK(Call(op, {&x, &x}, flags).supports() == 1);
        CHECK(Call(TF_OP_WHERE, {&flags, &x, &x}, x).supports() == 1);
        for (const MathCase &m : k_math) CHECK(Call(m.op, {&x}, x).supports() == 1);
        CHECK(Call(TF_OP_ABS, {&x}, x).supports() == 1);
        CHECK(Call(TF_OP_SQUARE, {&x}, x).supports() == 1);
        CHECK(Call(TF_OP_CLAMP, {&x}, x, &cp).supports() == 1);
        for (uint32_t op : {TF_OP_MEAN, TF_OP_MAX, TF_OP_MIN}) CHECK(Call(op, {&x}, reduced, &rp).supports() == 1);
        CHECK(Call(TF_OP_VAR, {&x}, reduced, &vp).supports() == 1);
        CHECK(Call(TF_OP_ARGMAX, {&x}, index, &ap).supports() == 1);
        CHECK(Call(TF_OP_ARGMIN, {&x}, index, &ap).supports() == 1);
    }
    // run() needs the data supports() did without.
    const TensorDesc x = no_data(TF_DTYPE_F32, {2, 3});
    std::string message;
    CHECK(Call(TF_OP_LOG, {&x}, x).run(&message) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(message.find("no host address") != std::string::npos);
}

TEST_CASE("supports says no to wrong dtypes") {
    const TensorDesc f = no_data(TF_DTYPE_F32, {2, 2}), h = no_data(TF_DTYPE_F16, {2, 2});
    const TensorDesc i = no_data(TF_DTYPE_I32, {2, 2}), l = no_data(TF_DTYPE_I64, {2, 2});
    const TensorDesc bl = no_data(TF_DTYPE_BOOL, {2, 2});
    const TensorDesc f_row = no_data(TF_DTYPE_F32, {1, 2}), i_row = no_data(TF_DTYPE_I32, {1, 2});
    const TensorDesc b_row = no_data(TF_DTYPE_BOOL, {1, 2}), l_col = no_data(TF_DTYPE_I64, {2, 1});
    const TensorDesc i_col = no_data(TF_DTYPE_I32, {2, 1}), f_col = no_data(TF_DTYPE_F32, {2, 1});
    const tf_params_reduce rp = reduce_params(0b01);
    const tf_params_var vp = var_params(0b01, 1);
    const tf_params_axis ap = axis_params(1);
    const tf_params_clamp cp = clamp_params(-1, 1);

    // Binary: one dtype throughout; pow, maximum, minimum numeric only.
    for (uint32_t op : {TF_OP_POW, TF_OP_MAXIMUM, TF_OP_MINIMUM}) {
        CAPTURE(op);
        CHECK(Call(op, {&i, &i}, i).supports() == 1);
        CHECK(Call(op, {&l, &l}, l).supports() == 1);
        CHECK(Call(op, {&f, &h}, f).supports() == 0);
        CHECK(Call(op, {&f, &f}, h).supports() == 0);
        CHECK(Call(op, {&bl, &bl}, bl).supports() == 0);
    }
    // Comparisons: inputs of one dtype (bool too), bool output.
    for (uint32_t op : k_compare_ops) {
        CAPTURE(op);
        for (const TensorDesc *t : {&f, &h, &i, &l, &bl}) CHECK(Call(op, {t, t}, bl).supports() == 1);
        CHECK(Call(op, {&f, &h}, bl).supports() == 0);
        CHECK(Call(op, {&i, &l}, bl).supports() == 0);
        CHECK(Call(op, {&f, &f}, f).supports() == 0);
        CHECK(Call(op, {&i, &i}, i).supports() == 0);
    }
    // where: bool condition, a, b and out of one dtype (any).
    for (const TensorDesc *t : {&f, &h, &i, &l, &bl}) CHECK(Call(TF_OP_WHERE, {&bl, t, t}, *t).supports() == 1);
    CHECK(Call(TF_OP_WHERE, {&i, &f, &f}, f).supports() == 0);
    CHECK(Call(TF_OP_WHERE, {&f, &f, &f}, f).supports() == 0);
    CHECK(Call(TF_OP_WHERE, {&bl, &f, &h}, f).supports() == 0);
    CHECK(Call(TF_OP_WHERE, {&bl, &f, &f}, h).supports() == 0);
    CHECK(Call(TF_OP_WHERE, {&bl, &i, &i}, l).supports() == 0);
    // Unary: float math refuses integers and bool; abs, square, clamp take integers; dtype kept.
    for (const MathCase &m : k_math) {
        INFO("op ", m.name);
        CHECK(Call(m.op, {&i}, i).supports() == 0);
        CHECK(Call(m.op, {&l}, l).supports() == 0);
        CHECK(Call(m.op, {&bl}, bl).supports() == 0);
        CHECK(Call(m.op, {&f}, h).supports() == 0);
    }
    CHECK(Call(TF_OP_ABS, {&l}, l).supports() == 1);
    CHECK(Call(TF_OP_SQUARE, {&i}, i).supports() == 1);
    CHECK(Call(TF_OP_CLAMP, {&i}, i, &cp).supports() == 1);
    CHECK(Call(TF_OP_ABS, {&f}, i).supports() == 0);
    CHECK(Call(TF_OP_CLAMP, {&f}, h, &cp).supports() == 0);
    // Reductions: mean and var float only; max and min numeric; output dtype = input dtype.
    CHECK(Call(TF_OP_MEAN, {&i}, i_row, &rp).supports() == 0);
    CHECK(Call(TF_OP_VAR, {&i}, i_row, &vp).supports() == 0);
    CHECK(Call(TF_OP_MAX, {&i}, i_row, &rp).supports() == 1);
    CHECK(Call(TF_OP_MIN, {&bl}, b_row, &rp).supports() == 0);
    CHECK(Call(TF_OP_MAX, {&f}, i_row, &rp).supports() == 0);
    CHECK(Call(TF_OP_MEAN, {&f}, f_row, &rp).supports() == 1);
    // arg: numeric input, i64 output.
    CHECK(Call(TF_OP_ARGMAX, {&i}, l_col, &ap).supports() == 1);
    CHECK(Call(TF_OP_ARGMAX, {&bl}, l_col, &ap).supports() == 0);
    CHECK(Call(TF_OP_ARGMIN, {&f}, i_col, &ap).supports() == 0);
    CHECK(Call(TF_OP_ARGMIN, {&f}, f_col, &ap).supports() == 0);
}

TEST_CASE("supports says no to wrong arity, params and shapes") {
    const TensorDesc f = no_data(TF_DTYPE_F32, {2, 3}), bl = no_data(TF_DTYPE_BOOL, {2, 3});
    const TensorDesc f_row = no_data(TF_DTYPE_F32, {1, 3}), l_col = no_data(TF_DTYPE_I64, {2, 1});
    const tf_params_reduce rp = reduce_params(0b01);
    const tf_params_var vp = var_params(0b01, 1);
    const tf_params_axis ap = axis_params(1);
    const tf_params_clamp cp = clamp_params(-1, 1);

    SUBCASE("arity") {
        CHECK(Call(TF_OP_POW, {&f}, f).supports() == 0);
        CHECK(Call(TF_OP_MAXIMUM, {&f, &f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_EQ, {&f}, bl).supports() == 0);
        CHECK(Call(TF_OP_WHERE, {&bl, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_WHERE, {&bl, &f, &f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_SIGMOID, {&f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_ARGMAX, {&f, &f}, l_col, &ap).supports() == 0);
        Call no_out(TF_OP_WHERE, {&bl, &f, &f}, f);
        no_out.op.n_outputs = 2;
        CHECK(no_out.supports() == 0);
    }
    SUBCASE("params: NULL, too small, out of range") {
        CHECK(Call(TF_OP_CLAMP, {&f}, f, nullptr).supports() == 0);
        CHECK(Call(TF_OP_MEAN, {&f}, f_row, nullptr).supports() == 0);
        CHECK(Call(TF_OP_VAR, {&f}, f_row, nullptr).supports() == 0);
        CHECK(Call(TF_OP_ARGMAX, {&f}, l_col, nullptr).supports() == 0);
        tf_params_clamp small_clamp = cp;
        small_clamp.struct_size = offsetof(tf_params_clamp, max);  // no max member
        CHECK(Call(TF_OP_CLAMP, {&f}, f, &small_clamp).supports() == 0);
        // A tf_params_reduce is too small to be a tf_params_var.
        tf_params_var small_var = vp;
        small_var.struct_size = sizeof(tf_params_reduce);
        CHECK(Call(TF_OP_VAR, {&f}, f_row, &small_var).supports() == 0);
        CHECK(Call(TF_OP_VAR, {&f}, f_row, &rp).supports() == 0);
        tf_params_axis small_axis = ap;
        small_axis.struct_size = 4;
        CHECK(Call(TF_OP_ARGMAX, {&f}, l_col, &small_axis).supports() == 0);
        for (int32_t axis : {-1, 2, 1000}) {
            const tf_params_axis bad = axis_params(axis);
            CHECK(Call(TF_OP_ARGMIN, {&f}, l_col, &bad).supports() == 0);
        }
        const tf_params_var beyond = var_params(0b100, 1);
        CHECK(Call(TF_OP_VAR, {&f}, f_row, &beyond).supports() == 0);
    }
    SUBCASE("shapes") {
        const TensorDesc f23 = no_data(TF_DTYPE_F32, {3, 2}), b32 = no_data(TF_DTYPE_BOOL, {3, 2});
        CHECK(Call(TF_OP_POW, {&f, &f23}, f).supports() == 0);
        CHECK(Call(TF_OP_LT, {&f, &f}, b32).supports() == 0);
        CHECK(Call(TF_OP_WHERE, {&b32, &f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_WHERE, {&bl, &f23, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_TANH, {&f23}, f).supports() == 0);
        CHECK(Call(TF_OP_MEAN, {&f}, f, &rp).supports() == 0);  // axis 0 not reduced in the output
        const TensorDesc l_row = no_data(TF_DTYPE_I64, {1, 3}), l_flat = no_data(TF_DTYPE_I64, {2});
        CHECK(Call(TF_OP_ARGMAX, {&f}, l_row, &ap).supports() == 0);  // size 1 on the wrong axis
        CHECK(Call(TF_OP_ARGMAX, {&f}, l_flat, &ap).supports() == 0);  // axis dropped: not the ABI's shape
        CHECK(Call(TF_OP_ARGMAX, {&f}, l_col, &ap).supports() == 1);
    }
}
