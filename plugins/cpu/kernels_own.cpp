// The OWN ops' descriptor rules (validate_own), their dispatch (run_own) and the f32 staging
// the kernels share. Each rule is the comment beside the op in ops.def, checked exactly: a
// descriptor the core can build for valid arguments passes, anything else is refused with a
// message naming the op and the values involved.
#include "kernels_nn.h"

#include <algorithm>
#include <cstdio>

namespace tf_cpu {
namespace {

// ---- Descriptor helpers ---------------------------------------------------------------------

// Arity and params: plugin.cpp checks both from ops.def already; checked again so these rules
// stand on their own.
tf_status check_call(const tf_op_desc &op, uint32_t n_inputs, size_t params_size, tf_error *err,
                     uint32_t n_outputs = 1) {
    const char *name = op_name(op.op);
    if (op.n_inputs != n_inputs || op.n_outputs != n_outputs || (n_inputs > 0 && !op.inputs) || !op.outputs)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: takes %u inputs and %u outputs, got %u and %u", name,
                    n_inputs, n_outputs, op.n_inputs, op.n_outputs);
    if (params_size > 0 && (!op.params || *static_cast<const uint32_t *>(op.params) < params_size))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: params missing or smaller than %zu bytes", name, params_size);
    return TF_STATUS_OK;
}

// Every tensor listed shares one dtype (the OWN rule; plugin.cpp has checked each operand's class
// against ops.def's dtypes column).
tf_status check_same_dtype(const char *name, std::initializer_list<const tf_tensor_desc *> ts, tf_error *err) {
    const int32_t dtype = (*ts.begin())->dtype;
    for (const tf_tensor_desc *t : ts)
        if (t->dtype != dtype)
            return fail(err, TF_STATUS_UNSUPPORTED, "%s: operand dtypes %s and %s differ", name, dtype_name(dtype),
                        dtype_name(t->dtype));
    return TF_STATUS_OK;
}

// with's shape is base's shape followed by one more axis.
bool extends_by_one(const tf_tensor_desc &base, const tf_tensor_desc &with) {
    if (with.rank != base.rank + 1) return false;
    for (int i = 0; i < base.rank; ++i)
        if (with.shape[i] != base.shape[i]) return false;
    return true;
}

// ---- Rules per op ---------------------------------------------------------------------------

// conv2d:             x [N,C,H,W], w [O,C/groups,KH,KW] -> y [N,O,OH,OW]
// conv2d_grad_input:  dy [N,O,OH,OW], w -> dx [N,C,H,W]
// conv2d_grad_weight: dy [N,O,OH,OW], x [N,C,H,W] -> dw [O,C/groups,KH,KW]
tf_status check_conv(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    if (tf_status s = check_call(op, 2, sizeof(tf_params_conv2d), err); s != TF_STATUS_OK) return s;
    const auto &p = *static_cast<const tf_params_conv2d *>(op.params);
    if (tf_status s = check_conv_params(name, p, err); s != TF_STATUS_OK) return s;
    const tf_tensor_desc *x = &op.inputs[0], *w = &op.inputs[1], *y = &op.outputs[0];
    const char *roles[3] = {"x", "weight", "y"};
    if (op.op == TF_OP_CONV2D_GRAD_INPUT) {
        y = &op.inputs[0];
        x = &op.outputs[0];
        roles[0] = "dx";
        roles[2] = "dy";
    } else if (op.op == TF_OP_CONV2D_GRAD_WEIGHT) {
        y = &op.inputs[0];
        x = &op.inputs[1];
        w = &op.outputs[0];
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

// max_pool2d, avg_pool2d:                x [N,C,H,W] -> y [N,C,OH,OW]
// max_pool2d_backward: dy [N,C,OH,OW], x -> dx (x's shape); avg_pool2d_backward: dy -> dx [N,C,H,W]
tf_status check_pool(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    const bool backward = op.op == TF_OP_MAX_POOL2D_BACKWARD || op.op == TF_OP_AVG_POOL2D_BACKWARD;
    const uint32_t n_inputs = op.op == TF_OP_MAX_POOL2D_BACKWARD ? 2 : 1;
    if (tf_status s = check_call(op, n_inputs, sizeof(tf_params_pool2d), err); s != TF_STATUS_OK) return s;
    const auto &p = *static_cast<const tf_params_pool2d *>(op.params);
    if (tf_status s = check_pool_params(name, p, err); s != TF_STATUS_OK) return s;
    const tf_tensor_desc *x = backward ? &op.outputs[0] : &op.inputs[0];
    const tf_tensor_desc *y = backward ? &op.inputs[0] : &op.outputs[0];
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

// softmax, log_softmax: x -> y of x's shape, along axis (0 <= axis < rank).
tf_status check_softmax(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    if (tf_status s = check_call(op, 1, sizeof(tf_params_axis), err); s != TF_STATUS_OK) return s;
    const tf_tensor_desc &x = op.inputs[0], &y = op.outputs[0];
    const int32_t axis = static_cast<const tf_params_axis *>(op.params)->axis;
    if (x.rank < 1 || axis < 0 || axis >= x.rank)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axis %d is not an axis of shape %s", name, axis,
                    shape_of(x).text);
    if (!same_shape(x, y))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output %s must have the input's shape %s", name,
                    shape_of(y).text, shape_of(x).text);
    return check_same_dtype(name, {&x, &y}, err);
}

// layer_norm: x [..., *S], weight [*S], bias [*S] -> y; rms_norm: x, weight -> y.
tf_status check_norm(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    const uint32_t n_inputs = op.op == TF_OP_LAYER_NORM ? 3 : 2;
    if (tf_status s = check_call(op, n_inputs, sizeof(tf_params_norm), err); s != TF_STATUS_OK) return s;
    const tf_tensor_desc &x = op.inputs[0], &y = op.outputs[0];
    const int32_t n_axes = static_cast<const tf_params_norm *>(op.params)->n_axes;
    if (n_axes < 1 || n_axes > x.rank)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: cannot normalise the last %d axes of shape %s", name, n_axes,
                    shape_of(x).text);
    if (!same_shape(x, y))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output %s must have the input's shape %s", name,
                    shape_of(y).text, shape_of(x).text);
    for (uint32_t i = 1; i < n_inputs; ++i) {
        const tf_tensor_desc &t = op.inputs[i];
        bool ok = t.rank == n_axes;
        for (int a = 0; ok && a < n_axes; ++a) ok = t.shape[a] == x.shape[x.rank - n_axes + a];
        if (!ok)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %s must be the last %d axes of x %s", name,
                        i == 1 ? "weight" : "bias", shape_of(t).text, n_axes, shape_of(x).text);
    }
    if (op.op == TF_OP_LAYER_NORM) return check_same_dtype(name, {&x, &op.inputs[1], &op.inputs[2], &y}, err);
    return check_same_dtype(name, {&x, &op.inputs[1], &y}, err);
}

