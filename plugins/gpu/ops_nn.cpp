// Neural-network ops: pooling (pool2d.comp), softmax, norms and cross_entropy (rows.comp),
// one_hot, embedding and rope (index.comp), attention (attention.comp).
#include "kernels.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

namespace tf_kernels {

namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// ---- Pooling ---------------------------------------------------------------------------------------

bool pool_supports(const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0];
    for (uint32_t i = 0; i < op.n_inputs; ++i)
        if (op.inputs[i].dtype != out.dtype || op.inputs[i].rank != 4) return false;
    if (out.rank != 4) return false;
    const auto &p = *static_cast<const tf_params_pool2d *>(op.params);
    if (!tf_kit::pool_params_valid(p) || !tf_kit::pool_shapes_fit(op, p)) return false;
    // The [N, C, H, W] tensor, whichever direction.
    const tf_tensor_desc *big = tf_kit::pool_operands_of(op).x;
    return numel(*big) < (int64_t{1} << 31) && big->shape[2] < (int64_t{1} << 30) && big->shape[3] < (int64_t{1} << 30);
}

void pool_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0];
    const int64_t count = numel(out);
    if (count == 0) return;
    const char *name = op_name(op.op);
    const auto &pp = *static_cast<const tf_params_pool2d *>(op.params);
    TensorBinding b[3];
    b[0] = dev.bind(out, name, "output", 0);
    for (uint32_t i = 0; i < op.n_inputs; ++i) b[1 + i] = dev.bind(op.inputs[i], name, "input", i);
    PoolParams p{};
    p.count = u32(count);
    std::ranges::copy(pp.kernel, p.kernel);
    std::ranges::copy(pp.stride, p.stride);
    std::ranges::copy(pp.padding, p.pad);
    p.include_pad = pp.count_include_pad ? 1 : 0;
    p.out_base = b[0].base;
    const tf_tensor_desc *x = nullptr, *dy = nullptr, *big = nullptr, *small = nullptr;
    uint32_t mode = 0;
    switch (op.op) {
    case TF_OP_MAX_POOL2D: mode = 0, x = &op.inputs[0], big = x, small = &out; break;
    case TF_OP_AVG_POOL2D: mode = 2, x = &op.inputs[0], big = x, small = &out; break;
    case TF_OP_MAX_POOL2D_BACKWARD: mode = 1, dy = &op.inputs[0], x = &op.inputs[1], big = &out, small = dy; break;
    default: mode = 3, dy = &op.inputs[0], big = &out, small = dy; break;
    }
    p.n = u32(big->shape[0]);
    p.c = u32(big->shape[1]);
    p.h = u32(big->shape[2]);
    p.w = u32(big->shape[3]);
    p.oh = u32(small->shape[2]);
    p.ow = u32(small->shape[3]);
    if (x) p.x_base = mode == 1 ? b[2].base : b[1].base;
    if (dy) p.dy_base = b[1].base;
    for (int i = 0; i < 4; ++i) {
        if (x) p.x_st[i] = u32(x->strides[i]);
        if (dy) p.y_st[i] = u32(dy->strides[i]);
        p.out_st[i] = u32(out.strides[i]);
    }
    // The output is walked: its columns, rows and channels.
    const uint32_t walked[3] = {u32(out.shape[3]), u32(out.shape[2]), p.c};
    for (int i = 0; i < 3; ++i) {
        const Magic d = magic_of(walked[i]);
        p.div_m[i] = d.m;
        p.div_s[i] = d.s;
    }
    dev.dispatch({key_of(Shader::pool2d, mode, out.dtype),
                  &p,
                  sizeof p,
                  b,
                  1 + op.n_inputs,
                  {groups_for(dev.caps(), u32(count), 256), 1, 1}});
}

// ---- Row ops ----------------------------------------------------------------------------------------

