// conv2d, conv2d_grad_input and conv2d_grad_weight through cuDNN's convolution API
// (cudnnConvolutionForward, BackwardData, BackwardFilter), f32 and f16 (f32 accumulation).
//
// Per shape the device keeps a plan: packed NCHW descriptors, the convolution descriptor (groups
// included) and, per direction, the algorithm cudnnGet*Algorithm_v7 ranks first among those that
// succeed within the workspace cap, chosen once. Workspaces come from the caching allocator.
// Operands with other strides are copied to dense scratch first (and a strided output copied
// back), so every layout is accepted.
//
// Precision: f32 uses CUDNN_FMA_MATH (no TF32) unless TINYFIN_CUDA_TF32=1, so results match the
// cpu plugin to f32 rounding; f16 may use tensor cores.
#include <algorithm>
#include <climits>

#include "context.hpp"

namespace tf_cuda {
namespace {

// Algorithms needing more workspace than this are passed over.
constexpr size_t workspace_cap = size_t{1} << 30;

tf_status dnn_fail(tf_error *err, const char *name, const char *what, cudnnStatus_t status) {
    const char *text = g_context->libs.cudnn.cudnnGetErrorString(status);
    return fail(err, status == CUDNN_STATUS_ALLOC_FAILED ? TF_STATUS_OUT_OF_MEMORY : TF_STATUS_INTERNAL,
                "%s: %s failed: %s", name, what, text ? text : "unknown cuDNN status");
}

cudnnDataType_t dnn_type(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F16: return CUDNN_DATA_HALF;
    case TF_DTYPE_BF16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
    }
}

// f16 and bf16 may use tensor cores (accumulating in f32, see the convolution descriptor); f32
// stays on FMA units (no TF32) unless the user allowed TF32.
cudnnMathType_t math_for(int32_t dtype, bool allow_tf32) {
    if (dtype == TF_DTYPE_F16 || dtype == TF_DTYPE_BF16) return CUDNN_TENSOR_OP_MATH;
    return allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

std::vector<int64_t> plan_key(const tf_op_desc &op, const ConvOperands &t) {
    const auto &p = *static_cast<const tf_params_conv2d *>(op.params);
    std::vector<int64_t> key{t.x->dtype};
    for (int i = 0; i < 4; ++i) key.push_back(t.x->shape[i]);
    for (int i = 0; i < 4; ++i) key.push_back(t.w->shape[i]);
    key.insert(key.end(),
               {p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups});
    return key;
}

tf_status set_tensor(const Cudnn &api, cudnnTensorDescriptor_t d, const tf_tensor_desc &t, tf_error *err) {
    const int n = static_cast<int>(t.shape[0]), c = static_cast<int>(t.shape[1]);
    const int h = static_cast<int>(t.shape[2]), w = static_cast<int>(t.shape[3]);
    cudnnStatus_t s = api.cudnnSetTensor4dDescriptorEx(d, dnn_type(t.dtype), n, c, h, w, c * h * w, h * w, w, 1);
    return s == CUDNN_STATUS_SUCCESS ? TF_STATUS_OK : dnn_fail(err, "conv2d", "cudnnSetTensor4dDescriptorEx", s);
}

tf_status create_plan(const Cudnn &api, const tf_op_desc &op, const ConvOperands &t, bool allow_tf32,
                      std::unique_ptr<ConvPlan> *out, tf_error *err) {
    const auto &p = *static_cast<const tf_params_conv2d *>(op.params);
    auto plan = std::make_unique<ConvPlan>();
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnStatus_t s = api.cudnnCreateTensorDescriptor(&x);
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, "conv2d", "cudnnCreateTensorDescriptor", s);
    plan->x = TensorDescriptorPtr(x, {api.cudnnDestroyTensorDescriptor});
    if ((s = api.cudnnCreateTensorDescriptor(&y)) != CUDNN_STATUS_SUCCESS)
        return dnn_fail(err, "conv2d", "cudnnCreateTensorDescriptor", s);
    plan->y = TensorDescriptorPtr(y, {api.cudnnDestroyTensorDescriptor});
    if ((s = api.cudnnCreateFilterDescriptor(&w)) != CUDNN_STATUS_SUCCESS)
        return dnn_fail(err, "conv2d", "cudnnCreateFilterDescriptor", s);
    plan->w = FilterDescriptorPtr(w, {api.cudnnDestroyFilterDescriptor});
    if ((s = api.cudnnCreateConvolutionDescriptor(&conv)) != CUDNN_STATUS_SUCCESS)
        return dnn_fail(err, "conv2d", "cudnnCreateConvolutionDescriptor", s);
    plan->conv = ConvolutionDescriptorPtr(conv, {api.cudnnDestroyConvolutionDescriptor});

    if (tf_status st = set_tensor(api, x, *t.x, err); st != TF_STATUS_OK) return st;
    if (tf_status st = set_tensor(api, y, *t.y, err); st != TF_STATUS_OK) return st;
    if ((s = api.cudnnSetFilter4dDescriptor(w, dnn_type(t.w->dtype), CUDNN_TENSOR_NCHW, static_cast<int>(t.w->shape[0]),
                                            static_cast<int>(t.w->shape[1]), static_cast<int>(t.w->shape[2]),
                                            static_cast<int>(t.w->shape[3]))) != CUDNN_STATUS_SUCCESS)
        return dnn_fail(err, "conv2d", "cudnnSetFilter4dDescriptor", s);
    // f16 and bf16 data accumulate in f32 (cuDNN's "pseudo half" / "pseudo bfloat16"
    // configurations, compute type CUDNN_DATA_FLOAT).
    if ((s = api.cudnnSetConvolution2dDescriptor(conv, p.padding[0], p.padding[1], p.stride[0], p.stride[1],
                                                 p.dilation[0], p.dilation[1], CUDNN_CROSS_CORRELATION,
                                                 CUDNN_DATA_FLOAT)) != CUDNN_STATUS_SUCCESS)
        return dnn_fail(err, "conv2d", "cudnnSetConvolution2dDescriptor", s);
    if ((s = api.cudnnSetConvolutionGroupCount(conv, p.groups)) != CUDNN_STATUS_SUCCESS)
        return dnn_fail(err, "conv2d", "cudnnSetConvolutionGroupCount", s);
    if ((s = api.cudnnSetConvolutionMathType(conv, math_for(t.x->dtype, allow_tf32))) != CUDNN_STATUS_SUCCESS)
        return dnn_fail(err, "conv2d", "cudnnSetConvolutionMathType", s);
    *out = std::move(plan);
    return TF_STATUS_OK;
}

// The first result (cuDNN ranks them best first) that works within the workspace cap, preferring
// the descriptor's math type; false when none works.
template <class Perf>
bool pick(const Perf *results, int count, cudnnMathType_t wanted, Perf *chosen) {
    for (int pass = 0; pass < 2; ++pass)
        for (int i = 0; i < count; ++i) {
            const Perf &r = results[i];
            if (r.status != CUDNN_STATUS_SUCCESS || r.memory > workspace_cap) continue;
            if (pass == 0 && r.mathType != wanted) continue;
            *chosen = r;
            return true;
        }
    return false;
}

// A dense NCHW copy of t when it has other strides (scratch holds it), else t itself.
tf_status dense_input(Device &device, const tf_tensor_desc &t, Scratch &scratch, const void **ptr, tf_error *err) {
    *ptr = address_of(t);
    if (is_contiguous(t)) return TF_STATUS_OK;
    const uint64_t bytes = static_cast<uint64_t>(numel(t)) * dtype_size(t.dtype);
    if (cudaError_t e = scratch.allocate(device, bytes); e != cudaSuccess)
        return cuda_fail(err, "conv2d: dense copy", e);
    int64_t dense[4];
    dense[3] = 1;
    for (int i = 2; i >= 0; --i) dense[i] = dense[i + 1] * t.shape[i + 1];
    const int64_t *strides[2] = {dense, t.strides};
    if (cudaError_t e = launch_copy(device.stream.get(), t.dtype, t.dtype, make_strided<2>(4, t.shape, strides),
                                    scratch.get(), address_of(t));
        e != cudaSuccess)
        return cuda_fail(err, "conv2d: dense copy", e);
    *ptr = scratch.get();
    return TF_STATUS_OK;
}

// Copies a dense result in scratch to the strided output t.
tf_status scatter_output(Device &device, const tf_tensor_desc &t, const void *dense_ptr, tf_error *err) {
    int64_t dense[4];
    dense[3] = 1;
    for (int i = 2; i >= 0; --i) dense[i] = dense[i + 1] * t.shape[i + 1];
    const int64_t *strides[2] = {t.strides, dense};
    if (cudaError_t e = launch_copy(device.stream.get(), t.dtype, t.dtype, make_strided<2>(4, t.shape, strides),
                                    address_of(t), dense_ptr);
        e != cudaSuccess)
        return cuda_fail(err, "conv2d: strided output", e);
    return TF_STATUS_OK;
}

}  // namespace

