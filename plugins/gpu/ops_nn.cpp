// Neural-network ops and their rows: pooling (pool2d.comp), softmax, norms and cross_entropy
// (rows.comp), one_hot, embedding and rope (index.comp), attention (attention.comp).
#include "ops.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace tf_gpu {

namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// ---- Pooling ---------------------------------------------------------------------------------------

// pool2d.comp's modes.
enum PoolMode : uint32_t { max_forward = 0, max_backward = 1, avg_forward = 2, avg_backward = 3 };

// Every index the kernel forms fits 32 bits (the op's rule has checked shapes, params, dtypes).
bool pool_accepts(const KernelDevice &, const tf_op_desc &op) {
    // The [N, C, H, W] tensor, whichever direction.
    const tf_tensor_desc *big = tf_kit::pool_operands_of(op).x;
    return numel(*big) < (int64_t{1} << 31) && big->shape[2] < (int64_t{1} << 30) && big->shape[3] < (int64_t{1} << 30);
}

template <PoolMode Mode>
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
    // big [N, C, H, W] and small [N, C, OH, OW]: x and y forward, dx and dy backward.
    const tf_kit::PoolOperands t = tf_kit::pool_operands_of(op);
    const tf_tensor_desc *big = t.x, *small = t.y;
    constexpr bool forward = Mode == max_forward || Mode == avg_forward;
    const tf_tensor_desc *x = forward ? &op.inputs[0] : Mode == max_backward ? &op.inputs[1] : nullptr;
    const tf_tensor_desc *dy = forward ? nullptr : &op.inputs[0];
    constexpr uint32_t mode = Mode;
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

// rows.comp's modes.
enum RowsMode : uint32_t { softmax = 0, log_softmax = 1, layer_norm = 2, rms_norm = 3, cross_entropy = 4 };

// A row op's axes: outer axes (rows) walk x and y; inner axes (a row's elements) walk x, y,
// weight and bias.
struct RowAxes {
    int64_t o_shape[TF_MAX_RANK], o_x[TF_MAX_RANK], o_y[TF_MAX_RANK];
    int64_t i_shape[TF_MAX_RANK], i_x[TF_MAX_RANK], i_y[TF_MAX_RANK], i_w[TF_MAX_RANK] = {}, i_b[TF_MAX_RANK] = {};
    int outer = 0, inner = 0;
};

// A row op being recorded: its parameters, its bindings (output, then its inputs; their bases in
// p) and its axes.
struct RowOp {
    RowsParams p{};
    TensorBinding b[4];
    RowAxes a;

    RowOp(KernelDevice &dev, const tf_op_desc &op) {
        const char *name = op_name(op.op);
        b[0] = dev.bind(op.outputs[0], name, "output", 0);
        for (uint32_t i = 0; i < op.n_inputs; ++i) b[1 + i] = dev.bind(op.inputs[i], name, "input", i);
        p.x_base = b[1].base;
        p.y_base = b[0].base;
    }
};

// Records rows.comp in mode over the axes (merged unless the mode is cross_entropy, whose label
// tensor follows the unmerged row axis).
void record_rows(KernelDevice &dev, const tf_op_desc &op, RowOp &r, RowsMode mode, const char *reporting) {
    RowsParams &p = r.p;
    const TensorBinding *b = r.b;
    const RowAxes &a = r.a;
    const tf_tensor_desc &out = op.outputs[0], &x = op.inputs[0];
    int64_t rows = 1, len = 1;
    for (int d = 0; d < a.outer; ++d) rows *= a.o_shape[d];
    for (int d = 0; d < a.inner; ++d) len *= a.i_shape[d];
    const bool reduces = mode == cross_entropy && p.reduction != TF_REDUCTION_NONE;
    // Nothing to write, except a reduced loss over zero rows (mean NaN, sum 0).
    if (!reduces && rows * len == 0) return;
    if (!reduces && numel(out) == 0) return;
    if (mode == cross_entropy) {
        p.outer_rank = p.inner_rank = 1;
        p.outer_shape[0] = u32(a.o_shape[0]), p.x_outer[0] = u32(a.o_x[0]), p.y_outer[0] = u32(a.o_y[0]);
        p.inner_shape[0] = u32(a.i_shape[0]), p.x_inner[0] = u32(a.i_x[0]);
    } else {
        // Merging keeps the kernel's loops short.
        const int64_t *o_strides[2] = {a.o_x, a.o_y};
        const int64_t *i_strides[4] = {a.i_x, a.i_y, a.i_w, a.i_b};
        const MergedAxes mo = merge_axes(a.outer, a.o_shape, o_strides, 2);
        const MergedAxes mi = merge_axes(a.inner, a.i_shape, i_strides, 4);
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

// softmax, log_softmax: a row is the axis.
template <RowsMode Mode>
void softmax_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0], &x = op.inputs[0];
    RowOp r(dev, op);
    RowAxes &a = r.a;
    const int32_t axis = tf_kit::params_of<tf_params_axis>(op).axis;
    for (int d = 0; d < x.rank; ++d) {
        if (d == axis) {
            a.i_shape[a.inner] = x.shape[d], a.i_x[a.inner] = x.strides[d], a.i_y[a.inner++] = out.strides[d];
        } else {
            a.o_shape[a.outer] = x.shape[d], a.o_x[a.outer] = x.strides[d], a.o_y[a.outer++] = out.strides[d];
        }
    }
    record_rows(dev, op, r, Mode, nullptr);
}