bool rows_supports(const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0];
    const tf_tensor_desc &x = op.inputs[0];
    // x, weight, bias and y of one dtype (f16 and bf16 computed in f32 in the kernel).
    if (out.dtype != x.dtype) return false;
    switch (op.op) {
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX: {
        const int32_t axis = static_cast<const tf_params_axis *>(op.params)->axis;
        return same_shape(x, out) && axis >= 0 && axis < x.rank;
    }
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM: {
        const int32_t n = static_cast<const tf_params_norm *>(op.params)->n_axes;
        if (!same_shape(x, out) || n < 1 || n > x.rank) return false;
        for (uint32_t i = 1; i < op.n_inputs; ++i) {
            const tf_tensor_desc &w = op.inputs[i];
            if (w.dtype != x.dtype || w.rank != n) return false;
            for (int d = 0; d < n; ++d)
                if (w.shape[d] != x.shape[x.rank - n + d]) return false;
        }
        return true;
    }
    case TF_OP_CROSS_ENTROPY: {
        const auto &p = *static_cast<const tf_params_cross_entropy *>(op.params);
        const tf_tensor_desc &labels = op.inputs[1];
        if (x.rank != 2 || labels.rank != 1 || labels.shape[0] != x.shape[0]) return false;
        if (p.reduction == TF_REDUCTION_NONE) return out.rank == 1 && out.shape[0] == x.shape[0];
        return (p.reduction == TF_REDUCTION_MEAN || p.reduction == TF_REDUCTION_SUM) && out.rank == 0;
    }
    default: return false;
    }
}

