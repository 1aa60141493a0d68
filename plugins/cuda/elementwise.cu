// Elementwise kernels over any strides (rank <= 8): unary ops and clamp, binary ops, comparisons,
// where, fill, contiguous and cast. One thread per output element in a grid-stride loop; the
// op is a kernel argument (uniform across the grid), so each family is one kernel per dtype.
//
// Numeric rules follow the cpu plugin where they are observable: integer add, sub, mul, neg,
// abs and square wrap; maximum/minimum propagate NaN and order -0 < +0; relu keeps NaN and -0;
// clamp leaves NaN alone and treats NaN or infinite bounds as open; float -> integer casts
// truncate and saturate (NaN gives 0). Float math runs in f32 (16-bit floats are widened), so
// transcendental results can differ from the cpu plugin's double-precision ones by an ulp or two.
#include "device_common.cuh"

namespace tf_cuda {
namespace {

// ---- unary ---------------------------------------------------------------------------------------

__device__ __forceinline__ float sigmoid(float x) {
    if (x >= 0.f) return 1.f / (1.f + expf(-x));
    const float e = expf(x);
    return e / (1.f + e);
}

__device__ float unary_float(uint32_t op, float x, float lo, float hi) {
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
    case TF_OP_SIGMOID: return sigmoid(x);
    // x Phi(x) through erfc: 1 + erf(x / sqrt 2) would cancel for large negative x.
    case TF_OP_GELU: return x == -INFINITY ? -0.f : 0.5f * x * erfcf(-x * 0.70710678118654752f);
    // 0.5 x (1 + tanh(u)) == x sigmoid(2u), without the cancellation.
    case TF_OP_GELU_TANH: {
        if (x == -INFINITY) return -0.f;
        const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
        return x * sigmoid(2.f * u);
    }
    case TF_OP_SILU: return x == -INFINITY ? -0.f : x * sigmoid(x);
    case TF_OP_SQUARE: return x * x;
    case TF_OP_ERF: return erff(x);
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

// Integer dtypes: neg, relu, abs, square and clamp (ops.cpp sends no other).
template <class I>
__device__ I unary_int(uint32_t op, I x, int64_t lo, int64_t hi) {
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

template <class T>
__global__ void unary_kernel(Strided<2> g, uint32_t op, T *out, const T *in, ClampBounds bounds) {
    using C = typename num<T>::compute;
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[2];
        offsets_of(g, i, off);
        const C x = num<T>::load(in[off[1]]);
        if constexpr (std::is_same<C, float>::value)
            out[off[0]] = num<T>::store(unary_float(op, x, bounds.lo, bounds.hi));
        else
            out[off[0]] = num<T>::store(unary_int<C>(op, x, bounds.ilo, bounds.ihi));
    }
}

// ---- binary --------------------------------------------------------------------------------------

template <class C>
__device__ __forceinline__ C binary_op(uint32_t op, C a, C b) {
    if constexpr (std::is_integral<C>::value) {
        using U = std::make_unsigned_t<C>;
        switch (op) {
        case TF_OP_ADD: return static_cast<C>(U(a) + U(b));
        case TF_OP_SUB: return static_cast<C>(U(a) - U(b));
        case TF_OP_MUL: return static_cast<C>(U(a) * U(b));
        case TF_OP_MAXIMUM: return maximum_of(a, b);
        case TF_OP_MINIMUM: return minimum_of(a, b);
        default: return a;  // integer div and pow are not sent (they must report bad operands)
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
        default: return a;
        }
    }
}

template <class T>
__global__ void binary_kernel(Strided<3> g, uint32_t op, T *out, const T *a, const T *b) {
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[3];
        offsets_of(g, i, off);
        out[off[0]] = num<T>::store(binary_op(op, num<T>::load(a[off[1]]), num<T>::load(b[off[2]])));
    }
}

// ---- compare and where ---------------------------------------------------------------------------

template <class C>
__device__ __forceinline__ bool compare_op(uint32_t op, C a, C b) {
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

template <class T>
__global__ void compare_kernel(Strided<3> g, uint32_t op, uint8_t *out, const T *a, const T *b) {
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[3];
        offsets_of(g, i, off);
        out[off[0]] = compare_op(op, num<T>::load(a[off[1]]), num<T>::load(b[off[2]])) ? 1 : 0;
    }
}

template <class U>
__global__ void where_kernel(Strided<4> g, U *out, const uint8_t *cond, const U *a, const U *b) {
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[4];
        offsets_of(g, i, off);
        out[off[0]] = cond[off[1]] != 0 ? a[off[2]] : b[off[3]];
    }
}

// ---- fill, contiguous, cast ----------------------------------------------------------------------

template <class U>
__global__ void fill_kernel(Strided<1> g, U *out, U value) {
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[1];
        offsets_of(g, i, off);
        out[off[0]] = value;
    }
}

