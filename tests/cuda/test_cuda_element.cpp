// The cuda plugin's per-element math (plugins/cuda/element.hpp, what its elementwise kernels compute)
// run on the host against the cpu plugin, the reference, through the plugin ABI: unary, binary and
// comparison ops on edge values (NaN, infinities, signed zeros, integer limits), every cast, fill
// values and clamp bounds. Integer results, casts, fills and exact float ops must match bit for
// bit; transcendental functions within a few ulp (device math is f32, the cpu plugin's double).
// TF_CPU_PLUGIN names the cpu plugin's file.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <dlfcn.h>

#include <tinyfin/plugin_kit/ops.hpp>

#include "element.hpp"

using namespace tf_cuda;

namespace {

void host_log(int32_t, const char *, const char *) {}
const char *host_env(const char *name) { return name ? std::getenv(name) : nullptr; }
const tf_host_api k_host = {sizeof(tf_host_api), TF_ABI_VERSION, host_log, host_env};

// The cpu plugin, loaded once.
const tf_plugin &cpu() {
    static const tf_plugin *table = [] {
        const char *path = std::getenv("TF_CPU_PLUGIN");
        REQUIRE_MESSAGE(path, "TF_CPU_PLUGIN is not set");
        void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        REQUIRE_MESSAGE(handle, dlerror());
        auto entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(handle, TF_PLUGIN_ENTRY_NAME));
        REQUIRE(bool(entry));
        const tf_plugin *t = entry(&k_host);
        REQUIRE(t != nullptr);
        tf_error err{};
        err.struct_size = sizeof err;
        REQUIRE(t->probe(&err) == TF_STATUS_OK);
        REQUIRE(t->init(&err) == TF_STATUS_OK);
        return t;
    }();
    return *table;
}

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

// A host array of n elements of dtype.
struct Array {
    int32_t dtype;
    size_t n;
    std::vector<char> bytes;
    Array(int32_t d, size_t count) : dtype(d), n(count), bytes(count * size_of(d)) {}
    char *at(size_t i) { return bytes.data() + i * size_of(dtype); }
    const char *at(size_t i) const { return bytes.data() + i * size_of(dtype); }
    tf_tensor_desc desc() {
        tf_tensor_desc d;
        std::memset(&d, 0, sizeof d);
        d.struct_size = sizeof d;
        d.dtype = dtype;
        d.rank = 1;
        d.shape[0] = static_cast<int64_t>(n);
        d.strides[0] = 1;
        d.data = bytes.data();
        return d;
    }
};

// Runs op on the cpu plugin.
void run_cpu(uint32_t op, std::vector<Array *> inputs, Array &out, const void *params = nullptr) {
    std::vector<tf_tensor_desc> in;
    for (Array *a : inputs) in.push_back(a->desc());
    tf_tensor_desc o = out.desc();
    tf_op_desc desc{sizeof(tf_op_desc), op, static_cast<uint32_t>(in.size()), 1, in.data(), &o, params};
    tf_error err{};
    err.struct_size = sizeof err;
    REQUIRE_MESSAGE(cpu().supports(0, &desc), "cpu does not support op ", op, " dtype ", out.dtype);
    REQUIRE_MESSAGE(cpu().run(0, &desc, &err) == TF_STATUS_OK, err.message);
}

// The values every test walks: edges of every dtype, plus random ones unless edges_only.
std::vector<double> edge_values(bool edges_only = false) {
    std::vector<double> v = {0.0,           -0.0,       1,        -1,           0.5,          -0.5,
                             1.5,           -2.5,       2,        3.7,          -3.7,         10,
                             -10,           20,         -20,      88,           -88,          100,
                             -100,          1e-30,      -1e-30,   1e-8,         65504,        65520,
                             -65520,        3e9,        -3e9,     2147483647.0, 2147483648.0, -2147483648.0,
                             -2147483649.0, 9.3e18,     -9.3e18,  1e20,         -1e20,        1e30,
                             -1e30,         16777217.0, INFINITY, -INFINITY,    NAN,          0.1,
                             -0.7,          5.5,        255,      256,          -129};
    if (edges_only) return v;
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> u(-12, 12);
    for (int i = 0; i < 150; ++i) v.push_back(u(rng));
    return v;
}

