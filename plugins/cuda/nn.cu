// Neural-network kernels: max and average pooling with their backward ops, embedding and its
// scatter-add backward, one_hot, attention and rope. One thread per output element (one block per
// query row for attention); the backward pooling ops gather (pool.h), so they need no atomics and
// give the same result on every run.
#include "device_common.cuh"
#include "pool.h"

#include <algorithm>

namespace tf_cuda {
namespace {

// ---- pooling (the element arithmetic is in pool.h) ---------------------------------------------

template <class T>
__global__ void max_pool_kernel(PoolArgs a, T *y, const T *x) {
    const int64_t count = a.n * a.c * a.oh * a.ow;
    for (int64_t i = global_index(); i < count; i += global_stride()) {
        int64_t at[4];
        split4(i, a.oh, a.ow, a.c, at);
        y[offset4(a.y_strides, at[0], at[1], at[2], at[3])] = num<T>::store(max_pool_at(a, x, at[0], at[1], at[2], at[3]));
    }
}

template <class T>
__global__ void max_pool_backward_kernel(PoolArgs a, T *dx, const T *dy, const T *x) {
    const int64_t count = a.n * a.c * a.h * a.w;
    for (int64_t i = global_index(); i < count; i += global_stride()) {
        int64_t at[4];
        split4(i, a.h, a.w, a.c, at);
        dx[offset4(a.dx_strides, at[0], at[1], at[2], at[3])] =
            num<T>::store(max_pool_grad_at(a, dy, x, at[0], at[1], at[2], at[3]));
    }
}

template <class T>
__global__ void avg_pool_kernel(PoolArgs a, T *y, const T *x) {
    const int64_t count = a.n * a.c * a.oh * a.ow;
    for (int64_t i = global_index(); i < count; i += global_stride()) {
        int64_t at[4];
        split4(i, a.oh, a.ow, a.c, at);
        y[offset4(a.y_strides, at[0], at[1], at[2], at[3])] = num<T>::store(avg_pool_at(a, x, at[0], at[1], at[2], at[3]));
    }
}

template <class T>
__global__ void avg_pool_backward_kernel(PoolArgs a, T *dx, const T *dy) {
    const int64_t count = a.n * a.c * a.h * a.w;
    for (int64_t i = global_index(); i < count; i += global_stride()) {
        int64_t at[4];
        split4(i, a.h, a.w, a.c, at);
        dx[offset4(a.dx_strides, at[0], at[1], at[2], at[3])] =
            num<T>::store(avg_pool_grad_at(a, dy, at[0], at[1], at[2], at[3]));
    }
}

// ---- embedding, one_hot --------------------------------------------------------------------------

// g = {out, indices}: rows are the indices' axes, the column is D. U: the element's bits.
template <class U, class L>
__global__ void embedding_kernel(RowGeom<2> g, EmbeddingArgs a, U *out, const U *weight, const L *indices,
                                 DataError *error) {
    const int64_t count = g.rows.count * g.cols.count;
    for (int64_t i = global_index(); i < count; i += global_stride()) {
        const int64_t row = i / g.cols.count, d = i - row * g.cols.count;
        int64_t base[2], col[2];
        offsets_of(g.rows, row, base);
        offsets_of(g.cols, d, col);
        const int64_t v = static_cast<int64_t>(indices[base[1]]);
        if (v < 0 || v >= a.vocab) {
            if (d == 0) report_index_error(error, TF_OP_EMBEDDING, v, a.vocab);
            out[base[0] + col[0]] = U(0);
            continue;
        }
        out[base[0] + col[0]] = weight[v * a.w_stride_v + d * a.w_stride_d];
    }
}

__device__ __forceinline__ void add_to(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void add_to(__half *p, float v) { atomicAdd(p, __float2half_rn(v)); }
// bf16: compare-and-swap on the aligned 32-bit word holding it (atomicAdd on __nv_bfloat16 needs
// sm_80; the kernels are also built for sm_75). The other half of the word is left as it is.
__device__ __forceinline__ void add_to(__nv_bfloat16 *p, float v) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(p);
    unsigned int *word = reinterpret_cast<unsigned int *>(address & ~uintptr_t{3});
    const unsigned int shift = (address & 2) ? 16u : 0u;
    unsigned int old = *word, assumed;
    do {
        assumed = old;
        const __nv_bfloat16 current = __ushort_as_bfloat16(static_cast<unsigned short>(assumed >> shift));
        const unsigned int next = __bfloat16_as_ushort(__float2bfloat16_rn(__bfloat162float(current) + v));
        old = atomicCAS(word, assumed, (assumed & ~(0xffffu << shift)) | (next << shift));
    } while (old != assumed);
}

// g = {dy, indices}; dweight was zeroed by the launcher's fill.
template <class T, class L>
__global__ void embedding_backward_kernel(RowGeom<2> g, EmbeddingArgs a, T *dweight, const T *dy, const L *indices,
                                          DataError *error) {
    const int64_t count = g.rows.count * g.cols.count;
    for (int64_t i = global_index(); i < count; i += global_stride()) {
        const int64_t row = i / g.cols.count, d = i - row * g.cols.count;
        int64_t base[2], col[2];
        offsets_of(g.rows, row, base);
        offsets_of(g.cols, d, col);
        const int64_t v = static_cast<int64_t>(indices[base[1]]);
        if (v < 0 || v >= a.vocab) {
            if (d == 0) report_index_error(error, TF_OP_EMBEDDING_BACKWARD, v, a.vocab);
            continue;
        }
        add_to(dweight + v * a.w_stride_v + d * a.w_stride_d, num<T>::load(dy[base[0] + col[0]]));
    }
}

template <class U, class L>
__global__ void one_hot_kernel(RowGeom<2> g, int64_t classes, U one, U *out, const L *labels, DataError *error) {
    const int64_t count = g.rows.count * classes;
    for (int64_t i = global_index(); i < count; i += global_stride()) {
        const int64_t row = i / classes, k = i - row * classes;
        int64_t base[2], col[2];
        offsets_of(g.rows, row, base);
        offsets_of(g.cols, k, col);
        const int64_t label = static_cast<int64_t>(labels[base[1]]);
        if ((label < 0 || label >= classes) && k == 0) report_index_error(error, TF_OP_ONE_HOT, label, classes);
        out[base[0] + col[0]] = label == k ? one : U(0);
    }
}

// ---- attention ---------------------------------------------------------------------------------------

// One block per query row (batch b, query i): the scores q_i . k_j * scale + mask[i, j] (-inf where
// causal hides key j > i + Tk - Tq) go to shared memory, then the max-shifted softmax weights, then
// each thread sums the weighted values for its output columns. A row that sees no key gives NaN
// (0 / 0, or exp of -inf - -inf), as the cpu plugin's does.
template <class T>
__global__ void attention_kernel(Strided<5> lead, AttentionArgs a, T *out, const T *q, const T *k, const T *v,
                                 const T *mask) {
    extern __shared__ float scores[];
    __shared__ float shared[32];
    const int64_t rows = lead.count * a.tq;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t b = row / a.tq, i = row - b * a.tq;
        int64_t base[5];
        offsets_of(lead, b, base);
        const T *qi = q + base[1] + i * a.q_stride_t;
        float peak = -INFINITY;
        for (int64_t j = threadIdx.x; j < a.tk; j += blockDim.x) {
            float s = -INFINITY;
            if (!a.causal || j <= i + (a.tk - a.tq)) {
                const T *kj = k + base[2] + j * a.k_stride_t;
                float dot = 0.f;
                for (int64_t c = 0; c < a.d; ++c) dot += num<T>::load(qi[c * a.q_stride_d]) * num<T>::load(kj[c * a.k_stride_d]);
                s = dot * a.scale + num<T>::load(mask[base[4] + i * a.mask_stride_q + j * a.mask_stride_k]);
            }
            scores[j] = s;
            peak = maximum_of(peak, s);
        }
        peak = block_reduce(peak, Max{}, shared);
        float total = 0.f;
        for (int64_t j = threadIdx.x; j < a.tk; j += blockDim.x) {
            const float e = expf(scores[j] - peak);
            scores[j] = e;
            total += e;
        }
        // The reduction's barriers also make every thread's scores visible to the whole block.
        total = block_reduce(total, Add{}, shared);
        for (int64_t c = threadIdx.x; c < a.dv; c += blockDim.x) {
            float acc = 0.f;
            for (int64_t j = 0; j < a.tk; ++j) acc += scores[j] * num<T>::load(v[base[3] + j * a.v_stride_t + c * a.v_stride_d]);
            out[base[0] + i * a.out_stride_t + c * a.out_stride_d] = num<T>::store(acc / total);
        }
        __syncthreads();  // the next row overwrites scores
    }
}

// ---- rope ------------------------------------------------------------------------------------------

// One thread per rotated pair (lead, t, i): angle = (position_offset + t) * theta^(-2i/D), pairs
// (2i, 2i+1) when interleaved, else (i, i + D/2). The angle is computed in double: positions in
// the thousands times f32 frequencies would lose a visible part of it.
template <class T>
__global__ void rope_kernel(Strided<2> lead, RopeArgs a, T *out, const T *x) {
    const int64_t half = a.d / 2;
    const int64_t count = lead.count * a.t * half;
    for (int64_t i = global_index(); i < count; i += global_stride()) {
        const int64_t pair = i % half;
        const int64_t rest = i / half;
        const int64_t t = rest % a.t;
        int64_t base[2];
        offsets_of(lead, rest / a.t, base);
        const int64_t d0 = a.interleaved ? 2 * pair : pair;
        const int64_t d1 = a.interleaved ? 2 * pair + 1 : pair + half;
        const double angle = static_cast<double>(a.position_offset + t) *
                             pow(a.theta, -2.0 * static_cast<double>(pair) / static_cast<double>(a.d));
        double s, c;
        sincos(angle, &s, &c);
        if (a.inverse) s = -s;
        const int64_t xt = base[1] + t * a.x_stride_t, yt = base[0] + t * a.y_stride_t;
        const float v0 = num<T>::load(x[xt + d0 * a.x_stride_d]);
        const float v1 = num<T>::load(x[xt + d1 * a.x_stride_d]);
        out[yt + d0 * a.y_stride_d] = num<T>::store(static_cast<float>(v0 * c - v1 * s));
        out[yt + d1 * a.y_stride_d] = num<T>::store(static_cast<float>(v0 * s + v1 * c));
    }
}

}  // namespace