// layer_norm_backward: x [..., *S], weight [*S], dy of x's shape -> dx of x's shape, dweight and
// dbias [*S], one dtype.
tf_status check_layer_norm_backward(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    if (tf_status s = check_call(op, 3, sizeof(tf_params_norm), err, 3); s != TF_STATUS_OK) return s;
    const tf_tensor_desc &x = op.inputs[0], &w = op.inputs[1], &dy = op.inputs[2];
    const tf_tensor_desc &dx = op.outputs[0], &dw = op.outputs[1], &db = op.outputs[2];
    const int32_t n_axes = static_cast<const tf_params_norm *>(op.params)->n_axes;
    if (n_axes < 1 || n_axes > x.rank)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: cannot normalise the last %d axes of shape %s", name, n_axes,
                    shape_of(x).text);
    if (!same_shape(x, dy) || !same_shape(x, dx))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: dy %s and dx %s must have x's shape %s", name,
                    shape_of(dy).text, shape_of(dx).text, shape_of(x).text);
    for (const tf_tensor_desc *t : {&w, &dw, &db}) {
        bool ok = t->rank == n_axes;
        for (int a = 0; ok && a < n_axes; ++a) ok = t->shape[a] == x.shape[x.rank - n_axes + a];
        if (!ok)
            return fail(err, TF_STATUS_INVALID_ARGUMENT,
                        "%s: weight %s, dweight %s and dbias %s must be the last %d "
                        "axes of x %s",
                        name, shape_of(w).text, shape_of(dw).text, shape_of(db).text, n_axes, shape_of(x).text);
    }
    return check_same_dtype(name, {&x, &w, &dy, &dx, &dw, &db}, err);
}