// Values of dtype: the edge values cast by the cpu plugin (so both sides start from the same bits).
Array values_of(int32_t dtype, const std::vector<double> &from) {
    Array f64ish(TF_DTYPE_F32, from.size());
    for (size_t i = 0; i < from.size(); ++i) {
        const float f = static_cast<float>(from[i]);
        std::memcpy(f64ish.at(i), &f, 4);
    }
    if (dtype == TF_DTYPE_F32) return f64ish;
    Array out(dtype, from.size());
    run_cpu(TF_OP_CAST, {&f64ish}, out);
    return out;
}

template <class T>
T load_as(const char *p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Units in the last place between two floats of the same format (bits as signed magnitudes).
int64_t ulps(int64_t a, int64_t b, int bits) {
    const int64_t sign = int64_t{1} << (bits - 1);
    auto ordered = [&](int64_t x) { return (x & sign) ? -(x & (sign - 1)) : x; };
    const int64_t d = ordered(a) - ordered(b);
    return d < 0 ? -d : d;
}

// Element i of a float array as (bits, is NaN).
int64_t float_bits(const Array &a, size_t i) {
    if (a.dtype == TF_DTYPE_F32) return load_as<uint32_t>(a.at(i));
    return load_as<uint16_t>(a.at(i));
}
bool is_nan(const Array &a, size_t i) {
    switch (a.dtype) {
    case TF_DTYPE_F32: return std::isnan(load_as<float>(a.at(i)));
    case TF_DTYPE_F16: return std::isnan(__half2float(load_as<__half>(a.at(i))));
    default: return std::isnan(__bfloat162float(load_as<__nv_bfloat16>(a.at(i))));
    }
}

void check_bytes(const Array &got, const Array &want, const std::string &what) {
    for (size_t i = 0; i < want.n; ++i)
        CHECK_MESSAGE(std::memcmp(got.at(i), want.at(i), size_of(want.dtype)) == 0, what, " element ", i);
}

double as_double(const Array &a, size_t i) {
    switch (a.dtype) {
    case TF_DTYPE_F32: return load_as<float>(a.at(i));
    case TF_DTYPE_F16: return __half2float(load_as<__half>(a.at(i)));
    default: return __bfloat162float(load_as<__nv_bfloat16>(a.at(i)));
    }
}

// Float results agree: both NaN (any payload), or within max_ulps (0: bit for bit, -0 and +0
// apart), or, when rel > 0, within that relative error: f32 transcendental functions lose a few
// units of 1e-7 in the tails (erfc(-x / sqrt 2) for x near -8) where the cpu plugin's double does
// not, which no tolerance on results of order one notices.
void check_floats(const Array &got, const Array &want, int64_t max_ulps, const std::string &what, double rel = 0) {
    const int bits = got.dtype == TF_DTYPE_F32 ? 32 : 16;
    for (size_t i = 0; i < want.n; ++i) {
        if (is_nan(want, i) || is_nan(got, i)) {
            CHECK_MESSAGE(is_nan(want, i) == is_nan(got, i), what, " element ", i);
            continue;
        }
        const int64_t d = ulps(float_bits(got, i), float_bits(want, i), bits);
        const double g = as_double(got, i), w = as_double(want, i);
        // Subnormal results (sigmoid and silu far left) keep fewer bits still.
        const bool close = rel > 0 && std::fabs(g - w) <= rel * std::fabs(w) + 1e-37;
        CHECK_MESSAGE((d <= max_ulps || close), what, " element ", i, ": ", g, " vs ", w, ", ", d, " ulps apart");
    }
}

// Casts and fills: bit for bit, except that any NaN matches any NaN.
void check_converted(const Array &got, const Array &want, const std::string &what) {
    const bool is_float = want.dtype == TF_DTYPE_F32 || want.dtype == TF_DTYPE_F16 || want.dtype == TF_DTYPE_BF16;
    if (is_float)
        check_floats(got, want, 0, what);
    else
        check_bytes(got, want, what);
}

// Runs the device function on the host over every element: out[i] = f(a[i]) or f(a[i], b[i]).
template <class T, class F>
void map1(const Array &a, Array &out, F f) {
    for (size_t i = 0; i < a.n; ++i) {
        const auto r = f(load_as<T>(a.at(i)));
        std::memcpy(out.at(i), &r, sizeof r);
    }
}

const uint32_t float_unary[] = {TF_OP_NEG,       TF_OP_EXP,   TF_OP_RELU,   TF_OP_ABS,  TF_OP_LOG,     TF_OP_SQRT,
                                TF_OP_RSQRT,     TF_OP_SIN,   TF_OP_COS,    TF_OP_TANH, TF_OP_SIGMOID, TF_OP_GELU,
                                TF_OP_GELU_TANH, TF_OP_SILU,  TF_OP_SQUARE, TF_OP_ERF,  TF_OP_ASIN,    TF_OP_ACOS,
                                TF_OP_ATAN,      TF_OP_ASINH, TF_OP_ACOSH,  TF_OP_ATANH};

const uint32_t float_binary[] = {TF_OP_ADD, TF_OP_SUB, TF_OP_MUL,           TF_OP_MAXIMUM,      TF_OP_MINIMUM,
                                 TF_OP_DIV, TF_OP_POW, TF_OP_RELU_BACKWARD, TF_OP_GELU_BACKWARD};

// gelu_backward(dy, x) against cpu's: both are f32 evaluations, accurate to the size of the
// terms |dy| (1 + |x| phi(x)), not to the result, which crosses 0 near x = -0.75 (docs/numerics.md).
void check_gelu_backward(const Array &got, const Array &want, const Array &dy, const Array &x) {
    const double unit = got.dtype == TF_DTYPE_F32 ? 0x1p-20 : got.dtype == TF_DTYPE_F16 ? 0x1p-10 : 0x1p-7;
    for (size_t i = 0; i < want.n; ++i) {
        const double g = as_double(got, i), w = as_double(want, i), d = as_double(dy, i), v = as_double(x, i);
        INFO("gelu_backward dtype ", got.dtype, " element ", i, ": dy ", d, ", x ", v, ": ", g, " vs ", w);
        if (std::isnan(w) || std::isnan(g) || std::isinf(w) || std::isinf(g)) {
            CHECK((std::isnan(g) == std::isnan(w) && (std::isnan(w) || g == w)));
            continue;
        }
        const double terms = std::fabs(d) * (1 + std::fabs(v) * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI));
        CHECK(std::fabs(g - w) <= unit * terms + 1e-40);
    }
}

