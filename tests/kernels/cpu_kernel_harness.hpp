// The harness of the cpu plugin's kernel tests (tests/kernels/test_cpu_<family>.cpp, one
// program): the plugin's table called directly through the ABI with no core, test tensors in the
// plugin's own buffers (sentinel-filled, so a test can tell which bytes a kernel wrote), dtype
// conversions written here independently of the plugin's, op calls, and the references and
// checks the families share. Expected values are hand-computed or computed here in double from
// the ops' definitions, never with the plugin's own helpers.
#pragma once

#include <doctest/doctest.h>

#include <tinyfin/plugin.h>

#include "cpu_plugin_table.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cpu_kernel_test {

// ---- The plugin -----------------------------------------------------------------------------

// The cpu plugin's table (cpu_plugin_table.hpp), probed and initialised once.
inline const tf_plugin &P() {
    static const tf_plugin *table = [] {
        const tf_plugin *t = &cpu_plugin_table();
        tf_error err{sizeof(tf_error), {}};
        REQUIRE(t->probe(&err) == TF_STATUS_OK);
        REQUIRE(t->init(&err) == TF_STATUS_OK);
        return t;
    }();
    return *table;
}

inline tf_error make_error() {
    tf_error err{};
    err.struct_size = sizeof err;
    return err;
}

// ---- Test-side dtype handling, independent of the plugin's ----------------------------------

inline size_t size_of(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F32:
    case TF_DTYPE_I32: return 4;
    case TF_DTYPE_F16:
    case TF_DTYPE_BF16: return 2;
    case TF_DTYPE_I64: return 8;
    default: return 1;
    }
}

inline const char *name_of(int32_t dtype) {
    static const char *names[] = {"f32", "f16", "bf16", "i32", "i64", "bool"};
    return dtype >= 0 && dtype < TF_DTYPE_COUNT_ ? names[dtype] : "?";
}