// layer_norm (x, weight, bias), rms_norm (x, weight): a row is the last n_axes axes.
template <RowsMode Mode>
void norm_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0], &x = op.inputs[0];
    RowOp r(dev, op);
    RowAxes &a = r.a;
    const auto &np = tf_kit::params_of<tf_params_norm>(op);
    constexpr bool has_bias = Mode == layer_norm;
    r.p.eps = static_cast<float>(np.eps);
    r.p.w_base = r.b[2].base;
    if (has_bias) r.p.b_base = r.b[3].base;
    const int first = x.rank - np.n_axes;
    for (int d = 0; d < x.rank; ++d) {
        if (d < first) {
            a.o_shape[a.outer] = x.shape[d], a.o_x[a.outer] = x.strides[d], a.o_y[a.outer++] = out.strides[d];
            continue;
        }
        a.i_shape[a.inner] = x.shape[d], a.i_x[a.inner] = x.strides[d], a.i_y[a.inner] = out.strides[d];
        a.i_w[a.inner] = op.inputs[1].strides[d - first];
        if (has_bias) a.i_b[a.inner] = op.inputs[2].strides[d - first];
        ++a.inner;
    }
    record_rows(dev, op, r, Mode, nullptr);
}

// cross_entropy: logits [N, C], labels [N]; a label outside [0, C) is reported.
void cross_entropy_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0], &x = op.inputs[0], &labels = op.inputs[1];
    RowOp r(dev, op);
    RowAxes &a = r.a;
    const auto &cp = tf_kit::params_of<tf_params_cross_entropy>(op);
    r.p.reduction = static_cast<uint32_t>(cp.reduction);
    r.p.label_dtype = static_cast<uint32_t>(labels.dtype);
    r.p.label_base = r.b[2].base;
    r.p.label_stride = u32(labels.strides[0]);
    r.p.ignore_lo = static_cast<uint32_t>(static_cast<uint64_t>(cp.ignore_index));
    r.p.ignore_hi = static_cast<uint32_t>(static_cast<uint64_t>(cp.ignore_index) >> 32);
    a.o_shape[0] = x.shape[0], a.o_x[0] = x.strides[0], a.o_y[0] = out.rank == 1 ? out.strides[0] : 0;
    a.i_shape[0] = x.shape[1], a.i_x[0] = x.strides[1], a.i_y[0] = 0;
    a.outer = a.inner = 1;
    record_rows(dev, op, r, cross_entropy, "cross_entropy");
}

// ---- Index ops and rope -----------------------------------------------------------------------------

// index.comp's modes.
enum IndexMode : uint32_t { one_hot = 0, embedding = 1, embedding_backward = 2, rope = 3 };

// The embedding table's rows fit 32-bit indices; f16 and bf16 gradients sum in a dense f32 copy of
// the weight, bound whole.
template <bool Forward>
bool embedding_accepts(const KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &weight = Forward ? op.inputs[0] : op.outputs[0];
    const DeviceCaps &caps = dev.caps();
    if (!Forward && weight.dtype != TF_DTYPE_F32 &&
        static_cast<uint64_t>(numel(weight)) * 4 + caps.bind_align + 4 > caps.max_binding)
        return false;
    return weight.shape[0] < (int64_t{1} << 31);
}

