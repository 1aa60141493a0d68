// The plugin kit's op rules: every op's descriptor rule, written once. A kind's rule (ops.def's
// KIND column: UNARY, BINARY, REDUCE, ...) for the ops of that kind; the op's own rule (shapes
// against each other and the params, params' ranges, which operands share a dtype) for the OWN
// ops, each the comment beside the op in ops.def, checked exactly. check_op() applies the frame,
// the tensors, the dtypes column and the rule; a kernel table (kernel_rows.hpp) derives a plugin's
// supports() and run() from it, so a plugin states only what its kernels add (dtypes, layouts).
// A descriptor the core builds for valid arguments passes; anything else is refused with a
// message naming the op and the values involved: INVALID_ARGUMENT for an inconsistent
// descriptor, UNSUPPORTED for operand dtypes the op is not defined on.
#pragma once

#include <tinyfin/plugin_kit/geometry.hpp>
#include <tinyfin/plugin_kit/ops.hpp>
#include <tinyfin/plugin_kit/tensors.hpp>

#include <initializer_list>

namespace tf_kit TF_KIT_HIDDEN {

// ---- Helpers of the rules -----------------------------------------------------------------------------

// Every tensor listed shares one dtype (an OWN op's dtype rule beyond ops.def's classes).
inline tf_status check_same_dtype(const char *name, std::initializer_list<const tf_tensor_desc *> ts,
                                  tf_error *err) noexcept {
    const int32_t dtype = (*ts.begin())->dtype;
    for (const tf_tensor_desc *t : ts)
        if (t->dtype != dtype)
            return fail(err, TF_STATUS_UNSUPPORTED, "%s: operand dtypes %s and %s differ", name, dtype_name(dtype),
                        dtype_name(t->dtype));
    return TF_STATUS_OK;
}

// with's shape is base's shape followed by one more axis.
inline bool extends_by_one(const tf_tensor_desc &base, const tf_tensor_desc &with) noexcept {
    if (with.rank != base.rank + 1) return false;
    for (int i = 0; i < base.rank; ++i)
        if (with.shape[i] != base.shape[i]) return false;
    return true;
}

// t is the last n axes of x.
inline bool is_trailing_shape(const tf_tensor_desc &t, const tf_tensor_desc &x, int n) noexcept {
    if (t.rank != n || n > x.rank) return false;
    for (int a = 0; a < n; ++a)
        if (t.shape[a] != x.shape[x.rank - n + a]) return false;
    return true;
}

// ---- The kinds' rules ------------------------------------------------------------------------------------

// The shape rule of a kind other than OWN (ops.def's header); OWN passes here (own_rule below).
inline tf_status check_kind_shapes(const tf_op_desc &op, OpKind kind, tf_error *err) noexcept {
    const char *name = op_name(op.op);
    const tf_tensor_desc &out = op.outputs[0];
    const tf_tensor_desc *in = op.inputs;
    switch (kind) {
    case OpKind::UNARY:
    case OpKind::COPY:
        if (!same_shape(in[0], out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: input and output shapes differ", name);
        return TF_STATUS_OK;
    case OpKind::BINARY:
    case OpKind::COMPARE:
        if (!same_shape(in[0], out) || !same_shape(in[1], out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: inputs are not broadcast to the output shape", name);
        return TF_STATUS_OK;
    case OpKind::WHERE:
        if (!same_shape(in[0], out) || !same_shape(in[1], out) || !same_shape(in[2], out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: cond, a and b are not broadcast to the output shape",
                        name);
        return TF_STATUS_OK;
    case OpKind::REDUCE: {
        const uint32_t mask = reduce_axes_mask(op);
        if (in[0].rank != out.rank || (mask >> in[0].rank) != 0)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axes mask 0x%x does not fit rank %d -> %d", name, mask,
                        in[0].rank, out.rank);
        for (int i = 0; i < out.rank; ++i)
            if (out.shape[i] != ((mask >> i & 1) ? 1 : in[0].shape[i]))
                return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output axis %d has size %lld, expected %lld", name, i,
                            static_cast<long long>(out.shape[i]),
                            static_cast<long long>((mask >> i & 1) ? 1 : in[0].shape[i]));
        // max and min have no identity to give an empty reduction.
        if (op.op == TF_OP_MAX || op.op == TF_OP_MIN)
            for (int i = 0; i < in[0].rank; ++i)
                if ((mask >> i & 1) && in[0].shape[i] == 0)
                    return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: reduced axis %d has size 0", name, i);
        return TF_STATUS_OK;
    }
    case OpKind::ARG: {
        const int32_t axis = params_of<tf_params_axis>(op).axis;
        if (axis < 0 || axis >= in[0].rank)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axis %d is out of range for rank %d", name, axis,
                        in[0].rank);
        if (out.rank != in[0].rank)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output rank %d differs from input rank %d", name,
                        out.rank, in[0].rank);
        for (int i = 0; i < out.rank; ++i)
            if (out.shape[i] != (i == axis ? 1 : in[0].shape[i]))
                return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output axis %d has size %lld, expected %lld", name, i,
                            static_cast<long long>(out.shape[i]),
                            static_cast<long long>(i == axis ? 1 : in[0].shape[i]));
        // An empty axis has no first extreme to point at.
        if (in[0].shape[axis] == 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axis %d has size 0", name, axis);
        return TF_STATUS_OK;
    }
    case OpKind::MATMUL: {
        const tf_tensor_desc &a = in[0], &b = in[1];
        const int r = out.rank;
        bool ok = r >= 2 && a.rank == r && b.rank == r;
        for (int i = 0; ok && i < r - 2; ++i) ok = a.shape[i] == out.shape[i] && b.shape[i] == out.shape[i];
        ok = ok && a.shape[r - 2] == out.shape[r - 2] && b.shape[r - 1] == out.shape[r - 1] &&
             a.shape[r - 1] == b.shape[r - 2];
        if (!ok)
            return fail(err, TF_STATUS_INVALID_ARGUMENT,
                        "%s: shapes of a, b and out do not form [..., M, K] x [..., K, N] -> [..., M, N]", name);
        return TF_STATUS_OK;
    }
    case OpKind::FILL:
    case OpKind::OWN: return TF_STATUS_OK;
    }
    return TF_STATUS_OK;
}

// ---- The OWN ops' rules ------------------------------------------------------------------------------------
// Each takes a descriptor whose frame check_call accepted (arity, arrays, params size) and whose
// tensors check_tensors accepted; name is the op's name for messages.

// conv2d:             x [N,C,H,W], w [O,C/groups,KH,KW] -> y [N,O,OH,OW]
// conv2d_grad_input:  dy [N,O,OH,OW], w -> dx [N,C,H,W]
// conv2d_grad_weight: dy [N,O,OH,OW], x [N,C,H,W] -> dw [O,C/groups,KH,KW]
inline tf_status rule_conv2d(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const auto &p = params_of<tf_params_conv2d>(op);
    if (tf_status s = check_conv_params(name, p, err); s != TF_STATUS_OK) return s;
    const ConvOperands t = conv_operands_of(op);
    const tf_tensor_desc *x = t.x, *w = t.w, *y = t.y;
    const char *roles[3] = {"x", "weight", "y"};
    if (op.op == TF_OP_CONV2D_GRAD_INPUT) {
        roles[0] = "dx";
        roles[2] = "dy";
    } else if (op.op == TF_OP_CONV2D_GRAD_WEIGHT) {
        roles[1] = "dweight";
        roles[2] = "dy";
    }
    if (x->rank != 4 || w->rank != 4 || y->rank != 4)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %s, %s %s and %s %s must all have rank 4", name, roles[0],
                    shape_of(*x).text, roles[1], shape_of(*w).text, roles[2], shape_of(*y).text);
    if (tf_status s = check_same_dtype(name, {x, w, y}, err); s != TF_STATUS_OK) return s;
    const int64_t c = x->shape[1], o = w->shape[0], g = p.groups;
    if (c % g != 0 || c / g != w->shape[1] || o % g != 0)
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: %s %s and %s %s do not fit groups=%d (need C = weight[1] * groups and O divisible by groups)",
                    name, roles[0], shape_of(*x).text, roles[1], shape_of(*w).text, p.groups);
    const int64_t oh = window_count(x->shape[2], w->shape[2], p.stride[0], p.padding[0], p.dilation[0]);
    const int64_t ow = window_count(x->shape[3], w->shape[3], p.stride[1], p.padding[1], p.dilation[1]);
    if (y->shape[0] != x->shape[0] || y->shape[1] != o || y->shape[2] != oh || y->shape[3] != ow)
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: %s %s does not fit %s %s and %s %s with stride %dx%d, padding %dx%d, dilation %dx%d "
                    "(expected [%lld, %lld, %lld, %lld])",
                    name, roles[2], shape_of(*y).text, roles[0], shape_of(*x).text, roles[1], shape_of(*w).text,
                    p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1],
                    static_cast<long long>(x->shape[0]), static_cast<long long>(o), static_cast<long long>(oh),
                    static_cast<long long>(ow));
    return TF_STATUS_OK;
}

