// What the elementwise kernels compute per element, as __host__ __device__ code: storage types
// and their compute types, the unary, binary and comparison ops, casts, and the host-side
// conversions of fill values and clamp bounds. tests/cuda/test_cuda_element.cpp runs these same
// functions on the host against the cpu plugin.
//
// Numeric rules, the cpu plugin's where they are observable: integer add, sub, mul, neg, abs and
// square wrap (two's complement); maximum / minimum propagate NaN and order -0 < +0; relu keeps
// NaN and -0; relu_backward passes dy where x is NaN; clamp leaves NaN alone and treats NaN or
// infinite bounds as open; float -> integer casts truncate and saturate (NaN gives 0); narrowing
// integer casts wrap; casts round once from the exact source value. Float math runs in f32
// (16-bit floats widened), so transcendental results may differ from the cpu plugin's
// double-precision ones by an ulp or two.
#pragma once

#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit/dtypes.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "geometry.hpp"  // TF_CUDA_HD

namespace tf_cuda {

// ---- Storage types ------------------------------------------------------------------------------

// One byte, 0 or 1; any non-zero byte reads as true.
struct Boolean {
    uint8_t value;
};

// Storage type -> compute type (float for the 16-bit floats), with load and store; float and the
// integers are their own compute type.
template <class T>
struct Num {
    using Compute = T;
    TF_CUDA_HD static T load(T v) { return v; }
    TF_CUDA_HD static T store(T v) { return v; }
};
template <>
struct Num<__half> {
    using Compute = float;
    TF_CUDA_HD static float load(__half v) { return __half2float(v); }
    TF_CUDA_HD static __half store(float v) { return __float2half_rn(v); }
};
template <>
struct Num<__nv_bfloat16> {
    using Compute = float;
    TF_CUDA_HD static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
    TF_CUDA_HD static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};
template <>
struct Num<Boolean> {
    using Compute = int32_t;
    TF_CUDA_HD static int32_t load(Boolean v) { return v.value != 0; }
    TF_CUDA_HD static Boolean store(int32_t v) { return Boolean{static_cast<uint8_t>(v != 0)}; }
};

// ---- Maximum and minimum ------------------------------------------------------------------------

// IEEE 754-2019 maximum_of and minimum_of: tf_kit's (tinyfin/plugin_kit/dtypes.hpp), host and device.
using tf_kit::maximum_of;
using tf_kit::minimum_of;

// ---- Unary ops ------------------------------------------------------------------------------------

// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: neither overflows nor cancels.
TF_CUDA_HD float sigmoid_of(float x) {
    if (x >= 0.f) return 1.f / (1.f + expf(-x));
    const float e = expf(x);
    return e / (1.f + e);
}

// Float unary ops (lo, hi: clamp's bounds).
TF_CUDA_HD float unary_float(uint32_t op, float x, float lo, float hi) {
    switch (op) {
    case TF_OP_NEG: return -x;
    case TF_OP_EXP: return expf(x);
    case TF_OP_RELU: return x < 0.f ? 0.f : x;
    case TF_OP_ABS: return fabsf(x);
    case TF_OP_LOG: return logf(x);
    case TF_OP_SQRT: return sqrtf(x);
    case TF_OP_RSQRT: return 1.f / sqrtf(x);
    case TF_OP_SIN: return sinf(x);
    case TF_OP_COS: return cosf(x);
    case TF_OP_TANH: return tanhf(x);
    case TF_OP_SIGMOID: return sigmoid_of(x);
    // x Phi(x) through erfc: 1 + erf(x / sqrt 2) would cancel for large negative x.
    case TF_OP_GELU: return x == -INFINITY ? -0.f : 0.5f * x * erfcf(-x * 0.70710678118654752f);
    // 0.5 x (1 + tanh(u)) == x sigmoid(2u), without the cancellation.
    case TF_OP_GELU_TANH: {
        if (x == -INFINITY) return -0.f;
        const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
        return x * sigmoid_of(2.f * u);
    }
    case TF_OP_SILU: return x == -INFINITY ? -0.f : x * sigmoid_of(x);
    case TF_OP_SQUARE: return x * x;
    case TF_OP_ERF: return erff(x);
    case TF_OP_ASIN: return asinf(x);
    case TF_OP_ACOS: return acosf(x);
    case TF_OP_ATAN: return atanf(x);
    case TF_OP_ASINH: return asinhf(x);
    case TF_OP_ACOSH: return acoshf(x);
    case TF_OP_ATANH: return atanhf(x);
    case TF_OP_CLAMP: {
        // Comparisons with NaN are false: a NaN x stays, a NaN bound never applies.
        float r = x;
        if (r < lo) r = lo;
        if (r > hi) r = hi;
        return r;
    }
    default: return x;
    }
}

// Integer dtypes: neg, relu, abs, square and clamp (with bounds already rounded inward).
template <class I>
TF_CUDA_HD I unary_int(uint32_t op, I x, int64_t lo, int64_t hi) {
    using U = std::make_unsigned_t<I>;
    switch (op) {
    case TF_OP_NEG: return static_cast<I>(U(0) - U(x));
    case TF_OP_RELU: return x < 0 ? I(0) : x;
    case TF_OP_ABS: return x < 0 ? static_cast<I>(U(0) - U(x)) : x;
    case TF_OP_SQUARE: return static_cast<I>(U(x) * U(x));
    case TF_OP_CLAMP: {
        int64_t r = x;
        if (r < lo) r = lo;
        if (r > hi) r = hi;
        return static_cast<I>(r);
    }
    default: return x;
    }
}

// ---- Binary ops and comparisons -----------------------------------------------------------------

// gelu's gradient dy (Phi(x) + x phi(x)) in f32: Phi through erfc (no cancellation for large
// negative x) and e^(-x^2/2) with x^2's rounding error folded back in (rounding it alone would
// cost up to 1e-5 relative in the tail), |x| capped at 16 (x phi(x) is below f32's smallest
// subnormal beyond 14.7) so x^2 cannot overflow. x = +-inf gives NaN (inf * 0), the formula's value; NaN stays NaN.
TF_CUDA_HD float gelu_backward_of(float dy, float x) {
    const float a = fminf(fabsf(x), 16.f);  // fminf(NaN, 16) is 16: NaN passes through x below
    const float hi = a * a, lo = fmaf(a, a, -hi);  // a^2 = hi + lo exactly
    const float e = expf(-0.5f * hi);
    const float pdf = 0.398942280f * (e - e * (0.5f * lo));
    const float cdf = 0.5f * erfcf(-x * 0.70710678118654752f);
    return dy * (cdf + x * pdf);
}

// Integer div and pow are never sent (their bad operands are errors only the cpu plugin reports).
template <class C>
TF_CUDA_HD C binary_op(uint32_t op, C a, C b) {
    if constexpr (std::is_integral<C>::value) {
        using U = std::make_unsigned_t<C>;
        switch (op) {
        case TF_OP_ADD: return static_cast<C>(U(a) + U(b));
        case TF_OP_SUB: return static_cast<C>(U(a) - U(b));
        case TF_OP_MUL: return static_cast<C>(U(a) * U(b));
        case TF_OP_MAXIMUM: return maximum_of(a, b);
        case TF_OP_MINIMUM: return minimum_of(a, b);
        case TF_OP_RELU_BACKWARD: return b <= C(0) ? C(0) : a;  // a = dy, b = x; NaN x passes dy
        default: return a;
        }
    } else {
        switch (op) {
        case TF_OP_ADD: return a + b;
        case TF_OP_SUB: return a - b;
        case TF_OP_MUL: return a * b;
        case TF_OP_DIV: return a / b;
        case TF_OP_POW: return powf(a, b);
        case TF_OP_MAXIMUM: return maximum_of(a, b);
        case TF_OP_MINIMUM: return minimum_of(a, b);
        case TF_OP_RELU_BACKWARD: return b <= C(0) ? C(0) : a;  // a = dy, b = x; NaN x passes dy
        case TF_OP_GELU_BACKWARD: return static_cast<C>(gelu_backward_of(static_cast<float>(a), static_cast<float>(b)));
        default: return a;
        }
    }
}

// The UNARY and BINARY ops unary_float, unary_int and binary_op compute (their `default:` cases
// would otherwise return an operand unchanged): ops.cpp's rows claim no other (a static_assert
// there), so an op added to ops.def is left to the core's fallback until it is added here.
inline constexpr uint32_t k_elementwise_ops[] = {
    TF_OP_NEG,    TF_OP_EXP,     TF_OP_RELU,    TF_OP_ABS,           TF_OP_LOG,           TF_OP_SQRT,      TF_OP_RSQRT,
    TF_OP_SIN,    TF_OP_COS,     TF_OP_TANH,    TF_OP_SIGMOID,       TF_OP_GELU,          TF_OP_GELU_TANH, TF_OP_SILU,
    TF_OP_SQUARE, TF_OP_ERF,     TF_OP_CLAMP,   TF_OP_ADD,           TF_OP_SUB,           TF_OP_MUL,       TF_OP_DIV,
    TF_OP_POW,    TF_OP_MAXIMUM, TF_OP_MINIMUM, TF_OP_RELU_BACKWARD, TF_OP_GELU_BACKWARD, TF_OP_ASIN,      TF_OP_ACOS,
    TF_OP_ATAN,   TF_OP_ASINH,   TF_OP_ACOSH,   TF_OP_ATANH,
};

constexpr bool implements_elementwise(uint32_t op) {
    for (uint32_t known : k_elementwise_ops)
        if (known == op) return true;
    return false;
}

template <class C>
TF_CUDA_HD bool compare_op(uint32_t op, C a, C b) {
    switch (op) {
    case TF_OP_EQ: return a == b;
    case TF_OP_NE: return a != b;
    case TF_OP_LT: return a < b;
    case TF_OP_LE: return a <= b;
    case TF_OP_GT: return a > b;
    case TF_OP_GE: return a >= b;
    default: return false;
    }
}

// ---- Casts ----------------------------------------------------------------------------------------

// A cast's source value, exact: every float in double, every integer (and bool) in int64_t.
struct Wide {
    double f;
    int64_t i;
    bool is_float;
};

template <class T>
TF_CUDA_HD Wide widen(T v) {
    if constexpr (std::is_same<typename Num<T>::Compute, float>::value)
        return {static_cast<double>(Num<T>::load(v)), 0, true};
    else
        return {0.0, static_cast<int64_t>(Num<T>::load(v)), false};
}

// Float to integer like C where C is defined (truncation); NaN gives 0, out-of-range values the
// nearest limit.
template <class I>
TF_CUDA_HD I saturate(double x) {
    constexpr I min = sizeof(I) == 4 ? I(INT32_MIN) : I(INT64_MIN);
    constexpr I max = sizeof(I) == 4 ? I(INT32_MAX) : I(INT64_MAX);
    if (x != x) return 0;
    const double t = trunc(x);
    const double lo = static_cast<double>(min);  // -2^(bits-1), exact
    if (t <= lo) return min;
    if (t >= -lo) return max;
    return static_cast<I>(t);
}

// The 16 bits of an f16 or bf16 element at p. On the device a plain store: memcpy of a __half
// into a char pointer garbled the low byte there (nvcc 13.0, sm_90, seen on an H100), while the
// host test of this header passed.
TF_CUDA_HD void store_bits16(char *p, unsigned short bits) {
#ifdef __CUDA_ARCH__
    *reinterpret_cast<unsigned short *>(p) = bits;  // device elements are 2-byte aligned
#else
    std::memcpy(p, &bits, sizeof bits);
#endif
}

// Stores w converted to dtype at p (which has room for one element of dtype).
TF_CUDA_HD void store_cast(char *p, int32_t dtype, Wide w) {
    switch (dtype) {
    case TF_DTYPE_F32: {
        // int64 -> float and double -> float both round once, to nearest.
        const float v = w.is_float ? static_cast<float>(w.f) : static_cast<float>(w.i);
        std::memcpy(p, &v, sizeof v);
        break;
    }
    case TF_DTYPE_F16: {
        const __half v = w.is_float ? __double2half(w.f) : __ll2half_rn(w.i);
        store_bits16(p, static_cast<__half_raw>(v).x);
        break;
    }
    case TF_DTYPE_BF16: {
        const __nv_bfloat16 v = w.is_float ? __double2bfloat16(w.f) : __ll2bfloat16_rn(w.i);
        store_bits16(p, static_cast<__nv_bfloat16_raw>(v).x);
        break;
    }
    case TF_DTYPE_I32: {
        const int32_t v = w.is_float ? saturate<int32_t>(w.f) : static_cast<int32_t>(w.i);  // narrowing wraps
        std::memcpy(p, &v, sizeof v);
        break;
    }
    case TF_DTYPE_I64: {
        const int64_t v = w.is_float ? saturate<int64_t>(w.f) : w.i;
        std::memcpy(p, &v, sizeof v);
        break;
    }
    case TF_DTYPE_BOOL: {
        const uint8_t v = w.is_float ? (w.f != 0.0) : (w.i != 0);  // NaN is true, as in C
        std::memcpy(p, &v, sizeof v);
        break;
    }
    default: break;
    }
}

// ---- Host-side conversions (ops.cpp) --------------------------------------------------------------

// The element bits of value in dtype, as fill stores it: a cast from the exact double.
inline uint64_t fill_bits(int32_t dtype, double value) {
    char element[8] = {};
    store_cast(element, dtype, Wide{value, 0, true});
    uint64_t bits = 0;
    std::memcpy(&bits, element, sizeof element);
    return bits;
}

// An integer clamp bound: rounded inward (ceil of min, floor of max) and saturated to the dtype;
// a NaN or infinite bound is open.
inline int64_t int_clamp_bound(double v, bool lower, bool wide) {
    const int64_t lo = wide ? INT64_MIN : INT32_MIN, hi = wide ? INT64_MAX : INT32_MAX;
    if (std::isnan(v)) return lower ? lo : hi;
    const double r = lower ? std::ceil(v) : std::floor(v);
    if (r <= static_cast<double>(lo)) return lo;
    if (r >= -static_cast<double>(lo)) return hi;
    return static_cast<int64_t>(r);
}

}  // namespace tf_cuda
