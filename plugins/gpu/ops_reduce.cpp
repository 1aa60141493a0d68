// Reductions on shaders/reduce.comp: sum, mean, max, min, var over axes; argmax, argmin along one.
#include "ops.hpp"

namespace tf_gpu {

namespace {

// Records out = the reduction Code (reduce.comp's op) of in over the axes in mask.
void record(KernelDevice &dev, const tf_op_desc &op, uint32_t code, uint32_t mask, float correction) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    const int64_t n_out = numel(out);
    if (n_out == 0) return;
    const char *name = op_name(op.op);
    TensorBinding bindings[2] = {dev.bind(out, name, "output", 0), dev.bind(in, name, "input", 0)};

    // Kept axes walk input and output together; reduced axes walk the input only.
    int64_t k_shape[TF_MAX_RANK], k_in[TF_MAX_RANK], k_out[TF_MAX_RANK], r_shape[TF_MAX_RANK], r_in[TF_MAX_RANK];
    int kept = 0, reduced = 0;
    int64_t n_red = 1;
    for (int i = 0; i < in.rank; ++i) {
        if (mask >> i & 1) {
            r_shape[reduced] = in.shape[i];
            r_in[reduced++] = in.strides[i];
            n_red *= in.shape[i];
        } else {
            k_shape[kept] = in.shape[i];
            k_in[kept] = in.strides[i];
            k_out[kept++] = out.strides[i];
        }
    }
    const int64_t *k_strides[2] = {k_in, k_out};
    const int64_t *r_strides[1] = {r_in};
    const MergedAxes k = merge_axes(kept, k_shape, k_strides, 2);
    const MergedAxes r = merge_axes(reduced, r_shape, r_strides, 1);

    ReduceParams p{};
    p.n_out = static_cast<uint32_t>(n_out);
    p.n_red = static_cast<uint32_t>(n_red);
    // A workgroup per output for few long reductions, an invocation per output otherwise.
    const bool per_group = n_red >= 256 && n_out < 2048;
    p.k_rank = static_cast<uint32_t>(k.rank);
    p.r_rank = static_cast<uint32_t>(r.rank);
    p.in_base = bindings[1].base;
    p.out_base = bindings[0].base;
    p.correction = correction;
    for (int d = 0; d < k.rank; ++d) {
        p.k_shape[d] = static_cast<uint32_t>(k.shape[d]);
        p.k_in[d] = static_cast<uint32_t>(k.strides[0][d]);
        p.k_out[d] = static_cast<uint32_t>(k.strides[1][d]);
    }
    for (int d = 0; d < r.rank; ++d) {
        p.r_shape[d] = static_cast<uint32_t>(r.shape[d]);
        p.r_in[d] = static_cast<uint32_t>(r.strides[0][d]);
        const Magic divisor = magic_of(p.r_shape[d]);
        p.r_div_m[d] = divisor.m;
        p.r_div_s[d] = divisor.s;
    }
    const uint32_t groups = per_group ? groups_for(dev.caps(), static_cast<uint64_t>(n_out), 1)
                                      : groups_for(dev.caps(), static_cast<uint64_t>(n_out), 256);
    dev.dispatch({key_of(Shader::reduce, code, per_group, r.rank <= 1, in.dtype, out.dtype),
                  &p,
                  sizeof p,
                  bindings,
                  2,
                  {groups, 1, 1}});
}

template <uint32_t Code>
void run_reduce(KernelDevice &dev, const tf_op_desc &op) {
    record(dev, op, Code, tf_kit::reduce_axes_mask(op), 0.0f);
}

void run_var(KernelDevice &dev, const tf_op_desc &op) {
    const auto &p = tf_kit::params_of<tf_params_var>(op);
    record(dev, op, RD_VAR, p.axes_mask, static_cast<float>(p.correction));
}

template <uint32_t Code>
void run_arg(KernelDevice &dev, const tf_op_desc &op) {
    record(dev, op, Code, 1u << tf_kit::params_of<tf_params_axis>(op).axis, 0.0f);
}

// reduce.comp reduces floats only: integer sums, maxima and arg ops run on cpu. (max, min and the
// arg ops have no identity: their rules refuse empty reductions.)
constexpr KernelRow row(uint32_t op, KernelRun run) {
    return kernel_row(op, Shader::reduce, tf_kit::k_float_dtypes, run);
}

constexpr KernelRow k_rows[] = {
    row(TF_OP_SUM, run_reduce<RD_SUM>),
    row(TF_OP_MEAN, run_reduce<RD_MEAN>),
    row(TF_OP_MAX, run_reduce<RD_MAX>),
    row(TF_OP_MIN, run_reduce<RD_MIN>),
    row(TF_OP_VAR, run_var),
    row(TF_OP_ARGMAX, run_arg<RD_ARGMAX>),
    row(TF_OP_ARGMIN, run_arg<RD_ARGMIN>),
};

}  // namespace

std::span<const KernelRow> reduce_kernels() { return k_rows; }

void record_sum(KernelDevice &dev, const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask) {
    record(dev, step_desc(TF_OP_SUM, &in, out), RD_SUM, axes_mask, 0.0f);
}

}  // namespace tf_gpu
