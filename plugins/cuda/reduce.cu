// Row kernels: one block per row (the kept axes pick the row, the reduced or normalised axes are
// its columns), threads striding over the columns, a block reduction at the end. Used by sum,
// mean, max, min, var, argmax, argmin, softmax, log_softmax, layer_norm, rms_norm and
// cross_entropy; cumsum (a scan, one thread per line) lives here too.
//
// Float sums accumulate in double (like the cpu plugin; these kernels are memory-bound, so the
// slower double adds cost nothing measurable) and are rounded once; integer sums wrap. var is
// two-pass. A row with many columns and few rows uses few SMs: good enough for the shapes of a
// training step (bias gradients: channels rows of batch * pixels columns).
#include "device_common.cuh"

namespace tf_cuda {
namespace {

template <class T>
using Sum = std::conditional_t<std::is_same<typename Num<T>::Compute, float>::value, double, uint64_t>;

template <class C>
__device__ __forceinline__ C lowest() {
    if constexpr (std::is_floating_point<C>::value)
        return -INFINITY;
    else if constexpr (sizeof(C) == 4)
        return INT32_MIN;
    else
        return INT64_MIN;
}
template <class C>
__device__ __forceinline__ C highest() {
    if constexpr (std::is_floating_point<C>::value)
        return INFINITY;
    else if constexpr (sizeof(C) == 4)
        return INT32_MAX;
    else
        return INT64_MAX;
}

// Column c of the row whose operand offsets are base.
template <int N>
__device__ __forceinline__ void column(const RowGeom<N> &g, const int64_t (&base)[N], int64_t c, int64_t (&off)[N]) {
    offsets_of(g.cols, c, off);
    for (int k = 0; k < N; ++k) off[k] += base[k];
}

// ---- sum, mean, max, min, var --------------------------------------------------------------------

template <class T>
__global__ void reduce_kernel(RowGeom<2> g, uint32_t op, T *out, const T *in, double correction) {
    using C = typename Num<T>::Compute;
    using S = Sum<T>;
    __shared__ S sums[32];
    __shared__ C extremes[32];
    for (int64_t row = blockIdx.x; row < g.rows.count; row += gridDim.x) {
        int64_t base[2], off[2];
        offsets_of(g.rows, row, base);
        if (op == TF_OP_MAX || op == TF_OP_MIN) {
            const bool is_max = op == TF_OP_MAX;
            C acc = is_max ? lowest<C>() : highest<C>();
            for (int64_t c = threadIdx.x; c < g.cols.count; c += blockDim.x) {
                column(g, base, c, off);
                const C x = Num<T>::load(in[off[1]]);
                acc = is_max ? maximum_of(acc, x) : minimum_of(acc, x);
            }
            acc = is_max ? block_reduce(acc, Max{}, extremes) : block_reduce(acc, Min{}, extremes);
            if (threadIdx.x == 0) out[base[0]] = Num<T>::store(acc);
            continue;
        }
        S acc = 0;
        for (int64_t c = threadIdx.x; c < g.cols.count; c += blockDim.x) {
            column(g, base, c, off);
            acc += static_cast<S>(Num<T>::load(in[off[1]]));
        }
        acc = block_reduce(acc, Add{}, sums);
        if constexpr (std::is_same<S, double>::value) {
            const double n = static_cast<double>(g.cols.count);
            if (op == TF_OP_VAR) {
                const double mean = acc / n;
                double dev = 0;
                for (int64_t c = threadIdx.x; c < g.cols.count; c += blockDim.x) {
                    column(g, base, c, off);
                    const double d = static_cast<double>(Num<T>::load(in[off[1]])) - mean;
                    dev += d * d;
                }
                dev = block_reduce(dev, Add{}, sums);
                const double divisor = n - correction > 0 ? n - correction : 0.0;
                if (threadIdx.x == 0) out[base[0]] = Num<T>::store(static_cast<float>(dev / divisor));
                continue;
            }
            const double value = op == TF_OP_MEAN ? acc / n : acc;
            if (threadIdx.x == 0) out[base[0]] = Num<T>::store(static_cast<float>(value));
        } else {
            if (threadIdx.x == 0) out[base[0]] = static_cast<T>(acc);  // wraps, like the cpu plugin
        }
    }
}

// ---- argmax, argmin ------------------------------------------------------------------------------

// The first index of the extreme; a NaN is the extreme (the first NaN wins).
template <class C, bool IsMax>
struct Better {
    __device__ Located<C> operator()(Located<C> a, Located<C> b) const {
        if constexpr (std::is_floating_point<C>::value) {
            const bool an = a.value != a.value, bn = b.value != b.value;
            if (an || bn) return an && (!bn || a.index < b.index) ? a : b;
        }
        if (a.value == b.value) return a.index < b.index ? a : b;
        return (IsMax ? a.value > b.value : a.value < b.value) ? a : b;
    }
};

template <class T, bool IsMax>
__global__ void arg_kernel(RowGeom<2> g, int64_t *out, const T *in) {
    using C = typename Num<T>::Compute;
    __shared__ Located<C> shared[32];
    const Better<C, IsMax> better;
    for (int64_t row = blockIdx.x; row < g.rows.count; row += gridDim.x) {
        int64_t base[2], off[2];
        offsets_of(g.rows, row, base);
        Located<C> acc{IsMax ? lowest<C>() : highest<C>(), INT64_MAX};
        for (int64_t c = threadIdx.x; c < g.cols.count; c += blockDim.x) {
            column(g, base, c, off);
            acc = better(acc, Located<C>{Num<T>::load(in[off[1]]), c});
        }
        acc = block_reduce(acc, better, shared);
        if (threadIdx.x == 0) out[base[0]] = acc.index;
    }
}

// ---- softmax, log_softmax ------------------------------------------------------------------------

template <class T>
__global__ void softmax_kernel(RowGeom<2> g, bool log, T *out, const T *in) {
    __shared__ float shared[32];
    for (int64_t row = blockIdx.x; row < g.rows.count; row += gridDim.x) {
        int64_t base[2], off[2];
        offsets_of(g.rows, row, base);
        float peak = -INFINITY;
        for (int64_t c = threadIdx.x; c < g.cols.count; c += blockDim.x) {
            column(g, base, c, off);
            peak = maximum_of(peak, Num<T>::load(in[off[1]]));
        }
        peak = block_reduce(peak, Max{}, shared);
        float total = 0.f;
        for (int64_t c = threadIdx.x; c < g.cols.count; c += blockDim.x) {
            column(g, base, c, off);
            total += expf(Num<T>::load(in[off[1]]) - peak);
        }
        total = block_reduce(total, Add{}, shared);
        const float log_total = logf(total);
        for (int64_t c = threadIdx.x; c < g.cols.count; c += blockDim.x) {
            column(g, base, c, off);
            const float shifted = Num<T>::load(in[off[1]]) - peak;
            out[off[0]] = Num<T>::store(log ? shifted - log_total : expf(shifted) / total);
        }
    }
}

// ---- layer_norm, rms_norm -------------------------------------------------------------------------

// Operands: 0 out, 1 x, 2 weight, 3 bias (NULL for rms_norm).
template <class T>
__global__ void norm_kernel(RowGeom<4> g, T *out, const T *x, const T *weight, const T *bias, double eps) {
    __shared__ double shared[32];
    const double n = static_cast<double>(g.cols.count);
    for (int64_t row = blockIdx.x; row < g.rows.count; row += gridDim.x) {
        int64_t base[4], off[4];
        offsets_of(g.rows, row, base);
        double mean = 0;
        if (bias) {
            double total = 0;
            for (int64_t c = threadIdx.x; c < g.cols.count; c += blockDim.x) {
                column(g, base, c, off);
                total += Num<T>::load(x[off[1]]);
            }
            mean = block_reduce(total, Add{}, shared) / n;
        }
        // layer_norm: the biased variance around the mean; rms_norm: the mean square.
        double squares = 0;
        for (int64_t c = threadIdx.x; c < g.cols.count; c += blockDim.x) {
            column(g, base, c, off);
            const double d = Num<T>::load(x[off[1]]) - mean;
            squares += d * d;
        }
        const float scale = static_cast<float>(rsqrt(block_reduce(squares, Add{}, shared) / n + eps));
        const float shift = static_cast<float>(mean);
        for (int64_t c = threadIdx.x; c < g.cols.count; c += blockDim.x) {
            column(g, base, c, off);
            float y = (Num<T>::load(x[off[1]]) - shift) * scale * Num<T>::load(weight[off[2]]);
            if (bias) y += Num<T>::load(bias[off[3]]);
            out[off[0]] = Num<T>::store(y);
        }
    }
}

// ---- cross_entropy -------------------------------------------------------------------------------

// One block per sample: loss = logsumexp(x) - x[label]. For NONE the loss goes to out; otherwise
// to scratch[i] with scratch[n + i] = 1 when the sample counts (its label is not ignored).
template <class T, class L>
__global__ void cross_entropy_rows(CrossEntropyArgs a, T *out, const T *logits, const L *labels, double *scratch,
                                   DataError *error) {
    __shared__ float shared[32];
    for (int64_t i = blockIdx.x; i < a.n; i += gridDim.x) {
        const T *x = logits + i * a.x_stride_n;
        const int64_t label = static_cast<int64_t>(labels[i * a.label_stride]);
        const bool ignored = label == a.ignore_index;
        const bool valid = !ignored && label >= 0 && label < a.c;
        float peak = -INFINITY;
        for (int64_t c = threadIdx.x; c < a.c; c += blockDim.x)
            peak = maximum_of(peak, Num<T>::load(x[c * a.x_stride_c]));
        peak = block_reduce(peak, Max{}, shared);
        float total = 0.f;
        for (int64_t c = threadIdx.x; c < a.c; c += blockDim.x) total += expf(Num<T>::load(x[c * a.x_stride_c]) - peak);
        total = block_reduce(total, Add{}, shared);
        if (threadIdx.x == 0) {
            if (!ignored && !valid) report_index_error(error, TF_OP_CROSS_ENTROPY, label, a.c);
            float loss = 0.f;
            if (valid)
                loss = logf(total) + peak - Num<T>::load(x[label * a.x_stride_c]);
            else if (!ignored)
                loss = NAN;
            if (a.reduction == TF_REDUCTION_NONE) {
                out[i * a.out_stride] = Num<T>::store(loss);
            } else {
                scratch[i] = loss;
                scratch[a.n + i] = valid ? 1.0 : 0.0;
            }
        }
    }
}

// One block: the sum (SUM) or the mean over counted samples (MEAN; 0 / 0 is NaN) of scratch.
template <class T>
__global__ void cross_entropy_total(CrossEntropyArgs a, T *out, const double *scratch) {
    __shared__ double shared[32];
    double total = 0, counted = 0;
    for (int64_t i = threadIdx.x; i < a.n; i += blockDim.x) {
        total += scratch[i];
        counted += scratch[a.n + i];
    }
    total = block_reduce(total, Add{}, shared);
    counted = block_reduce(counted, Add{}, shared);
    if (threadIdx.x == 0)
        out[0] = Num<T>::store(static_cast<float>(a.reduction == TF_REDUCTION_MEAN ? total / counted : total));
}

// ---- cumsum ------------------------------------------------------------------------------------------

// The value of a double sum stored once-rounded in T (cpu's store_wide), or an integer sum wrapped.
template <class T>
__device__ __forceinline__ T store_sum(Sum<T> acc) {
    if constexpr (std::is_same<T, __half>::value)
        return __double2half(acc);
    else if constexpr (std::is_same<T, __nv_bfloat16>::value)
        return __double2bfloat16(acc);
    else
        return static_cast<T>(acc);
}

// One thread per line (a row of g), summing its columns in order (reverse: from the last), as the
// cpu plugin does: the same sums in the same order, so the same results.
template <class T>
__global__ void cumsum_kernel(RowGeom<2> g, T *out, const T *in, bool exclusive, bool reverse) {
    const int64_t n = g.cols.count;
    for (int64_t line = global_index(); line < g.rows.count; line += global_stride()) {
        int64_t base[2], off[2];
        offsets_of(g.rows, line, base);
        Sum<T> acc = 0;
        for (int64_t k = 0; k < n; ++k) {
            column(g, base, reverse ? n - 1 - k : k, off);
            const auto v = static_cast<Sum<T>>(Num<T>::load(in[off[1]]));
            if (!exclusive) acc += v;
            out[off[0]] = store_sum<T>(acc);
            if (exclusive) acc += v;
        }
    }
}

}  // namespace

// ---- launchers -------------------------------------------------------------------------------------

cudaError_t launch_reduce(cudaStream_t stream, uint32_t op, int32_t dtype, const RowGeom<2> &g, void *out,
                          const void *in, double correction) {
    if (g.rows.count == 0) return cudaSuccess;
    const bool known = Dtypes::with_numeric(dtype, [&](auto t) {
        using T = decltype(t);
        reduce_kernel<T><<<row_blocks(g.rows.count), row_threads(g.cols.count), 0, stream>>>(
            g, op, static_cast<T *>(out), static_cast<const T *>(in), correction);
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_cumsum(cudaStream_t stream, int32_t dtype, const RowGeom<2> &g, void *out, const void *in,
                          bool exclusive, bool reverse) {
    if (g.rows.count == 0 || g.cols.count == 0) return cudaSuccess;
    const bool known = Dtypes::with_numeric(dtype, [&](auto t) {
        using T = decltype(t);
        cumsum_kernel<T><<<blocks_for(g.rows.count), block_size, 0, stream>>>(
            g, static_cast<T *>(out), static_cast<const T *>(in), exclusive, reverse);
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_arg(cudaStream_t stream, uint32_t op, int32_t dtype, const RowGeom<2> &g, void *out,
                       const void *in) {
    if (g.rows.count == 0) return cudaSuccess;
    const bool known = Dtypes::with_numeric(dtype, [&](auto t) {
        using T = decltype(t);
        const unsigned blocks = row_blocks(g.rows.count);
        const int threads = row_threads(g.cols.count);
        if (op == TF_OP_ARGMAX)
            arg_kernel<T, true>
                <<<blocks, threads, 0, stream>>>(g, static_cast<int64_t *>(out), static_cast<const T *>(in));
        else
            arg_kernel<T, false>
                <<<blocks, threads, 0, stream>>>(g, static_cast<int64_t *>(out), static_cast<const T *>(in));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_softmax(cudaStream_t stream, bool log, int32_t dtype, const RowGeom<2> &g, void *out,
                           const void *in) {
    if (g.rows.count == 0 || g.cols.count == 0) return cudaSuccess;
    const bool known = Dtypes::with_float(dtype, [&](auto t) {
        using T = decltype(t);
        softmax_kernel<T><<<row_blocks(g.rows.count), row_threads(g.cols.count), 0, stream>>>(
            g, log, static_cast<T *>(out), static_cast<const T *>(in));
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_norm(cudaStream_t stream, int32_t dtype, const RowGeom<4> &g, void *out, const void *x,
                        const void *weight, const void *bias, double eps) {
    if (g.rows.count == 0 || g.cols.count == 0) return cudaSuccess;
    const bool known = Dtypes::with_float(dtype, [&](auto t) {
        using T = decltype(t);
        norm_kernel<T><<<row_blocks(g.rows.count), row_threads(g.cols.count), 0, stream>>>(
            g, static_cast<T *>(out), static_cast<const T *>(x), static_cast<const T *>(weight),
            static_cast<const T *>(bias), eps);
    });
    return known ? cudaGetLastError() : bad_dtype();
}

cudaError_t launch_cross_entropy(cudaStream_t stream, int32_t dtype, int32_t label_dtype, const CrossEntropyArgs &args,
                                 void *out, const void *logits, const void *labels, double *scratch, DataError *error) {
    bool known = true;
    const bool none = args.reduction == TF_REDUCTION_NONE;
    if (args.n > 0) {
        known =
            Dtypes::with_float(dtype,
                               [&](auto t) {
                                   using T = decltype(t);
                                   known = Dtypes::with_index(label_dtype, [&](auto l) {
                                       using L = decltype(l);
                                       cross_entropy_rows<T, L><<<row_blocks(args.n), row_threads(args.c), 0, stream>>>(
                                           args, static_cast<T *>(out), static_cast<const T *>(logits),
                                           static_cast<const L *>(labels), scratch, error);
                                   });
                               }) &&
            known;
    }
    if (known && !none) {
        known = Dtypes::with_float(dtype, [&](auto t) {
            using T = decltype(t);
            cross_entropy_total<T><<<1, block_size, 0, stream>>>(args, static_cast<T *>(out), scratch);
        });
    }
    return known ? cudaGetLastError() : bad_dtype();
}

}  // namespace tf_cuda