// conv2d_act's convolution parameters as conv2d's struct.
inline tf_params_conv2d conv_part(const tf_params_conv2d_act &p) noexcept {
    return {sizeof(tf_params_conv2d),
            {p.stride[0], p.stride[1]},
            {p.padding[0], p.padding[1]},
            {p.dilation[0], p.dilation[1]},
            p.groups};
}

// conv2d_act: x, w, bias [O] or absent, residual (y's shape) or absent -> y: conv2d's rule for
// x, w, y, then the bias, the residual and the activation (a known kind; clip's bounds not NaN).
inline tf_status rule_conv2d_act(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const auto &p = params_of<tf_params_conv2d_act>(op);
    const tf_params_conv2d conv = conv_part(p);
    tf_op_desc as_conv = op;
    as_conv.params = &conv;
    if (tf_status s = rule_conv2d(as_conv, name, err); s != TF_STATUS_OK) return s;
    const tf_tensor_desc &bias = op.inputs[2];
    if (!is_absent(bias)) {
        if (bias.rank != 1 || bias.shape[0] != op.inputs[1].shape[0])
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: bias %s must have shape [%lld] (the weight's first axis)",
                        name, shape_of(bias).text, static_cast<long long>(op.inputs[1].shape[0]));
        if (tf_status s = check_same_dtype(name, {&op.inputs[0], &bias}, err); s != TF_STATUS_OK) return s;
    }
    const tf_tensor_desc &residual = op.inputs[3];
    if (!is_absent(residual)) {
        if (!same_shape(residual, op.outputs[0]))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: residual %s must have y's shape %s", name,
                        shape_of(residual).text, shape_of(op.outputs[0]).text);
        if (tf_status s = check_same_dtype(name, {&op.inputs[0], &residual}, err); s != TF_STATUS_OK) return s;
    }
    if (p.activation != TF_CONV_ACT_NONE && p.activation != TF_CONV_ACT_RELU && p.activation != TF_CONV_ACT_CLIP)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: activation %d is none of none (0), relu (1), clip (2)", name,
                    p.activation);
    if (p.activation == TF_CONV_ACT_CLIP && (p.min != p.min || p.max != p.max))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: clip bounds %g, %g must not be NaN", name, p.min, p.max);
    return TF_STATUS_OK;
}

