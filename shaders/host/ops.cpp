// Which kernel family serves which op: the generic descriptor checks every kernel relies on, then
// the family's own supports() and run(). Both plugins answer supports() and run ops through here.
#include "kernels.hpp"

#include <type_traits>
#include <utility>

namespace tf_kernels {

namespace {

// The op's arity and params size from ops.def; false for an id the table does not have.
bool op_rule(uint32_t op, uint32_t *n_in, uint32_t *n_out, size_t *params_size) {
    switch (op) {
#define TF_OP(id, sym, name, kind, ni, no, params, dtypes)                                          \
    case id:                                                                                \
        *n_in = ni;                                                                         \
        *n_out = no;                                                                        \
        *params_size = std::is_same_v<params, tf_params_none> ? 0 : sizeof(params);         \
        return true;
#include <tinyfin/ops.def>
#undef TF_OP
    default:
        return false;
    }
}

// A tensor the kernels can address: a dtype they know, sizes and strides >= 0, and an extent one
// storage-buffer binding can hold (with room for aligning the binding's start).
bool tensor_fits(const device_caps &caps, const tf_tensor_desc &t) {
    if (t.struct_size < sizeof(tf_tensor_desc) || t.rank < 0 || t.rank > TF_MAX_RANK) return false;
    const uint64_t size = element_size(t.dtype);
    if (size == 0) return false;
    uint64_t span = 1, count = 1;
    bool empty = false;
    for (int i = 0; i < t.rank; ++i) {
        if (t.shape[i] < 0 || t.strides[i] < 0) return false;
        if (t.shape[i] == 0) empty = true;
    }
    if (empty) return true;
    for (int i = 0; i < t.rank; ++i) {
        uint64_t reach = 0;
        if (__builtin_mul_overflow(static_cast<uint64_t>(t.shape[i] - 1), static_cast<uint64_t>(t.strides[i]), &reach) ||
            __builtin_add_overflow(span, reach, &span) ||
            __builtin_mul_overflow(count, static_cast<uint64_t>(t.shape[i]), &count))
            return false;
    }
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(span, size, &bytes)) return false;
    return bytes + caps.bind_align + 4 <= caps.max_binding && count < (uint64_t{1} << 31);
}

// Every element of the view is a distinct address: outputs must be, or invocations would race.
bool non_overlapping(const tf_tensor_desc &t) {
    int order[TF_MAX_RANK];
    int n = 0;
    for (int i = 0; i < t.rank; ++i) {
        if (t.shape[i] == 0) return true;
        if (t.shape[i] > 1) order[n++] = i;
    }
    // Insertion sort by stride: at most 8 axes.
    for (int j = 1; j < n; ++j)
        for (int k = j; k > 0 && t.strides[order[k]] < t.strides[order[k - 1]]; --k) std::swap(order[k], order[k - 1]);
    int64_t extent = 1;  // elements spanned by the axes visited so far
    for (int j = 0; j < n; ++j) {
        const int i = order[j];
        if (t.strides[i] < extent) return false;
        extent = t.strides[i] * (t.shape[i] - 1) + extent;
    }
    return true;
}

enum class family { none, elementwise, reduce, gemm, nn, optim };

family family_of(uint32_t op) {
    switch (op) {
    case TF_OP_ADD: case TF_OP_SUB: case TF_OP_MUL: case TF_OP_DIV: case TF_OP_POW:
    case TF_OP_MAXIMUM: case TF_OP_MINIMUM: case TF_OP_RELU_BACKWARD:
    case TF_OP_NEG: case TF_OP_EXP: case TF_OP_RELU: case TF_OP_ABS: case TF_OP_LOG: case TF_OP_SQRT:
    case TF_OP_RSQRT: case TF_OP_SIN: case TF_OP_COS: case TF_OP_TANH: case TF_OP_SIGMOID: case TF_OP_GELU:
    case TF_OP_GELU_TANH: case TF_OP_SILU: case TF_OP_SQUARE: case TF_OP_ERF: case TF_OP_CLAMP:
    case TF_OP_EQ: case TF_OP_NE: case TF_OP_LT: case TF_OP_LE: case TF_OP_GT: case TF_OP_GE:
    case TF_OP_WHERE: case TF_OP_CONTIGUOUS: case TF_OP_CAST: case TF_OP_FILL:
        return family::elementwise;
    case TF_OP_SUM: case TF_OP_MEAN: case TF_OP_MAX: case TF_OP_MIN: case TF_OP_VAR:
    case TF_OP_ARGMAX: case TF_OP_ARGMIN:
        return family::reduce;
    case TF_OP_MATMUL: case TF_OP_CONV2D: case TF_OP_CONV2D_GRAD_INPUT: case TF_OP_CONV2D_GRAD_WEIGHT:
        return family::gemm;
    case TF_OP_MAX_POOL2D: case TF_OP_MAX_POOL2D_BACKWARD: case TF_OP_AVG_POOL2D: case TF_OP_AVG_POOL2D_BACKWARD:
    case TF_OP_SOFTMAX: case TF_OP_LOG_SOFTMAX: case TF_OP_LAYER_NORM: case TF_OP_RMS_NORM:
    case TF_OP_CROSS_ENTROPY: case TF_OP_ONE_HOT: case TF_OP_EMBEDDING: case TF_OP_EMBEDDING_BACKWARD:
    case TF_OP_ROPE: case TF_OP_ATTENTION:
        return family::nn;
    case TF_OP_ADAMW_STEP: case TF_OP_SGD_STEP:
        return family::optim;
    default:
        return family::none;
    }
}

}  // namespace

bool supports(const device_caps &caps, const tf_op_desc &op) {
    if (op.struct_size < sizeof(tf_op_desc)) return false;
    uint32_t n_in = 0, n_out = 0;
    size_t params_size = 0;
    if (!op_rule(op.op, &n_in, &n_out, &params_size)) return false;
    // One output, except for the in-place optimizer updates (the 5 tensor slots bound them).
    const family f = family_of(op.op);
    if (op.n_inputs != n_in || op.n_outputs != n_out || (n_out != 1 && f != family::optim) || n_in + n_out > 5)
        return false;
    if ((n_in > 0 && !op.inputs) || !op.outputs) return false;
    if (params_size > 0 && (!op.params || *static_cast<const uint32_t *>(op.params) < params_size)) return false;
    for (uint32_t i = 0; i < n_in; ++i)
        if (!tensor_fits(caps, op.inputs[i])) return false;
    for (uint32_t i = 0; i < n_out; ++i)
        if (!tensor_fits(caps, op.outputs[i]) || !non_overlapping(op.outputs[i])) return false;
    switch (f) {
    case family::elementwise: return elementwise_supports(caps, op);
    case family::reduce: return reduce_supports(caps, op);
    case family::gemm: return gemm_supports(caps, op);
    case family::nn: return nn_supports(caps, op);
    case family::optim: return optim_supports(op);
    case family::none: return false;
    }
    return false;
}

void run(kernel_device &dev, const tf_op_desc &op) {
    switch (family_of(op.op)) {
    case family::elementwise: elementwise_run(dev, op); return;
    case family::reduce: reduce_run(dev, op); return;
    case family::gemm: gemm_run(dev, op); return;
    case family::nn: nn_run(dev, op); return;
    case family::optim: optim_run(dev, op); return;
    case family::none: break;
    }
    raise(TF_STATUS_UNSUPPORTED, "%s: no kernel runs this op", op_name(op.op));
}

}  // namespace tf_kernels
