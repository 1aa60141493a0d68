// adamw_step and sgd_step (optim.comp): dense f32 operands of one shape, updated in place in one
// dispatch; anything else is left to the core, which then runs the update as ordinary ops.
#include "kernels.hpp"

#include <cstring>

namespace tf_kernels {

namespace {

// Row-major without gaps (size-1 axes may have any stride), as one flat run of elements.
bool dense(const tf_tensor_desc &t) {
    int64_t expect = 1;
    for (int i = t.rank - 1; i >= 0; --i) {
        if (t.shape[i] != 1 && t.strides[i] != expect) return false;
        expect *= t.shape[i];
    }
    return true;
}

}  // namespace

bool optim_supports(const tf_op_desc &op) {
    const tf_tensor_desc &param = op.outputs[0];
    for (uint32_t i = 0; i < op.n_inputs + op.n_outputs; ++i) {
        const tf_tensor_desc &t = i < op.n_inputs ? op.inputs[i] : op.outputs[i - op.n_inputs];
        if (t.dtype != TF_DTYPE_F32 || !same_shape(t, param) || !dense(t)) return false;
    }
    return true;
}

void optim_run(KernelDevice &dev, const tf_op_desc &op) {
    const char *name = op_name(op.op);
    const int64_t count = numel(op.outputs[0]);
    if (count == 0) return;
    TensorBinding b[4];
    b[0] = dev.bind(op.outputs[0], name, "output", 0);
    b[1] = dev.bind(op.inputs[0], name, "input", 0);
    for (uint32_t i = 1; i < op.n_outputs; ++i) b[1 + i] = dev.bind(op.outputs[i], name, "output", i);
    OptimParams p{};
    p.count = static_cast<uint32_t>(count);
    p.base0 = b[0].base;
    p.base1 = b[1].base;
    p.base2 = b[2].base;
    p.base3 = b[3].base;
    uint32_t mode = 0, has_state = 0, decays = 0, nesterov = 0;
    if (op.op == TF_OP_ADAMW_STEP) {
        const auto &k = *static_cast<const tf_params_adamw_step *>(op.params);
        const tf_kit::AdamwF32 c = tf_kit::adamw_f32(k);
        static_assert(sizeof c == sizeof p.k);
        std::memcpy(p.k, &c, sizeof c);
        has_state = k.has_state ? 1 : 0;
        decays = k.decays ? 1 : 0;
    } else {
        const auto &k = *static_cast<const tf_params_sgd_step *>(op.params);
        mode = 1;
        p.k[0] = static_cast<float>(k.lr);
        p.k[1] = static_cast<float>(k.momentum);
        p.k[2] = static_cast<float>(k.weight_decay);
        has_state = k.has_state ? 1 : 0;
        decays = k.decays ? 1 : 0;
        nesterov = k.nesterov ? 1 : 0;
    }
    dev.dispatch({key_of(Shader::optim, mode, has_state, decays, nesterov),
                  &p,
                  sizeof p,
                  b,
                  1 + op.n_outputs,
                  {groups_for(dev.caps(), static_cast<uint64_t>(count), 256), 1, 1}});
}

}  // namespace tf_kernels