// max_pool2d, avg_pool2d:                x [N,C,H,W] -> y [N,C,OH,OW]
// max_pool2d_backward: dy [N,C,OH,OW], x -> dx (x's shape); avg_pool2d_backward: dy -> dx [N,C,H,W]
inline tf_status rule_pool2d(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const bool backward = op.op == TF_OP_MAX_POOL2D_BACKWARD || op.op == TF_OP_AVG_POOL2D_BACKWARD;
    const auto &p = params_of<tf_params_pool2d>(op);
    if (tf_status s = check_pool_params(name, p, err); s != TF_STATUS_OK) return s;
    const PoolOperands t = pool_operands_of(op);
    const tf_tensor_desc *x = t.x, *y = t.y;
    if (x->rank != 4 || y->rank != 4)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %s and %s %s must have rank 4", name,
                    backward ? "dx" : "x", shape_of(*x).text, backward ? "dy" : "y", shape_of(*y).text);
    if (op.op == TF_OP_MAX_POOL2D_BACKWARD) {
        if (tf_status s = check_same_dtype(name, {y, &op.inputs[1], x}, err); s != TF_STATUS_OK) return s;
        if (!same_shape(op.inputs[1], *x))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: dx %s must have x's shape %s", name, shape_of(*x).text,
                        shape_of(op.inputs[1]).text);
    } else if (tf_status s = check_same_dtype(name, {y, x}, err); s != TF_STATUS_OK) {
        return s;
    }
    const int64_t oh = window_count(x->shape[2], p.kernel[0], p.stride[0], p.padding[0], 1);
    const int64_t ow = window_count(x->shape[3], p.kernel[1], p.stride[1], p.padding[1], 1);
    if (y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1] || y->shape[2] != oh || y->shape[3] != ow)
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: %s %s does not fit %s %s with kernel %dx%d, stride %dx%d, padding %dx%d "
                    "(expected [%lld, %lld, %lld, %lld])",
                    name, backward ? "dy" : "y", shape_of(*y).text, backward ? "dx" : "x", shape_of(*x).text,
                    p.kernel[0], p.kernel[1], p.stride[0], p.stride[1], p.padding[0], p.padding[1],
                    static_cast<long long>(x->shape[0]), static_cast<long long>(x->shape[1]),
                    static_cast<long long>(oh), static_cast<long long>(ow));
    return TF_STATUS_OK;
}

