// Elementwise kernels over any strides (rank <= 8): unary ops and clamp, binary ops, comparisons,
// where, fill, contiguous and cast. One thread per output element in a grid-stride loop; the
// op is a kernel argument (uniform across the grid), so each family is one kernel per dtype.
// What each element gets, and the numeric rules, are in element.hpp.
#include "device_common.cuh"

#include <tinyfin/plugin_kit/ops.hpp>

namespace tf_cuda {
namespace {

// ---- kernels (the per-element math is in element.hpp) ---------------------------------------------

template <class T>
__global__ void unary_kernel(Strided<2> g, uint32_t op, T *out, const T *in, ClampBounds bounds) {
    using C = typename Num<T>::Compute;
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[2];
        offsets_of(g, i, off);
        const C x = Num<T>::load(in[off[1]]);
        if constexpr (std::is_same<C, float>::value)
            out[off[0]] = Num<T>::store(unary_float(op, x, bounds.lo, bounds.hi));
        else
            out[off[0]] = Num<T>::store(unary_int<C>(op, x, bounds.ilo, bounds.ihi));
    }
}

template <class T>
__global__ void binary_kernel(Strided<3> g, uint32_t op, T *out, const T *a, const T *b) {
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[3];
        offsets_of(g, i, off);
        out[off[0]] = Num<T>::store(binary_op(op, Num<T>::load(a[off[1]]), Num<T>::load(b[off[2]])));
    }
}

// ---- compare and where ---------------------------------------------------------------------------

template <class T>
__global__ void compare_kernel(Strided<3> g, uint32_t op, uint8_t *out, const T *a, const T *b) {
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[3];
        offsets_of(g, i, off);
        out[off[0]] = compare_op(op, Num<T>::load(a[off[1]]), Num<T>::load(b[off[2]])) ? 1 : 0;
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

template <class T>
__global__ void cast_kernel(Strided<2> g, int32_t out_dtype, int32_t out_size, char *out, const T *in) {
    for (int64_t i = global_index(); i < g.count; i += global_stride()) {
        int64_t off[2];
        offsets_of(g, i, off);
        store_cast(out + off[0] * out_size, out_dtype, widen(in[off[1]]));
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
    const bool known = Dtypes::with_numeric(dtype, [&](auto t) {
        using T = decltype(t);
        unary_kernel<T><<<blocks_for(g.count), block_size, 0, stream>>>(g, op, static_cast<T *>(out),
                                                                        static_cast<const T *>(in), bounds);
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_binary(cudaStream_t stream, uint32_t op, int32_t dtype, const Strided<3> &g, void *out,
                          const void *a, const void *b) {
    if (g.count == 0) return cudaSuccess;
    const bool known = Dtypes::with_numeric(dtype, [&](auto t) {
        using T = decltype(t);
        binary_kernel<T><<<blocks_for(g.count), block_size, 0, stream>>>(
            g, op, static_cast<T *>(out), static_cast<const T *>(a), static_cast<const T *>(b));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_compare(cudaStream_t stream, uint32_t op, int32_t dtype, const Strided<3> &g, void *out,
                           const void *a, const void *b) {
    if (g.count == 0) return cudaSuccess;
    const bool known = Dtypes::with_any(dtype, [&](auto t) {
        using T = decltype(t);
        compare_kernel<T><<<blocks_for(g.count), block_size, 0, stream>>>(
            g, op, static_cast<uint8_t *>(out), static_cast<const T *>(a), static_cast<const T *>(b));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_where(cudaStream_t stream, int32_t dtype, const Strided<4> &g, void *out, const void *cond,
                         const void *a, const void *b) {
    if (g.count == 0) return cudaSuccess;
    const bool known = Dtypes::with_bits(dtype, [&](auto u) {
        using U = decltype(u);
        where_kernel<U><<<blocks_for(g.count), block_size, 0, stream>>>(
            g, static_cast<U *>(out), static_cast<const uint8_t *>(cond), static_cast<const U *>(a),
            static_cast<const U *>(b));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_fill(cudaStream_t stream, int32_t dtype, const Strided<1> &g, void *out, uint64_t bits) {
    if (g.count == 0) return cudaSuccess;
    const bool known = Dtypes::with_bits(dtype, [&](auto u) {
        using U = decltype(u);
        fill_kernel<U><<<blocks_for(g.count), block_size, 0, stream>>>(g, static_cast<U *>(out), static_cast<U>(bits));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_copy(cudaStream_t stream, int32_t out_dtype, int32_t in_dtype, const Strided<2> &g, void *out,
                        const void *in) {
    if (g.count == 0) return cudaSuccess;
    bool known = false;
    if (out_dtype == in_dtype) {
        known = Dtypes::with_bits(in_dtype, [&](auto u) {
            using U = decltype(u);
            copy_kernel<U>
                <<<blocks_for(g.count), block_size, 0, stream>>>(g, static_cast<U *>(out), static_cast<const U *>(in));
        });
    } else {
        known = Dtypes::with_any(in_dtype, [&](auto t) {
            using T = decltype(t);
            cast_kernel<T><<<blocks_for(g.count), block_size, 0, stream>>>(
                g, out_dtype, static_cast<int32_t>(tf_kit::dtype_size(out_dtype)), static_cast<char *>(out),
                static_cast<const T *>(in));
        });
    }
    return known ? cudaGetLastError() : bad_dtype();
}

}  // namespace tf_cuda