// The parameters every index.comp dispatch shares: the walked tensor's shape (dy for
// embedding_backward, else the output) and the output's strides and binding (b[0]).
IndexParams index_params(KernelDevice &dev, const tf_op_desc &op, const tf_tensor_desc &walked, TensorBinding b[3]) {
    const tf_tensor_desc &out = op.outputs[0];
    b[0] = dev.bind(out, op_name(op.op), "output", 0);
    IndexParams p{};
    p.count = u32(numel(walked));
    p.rank = u32(walked.rank);
    p.out_base = b[0].base;
    for (int d = 0; d < walked.rank; ++d) {
        p.shape[d] = u32(walked.shape[d]);
        p.out_st[d] = u32(out.strides[d]);
        const Magic divisor = magic_of(p.shape[d]);
        p.div_m[d] = divisor.m;
        p.div_s[d] = divisor.s;
    }
    return p;
}

void record_index(KernelDevice &dev, const tf_op_desc &op, const IndexParams &p, const TensorBinding b[3],
                  IndexMode mode, int32_t idx_dtype, int32_t in_dtype, const char *reporting) {
    dev.dispatch({key_of(Shader::index, mode, op.outputs[0].dtype, idx_dtype, in_dtype),
                  &p,
                  sizeof p,
                  b,
                  3,
                  {groups_for(dev.caps(), p.count, 256), 1, 1},
                  reporting});
}

// one_hot: labels [...] -> [..., num_classes]; a label outside [0, num_classes) is reported.
void one_hot_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0], &labels = op.inputs[0];
    if (numel(out) == 0) return;
    const char *name = op_name(op.op);
    TensorBinding b[3];
    IndexParams p = index_params(dev, op, out, b);
    b[2] = dev.bind(labels, name, "input", 0);
    p.idx_base = b[2].base;  // a sliced label view starts past its buffer's first element
    p.limit = u32(tf_kit::params_of<tf_params_one_hot>(op).num_classes);
    for (int d = 0; d < labels.rank; ++d) p.idx_st[d] = u32(labels.strides[d]);
    record_index(dev, op, p, b, one_hot, labels.dtype, TF_DTYPE_F32, name);
}

// embedding: rows of weight [V, D] gathered by indices [...]; embedding_backward: dy [..., D]
// scatter-added into a zeroed dweight [V, D] (f32; embedding_backward_16 for f16 and bf16). An
// index outside [0, V) is reported.
template <bool Forward>
void embedding_record(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0], &indices = op.inputs[1];
    const char *name = op_name(op.op);
    const tf_tensor_desc &walked = Forward ? out : op.inputs[0];
    if (!Forward) record_fill(dev, out, 0, 0);
    if (numel(walked) == 0) return;
    TensorBinding b[3];
    IndexParams p = index_params(dev, op, walked, b);
    b[1] = dev.bind(op.inputs[0], name, "input", 0);
    b[2] = dev.bind(indices, name, "input", 1);
    p.in_base = b[1].base;
    p.idx_base = b[2].base;
    for (int d = 0; d < indices.rank; ++d) p.idx_st[d] = u32(indices.strides[d]);
    if (Forward) {
        p.limit = u32(op.inputs[0].shape[0]);
        p.in_st[0] = u32(op.inputs[0].strides[0]);  // the weight's strides
        p.in_st[1] = u32(op.inputs[0].strides[1]);
    } else {
        p.limit = u32(out.shape[0]);
        for (int d = 0; d < walked.rank; ++d) p.in_st[d] = u32(walked.strides[d]);  // dy
        p.out_st[0] = u32(out.strides[0]);  // dweight's strides
        p.out_st[1] = u32(out.strides[1]);
        for (int d = 2; d < TF_MAX_RANK; ++d) p.out_st[d] = 0;
    }
    record_index(dev, op, p, b, Forward ? embedding : embedding_backward, indices.dtype, op.inputs[0].dtype, name);
}

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
    embedding_record<false>(dev, sum);
    record_cast(dev, scratch, out);
}

void embedding_run(KernelDevice &dev, const tf_op_desc &op) { embedding_record<true>(dev, op); }

void embedding_backward_run(KernelDevice &dev, const tf_op_desc &op) {
    if (op.outputs[0].dtype == TF_DTYPE_F32)
        embedding_record<false>(dev, op);
    else
        embedding_backward_16(dev, op);
}