// An op along one axis (P's axis, 0 <= axis < rank): x -> y of x's shape and dtype.
template <class P>
inline tf_status rule_along_axis(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &x = op.inputs[0], &y = op.outputs[0];
    const int32_t axis = params_of<P>(op).axis;
    if (x.rank < 1 || axis < 0 || axis >= x.rank)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axis %d is not an axis of shape %s", name, axis,
                    shape_of(x).text);
    if (!same_shape(x, y))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output %s must have the input's shape %s", name,
                    shape_of(y).text, shape_of(x).text);
    return check_same_dtype(name, {&x, &y}, err);
}

// softmax, log_softmax: along tf_params_axis's axis.
inline tf_status rule_softmax(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    return rule_along_axis<tf_params_axis>(op, name, err);
}

// layer_norm: x [..., *S], weight [*S], bias [*S] -> y; rms_norm: x, weight -> y; one dtype.
inline tf_status rule_norm(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &x = op.inputs[0], &y = op.outputs[0];
    const int32_t n_axes = params_of<tf_params_norm>(op).n_axes;
    if (n_axes < 1 || n_axes > x.rank)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: cannot normalise the last %d axes of shape %s", name, n_axes,
                    shape_of(x).text);
    if (!same_shape(x, y))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output %s must have the input's shape %s", name,
                    shape_of(y).text, shape_of(x).text);
    for (uint32_t i = 1; i < op.n_inputs; ++i)
        if (!is_trailing_shape(op.inputs[i], x, n_axes))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %s must be the last %d axes of x %s", name,
                        i == 1 ? "weight" : "bias", shape_of(op.inputs[i]).text, n_axes, shape_of(x).text);
    if (op.op == TF_OP_LAYER_NORM) return check_same_dtype(name, {&x, &op.inputs[1], &op.inputs[2], &y}, err);
    return check_same_dtype(name, {&x, &op.inputs[1], &y}, err);
}

// layer_norm_backward: x [..., *S], weight [*S], dy of x's shape -> dx of x's shape, dweight and
// dbias [*S], one dtype.
inline tf_status rule_layer_norm_backward(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &x = op.inputs[0], &w = op.inputs[1], &dy = op.inputs[2];
    const tf_tensor_desc &dx = op.outputs[0], &dw = op.outputs[1], &db = op.outputs[2];
    const int32_t n_axes = params_of<tf_params_norm>(op).n_axes;
    if (n_axes < 1 || n_axes > x.rank)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: cannot normalise the last %d axes of shape %s", name, n_axes,
                    shape_of(x).text);
    if (!same_shape(x, dy) || !same_shape(x, dx))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: dy %s and dx %s must have x's shape %s", name,
                    shape_of(dy).text, shape_of(dx).text, shape_of(x).text);
    for (const tf_tensor_desc *t : {&w, &dw, &db})
        if (!is_trailing_shape(*t, x, n_axes))
            return fail(err, TF_STATUS_INVALID_ARGUMENT,
                        "%s: weight %s, dweight %s and dbias %s must be the last %d axes of x %s", name,
                        shape_of(w).text, shape_of(dw).text, shape_of(db).text, n_axes, shape_of(x).text);
    return check_same_dtype(name, {&x, &w, &dy, &dx, &dw, &db}, err);
}

