// The host side of the kernels in shaders/, shared by the vulkan and opengl plugins: parameter
// structs (std430 mirrors of the shaders' <kernel>_params), which kernel serves which op with
// which selectors, and per family of ops a supports() test that reads only the descriptor and a
// run() that records the dispatches. A plugin provides the device (KernelDevice: binding tensors
// and dispatching a kernel) and links plugins/gpu's static library; the enum of kernels is the
// generated "shader_ids.h" (plugins/gpu/meson.build).
#ifndef TINYFIN_GPU_KERNELS_HPP
#define TINYFIN_GPU_KERNELS_HPP

#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit.hpp>

#include "shader_ids.h"

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tf_kernels {

// ---- Failures --------------------------------------------------------------------------------------

// The plugin kit's failure (a tf_status and a lower-case message), thrown inside a plugin and
// turned into both at the ABI boundary (tf_kit::guarded); raise() throws one with a printf-style
// message. op_name, numel and same_shape are the kit's as well.
using tf_kit::Failure;
using tf_kit::numel;
using tf_kit::op_name;
using tf_kit::raise;
using tf_kit::same_shape;

// ---- What the ops need from a device ----------------------------------------------------------------

using Shader = tf_shaders::Shader;
constexpr size_t shader_count = static_cast<size_t>(Shader::count_);

// Tensor slots of every kernel (binding 2 of shaders/README.md).
constexpr uint32_t tensor_slots = 5;

// What supports() decides with: fixed once the device exists, read without any lock.
struct DeviceCaps {
    // Bytes one storage-buffer binding may span.
    uint64_t max_binding;
    // Alignment of a binding's offset, at least 16.
    uint64_t bind_align;
    // Workgroups a dispatch may have per dimension.
    uint32_t max_groups[3];
};

// A kernel with the values of its selectors (TF_SPEC ids 0 .. count - 1): one pipeline or
// program, made on first use.
struct PipelineKey {
    Shader kernel = Shader::count_;
    uint32_t count = 0;
    std::array<uint32_t, 8> spec{};

    auto operator<=>(const PipelineKey &) const = default;
};

template <class... V>
PipelineKey key_of(Shader kernel, V... values) {
    static_assert(sizeof...(V) <= 8);
    return PipelineKey{kernel, static_cast<uint32_t>(sizeof...(V)), {static_cast<uint32_t>(values)...}};
}

// A tensor as a kernel sees it: a bound byte range of its buffer and the element index, within
// that range, of the tensor's element [0, ..., 0]. buffer == nullptr: no elements, left unbound.
struct TensorBinding {
    tf_buffer *buffer = nullptr;
    uint64_t offset = 0;  // bytes from the start of the buffer's backing storage
    uint64_t range = 0;
    uint32_t base = 0;
};

// One kernel launch as the ops describe it to a device.
struct DispatchArgs {
    // The kernel and its selectors.
    PipelineKey kernel;
    // The kernel's parameter struct (binding 0 of shaders/README.md) and its size in bytes.
    const void *params = nullptr;
    size_t params_size = 0;
    // The tensors, slot i = tensors[i], count of them.
    const TensorBinding *tensors = nullptr;
    size_t count = 0;
    // Workgroups in x, y and z.
    uint32_t groups[3] = {1, 1, 1};
    // An op whose kernel may set status bits (a bad index), named when one is read back; or NULL.
    const char *reporting_op = nullptr;

    // No workgroups: nothing to record.
    bool empty() const noexcept { return groups[0] == 0 || groups[1] == 0 || groups[2] == 0; }
};

// A device the ops record on; the plugin holds the device's lock (or is on its thread) while
// any member is called.
class KernelDevice {
public:
    virtual const DeviceCaps &caps() const noexcept = 0;
    // The binding of a tensor whose buffer belongs to this device. Throws INVALID_ARGUMENT,
    // naming op and role ("input 1"), when the view does not lie inside its buffer.
    virtual TensorBinding bind(const tf_tensor_desc &tensor, const char *op, const char *role, uint32_t index) = 0;
    // Records one dispatch (DispatchArgs); later work sees its writes.
    virtual void dispatch(const DispatchArgs &args) = 0;
    // A scratch buffer; free() may come before the work using it has run.
    virtual tf_buffer *allocate(uint64_t size) = 0;
    // Copies size bytes from the host into buffer at offset; work recorded later sees them.
    virtual void write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size) = 0;
    virtual void free(tf_buffer *buffer) noexcept = 0;

protected:
    ~KernelDevice() = default;
};

// The binding of a view of dtype size elements at its byte offset inside a buffer whose storage
// starts at storage_offset and holds buffer_size bytes (shared by the plugins' bind()).
TensorBinding bind_view(const DeviceCaps &caps, const tf_tensor_desc &t, tf_buffer *buffer, uint64_t storage_offset,
                        uint64_t buffer_size, const char *op, const char *role, uint32_t index);

// bind() of a device whose buffers (tf_buffer: owner, size, and memory.offset, the storage's
// place in a pool block) come from pools: refuses a buffer of another device (owner), naming
// label, then bind_view.
template <class Buffer = tf_buffer>
TensorBinding bind_pooled(const DeviceCaps &caps, const void *owner, const char *label, const tf_tensor_desc &t,
                          const char *op, const char *role, uint32_t index) {
    Buffer *buffer = t.buffer;
    if (!buffer || buffer->owner != owner)
        raise(TF_STATUS_INVALID_ARGUMENT, "%s: %s %u is not a buffer of %s", op, role, index, label);
    return bind_view(caps, t, buffer, buffer->memory.offset, buffer->size, op, role, index);
}