void rows_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0], &x = op.inputs[0];
    const char *name = op_name(op.op);
    RowsParams p{};
    TensorBinding b[4];
    b[0] = dev.bind(out, name, "output", 0);
    for (uint32_t i = 0; i < op.n_inputs; ++i) b[1 + i] = dev.bind(op.inputs[i], name, "input", i);
    p.x_base = b[1].base;
    p.y_base = b[0].base;

    // Outer axes (rows) walk x and y; inner axes (a row's elements) walk x, y, weight and bias.
    int64_t o_shape[TF_MAX_RANK], o_x[TF_MAX_RANK], o_y[TF_MAX_RANK];
    int64_t i_shape[TF_MAX_RANK], i_x[TF_MAX_RANK], i_y[TF_MAX_RANK], i_w[TF_MAX_RANK] = {}, i_b[TF_MAX_RANK] = {};
    int outer = 0, inner = 0;
    const char *reporting = nullptr;
    uint32_t mode = 0;
    switch (op.op) {
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX: {
        const int32_t axis = static_cast<const tf_params_axis *>(op.params)->axis;
        mode = op.op == TF_OP_SOFTMAX ? 0 : 1;
        for (int d = 0; d < x.rank; ++d) {
            if (d == axis) {
                i_shape[inner] = x.shape[d], i_x[inner] = x.strides[d], i_y[inner++] = out.strides[d];
            } else {
                o_shape[outer] = x.shape[d], o_x[outer] = x.strides[d], o_y[outer++] = out.strides[d];
            }
        }
        break;
    }
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM: {
        const auto &np = *static_cast<const tf_params_norm *>(op.params);
        mode = op.op == TF_OP_LAYER_NORM ? 2 : 3;
        p.eps = static_cast<float>(np.eps);
        p.w_base = b[2].base;
        if (op.op == TF_OP_LAYER_NORM) p.b_base = b[3].base;
        const int first = x.rank - np.n_axes;
        for (int d = 0; d < x.rank; ++d) {
            if (d < first) {
                o_shape[outer] = x.shape[d], o_x[outer] = x.strides[d], o_y[outer++] = out.strides[d];
                continue;
            }
            i_shape[inner] = x.shape[d], i_x[inner] = x.strides[d], i_y[inner] = out.strides[d];
            i_w[inner] = op.inputs[1].strides[d - first];
            if (op.op == TF_OP_LAYER_NORM) i_b[inner] = op.inputs[2].strides[d - first];
            ++inner;
        }
        break;
    }
    default: {  // cross_entropy
        const auto &cp = *static_cast<const tf_params_cross_entropy *>(op.params);
        const tf_tensor_desc &labels = op.inputs[1];
        mode = 4;
        p.reduction = static_cast<uint32_t>(cp.reduction);
        p.label_dtype = static_cast<uint32_t>(labels.dtype);
        p.label_base = b[2].base;
        p.label_stride = u32(labels.strides[0]);
        p.ignore_lo = static_cast<uint32_t>(static_cast<uint64_t>(cp.ignore_index));
        p.ignore_hi = static_cast<uint32_t>(static_cast<uint64_t>(cp.ignore_index) >> 32);
        o_shape[0] = x.shape[0], o_x[0] = x.strides[0], o_y[0] = out.rank == 1 ? out.strides[0] : 0;
        i_shape[0] = x.shape[1], i_x[0] = x.strides[1], i_y[0] = 0;
        outer = inner = 1;
        reporting = "cross_entropy";
        break;
    }
    }
    int64_t rows = 1, len = 1;
    for (int d = 0; d < outer; ++d) rows *= o_shape[d];
    for (int d = 0; d < inner; ++d) len *= i_shape[d];
    const bool reduces = mode == 4 && p.reduction != TF_REDUCTION_NONE;
    // Nothing to write, except a reduced loss over zero rows (mean NaN, sum 0).
    if (!reduces && rows * len == 0) return;
    if (!reduces && numel(out) == 0) return;
    // Merging keeps the kernel's loops short; the label tensor follows the unmerged row axis.
    const int64_t *o_strides[2] = {o_x, o_y};
    const int64_t *i_strides[4] = {i_x, i_y, i_w, i_b};
    const MergedAxes mo = mode == 4 ? MergedAxes{} : merge_axes(outer, o_shape, o_strides, 2);
    const MergedAxes mi = mode == 4 ? MergedAxes{} : merge_axes(inner, i_shape, i_strides, 4);
    if (mode == 4) {
        p.outer_rank = p.inner_rank = 1;
        p.outer_shape[0] = u32(o_shape[0]), p.x_outer[0] = u32(o_x[0]), p.y_outer[0] = u32(o_y[0]);
        p.inner_shape[0] = u32(i_shape[0]), p.x_inner[0] = u32(i_x[0]);
    } else {
        p.outer_rank = u32(mo.rank);
        for (int d = 0; d < mo.rank; ++d)
            p.outer_shape[d] = u32(mo.shape[d]), p.x_outer[d] = u32(mo.strides[0][d]),
            p.y_outer[d] = u32(mo.strides[1][d]);
        // inner() in rows.comp reads stride [0] directly when the rank is 1: keep at least one axis.
        p.inner_rank = u32(mi.rank == 0 ? 1 : mi.rank);
        p.inner_shape[0] = 1;
        for (int d = 0; d < mi.rank; ++d) {
            p.inner_shape[d] = u32(mi.shape[d]);
            p.x_inner[d] = u32(mi.strides[0][d]);
            p.y_inner[d] = u32(mi.strides[1][d]);
            p.w_inner[d] = u32(mi.strides[2][d]);
            p.b_inner[d] = u32(mi.strides[3][d]);
        }
    }
    p.rows = u32(rows);
    p.len = u32(len);
    const uint32_t groups = reduces ? 1 : groups_for(dev.caps(), u32(rows), 256);
    dev.dispatch({key_of(Shader::rows, mode, reduces, p.inner_rank == 1, x.dtype),
                  &p,
                  sizeof p,
                  b,
                  1 + op.n_inputs,
                  {groups, 1, 1},
                  reporting});
}

// ---- Index ops and rope -----------------------------------------------------------------------------