template <class U>
__global__ void copy_kernel(Strided<2> g, U *out, const U *in) {
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[2];
        offsets_of(g, i, off);
        out[off[0]] = in[off[1]];
    }
}

// A cast's source value, exact: every float in double, every integer (and bool) in int64_t.
struct Wide {
    double f;
    int64_t i;
    bool is_float;
};

template <class T>
__device__ __forceinline__ Wide widen(T v) {
    if constexpr (std::is_same<typename num<T>::compute, float>::value)
        return {static_cast<double>(num<T>::load(v)), 0, true};
    else
        return {0.0, static_cast<int64_t>(num<T>::load(v)), false};
}

// Float to integer like C where C is defined (truncation); NaN gives 0, out-of-range values the
// nearest limit.
template <class I>
__device__ __forceinline__ I saturate(double x) {
    if (x != x) return 0;
    constexpr I min = sizeof(I) == 4 ? I(INT32_MIN) : I(INT64_MIN);
    constexpr I max = sizeof(I) == 4 ? I(INT32_MAX) : I(INT64_MAX);
    const double t = trunc(x);
    const double lo = static_cast<double>(min);  // -2^(bits-1), exact
    if (t <= lo) return min;
    if (t >= -lo) return max;
    return static_cast<I>(t);
}

__device__ __forceinline__ void store_cast(char *p, int32_t dtype, Wide w) {
    switch (dtype) {
    case TF_DTYPE_F32:
        *reinterpret_cast<float *>(p) = w.is_float ? static_cast<float>(w.f) : __ll2float_rn(w.i);
        break;
    case TF_DTYPE_F16:
        *reinterpret_cast<__half *>(p) = w.is_float ? __double2half(w.f) : __ll2half_rn(w.i);
        break;
    case TF_DTYPE_BF16:
        *reinterpret_cast<__nv_bfloat16 *>(p) = w.is_float ? __double2bfloat16(w.f) : __ll2bfloat16_rn(w.i);
        break;
    case TF_DTYPE_I32:
        // Integer narrowing wraps, like the cpu plugin (two's complement).
        *reinterpret_cast<int32_t *>(p) = w.is_float ? saturate<int32_t>(w.f) : static_cast<int32_t>(w.i);
        break;
    case TF_DTYPE_I64:
        *reinterpret_cast<int64_t *>(p) = w.is_float ? saturate<int64_t>(w.f) : w.i;
        break;
    case TF_DTYPE_BOOL:
        *reinterpret_cast<uint8_t *>(p) = w.is_float ? (w.f != 0.0) : (w.i != 0);  // NaN is true, as in C
        break;
    default: break;
    }
}

template <class T>
__global__ void cast_kernel(Strided<2> g, int32_t out_dtype, int32_t out_size, char *out, const T *in) {
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[2];
        offsets_of(g, i, off);
        store_cast(out + off[0] * out_size, out_dtype, widen(in[off[1]]));
    }
}

