// adamw_step and sgd_step (optim.comp): dense f32 operands of one shape, updated in place in one
// dispatch; anything else is left to the core, which then runs the update as ordinary ops.
#include "ops.hpp"

#include <cstring>

namespace tf_gpu {

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

// Every operand dense (the op's rule has checked shapes and dtypes).
bool optim_accepts(const KernelDevice &, const tf_op_desc &op) {
    for (uint32_t i = 0; i < op.n_inputs + op.n_outputs; ++i)
        if (!dense(i < op.n_inputs ? op.inputs[i] : op.outputs[i - op.n_inputs])) return false;
    return true;
}

// The shader's specialisation: mode 0 (adamw) or 1 (sgd), has_state, decays, nesterov; its
// constants in k.
struct OptimSetup {
    uint32_t mode, has_state, decays, nesterov;
};

void record(KernelDevice &dev, const tf_op_desc &op, OptimParams &p, OptimSetup s) {
    const char *name = op_name(op.op);
    const int64_t count = numel(op.outputs[0]);
    if (count == 0) return;
    TensorBinding b[4];
    b[0] = dev.bind(op.outputs[0], name, "output", 0);
    b[1] = dev.bind(op.inputs[0], name, "input", 0);
    for (uint32_t i = 1; i < op.n_outputs; ++i) b[1 + i] = dev.bind(op.outputs[i], name, "output", i);
    p.count = static_cast<uint32_t>(count);
    p.base0 = b[0].base;
    p.base1 = b[1].base;
    p.base2 = b[2].base;
    p.base3 = b[3].base;
    dev.dispatch({key_of(Shader::optim, s.mode, s.has_state, s.decays, s.nesterov),
                  &p,
                  sizeof p,
                  b,
                  1 + op.n_outputs,
                  {groups_for(dev.caps(), static_cast<uint64_t>(count), 256), 1, 1}});
}

void adamw_run(KernelDevice &dev, const tf_op_desc &op) {
    const auto &k = tf_kit::params_of<tf_params_adamw_step>(op);
    OptimParams p{};
    const tf_kit::AdamwF32 c = tf_kit::adamw_f32(k);
    static_assert(sizeof c == sizeof p.k);
    std::memcpy(p.k, &c, sizeof c);
    record(dev, op, p, {0, k.has_state ? 1u : 0u, k.decays ? 1u : 0u, 0});
}

void sgd_run(KernelDevice &dev, const tf_op_desc &op) {
    const auto &k = tf_kit::params_of<tf_params_sgd_step>(op);
    OptimParams p{};
    p.k[0] = static_cast<float>(k.lr);
    p.k[1] = static_cast<float>(k.momentum);
    p.k[2] = static_cast<float>(k.weight_decay);
    record(dev, op, p, {1, k.has_state ? 1u : 0u, k.decays ? 1u : 0u, k.nesterov ? 1u : 0u});
}

// f32 state only.
constexpr KernelRow k_rows[] = {
    kernel_row(TF_OP_ADAMW_STEP, Shader::optim, tf_kit::k_f32, adamw_run, optim_accepts),
    kernel_row(TF_OP_SGD_STEP, Shader::optim, tf_kit::k_f32, sgd_run, optim_accepts),
};

}  // namespace

std::span<const KernelRow> optim_kernels() { return k_rows; }

}  // namespace tf_gpu