// rope: x [..., T, D] (D even) -> y of x's shape and dtype; theta > 0.
inline tf_status rule_rope(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &x = op.inputs[0], &y = op.outputs[0];
    if (x.rank < 2 || x.shape[x.rank - 1] % 2 != 0)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: input must be [..., T, D] with D even, got %s", name,
                    shape_of(x).text);
    if (!same_shape(x, y))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output %s must have the input's shape %s", name,
                    shape_of(y).text, shape_of(x).text);
    const double theta = params_of<tf_params_rope>(op).theta;
    if (!(theta > 0)) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: theta must be positive, got %g", name, theta);
    return check_same_dtype(name, {&x, &y}, err);
}

// attention: q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], mask [..., Tq, Tk] or absent ->
// [..., Tq, Dv], one batch shape for all five (the core expands them to it), one dtype.
inline tf_status rule_attention(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &q = op.inputs[0], &k = op.inputs[1], &v = op.inputs[2], &m = op.inputs[3];
    const tf_tensor_desc &out = op.outputs[0];
    const bool masked = !is_absent(m);
    if (!attention_shapes_fit(op))
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: q %s, k %s, v %s, mask %s and output %s do not form [..., Tq, D], [..., Tk, D], "
                    "[..., Tk, Dv], [..., Tq, Tk] -> [..., Tq, Dv]",
                    name, shape_of(q).text, shape_of(k).text, shape_of(v).text, masked ? shape_of(m).text : "absent",
                    shape_of(out).text);
    if (!masked) return check_same_dtype(name, {&q, &k, &v, &out}, err);
    return check_same_dtype(name, {&q, &k, &v, &m, &out}, err);
}

// attention_backward: attention's operands and dy [..., Tq, Dv] -> dq, dk, dv of q's, k's and
// v's shapes (batch axes equal: the core hands over broadcast views), one dtype; the mask may be
// absent.
inline tf_status rule_attention_backward(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &q = op.inputs[0], &k = op.inputs[1], &v = op.inputs[2], &m = op.inputs[3], &dy = op.inputs[4];
    const tf_tensor_desc &dq = op.outputs[0], &dk = op.outputs[1], &dv = op.outputs[2];
    const bool masked = !is_absent(m);
    const int r = q.rank;
    bool ok = r >= 2 && (!masked || m.rank == r);
    for (const tf_tensor_desc *t : {&k, &v, &dy, &dq, &dk, &dv}) ok = ok && t->rank == r;
    for (int i = 0; ok && i < r - 2; ++i) {
        for (const tf_tensor_desc *t : {&k, &v, &dy, &dq, &dk, &dv}) ok = ok && t->shape[i] == q.shape[i];
        ok = ok && (!masked || m.shape[i] == q.shape[i]);
    }
    if (ok) {
        const int64_t tq = q.shape[r - 2], d = q.shape[r - 1], tk = k.shape[r - 2], dvn = v.shape[r - 1];
        ok = k.shape[r - 1] == d && v.shape[r - 2] == tk &&
             (!masked || (m.shape[r - 2] == tq && m.shape[r - 1] == tk)) && dy.shape[r - 2] == tq &&
             dy.shape[r - 1] == dvn && dq.shape[r - 2] == tq && dq.shape[r - 1] == d && dk.shape[r - 2] == tk &&
             dk.shape[r - 1] == d && dv.shape[r - 2] == tk && dv.shape[r - 1] == dvn;
    }
    if (!ok)
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: q %s, k %s, v %s, mask %s, dy %s -> dq %s, dk %s, dv %s do not form [..., Tq, D], "
                    "[..., Tk, D], [..., Tk, Dv], [..., Tq, Tk], [..., Tq, Dv] -> q's, k's and v's shapes",
                    name, shape_of(q).text, shape_of(k).text, shape_of(v).text, masked ? shape_of(m).text : "absent",
                    shape_of(dy).text, shape_of(dq).text, shape_of(dk).text, shape_of(dv).text);
    if (!masked) return check_same_dtype(name, {&q, &k, &v, &dy, &dq, &dk, &dv}, err);
    return check_same_dtype(name, {&q, &k, &v, &m, &dy, &dq, &dk, &dv}, err);
}

