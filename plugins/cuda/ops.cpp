// supports() and run(): the op x dtype x layout matrix of the cuda plugin, checked from the
// descriptor alone, and each op's launch. supports() and run() share one check, so run() never
// receives what supports() would refuse and supports() says yes only to what run() can do.
//
// Not supported here (the core runs them on cpu): integer div and pow (their bad operands are
// errors the cpu plugin reports before writing), bf16 matmul and convolutions below sm_80, and
// attention with more than attention_max_keys keys.
#include <cmath>
#include <cstring>

#include "context.h"
#include "element.h"

namespace tf_cuda {
namespace {

// The op table, dtype classes, shapes and conv/pool geometry are the plugin kit's
// (include/tinyfin/plugin_kit.hpp).

// ---- Checks ---------------------------------------------------------------------------------------------

// Each check returns OK or a status with the reason in err (err may be NULL: supports()).

// "[2, 3], [3] -> [2, 3]": the operands' shapes, for messages (R11: messages carry the values).
struct OperandsText {
    char text[TF_TEXT_SIZE];
};
OperandsText operands_of(const tf_op_desc &op) {
    OperandsText t{};
    size_t used = 0;
    auto add = [&](const char *fmt, const char *part) {
        if (used < sizeof t.text)
            used += static_cast<size_t>(std::snprintf(t.text + used, sizeof t.text - used, fmt, part));
    };
    for (uint32_t i = 0; i < op.n_inputs; ++i) add(i ? ", %s" : "%s", shape_of(op.inputs[i]).text);
    add(op.n_inputs ? " -> %s" : "-> %s", shape_of(op.outputs[0]).text);
    return t;
}

// run() only: the tensor's elements lie inside a buffer of this device.
tf_status check_memory(const char *name, const char *role, uint32_t i, const tf_tensor_desc &t, const Device &device,
                       tf_error *err) {
    const int64_t n = numel(t);
    if (n == 0) return TF_STATUS_OK;
    if (!t.buffer) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u has no buffer", name, role, i);
    if (t.buffer->device != &device)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u lives on cuda:%d, the op runs on cuda:%d", name, role,
                    i, t.buffer->device->index, device.index);
    uint64_t end = t.offset + dtype_size(t.dtype);
    for (int d = 0; d < t.rank; ++d)
        end += static_cast<uint64_t>(t.shape[d] - 1) * static_cast<uint64_t>(t.strides[d]) * dtype_size(t.dtype);
    if (end > t.buffer->size)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u reaches byte %llu of a %llu-byte buffer", name, role, i,
                    static_cast<unsigned long long>(end), static_cast<unsigned long long>(t.buffer->size));
    return TF_STATUS_OK;
}

// The dtypes of the op this plugin runs: those ops.def defines it on (the dtypes column and the
// kind's rule), less this plugin's own limits below; OWN ops add their rule of shared dtypes.
bool dtypes_supported(const Device &device, const tf_op_desc &op, OpKind kind) {
    if (!dtypes_defined(op, kind)) return false;
    const tf_tensor_desc *in = op.inputs;
    const int32_t out = op.outputs[0].dtype;
    const int32_t dtype = working_dtype(op, kind);
    auto all_share = [&](uint32_t n_inputs) {
        for (uint32_t i = 0; i < n_inputs; ++i)
            if (in[i].dtype != out) return false;
        return true;
    };
    switch (op.op) {
    case TF_OP_DIV:
    case TF_OP_POW: return is_float(dtype);  // integers: their bad operands are errors cpu reports
    case TF_OP_MATMUL:
        // cuBLAS runs bf16 products on sm_80 and newer only.
        return dtype != TF_DTYPE_BF16 || device.capability >= 80;
    case TF_OP_CONV2D:
    case TF_OP_CONV2D_GRAD_INPUT:
    case TF_OP_CONV2D_GRAD_WEIGHT:
        // cuDNN runs bf16 convolutions on sm_80 and newer only.
        return (out != TF_DTYPE_BF16 || device.capability >= 80) && all_share(2);
    case TF_OP_MAX_POOL2D:
    case TF_OP_AVG_POOL2D:
    case TF_OP_AVG_POOL2D_BACKWARD:
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX:
    case TF_OP_ROPE:
    case TF_OP_EMBEDDING_BACKWARD:
    case TF_OP_CROSS_ENTROPY:
    case TF_OP_EMBEDDING: return all_share(1);
    case TF_OP_MAX_POOL2D_BACKWARD:
    case TF_OP_RMS_NORM: return all_share(2);
    case TF_OP_LAYER_NORM: return all_share(3);
    case TF_OP_ATTENTION: return all_share(is_absent(in[3]) ? 3 : 4);  // the mask may be absent
    default:
        // UNARY and BINARY: the ops element.h computes. The other kinds (the kind's rule above)
        // and one_hot; the optimizer ops: check_own (dense f32 operands only).
        return (kind != OpKind::UNARY && kind != OpKind::BINARY) || implements_elementwise(op.op);
    }
}

