// The host side of the kernels in shaders/: parameter structs (std430 mirrors of the shaders'
// <kernel>_params), descriptor helpers, and per family of ops a supports() test that reads only
// the descriptor and a run() that records the dispatches (device mutex held).
#ifndef TINYFIN_VULKAN_KERNELS_HPP
#define TINYFIN_VULKAN_KERNELS_HPP

#include "device.hpp"

#include <cstddef>
#include <cstdint>

namespace tf_vk {

// ---- Parameter structs: 32-bit members only, in the shaders' order -------------------------------

// shaders/elementwise.comp
// Specialization constants: OP (ew_op), DT_OUT, DT_IN, FLAT, PACKED.
struct ew_params {
    uint32_t count, rank, pad0_, pad1_;
    uint32_t shape[8];
    uint32_t div_m[8], div_s[8];  // shape[d] as a divisor (magic_of)
    uint32_t base[4];
    uint32_t strides[32];
    uint32_t arg[4];
};
static_assert(sizeof(ew_params) == 68 * 4);

enum ew_op : uint32_t {
    EW_NEG = 0, EW_EXP, EW_RELU, EW_ABS, EW_LOG, EW_SQRT, EW_RSQRT, EW_SIN, EW_COS, EW_TANH, EW_SIGMOID,
    EW_GELU, EW_GELU_TANH, EW_SILU, EW_SQUARE, EW_ERF, EW_CLAMP,
    EW_ADD = 32, EW_SUB, EW_MUL, EW_DIV, EW_POW, EW_MAXIMUM, EW_MINIMUM,
    EW_EQ = 64, EW_NE, EW_LT, EW_LE, EW_GT, EW_GE,
    EW_WHERE = 80,
    EW_COPY = 96,
    EW_FILL = 112,
};

// shaders/reduce.comp. Specialization constants: OP (reduce_op), PER_GROUP, R_FLAT.
struct reduce_params {
    uint32_t n_out, n_red, k_rank, r_rank;
    uint32_t in_base, out_base;
    float correction;
    uint32_t pad_;
    uint32_t k_shape[8], k_in[8], k_out[8];
    uint32_t r_shape[8], r_in[8];
    uint32_t r_div_m[8], r_div_s[8];
};
static_assert(sizeof(reduce_params) == 64 * 4);

enum reduce_op : uint32_t { RD_SUM = 0, RD_MEAN, RD_MAX, RD_MIN, RD_VAR, RD_ARGMAX, RD_ARGMIN };

// shaders/gemm.comp. Specialization constants: MODE (0 matmul, 1 conv2d, 2 grad_input,
// 3 grad_weight), ROWS (8, or 1 for M <= 8), SPLIT (K split over z into a scratch tensor),
// COLS (8, or 1 for N <= 8).
struct gemm_params {
    uint32_t og, M, N, K;
    uint32_t batch_rank, a_base, b_base, c_base;
    uint32_t batch_shape[6], a_batch[6], b_batch[6], c_batch[6];
    uint32_t a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;
    uint32_t n, c, h, w;
    uint32_t o, kh, kw, groups;
    uint32_t oh, ow, splits, k_chunk;
    int32_t stride_h, stride_w, pad_h, pad_w;
    int32_t dil_h, dil_w;
    uint32_t z_count, pad3_;
    uint32_t x_base, w_base, y_base, pad4_;
    uint32_t x_st[4], w_st[4], y_st[4];
    uint32_t cg, pad5_, pad6_, pad7_;
    // kh * kw, kw, oh * ow, ow, h * w, w, stride_h, stride_w as tf_div divisors.
    uint32_t div_m[8], div_s[8];
};
static_assert(sizeof(gemm_params) == 94 * 4);

// shaders/pool2d.comp. Specialization constant: MODE (0 max, 1 max backward, 2 avg,
// 3 avg backward).
struct pool_params {
    uint32_t pad0_, count, n, c;
    uint32_t h, w, oh, ow;
    int32_t kh, kw, sh, sw;
    int32_t ph, pw;
    uint32_t include_pad, pad_;
    uint32_t x_base, y_base, dy_base, out_base;
    uint32_t x_st[4], y_st[4], out_st[4];
    uint32_t div_m[4], div_s[4];  // the walked tensor's columns, rows, channels
};
static_assert(sizeof(pool_params) == 40 * 4);

// shaders/rows.comp. Specialization constants: MODE (0 softmax, 1 log_softmax, 2 layer_norm,
// 3 rms_norm, 4 cross_entropy), REDUCED (cross_entropy mean or sum), INNER_FLAT.
struct rows_params {
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
static_assert(sizeof(rows_params) == 80 * 4);

// shaders/index.comp. Specialization constants: MODE (0 one_hot, 1 embedding,
// 2 embedding_backward, 3 rope), OUT_DT, IDX_DT.
struct index_params {
    uint32_t pad0_, count, rank, pad1_;
    uint32_t pad2_, limit, interleaved, inverse;
    float log2_theta;
    uint32_t offset_lo, offset_hi, pad3_;
    uint32_t out_base, in_base, idx_base, pad4_;
    uint32_t shape[8], out_st[8], in_st[8], idx_st[8];
    uint32_t div_m[8], div_s[8];
};
static_assert(sizeof(index_params) == 64 * 4);

// shaders/attention.comp
struct attention_params {
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
    uint32_t pad1_[2];
};
static_assert(sizeof(attention_params) == 64 * 4);

// Keys one attention row may have (shared memory of attention.comp).
constexpr int64_t attention_max_keys = 2048;

// ---- Descriptor helpers ----------------------------------------------------------------------------

int64_t numel(const tf_tensor_desc &t);
// Bytes per element of the dtypes the kernels handle (f32, i32, i64, bool); 0 for the others.
uint64_t element_size(int32_t dtype);
bool same_shape(const tf_tensor_desc &a, const tf_tensor_desc &b);

// Axes of one shape walked by several tensors (each with its own strides), with size-1 axes
// dropped and neighbours merged where every tensor's strides allow it.
struct merged_axes {
    int rank = 0;
    int64_t shape[TF_MAX_RANK] = {};
    int64_t strides[5][TF_MAX_RANK] = {};
};
// At most 5 tensors.
merged_axes merge_axes(int rank, const int64_t *shape, const int64_t *const *strides, int tensors);

// d as tf_div's multiplier and shifts (shaders/common.glsl): n / d == tf_div(n, m, s) for every
// 32-bit n, d >= 1.
struct magic {
    uint32_t m, s;
};
magic magic_of(uint32_t d);

// Workgroups for a grid-stride loop over items, per_group items each, at most the device's
// limit and 65535.
uint32_t groups_for(const device_caps &caps, uint64_t items, uint32_t per_group);

// ---- Op families -------------------------------------------------------------------------------------
// supports(): the generic checks (arity, params, dtypes known, ranks, bindable extents,
// non-overlapping outputs) already passed in plugin.cpp; these add the family's own rules.

bool elementwise_supports(const device_caps &caps, const tf_op_desc &op);
void elementwise_run(device &dev, const tf_op_desc &op);
// Records a fill of a whole tensor with raw bits (used by ops that start from zeros).
void elementwise_fill(device &dev, const tf_tensor_desc &out, uint32_t lo, uint32_t hi, const char *op);

bool reduce_supports(const device_caps &caps, const tf_op_desc &op);
void reduce_run(device &dev, const tf_op_desc &op);

bool gemm_supports(const device_caps &caps, const tf_op_desc &op);
void gemm_run(device &dev, const tf_op_desc &op);

bool nn_supports(const device_caps &caps, const tf_op_desc &op);
void nn_run(device &dev, const tf_op_desc &op);

// "add", "conv2d", ... from ops.def.
const char *op_name(uint32_t op) noexcept;

}  // namespace tf_vk

#endif