// embedding: weight [V, D], indices [...] -> [..., D] of the weight's dtype.
// embedding_backward: dy [..., D], indices [...] -> dweight [V, D] of dy's dtype.
inline tf_status rule_embedding(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &idx = op.inputs[1];
    const bool forward = op.op == TF_OP_EMBEDDING;
    const tf_tensor_desc &table = forward ? op.inputs[0] : op.outputs[0];
    const tf_tensor_desc &rows = forward ? op.outputs[0] : op.inputs[0];
    if (table.rank != 2 || !extends_by_one(idx, rows) || rows.shape[rows.rank - 1] != table.shape[1])
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: %s %s, indices %s and %s %s do not form [V, D], [...] %s [..., D]", name,
                    forward ? "weight" : "dweight", shape_of(table).text, shape_of(idx).text, forward ? "output" : "dy",
                    shape_of(rows).text, forward ? "->" : "<-");
    if (forward) {
        if (table.dtype != rows.dtype)
            return fail(err, TF_STATUS_UNSUPPORTED, "%s: output dtype %s differs from the weight's %s", name,
                        dtype_name(rows.dtype), dtype_name(table.dtype));
        return TF_STATUS_OK;
    }
    return check_same_dtype(name, {&rows, &table}, err);
}

// cross_entropy: logits [N, C], labels [N] -> [] (mean, sum) or [N] (none), the logits' dtype.
// The core's own argument checks (core/ops_nn.cpp) are this rule's cross_entropy_shapes_fit.
inline bool reduction_valid(int32_t reduction) noexcept {
    return reduction == TF_REDUCTION_NONE || reduction == TF_REDUCTION_MEAN || reduction == TF_REDUCTION_SUM;
}
inline tf_status rule_cross_entropy(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const auto &p = params_of<tf_params_cross_entropy>(op);
    if (!reduction_valid(p.reduction))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: reduction %d is not none (0), mean (1) or sum (2)", name,
                    p.reduction);
    const tf_tensor_desc &logits = op.inputs[0], &labels = op.inputs[1], &out = op.outputs[0];
    const bool per_row = p.reduction == TF_REDUCTION_NONE;
    if (logits.rank != 2 || labels.rank != 1 || labels.shape[0] != logits.shape[0] || out.rank != (per_row ? 1 : 0) ||
        (per_row && out.shape[0] != logits.shape[0]))
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: logits %s, labels %s and loss %s do not form [N, C], [N] -> %s", name, shape_of(logits).text,
                    shape_of(labels).text, shape_of(out).text, per_row ? "[N]" : "[]");
    return check_same_dtype(name, {&logits, &out}, err);
}

// one_hot: labels [...] -> [..., num_classes] of any dtype; num_classes >= 1.
inline tf_status rule_one_hot(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const int32_t classes = params_of<tf_params_one_hot>(op).num_classes;
    const tf_tensor_desc &labels = op.inputs[0], &out = op.outputs[0];
    if (classes < 1)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: num_classes must be >= 1, got %d", name, classes);
    if (!extends_by_one(labels, out) || out.shape[out.rank - 1] != classes)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output %s must be labels %s followed by %d classes", name,
                    shape_of(out).text, shape_of(labels).text, classes);
    return TF_STATUS_OK;
}

// adamw_step, sgd_step: grad -> the in-out state, every operand of output 0's shape and dtype.
inline tf_status rule_optimizer_step(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &param = op.outputs[0];
    for (uint32_t i = 0; i < op.n_inputs + op.n_outputs; ++i) {
        const tf_tensor_desc &t = i < op.n_inputs ? op.inputs[i] : op.outputs[i - op.n_inputs];
        if (!same_shape(t, param))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: operand shapes differ (%s and %s)", name,
                        shape_of(t).text, shape_of(param).text);
        if (t.dtype != param.dtype)
            return fail(err, TF_STATUS_UNSUPPORTED, "%s: operand dtypes %s and %s differ", name,
                        dtype_name(param.dtype), dtype_name(t.dtype));
    }
    return TF_STATUS_OK;
}