bool exact_float_op(uint32_t op) {
    return op == TF_OP_NEG || op == TF_OP_RELU || op == TF_OP_ABS || op == TF_OP_SQUARE || op == TF_OP_CLAMP ||
           op == TF_OP_ADD || op == TF_OP_SUB || op == TF_OP_MUL || op == TF_OP_DIV || op == TF_OP_MAXIMUM ||
           op == TF_OP_MINIMUM || op == TF_OP_RELU_BACKWARD;
}

template <class T>
void unary_float_dtype(int32_t dtype) {
    const Array x = values_of(dtype, edge_values());
    for (uint32_t op : float_unary) {
        Array want(dtype, x.n), got(dtype, x.n);
        Array xin = x;
        run_cpu(op, {&xin}, want);
        map1<T>(x, got, [&](T v) { return Num<T>::store(unary_float(op, Num<T>::load(v), 0, 0)); });
        // f32 math (glibc's on the host, CUDA's on the device) against double rounded once.
        check_floats(got, want, exact_float_op(op) ? 0 : (dtype == TF_DTYPE_F32 ? 8 : 1),
                     std::string("unary op ") + std::to_string(op) + " dtype " + std::to_string(dtype),
                     exact_float_op(op) ? 0 : 1e-5);
    }
    const double bounds[][2] = {{-1, 2}, {-INFINITY, 0.5}, {NAN, 1}, {0.25, INFINITY}, {2, -1}};
    for (const auto &b : bounds) {
        Array want(dtype, x.n), got(dtype, x.n);
        Array xin = x;
        tf_params_clamp p{sizeof(tf_params_clamp), b[0], b[1]};
        run_cpu(TF_OP_CLAMP, {&xin}, want, &p);
        const auto lo = static_cast<float>(b[0]), hi = static_cast<float>(b[1]);
        map1<T>(x, got, [&](T v) { return Num<T>::store(unary_float(TF_OP_CLAMP, Num<T>::load(v), lo, hi)); });
        check_floats(got, want, 0, "clamp dtype " + std::to_string(dtype));
    }
}

