// The plugin's own kernels, as the host code sees them: one launcher per kernel family. Each
// launcher enqueues on stream and returns the launch error (cudaGetLastError), never waits.
//
// Pointers are device addresses of element [0, ..., 0] (the descriptor's byte offset already
// added); shapes and strides are in elements (geometry.hpp). Every launcher assumes a descriptor
// that ops.cpp's checks accepted: dtypes from its list, counts that fit the geometry.
#pragma once

#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit/ops.hpp>

#include <cuda_runtime.h>

#include "geometry.hpp"

namespace tf_cuda {

// Bad data that only a kernel can see (an index out of range). Lives in mapped pinned host
// memory, one per device; the first kernel to find a problem fills it, the host reads it after
// the stream has drained (synchronize, buffer_read) and reports it as the op's error.
struct DataError {
    int32_t code;  // 0: none; 1: an index outside [0, bound)
    uint32_t op;  // tf_op of the kernel that found it
    int64_t value;  // the bad index
    int64_t bound;  // the exclusive upper bound it broke
};

// Sanity check for init: can this device run the plugin's kernels (the build has an image for
// its architecture, or PTX the driver can compile)? cudaSuccess or the reason.
cudaError_t probe_kernels();

// ---- elementwise.cu ---------------------------------------------------------------------------

// Float clamp bounds, and the same bounds rounded inward to integers for integer dtypes.
struct ClampBounds {
    float lo, hi;
    int64_t ilo, ihi;
};

// Unary ops of kind UNARY (clamp included) on g = {out, in}.
cudaError_t launch_unary(cudaStream_t stream, uint32_t op, int32_t dtype, const Strided<2> &g, void *out,
                         const void *in, const ClampBounds &bounds);
// add, sub, mul, div, pow, maximum, minimum on g = {out, a, b}.
cudaError_t launch_binary(cudaStream_t stream, uint32_t op, int32_t dtype, const Strided<3> &g, void *out,
                          const void *a, const void *b);
// eq, ne, lt, le, gt, ge on g = {out (bool), a, b}; dtype is the inputs'.
cudaError_t launch_compare(cudaStream_t stream, uint32_t op, int32_t dtype, const Strided<3> &g, void *out,
                           const void *a, const void *b);
// where on g = {out, cond (bool), a, b}.
cudaError_t launch_where(cudaStream_t stream, int32_t dtype, const Strided<4> &g, void *out, const void *cond,
                         const void *a, const void *b);
// Stores the element bits (the low dtype-size bytes of bits) at every element of g = {out}.
cudaError_t launch_fill(cudaStream_t stream, int32_t dtype, const Strided<1> &g, void *out, uint64_t bits);
// contiguous (same dtype) and cast on g = {out, in}.
cudaError_t launch_copy(cudaStream_t stream, int32_t out_dtype, int32_t in_dtype, const Strided<2> &g, void *out,
                        const void *in);

// ---- reduce.cu ---------------------------------------------------------------------------------

// sum, mean, max, min, var: g = {out, in} with the reduced axes as columns (out strides 0 there).
cudaError_t launch_reduce(cudaStream_t stream, uint32_t op, int32_t dtype, const RowGeom<2> &g, void *out,
                          const void *in, double correction);
// cumsum: g = {out, in} with the summed axis as the column; one thread per line, in order (floats
// summed in double and rounded once, integers wrapping).
cudaError_t launch_cumsum(cudaStream_t stream, int32_t dtype, const RowGeom<2> &g, void *out, const void *in,
                          bool exclusive, bool reverse);
// argmax, argmin: g = {out (i64), in}, the one axis as the column.
cudaError_t launch_arg(cudaStream_t stream, uint32_t op, int32_t dtype, const RowGeom<2> &g, void *out, const void *in);
// softmax (log = false) and log_softmax: g = {out, in}, the axis as the column.
cudaError_t launch_softmax(cudaStream_t stream, bool log, int32_t dtype, const RowGeom<2> &g, void *out,
                           const void *in);
// layer_norm (bias != NULL) and rms_norm (bias == NULL): g = {out, x, weight, bias}, the
// normalised axes as columns (weight and bias strides 0 along rows).
cudaError_t launch_norm(cudaStream_t stream, int32_t dtype, const RowGeom<4> &g, void *out, const void *x,
                        const void *weight, const void *bias, double eps);

// cross_entropy: logits [n, c], labels [n] (i32/i64) -> out ([n] for TF_REDUCTION_NONE, else []).
struct CrossEntropyArgs {
    int64_t n, c;
    int64_t x_stride_n, x_stride_c;
    int64_t label_stride;
    int64_t out_stride;  // NONE only
    int64_t ignore_index;
    int32_t reduction;
};
// scratch: device memory for 2 * n doubles (unused for NONE).
cudaError_t launch_cross_entropy(cudaStream_t stream, int32_t dtype, int32_t label_dtype, const CrossEntropyArgs &args,
                                 void *out, const void *logits, const void *labels, double *scratch, DataError *error);

// ---- nn.cu -------------------------------------------------------------------------------------

// Pooling over [N, C, H, W] tensors (4 strides each).
struct PoolArgs {
    int64_t n, c, h, w, oh, ow;
    int64_t x_strides[4];  // x (forward, max backward) or dx (avg backward's output)
    int64_t y_strides[4];  // y (forward) or dy (backward)
    int64_t dx_strides[4];  // backward output
    int32_t kernel[2], stride[2], padding[2];
    int32_t count_include_pad;
};
cudaError_t launch_max_pool(cudaStream_t stream, int32_t dtype, const PoolArgs &args, void *y, const void *x);
cudaError_t launch_max_pool_backward(cudaStream_t stream, int32_t dtype, const PoolArgs &args, void *dx, const void *dy,
                                     const void *x);
cudaError_t launch_avg_pool(cudaStream_t stream, int32_t dtype, const PoolArgs &args, void *y, const void *x);
cudaError_t launch_avg_pool_backward(cudaStream_t stream, int32_t dtype, const PoolArgs &args, void *dx,
                                     const void *dy);

// embedding (any dtype: rows are copied bit for bit): g = {out, indices} over the indices' axes
// (rows) and D (column: indices stride 0). A bad index writes zeros and is reported.
struct EmbeddingArgs {
    int64_t vocab;
    int64_t w_stride_v, w_stride_d;
};
cudaError_t launch_embedding(cudaStream_t stream, int32_t dtype, int32_t index_dtype, const RowGeom<2> &g,
                             const EmbeddingArgs &args, void *out, const void *weight, const void *indices,
                             DataError *error);
// embedding_backward: g = {dy, indices} as above; dweight (already zeroed) gets the rows added.
cudaError_t launch_embedding_backward(cudaStream_t stream, int32_t dtype, int32_t index_dtype, const RowGeom<2> &g,
                                      const EmbeddingArgs &args, void *dweight, const void *dy, const void *indices,
                                      DataError *error);
// one_hot: g = {out, labels} over the labels' axes (rows) and the classes (column: labels stride
// 0); one_bits is the output dtype's 1, zero bits are 0 in every dtype.
cudaError_t launch_one_hot(cudaStream_t stream, int32_t out_dtype, int32_t label_dtype, const RowGeom<2> &g,
                           int64_t num_classes, uint64_t one_bits, void *out, const void *labels, DataError *error);

// attention over q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], mask [..., Tq, Tk] (NULL when
// absent) -> out [..., Tq, Dv]: lead = {out, q, k, v, mask} over the batch axes. One block per query row with the
// row's Tk scores in shared memory, so Tk is at most attention_max_keys.
constexpr int64_t attention_max_keys = 8192;
struct AttentionArgs {
    int64_t tq, tk, d, dv;
    int64_t q_stride_t, q_stride_d, k_stride_t, k_stride_d, v_stride_t, v_stride_d;
    int64_t mask_stride_q, mask_stride_k, out_stride_t, out_stride_d;
    float scale;
    int32_t causal;
};
cudaError_t launch_attention(cudaStream_t stream, int32_t dtype, const Strided<5> &lead, const AttentionArgs &args,
                             void *out, const void *q, const void *k, const void *v, const void *mask);

// rope over x [..., T, D]: lead = {out, x} over the axes before T.
struct RopeArgs {
    int64_t t, d;
    int64_t x_stride_t, x_stride_d, y_stride_t, y_stride_d;
    int64_t position_offset;
    double theta;
    int32_t interleaved, inverse;
};
cudaError_t launch_rope(cudaStream_t stream, int32_t dtype, const Strided<2> &lead, const RopeArgs &args, void *out,
                        const void *x);

// ---- quant.cu ------------------------------------------------------------------------------------

// dequantize and embedding_q: rows of 32-element chunks. lead walks the rows: operand 0 the
// output (elements), operand 1 the quantized tensor (elements, at block boundaries: dequantize)
// or the indices (embedding_q). Row r's element k is out[lead offset + k * out_col].
struct QuantRowsArgs {
    Strided<2> lead;
    int64_t chunks;  // K / 32
    int64_t out_col;
    int64_t table_row_bytes;  // embedding_q: bytes from one table row to the next
    int64_t vocab;  // embedding_q: rows of the table
};
// q: the quantized tensor's first byte (2-byte aligned); out_dtype f32, f16 or bf16.
cudaError_t launch_dequantize(cudaStream_t stream, int32_t q_dtype, int32_t out_dtype, const QuantRowsArgs &args,
                              void *out, const void *q);
// A bad index writes zeros and is reported (DataError), as embedding's.
cudaError_t launch_embedding_q(cudaStream_t stream, int32_t q_dtype, int32_t out_dtype, int32_t index_dtype,
                               const QuantRowsArgs &args, void *out, const void *table, const void *indices,
                               DataError *error);

// matmul_q, out [..., N] = x [..., K] w^T with w [N, K] quantized: lead walks x's leading axes
// (operand 0 out, operand 1 x; lead.count rows), x_col and out_col are the last axes' strides.
struct MatmulQArgs {
    Strided<2> lead;
    int64_t n, chunks;
    int64_t x_col, out_col;
    int64_t w_row_bytes;  // bytes from one weight row to the next
};
// The matrix-vector kernel (any rows, any layout of f32 x and out).
cudaError_t launch_matmul_q(cudaStream_t stream, int32_t w_dtype, const MatmulQArgs &args, float *out, const float *x,
                            const void *w);

// ---- optim.cu ------------------------------------------------------------------------------------

// adamw_step's constants, each rounded once to f32 from tf_params_adamw_step.
struct AdamWArgs {
    tf_kit::AdamwF32 c;
    int32_t has_state, decays;
};
// sgd_step's.
struct SgdArgs {
    int32_t has_state, decays, nesterov;
    float lr, momentum, weight_decay;
};
// In place over n dense f32 elements (ops.def's rules).
cudaError_t launch_adamw(cudaStream_t stream, int64_t n, const AdamWArgs &args, float *param, const float *grad,
                         float *exp_avg, float *exp_avg_sq);
cudaError_t launch_sgd(cudaStream_t stream, int64_t n, const SgdArgs &args, float *param, const float *grad,
                       float *momentum_buffer);

}  // namespace tf_cuda
