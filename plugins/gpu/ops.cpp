// Which kernel family serves which op: the generic descriptor checks every kernel relies on, then
// the family's own supports() and run(). Both plugins answer supports() and run ops through here.
#include "kernels.hpp"

namespace tf_kernels {

namespace {

// A tensor the kernels can address: a dtype they know, sizes and strides >= 0, and an extent one
// storage-buffer binding can hold (with room for aligning the binding's start).
bool tensor_fits(const DeviceCaps &caps, const tf_tensor_desc &t) {
    if (tf_kit::check_tensor("", "", 0, t, false, nullptr) != TF_STATUS_OK) return false;
    // A block-quantized tensor is bound as bytes (ops_quant.cpp); extent_of counts its bytes.
    const uint64_t size = tf_kit::is_quantized(t.dtype) ? 1 : element_size(t.dtype);
    if (size == 0) return false;
    const tf_kit::Extent e = tf_kit::extent_of(t);
    if (e.empty) return true;
    // The bound range starts at the tensor's first element, aligned down to bind_align.
    const uint64_t bytes = e.last_byte - t.offset + size;
    return bytes + caps.bind_align + 4 <= caps.max_binding && e.count < (int64_t{1} << 31);
}

enum class Family { none, elementwise, reduce, gemm, nn, optim, quant };

// The host code of a family (ops_*.cpp) serves the ops of one or more kernels.
Family family_of(uint32_t op) {
    switch (kernel_of(op)) {
    case Shader::elementwise: return Family::elementwise;
    case Shader::reduce: return Family::reduce;
    case Shader::gemm: return Family::gemm;
    case Shader::pool2d:
    case Shader::rows:
    case Shader::index:
    case Shader::attention: return Family::nn;
    case Shader::optim: return Family::optim;
    case Shader::quant: return Family::quant;
    default: return Family::none;
    }
}

}  // namespace

Shader kernel_of(uint32_t op) {
    switch (op) {
    case TF_OP_ADD:
    case TF_OP_SUB:
    case TF_OP_MUL:
    case TF_OP_DIV:
    case TF_OP_POW:
    case TF_OP_MAXIMUM:
    case TF_OP_MINIMUM:
    case TF_OP_RELU_BACKWARD:
    case TF_OP_GELU_BACKWARD:
    case TF_OP_NEG:
    case TF_OP_EXP:
    case TF_OP_RELU:
    case TF_OP_ABS:
    case TF_OP_LOG:
    case TF_OP_SQRT:
    case TF_OP_RSQRT:
    case TF_OP_SIN:
    case TF_OP_COS:
    case TF_OP_TANH:
    case TF_OP_SIGMOID:
    case TF_OP_GELU:
    case TF_OP_GELU_TANH:
    case TF_OP_SILU:
    case TF_OP_SQUARE:
    case TF_OP_ERF:
    case TF_OP_CLAMP:
    case TF_OP_EQ:
    case TF_OP_NE:
    case TF_OP_LT:
    case TF_OP_LE:
    case TF_OP_GT:
    case TF_OP_GE:
    case TF_OP_WHERE:
    case TF_OP_CONTIGUOUS:
    case TF_OP_CAST:
    case TF_OP_FILL: return Shader::elementwise;
    case TF_OP_SUM:
    case TF_OP_MEAN:
    case TF_OP_MAX:
    case TF_OP_MIN:
    case TF_OP_VAR:
    case TF_OP_ARGMAX:
    case TF_OP_ARGMIN: return Shader::reduce;
    case TF_OP_MATMUL:
    case TF_OP_CONV2D:
    case TF_OP_CONV2D_GRAD_INPUT:
    case TF_OP_CONV2D_GRAD_WEIGHT: return Shader::gemm;
    case TF_OP_MAX_POOL2D:
    case TF_OP_MAX_POOL2D_BACKWARD:
    case TF_OP_AVG_POOL2D:
    case TF_OP_AVG_POOL2D_BACKWARD: return Shader::pool2d;
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX:
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM:
    case TF_OP_CROSS_ENTROPY: return Shader::rows;
    case TF_OP_ONE_HOT:
    case TF_OP_EMBEDDING:
    case TF_OP_EMBEDDING_BACKWARD:
    case TF_OP_ROPE: return Shader::index;
    case TF_OP_ATTENTION: return Shader::attention;
    case TF_OP_ADAMW_STEP:
    case TF_OP_SGD_STEP: return Shader::optim;
    // Issue 34: the quantized ops (quantize stays on cpu).
    case TF_OP_DEQUANTIZE:
    case TF_OP_MATMUL_Q:
    case TF_OP_EMBEDDING_Q: return Shader::quant;
    default: return Shader::count_;
    }
}

bool supports(const DeviceCaps &caps, const tf_op_desc &op) {
    if (op.struct_size < sizeof(tf_op_desc)) return false;
    tf_kit::OpRule rule{};
    if (tf_kit::check_call(&op, &rule, nullptr) != TF_STATUS_OK) return false;
    // The dtypes ops.def defines the op on; the families below state only the kernels' limits.
    if (!tf_kit::dtypes_defined(op, rule.kind)) return false;
    const uint32_t n_in = rule.n_inputs, n_out = rule.n_outputs;
    // One output, except for the in-place optimizer updates (the 5 tensor slots bound them).
    const Family f = family_of(op.op);
    if ((n_out != 1 && f != Family::optim) || n_in + n_out > 5) return false;
    for (uint32_t i = 0; i < n_in; ++i)
        if (!tf_kit::is_absent(op.inputs[i]) && !tensor_fits(caps, op.inputs[i])) return false;
    for (uint32_t i = 0; i < n_out; ++i)
        if (!tensor_fits(caps, op.outputs[i]) || !tf_kit::is_dense(op.outputs[i])) return false;
    switch (f) {
    case Family::elementwise: return elementwise_supports(caps, op);
    case Family::reduce: return reduce_supports(caps, op);
    case Family::gemm: return gemm_supports(caps, op);
    case Family::nn: return nn_supports(caps, op);
    case Family::optim: return optim_supports(op);
    case Family::quant: return quant_supports(caps, op);
    case Family::none: return false;
    }
    return false;
}

void run(KernelDevice &dev, const tf_op_desc &op) {
    switch (family_of(op.op)) {
    case Family::elementwise: elementwise_run(dev, op); return;
    case Family::reduce: reduce_run(dev, op); return;
    case Family::gemm: gemm_run(dev, op); return;
    case Family::nn: nn_run(dev, op); return;
    case Family::optim: optim_run(dev, op); return;
    case Family::quant: quant_run(dev, op); return;
    case Family::none: break;
    }
    raise(TF_STATUS_UNSUPPORTED, "%s: no kernel runs this op", op_name(op.op));
}

}  // namespace tf_kernels