inline double half_value(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

// The f16 pattern of a value f16 holds exactly: looked up among every pattern's value as
// half_value decodes it (the first pattern of each value, as a search from 0 would find), so it
// cannot share a bug with the plugin's conversions.
inline uint16_t half_bits(double v) {
    static const std::map<std::pair<bool, double>, uint16_t> patterns = [] {
        std::map<std::pair<bool, double>, uint16_t> m;
        for (uint32_t b = 0; b < 0x10000; ++b) {
            const double h = half_value(static_cast<uint16_t>(b));
            if (!std::isnan(h)) m.emplace(std::make_pair(std::signbit(h), h), static_cast<uint16_t>(b));
        }
        return m;
    }();
    if (std::isnan(v)) return 0x7e00;  // before the lookup: NaN has no place in an ordered map
    const auto found = patterns.find(std::make_pair(std::signbit(v), v));
    if (found != patterns.end()) return found->second;
    FAIL("test bug: ", v, " is not exact in f16");
    return 0;
}

inline uint16_t bf16_bits(double v) {
    const float f = static_cast<float>(v);
    if (!std::isnan(v)) REQUIRE_MESSAGE(static_cast<double>(f) == v, "test bug: ", v, " is not exact in f32");
    const uint32_t b = std::bit_cast<uint32_t>(f);
    if (!std::isnan(v)) REQUIRE_MESSAGE((b & 0xffff) == 0, "test bug: ", v, " is not exact in bf16");
    return static_cast<uint16_t>(b >> 16);
}

inline double bf16_value(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

inline void put(char *p, int32_t dtype, double v) {
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

inline double take(const char *p, int32_t dtype) {
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

inline constexpr unsigned char k_sentinel = 0xab;

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

inline int64_t count_of(const Dims &shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

inline tf_tensor_desc describe(int32_t dtype, const Dims &shape, const Dims &strides, int64_t offset_elems) {
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

inline Dims contiguous_strides(const Dims &shape) {
    Dims strides(shape.size());
    int64_t s = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = s;
        s *= shape[i];
    }
    return strides;
}

inline TensorDesc make(int32_t dtype, const Dims &shape) {
    TensorDesc t;
    t.mem = std::make_shared<Block>(static_cast<size_t>(count_of(shape)) * size_of(dtype));
    t.d = describe(dtype, shape, contiguous_strides(shape), 0);
    t.d.buffer = t.mem->buffer;
    t.d.data = t.mem->data;
    return t;
}

// A view of base's storage with its own shape, strides (elements) and offset (elements).
inline TensorDesc view(const TensorDesc &base, const Dims &shape, const Dims &strides, int64_t offset_elems = 0) {
    TensorDesc t = base;
    t.d = describe(base.d.dtype, shape, strides, offset_elems);
    t.d.buffer = base.d.buffer;
    t.d.data = base.d.data;
    return t;
}

// Rank 2: the transpose as a view.
inline TensorDesc transposed(const TensorDesc &t) {
    return view(t, {t.d.shape[1], t.d.shape[0]}, {t.d.strides[1], t.d.strides[0]},
                static_cast<int64_t>(t.d.offset / size_of(t.d.dtype)));
}

// A tensor without storage: only valid with zero elements.
inline TensorDesc no_data(int32_t dtype, const Dims &shape) {
    TensorDesc t;
    t.d = describe(dtype, shape, contiguous_strides(shape), 0);
    return t;
}

// Byte offsets (from data) of the view's elements in row-major order.
inline std::vector<size_t> element_offsets(const tf_tensor_desc &d) {
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

inline void set(const TensorDesc &t, const std::vector<double> &values) {
    const auto offsets = element_offsets(t.d);
    REQUIRE(offsets.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) put(t.mem->data + offsets[i], t.d.dtype, values[i]);
}

inline std::vector<double> get(const TensorDesc &t) {
    std::vector<double> values;
    for (size_t off : element_offsets(t.d)) values.push_back(take(t.mem->data + off, t.d.dtype));
    return values;
}

// Raw element access for bit patterns and extreme integers.
template <class T>
inline void set_raw(const TensorDesc &t, const std::vector<T> &values) {
    REQUIRE(sizeof(T) == size_of(t.d.dtype));
    const auto offsets = element_offsets(t.d);
    REQUIRE(offsets.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) std::memcpy(t.mem->data + offsets[i], &values[i], sizeof(T));
}

template <class T>
inline std::vector<T> get_raw(const TensorDesc &t) {
    REQUIRE(sizeof(T) == size_of(t.d.dtype));
    std::vector<T> values;
    for (size_t off : element_offsets(t.d)) {
        T v;
        std::memcpy(&v, t.mem->data + off, sizeof(T));
        values.push_back(v);
    }
    return values;
}

inline TensorDesc make(int32_t dtype, const Dims &shape, const std::vector<double> &values) {
    TensorDesc t = make(dtype, shape);
    set(t, values);
    return t;
}

inline void check_values(const TensorDesc &t, const std::vector<double> &expected) {
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
inline bool only_elements_written(const TensorDesc &t) {
    std::vector<bool> mine(t.mem->bytes, false);
    for (size_t off : element_offsets(t.d))
        for (size_t b = 0; b < size_of(t.d.dtype); ++b) mine[off + b] = true;
    for (size_t b = 0; b < t.mem->bytes; ++b)
        if (!mine[b] && static_cast<unsigned char>(t.mem->data[b]) != k_sentinel) return false;
    return true;
}

inline bool untouched(const TensorDesc &t) {
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
    // From descriptors (those of no_data_desc included: supports() needs no memory).
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
    Call(const Call &) = delete;

    int32_t supports() const { return P().supports(0, &op); }
    tf_status run(std::string *message = nullptr) const {
        tf_error err = make_error();
        const tf_status status = P().run(0, &op, &err);
        if (message) *message = err.message;
        return status;
    }
};

inline void run_ok(uint32_t id, std::initializer_list<const TensorDesc *> ins, const TensorDesc &out,
                   const void *params = nullptr) {
    const Call c(id, ins, out, params);
    INFO("op ", id, " dtype ", name_of(out.d.dtype));
    REQUIRE(c.supports() == 1);
    std::string message;
    const tf_status status = c.run(&message);
    INFO("message: ", message);
    REQUIRE(status == TF_STATUS_OK);
}

inline tf_params_reduce reduce_params(uint32_t mask) { return {sizeof(tf_params_reduce), mask}; }
inline tf_params_fill fill_params(double value) { return {sizeof(tf_params_fill), value}; }

inline constexpr int32_t k_numeric[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_I64};
inline constexpr int32_t k_float[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16};
inline constexpr int32_t k_all[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16,
                                    TF_DTYPE_I32, TF_DTYPE_I64, TF_DTYPE_BOOL};

inline bool is_float(int32_t dtype) { return dtype <= TF_DTYPE_BF16; }

inline std::string hex(uint32_t v) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%x", v);
    return text;
}

inline uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }
inline float bits_f32(uint32_t b) { return std::bit_cast<float>(b); }

// ---- Helpers for these ops -------------------------------------------------------------------

inline tf_params_var var_params(uint32_t mask, double correction) { return {sizeof(tf_params_var), mask, correction}; }
inline tf_params_axis axis_params(int32_t axis) { return {sizeof(tf_params_axis), axis}; }
inline tf_params_clamp clamp_params(double min, double max) { return {sizeof(tf_params_clamp), min, max}; }

// The plugin rounds a double result once, so it is within half an ulp of the exact value; this
// allows one ulp (relative to the value, or the smallest subnormal near zero).
inline double tolerance(int32_t dtype, double expected) {
    switch (dtype) {
    case TF_DTYPE_F16: return std::max(std::ldexp(std::fabs(expected), -10), 0x1p-24);
    case TF_DTYPE_BF16: return std::max(std::ldexp(std::fabs(expected), -7), 0x1p-133);
    default: return std::max(std::ldexp(std::fabs(expected), -23), 0x1p-149);
    }
}

inline void check_close(const TensorDesc &t, const std::vector<double> &expected) {
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
inline tf_status run_fail(uint32_t id, std::initializer_list<const TensorDesc *> ins, const TensorDesc &out,
                          const void *params, std::string *message) {
    const Call c(id, ins, out, params);
    return c.run(message);
}

inline constexpr uint32_t k_compare_ops[] = {TF_OP_EQ, TF_OP_NE, TF_OP_LT, TF_OP_LE, TF_OP_GT, TF_OP_GE};

inline bool compare_on_host(uint32_t op, double a, double b) {
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

inline const MathCase k_math[] = {
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
inline std::vector<int64_t> index_of(int64_t e, const Dims &shape) {
    std::vector<int64_t> idx(shape.size());
    for (size_t i = shape.size(); i-- > 0;) {
        idx[i] = e % shape[i];
        e /= shape[i];
    }
    return idx;
}

// Row-major index, in the output of a reduction over the axes in mask (kept with size 1), of the
// output element that input element e of shape goes to.
inline size_t reduced_index(int64_t e, const Dims &shape, const Dims &out_shape, uint32_t mask) {
    const auto idx = index_of(e, shape);
    int64_t o = 0;
    for (size_t a = 0; a < shape.size(); ++a) o = o * out_shape[a] + ((mask >> a & 1) ? 0 : idx[a]);
    return static_cast<size_t>(o);
}

// ---- Helpers of the OWN ops' tests (conv, pooling, softmax, norms, rope, attention, ...) -----

using Values = std::vector<double>;

// A view with its own strides and offset (elements) into fresh storage of storage_elems elements.
inline TensorDesc strided(int32_t dtype, const Dims &shape, const Dims &strides, int64_t offset_elems,
                          int64_t storage_elems) {
    TensorDesc t;
    t.mem = std::make_shared<Block>(static_cast<size_t>(storage_elems) * size_of(dtype));
    t.d = describe(dtype, shape, strides, offset_elems);
    t.d.buffer = t.mem->buffer;
    t.d.data = t.mem->data;
    return t;
}

// A descriptor without memory, as supports() may see it.
inline tf_tensor_desc no_data_desc(int32_t dtype, const Dims &shape) {
    return describe(dtype, shape, contiguous_strides(shape), 0);
}

inline TensorDesc f32(const Dims &shape, const Values &v) { return make(TF_DTYPE_F32, shape, v); }

// Random values that f32, f16 and bf16 all hold exactly: multiples of 1/8 in [-2, 2].
inline Values random_values(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> pick(-16, 16);
    Values v(n);
    for (double &x : v) x = pick(rng) / 8.0;
    return v;
}

// Random f32 values in [-1, 1).
inline Values random_f32(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
    Values v(n);
    for (double &x : v) x = pick(rng);
    return v;
}

// Each element within tol * (1 + |expected|); NaN and infinities exactly where expected has them.
inline void check_close(const Values &got, const Values &expected, double tol) {
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

// Runs a call that must fail with `expected`; returns its message.
inline std::string run_fails(tf_status expected, uint32_t id, std::initializer_list<const TensorDesc *> ins,
                             const TensorDesc &out, const void *params = nullptr) {
    const Call c(id, ins, out, params);
    std::string message;
    CHECK(c.run(&message) == expected);
    return message;
}

inline tf_params_conv2d conv_params(int sh, int sw, int ph, int pw, int dh, int dw, int groups) {
    return {sizeof(tf_params_conv2d), {sh, sw}, {ph, pw}, {dh, dw}, groups};
}

inline tf_params_pool2d pool_params(int kh, int kw, int sh, int sw, int ph, int pw, bool include_pad = false) {
    return {sizeof(tf_params_pool2d), {kh, kw}, {sh, sw}, {ph, pw}, include_pad ? 1 : 0};
}

inline bool contains(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

}  // namespace cpu_kernel_test