int32_t size_of(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F32: case TF_DTYPE_I32: return 4;
    case TF_DTYPE_F16: case TF_DTYPE_BF16: return 2;
    case TF_DTYPE_I64: return 8;
    default: return 1;
    }
}

}  // namespace

// ---- launchers -------------------------------------------------------------------------------------

cudaError_t probe_kernels() {
    cudaFuncAttributes attributes;
    return cudaFuncGetAttributes(&attributes, fill_kernel<uint32_t>);
}

cudaError_t launch_unary(cudaStream_t stream, uint32_t op, int32_t dtype, const Strided<2> &g, void *out,
                         const void *in, const ClampBounds &bounds) {
    if (g.count == 0) return cudaSuccess;
    const bool known = with_numeric(dtype, [&](auto t) {
        using T = decltype(t);
        unary_kernel<T><<<blocks_for(g.count), block_size, 0, stream>>>(g, op, static_cast<T *>(out),
                                                                        static_cast<const T *>(in), bounds);
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_binary(cudaStream_t stream, uint32_t op, int32_t dtype, const Strided<3> &g, void *out,
                          const void *a, const void *b) {
    if (g.count == 0) return cudaSuccess;
    const bool known = with_numeric(dtype, [&](auto t) {
        using T = decltype(t);
        binary_kernel<T><<<blocks_for(g.count), block_size, 0, stream>>>(
            g, op, static_cast<T *>(out), static_cast<const T *>(a), static_cast<const T *>(b));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_compare(cudaStream_t stream, uint32_t op, int32_t dtype, const Strided<3> &g, void *out,
                           const void *a, const void *b) {
    if (g.count == 0) return cudaSuccess;
    const bool known = with_any(dtype, [&](auto t) {
        using T = decltype(t);
        compare_kernel<T><<<blocks_for(g.count), block_size, 0, stream>>>(
            g, op, static_cast<uint8_t *>(out), static_cast<const T *>(a), static_cast<const T *>(b));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_where(cudaStream_t stream, int32_t dtype, const Strided<4> &g, void *out, const void *cond,
                         const void *a, const void *b) {
    if (g.count == 0) return cudaSuccess;
    const bool known = with_bits(dtype, [&](auto u) {
        using U = decltype(u);
        where_kernel<U><<<blocks_for(g.count), block_size, 0, stream>>>(
            g, static_cast<U *>(out), static_cast<const uint8_t *>(cond), static_cast<const U *>(a),
            static_cast<const U *>(b));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_fill(cudaStream_t stream, int32_t dtype, const Strided<1> &g, void *out, uint64_t bits) {
    if (g.count == 0) return cudaSuccess;
    const bool known = with_bits(dtype, [&](auto u) {
        using U = decltype(u);
        fill_kernel<U><<<blocks_for(g.count), block_size, 0, stream>>>(g, static_cast<U *>(out),
                                                                      static_cast<U>(bits));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_copy(cudaStream_t stream, int32_t out_dtype, int32_t in_dtype, const Strided<2> &g, void *out,
                        const void *in) {
    if (g.count == 0) return cudaSuccess;
    bool known = false;
    if (out_dtype == in_dtype) {
        known = with_bits(in_dtype, [&](auto u) {
            using U = decltype(u);
            copy_kernel<U><<<blocks_for(g.count), block_size, 0, stream>>>(g, static_cast<U *>(out),
                                                                          static_cast<const U *>(in));
        });
    } else {
        known = with_any(in_dtype, [&](auto t) {
            using T = decltype(t);
            cast_kernel<T><<<blocks_for(g.count), block_size, 0, stream>>>(
                g, out_dtype, size_of(out_dtype), static_cast<char *>(out), static_cast<const T *>(in));
        });
    }
    return known ? cudaGetLastError() : bad_dtype();
}

}  // namespace tf_cuda
