// Scans on shaders/scan.comp: cumsum along one axis, any strides, f32/f16/bf16 and i32/i64.
#include "ops.hpp"

namespace tf_gpu {

namespace {

void run_cumsum(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &x = op.inputs[0], &y = op.outputs[0];
    if (numel(y) == 0) return;
    const auto &params = tf_kit::params_of<tf_params_cumsum>(op);
    const int axis = params.axis;
    const char *name = op_name(op.op);
    TensorBinding bindings[2] = {dev.bind(y, name, "output", 0), dev.bind(x, name, "input", 0)};

    // The other axes, merged where both tensors' strides allow: one line per position.
    int64_t shape[TF_MAX_RANK], xs[TF_MAX_RANK], ys[TF_MAX_RANK];
    int rank = 0;
    int64_t lines = 1;
    for (int i = 0; i < x.rank; ++i) {
        if (i == axis) continue;
        shape[rank] = x.shape[i];
        xs[rank] = x.strides[i];
        ys[rank++] = y.strides[i];
        lines *= x.shape[i];
    }
    const int64_t *strides[2] = {xs, ys};
    const MergedAxes m = merge_axes(rank, shape, strides, 2);

    ScanParams p{};
    p.lines = static_cast<uint32_t>(lines);
    p.n = static_cast<uint32_t>(x.shape[axis]);
    p.rank = static_cast<uint32_t>(m.rank);
    p.flags = (params.exclusive ? SCAN_EXCLUSIVE : 0u) | (params.reverse ? SCAN_REVERSE : 0u);
    p.x_base = bindings[1].base;
    p.y_base = bindings[0].base;
    p.x_step = static_cast<uint32_t>(x.strides[axis]);
    p.y_step = static_cast<uint32_t>(y.strides[axis]);
    for (int d = 0; d < m.rank; ++d) {
        p.shape[d] = static_cast<uint32_t>(m.shape[d]);
        p.x_strides[d] = static_cast<uint32_t>(m.strides[0][d]);
        p.y_strides[d] = static_cast<uint32_t>(m.strides[1][d]);
    }
    dev.dispatch({key_of(Shader::scan, x.dtype),
                  &p,
                  sizeof p,
                  bindings,
                  2,
                  {groups_for(dev.caps(), static_cast<uint64_t>(lines), 256), 1, 1}});
}

// Every numeric dtype of ops.def's column for cumsum (N): the floats in f32, the integers wrapping.
constexpr KernelRow k_rows[] = {
    kernel_row(TF_OP_CUMSUM, Shader::scan, tf_kit::k_numeric_dtypes, run_cumsum),
};

}  // namespace

std::span<const KernelRow> scan_kernels() { return k_rows; }

}  // namespace tf_gpu