bool index_supports(const DeviceCaps &caps, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0];
    switch (op.op) {
    case TF_OP_ONE_HOT: {
        const tf_tensor_desc &labels = op.inputs[0];
        const int32_t classes = static_cast<const tf_params_one_hot *>(op.params)->num_classes;
        if (classes < 1) return false;
        if (out.rank != labels.rank + 1 || out.shape[out.rank - 1] != classes) return false;
        for (int d = 0; d < labels.rank; ++d)
            if (labels.shape[d] != out.shape[d]) return false;
        return true;
    }
    case TF_OP_EMBEDDING:
    case TF_OP_EMBEDDING_BACKWARD: {
        const bool forward = op.op == TF_OP_EMBEDDING;
        const tf_tensor_desc &weight = forward ? op.inputs[0] : out;
        const tf_tensor_desc &rows = forward ? out : op.inputs[0];  // [..., D]
        const tf_tensor_desc &indices = op.inputs[1];
        // The kernels gather float rows (ops.def allows any dtype for embedding's weight).
        if (!is_float(weight.dtype) || rows.dtype != weight.dtype) return false;
        if (weight.rank != 2 || rows.rank != indices.rank + 1 || rows.shape[rows.rank - 1] != weight.shape[1])
            return false;
        for (int d = 0; d < indices.rank; ++d)
            if (indices.shape[d] != rows.shape[d]) return false;
        // f16 and bf16 gradients sum in a dense f32 copy of the weight, bound whole.
        if (!forward && weight.dtype != TF_DTYPE_F32 &&
            static_cast<uint64_t>(numel(weight)) * 4 + caps.bind_align + 4 > caps.max_binding)
            return false;
        return weight.shape[0] < (int64_t{1} << 31);
    }
    case TF_OP_ROPE: {
        const tf_tensor_desc &x = op.inputs[0];
        const auto &p = *static_cast<const tf_params_rope *>(op.params);
        return is_float(x.dtype) && out.dtype == x.dtype && same_shape(x, out) && x.rank >= 2 &&
               x.shape[x.rank - 1] % 2 == 0 && p.theta > 0;
    }
    default: return false;
    }
}

void index_run(KernelDevice &dev, const tf_op_desc &op);

// embedding_backward into f16 or bf16: the rows' sums accumulate in f32 scratch (the kernel adds
// with compare-and-swap on 32-bit words), then one cast rounds each sum once, as the cpu plugin.
void embedding_backward_16(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0];
    tf_tensor_desc scratch{};
    scratch.struct_size = sizeof scratch;
    scratch.dtype = TF_DTYPE_F32;
    scratch.rank = 2;
    scratch.shape[0] = out.shape[0];
    scratch.shape[1] = out.shape[1];
    scratch.strides[0] = out.shape[1];
    scratch.strides[1] = 1;
    const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(numel(out), 1)) * 4;
    const ScratchBuffer held(dev, bytes);
    scratch.buffer = held.get();
    tf_op_desc sum = op;
    sum.outputs = &scratch;
    index_run(dev, sum);
    elementwise_run(dev, step_desc(TF_OP_CAST, &scratch, out));
}

