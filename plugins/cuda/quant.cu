// The ops on block-quantized tensors (ops.def 65, 67, 68): dequantize, embedding_q and matmul_q
// for the nine formats of dtypes.def, decoding 32 elements at a time with quant_decode.hpp (the
// cpu reference codec's arithmetic: dequantize and embedding_q match it bit for bit).
//
//  - dequantize, embedding_q: one thread per (row, chunk of 32), grid stride; the chunk is decoded
//    into registers and stored rounded once to the output dtype.
//  - matmul_q (matrix-vector, quant.cpp's choice for few rows of x or layouts cuBLAS cannot take):
//    f32 x and out (quant.cpp converts f16/bf16 operands around it); one warp per weight row n;
//    lane l decodes chunks l, l + 32, ... of the row once and multiplies each with R rows of x
//    (f32 accumulation), then a warp reduction gives out[m, n]. Consecutive lanes read
//    consecutive blocks, so a warp reads a contiguous stretch of the row. quant.cpp sends many
//    rows of x to dequantized tiles and cuBLAS instead.
// Kernel instances: 9 formats x 3 output dtypes for the row kernel, 9 x 2 row counts for the
// matrix-vector one (each instance is a fully unrolled decoder: nvcc's time grows with them).
#include "device_common.cuh"
#include "quant_decode.hpp"

#include <tinyfin/plugin_kit/ops.hpp>

#include <climits>