template <class I>
void unary_int_dtype(int32_t dtype) {
    std::vector<double> from = edge_values();
    Array x(dtype, from.size() + 4);
    for (size_t i = 0; i < from.size(); ++i) {
        const I v = std::isfinite(from[i]) ? static_cast<I>(std::fmod(from[i], 1e9)) : I(7);
        std::memcpy(x.at(i), &v, sizeof v);
    }
    const I limits[] = {std::numeric_limits<I>::min(), std::numeric_limits<I>::max(), I(-1), I(0)};
    for (int i = 0; i < 4; ++i) std::memcpy(x.at(from.size() + i), &limits[i], sizeof(I));
    for (uint32_t op : {TF_OP_NEG, TF_OP_RELU, TF_OP_ABS, TF_OP_SQUARE}) {
        Array want(dtype, x.n), got(dtype, x.n), xin = x;
        run_cpu(op, {&xin}, want);
        map1<I>(x, got, [&](I v) { return unary_int<I>(op, v, 0, 0); });
        check_bytes(got, want, "int unary " + std::to_string(op));
    }
    const bool wide = dtype == TF_DTYPE_I64;
    // Bounds whose integer interval is not empty. (Rounded inward, [0.5, 0.7] becomes [1, 0]: the
    // plugin then gives the upper bound, min(max(x, 1), 0) as the cpu plugin documents clamp, while
    // the cpu plugin's integer code gives 1 below 1.)
    const double bounds[][2] = {{-10.5, 20.5}, {-INFINITY, 3}, {NAN, NAN}, {-1e30, 1e30}, {-3, -3}, {2, 2.5}};
    for (const auto &b : bounds) {
        Array want(dtype, x.n), got(dtype, x.n), xin = x;
        tf_params_clamp p{sizeof(tf_params_clamp), b[0], b[1]};
        run_cpu(TF_OP_CLAMP, {&xin}, want, &p);
        const int64_t lo = int_clamp_bound(b[0], true, wide), hi = int_clamp_bound(b[1], false, wide);
        map1<I>(x, got, [&](I v) { return unary_int<I>(TF_OP_CLAMP, v, lo, hi); });
        check_bytes(got, want, "int clamp [" + std::to_string(b[0]) + ", " + std::to_string(b[1]) + "]");
    }
}

// Every pair of values a[i], b[j].
template <class T>
void pairs_of(const Array &v, Array &a, Array &b) {
    for (size_t i = 0; i < v.n; ++i)
        for (size_t j = 0; j < v.n; ++j) {
            std::memcpy(a.at(i * v.n + j), v.at(i), sizeof(T));
            std::memcpy(b.at(i * v.n + j), v.at(j), sizeof(T));
        }
}

template <class T>
void binary_dtype(int32_t dtype, bool is_float) {
    const Array v = values_of(dtype, edge_values(true));  // every pair of edge values
    const size_t n = v.n * v.n;
    Array a(dtype, n), b(dtype, n);
    pairs_of<T>(v, a, b);
    std::vector<uint32_t> ops;
    if (is_float)
        ops.assign(std::begin(float_binary), std::end(float_binary));
    else if (dtype != TF_DTYPE_BOOL)
        ops = {TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_MAXIMUM, TF_OP_MINIMUM, TF_OP_RELU_BACKWARD};
    for (uint32_t op : ops) {
        Array want(dtype, n), got(dtype, n);
        run_cpu(op, {&a, &b}, want);
        for (size_t i = 0; i < n; ++i) {
            const T r =
                Num<T>::store(binary_op(op, Num<T>::load(load_as<T>(a.at(i))), Num<T>::load(load_as<T>(b.at(i)))));
            std::memcpy(got.at(i), &r, sizeof r);
        }
        if (op == TF_OP_GELU_BACKWARD)
            check_gelu_backward(got, want, a, b);
        else if (is_float)
            check_floats(got, want, exact_float_op(op) ? 0 : 4, "binary op " + std::to_string(op));
        else
            check_bytes(got, want, "int binary op " + std::to_string(op));
    }
    for (uint32_t op : {TF_OP_EQ, TF_OP_NE, TF_OP_LT, TF_OP_LE, TF_OP_GT, TF_OP_GE}) {
        Array want(TF_DTYPE_BOOL, n), got(TF_DTYPE_BOOL, n);
        run_cpu(op, {&a, &b}, want);
        for (size_t i = 0; i < n; ++i)
            *got.at(i) = compare_op(op, Num<T>::load(load_as<T>(a.at(i))), Num<T>::load(load_as<T>(b.at(i)))) ? 1 : 0;
        check_bytes(got, want, "compare op " + std::to_string(op) + " dtype " + std::to_string(dtype));
    }
}