void index_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0];
    if (op.op == TF_OP_EMBEDDING_BACKWARD && out.dtype != TF_DTYPE_F32) {
        embedding_backward_16(dev, op);
        return;
    }
    const char *name = op_name(op.op);
    // The tensor whose elements the kernel walks: dy for embedding_backward, else the output.
    const tf_tensor_desc &walked = op.op == TF_OP_EMBEDDING_BACKWARD ? op.inputs[0] : out;
    if (op.op == TF_OP_EMBEDDING_BACKWARD) elementwise_fill(dev, out, 0, 0, name);
    const int64_t count = numel(walked);
    if (count == 0) return;
    TensorBinding b[3];
    b[0] = dev.bind(out, name, "output", 0);
    IndexParams p{};
    p.count = u32(count);
    p.rank = u32(walked.rank);
    p.out_base = b[0].base;
    for (int d = 0; d < walked.rank; ++d) {
        p.shape[d] = u32(walked.shape[d]);
        p.out_st[d] = u32(out.strides[d]);
        const Magic divisor = magic_of(p.shape[d]);
        p.div_m[d] = divisor.m;
        p.div_s[d] = divisor.s;
    }
    const char *reporting = name;
    uint32_t mode = 0, idx_dtype = TF_DTYPE_I32;
    // rope's frequency table, released once the dispatch is recorded (free() may come first).
    std::optional<ScratchBuffer> scratch;
    switch (op.op) {
    case TF_OP_ONE_HOT: {
        const tf_tensor_desc &labels = op.inputs[0];
        b[2] = dev.bind(labels, name, "input", 0);
        p.idx_base = b[2].base;  // a sliced label view starts past its buffer's first element
        mode = 0;
        p.limit = u32(static_cast<const tf_params_one_hot *>(op.params)->num_classes);
        idx_dtype = static_cast<uint32_t>(labels.dtype);
        for (int d = 0; d < labels.rank; ++d) p.idx_st[d] = u32(labels.strides[d]);
        break;
    }
    case TF_OP_EMBEDDING:
    case TF_OP_EMBEDDING_BACKWARD: {
        const tf_tensor_desc &indices = op.inputs[1];
        b[1] = dev.bind(op.inputs[0], name, "input", 0);
        b[2] = dev.bind(indices, name, "input", 1);
        idx_dtype = static_cast<uint32_t>(indices.dtype);
        p.in_base = b[1].base;
        p.idx_base = b[2].base;
        for (int d = 0; d < indices.rank; ++d) p.idx_st[d] = u32(indices.strides[d]);
        if (op.op == TF_OP_EMBEDDING) {
            mode = 1;
            p.limit = u32(op.inputs[0].shape[0]);
            p.in_st[0] = u32(op.inputs[0].strides[0]);  // the weight's strides
            p.in_st[1] = u32(op.inputs[0].strides[1]);
        } else {
            mode = 2;
            p.limit = u32(out.shape[0]);
            for (int d = 0; d < walked.rank; ++d) p.in_st[d] = u32(walked.strides[d]);  // dy
            p.out_st[0] = u32(out.strides[0]);  // dweight's strides
            p.out_st[1] = u32(out.strides[1]);
            for (int d = 2; d < TF_MAX_RANK; ++d) p.out_st[d] = 0;
        }
        break;
    }
    default: {  // rope
        const auto &rp = *static_cast<const tf_params_rope *>(op.params);
        b[1] = dev.bind(op.inputs[0], name, "input", 0);
        mode = 3;
        p.in_base = b[1].base;
        for (int d = 0; d < walked.rank; ++d) p.in_st[d] = u32(op.inputs[0].strides[d]);
        p.interleaved = rp.interleaved ? 1 : 0;
        p.inverse = rp.inverse ? 1 : 0;
        // Each pair's frequency in turns, theta^(-2i/D) / 2pi, from the double the cpu plugin
        // uses, as five f32 chunks of 12 significant bits, which hold all 53 bits of the double
        // (index.comp multiplies them by the position exactly).
        const int64_t dim = op.inputs[0].shape[op.inputs[0].rank - 1], half = dim / 2;
        std::vector<float> turns(static_cast<size_t>(5 * half));
        for (int64_t i = 0; i < half; ++i) {
            double f =
                std::pow(rp.theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim)) / (2 * std::numbers::pi);
            for (int j = 0; j < 5; ++j) {
                int e = 0;
                std::frexp(f, &e);
                const double chunk = std::ldexp(std::trunc(std::ldexp(f, 12 - e)), e - 12);
                turns[static_cast<size_t>(5 * i + j)] = static_cast<float>(chunk);
                f -= chunk;
            }
        }
        tf_tensor_desc table{};
        table.struct_size = sizeof table;
        table.dtype = TF_DTYPE_F32;
        table.rank = 1;
        table.shape[0] = 5 * half;
        table.strides[0] = 1;
        const uint64_t bytes = turns.size() * sizeof(float);
        table.buffer = scratch.emplace(dev, bytes).get();
        dev.write(table.buffer, 0, turns.data(), bytes);
        b[2] = dev.bind(table, name, "frequencies", 0);
        p.idx_base = b[2].base;
        p.offset_lo = static_cast<uint32_t>(static_cast<uint64_t>(rp.position_offset));
        p.offset_hi = static_cast<uint32_t>(static_cast<uint64_t>(rp.position_offset) >> 32);
        reporting = nullptr;
        break;
    }
    }
    const int32_t in_dtype = op.op == TF_OP_ONE_HOT ? TF_DTYPE_F32 : op.inputs[0].dtype;
    dev.dispatch({key_of(Shader::index, mode, out.dtype, idx_dtype, in_dtype),
                  &p,
                  sizeof p,
                  b,
                  3,
                  {groups_for(dev.caps(), u32(count), 256), 1, 1},
                  reporting});
}

// ---- Attention --------------------------------------------------------------------------------------

// The mask (input 3) may be absent (TF_TENSOR_ABSENT): the shader then adds nothing and never
// reads slot 4, which is bound to q only because every slot needs a buffer.
bool attention_supports(const DeviceCaps &caps, const tf_op_desc &op) {
    const tf_tensor_desc &q = op.inputs[0], &k = op.inputs[1], &v = op.inputs[2], &m = op.inputs[3];
    const tf_tensor_desc &out = op.outputs[0];
    if (!tf_kit::attention_shapes_fit(op)) return false;
    for (const tf_tensor_desc *t : {&q, &k, &v, &m})
        if (!tf_kit::is_absent(*t) && t->dtype != out.dtype) return false;
    (void)caps;
    return k.shape[k.rank - 2] <= attention_max_keys;
}

