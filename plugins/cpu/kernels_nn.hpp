// The cpu plugin's kernels for the ops with their own shape rule (kind OWN in ops.def):
// convolution, pooling, softmax, norms and layer_norm's backward, rope, attention and its
// backward, embedding,
// cross-entropy, one-hot.
// Their descriptor rules are the kit's (tinyfin/plugin_kit/rules.hpp); plugin.cpp's table has a
// row for each kernel below.
//
// Float ops accept f32, f16 and bf16 (all operands of one dtype) and compute in f32: inputs
// that are not dense f32 are converted into dense f32 scratch first, and results are rounded
// once to the output dtype, written through the output's strides. Every result is a fixed
// sequence of operations, the same on every run.
#pragma once

#include "kernels.hpp"

#include <optional>
#include <vector>

namespace tf_cpu {

// ---- f32 staging (kernels_own.cpp) -------------------------------------------------------------

// One of the scratch arena's staging slots (runtime.hpp) of this thread, taken by the first
// floats() call and held until destruction, or none (all four in use: floats() gives nullptr and
// the caller allocates). Staged copies used to be fresh vectors: for the
// f16/bf16 operands of a convolution or pooling, zero-filled and page-faulted on every call
// (docs/performance.md); the arena keeps its pages between calls.
class StagingSlot {
public:
    StagingSlot() = default;
    ~StagingSlot();
    StagingSlot(const StagingSlot &) = delete;
    StagingSlot &operator=(const StagingSlot &) = delete;
    // `floats` floats of the slot, valid until the next call or the slot's end; nullptr without one.
    float *floats(size_t floats);

private:
    int slot_ = -1;
};

// A float tensor's elements as dense row-major f32: the tensor's own memory when it is already
// laid out that way, else a converted copy.
class F32Input {
public:
    explicit F32Input(const tf_tensor_desc &d);
    F32Input(const F32Input &) = delete;
    F32Input &operator=(const F32Input &) = delete;
    const float *data() const { return data_; }

private:
    StagingSlot slot_;
    std::vector<float> copy_;  // when no staging slot was free
    const float *data_;
};

// A float output written as dense row-major f32: straight into the tensor when it is laid out
// that way, else into scratch that finish() rounds and writes through its strides. Either way
// data() starts with arbitrary contents: kernels write every element (zeroing first where they
// accumulate), so the staged copy needs no zero fill.
class F32Output {
public:
    explicit F32Output(const tf_tensor_desc &d);
    F32Output(const F32Output &) = delete;
    F32Output &operator=(const F32Output &) = delete;
    float *data() { return data_; }
    void finish();

private:
    const tf_tensor_desc &desc_;
    StagingSlot slot_;
    std::vector<float> scratch_;  // when no staging slot was free
    float *data_;
    bool staged_ = false;
};

// The frame of a window op (convolution, pooling) with one output: nothing to do when it is empty,
// else kernel(geometry(op), the first input, the second or null, the output) on dense f32 copies
// or views, and the output written back.
template <class Geometry>
tf_status run_dense_f32(const tf_op_desc &op, Geometry (*geometry)(const tf_op_desc &),
                        void (*kernel)(const Geometry &, const float *, const float *, float *)) {
    if (numel(op.outputs[0]) == 0) return TF_STATUS_OK;
    const F32Input a(op.inputs[0]);
    std::optional<F32Input> b;
    if (op.n_inputs > 1) b.emplace(op.inputs[1]);
    F32Output out(op.outputs[0]);
    kernel(geometry(op), a.data(), b ? b->data() : nullptr, out.data());
    out.finish();
    return TF_STATUS_OK;
}

// An i32 or i64 tensor's elements in row-major order.
std::vector<int64_t> load_indices(const tf_tensor_desc &d);

// Byte offsets, from element [0, ..., 0], of the elements of d's first `axes` axes in row-major
// order (the starts of the rows that the remaining axes form).
std::vector<int64_t> leading_offsets(const tf_tensor_desc &d, int axes);

// The outputs o in [0, count) of a window tap whose input index o * stride + offset lies in
// [0, size): [*lo, *hi). For convolution and pooling rows.
inline void tap_span(int64_t offset, int64_t stride, int64_t size, int64_t count, int64_t *lo, int64_t *hi) {
    const int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    const int64_t end = size - offset <= 0 ? 0 : (size - offset - 1) / stride + 1;
    *lo = std::min(first, count);
    *hi = std::clamp(end, *lo, count);
}

// ---- Kernels (one file per family) ---------------------------------------------------------------

// kernels_conv.cpp
tf_status run_conv2d(const tf_op_desc &op, tf_error *err);
// conv2d_act's bias, residual and activation, applied to each finished sum (null: none). The
// residual is dense in y's shape: the element of y at y + i has its residual at residual + i.
struct ConvEpilogue {
    const float *bias = nullptr;
    const float *residual = nullptr;
    const float *y = nullptr;
    int32_t activation = TF_CONV_ACT_NONE;
    float min = 0, max = 0;
    bool active() const { return bias != nullptr || residual != nullptr || activation != TF_CONV_ACT_NONE; }
    // The clip activation of one sum (NaN passes, as minimum_of/maximum_of define).
    float clip(float v) const { return tf_kit::minimum_of(tf_kit::maximum_of(v, min), max); }
};
// dst[i] = the epilogue of src[i] + b (b: output channel's bias, read when e has one) for n
// elements of y from dst, in the order bias, residual, activation; src may be dst.
void finish_row(float *dst, const float *src, int64_t n, float b, const ConvEpilogue &e);
tf_status run_conv2d_act(const tf_op_desc &op, tf_error *err);
tf_status run_conv2d_grad_input(const tf_op_desc &op, tf_error *err);
tf_status run_conv2d_grad_weight(const tf_op_desc &op, tf_error *err);
// kernels_pool.cpp
tf_status run_max_pool2d(const tf_op_desc &op, tf_error *err);
tf_status run_max_pool2d_backward(const tf_op_desc &op, tf_error *err);
tf_status run_avg_pool2d(const tf_op_desc &op, tf_error *err);
tf_status run_avg_pool2d_backward(const tf_op_desc &op, tf_error *err);
// kernels_softmax.cpp: softmax, log_softmax, cross_entropy
tf_status run_softmax(const tf_op_desc &op, tf_error *err);
tf_status run_cross_entropy(const tf_op_desc &op, tf_error *err);
// kernels_norm.cpp: layer_norm and its backward, rms_norm, rope
tf_status run_layer_norm(const tf_op_desc &op, tf_error *err);
tf_status run_layer_norm_backward(const tf_op_desc &op, tf_error *err);
tf_status run_rms_norm(const tf_op_desc &op, tf_error *err);
tf_status run_rope(const tf_op_desc &op, tf_error *err);
// kernels_attention.cpp
tf_status run_attention(const tf_op_desc &op, tf_error *err);
// The matrix [rows, cols] of d's last two axes, starting `offset` bytes past element [0, ...]:
// loaded as dense f32 into dst, or stored from dense f32 src (rounded to d's dtype).
void load_matrix(const tf_tensor_desc &d, int64_t offset, int64_t rows, int64_t cols, float *dst);
void store_matrix(const tf_tensor_desc &d, int64_t offset, int64_t rows, int64_t cols, const float *src);
// attention's probabilities in place, as attention and attention_backward both compute them: on
// entry scores [tq, tk] holds q k^T, on return softmax(scores * scale + mask [+ causal]) by rows,
// 0 for hidden keys, NaN across a row that sees no key (blind[i] = 1 then). mask: [tq, tk] with
// unit column stride, row i at mask + i * mask_stride (0: one row for every query), or null for
// none.
void attention_probabilities(float *scores, const float *mask, int64_t mask_stride, int64_t tq, int64_t tk, bool causal,
                             float scale, char *blind);
// The same in AVX2 + FMA intrinsics (attention_probabilities_avx2.cpp; x86-64 only), which
// attention_probabilities calls when isa_level() is AVX2.
void attention_probabilities_avx2(float *scores, const float *mask, int64_t mask_stride, int64_t tq, int64_t tk,
                                  bool causal, float scale, char *blind);
// attention's and attention_backward's common operands: q [..., Tq, D], k [..., Tk, D], v [..., Tk,
// Dv], the optional mask [..., Tq, Tk], and each batch element's offset into them.
struct AttentionOperands {
    int64_t tq, d, tk, dv;
    float scale;
    bool causal, masked;
    std::vector<int64_t> at_q, at_k, at_v, at_m;
};
AttentionOperands attention_operands(const tf_op_desc &op);
// kernels_attention_backward.cpp
tf_status run_attention_backward(const tf_op_desc &op, tf_error *err);
// kernels_lookup.cpp: embedding, embedding_backward, one_hot
tf_status run_embedding(const tf_op_desc &op, tf_error *err);
tf_status run_embedding_backward(const tf_op_desc &op, tf_error *err);
tf_status run_one_hot(const tf_op_desc &op, tf_error *err);
// kernels_quant.cpp: quantize, dequantize, matmul_q, embedding_q (block-quantized operands)
tf_status run_quantize(const tf_op_desc &op, tf_error *err);
tf_status run_dequantize(const tf_op_desc &op, tf_error *err);
tf_status run_matmul_q(const tf_op_desc &op, tf_error *err);
tf_status run_embedding_q(const tf_op_desc &op, tf_error *err);
// kernels_cumsum.cpp
tf_status run_cumsum(const tf_op_desc &op, tf_error *err);
// kernels_optim.cpp: adamw_step, sgd_step (in-out outputs) on dense f32 operands
bool dense_f32_operands(const tf_op_desc &op);
tf_status run_optim(const tf_op_desc &op, tf_error *err);

}  // namespace tf_cpu
