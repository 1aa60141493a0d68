// The ops on block-quantized tensors (ops.def 65-68) on shaders/quant.comp: dequantize,
// embedding_q and matmul_q (quantize stays on the cpu plugin: its k-quant scale search is
// serial per block and runs once per weight, at load time). The quantized operand is bound as
// bytes (its blocks are 18, 20, 22 ... bytes, not words); the kernel decodes 32 elements at a
// time with the reference codec's arithmetic. Each tensor's leading axes must merge into one row
// axis (a row stride) and the output's rows must be contiguous; the rest falls back to cpu.
#include "ops.hpp"

#include <algorithm>

namespace tf_gpu {

namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

constexpr int64_t u32_limit = int64_t{1} << 31;
// Elements one invocation decodes.
constexpr int64_t chunk = 32;
// matmul_q: weight rows per workgroup, rows of x per workgroup when x has more than one.
constexpr int64_t tile_n = 32;
constexpr int64_t tile_m = 8;

// The row axis of the leading axes (all but the last) of two tensors of one leading shape, walked
// together: rows and each tensor's stride between rows, in elements. Empty when the axes do not
// merge into one.
struct RowAxis {
    bool ok = false;
    int64_t rows = 1;
    int64_t stride[2] = {0, 0};
};

RowAxis row_axis(const tf_tensor_desc &a, const tf_tensor_desc &b, int leading) {
    const int64_t *strides[2] = {a.strides, b.strides};
    const MergedAxes m = merge_axes(leading, a.shape, strides, 2);
    RowAxis r;
    if (m.rank > 1) return r;
    r.ok = true;
    if (m.rank == 1) {
        r.rows = m.shape[0];
        r.stride[0] = m.strides[0][0];
        r.stride[1] = m.strides[1][0];
    }
    return r;
}

// Bytes from one row of a quantized tensor to the next, from a stride in elements.
int64_t row_bytes(int32_t dtype, int64_t stride) {
    return stride / tf_kit::dtype_block_length(dtype) * static_cast<int64_t>(tf_kit::dtype_block_bytes(dtype));
}

// The last axis of t (not quantized) is contiguous, or has one element.
bool last_contiguous(const tf_tensor_desc &t) {
    return t.rank == 0 || t.shape[t.rank - 1] <= 1 || t.strides[t.rank - 1] == 1;
}

// The bound bytes of a quantized tensor: a 1-D byte view (bool elements) from its first byte to
// the end of its last block, so base is a byte index.
TensorBinding bind_blocks(KernelDevice &dev, const tf_tensor_desc &t, const char *op, uint32_t index) {
    const tf_kit::Extent e = tf_kit::extent_of(t);
    if (e.empty) return TensorBinding{};
    tf_tensor_desc bytes = t;
    bytes.dtype = TF_DTYPE_BOOL;
    bytes.rank = 1;
    bytes.shape[0] = static_cast<int64_t>(e.last_byte - t.offset + 1);
    bytes.strides[0] = 1;
    return dev.bind(bytes, op, "input", index);
}

bool dequantize_accepts(const KernelDevice &, const tf_op_desc &op) {
    const tf_tensor_desc &q = op.inputs[0], &out = op.outputs[0];
    if (!last_contiguous(out)) return false;
    const RowAxis r = row_axis(q, out, q.rank - 1);
    return r.ok && r.rows * (q.shape[q.rank - 1] / chunk) < u32_limit;
}

bool embedding_q_accepts(const KernelDevice &, const tf_op_desc &op) {
    const tf_tensor_desc &w = op.inputs[0], &idx = op.inputs[1], &out = op.outputs[0];
    if (!last_contiguous(out)) return false;
    const RowAxis r = row_axis(out, idx, idx.rank);
    return r.ok && r.rows * (w.shape[1] / chunk) < u32_limit;
}

bool matmul_q_accepts(const KernelDevice &dev, const tf_op_desc &op) {
    const DeviceCaps &caps = dev.caps();
    const tf_tensor_desc &x = op.inputs[0], &w = op.inputs[1], &out = op.outputs[0];
    if (!last_contiguous(out)) return false;
    const RowAxis r = row_axis(x, out, x.rank - 1);
    if (!r.ok) return false;
    const int64_t m_tiles = (r.rows + tile_m - 1) / tile_m, n_tiles = (w.shape[0] + tile_n - 1) / tile_n;
    return m_tiles <= std::min<int64_t>(caps.max_groups[1], 65535) &&
           n_tiles <= std::min<int64_t>(caps.max_groups[0], 65535);
}

void run_dequantize(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &q = op.inputs[0], &out = op.outputs[0];
    if (numel(out) == 0) return;
    const char *name = op_name(op.op);
    const RowAxis r = row_axis(q, out, q.rank - 1);
    TensorBinding b[2];
    b[0] = dev.bind(out, name, "output", 0);
    b[1] = bind_blocks(dev, q, name, 0);
    QuantParams p{};
    p.chunks = u32(q.shape[q.rank - 1] / chunk);
    p.count = u32(r.rows) * p.chunks;
    const Magic divisor = magic_of(p.chunks);
    p.div_m = divisor.m;
    p.div_s = divisor.s;
    p.q_base = b[1].base;
    p.q_row = u32(row_bytes(q.dtype, r.stride[0]));
    p.out_base = b[0].base;
    p.out_row = u32(r.stride[1]);
    DispatchArgs args;
    args.kernel = key_of(Shader::quant, 0, q.dtype, out.dtype, 0, TF_DTYPE_I32, 1);
    args.params = &p;
    args.params_size = sizeof p;
    args.tensors = b;
    args.count = 2;
    args.groups[0] = groups_for(dev.caps(), p.count, 256);
    dev.dispatch(args);
}

void run_embedding_q(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &w = op.inputs[0], &idx = op.inputs[1], &out = op.outputs[0];
    if (numel(out) == 0) return;
    const char *name = op_name(op.op);
    const RowAxis r = row_axis(out, idx, idx.rank);
    TensorBinding b[3];
    b[0] = dev.bind(out, name, "output", 0);
    b[1] = bind_blocks(dev, w, name, 0);
    b[2] = dev.bind(idx, name, "input", 1);
    QuantParams p{};
    p.chunks = u32(w.shape[1] / chunk);
    p.count = u32(r.rows) * p.chunks;
    const Magic divisor = magic_of(p.chunks);
    p.div_m = divisor.m;
    p.div_s = divisor.s;
    p.q_base = b[1].base;
    p.q_row = u32(row_bytes(w.dtype, w.shape[0] > 1 ? w.strides[0] : w.shape[1]));
    p.out_base = b[0].base;
    p.out_row = u32(r.stride[0]);
    p.limit = u32(std::min<int64_t>(w.shape[0], u32_limit));
    p.idx_base = b[2].base;
    p.idx_st = u32(r.stride[1]);
    DispatchArgs args;
    args.kernel = key_of(Shader::quant, 1, w.dtype, out.dtype, 0, idx.dtype, 1);
    args.params = &p;
    args.params_size = sizeof p;
    args.tensors = b;
    args.count = 3;
    args.groups[0] = groups_for(dev.caps(), p.count, 256);
    args.reporting_op = name;
    dev.dispatch(args);
}

void run_matmul_q(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &x = op.inputs[0], &w = op.inputs[1], &out = op.outputs[0];
    if (numel(out) == 0) return;
    const char *name = op_name(op.op);
    const RowAxis r = row_axis(x, out, x.rank - 1);
    TensorBinding b[3];
    b[0] = dev.bind(out, name, "output", 0);
    // K = 0: no blocks and no x elements; the kernel writes zeros without reading either.
    b[1] = bind_blocks(dev, w, name, 1);
    b[2] = dev.bind(x, name, "input", 0);
    const int64_t k = w.shape[1], n = w.shape[0];
    QuantParams p{};
    p.chunks = u32(k / chunk);
    p.q_base = b[1].base;
    p.q_row = u32(row_bytes(w.dtype, n > 1 ? w.strides[0] : k));
    p.out_base = b[0].base;
    p.out_row = u32(r.stride[1]);
    p.x_base = b[2].base;
    p.x_row = u32(r.stride[0]);
    p.x_col = u32(k > 1 ? x.strides[x.rank - 1] : 1);
    p.m = u32(r.rows);
    p.n = u32(n);
    const uint32_t rows = r.rows > 1 ? tile_m : 1;
    DispatchArgs args;
    args.kernel = key_of(Shader::quant, 2, w.dtype, x.dtype, out.dtype, TF_DTYPE_I32, rows);
    args.params = &p;
    args.params_size = sizeof p;
    args.tensors = b;
    args.count = 3;
    args.groups[0] = u32((n + tile_n - 1) / tile_n);
    args.groups[1] = u32((r.rows + rows - 1) / rows);
    dev.dispatch(args);
}

// The kernel decodes into f32, f16 or bf16 (the output's dtype, the rows' working dtype).
constexpr KernelRow k_rows[] = {
    kernel_row(TF_OP_DEQUANTIZE, Shader::quant, tf_kit::k_float_dtypes, run_dequantize, dequantize_accepts),
    kernel_row(TF_OP_EMBEDDING_Q, Shader::quant, tf_kit::k_float_dtypes, run_embedding_q, embedding_q_accepts),
    kernel_row(TF_OP_MATMUL_Q, Shader::quant, tf_kit::k_float_dtypes, run_matmul_q, matmul_q_accepts),
};

}  // namespace

std::span<const KernelRow> quant_kernels() { return k_rows; }

}  // namespace tf_gpu