void attention_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0];
    if (numel(out) == 0) return;
    const bool masked = !tf_kit::is_absent(op.inputs[3]);
    const tf_tensor_desc &mask = masked ? op.inputs[3] : op.inputs[0];
    const tf_tensor_desc *t[5] = {&out, &op.inputs[0], &op.inputs[1], &op.inputs[2], &mask};
    TensorBinding b[5];
    b[0] = dev.bind(out, "attention", "output", 0);
    for (int i = 0; i < 4; ++i) b[1 + i] = dev.bind(*t[1 + i], "attention", "input", static_cast<uint32_t>(i));
    const int r = out.rank;
    // An absent mask has no strides: zeros merge with any batch axis.
    const int64_t no_strides[TF_MAX_RANK] = {};
    const int64_t *strides[5] = {t[0]->strides, t[1]->strides, t[2]->strides, t[3]->strides,
                                 masked ? t[4]->strides : no_strides};
    const MergedAxes batch = merge_axes(r - 2, out.shape, strides, 5);
    AttentionParams p{};
    p.tq = u32(out.shape[r - 2]);
    p.dv = u32(out.shape[r - 1]);
    p.d = u32(op.inputs[0].shape[r - 1]);
    p.tk = u32(op.inputs[1].shape[r - 2]);
    const auto &ap = *static_cast<const tf_params_attention *>(op.params);
    p.causal = ap.causal ? 1 : 0;
    p.scale = static_cast<float>(ap.scale);
    p.has_mask = masked ? 1 : 0;
    p.batch_rank = u32(batch.rank);
    int64_t rows = p.tq;
    for (int d = 0; d < batch.rank; ++d) {
        p.batch_shape[d] = u32(batch.shape[d]);
        rows *= batch.shape[d];
        for (int s = 0; s < 5; ++s) p.batch_st[s * 6 + d] = u32(batch.strides[s][d]);
    }
    for (int s = 0; s < 5; ++s) {
        p.base[s] = b[s].base;
        p.row_st[s] = u32(t[s]->strides[r - 2]);
        p.col_st[s] = u32(t[s]->strides[r - 1]);
    }
    p.rows = u32(rows);
    dev.dispatch(
        {key_of(Shader::attention, out.dtype), &p, sizeof p, b, 5, {groups_for(dev.caps(), u32(rows), 1), 1, 1}});
}

}  // namespace

bool nn_supports(const DeviceCaps &caps, const tf_op_desc &op) {
    switch (op.op) {
    case TF_OP_MAX_POOL2D:
    case TF_OP_MAX_POOL2D_BACKWARD:
    case TF_OP_AVG_POOL2D:
    case TF_OP_AVG_POOL2D_BACKWARD: return pool_supports(op);
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX:
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM:
    case TF_OP_CROSS_ENTROPY: return rows_supports(op);
    case TF_OP_ONE_HOT:
    case TF_OP_EMBEDDING:
    case TF_OP_EMBEDDING_BACKWARD:
    case TF_OP_ROPE: return index_supports(caps, op);
    case TF_OP_ATTENTION: return attention_supports(caps, op);
    default: return false;
    }
}

void nn_run(KernelDevice &dev, const tf_op_desc &op) {
    switch (op.op) {
    case TF_OP_MAX_POOL2D:
    case TF_OP_MAX_POOL2D_BACKWARD:
    case TF_OP_AVG_POOL2D:
    case TF_OP_AVG_POOL2D_BACKWARD: pool_run(dev, op); return;
    case TF_OP_ATTENTION: attention_run(dev, op); return;
    case TF_OP_ONE_HOT:
    case TF_OP_EMBEDDING:
    case TF_OP_EMBEDDING_BACKWARD:
    case TF_OP_ROPE: index_run(dev, op); return;
    default: rows_run(dev, op); return;
    }
}

}  // namespace tf_kernels
