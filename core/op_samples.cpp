#include "op_samples.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "backend.hpp"
#include "op_table.hpp"

namespace tinyfin::detail {

namespace {

using tf_kit::sized;

tf_tensor_desc desc(std::initializer_list<int64_t> shape, tf_dtype dtype = TF_DTYPE_F32) {
    tf_tensor_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.dtype = dtype;
    d.rank = static_cast<int32_t>(shape.size());
    int i = 0;
    for (int64_t s : shape) d.shape[i++] = s;
    int64_t stride = 1;
    for (int k = d.rank; k-- > 0;) {
        d.strides[k] = stride;
        stride *= d.shape[k];
    }
    return d;
}

tf_params_conv2d conv_params() {
    auto p = sized<tf_params_conv2d>();
    p.stride[0] = p.stride[1] = 1;
    p.dilation[0] = p.dilation[1] = 1;
    p.groups = 1;
    return p;
}

tf_params_pool2d pool_params() {
    auto p = sized<tf_params_pool2d>();
    p.kernel[0] = p.kernel[1] = 2;
    p.stride[0] = p.stride[1] = 2;
    return p;
}

}  // namespace

tf_op_desc OpSample::desc(tf_op op) const {
    tf_op_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.op = static_cast<uint32_t>(op);
    d.n_inputs = static_cast<uint32_t>(inputs.size());
    d.n_outputs = static_cast<uint32_t>(outputs.size());
    d.inputs = inputs.data();
    d.outputs = outputs.data();
    d.params = has_params ? params.data() : nullptr;
    return d;
}

OpSample make_sample(tf_op op) {
    OpSample s;
    auto with = [&](auto params) {
        s.params.set(params);
        s.has_params = true;
    };
    switch (op_info(op).kind) {
    case OpKind::UNARY:
    case OpKind::COPY:
        s.inputs = {desc({2, 3})};
        s.outputs = {desc({2, 3})};
        if (op == TF_OP_CLAMP) {
            auto p = sized<tf_params_clamp>();
            p.max = 1.0;
            with(p);
        }
        return s;
    case OpKind::BINARY:
        s.inputs = {desc({2, 3}), desc({2, 3})};
        s.outputs = {desc({2, 3})};
        return s;
    case OpKind::COMPARE:
        s.inputs = {desc({2, 3}), desc({2, 3})};
        s.outputs = {desc({2, 3}, TF_DTYPE_BOOL)};
        return s;
    case OpKind::WHERE:
        s.inputs = {desc({2, 3}, TF_DTYPE_BOOL), desc({2, 3}), desc({2, 3})};
        s.outputs = {desc({2, 3})};
        return s;
    case OpKind::REDUCE:
        s.inputs = {desc({2, 3})};
        s.outputs = {desc({1, 3})};
        if (op == TF_OP_VAR) {
            auto p = sized<tf_params_var>();
            p.axes_mask = 1;
            p.correction = 1;
            with(p);
        } else {
            auto p = sized<tf_params_reduce>();
            p.axes_mask = 1;
            with(p);
        }
        return s;
    case OpKind::ARG:
        s.inputs = {desc({2, 3})};
        s.outputs = {desc({1, 3}, TF_DTYPE_I64)};
        with(sized<tf_params_axis>());
        return s;
    case OpKind::MATMUL:
        // Big enough for the backends that claim only the sizes where they win (blas).
        s.inputs = {desc({64, 64}), desc({64, 64})};
        s.outputs = {desc({64, 64})};
        return s;
    case OpKind::FILL:
        s.outputs = {desc({2, 3})};
        with(sized<tf_params_fill>());
        return s;
    case OpKind::OWN: break;
    }
    // Ops with their own rule (the OWN kind).
    switch (op) {
    // The example's second convolution (batch 8, 32 -> 64 channels, 14x14, 3x3, no padding
    // here): a size where GEMM-based backends claim it.
    case TF_OP_CONV2D:
        s.inputs = {desc({8, 32, 14, 14}), desc({64, 32, 3, 3})};
        s.outputs = {desc({8, 64, 12, 12})};
        with(conv_params());
        break;
    case TF_OP_CONV2D_ACT: {
        s.inputs = {desc({8, 32, 14, 14}), desc({64, 32, 3, 3}), desc({64}), desc({8, 64, 12, 12})};
        s.outputs = {desc({8, 64, 12, 12})};
        auto p = sized<tf_params_conv2d_act>();
        p.stride[0] = p.stride[1] = 1;
        p.dilation[0] = p.dilation[1] = 1;
        p.groups = 1;
        p.activation = TF_CONV_ACT_RELU;
        with(p);
        break;
    }
    case TF_OP_CONV2D_GRAD_INPUT:
        s.inputs = {desc({8, 64, 12, 12}), desc({64, 32, 3, 3})};
        s.outputs = {desc({8, 32, 14, 14})};
        with(conv_params());
        break;
    case TF_OP_CONV2D_GRAD_WEIGHT:
        s.inputs = {desc({8, 64, 12, 12}), desc({8, 32, 14, 14})};
        s.outputs = {desc({64, 32, 3, 3})};
        with(conv_params());
        break;
    case TF_OP_MAX_POOL2D:
    case TF_OP_AVG_POOL2D:
        s.inputs = {desc({1, 2, 4, 4})};
        s.outputs = {desc({1, 2, 2, 2})};
        with(pool_params());
        break;
    case TF_OP_MAX_POOL2D_BACKWARD:
        s.inputs = {desc({1, 2, 2, 2}), desc({1, 2, 4, 4})};
        s.outputs = {desc({1, 2, 4, 4})};
        with(pool_params());
        break;
    case TF_OP_AVG_POOL2D_BACKWARD:
        s.inputs = {desc({1, 2, 2, 2})};
        s.outputs = {desc({1, 2, 4, 4})};
        with(pool_params());
        break;
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX: {
        s.inputs = {desc({2, 3})};
        s.outputs = {desc({2, 3})};
        auto p = sized<tf_params_axis>();
        p.axis = 1;
        with(p);
        break;
    }
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM: {
        s.inputs = {desc({2, 3}), desc({3})};
        if (op == TF_OP_LAYER_NORM) s.inputs.push_back(desc({3}));
        s.outputs = {desc({2, 3})};
        auto p = sized<tf_params_norm>();
        p.n_axes = 1;
        p.eps = 1e-5;
        with(p);
        break;
    }
    case TF_OP_LAYER_NORM_BACKWARD: {
        s.inputs = {desc({2, 3}), desc({3}), desc({2, 3})};
        s.outputs = {desc({2, 3}), desc({3}), desc({3})};
        auto p = sized<tf_params_norm>();
        p.n_axes = 1;
        p.eps = 1e-5;
        with(p);
        break;
    }
    case TF_OP_ROPE: {
        s.inputs = {desc({2, 4})};
        s.outputs = {desc({2, 4})};
        auto p = sized<tf_params_rope>();
        p.theta = 10000.0;
        with(p);
        break;
    }
    case TF_OP_ATTENTION: {
        s.inputs = {desc({2, 4}), desc({3, 4}), desc({3, 5}), desc({2, 3})};
        s.outputs = {desc({2, 5})};
        auto p = sized<tf_params_attention>();
        p.scale = 0.5;
        with(p);
        break;
    }
    case TF_OP_ATTENTION_BACKWARD: {
        s.inputs = {desc({2, 4}), desc({3, 4}), desc({3, 5}), desc({2, 3}), desc({2, 5})};
        s.outputs = {desc({2, 4}), desc({3, 4}), desc({3, 5})};
        auto p = sized<tf_params_attention>();
        p.scale = 0.5;
        with(p);
        break;
    }
    case TF_OP_EMBEDDING:
        s.inputs = {desc({5, 3}), desc({2}, TF_DTYPE_I64)};
        s.outputs = {desc({2, 3})};
        break;
    case TF_OP_EMBEDDING_BACKWARD:
        s.inputs = {desc({2, 3}), desc({2}, TF_DTYPE_I64)};
        s.outputs = {desc({5, 3})};
        break;
    case TF_OP_CROSS_ENTROPY: {
        s.inputs = {desc({2, 3}), desc({2}, TF_DTYPE_I64)};
        s.outputs = {desc({})};
        auto p = sized<tf_params_cross_entropy>();
        p.reduction = TF_REDUCTION_MEAN;
        p.ignore_index = -100;
        with(p);
        break;
    }
    case TF_OP_ONE_HOT: {
        s.inputs = {desc({2}, TF_DTYPE_I64)};
        s.outputs = {desc({2, 3})};
        auto p = sized<tf_params_one_hot>();
        p.num_classes = 3;
        with(p);
        break;
    }
    case TF_OP_ADAMW_STEP: {
        s.inputs = {desc({2, 3})};
        s.outputs = {desc({2, 3}), desc({2, 3}), desc({2, 3})};
        auto p = sized<tf_params_adamw_step>();
        p.has_state = 1;
        p.decay = 1.0;
        p.beta1 = 0.9;
        p.one_minus_beta1 = 0.1;
        p.beta2 = 0.999;
        p.one_minus_beta2 = 0.001;
        p.root_bias_correction2 = 1.0;
        p.eps = 1e-8;
        p.step_size = 1e-3;
        with(p);
        break;
    }
    case TF_OP_SGD_STEP: {
        s.inputs = {desc({2, 3})};
        s.outputs = {desc({2, 3}), desc({2, 3})};
        auto p = sized<tf_params_sgd_step>();
        p.has_state = 1;
        p.lr = 0.1;
        p.momentum = 0.9;
        with(p);
        break;
    }
    case TF_OP_CUMSUM: {
        s.inputs = {desc({2, 3})};
        s.outputs = {desc({2, 3})};
        auto p = sized<tf_params_cumsum>();
        p.axis = 1;
        with(p);
        break;
    }
    // The quantized ops: q8_0 with one block per row.
    case TF_OP_QUANTIZE:
        s.inputs = {desc({2, 32})};
        s.outputs = {desc({2, 32}, TF_DTYPE_Q8_0)};
        break;
    case TF_OP_DEQUANTIZE:
        s.inputs = {desc({2, 32}, TF_DTYPE_Q8_0)};
        s.outputs = {desc({2, 32})};
        break;
    case TF_OP_MATMUL_BIAS:
        s.inputs = {desc({2, 64, 32}), desc({32, 48}), desc({48})};
        s.outputs = {desc({2, 64, 48})};
        break;
    case TF_OP_MATMUL_Q:
        s.inputs = {desc({2, 32}), desc({3, 32}, TF_DTYPE_Q8_0)};
        s.outputs = {desc({2, 3})};
        break;
    case TF_OP_EMBEDDING_Q:
        s.inputs = {desc({5, 32}, TF_DTYPE_Q8_0), desc({2}, TF_DTYPE_I64)};
        s.outputs = {desc({2, 32})};
        break;
    default:
        // An OWN op without a sample: tinyfin-info reports it unsupported everywhere.
        break;
    }
    return s;
}

// The op's sample descriptor with f32 replaced by dtype, asked once per backend, device, op
// and dtype. The per-backend allow-list is thus the plugin's own supports().
bool claims(Backend &backend, int device, tf_op op, DType dtype) {
    static std::mutex mutex;
    static std::map<std::tuple<const Backend *, int, int, int>, bool> answers;
    const auto key = std::make_tuple(&backend, device, static_cast<int>(op), static_cast<int>(dtype));
    {
        std::lock_guard lock(mutex);
        if (auto it = answers.find(key); it != answers.end()) return it->second;
    }
    OpSample sample = make_sample(op);
    for (auto *list : {&sample.inputs, &sample.outputs})
        for (tf_tensor_desc &d : *list)
            if (d.dtype == TF_DTYPE_F32) d.dtype = static_cast<int32_t>(dtype);
    const tf_op_desc desc = sample.desc(op);
    const bool answer = guarded_value(backend.name(), "supports", int32_t{0},
                                      [&] { return backend.table().supports(device, &desc); }) != 0;
    std::lock_guard lock(mutex);
    answers[key] = answer;
    return answer;
}

}  // namespace tinyfin::detail