// attention: q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], mask [..., Tq, Tk] or absent ->
// [..., Tq, Dv], batch axes already expanded to one shape by the core.
tf_status check_attention(const tf_op_desc &op, const char *name, tf_error *err) {
    if (!attention_shapes_fit(op))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: shapes do not form q, k, v, mask -> out (got %s)", name,
                    operands_of(op).text);
    const tf_tensor_desc &k = op.inputs[1];
    const int r = k.rank;
    if (k.shape[r - 2] > attention_max_keys)
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: %lld keys, the cuda kernel takes at most %lld", name,
                    static_cast<long long>(k.shape[r - 2]), static_cast<long long>(attention_max_keys));
    return TF_STATUS_OK;
}

// Shapes of the OWN ops, as the core builds them (ops.def and core/ops_nn.cpp).
tf_status check_own(const tf_op_desc &op, const char *name, tf_error *err) {
    const tf_tensor_desc *in = op.inputs;
    const tf_tensor_desc &out = op.outputs[0];
    auto bad = [&](const char *what) {
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s (got %s)", name, what, operands_of(op).text);
    };
    switch (op.op) {
    case TF_OP_ADAMW_STEP:
    case TF_OP_SGD_STEP:
        // In-out outputs of the gradient's shape; the kernel walks them as one dense f32 run.
        for (uint32_t i = 0; i < op.n_outputs; ++i) {
            if (tf_status s = check_tensor(name, "output", i, op.outputs[i], false, err); s != TF_STATUS_OK) return s;
            if (!same_shape(op.outputs[i], in[0])) return bad("operand shapes differ");
            if (op.outputs[i].dtype != TF_DTYPE_F32 || !is_contiguous(op.outputs[i]))
                return fail(err, TF_STATUS_UNSUPPORTED, "%s: cuda kernel for dense f32 operands only", name);
        }
        if (in[0].dtype != TF_DTYPE_F32 || !is_contiguous(in[0]))
            return fail(err, TF_STATUS_UNSUPPORTED, "%s: cuda kernel for dense f32 operands only", name);
        return TF_STATUS_OK;
    case TF_OP_CONV2D:
    case TF_OP_CONV2D_GRAD_INPUT:
    case TF_OP_CONV2D_GRAD_WEIGHT: return check_conv_call(name, op, err);
    case TF_OP_MAX_POOL2D:
    case TF_OP_MAX_POOL2D_BACKWARD:
    case TF_OP_AVG_POOL2D:
    case TF_OP_AVG_POOL2D_BACKWARD: return check_pool_call(name, op, err);
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX: {
        const int32_t axis = params_of<tf_params_axis>(op).axis;
        if (in[0].rank < 1 || axis < 0 || axis >= in[0].rank || !same_shape(in[0], out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axis %d does not fit %s", name, axis,
                        operands_of(op).text);
        return TF_STATUS_OK;
    }
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM: {
        const int32_t n = params_of<tf_params_norm>(op).n_axes;
        const tf_tensor_desc &x = in[0];
        if (n < 1 || n > x.rank || !same_shape(x, out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: n_axes %d does not fit %s", name, n,
                        operands_of(op).text);
        for (uint32_t k = 1; k < op.n_inputs; ++k) {
            if (in[k].rank != n) return bad("weight and bias must have the normalised shape");
            for (int i = 0; i < n; ++i)
                if (in[k].shape[i] != x.shape[x.rank - n + i])
                    return bad("weight and bias must have the normalised shape");
        }
        return TF_STATUS_OK;
    }
    case TF_OP_ROPE: {
        const auto &p = params_of<tf_params_rope>(op);
        if (in[0].rank < 2 || in[0].shape[in[0].rank - 1] % 2 != 0 || !same_shape(in[0], out) || !(p.theta > 0))
            return bad("needs x [..., T, D] with D even and theta > 0");
        return TF_STATUS_OK;
    }
    case TF_OP_EMBEDDING:
    case TF_OP_EMBEDDING_BACKWARD: {
        const bool forward = op.op == TF_OP_EMBEDDING;
        const tf_tensor_desc &w = forward ? in[0] : out;
        const tf_tensor_desc &rows = forward ? out : in[0];  // [..., D]
        const tf_tensor_desc &idx = in[1];
        if (w.rank != 2 || rows.rank != idx.rank + 1 || rows.shape[rows.rank - 1] != w.shape[1])
            return bad("shapes do not form weight [V, D], indices [...], rows [..., D]");
        for (int i = 0; i < idx.rank; ++i)
            if (rows.shape[i] != idx.shape[i]) return bad("rows do not match the indices' shape");
        return TF_STATUS_OK;
    }
    case TF_OP_CROSS_ENTROPY: {
        const auto &p = params_of<tf_params_cross_entropy>(op);
        if (in[0].rank != 2 || !shape_is(in[1], {in[0].shape[0]})) return bad("needs logits [N, C] and labels [N]");
        if (p.reduction == TF_REDUCTION_NONE
                ? !shape_is(out, {in[0].shape[0]})
                : (p.reduction != TF_REDUCTION_MEAN && p.reduction != TF_REDUCTION_SUM) || out.rank != 0)
            return bad("output shape does not fit the reduction");
        return TF_STATUS_OK;
    }
    case TF_OP_ONE_HOT: {
        const int32_t classes = params_of<tf_params_one_hot>(op).num_classes;
        if (classes < 1 || out.rank != in[0].rank + 1 || out.shape[out.rank - 1] != classes)
            return bad("output must be [..., num_classes]");
        for (int i = 0; i < in[0].rank; ++i)
            if (out.shape[i] != in[0].shape[i]) return bad("output must be [..., num_classes]");
        return TF_STATUS_OK;
    }
    case TF_OP_ATTENTION: return check_attention(op, name, err);
    default: return fail(err, TF_STATUS_UNSUPPORTED, "%s: not supported by the cuda plugin (op id %u)", name, op.op);
    }
}

// Everything supports() answers and run() relies on; with_memory adds run()'s buffer checks.
tf_status check(const Device &device, const tf_op_desc *op, bool with_memory, tf_error *err) {
    OpRule rule;
    if (tf_status s = check_call(op, &rule, err); s != TF_STATUS_OK) return s;
    const char *name = rule.name;
    if (tf_status s = check_tensors(name, *op, false, err); s != TF_STATUS_OK) return s;

    const tf_tensor_desc *in = op->inputs;
    const tf_tensor_desc &out = op->outputs[0];
    switch (rule.kind) {
    case OpKind::UNARY:
    case OpKind::COPY:
        if (!same_shape(in[0], out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: input and output shapes differ (%s)", name,
                        operands_of(*op).text);
        break;
    case OpKind::BINARY:
    case OpKind::COMPARE:
    case OpKind::WHERE:
        for (uint32_t i = 0; i < op->n_inputs; ++i)
            if (!same_shape(in[i], out))
                return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: inputs are not broadcast to the output (%s)", name,
                            operands_of(*op).text);
        break;
    case OpKind::REDUCE: {
        const uint32_t mask = reduce_axes_mask(*op);
        if (in[0].rank != out.rank || (in[0].rank < 32 && (mask >> in[0].rank) != 0))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axes mask 0x%x does not fit rank %d", name, mask,
                        in[0].rank);
        for (int i = 0; i < out.rank; ++i) {
            if (out.shape[i] != ((mask >> i & 1) ? 1 : in[0].shape[i]))
                return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output shape does not fit axes mask 0x%x (%s)", name,
                            mask, operands_of(*op).text);
            // max and min have no value for an empty reduction: the cpu plugin reports it.
            if ((op->op == TF_OP_MAX || op->op == TF_OP_MIN) && (mask >> i & 1) && in[0].shape[i] == 0)
                return fail(err, TF_STATUS_UNSUPPORTED, "%s: reduced axis %d has size 0", name, i);
        }
        break;
    }
    case OpKind::ARG: {
        const int32_t axis = params_of<tf_params_axis>(*op).axis;
        if (axis < 0 || axis >= in[0].rank || out.rank != in[0].rank)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axis %d does not fit %s", name, axis,
                        operands_of(*op).text);
        for (int i = 0; i < out.rank; ++i)
            if (out.shape[i] != (i == axis ? 1 : in[0].shape[i]))
                return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output shape does not fit axis %d (%s)", name, axis,
                            operands_of(*op).text);
        if (in[0].shape[axis] == 0) return fail(err, TF_STATUS_UNSUPPORTED, "%s: axis %d has size 0", name, axis);
        break;
    }
    case OpKind::MATMUL: {
        const int r = out.rank;
        bool ok = r >= 2 && in[0].rank == r && in[1].rank == r;
        for (int i = 0; ok && i < r - 2; ++i) ok = in[0].shape[i] == out.shape[i] && in[1].shape[i] == out.shape[i];
        ok = ok && in[0].shape[r - 2] == out.shape[r - 2] && in[1].shape[r - 1] == out.shape[r - 1] &&
             in[0].shape[r - 1] == in[1].shape[r - 2];
        if (!ok)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: shapes do not form [..., M, K] x [..., K, N] (got %s)",
                        name, operands_of(*op).text);
        break;
    }
    case OpKind::FILL: break;
    case OpKind::OWN:
        if (tf_status s = check_own(*op, name, err); s != TF_STATUS_OK) return s;
        break;
    }
    if (!dtypes_supported(device, *op, rule.kind))
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: no cuda kernel for %s -> %s", name,
                    dtype_name(op->n_inputs > 0 ? in[0].dtype : out.dtype), dtype_name(out.dtype));
    if (op->op == TF_OP_MATMUL && !matmul_supported(device, *op))
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: a layout cuBLAS cannot take without a copy (%s)", name,
                    operands_of(*op).text);
    if (rule.kind == OpKind::OWN && op->op <= TF_OP_CONV2D_GRAD_WEIGHT && !conv_supported(device, *op))
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: a shape beyond cuDNN's int limits (%s)", name,
                    operands_of(*op).text);
    if (!with_memory) return TF_STATUS_OK;
    for (uint32_t i = 0; i < op->n_inputs; ++i) {
        if (is_absent(in[i])) continue;  // an optional input left out: no memory (check_call allowed it)
        if (tf_status s = check_memory(name, "input", i, in[i], device, err); s != TF_STATUS_OK) return s;
    }
    for (uint32_t i = 0; i < op->n_outputs; ++i)
        if (tf_status s = check_memory(name, "output", i, op->outputs[i], device, err); s != TF_STATUS_OK) return s;
    return TF_STATUS_OK;
}

