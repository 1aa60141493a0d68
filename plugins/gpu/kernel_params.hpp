// The kernels' parameter structs (binding 0 of shaders/README.md): std430 mirrors of each
// shader's <kernel>_params, 32-bit members only, in the shaders' order, with the op codes and
// modes their selectors take. A change here is a change in shaders/ and shaders/opencl/ too.
#pragma once

#include <cstdint>

namespace tf_gpu {

// ---- Parameter structs: 32-bit members only, in the shaders' order -------------------------------

// shaders/elementwise.comp
// Specialization constants: OP (EwOp), DT_OUT, DT_IN, FLAT, PACKED.
struct EwParams {
    uint32_t count, rank, pad0_, pad1_;
    uint32_t shape[8];
    uint32_t div_m[8], div_s[8];  // shape[d] as a divisor (magic_of)
    uint32_t base[4];
    uint32_t strides[32];
    uint32_t arg[4];
};
static_assert(sizeof(EwParams) == 68 * 4);

enum EwOp : uint32_t {
    EW_NEG = 0,
    EW_EXP,
    EW_RELU,
    EW_ABS,
    EW_LOG,
    EW_SQRT,
    EW_RSQRT,
    EW_SIN,
    EW_COS,
    EW_TANH,
    EW_SIGMOID,
    EW_GELU,
    EW_GELU_TANH,
    EW_SILU,
    EW_SQUARE,
    EW_ERF,
    EW_CLAMP,
    EW_ASIN,
    EW_ACOS,
    EW_ATAN,
    EW_ASINH,
    EW_ACOSH,
    EW_ATANH,
    EW_ADD = 32,
    EW_SUB,
    EW_MUL,
    EW_DIV,
    EW_POW,
    EW_MAXIMUM,
    EW_MINIMUM,
    EW_RELU_BACKWARD,
    EW_GELU_BACKWARD,
    EW_EQ = 64,
    EW_NE,
    EW_LT,
    EW_LE,
    EW_GT,
    EW_GE,
    EW_WHERE = 80,
    EW_COPY = 96,
    EW_FILL = 112,
};

// shaders/reduce.comp. Specialization constants: OP (reduce_op), PER_GROUP, R_FLAT.
struct ReduceParams {
    uint32_t n_out, n_red, k_rank, r_rank;
    uint32_t in_base, out_base;
    float correction;
    uint32_t pad_;
    uint32_t k_shape[8], k_in[8], k_out[8];
    uint32_t r_shape[8], r_in[8];
    uint32_t r_div_m[8], r_div_s[8];
};
static_assert(sizeof(ReduceParams) == 64 * 4);

enum ReduceOp : uint32_t { RD_SUM = 0, RD_MEAN, RD_MAX, RD_MIN, RD_VAR, RD_ARGMAX, RD_ARGMIN };

// shaders/scan.comp. Specialization constant: DT (the dtype of x and y).
struct ScanParams {
    uint32_t lines, n, rank, flags;
    uint32_t x_base, y_base, x_step, y_step;
    uint32_t shape[8], x_strides[8], y_strides[8];
};
static_assert(sizeof(ScanParams) == 32 * 4);

enum ScanFlag : uint32_t { SCAN_EXCLUSIVE = 1, SCAN_REVERSE = 2 };

// shaders/gemm.comp. Specialization constants: MODE (0 matmul, 1 conv2d, 2 grad_input,
// 3 grad_weight), ROWS (8, or 1 for M <= 8), SPLIT (K split over z into a scratch tensor),
// COLS (8, or 1 for N <= 8).
struct GemmParams {
    uint32_t og, M, N, K;
    uint32_t batch_rank, a_base, b_base, c_base;
    uint32_t batch_shape[6], a_batch[6], b_batch[6], c_batch[6];
    uint32_t a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;
    uint32_t n, c, h, w;
    uint32_t o, kh, kw, groups;
    uint32_t oh, ow, splits, k_chunk;
    int32_t stride[2], pad[2];  // h, w: gemm.comp's stride_h, stride_w, pad_h, pad_w
    int32_t dilation[2];  // dil_h, dil_w
    uint32_t z_count, pad3_;
    uint32_t x_base, w_base, y_base, pad4_;
    uint32_t x_st[4], w_st[4], y_st[4];
    uint32_t cg, pad5_, pad6_, pad7_;
    // kh * kw, kw, oh * ow, ow, h * w, w, stride_h, stride_w as tf_div divisors.
    uint32_t div_m[8], div_s[8];
};
static_assert(sizeof(GemmParams) == 94 * 4);

// shaders/pool2d.comp. Specialization constant: MODE (0 max, 1 max backward, 2 avg,
// 3 avg backward).
struct PoolParams {
    uint32_t pad0_, count, n, c;
    uint32_t h, w, oh, ow;
    int32_t kernel[2], stride[2];  // h, w: pool2d.comp's kh, kw, sh, sw
    int32_t pad[2];  // ph, pw
    uint32_t include_pad, pad_;
    uint32_t x_base, y_base, dy_base, out_base;
    uint32_t x_st[4], y_st[4], out_st[4];
    uint32_t div_m[4], div_s[4];  // the walked tensor's columns, rows, channels
};
static_assert(sizeof(PoolParams) == 40 * 4);

// shaders/rows.comp. Specialization constants: MODE (0 softmax, 1 log_softmax, 2 layer_norm,
// 3 rms_norm, 4 cross_entropy), REDUCED (cross_entropy mean or sum), INNER_FLAT.
struct RowsParams {
    uint32_t pad0_, rows, len, outer_rank;
    uint32_t inner_rank, reduction;
    float eps;
    uint32_t label_dtype;
    uint32_t x_base, y_base, w_base, b_base;
    uint32_t label_base, label_stride;
    uint32_t ignore_lo, ignore_hi;
    uint32_t outer_shape[8], x_outer[8], y_outer[8];
    uint32_t inner_shape[8], x_inner[8], y_inner[8], w_inner[8], b_inner[8];
};
static_assert(sizeof(RowsParams) == 80 * 4);

// shaders/index.comp. Specialization constants: MODE (0 one_hot, 1 embedding,
// 2 embedding_backward, 3 rope), OUT_DT, IDX_DT.
struct IndexParams {
    uint32_t pad0_, count, rank, pad1_;
    uint32_t pad2_, limit, interleaved, inverse;
    uint32_t pad5_;
    uint32_t offset_lo, offset_hi, pad3_;
    uint32_t out_base, in_base, idx_base, pad4_;
    uint32_t shape[8], out_st[8], in_st[8], idx_st[8];
    uint32_t div_m[8], div_s[8];
};
static_assert(sizeof(IndexParams) == 64 * 4);

// shaders/attention.comp
struct AttentionParams {
    uint32_t rows, tq, tk, d;
    uint32_t dv, causal;
    float scale;
    uint32_t batch_rank;
    uint32_t base[5];
    uint32_t pad_[3];
    uint32_t batch_shape[6];
    uint32_t batch_st[30];
    uint32_t row_st[5];
    uint32_t col_st[5];
    // 0: the mask is absent (slot 4 is bound to q and never read).
    uint32_t has_mask;
    uint32_t pad1_;
};
static_assert(sizeof(AttentionParams) == 64 * 4);

// shaders/optim.comp. Specialization constants: MODE (0 adamw_step, 1 sgd_step), HAS_STATE,
// DECAYS, NESTEROV.
struct OptimParams {
    uint32_t count;
    uint32_t base0, base1, base2, base3;
    uint32_t pad0_, pad1_, pad2_;
    float k[8];
};
static_assert(sizeof(OptimParams) == 16 * 4);

// shaders/quant.comp. Specialization constants: MODE (0 dequantize, 1 embedding_q, 2 matmul_q),
// QT (the quantized dtype), DT, OUT_DT, IDX_DT, ROWS (matmul_q's rows of x per workgroup).
struct QuantParams {
    uint32_t count, chunks, div_m, div_s;
    uint32_t q_base, q_row, out_base, out_row;
    uint32_t x_base, x_row, x_col;
    uint32_t m, n, limit, idx_base, idx_st;
};
static_assert(sizeof(QuantParams) == 16 * 4);

// Keys one attention row may have (shared memory of attention.comp).
constexpr int64_t attention_max_keys = 2048;

}  // namespace tf_gpu