// ---- launchers -------------------------------------------------------------------------------------

cudaError_t launch_max_pool(cudaStream_t stream, int32_t dtype, const PoolArgs &a, void *y, const void *x) {
    const int64_t count = a.n * a.c * a.oh * a.ow;
    if (count == 0) return cudaSuccess;
    const bool known = with_float(dtype, [&](auto t) {
        using T = decltype(t);
        max_pool_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(a, static_cast<T *>(y), static_cast<const T *>(x));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_max_pool_backward(cudaStream_t stream, int32_t dtype, const PoolArgs &a, void *dx,
                                     const void *dy, const void *x) {
    const int64_t count = a.n * a.c * a.h * a.w;
    if (count == 0) return cudaSuccess;
    const bool known = with_float(dtype, [&](auto t) {
        using T = decltype(t);
        max_pool_backward_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(
            a, static_cast<T *>(dx), static_cast<const T *>(dy), static_cast<const T *>(x));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_avg_pool(cudaStream_t stream, int32_t dtype, const PoolArgs &a, void *y, const void *x) {
    const int64_t count = a.n * a.c * a.oh * a.ow;
    if (count == 0) return cudaSuccess;
    const bool known = with_float(dtype, [&](auto t) {
        using T = decltype(t);
        avg_pool_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(a, static_cast<T *>(y), static_cast<const T *>(x));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_avg_pool_backward(cudaStream_t stream, int32_t dtype, const PoolArgs &a, void *dx,
                                     const void *dy) {
    const int64_t count = a.n * a.c * a.h * a.w;
    if (count == 0) return cudaSuccess;
    const bool known = with_float(dtype, [&](auto t) {
        using T = decltype(t);
        avg_pool_backward_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(a, static_cast<T *>(dx),
                                                                                 static_cast<const T *>(dy));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_embedding(cudaStream_t stream, int32_t dtype, int32_t index_dtype, const RowGeom<2> &g,
                             const EmbeddingArgs &args, void *out, const void *weight, const void *indices,
                             DataError *error) {
    const int64_t count = g.rows.count * g.cols.count;
    if (count == 0) return cudaSuccess;
    bool known = false;
    with_bits(dtype, [&](auto u) {
        using U = decltype(u);
        known = with_index(index_dtype, [&](auto l) {
            using L = decltype(l);
            embedding_kernel<U, L><<<blocks_for(count), block_size, 0, stream>>>(
                g, args, static_cast<U *>(out), static_cast<const U *>(weight), static_cast<const L *>(indices), error);
        });
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_embedding_backward(cudaStream_t stream, int32_t dtype, int32_t index_dtype, const RowGeom<2> &g,
                                      const EmbeddingArgs &args, void *dweight, const void *dy, const void *indices,
                                      DataError *error) {
    const int64_t count = g.rows.count * g.cols.count;
    if (count == 0) return cudaSuccess;
    bool known = false;
    auto run = [&](auto t) {
        using T = decltype(t);
        known = with_index(index_dtype, [&](auto l) {
            using L = decltype(l);
            embedding_backward_kernel<T, L><<<blocks_for(count), block_size, 0, stream>>>(
                g, args, static_cast<T *>(dweight), static_cast<const T *>(dy), static_cast<const L *>(indices), error);
        });
    };
    if (dtype == TF_DTYPE_F32) run(float{});
    else if (dtype == TF_DTYPE_F16) run(__half{});
    else if (dtype == TF_DTYPE_BF16) run(__nv_bfloat16{});
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_one_hot(cudaStream_t stream, int32_t out_dtype, int32_t label_dtype, const RowGeom<2> &g,
                           int64_t num_classes, uint64_t one_bits, void *out, const void *labels, DataError *error) {
    const int64_t count = g.rows.count * num_classes;
    if (count == 0) return cudaSuccess;
    bool known = false;
    with_bits(out_dtype, [&](auto u) {
        using U = decltype(u);
        known = with_index(label_dtype, [&](auto l) {
            using L = decltype(l);
            one_hot_kernel<U, L><<<blocks_for(count), block_size, 0, stream>>>(
                g, num_classes, static_cast<U>(one_bits), static_cast<U *>(out), static_cast<const L *>(labels), error);
        });
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_attention(cudaStream_t stream, int32_t dtype, const Strided<5> &lead, const AttentionArgs &args,
                             void *out, const void *q, const void *k, const void *v, const void *mask) {
    const int64_t rows = lead.count * args.tq;
    if (rows == 0 || args.dv == 0) return cudaSuccess;
    // Rounded up to whole float4s: nvcc reads the scores with 16-byte LDS.128 loads, the last one
    // past tk when tk % 4 != 0 (compute-sanitizer memcheck flagged it on an H100).
    const size_t shared_bytes = static_cast<size_t>((args.tk + 3) / 4 * 4) * sizeof(float);
    const bool known = with_float(dtype, [&](auto t) {
        using T = decltype(t);
        attention_kernel<T><<<row_blocks(rows), row_threads(std::max(args.tk, args.dv)), shared_bytes, stream>>>(
            lead, args, static_cast<T *>(out), static_cast<const T *>(q), static_cast<const T *>(k),
            static_cast<const T *>(v), static_cast<const T *>(mask));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_rope(cudaStream_t stream, int32_t dtype, const Strided<2> &lead, const RopeArgs &args, void *out,
                        const void *x) {
    const int64_t count = lead.count * args.t * (args.d / 2);
    if (count == 0) return cudaSuccess;
    const bool known = with_float(dtype, [&](auto t) {
        using T = decltype(t);
        rope_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(lead, args, static_cast<T *>(out),
                                                                    static_cast<const T *>(x));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

}  // namespace tf_cuda