bool conv_supported(const Device &, const tf_op_desc &op) {
    // cuDNN's descriptors take int sizes and strides.
    for (uint32_t i = 0; i < op.n_inputs; ++i)
        if (numel(op.inputs[i]) > INT_MAX) return false;
    return numel(op.outputs[0]) <= INT_MAX;
}

void release_conv_plans(Device &device) { device.conv_plans.clear(); }

template <uint32_t Op>
tf_status conv_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    const tf_tensor_desc &out = op.outputs[0];
    if (numel(out) == 0) return TF_STATUS_OK;
    // An empty input (batch 0, or no channels) contributes nothing: the result is zeros.
    if (numel(op.inputs[0]) == 0 || numel(op.inputs[1]) == 0) return zero_fill(device, out, err);

    const Cudnn &api = g_context->libs.cudnn;
    const ConvOperands t = conv_operands_of(op);  // x, w, y of the forward convolution
    std::unique_ptr<ConvPlan> &slot = device.conv_plans[plan_key(op, t)];
    if (!slot)
        if (tf_status s = create_plan(api, op, t, g_context->allow_tf32, &slot, err); s != TF_STATUS_OK) {
            device.conv_plans.erase(plan_key(op, t));
            return s;
        }
    ConvPlan &plan = *slot;
    cudnnHandle_t handle = device.dnn.get();
    const cudnnMathType_t wanted = math_for(t.x->dtype, g_context->allow_tf32);

    // Dense operands (inputs copied when strided; the output computed in scratch when strided).
    Scratch in0, in1, result;
    const void *a = nullptr, *b = nullptr;
    if (tf_status s = dense_input(device, op.inputs[0], in0, &a, err); s != TF_STATUS_OK) return s;
    if (tf_status s = dense_input(device, op.inputs[1], in1, &b, err); s != TF_STATUS_OK) return s;
    void *y = address_of(out);
    const bool strided_out = !is_contiguous(out);
    if (strided_out) {
        if (cudaError_t e = result.allocate(device, static_cast<uint64_t>(numel(out)) * dtype_size(out.dtype));
            e != cudaSuccess)
            return cuda_fail(err, "conv2d: dense output", e);
        y = result.get();
    }

    const float alpha = 1.f, beta = 0.f;
    Scratch workspace;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    if constexpr (Op == TF_OP_CONV2D) {
        if (!plan.forward_ready) {
            cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT], chosen;
            int count = 0;
            s = api.cudnnGetConvolutionForwardAlgorithm_v7(handle, plan.x.get(), plan.w.get(), plan.conv.get(),
                                                           plan.y.get(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
                                                           results);
            if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, name, "cudnnGetConvolutionForwardAlgorithm_v7", s);
            if (!pick(results, count, wanted, &chosen))
                return fail(err, TF_STATUS_INTERNAL, "%s: cuDNN has no forward algorithm for this shape", name);
            plan.forward_algo = chosen.algo;
            plan.forward_math = chosen.mathType;
            api.cudnnSetConvolutionMathType(plan.conv.get(), chosen.mathType);
            s = api.cudnnGetConvolutionForwardWorkspaceSize(handle, plan.x.get(), plan.w.get(), plan.conv.get(),
                                                            plan.y.get(), chosen.algo, &plan.forward_workspace);
            if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, name, "cudnnGetConvolutionForwardWorkspaceSize", s);
            plan.forward_ready = true;
        }
        if (cudaError_t e = workspace.allocate(device, plan.forward_workspace); e != cudaSuccess)
            return cuda_fail(err, "conv2d: workspace", e);
        api.cudnnSetConvolutionMathType(plan.conv.get(), plan.forward_math);
        s = api.cudnnConvolutionForward(handle, &alpha, plan.x.get(), a, plan.w.get(), b, plan.conv.get(),
                                        plan.forward_algo, workspace.get(), plan.forward_workspace, &beta, plan.y.get(),
                                        y);
        if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, name, "cudnnConvolutionForward", s);
    } else if constexpr (Op == TF_OP_CONV2D_GRAD_INPUT) {
        // inputs: dy (a), w (b); output dx.
        if (!plan.data_ready) {
            cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT], chosen;
            int count = 0;
            s = api.cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, plan.w.get(), plan.y.get(), plan.conv.get(),
                                                                plan.x.get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                                &count, results);
            if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, name, "cudnnGetConvolutionBackwardDataAlgorithm_v7", s);
            if (!pick(results, count, wanted, &chosen))
                return fail(err, TF_STATUS_INTERNAL, "%s: cuDNN has no backward-data algorithm for this shape", name);
            plan.data_algo = chosen.algo;
            plan.data_math = chosen.mathType;
            api.cudnnSetConvolutionMathType(plan.conv.get(), chosen.mathType);
            s = api.cudnnGetConvolutionBackwardDataWorkspaceSize(handle, plan.w.get(), plan.y.get(), plan.conv.get(),
                                                                 plan.x.get(), chosen.algo, &plan.data_workspace);
            if (s != CUDNN_STATUS_SUCCESS)
                return dnn_fail(err, name, "cudnnGetConvolutionBackwardDataWorkspaceSize", s);
            plan.data_ready = true;
        }
        if (cudaError_t e = workspace.allocate(device, plan.data_workspace); e != cudaSuccess)
            return cuda_fail(err, "conv2d_grad_input: workspace", e);
        api.cudnnSetConvolutionMathType(plan.conv.get(), plan.data_math);
        s = api.cudnnConvolutionBackwardData(handle, &alpha, plan.w.get(), b, plan.y.get(), a, plan.conv.get(),
                                             plan.data_algo, workspace.get(), plan.data_workspace, &beta, plan.x.get(),
                                             y);
        if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, name, "cudnnConvolutionBackwardData", s);
    } else {
        // conv2d_grad_weight. inputs: dy (a), x (b); output dw.
        if (!plan.filter_ready) {
            cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT], chosen;
            int count = 0;
            s = api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan.x.get(), plan.y.get(), plan.conv.get(),
                                                                  plan.w.get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                                  &count, results);
            if (s != CUDNN_STATUS_SUCCESS)
                return dnn_fail(err, name, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", s);
            if (!pick(results, count, wanted, &chosen))
                return fail(err, TF_STATUS_INTERNAL, "%s: cuDNN has no backward-filter algorithm for this shape", name);
            plan.filter_algo = chosen.algo;
            plan.filter_math = chosen.mathType;
            api.cudnnSetConvolutionMathType(plan.conv.get(), chosen.mathType);
            s = api.cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan.x.get(), plan.y.get(), plan.conv.get(),
                                                                   plan.w.get(), chosen.algo, &plan.filter_workspace);
            if (s != CUDNN_STATUS_SUCCESS)
                return dnn_fail(err, name, "cudnnGetConvolutionBackwardFilterWorkspaceSize", s);
            plan.filter_ready = true;
        }
        if (cudaError_t e = workspace.allocate(device, plan.filter_workspace); e != cudaSuccess)
            return cuda_fail(err, "conv2d_grad_weight: workspace", e);
        api.cudnnSetConvolutionMathType(plan.conv.get(), plan.filter_math);
        s = api.cudnnConvolutionBackwardFilter(handle, &alpha, plan.x.get(), b, plan.y.get(), a, plan.conv.get(),
                                               plan.filter_algo, workspace.get(), plan.filter_workspace, &beta,
                                               plan.w.get(), y);
        if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, name, "cudnnConvolutionBackwardFilter", s);
    }
    return strided_out ? scatter_output(device, out, y, err) : TF_STATUS_OK;
}

template tf_status conv_run<TF_OP_CONV2D>(Device &, const tf_op_desc &, tf_error *);
template tf_status conv_run<TF_OP_CONV2D_GRAD_INPUT>(Device &, const tf_op_desc &, tf_error *);
template tf_status conv_run<TF_OP_CONV2D_GRAD_WEIGHT>(Device &, const tf_op_desc &, tf_error *);

}  // namespace tf_cuda