// ---- Geometry from descriptors -------------------------------------------------------------------------

// Strided<N> over out's shape for the operands' strides in order.
template <int N>
Strided<N> strided(const tf_tensor_desc &shape_of, std::initializer_list<const tf_tensor_desc *> operands) {
    const int64_t *strides[N];
    int k = 0;
    for (const tf_tensor_desc *t : operands) strides[k++] = t->strides;
    return make_strided<N>(shape_of.rank, shape_of.shape, strides);
}

tf_status launched(tf_error *err, const char *name, cudaError_t e) {
    if (e == cudaSuccess) return TF_STATUS_OK;
    char what[64];
    std::snprintf(what, sizeof what, "%s: kernel launch", name);
    return cuda_fail(err, what, e);
}

PoolArgs pool_args(const tf_op_desc &op) {
    const auto &p = params_of<tf_params_pool2d>(op);
    const bool forward = op.op == TF_OP_MAX_POOL2D || op.op == TF_OP_AVG_POOL2D;
    const tf_tensor_desc &x = forward                              ? op.inputs[0]
                              : op.op == TF_OP_MAX_POOL2D_BACKWARD ? op.inputs[1]
                                                                   : op.outputs[0];
    const tf_tensor_desc &y = forward ? op.outputs[0] : op.inputs[0];
    PoolArgs a{};
    a.n = x.shape[0];
    a.c = x.shape[1];
    a.h = x.shape[2];
    a.w = x.shape[3];
    a.oh = y.shape[2];
    a.ow = y.shape[3];
    for (int i = 0; i < 4; ++i) {
        a.x_strides[i] = x.strides[i];
        a.y_strides[i] = y.strides[i];
        a.dx_strides[i] = forward ? 0 : op.outputs[0].strides[i];
    }
    for (int i = 0; i < 2; ++i) {
        a.kernel[i] = p.kernel[i];
        a.stride[i] = p.stride[i];
        a.padding[i] = p.padding[i];
    }
    a.count_include_pad = p.count_include_pad;
    return a;
}

