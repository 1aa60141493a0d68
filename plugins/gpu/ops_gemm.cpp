// matmul and conv2d with its two gradients on shaders/gemm.comp: one tiled GEMM kernel whose
// index maps differ per mode (see the shader).
#include "ops.hpp"

#include <algorithm>

namespace tf_gpu {

namespace {

constexpr uint32_t tile = 64;  // the largest TM and TN of gemm.comp

// Tiles beyond the grid are looped over in the kernel; only the batch (z) must fit the grid.
bool grid_fits(const DeviceCaps &caps, int64_t m, int64_t n, int64_t batch) {
    return batch <= caps.max_groups[2] && m < (int64_t{1} << 31) && n < (int64_t{1} << 31);
}

// The four conv tensors of a conv op, whichever its direction.
struct ConvShapes {
    const tf_tensor_desc *x, *w, *y;  // x or dx, weight or dw, y or dy
    int64_t n, c, h, wd, o, cg, kh, kw, oh, ow;
};

ConvShapes conv_tensors(const tf_op_desc &op) {
    ConvShapes s{};
    const tf_kit::ConvOperands t = tf_kit::conv_operands_of(op);
    s.x = t.x, s.w = t.w, s.y = t.y;
    s.n = s.x->shape[0];
    s.c = s.x->shape[1];
    s.h = s.x->shape[2];
    s.wd = s.x->shape[3];
    s.o = s.w->shape[0];
    s.cg = s.w->shape[1];
    s.kh = s.w->shape[2];
    s.kw = s.w->shape[3];
    s.oh = s.y->shape[2];
    s.ow = s.y->shape[3];
    return s;
}

// C as a view whose axes flatten to (z, m, n) in the kernel's order: where split partials go.
struct CView {
    int rank = 0;
    int64_t shape[TF_MAX_RANK] = {};
    int64_t strides[TF_MAX_RANK] = {};
    void add(int64_t size, int64_t stride) {
        shape[rank] = size;
        strides[rank++] = stride;
    }
};

// Records the GEMM of p over z_count batch elements or groups. Products with few tiles and a long
// K (weight gradients, a linear layer on a small batch) split K over more workgroups: the
// partial tiles go to a scratch tensor and a sum over the chunks writes them into out.
void record_gemm(KernelDevice &dev, GemmParams &p, uint32_t mode, TensorBinding b[3], uint32_t z_count,
                 const tf_tensor_desc &out, const CView &view) {
    // Skinny products take 8-row or 8-column tiles instead of 64.
    const uint32_t rows = p.M <= 16 ? 1 : 8, cols = p.N <= 16 ? 1 : 8, tile_m = 8 * rows, tile_n = 8 * cols;
    const uint64_t tiles_m = (p.M + tile_m - 1) / tile_m, tiles_n = (p.N + tile_n - 1) / tile_n;
    const uint64_t tiles = tiles_m * tiles_n * z_count;
    uint32_t splits = 1, chunk = p.K;
    if (tiles < 64 && p.K >= 512 && view.rank + 1 <= TF_MAX_RANK) {
        // About 128 workgroups, at least 256 of K each.
        const uint64_t want = std::min<uint64_t>((128 + tiles - 1) / tiles, p.K / 256);
        chunk = static_cast<uint32_t>(align_up((p.K + want - 1) / std::max<uint64_t>(want, 1), 16));
        splits = (p.K + chunk - 1) / chunk;
        const uint64_t bytes = uint64_t{splits} * z_count * p.M * p.N * 4;
        if (splits < 2 || bytes + dev.caps().bind_align + 4 > dev.caps().max_binding ||
            uint64_t{splits} * z_count > dev.caps().max_groups[2])
            splits = 1;
    }
    const uint32_t gx = static_cast<uint32_t>(
                       std::min<uint64_t>(tiles_n, std::min<uint32_t>(dev.caps().max_groups[0], 65535))),
                   gy = static_cast<uint32_t>(
                       std::min<uint64_t>(tiles_m, std::min<uint32_t>(dev.caps().max_groups[1], 65535)));
    if (splits == 1) {
        dev.dispatch({key_of(Shader::gemm, mode, rows, 0, cols, out.dtype), &p, sizeof p, b, 3, {gx, gy, z_count}});
        return;
    }
    // scratch [splits, view...] contiguous, then sum over axis 0 into out viewed as [1, view...].
    tf_tensor_desc scratch{}, target = out;
    scratch.struct_size = sizeof scratch;
    scratch.dtype = TF_DTYPE_F32;
    scratch.rank = view.rank + 1;
    target.rank = view.rank + 1;
    scratch.shape[0] = splits;
    target.shape[0] = 1;
    target.strides[0] = 0;
    int64_t stride = 1;
    for (int d = view.rank - 1; d >= 0; --d) {
        scratch.shape[d + 1] = target.shape[d + 1] = view.shape[d];
        scratch.strides[d + 1] = stride;
        target.strides[d + 1] = view.strides[d];
        stride *= view.shape[d];
    }
    scratch.strides[0] = stride;
    const ScratchBuffer held(dev, static_cast<uint64_t>(splits) * static_cast<uint64_t>(stride) * 4);
    scratch.buffer = held.get();
    b[0] = dev.bind(scratch, op_name(TF_OP_MATMUL), "scratch", 0);
    p.c_base = b[0].base;
    p.splits = splits;
    p.k_chunk = chunk;
    p.z_count = z_count;
    dev.dispatch(
        {key_of(Shader::gemm, mode, rows, 1, cols, out.dtype), &p, sizeof p, b, 3, {gx, gy, z_count * splits}});
    record_sum(dev, scratch, target, 1u);
}

// gemm.comp's modes of the conv ops.
enum ConvMode : uint32_t { forward = 1, grad_input = 2, grad_weight = 3 };

// Every index the kernel forms fits 32 bits and the groups fit the grid (the op's rule has
// checked shapes, params and dtypes).
template <ConvMode Mode>
bool conv_accepts(const KernelDevice &dev, const tf_op_desc &op) {
    const DeviceCaps &caps = dev.caps();
    const auto &p = tf_kit::params_of<tf_params_conv2d>(op);
    const ConvShapes s = conv_tensors(op);
    const int64_t g = p.groups;
    const int64_t og = s.o / g;
    const int64_t columns[3] = {s.n * s.oh * s.ow, s.n * s.h * s.wd, s.cg * s.kh * s.kw};
    for (int64_t v : columns)
        if (v >= (int64_t{1} << 31)) return false;
    if (s.h + 2 * int64_t{p.padding[0]} >= (int64_t{1} << 30) || s.wd + 2 * int64_t{p.padding[1]} >= (int64_t{1} << 30))
        return false;
    if constexpr (Mode == forward) return grid_fits(caps, og, columns[0], g);
    if constexpr (Mode == grad_input) return grid_fits(caps, s.cg, columns[1], g);
    return grid_fits(caps, og, columns[2], g);
}

template <ConvMode Mode>
void conv_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &out = op.outputs[0];
    if (numel(out) == 0) return;
    const char *name = op_name(op.op);
    const auto &cp = *static_cast<const tf_params_conv2d *>(op.params);
    const ConvShapes s = conv_tensors(op);
    TensorBinding b[3] = {dev.bind(out, name, "output", 0), dev.bind(op.inputs[0], name, "input", 0),
                          dev.bind(op.inputs[1], name, "input", 1)};
    GemmParams p{};
    const uint32_t g = static_cast<uint32_t>(cp.groups);
    const int64_t og = s.o / g;
    // Each direction as a GEMM per group: gemm.comp's mode, M, N, K, and which slot holds x, w
    // and y (its x_slot, w_slot, y_slot).
    struct Direction {
        uint32_t mode;
        int64_t M, N, K;
        uint32_t xs, ws, ys;
    };
    const int64_t out_pixels = s.n * s.oh * s.ow, patch = s.cg * s.kh * s.kw;
    const Direction d = Mode == forward      ? Direction{1, og, out_pixels, patch, 1, 2, 0}
                        : Mode == grad_input ? Direction{2, s.cg, s.n * s.h * s.wd, og * s.kh * s.kw, 0, 2, 1}
                                             : Direction{3, og, patch, out_pixels, 2, 0, 1};
    p.M = static_cast<uint32_t>(d.M);
    p.N = static_cast<uint32_t>(d.N);
    p.K = static_cast<uint32_t>(d.K);
    p.n = static_cast<uint32_t>(s.n);
    p.c = static_cast<uint32_t>(s.c);
    p.h = static_cast<uint32_t>(s.h);
    p.w = static_cast<uint32_t>(s.wd);
    p.o = static_cast<uint32_t>(s.o);
    p.kh = static_cast<uint32_t>(s.kh);
    p.kw = static_cast<uint32_t>(s.kw);
    p.groups = g;
    p.oh = static_cast<uint32_t>(s.oh);
    p.ow = static_cast<uint32_t>(s.ow);
    std::ranges::copy(cp.stride, p.stride);
    std::ranges::copy(cp.padding, p.pad);
    std::ranges::copy(cp.dilation, p.dilation);
    p.x_base = b[d.xs].base;
    p.w_base = b[d.ws].base;
    p.y_base = b[d.ys].base;
    for (int i = 0; i < 4; ++i) {
        p.x_st[i] = static_cast<uint32_t>(s.x->strides[i]);
        p.w_st[i] = static_cast<uint32_t>(s.w->strides[i]);
        p.y_st[i] = static_cast<uint32_t>(s.y->strides[i]);
    }
    p.og = static_cast<uint32_t>(og);
    p.cg = static_cast<uint32_t>(s.cg);
    const uint32_t divisors[8] = {p.kh * p.kw,
                                  p.kw,
                                  p.oh * p.ow,
                                  p.ow,
                                  p.h * p.w,
                                  p.w,
                                  static_cast<uint32_t>(cp.stride[0]),
                                  static_cast<uint32_t>(cp.stride[1])};
    for (int i = 0; i < 8; ++i) {
        const Magic d = magic_of(divisors[i]);
        p.div_m[i] = d.m;
        p.div_s[i] = d.s;
    }
    // C's axes per mode: (group, channel in group, image, row, column) or (group, out channel,
    // in channel, kernel row, kernel column).
    CView view;
    const tf_tensor_desc &c = out;
    switch (d.mode) {
    case 1:
        view.add(g, og * c.strides[1]), view.add(og, c.strides[1]), view.add(s.n, c.strides[0]);
        view.add(s.oh, c.strides[2]), view.add(s.ow, c.strides[3]);
        break;
    case 2:
        view.add(g, s.cg * c.strides[1]), view.add(s.cg, c.strides[1]), view.add(s.n, c.strides[0]);
        view.add(s.h, c.strides[2]), view.add(s.wd, c.strides[3]);
        break;
    default:
        view.add(g, og * c.strides[0]), view.add(og, c.strides[0]), view.add(s.cg, c.strides[1]);
        view.add(s.kh, c.strides[2]), view.add(s.kw, c.strides[3]);
        break;
    }
    record_gemm(dev, p, d.mode, b, g, out, view);
}

// K and the grid fit (the op's rule has checked shapes and dtypes).
bool matmul_accepts(const KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &a = op.inputs[0], &c = op.outputs[0];
    const int r = c.rank;
    int64_t batch = 1;
    for (int i = 0; i < r - 2; ++i) batch *= c.shape[i];
    return a.shape[r - 1] < (int64_t{1} << 31) && grid_fits(dev.caps(), c.shape[r - 2], c.shape[r - 1], batch);
}

void matmul_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &a = op.inputs[0], &bt = op.inputs[1], &c = op.outputs[0];
    if (numel(c) == 0) return;
    const int r = c.rank;
    TensorBinding b[3] = {dev.bind(c, "matmul", "output", 0), dev.bind(a, "matmul", "input", 0),
                          dev.bind(bt, "matmul", "input", 1)};
    const int64_t *strides[3] = {c.strides, a.strides, bt.strides};
    const MergedAxes batch = merge_axes(r - 2, c.shape, strides, 3);
    GemmParams p{};
    p.M = static_cast<uint32_t>(c.shape[r - 2]);
    p.N = static_cast<uint32_t>(c.shape[r - 1]);
    p.K = static_cast<uint32_t>(a.shape[r - 1]);
    p.batch_rank = static_cast<uint32_t>(batch.rank);
    p.c_base = b[0].base;
    p.a_base = b[1].base;
    p.b_base = b[2].base;
    uint32_t count = 1;
    for (int d = 0; d < batch.rank; ++d) {
        p.batch_shape[d] = static_cast<uint32_t>(batch.shape[d]);
        p.c_batch[d] = static_cast<uint32_t>(batch.strides[0][d]);
        p.a_batch[d] = static_cast<uint32_t>(batch.strides[1][d]);
        p.b_batch[d] = static_cast<uint32_t>(batch.strides[2][d]);
        count *= p.batch_shape[d];
    }
    p.a_rs = static_cast<uint32_t>(a.strides[r - 2]);
    p.a_cs = static_cast<uint32_t>(a.strides[r - 1]);
    p.b_rs = static_cast<uint32_t>(bt.strides[r - 2]);
    p.b_cs = static_cast<uint32_t>(bt.strides[r - 1]);
    p.c_rs = static_cast<uint32_t>(c.strides[r - 2]);
    p.c_cs = static_cast<uint32_t>(c.strides[r - 1]);
    CView view;
    for (int d = 0; d < batch.rank; ++d) view.add(batch.shape[d], batch.strides[0][d]);
    view.add(p.M, c.strides[r - 2]);
    view.add(p.N, c.strides[r - 1]);
    record_gemm(dev, p, 0, b, count, c, view);
}

// The kernels take f32, f16 and bf16 (f16 and bf16 accumulate in f32).
constexpr tf_kit::DtypeSet floats = tf_kit::k_float_dtypes;

constexpr KernelRow k_rows[] = {
    kernel_row(TF_OP_MATMUL, Shader::gemm, floats, matmul_run, matmul_accepts),
    kernel_row(TF_OP_CONV2D, Shader::gemm, floats, conv_run<forward>, conv_accepts<forward>),
    kernel_row(TF_OP_CONV2D_GRAD_INPUT, Shader::gemm, floats, conv_run<grad_input>, conv_accepts<grad_input>),
    kernel_row(TF_OP_CONV2D_GRAD_WEIGHT, Shader::gemm, floats, conv_run<grad_weight>, conv_accepts<grad_weight>),
};

}  // namespace

std::span<const KernelRow> gemm_kernels() { return k_rows; }

}  // namespace tf_gpu
