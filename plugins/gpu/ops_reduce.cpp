// Reductions on shaders/reduce.comp: sum, mean, max, min, var over axes; argmax, argmin along one.
#include "kernels.hpp"

namespace tf_kernels {

namespace {

// The reduced axes of a REDUCE or ARG op.
uint32_t mask_of(const tf_op_desc &op) {
    switch (op.op) {
    case TF_OP_VAR: return static_cast<const tf_params_var *>(op.params)->axes_mask;
    case TF_OP_ARGMAX:
    case TF_OP_ARGMIN: return 1u << static_cast<const tf_params_axis *>(op.params)->axis;
    default: return static_cast<const tf_params_reduce *>(op.params)->axes_mask;
    }
}

uint32_t code_of(uint32_t op) {
    switch (op) {
    case TF_OP_SUM: return RD_SUM;
    case TF_OP_MEAN: return RD_MEAN;
    case TF_OP_MAX: return RD_MAX;
    case TF_OP_MIN: return RD_MIN;
    case TF_OP_VAR: return RD_VAR;
    case TF_OP_ARGMAX: return RD_ARGMAX;
    default: return RD_ARGMIN;
    }
}

}  // namespace

bool reduce_supports(const DeviceCaps &, const tf_op_desc &op) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    switch (op.op) {
    case TF_OP_SUM:
    case TF_OP_MEAN:
    case TF_OP_MAX:
    case TF_OP_MIN:
    case TF_OP_VAR: break;
    case TF_OP_ARGMAX:
    case TF_OP_ARGMIN: {
        const int32_t axis = static_cast<const tf_params_axis *>(op.params)->axis;
        if (axis < 0 || axis >= in.rank) return false;
        break;
    }
    default: return false;
    }
    // reduce.comp reduces floats only: integer sums, maxima and arg ops run on cpu.
    if (!is_float(in.dtype) || in.rank != out.rank) return false;
    const uint32_t mask = mask_of(op);
    if (in.rank < 32 && (mask >> in.rank) != 0) return false;
    for (int i = 0; i < in.rank; ++i)
        if (out.shape[i] != ((mask >> i & 1) ? 1 : in.shape[i])) return false;
    // max, min and the arg ops have no identity: the core never sends them empty reductions.
    if (op.op != TF_OP_SUM && op.op != TF_OP_MEAN && op.op != TF_OP_VAR && numel(in) == 0 && numel(out) > 0)
        return false;
    return true;
}

void reduce_run(KernelDevice &dev, const tf_op_desc &op) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    const int64_t n_out = numel(out);
    if (n_out == 0) return;
    const char *name = op_name(op.op);
    const uint32_t mask = mask_of(op);
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
    p.correction =
        op.op == TF_OP_VAR ? static_cast<float>(static_cast<const tf_params_var *>(op.params)->correction) : 0.0f;
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
    dev.dispatch({key_of(Shader::reduce, code_of(op.op), per_group, r.rank <= 1, in.dtype, out.dtype),
                  &p,
                  sizeof p,
                  bindings,
                  2,
                  {groups, 1, 1}});
}

}  // namespace tf_kernels