// quantize, dequantize: one shape of rank >= 1 (whole blocks: check_tensor).
inline tf_status rule_quantize(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &out = op.outputs[0];
    if (!same_shape(op.inputs[0], out) || out.rank < 1)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: input %s and output %s must have one shape of rank >= 1",
                    name, shape_of(op.inputs[0]).text, shape_of(out).text);
    return TF_STATUS_OK;
}

// matmul_q: x [..., K], w [N, K] -> y [..., N], y f32 or x's dtype.
inline tf_status rule_matmul_q(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &x = op.inputs[0], &w = op.inputs[1], &out = op.outputs[0];
    bool ok = w.rank == 2 && x.rank >= 1 && out.rank == x.rank && x.shape[x.rank - 1] == w.shape[1] &&
              out.shape[out.rank - 1] == w.shape[0];
    for (int i = 0; ok && i + 1 < x.rank; ++i) ok = x.shape[i] == out.shape[i];
    if (!ok)
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: x %s, w %s and out %s do not form [..., K] x [N, K] -> [..., N]", name, shape_of(x).text,
                    shape_of(w).text, shape_of(out).text);
    if (out.dtype != TF_DTYPE_F32 && out.dtype != x.dtype)
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: output %s must be f32 or x's dtype %s", name,
                    dtype_name(out.dtype), dtype_name(x.dtype));
    return TF_STATUS_OK;
}

// embedding_q: weight [V, D] quantized, indices [...] -> [..., D].
inline tf_status rule_embedding_q(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &w = op.inputs[0], &idx = op.inputs[1], &out = op.outputs[0];
    if (w.rank != 2 || !extends_by_one(idx, out) || out.shape[out.rank - 1] != w.shape[1])
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: weight %s, indices %s and out %s do not form [V, D], [...] -> [..., D]", name,
                    shape_of(w).text, shape_of(idx).text, shape_of(out).text);
    return TF_STATUS_OK;
}

// cumsum: along tf_params_cumsum's axis (exclusive and reverse take any value).
inline tf_status rule_cumsum(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    return rule_along_axis<tf_params_cumsum>(op, name, err);
}

// matmul_bias: x [..., M, K] (rank >= 2), w [K, N], bias [N] -> y [..., M, N], one dtype.
inline tf_status rule_matmul_bias(const tf_op_desc &op, const char *name, tf_error *err) noexcept {
    const tf_tensor_desc &x = op.inputs[0], &w = op.inputs[1], &bias = op.inputs[2], &out = op.outputs[0];
    const int r = x.rank;
    bool ok = r >= 2 && out.rank == r && w.rank == 2 && bias.rank == 1 && x.shape[r - 1] == w.shape[0] &&
              out.shape[r - 1] == w.shape[1] && bias.shape[0] == w.shape[1];
    for (int i = 0; ok && i + 1 < r; ++i) ok = x.shape[i] == out.shape[i];
    if (!ok)
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: x %s, w %s, bias %s and out %s do not form [..., M, K] x [K, N] + [N] -> [..., M, N]", name,
                    shape_of(x).text, shape_of(w).text, shape_of(bias).text, shape_of(out).text);
    return check_same_dtype(name, {&x, &w, &bias, &out}, err);
}

// matmul_bias's w as matmul's b operand: [..., K, N] with y's batch axes at stride 0.
inline tf_tensor_desc matmul_bias_weight(const tf_op_desc &op) noexcept {
    const tf_tensor_desc &w = op.inputs[1], &out = op.outputs[0];
    tf_tensor_desc b = w;
    b.rank = out.rank;
    for (int i = 0; i < out.rank - 2; ++i) {
        b.shape[i] = out.shape[i];
        b.strides[i] = 0;
    }
    for (int i = 0; i < 2; ++i) {
        b.shape[out.rank - 2 + i] = w.shape[i];
        b.strides[out.rank - 2 + i] = w.strides[i];
    }
    return b;
}

// An OWN op's rule, as above.
using OwnRule = tf_status (*)(const tf_op_desc &op, const char *name, tf_error *err) noexcept;