// rope: x [..., T, D] rotated by position (from position_offset) in pairs.
void rope_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0], &x = op.inputs[0];
    if (numel(out) == 0) return;
    const char *name = op_name(op.op);
    const auto &rp = tf_kit::params_of<tf_params_rope>(op);
    TensorBinding b[3];
    IndexParams p = index_params(dev, op, out, b);
    b[1] = dev.bind(x, name, "input", 0);
    p.in_base = b[1].base;
    for (int d = 0; d < out.rank; ++d) p.in_st[d] = u32(x.strides[d]);
    p.interleaved = rp.interleaved ? 1 : 0;
    p.inverse = rp.inverse ? 1 : 0;
    // Each pair's frequency in turns, theta^(-2i/D) / 2pi, from the double the cpu plugin
    // uses, as five f32 chunks of 12 significant bits, which hold all 53 bits of the double
    // (index.comp multiplies them by the position exactly).
    const int64_t dim = x.shape[x.rank - 1], half = dim / 2;
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
    // The frequency table, released once the dispatch is recorded (free() may come first).
    const ScratchBuffer scratch(dev, bytes);
    table.buffer = scratch.get();
    dev.write(table.buffer, 0, turns.data(), bytes);
    b[2] = dev.bind(table, name, "frequencies", 0);
    p.idx_base = b[2].base;
    p.offset_lo = static_cast<uint32_t>(static_cast<uint64_t>(rp.position_offset));
    p.offset_hi = static_cast<uint32_t>(static_cast<uint64_t>(rp.position_offset) >> 32);
    record_index(dev, op, p, b, rope, TF_DTYPE_I32, x.dtype, nullptr);
}

// ---- Attention --------------------------------------------------------------------------------------

// The mask (input 3) may be absent (TF_TENSOR_ABSENT): the shader then adds nothing and never
// reads slot 4, which is bound to q only because every slot needs a buffer.
bool attention_accepts(const KernelDevice &, const tf_op_desc &op) {
    const tf_tensor_desc &k = op.inputs[1];
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

// The kernels compute in f32 (f16 and bf16 loaded as f32 and rounded once on store); embedding
// gathers float rows only (ops.def allows any dtype for its weight); one_hot writes any dtype.
constexpr tf_kit::DtypeSet floats = tf_kit::k_float_dtypes;

constexpr KernelRow k_rows[] = {
    kernel_row(TF_OP_MAX_POOL2D, Shader::pool2d, floats, pool_run<max_forward>, pool_accepts),
    kernel_row(TF_OP_MAX_POOL2D_BACKWARD, Shader::pool2d, floats, pool_run<max_backward>, pool_accepts),
    kernel_row(TF_OP_AVG_POOL2D, Shader::pool2d, floats, pool_run<avg_forward>, pool_accepts),
    kernel_row(TF_OP_AVG_POOL2D_BACKWARD, Shader::pool2d, floats, pool_run<avg_backward>, pool_accepts),
    kernel_row(TF_OP_SOFTMAX, Shader::rows, floats, softmax_run<softmax>),
    kernel_row(TF_OP_LOG_SOFTMAX, Shader::rows, floats, softmax_run<log_softmax>),
    kernel_row(TF_OP_LAYER_NORM, Shader::rows, floats, norm_run<layer_norm>),
    kernel_row(TF_OP_RMS_NORM, Shader::rows, floats, norm_run<rms_norm>),
    kernel_row(TF_OP_CROSS_ENTROPY, Shader::rows, floats, cross_entropy_run),
    kernel_row(TF_OP_ONE_HOT, Shader::index, tf_kit::k_any_dtype, one_hot_run),
    kernel_row(TF_OP_EMBEDDING, Shader::index, floats, embedding_run, embedding_accepts<true>),
    kernel_row(TF_OP_EMBEDDING_BACKWARD, Shader::index, floats, embedding_backward_run, embedding_accepts<false>),
    kernel_row(TF_OP_ROPE, Shader::index, floats, rope_run),
    kernel_row(TF_OP_ATTENTION, Shader::attention, floats, attention_run, attention_accepts),
};

}  // namespace

std::span<const KernelRow> nn_kernels() { return k_rows; }

}  // namespace tf_gpu
