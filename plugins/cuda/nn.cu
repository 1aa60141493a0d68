// Neural-network kernels: max and average pooling with their backward ops, embedding and its
// scatter-add backward, one_hot, attention and rope. One thread per output element (one block per
// query row for attention); the backward pooling ops gather (pool.hpp), so they need no atomics and
// give the same result on every run.
#include "device_common.cuh"
#include "pool.hpp"

#include <algorithm>

namespace tf_cuda {
namespace {

// ---- pooling (the element arithmetic is in pool.hpp) ---------------------------------------------

enum class PoolPass { max, max_backward, avg, avg_backward };

__host__ __device__ constexpr bool is_backward(PoolPass pass) {
    return pass == PoolPass::max_backward || pass == PoolPass::avg_backward;
}

// One thread per element of the tensor written: y (n, c, oh, ow) forward, dx (n, c, h, w)
// backward. in is x forward and dy backward; x is read by max_backward only.
template <class T, PoolPass P>
__global__ void pool_kernel(PoolArgs a, T *out, const T *in, const T *x) {
    constexpr bool backward = is_backward(P);
    const int64_t rows = backward ? a.h : a.oh, cols = backward ? a.w : a.ow;
    const int64_t count = a.n * a.c * rows * cols;
    for (int64_t i = global_index(); i < count; i += global_stride()) {
        int64_t at[4];
        split4(i, rows, cols, a.c, at);
        float value;
        if constexpr (P == PoolPass::max)
            value = max_pool_at(a, in, at[0], at[1], at[2], at[3]);
        else if constexpr (P == PoolPass::max_backward)
            value = max_pool_grad_at(a, in, x, at[0], at[1], at[2], at[3]);
        else if constexpr (P == PoolPass::avg)
            value = avg_pool_at(a, in, at[0], at[1], at[2], at[3]);
        else
            value = avg_pool_grad_at(a, in, at[0], at[1], at[2], at[3]);
        out[offset4(backward ? a.dx_strides : a.y_strides, at[0], at[1], at[2], at[3])] = Num<T>::store(value);
    }
}

// ---- embedding, one_hot --------------------------------------------------------------------------

// Visits every (index row, column d) of g = {rows tensor, indices}: hit(at, v, d) with at the
// element's offset in the rows tensor and v the row's index when 0 <= v < vocab, else miss(at),
// with the bad index reported once per row (as op).
template <class L, class Hit, class Miss>
__device__ __forceinline__ void for_each_looked_up(const RowGeom<2> &g, const EmbeddingArgs &a, const L *indices,
                                                   uint32_t op, DataError *error, Hit hit, Miss miss) {
    const int64_t count = g.rows.count * g.cols.count;
    for (int64_t i = global_index(); i < count; i += global_stride()) {
        const int64_t row = i / g.cols.count, d = i - row * g.cols.count;
        int64_t base[2], col[2];
        offsets_of(g.rows, row, base);
        offsets_of(g.cols, d, col);
        const int64_t v = static_cast<int64_t>(indices[base[1]]);
        if (v < 0 || v >= a.vocab) {
            if (d == 0) report_index_error(error, op, v, a.vocab);
            miss(base[0] + col[0]);
            continue;
        }
        hit(base[0] + col[0], v, d);
    }
}

// U: the element's bits.
template <class U, class L>
__global__ void embedding_kernel(RowGeom<2> g, EmbeddingArgs a, U *out, const U *weight, const L *indices,
                                 DataError *error) {
    for_each_looked_up(
        g, a, indices, TF_OP_EMBEDDING, error,
        [&](int64_t at, int64_t v, int64_t d) { out[at] = weight[v * a.w_stride_v + d * a.w_stride_d]; },
        [&](int64_t at) { out[at] = U(0); });
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

// dweight was zeroed by the launcher's fill.
template <class T, class L>
__global__ void embedding_backward_kernel(RowGeom<2> g, EmbeddingArgs a, T *dweight, const T *dy, const L *indices,
                                          DataError *error) {
    for_each_looked_up(
        g, a, indices, TF_OP_EMBEDDING_BACKWARD, error,
        [&](int64_t at, int64_t v, int64_t d) {
            add_to(dweight + v * a.w_stride_v + d * a.w_stride_d, Num<T>::load(dy[at]));
        },
        [](int64_t) {});
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

// One block per query row (batch b, query i): the scores q_i . k_j * scale + mask[i, j] (no mask
// term when mask is NULL: the op's mask was absent; -inf where
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
                for (int64_t c = 0; c < a.d; ++c)
                    dot += Num<T>::load(qi[c * a.q_stride_d]) * Num<T>::load(kj[c * a.k_stride_d]);
                s = dot * a.scale;
                if (mask) s += Num<T>::load(mask[base[4] + i * a.mask_stride_q + j * a.mask_stride_k]);
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
            for (int64_t j = 0; j < a.tk; ++j)
                acc += scores[j] * Num<T>::load(v[base[3] + j * a.v_stride_t + c * a.v_stride_d]);
            out[base[0] + i * a.out_stride_t + c * a.out_stride_d] = Num<T>::store(acc / total);
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
        const float v0 = Num<T>::load(x[xt + d0 * a.x_stride_d]);
        const float v1 = Num<T>::load(x[xt + d1 * a.x_stride_d]);
        out[yt + d0 * a.y_stride_d] = Num<T>::store(static_cast<float>(v0 * c - v1 * s));
        out[yt + d1 * a.y_stride_d] = Num<T>::store(static_cast<float>(v0 * s + v1 * c));
    }
}

}  // namespace

// ---- launchers -------------------------------------------------------------------------------------

// Runs launch(T{}) (the kernel launch) with T the storage type of a float dtype, unless there are
// no elements: cudaSuccess, the launch's error, or bad_dtype() for another dtype.
template <class Launch>
cudaError_t launch_float(int32_t dtype, int64_t count, Launch &&launch) {
    if (count == 0) return cudaSuccess;
    return Dtypes::with_float(dtype, launch) ? cudaGetLastError() : bad_dtype();
}

// The element types an indexed kernel is instantiated for: the bits of any dtype (a copy) or the
// storage type of a float dtype (arithmetic).
struct AnyBits {
    template <class Fn>
    bool operator()(int32_t dtype, Fn &&fn) const {
        return Dtypes::with_bits(dtype, fn);
    }
};
struct Floats {
    template <class Fn>
    bool operator()(int32_t dtype, Fn &&fn) const {
        return Dtypes::with_float(dtype, fn);
    }
};

// Runs launch(E{}, L{}) with E the element type pick (AnyBits, Floats) gives for dtype and L the
// index type of index_dtype, as launch_float does.
template <class Pick, class Launch>
cudaError_t launch_indexed(Pick pick, int32_t dtype, int32_t index_dtype, int64_t count, Launch &&launch) {
    if (count == 0) return cudaSuccess;
    bool known = false;
    pick(dtype, [&](auto e) { known = Dtypes::with_index(index_dtype, [&](auto l) { launch(e, l); }); });
    return known ? cudaGetLastError() : bad_dtype();
}

template <PoolPass P>
cudaError_t launch_pool(cudaStream_t stream, int32_t dtype, const PoolArgs &a, void *out, const void *in,
                        const void *x) {
    const int64_t count = a.n * a.c * (is_backward(P) ? a.h * a.w : a.oh * a.ow);
    return launch_float(dtype, count, [&](auto t) {
        using T = decltype(t);
        pool_kernel<T, P><<<blocks_for(count), block_size, 0, stream>>>(
            a, static_cast<T *>(out), static_cast<const T *>(in), static_cast<const T *>(x));
    });
}

cudaError_t launch_max_pool(cudaStream_t stream, int32_t dtype, const PoolArgs &a, void *y, const void *x) {
    return launch_pool<PoolPass::max>(stream, dtype, a, y, x, nullptr);
}

cudaError_t launch_max_pool_backward(cudaStream_t stream, int32_t dtype, const PoolArgs &a, void *dx, const void *dy,
                                     const void *x) {
    return launch_pool<PoolPass::max_backward>(stream, dtype, a, dx, dy, x);
}

cudaError_t launch_avg_pool(cudaStream_t stream, int32_t dtype, const PoolArgs &a, void *y, const void *x) {
    return launch_pool<PoolPass::avg>(stream, dtype, a, y, x, nullptr);
}

cudaError_t launch_avg_pool_backward(cudaStream_t stream, int32_t dtype, const PoolArgs &a, void *dx, const void *dy) {
    return launch_pool<PoolPass::avg_backward>(stream, dtype, a, dx, dy, nullptr);
}

cudaError_t launch_embedding(cudaStream_t stream, int32_t dtype, int32_t index_dtype, const RowGeom<2> &g,
                             const EmbeddingArgs &args, void *out, const void *weight, const void *indices,
                             DataError *error) {
    const int64_t count = g.rows.count * g.cols.count;
    return launch_indexed(AnyBits{}, dtype, index_dtype, count, [&](auto u, auto l) {
        using U = decltype(u);
        using L = decltype(l);
        embedding_kernel<U, L><<<blocks_for(count), block_size, 0, stream>>>(
            g, args, static_cast<U *>(out), static_cast<const U *>(weight), static_cast<const L *>(indices), error);
    });
}

cudaError_t launch_embedding_backward(cudaStream_t stream, int32_t dtype, int32_t index_dtype, const RowGeom<2> &g,
                                      const EmbeddingArgs &args, void *dweight, const void *dy, const void *indices,
                                      DataError *error) {
    const int64_t count = g.rows.count * g.cols.count;
    return launch_indexed(Floats{}, dtype, index_dtype, count, [&](auto t, auto l) {
        using T = decltype(t);
        using L = decltype(l);
        embedding_backward_kernel<T, L><<<blocks_for(count), block_size, 0, stream>>>(
            g, args, static_cast<T *>(dweight), static_cast<const T *>(dy), static_cast<const L *>(indices), error);
    });
}

cudaError_t launch_one_hot(cudaStream_t stream, int32_t out_dtype, int32_t label_dtype, const RowGeom<2> &g,
                           int64_t num_classes, uint64_t one_bits, void *out, const void *labels, DataError *error) {
    const int64_t count = g.rows.count * num_classes;
    return launch_indexed(AnyBits{}, out_dtype, label_dtype, count, [&](auto u, auto l) {
        using U = decltype(u);
        using L = decltype(l);
        one_hot_kernel<U, L><<<blocks_for(count), block_size, 0, stream>>>(
            g, num_classes, static_cast<U>(one_bits), static_cast<U *>(out), static_cast<const L *>(labels), error);
    });
}

cudaError_t launch_attention(cudaStream_t stream, int32_t dtype, const Strided<5> &lead, const AttentionArgs &args,
                             void *out, const void *q, const void *k, const void *v, const void *mask) {
    const int64_t rows = lead.count * args.tq;
    // Rounded up to whole float4s: nvcc reads the scores with 16-byte LDS.128 loads, the last one
    // past tk when tk % 4 != 0 (compute-sanitizer memcheck flagged it on an H100).
    const size_t shared_bytes = static_cast<size_t>((args.tk + 3) / 4 * 4) * sizeof(float);
    return launch_float(dtype, args.dv == 0 ? 0 : rows, [&](auto t) {
        using T = decltype(t);
        attention_kernel<T><<<row_blocks(rows), row_threads(std::max(args.tk, args.dv)), shared_bytes, stream>>>(
            lead, args, static_cast<T *>(out), static_cast<const T *>(q), static_cast<const T *>(k),
            static_cast<const T *>(v), static_cast<const T *>(mask));
    });
}

cudaError_t launch_rope(cudaStream_t stream, int32_t dtype, const Strided<2> &lead, const RopeArgs &args, void *out,
                        const void *x) {
    const int64_t count = lead.count * args.t * (args.d / 2);
    return launch_float(dtype, count, [&](auto t) {
        using T = decltype(t);
        rope_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(lead, args, static_cast<T *>(out),
                                                                     static_cast<const T *>(x));
    });
}

}  // namespace tf_cuda