namespace tf_cuda {
namespace {

using quant::Blocks;
using quant::chunk;
using quant::decode32;

#define TF_DTYPE(id, sym, name, block_len, block_size, ggml)                                                           \
    static_assert(block_len == 1 || (quant::block_length(id) == block_len && quant::block_bytes(id) == block_size),    \
                  "quant_decode.hpp's block table differs from dtypes.def");
#include <tinyfin/dtypes.def>
#undef TF_DTYPE

// Warps (weight rows) per block of the matrix-vector kernel.
constexpr int matvec_warps = 8;

template <class T>
__device__ __forceinline__ void store32(T *out, int64_t stride, const float (&v)[chunk]) {
    TF_CUDA_UNROLL
    for (int i = 0; i < chunk; ++i) out[i * stride] = Num<T>::store(v[i]);
}

// Byte of the block holding element e of a quantized tensor (e at a block boundary).
template <int32_t QT>
__device__ __forceinline__ int64_t block_byte(int64_t e) {
    return e / quant::block_length(QT) * quant::block_bytes(QT);
}

// dequantize (indices == nullptr: row r of the output is row r of q) and embedding_q (row r is
// the table's row indices[r]; a bad index writes zeros and is reported once per row, with the
// row's first chunk).
template <int32_t QT, class T>
__global__ void rows_kernel(QuantRowsArgs a, T *out, const uint16_t *q, const void *indices, bool wide,
                            DataError *error) {
    const Blocks blocks{q};
    const int64_t count = a.lead.count * a.chunks;
    for (int64_t u = global_index(); u < count; u += global_stride()) {
        const int64_t r = u / a.chunks, c = u - r * a.chunks;
        int64_t off[2];
        offsets_of(a.lead, r, off);
        float v[chunk];
        if (!indices) {
            decode32<QT>(blocks, block_byte<QT>(off[1]), c, v);
        } else {
            const int64_t index = wide ? static_cast<const int64_t *>(indices)[off[1]]
                                       : static_cast<int64_t>(static_cast<const int32_t *>(indices)[off[1]]);
            if (index < 0 || index >= a.vocab) {
                if (c == 0) report_index_error(error, TF_OP_EMBEDDING_Q, index, a.vocab);
                TF_CUDA_UNROLL
                for (int i = 0; i < chunk; ++i) v[i] = 0.f;
            } else {
                decode32<QT>(blocks, index * a.table_row_bytes, c, v);
            }
        }
        store32(out + off[0] + chunk * c * a.out_col, a.out_col, v);
    }
}

// out[m, n] = sum_k x[m, k] w[n, k] in f32 for R rows of x per pass (blockIdx.y picks the first,
// passes stride by gridDim.y * R), one warp per weight row.
template <int32_t QT, int R>
__global__ void __launch_bounds__(matvec_warps * 32)
    matmul_q_kernel(MatmulQArgs a, float *out, const float *x, const uint16_t *w) {
    const int lane = static_cast<int>(threadIdx.x & 31u);
    const int64_t n = static_cast<int64_t>(blockIdx.x) * matvec_warps + static_cast<int64_t>(threadIdx.x >> 5);
    if (n >= a.n) return;  // the whole warp leaves: the shuffles below always see 32 lanes
    const Blocks blocks{w};
    const int64_t row_byte = n * a.w_row_bytes;
    const int64_t m_count = a.lead.count;
    for (int64_t m0 = static_cast<int64_t>(blockIdx.y) * R; m0 < m_count; m0 += static_cast<int64_t>(gridDim.y) * R) {
        const int rows = m_count - m0 < R ? static_cast<int>(m_count - m0) : R;
        int64_t x_at[R];
        float acc[R];
        TF_CUDA_UNROLL
        for (int r = 0; r < R; ++r) {
            int64_t off[2] = {0, 0};
            if (r < rows) offsets_of(a.lead, m0 + r, off);
            x_at[r] = off[1];
            acc[r] = 0.f;
        }
        for (int64_t c = lane; c < a.chunks; c += 32) {
            float v[chunk];
            decode32<QT>(blocks, row_byte, c, v);
            TF_CUDA_UNROLL
            for (int r = 0; r < R; ++r) {
                if (r < rows) {
                    const float *xr = x + x_at[r] + chunk * c * a.x_col;
                    float sum = 0.f;
                    TF_CUDA_UNROLL
                    for (int i = 0; i < chunk; ++i) sum = fmaf(v[i], __ldg(xr + i * a.x_col), sum);
                    acc[r] += sum;
                }
            }
        }
        TF_CUDA_UNROLL
        for (int r = 0; r < R; ++r) {
            TF_CUDA_UNROLL
            for (int offset = 16; offset > 0; offset >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
        }
        if (lane == 0) {
            TF_CUDA_UNROLL
            for (int r = 0; r < R; ++r) {
                if (r < rows) {
                    int64_t off[2];
                    offsets_of(a.lead, m0 + r, off);
                    out[off[0] + n * a.out_col] = acc[r];
                }
            }
        }
    }
}

// Runs launch(Q{}, T{}) for the quantized dtype q_dtype and the storage type T of the float dtype;
// cudaSuccess when count is 0, the launch error, or bad_dtype().
template <class Launch>
cudaError_t launch_quant(int32_t q_dtype, int32_t dtype, int64_t count, Launch &&launch) {
    if (count == 0) return cudaSuccess;
    bool known = false;
    quant::with_quantized(q_dtype, [&](auto qt) { known = Dtypes::with_float(dtype, [&](auto t) { launch(qt, t); }); });
    return known ? cudaGetLastError() : bad_dtype();
}

}  // namespace

cudaError_t launch_dequantize(cudaStream_t stream, int32_t q_dtype, int32_t out_dtype, const QuantRowsArgs &args,
                              void *out, const void *q) {
    const int64_t count = args.lead.count * args.chunks;
    return launch_quant(q_dtype, out_dtype, count, [&](auto qt, auto t) {
        using T = decltype(t);
        rows_kernel<decltype(qt)::value, T><<<blocks_for(count), block_size, 0, stream>>>(
            args, static_cast<T *>(out), static_cast<const uint16_t *>(q), nullptr, false, nullptr);
    });
}

cudaError_t launch_embedding_q(cudaStream_t stream, int32_t q_dtype, int32_t out_dtype, int32_t index_dtype,
                               const QuantRowsArgs &args, void *out, const void *table, const void *indices,
                               DataError *error) {
    if (index_dtype != TF_DTYPE_I32 && index_dtype != TF_DTYPE_I64) return bad_dtype();
    const int64_t count = args.lead.count * args.chunks;
    return launch_quant(q_dtype, out_dtype, count, [&](auto qt, auto t) {
        using T = decltype(t);
        rows_kernel<decltype(qt)::value, T><<<blocks_for(count), block_size, 0, stream>>>(
            args, static_cast<T *>(out), static_cast<const uint16_t *>(table), indices, index_dtype == TF_DTYPE_I64,
            error);
    });
}

cudaError_t launch_matmul_q(cudaStream_t stream, int32_t w_dtype, const MatmulQArgs &args, float *out, const float *x,
                            const void *w) {
    const int64_t m = args.lead.count;
    if (m == 0 || args.n == 0) return cudaSuccess;
    const int64_t n_blocks = (args.n + matvec_warps - 1) / matvec_warps;
    if (n_blocks > INT32_MAX) return cudaErrorInvalidConfiguration;
    // One row of x (generation) or eight per pass; at most 65535 passes side by side.
    const int rows = m == 1 ? 1 : 8;
    const int64_t passes = (m + rows - 1) / rows;
    const dim3 grid(static_cast<unsigned>(n_blocks), static_cast<unsigned>(passes < 65535 ? passes : 65535));
    const bool known = quant::with_quantized(w_dtype, [&](auto qt) {
        constexpr int32_t QT = decltype(qt)::value;
        const auto *blocks = static_cast<const uint16_t *>(w);
        if (rows == 1)
            matmul_q_kernel<QT, 1><<<grid, matvec_warps * 32, 0, stream>>>(args, out, x, blocks);
        else
            matmul_q_kernel<QT, 8><<<grid, matvec_warps * 32, 0, stream>>>(args, out, x, blocks);
    });
    return known ? cudaGetLastError() : bad_dtype();
}

}  // namespace tf_cuda