// ---- run -------------------------------------------------------------------------------------------------

tf_status run_checked(Device &device, const tf_op_desc &op, tf_error *err) {
    const char *name = op_name(op.op);
    cudaStream_t stream = device.stream.get();
    const tf_tensor_desc *in = op.inputs;
    const tf_tensor_desc &out = op.outputs[0];
    void *y = address_of(out);
    // The kinds of ops.def first: each kind is one launcher that switches on the op itself.
    OpRule rule{};
    find_op_rule(op.op, &rule);
    switch (rule.kind) {
    case OpKind::BINARY:
        return launched(err, name,
                        launch_binary(stream, op.op, out.dtype, strided<3>(out, {&out, &in[0], &in[1]}), y,
                                      address_of(in[0]), address_of(in[1])));
    case OpKind::COMPARE:
        return launched(err, name,
                        launch_compare(stream, op.op, in[0].dtype, strided<3>(out, {&out, &in[0], &in[1]}), y,
                                       address_of(in[0]), address_of(in[1])));
    case OpKind::WHERE:
        return launched(err, name,
                        launch_where(stream, out.dtype, strided<4>(out, {&out, &in[0], &in[1], &in[2]}), y,
                                     address_of(in[0]), address_of(in[1]), address_of(in[2])));
    case OpKind::UNARY: {
        ClampBounds bounds{};
        if (op.op == TF_OP_CLAMP) {
            const auto &p = params_of<tf_params_clamp>(op);
            const bool wide = out.dtype == TF_DTYPE_I64;
            bounds.lo = static_cast<float>(p.min);
            bounds.hi = static_cast<float>(p.max);
            bounds.ilo = int_clamp_bound(p.min, true, wide);
            bounds.ihi = int_clamp_bound(p.max, false, wide);
        }
        return launched(
            err, name,
            launch_unary(stream, op.op, out.dtype, strided<2>(out, {&out, &in[0]}), y, address_of(in[0]), bounds));
    }
    case OpKind::FILL:
        return launched(err, name,
                        launch_fill(stream, out.dtype, strided<1>(out, {&out}), y,
                                    fill_bits(out.dtype, params_of<tf_params_fill>(op).value)));
    case OpKind::COPY:
        return launched(
            err, name,
            launch_copy(stream, out.dtype, in[0].dtype, strided<2>(out, {&out, &in[0]}), y, address_of(in[0])));
    case OpKind::REDUCE: {
        const bool var = op.op == TF_OP_VAR;
        const uint32_t mask = reduce_axes_mask(op);
        // The output's strides along reduced axes are never used: 0 keeps them out of the sums.
        int64_t out_strides[TF_MAX_RANK] = {};
        for (int i = 0; i < out.rank; ++i) out_strides[i] = (mask >> i & 1) ? 0 : out.strides[i];
        const int64_t *strides[2] = {out_strides, in[0].strides};
        const RowGeom<2> g = make_rows<2>(in[0].rank, in[0].shape, strides, mask);
        return launched(err, name,
                        launch_reduce(stream, op.op, out.dtype, g, y, address_of(in[0]),
                                      var ? params_of<tf_params_var>(op).correction : 0.0));
    }
    case OpKind::ARG: {
        const int32_t axis = params_of<tf_params_axis>(op).axis;
        int64_t out_strides[TF_MAX_RANK] = {};
        for (int i = 0; i < out.rank; ++i) out_strides[i] = i == axis ? 0 : out.strides[i];
        const int64_t *strides[2] = {out_strides, in[0].strides};
        const RowGeom<2> g = make_rows<2>(in[0].rank, in[0].shape, strides, 1u << axis);
        return launched(err, name, launch_arg(stream, op.op, in[0].dtype, g, y, address_of(in[0])));
    }
    case OpKind::MATMUL: return matmul_run(device, op, err);
    case OpKind::OWN: break;
    }
    switch (op.op) {
    case TF_OP_CONV2D:
    case TF_OP_CONV2D_GRAD_INPUT:
    case TF_OP_CONV2D_GRAD_WEIGHT: return conv_run(device, op, err);
    case TF_OP_MAX_POOL2D:
        return launched(err, name, launch_max_pool(stream, out.dtype, pool_args(op), y, address_of(in[0])));
    case TF_OP_MAX_POOL2D_BACKWARD:
        return launched(
            err, name,
            launch_max_pool_backward(stream, out.dtype, pool_args(op), y, address_of(in[0]), address_of(in[1])));
    case TF_OP_AVG_POOL2D:
        return launched(err, name, launch_avg_pool(stream, out.dtype, pool_args(op), y, address_of(in[0])));
    case TF_OP_AVG_POOL2D_BACKWARD:
        return launched(err, name, launch_avg_pool_backward(stream, out.dtype, pool_args(op), y, address_of(in[0])));
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX: {
        const int64_t *strides[2] = {out.strides, in[0].strides};
        const RowGeom<2> g = make_rows<2>(in[0].rank, in[0].shape, strides, 1u << params_of<tf_params_axis>(op).axis);
        return launched(err, name,
                        launch_softmax(stream, op.op == TF_OP_LOG_SOFTMAX, out.dtype, g, y, address_of(in[0])));
    }
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM: {
        const int32_t n = params_of<tf_params_norm>(op).n_axes;
        const int r = in[0].rank;
        // weight and bias: strides 0 along the leading axes, their own along the normalised ones.
        int64_t w_strides[TF_MAX_RANK] = {}, b_strides[TF_MAX_RANK] = {};
        for (int i = r - n; i < r; ++i) {
            w_strides[i] = in[1].strides[i - (r - n)];
            if (op.n_inputs > 2) b_strides[i] = in[2].strides[i - (r - n)];
        }
        const int64_t *strides[4] = {out.strides, in[0].strides, w_strides, b_strides};
        const uint32_t mask = ((1u << r) - 1) & ~((1u << (r - n)) - 1);
        const RowGeom<4> g = make_rows<4>(r, in[0].shape, strides, mask);
        return launched(err, name,
                        launch_norm(stream, out.dtype, g, y, address_of(in[0]), address_of(in[1]),
                                    op.n_inputs > 2 ? address_of(in[2]) : nullptr, params_of<tf_params_norm>(op).eps));
    }
    case TF_OP_ATTENTION: {
        const auto &p = params_of<tf_params_attention>(op);
        const tf_tensor_desc &q = in[0], &k = in[1], &v = in[2], &m = in[3];
        const bool masked = !is_absent(m);  // absent: the kernel gets a NULL mask and adds nothing
        const int r = q.rank;
        const int64_t *strides[5] = {out.strides, q.strides, k.strides, v.strides, m.strides};
        const Strided<5> lead = make_strided<5>(r - 2, out.shape, strides);
        AttentionArgs a{};
        a.tq = q.shape[r - 2];
        a.tk = k.shape[r - 2];
        a.d = q.shape[r - 1];
        a.dv = v.shape[r - 1];
        a.q_stride_t = q.strides[r - 2];
        a.q_stride_d = q.strides[r - 1];
        a.k_stride_t = k.strides[r - 2];
        a.k_stride_d = k.strides[r - 1];
        a.v_stride_t = v.strides[r - 2];
        a.v_stride_d = v.strides[r - 1];
        a.mask_stride_q = masked ? m.strides[r - 2] : 0;
        a.mask_stride_k = masked ? m.strides[r - 1] : 0;
        a.out_stride_t = out.strides[r - 2];
        a.out_stride_d = out.strides[r - 1];
        a.scale = static_cast<float>(p.scale);
        a.causal = p.causal;
        return launched(err, name,
                        launch_attention(stream, out.dtype, lead, a, y, address_of(q), address_of(k), address_of(v),
                                         masked ? address_of(m) : nullptr));
    }
    case TF_OP_ROPE: {
        const auto &p = params_of<tf_params_rope>(op);
        const int r = in[0].rank;
        const int64_t *strides[2] = {out.strides, in[0].strides};
        const Strided<2> lead = make_strided<2>(r - 2, in[0].shape, strides);
        RopeArgs a{};
        a.t = in[0].shape[r - 2];
        a.d = in[0].shape[r - 1];
        a.x_stride_t = in[0].strides[r - 2];
        a.x_stride_d = in[0].strides[r - 1];
        a.y_stride_t = out.strides[r - 2];
        a.y_stride_d = out.strides[r - 1];
        a.position_offset = p.position_offset;
        a.theta = p.theta;
        a.interleaved = p.interleaved;
        a.inverse = p.inverse;
        return launched(err, name, launch_rope(stream, out.dtype, lead, a, y, address_of(in[0])));
    }
    case TF_OP_EMBEDDING:
    case TF_OP_EMBEDDING_BACKWARD: {
        const bool forward = op.op == TF_OP_EMBEDDING;
        const tf_tensor_desc &w = forward ? in[0] : out;
        const tf_tensor_desc &rows = forward ? out : in[0];
        const tf_tensor_desc &idx = in[1];
        int64_t idx_strides[TF_MAX_RANK] = {};
        for (int i = 0; i < idx.rank; ++i) idx_strides[i] = idx.strides[i];
        const int64_t *strides[2] = {rows.strides, idx_strides};
        const RowGeom<2> g = make_rows<2>(rows.rank, rows.shape, strides, 1u << (rows.rank - 1));
        const EmbeddingArgs a{w.shape[0], w.strides[0], w.strides[1]};
        if (forward)
            return launched(err, name,
                            launch_embedding(stream, out.dtype, idx.dtype, g, a, y, address_of(w), address_of(idx),
                                             device.data_error_device));
        if (tf_status s = zero_fill(device, out, err); s != TF_STATUS_OK) return s;
        return launched(err, name,
                        launch_embedding_backward(stream, out.dtype, idx.dtype, g, a, y, address_of(rows),
                                                  address_of(idx), device.data_error_device));
    }
    case TF_OP_CROSS_ENTROPY: {
        const auto &p = params_of<tf_params_cross_entropy>(op);
        CrossEntropyArgs a{};
        a.n = in[0].shape[0];
        a.c = in[0].shape[1];
        a.x_stride_n = in[0].strides[0];
        a.x_stride_c = in[0].strides[1];
        a.label_stride = in[1].strides[0];
        a.out_stride = out.rank == 1 ? out.strides[0] : 0;
        a.ignore_index = p.ignore_index;
        a.reduction = p.reduction;
        Scratch scratch;
        if (p.reduction != TF_REDUCTION_NONE)
            if (cudaError_t e = scratch.allocate(device, static_cast<uint64_t>(a.n) * 2 * sizeof(double));
                e != cudaSuccess)
                return cuda_fail(err, "cross_entropy: scratch", e);
        return launched(err, name,
                        launch_cross_entropy(stream, out.dtype, in[1].dtype, a, y, address_of(in[0]), address_of(in[1]),
                                             static_cast<double *>(scratch.get()), device.data_error_device));
    }
    case TF_OP_ONE_HOT: {
        const tf_tensor_desc &labels = in[0];
        int64_t label_strides[TF_MAX_RANK] = {};
        for (int i = 0; i < labels.rank; ++i) label_strides[i] = labels.strides[i];
        const int64_t *strides[2] = {out.strides, label_strides};
        const RowGeom<2> g = make_rows<2>(out.rank, out.shape, strides, 1u << (out.rank - 1));
        return launched(err, name,
                        launch_one_hot(stream, out.dtype, labels.dtype, g, params_of<tf_params_one_hot>(op).num_classes,
                                       fill_bits(out.dtype, 1.0), y, address_of(labels), device.data_error_device));
    }
    case TF_OP_ADAMW_STEP: {
        const auto &p = params_of<tf_params_adamw_step>(op);
        const AdamWArgs a{tf_kit::adamw_f32(p), p.has_state, p.decays};
        return launched(err, name,
                        launch_adamw(stream, numel(out), a, static_cast<float *>(y),
                                     static_cast<const float *>(address_of(in[0])),
                                     static_cast<float *>(address_of(op.outputs[1])),
                                     static_cast<float *>(address_of(op.outputs[2]))));
    }
    case TF_OP_SGD_STEP: {
        const auto &p = params_of<tf_params_sgd_step>(op);
        const SgdArgs a{p.has_state,
                        p.decays,
                        p.nesterov,
                        static_cast<float>(p.lr),
                        static_cast<float>(p.momentum),
                        static_cast<float>(p.weight_decay)};
        return launched(err, name,
                        launch_sgd(stream, numel(out), a, static_cast<float *>(y),
                                   static_cast<const float *>(address_of(in[0])),
                                   static_cast<float *>(address_of(op.outputs[1]))));
    }
    default: return fail(err, TF_STATUS_UNSUPPORTED, "%s: no cuda kernel (op id %u)", name, op.op);
    }
}

}  // namespace

tf_status zero_fill(Device &device, const tf_tensor_desc &t, tf_error *err) {
    return launched(err, "zero fill", launch_fill(device.stream.get(), t.dtype, strided<1>(t, {&t}), address_of(t), 0));
}

int32_t CudaPlugin::supports(int32_t index, const tf_op_desc *op) {
    return guarded_answer([&] {
        Context *context = g_context;
        if (!context || index < 0 || static_cast<size_t>(index) >= context->devices.size()) return false;
        return check(*context->devices[static_cast<size_t>(index)], op, false, nullptr) == TF_STATUS_OK;
    });
}

tf_status CudaPlugin::run(int32_t index, const tf_op_desc *op, tf_error *err) {
    return guarded(err, op ? op_name(op->op) : "run", [&]() -> tf_status {
        Device *device = device_at(index, err);
        if (!device) return TF_STATUS_INVALID_ARGUMENT;
        if (tf_status s = check(*device, op, true, err); s != TF_STATUS_OK) return s;
        std::lock_guard lock(device->mutex);
        if (cudaError_t e = make_current(*device); e != cudaSuccess) return cuda_fail(err, "run: cudaSetDevice", e);
        return run_checked(*device, *op, err);
    });
}

}  // namespace tf_cuda