template <class T>
void cast_from(int32_t from_dtype) {
    const Array x = values_of(from_dtype, edge_values());
    for (int32_t to = 0; to <= TF_DTYPE_BOOL; ++to) {  // the plain dtypes (quantized ones have no cast)
        if (to == from_dtype) continue;
        Array want(to, x.n), got(to, x.n), xin = x;
        run_cpu(TF_OP_CAST, {&xin}, want);
        for (size_t i = 0; i < x.n; ++i) store_cast(got.at(i), to, widen(load_as<T>(x.at(i))));
        check_converted(got, want, "cast " + std::to_string(from_dtype) + " -> " + std::to_string(to));
    }
}

}  // namespace

TEST_CASE("element: float unary ops and clamp against cpu") {
    unary_float_dtype<float>(TF_DTYPE_F32);
    unary_float_dtype<__half>(TF_DTYPE_F16);
    unary_float_dtype<__nv_bfloat16>(TF_DTYPE_BF16);
}

TEST_CASE("element: integer unary ops and clamp bounds against cpu") {
    unary_int_dtype<int32_t>(TF_DTYPE_I32);
    unary_int_dtype<int64_t>(TF_DTYPE_I64);
}

TEST_CASE("element: binary ops and comparisons against cpu") {
    binary_dtype<float>(TF_DTYPE_F32, true);
    binary_dtype<__half>(TF_DTYPE_F16, true);
    binary_dtype<__nv_bfloat16>(TF_DTYPE_BF16, true);
    binary_dtype<int32_t>(TF_DTYPE_I32, false);
    binary_dtype<int64_t>(TF_DTYPE_I64, false);
    binary_dtype<Boolean>(TF_DTYPE_BOOL, false);
}

TEST_CASE("element: every cast against cpu") {
    cast_from<float>(TF_DTYPE_F32);
    cast_from<__half>(TF_DTYPE_F16);
    cast_from<__nv_bfloat16>(TF_DTYPE_BF16);
    cast_from<int32_t>(TF_DTYPE_I32);
    cast_from<int64_t>(TF_DTYPE_I64);
    cast_from<Boolean>(TF_DTYPE_BOOL);
}

TEST_CASE("element: fill values against cpu") {
    for (int32_t dtype = 0; dtype <= TF_DTYPE_BOOL; ++dtype)  // the plain dtypes (no fill of quantized ones)
        for (double value : edge_values()) {
            Array want(dtype, 1), got(dtype, 1);
            tf_params_fill p{sizeof(tf_params_fill), value};
            run_cpu(TF_OP_FILL, {}, want, &p);
            const uint64_t bits = fill_bits(dtype, value);
            std::memcpy(got.at(0), &bits, size_of(dtype));
            check_converted(got, want, "fill " + std::to_string(value) + " dtype " + std::to_string(dtype));
        }
}

TEST_CASE("element: the UNARY and BINARY ops element.hpp claims are the ones checked here") {
    // ops.cpp's rows claim a UNARY or BINARY op only where implements_elementwise says
    // element.hpp computes it (a static_assert there); each of those must be among the ops this file compares with cpu.
    std::vector<uint32_t> checked(std::begin(float_unary), std::end(float_unary));
    checked.insert(checked.end(), std::begin(float_binary), std::end(float_binary));
    checked.push_back(TF_OP_CLAMP);
    int claimed = 0;
    for (uint32_t op = 0; op < 1024; ++op) {
        tf_kit::OpRule rule{};
        if (!tf_kit::find_op_rule(op, &rule) ||
            (rule.kind != tf_kit::OpKind::UNARY && rule.kind != tf_kit::OpKind::BINARY))
            continue;
        INFO("op ", rule.name);
        if (!implements_elementwise(op)) continue;
        ++claimed;
        CHECK(std::find(checked.begin(), checked.end(), op) != checked.end());
    }
    CHECK(claimed == static_cast<int>(checked.size()));
    CHECK(implements_elementwise(TF_OP_GELU_BACKWARD));
    CHECK_FALSE(implements_elementwise(TF_OP_MATMUL));
}