// rope: x [..., T, D] (D even) -> y of x's shape; theta > 0.
tf_status check_rope(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    if (tf_status s = check_call(op, 1, sizeof(tf_params_rope), err); s != TF_STATUS_OK) return s;
    const tf_tensor_desc &x = op.inputs[0], &y = op.outputs[0];
    if (x.rank < 2 || x.shape[x.rank - 1] % 2 != 0)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: input must be [..., T, D] with D even, got %s", name,
                    shape_of(x).text);
    if (!same_shape(x, y))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output %s must have the input's shape %s", name,
                    shape_of(y).text, shape_of(x).text);
    const double theta = static_cast<const tf_params_rope *>(op.params)->theta;
    if (!(theta > 0)) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: theta must be positive, got %g", name, theta);
    return check_same_dtype(name, {&x, &y}, err);
}

// attention: q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], mask [..., Tq, Tk] or absent ->
// [..., Tq, Dv], one batch shape for all five (the core expands them to it).
tf_status check_attention(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    if (tf_status s = check_call(op, 4, sizeof(tf_params_attention), err); s != TF_STATUS_OK) return s;
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
tf_status check_attention_backward(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    if (tf_status s = check_call(op, 5, sizeof(tf_params_attention), err, 3); s != TF_STATUS_OK) return s;
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

// embedding: weight [V, D], indices [...] -> [..., D] (any dtype, the weight's).
// embedding_backward: dy [..., D], indices [...] -> dweight [V, D] (float).
tf_status check_embedding(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    if (tf_status s = check_call(op, 2, 0, err); s != TF_STATUS_OK) return s;
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

// cross_entropy: logits [N, C], labels [N] -> [] (mean, sum) or [N] (none).
tf_status check_cross_entropy(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    if (tf_status s = check_call(op, 2, sizeof(tf_params_cross_entropy), err); s != TF_STATUS_OK) return s;
    const auto &p = *static_cast<const tf_params_cross_entropy *>(op.params);
    if (p.reduction != TF_REDUCTION_NONE && p.reduction != TF_REDUCTION_MEAN && p.reduction != TF_REDUCTION_SUM)
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

// one_hot: labels [...] -> [..., num_classes] of any dtype.
tf_status check_one_hot(const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    if (tf_status s = check_call(op, 1, sizeof(tf_params_one_hot), err); s != TF_STATUS_OK) return s;
    const int32_t classes = static_cast<const tf_params_one_hot *>(op.params)->num_classes;
    const tf_tensor_desc &labels = op.inputs[0], &out = op.outputs[0];
    if (classes < 1)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: num_classes must be >= 1, got %d", name, classes);
    if (!extends_by_one(labels, out) || out.shape[out.rank - 1] != classes)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output %s must be labels %s followed by %d classes", name,
                    shape_of(out).text, shape_of(labels).text, classes);
    return TF_STATUS_OK;
}

// ---- Staging --------------------------------------------------------------------------------

// Dense row-major f32 memory with d's shape, as a walk sees it.
View dense_view(const tf_tensor_desc &d, float *data) {
    View v{reinterpret_cast<char *>(data), {}};
    int64_t stride = static_cast<int64_t>(sizeof(float));
    for (int i = d.rank - 1; i >= 0; --i) {
        v.strides[i] = stride;
        stride *= d.shape[i];
    }
    return v;
}

}  // namespace

bool dense_f32(const tf_tensor_desc &d) {
    if (d.dtype != TF_DTYPE_F32) return false;
    int64_t expect = 1;
    for (int i = d.rank - 1; i >= 0; --i) {
        if (d.shape[i] != 1 && d.strides[i] != expect) return false;
        expect *= d.shape[i];
    }
    return (reinterpret_cast<uintptr_t>(d.data) + d.offset) % alignof(float) == 0;
}

namespace {
// The staging slots this thread holds, one bit each.
thread_local unsigned t_staging_taken = 0;
constexpr int k_staging_slots = k_slot_count - k_slot_stage0;
}  // namespace

StagingSlot::~StagingSlot() {
    if (slot_ >= 0) t_staging_taken &= ~(1u << slot_);
}

float *StagingSlot::floats(size_t floats) {
    for (int i = 0; slot_ < 0 && i < k_staging_slots; ++i)
        if (!(t_staging_taken >> i & 1u)) {
            t_staging_taken |= 1u << i;
            slot_ = i;
        }
    return slot_ < 0 ? nullptr : scratch_floats(static_cast<ScratchSlot>(k_slot_stage0 + slot_), floats);
}

F32Input::F32Input(const tf_tensor_desc &d) : data_(nullptr) {
    if (numel(d) == 0) return;
    if (dense_f32(d)) {
        data_ = reinterpret_cast<const float *>(base_of(d));
        return;
    }
    const auto count = static_cast<size_t>(numel(d));
    float *copy = slot_.floats(count);
    if (!copy) {
        copy_.resize(count);
        copy = copy_.data();
    }
    const View dst = dense_view(d, copy);
    Dtypes::with_float(d.dtype, [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        walk<2>(d.rank, d.shape, {dst, view_of(d)}, [&](char *const *p, int64_t n, const int64_t *step) {
            if (step[0] == sizeof(float) && load_f32_run(d.dtype, p[1], step[1], reinterpret_cast<float *>(p[0]), n))
                return;
            for (int64_t i = 0; i < n; ++i) Traits<float>::store(p[0] + i * step[0], Tr::load(p[1] + i * step[1]));
        });
    });
    data_ = copy;
}

F32Output::F32Output(const tf_tensor_desc &d) : desc_(d), data_(nullptr) {
    if (numel(d) == 0) return;
    if (dense_f32(d)) {
        data_ = reinterpret_cast<float *>(base_of(d));
        return;
    }
    const auto count = static_cast<size_t>(numel(d));
    staged_ = true;
    data_ = slot_.floats(count);
    if (!data_) {
        scratch_.resize(count);
        data_ = scratch_.data();
    }
}

void F32Output::finish() {
    if (staged_) store_rounded(desc_, data_);
}

void store_rounded(const tf_tensor_desc &out, const float *src) {
    const View from = dense_view(out, const_cast<float *>(src));
    Dtypes::with_float(out.dtype, [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        walk<2>(out.rank, out.shape, {view_of(out), from}, [&](char *const *p, int64_t n, const int64_t *step) {
            if (step[1] == sizeof(float) &&
                store_f32_run(out.dtype, reinterpret_cast<const float *>(p[1]), p[0], step[0], n))
                return;
            for (int64_t i = 0; i < n; ++i) Tr::store(p[0] + i * step[0], Traits<float>::load(p[1] + i * step[1]));
        });
    });
}

std::vector<int64_t> load_indices(const tf_tensor_desc &d) {
    std::vector<int64_t> values;
    values.reserve(static_cast<size_t>(numel(d)));
    auto read = [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        walk<1>(d.rank, d.shape, {view_of(d)}, [&](char *const *p, int64_t n, const int64_t *step) {
            for (int64_t i = 0; i < n; ++i) values.push_back(static_cast<int64_t>(Tr::load(p[0] + i * step[0])));
        });
    };
    if (d.dtype == TF_DTYPE_I32) read(int32_t{});
    if (d.dtype == TF_DTYPE_I64) read(int64_t{});
    return values;
}

std::vector<int64_t> leading_offsets(const tf_tensor_desc &d, int axes) {
    const View v = view_of(d);
    int64_t count = 1;
    for (int i = 0; i < axes; ++i) count *= d.shape[i];
    std::vector<int64_t> offsets(static_cast<size_t>(count));
    int64_t idx[TF_MAX_RANK] = {};
    int64_t off = 0;
    for (int64_t e = 0; e < count; ++e) {
        offsets[static_cast<size_t>(e)] = off;
        for (int i = axes - 1; i >= 0; --i) {
            if (++idx[i] < d.shape[i]) {
                off += v.strides[i];
                break;
            }
            off -= v.strides[i] * (d.shape[i] - 1);
            idx[i] = 0;
        }
    }
    return offsets;
}

tf_status validate_own(const tf_op_desc &op, tf_error *err) {
    switch (op.op) {
    case TF_OP_CONV2D:
    case TF_OP_CONV2D_GRAD_INPUT:
    case TF_OP_CONV2D_GRAD_WEIGHT: return check_conv(op, err);
    case TF_OP_MAX_POOL2D:
    case TF_OP_MAX_POOL2D_BACKWARD:
    case TF_OP_AVG_POOL2D:
    case TF_OP_AVG_POOL2D_BACKWARD: return check_pool(op, err);
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX: return check_softmax(op, err);
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM: return check_norm(op, err);
    case TF_OP_LAYER_NORM_BACKWARD: return check_layer_norm_backward(op, err);
    case TF_OP_ROPE: return check_rope(op, err);
    case TF_OP_ATTENTION: return check_attention(op, err);
    case TF_OP_ATTENTION_BACKWARD: return check_attention_backward(op, err);
    case TF_OP_EMBEDDING:
    case TF_OP_EMBEDDING_BACKWARD: return check_embedding(op, err);
    case TF_OP_CROSS_ENTROPY: return check_cross_entropy(op, err);
    case TF_OP_ONE_HOT: return check_one_hot(op, err);
    case TF_OP_ADAMW_STEP:
    case TF_OP_SGD_STEP: return check_optim(op, err);
    case TF_OP_QUANTIZE:
    case TF_OP_DEQUANTIZE:
    case TF_OP_MATMUL_Q:
    case TF_OP_EMBEDDING_Q: return check_quant(op, err);
    default: return fail(err, TF_STATUS_UNSUPPORTED, "%s: no cpu kernel", op_name(op.op));
    }
}

tf_status run_own(const tf_op_desc &op, tf_error *err) {
    switch (op.op) {
    case TF_OP_CONV2D: return run_conv2d(op, err);
    case TF_OP_CONV2D_GRAD_INPUT: return run_conv2d_grad_input(op, err);
    case TF_OP_CONV2D_GRAD_WEIGHT: return run_conv2d_grad_weight(op, err);
    case TF_OP_MAX_POOL2D: return run_max_pool2d(op, err);
    case TF_OP_MAX_POOL2D_BACKWARD: return run_max_pool2d_backward(op, err);
    case TF_OP_AVG_POOL2D: return run_avg_pool2d(op, err);
    case TF_OP_AVG_POOL2D_BACKWARD: return run_avg_pool2d_backward(op, err);
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX: return run_softmax(op, err);
    case TF_OP_LAYER_NORM: return run_layer_norm(op, err);
    case TF_OP_RMS_NORM: return run_rms_norm(op, err);
    case TF_OP_LAYER_NORM_BACKWARD: return run_layer_norm_backward(op, err);
    case TF_OP_ROPE: return run_rope(op, err);
    case TF_OP_ATTENTION: return run_attention(op, err);
    case TF_OP_ATTENTION_BACKWARD: return run_attention_backward(op, err);
    case TF_OP_EMBEDDING: return run_embedding(op, err);
    case TF_OP_EMBEDDING_BACKWARD: return run_embedding_backward(op, err);
    case TF_OP_CROSS_ENTROPY: return run_cross_entropy(op, err);
    case TF_OP_ONE_HOT: return run_one_hot(op, err);
    case TF_OP_ADAMW_STEP:
    case TF_OP_SGD_STEP: return run_optim(op, err);
    case TF_OP_QUANTIZE: return run_quantize(op, err);
    case TF_OP_DEQUANTIZE: return run_dequantize(op, err);
    case TF_OP_MATMUL_Q: return run_matmul_q(op, err);
    case TF_OP_EMBEDDING_Q: return run_embedding_q(op, err);
    default: return fail(err, TF_STATUS_UNSUPPORTED, "%s: no cpu kernel", op_name(op.op));
    }
}

}  // namespace tf_cpu