// The rule of an OWN op; nullptr for an op of another kind or one this kit does not know (a plugin
// built against an older ops.def refuses it: check_op_rule says so).
constexpr OwnRule own_rule(uint32_t op) noexcept {
    switch (op) {
    case TF_OP_CONV2D:
    case TF_OP_CONV2D_GRAD_INPUT:
    case TF_OP_CONV2D_GRAD_WEIGHT: return rule_conv2d;
    case TF_OP_CONV2D_ACT: return rule_conv2d_act;
    case TF_OP_MAX_POOL2D:
    case TF_OP_MAX_POOL2D_BACKWARD:
    case TF_OP_AVG_POOL2D:
    case TF_OP_AVG_POOL2D_BACKWARD: return rule_pool2d;
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX: return rule_softmax;
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM: return rule_norm;
    case TF_OP_LAYER_NORM_BACKWARD: return rule_layer_norm_backward;
    case TF_OP_ROPE: return rule_rope;
    case TF_OP_ATTENTION: return rule_attention;
    case TF_OP_ATTENTION_BACKWARD: return rule_attention_backward;
    case TF_OP_EMBEDDING:
    case TF_OP_EMBEDDING_BACKWARD: return rule_embedding;
    case TF_OP_CROSS_ENTROPY: return rule_cross_entropy;
    case TF_OP_ONE_HOT: return rule_one_hot;
    case TF_OP_ADAMW_STEP:
    case TF_OP_SGD_STEP: return rule_optimizer_step;
    case TF_OP_QUANTIZE:
    case TF_OP_DEQUANTIZE: return rule_quantize;
    case TF_OP_MATMUL_Q: return rule_matmul_q;
    case TF_OP_MATMUL_BIAS: return rule_matmul_bias;
    case TF_OP_EMBEDDING_Q: return rule_embedding_q;
    case TF_OP_CUMSUM: return rule_cumsum;
    default: return nullptr;
    }
}

// The op's rule beyond its frame and tensors: its kind's shapes, or its own rule, then the kind's
// dtype rule (dtypes_consistent).
inline tf_status check_op_rule(const tf_op_desc &op, OpKind kind, tf_error *err) noexcept {
    const char *name = op_name(op.op);
    if (kind == OpKind::OWN) {
        const OwnRule rule = own_rule(op.op);
        if (!rule) return fail(err, TF_STATUS_UNSUPPORTED, "%s: %s knows no rule for this op", name, plugin_name());
        return rule(op, name, err);
    }
    if (tf_status s = check_kind_shapes(op, kind, err); s != TF_STATUS_OK) return s;
    if (!dtypes_consistent(op, kind)) {
        const int32_t from = op.n_inputs > 0 ? op.inputs[0].dtype : op.outputs[0].dtype;
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: operand dtypes %s -> %s break its kind's rule of shared dtypes",
                    name, dtype_name(from), dtype_name(op.outputs[0].dtype));
    }
    return TF_STATUS_OK;
}

// Everything tinyfin defines of a descriptor, in order: the frame against ops.def (check_call),
// each tensor (check_tensors; with need_data, a host address for every non-empty one), each
// operand's dtype in its class (the dtypes column), the op's rule (check_op_rule). What is left
// to a plugin is its kernels' own limits. On success *rule (when given) is the op's row.
inline tf_status check_op(const tf_op_desc *op, bool need_data, tf_error *err, OpRule *rule = nullptr) noexcept {
    OpRule row{};
    if (tf_status s = check_call(op, &row, err); s != TF_STATUS_OK) return s;
    if (rule) *rule = row;
    if (tf_status s = check_tensors(row.name, *op, need_data, err); s != TF_STATUS_OK) return s;
    if (!dtypes_in_column(*op)) {
        const int32_t from = op->n_inputs > 0 ? op->inputs[0].dtype : op->outputs[0].dtype;
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: dtypes %s -> %s outside its dtypes column \"%s\" in ops.def",
                    row.name, dtype_name(from), dtype_name(op->outputs[0].dtype), op_dtypes(op->op));
    }
    return check_op_rule(*op, row.kind, err);
}

}  // namespace TF_KIT_HIDDEN