// A buffer for an op's intermediate result (a split-K product, f32 sums, rope's table), freed
// when it goes out of scope, also on failure: free() may come before the work using it has run.
class ScratchBuffer {
public:
    ScratchBuffer(KernelDevice &dev, uint64_t size) : dev_(dev), buffer_(dev.allocate(size)) {}
    ScratchBuffer(const ScratchBuffer &) = delete;
    ScratchBuffer &operator=(const ScratchBuffer &) = delete;
    ~ScratchBuffer() { dev_.free(buffer_); }
    tf_buffer *get() const noexcept { return buffer_; }

private:
    KernelDevice &dev_;
    tf_buffer *const buffer_;
};

// The descriptor of op (a step inside another op: a sum, a cast, a fill) with one input, in (none
// when in is nullptr), and one output.
inline tf_op_desc step_desc(uint32_t op, const tf_tensor_desc *in, const tf_tensor_desc &out,
                            const void *params = nullptr) {
    tf_op_desc d{};
    d.struct_size = sizeof d;
    d.op = op;
    d.n_inputs = in ? 1 : 0;
    d.n_outputs = 1;
    d.inputs = in ? in : &out;
    d.outputs = &out;
    d.params = params;
    return d;
}

inline uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }
inline uint64_t align_down(uint64_t value, uint64_t alignment) { return value / alignment * alignment; }

// ---- The ops ----------------------------------------------------------------------------------------

// Whether run() can do op as described on a device with these caps: arity and parameters from
// ops.def, dtypes, ranks, bindable extents, non-overlapping outputs, then the family's rules.
bool supports(const DeviceCaps &caps, const tf_op_desc &op);
// Records op (which supports() accepted) on dev.
void run(KernelDevice &dev, const tf_op_desc &op);
// The kernel an op's own dispatches use (besides elementwise fills and casts, and reduce's sum
// of a split GEMM); Shader::count_ for ops no kernel serves. A plugin whose API lacks a port of
// some kernel refuses that kernel's ops by it.
Shader kernel_of(uint32_t op);

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

// ---- Descriptor helpers ----------------------------------------------------------------------------

// Bytes per element of the dtypes the kernels handle (all six); 0 for the others.
uint64_t element_size(int32_t dtype);
// f32, f16 or bf16: the kernels load f16 and bf16 as f32, compute in f32 and round once on store.
inline bool is_float(int32_t dtype) { return dtype == TF_DTYPE_F32 || dtype == TF_DTYPE_F16 || dtype == TF_DTYPE_BF16; }

// Axes of one shape walked by several tensors (each with its own strides), with size-1 axes
// dropped and neighbours merged where every tensor's strides allow it.
struct MergedAxes {
    int rank = 0;
    int64_t shape[TF_MAX_RANK] = {};
    int64_t strides[5][TF_MAX_RANK] = {};
};
// At most 5 tensors.
MergedAxes merge_axes(int rank, const int64_t *shape, const int64_t *const *strides, int tensors);

// d as tf_div's multiplier and shifts (shaders/common.glsl): n / d == tf_div(n, m, s) for every
// 32-bit n, d >= 1.
struct Magic {
    uint32_t m, s;
};
Magic magic_of(uint32_t d);

// Workgroups for a grid-stride loop over items, per_group items each, at most the device's
// limit and 65535.
uint32_t groups_for(const DeviceCaps &caps, uint64_t items, uint32_t per_group);

// ---- Op families -------------------------------------------------------------------------------------
// supports(): the generic checks (arity, params, dtypes known, ranks, bindable extents,
// non-overlapping outputs) already passed in plugin.cpp; these add the family's own rules.

bool elementwise_supports(const DeviceCaps &caps, const tf_op_desc &op);
void elementwise_run(KernelDevice &dev, const tf_op_desc &op);
// Records a fill of a whole tensor with raw bits (used by ops that start from zeros).
void elementwise_fill(KernelDevice &dev, const tf_tensor_desc &out, uint32_t lo, uint32_t hi, const char *op);

bool reduce_supports(const DeviceCaps &caps, const tf_op_desc &op);
void reduce_run(KernelDevice &dev, const tf_op_desc &op);

bool gemm_supports(const DeviceCaps &caps, const tf_op_desc &op);
void gemm_run(KernelDevice &dev, const tf_op_desc &op);

bool nn_supports(const DeviceCaps &caps, const tf_op_desc &op);
void nn_run(KernelDevice &dev, const tf_op_desc &op);

// dequantize, matmul_q, embedding_q (ops_quant.cpp): a block-quantized operand, bound as bytes.
// quantize is left to the cpu plugin.
bool quant_supports(const DeviceCaps &caps, const tf_op_desc &op);
void quant_run(KernelDevice &dev, const tf_op_desc &op);

// adamw_step, sgd_step (ops_optim.cpp): several outputs, each in-out.
bool optim_supports(const tf_op_desc &op);
void optim_run(KernelDevice &dev, const tf_op_desc &op);

}  // namespace tf_kernels

#endif
