// The plugin kit's convolution and pooling geometry: the output-size rule and the parameter
// checks, overflow-safe for every int32 parameter and int64 size a hostile descriptor can hold
// (supports() must refuse such a descriptor, never compute with it).
#pragma once

#include <tinyfin/plugin_kit/ops.hpp>
#include <tinyfin/plugin_kit/tensors.hpp>

#include <cstdint>

namespace tf_kit TF_KIT_HIDDEN {

// GCC's and Clang's 128-bit integer; __extension__ keeps -Wpedantic quiet in plugins that build
// with it (examples/plugin-template-cpp does).
__extension__ typedef __int128 int128;

// Positions of a window of `kernel` taps `dilation` apart sliding by `stride` over `in` elements
// padded by `pad` on both sides: 0 when the window does not fit, -1 for arguments no op has (a
// negative size or padding, a kernel, stride or dilation below 1). Computed in 128 bits, so no
// int64 size or int32 parameter overflows; the result is at most in + 2 * pad.
constexpr int64_t window_count(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) noexcept {
    if (in < 0 || kernel < 1 || stride < 1 || pad < 0 || dilation < 1) return -1;
    const int128 span = static_cast<int128>(dilation) * (kernel - 1) + 1;
    const int128 padded = static_cast<int128>(in) + 2 * static_cast<int128>(pad);
    if (padded < span) return 0;
    const int128 n = (padded - span) / stride + 1;
    return n > INT64_MAX ? -1 : static_cast<int64_t>(n);
}

// Pooling parameters any plugin may accept: kernel and stride >= 1, 0 <= padding <= kernel / 2
// (so every window of a non-empty input holds an input element). Written as padding > kernel / 2,
// not padding * 2 > kernel, which overflows int32.
constexpr bool pool_params_valid(const tf_params_pool2d &p) noexcept {
    for (int i = 0; i < 2; ++i)
        if (p.kernel[i] < 1 || p.stride[i] < 1 || p.padding[i] < 0 || p.padding[i] > p.kernel[i] / 2) return false;
    return true;
}

// Convolution parameters any plugin may accept: stride and dilation >= 1, padding >= 0,
// groups >= 1.
constexpr bool conv_params_valid(const tf_params_conv2d &p) noexcept {
    for (int i = 0; i < 2; ++i)
        if (p.stride[i] < 1 || p.dilation[i] < 1 || p.padding[i] < 0) return false;
    return p.groups >= 1;
}

// The same checks with a message that carries the values (R11).
inline tf_status check_pool_params(const char *op, const tf_params_pool2d &p, tf_error *err) noexcept {
    if (pool_params_valid(p)) return TF_STATUS_OK;
    return fail(err, TF_STATUS_INVALID_ARGUMENT,
                "%s: kernel %dx%d, stride %dx%d, padding %dx%d (need kernel and stride >= 1, 0 <= padding <= kernel/2)",
                op, p.kernel[0], p.kernel[1], p.stride[0], p.stride[1], p.padding[0], p.padding[1]);
}

inline tf_status check_conv_params(const char *op, const tf_params_conv2d &p, tf_error *err) noexcept {
    if (conv_params_valid(p)) return TF_STATUS_OK;
    return fail(err, TF_STATUS_INVALID_ARGUMENT,
                "%s: stride %dx%d, padding %dx%d, dilation %dx%d, groups %d (need stride and dilation >= 1, "
                "padding >= 0, groups >= 1)",
                op, p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups);
}

// The tensors of a conv2d-family op whichever way round it has them:
//   conv2d:             x [N,C,H,W], w [O,C/groups,KH,KW] -> y [N,O,OH,OW]
//   conv2d_grad_input:  dy, w -> dx;   conv2d_grad_weight: dy, x -> dw
struct ConvOperands {
    const tf_tensor_desc *x, *w, *y;
};
inline ConvOperands conv_operands_of(const tf_op_desc &op) noexcept {
    switch (op.op) {
    case TF_OP_CONV2D_GRAD_INPUT: return {&op.outputs[0], &op.inputs[1], &op.inputs[0]};
    case TF_OP_CONV2D_GRAD_WEIGHT: return {&op.inputs[1], &op.outputs[0], &op.inputs[0]};
    default: return {&op.inputs[0], &op.inputs[1], &op.outputs[0]};
    }
}

// The [N,C,H,W] and [N,C,OH,OW] tensors of a pooling op (x and y forward, dx and dy backward).
struct PoolOperands {
    const tf_tensor_desc *x, *y;
};
inline PoolOperands pool_operands_of(const tf_op_desc &op) noexcept {
    const bool forward = op.op == TF_OP_MAX_POOL2D || op.op == TF_OP_AVG_POOL2D;
    if (forward) return {&op.inputs[0], &op.outputs[0]};
    return {&op.outputs[0], &op.inputs[0]};
}

// Whether the conv2d-family descriptor's shapes fit its parameters: rank 4, channels divisible by
// groups, y the output shape of x and w. Parameters must have passed conv_params_valid.
inline bool conv_shapes_fit(const tf_op_desc &op, const tf_params_conv2d &p) noexcept {
    const ConvOperands t = conv_operands_of(op);
    if (t.x->rank != 4 || t.w->rank != 4 || t.y->rank != 4) return false;
    const int64_t c = t.x->shape[1], o = t.w->shape[0], g = p.groups;
    if (c % g != 0 || c / g != t.w->shape[1] || o % g != 0) return false;
    const int64_t oh = window_count(t.x->shape[2], t.w->shape[2], p.stride[0], p.padding[0], p.dilation[0]);
    const int64_t ow = window_count(t.x->shape[3], t.w->shape[3], p.stride[1], p.padding[1], p.dilation[1]);
    return oh >= 0 && ow >= 0 && shape_is(*t.y, {t.x->shape[0], o, oh, ow});
}

// Whether the pooling descriptor's shapes fit its parameters (max_pool2d_backward's x, input 1,
// must have dx's shape). Parameters must have passed pool_params_valid.
inline bool pool_shapes_fit(const tf_op_desc &op, const tf_params_pool2d &p) noexcept {
    const PoolOperands t = pool_operands_of(op);
    if (t.x->rank != 4 || t.y->rank != 4) return false;
    if (op.op == TF_OP_MAX_POOL2D_BACKWARD && !same_shape(op.inputs[1], *t.x)) return false;
    const int64_t oh = window_count(t.x->shape[2], p.kernel[0], p.stride[0], p.padding[0], 1);
    const int64_t ow = window_count(t.x->shape[3], p.kernel[1], p.stride[1], p.padding[1], 1);
    return oh >= 0 && ow >= 0 && shape_is(*t.y, {t.x->shape[0], t.x->shape[1], oh, ow});
}

// A convolution or pooling descriptor as a whole: its parameters (check_*_params), then its
// shapes against them (*_shapes_fit), the message naming the shapes and parameters (R11).
inline tf_status check_conv_call(const char *name, const tf_op_desc &op, tf_error *err) noexcept {
    const auto &p = params_of<tf_params_conv2d>(op);
    if (tf_status s = check_conv_params(name, p, err); s != TF_STATUS_OK) return s;
    if (conv_shapes_fit(op, p)) return TF_STATUS_OK;
    const ConvOperands t = conv_operands_of(op);
    return fail(err, TF_STATUS_INVALID_ARGUMENT,
                "%s: x %s, w %s and y %s do not form a convolution with stride %dx%d, padding %dx%d, dilation %dx%d, "
                "groups %d",
                name, shape_of(*t.x).text, shape_of(*t.w).text, shape_of(*t.y).text, p.stride[0], p.stride[1],
                p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups);
}
inline tf_status check_pool_call(const char *name, const tf_op_desc &op, tf_error *err) noexcept {
    const auto &p = params_of<tf_params_pool2d>(op);
    if (tf_status s = check_pool_params(name, p, err); s != TF_STATUS_OK) return s;
    if (pool_shapes_fit(op, p)) return TF_STATUS_OK;
    const PoolOperands t = pool_operands_of(op);
    return fail(err, TF_STATUS_INVALID_ARGUMENT,
                "%s: x %s and y %s do not fit kernel %dx%d, stride %dx%d, padding %dx%d", name, shape_of(*t.x).text,
                shape_of(*t.y).text, p.kernel[0], p.kernel[1], p.stride[0], p.stride[1], p.padding[0], p.padding[1]);
}

// Whether attention's operands form q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], mask
// [..., Tq, Tk] or absent (input 3 TF_TENSOR_ABSENT) -> out [..., Tq, Dv], with one batch shape
// for all of them (the core expands the batch axes to it). Dtypes are the caller's to check.
inline bool attention_shapes_fit(const tf_op_desc &op) noexcept {
    const tf_tensor_desc &q = op.inputs[0], &k = op.inputs[1], &v = op.inputs[2], &m = op.inputs[3];
    const tf_tensor_desc &out = op.outputs[0];
    const bool masked = !is_absent(m);
    const int r = q.rank;
    bool ok = r >= 2 && k.rank == r && v.rank == r && (!masked || m.rank == r) && out.rank == r;
    for (int i = 0; ok && i < r - 2; ++i)
        ok = k.shape[i] == q.shape[i] && v.shape[i] == q.shape[i] && (!masked || m.shape[i] == q.shape[i]) &&
             out.shape[i] == q.shape[i];
    return ok && k.shape[r - 1] == q.shape[r - 1] && v.shape[r - 2] == k.shape[r - 2] &&
           (!masked || (m.shape[r - 2] == q.shape[r - 2] && m.shape[r - 1] == k.shape[r - 2])) &&
           out.shape[r - 2] == q.shape[r - 2] && out.shape[r - 1] == v.shape[r - 1];
}

}  // namespace TF_KIT_HIDDEN
