// The optimizer updates adamw_step_ and sgd_step_: the ops of ops.def where the parameter's
// plugin claims them (one pass, in place), otherwise the same update as ordinary ops on the
// parameter's device, with the same f32 constants in the same order, so on one device both
// give the same bits.
#include <cmath>

#include "ops_common.hpp"

namespace tinyfin {

using namespace detail;

namespace {

// Same shape, dtype and device as param; name says which operand in the message.
void require_like(const Tensor &t, const Tensor &param, const char *op, const char *name) {
    if (t.shape() != param.shape())
        raise<ShapeError>(std::string(op) + ": " + name + " has shape " + shape_str(t.shape()) + ", the parameter " +
                          shape_str(param.shape()));
    if (t.dtype() != param.dtype())
        raise<DTypeError>(std::string(op) + ": " + name + " is " + dtype_name(t.dtype()) + ", the parameter " +
                          dtype_name(param.dtype()));
    if (t.device() != param.device())
        raise<DeviceError>(std::string(op) + ": " + name + " is on " + t.device().str() + ", the parameter on " +
                           param.device().str() + "; move it there first");
}

void require_operands(const Tensor &param, const Tensor &grad, std::initializer_list<const Tensor *> state,
                      std::initializer_list<const char *> names, tf_op op) {
    const char *name = op_info(op).name;
    if (!param.defined() || !grad.defined())
        raise<ValueError>(std::string(name) + ": the parameter and its gradient must be defined");
    if (!is_float(param.dtype()))
        raise<DTypeError>(std::string(name) + ": the parameter is " + dtype_name(param.dtype()) +
                          "; only float tensors can be optimized");
    require_like(grad, param, name, "grad");
    auto label = names.begin();
    for (const Tensor *t : state) {
        if (t->defined()) require_like(*t, param, name, *label);
        ++label;
    }
}

void require_finite(double value, const char *what, tf_op op) {
    if (!std::isfinite(value))
        raise<ValueError>(std::string(op_info(op).name) + ": " + what + " must be finite, got " +
                          std::to_string(value));
}

}  // namespace

void adamw_step_(const Tensor &param, const Tensor &grad, Tensor &exp_avg, Tensor &exp_avg_sq, const AdamWStep &o) {
    constexpr tf_op op = TF_OP_ADAMW_STEP;
    require_operands(param, grad, {&exp_avg, &exp_avg_sq}, {"exp_avg", "exp_avg_sq"}, op);
    if (exp_avg.defined() != exp_avg_sq.defined())
        raise<ValueError>(std::string(op_info(op).name) + ": exp_avg and exp_avg_sq must both be defined or both not");
    if (o.step < 1)
        raise<ValueError>(std::string(op_info(op).name) + ": step counts from 1, got " + std::to_string(o.step));
    for (auto [value, what] : {std::pair{o.lr, "lr"},
                               {o.beta1, "beta1"},
                               {o.beta2, "beta2"},
                               {o.eps, "eps"},
                               {o.weight_decay, "weight_decay"}})
        require_finite(value, what, op);
    NoGradGuard no_grad;
    const bool has_state = exp_avg.defined();
    const double bias_correction1 = 1.0 - std::pow(o.beta1, static_cast<double>(o.step));
    const double bias_correction2 = 1.0 - std::pow(o.beta2, static_cast<double>(o.step));
    tf_params_adamw_step p{};
    p.struct_size = sizeof p;
    p.has_state = has_state ? 1 : 0;
    p.decays = o.weight_decay != 0 ? 1 : 0;
    p.decay = 1.0 - o.lr * o.weight_decay;
    p.beta1 = o.beta1;
    p.one_minus_beta1 = 1.0 - o.beta1;
    p.beta2 = o.beta2;
    p.one_minus_beta2 = 1.0 - o.beta2;
    p.root_bias_correction2 = std::sqrt(bias_correction2);
    p.eps = o.eps;
    p.step_size = o.lr / bias_correction1;

    if (!has_state) {
        exp_avg = empty(param.shape(), param.dtype(), param.device());
        exp_avg_sq = empty(param.shape(), param.dtype(), param.device());
    }
    const TensorImpl *in[] = {grad.impl()};
    const TensorImpl *out[] = {param.impl(), exp_avg.impl(), exp_avg_sq.impl()};
    if (dispatch_if_claimed(op, in, out, &p)) return;

    // Ordinary ops: PyTorch's AdamW as written, the moments starting from zeros.
    Tensor m = has_state ? exp_avg : zeros(param.shape(), param.dtype(), param.device());
    Tensor v = has_state ? exp_avg_sq : zeros(param.shape(), param.dtype(), param.device());
    Tensor decayed = p.decays ? param * p.decay : param;
    Tensor m_next = m * p.beta1 + grad * p.one_minus_beta1;
    Tensor v_next = v * p.beta2 + (grad * grad) * p.one_minus_beta2;
    Tensor denom = sqrt(v_next) / p.root_bias_correction2 + p.eps;
    Tensor param_next = decayed - (m_next / denom) * p.step_size;
    exp_avg.assign_(m_next);
    exp_avg_sq.assign_(v_next);
    Tensor target = param;
    target.assign_(param_next);
}

void sgd_step_(const Tensor &param, const Tensor &grad, Tensor &momentum_buffer, const SGDStep &o) {
    constexpr tf_op op = TF_OP_SGD_STEP;
    require_operands(param, grad, {&momentum_buffer}, {"momentum_buffer"}, op);
    for (auto [value, what] : {std::pair{o.lr, "lr"}, {o.momentum, "momentum"}, {o.weight_decay, "weight_decay"}})
        require_finite(value, what, op);
    if (!(o.momentum > 0))
        raise<ValueError>(std::string(op_info(op).name) + ": momentum must be > 0, got " + std::to_string(o.momentum) +
                          " (without momentum there is no buffer to keep)");
    NoGradGuard no_grad;
    const bool has_state = momentum_buffer.defined();
    tf_params_sgd_step p{};
    p.struct_size = sizeof p;
    p.has_state = has_state ? 1 : 0;
    p.decays = o.weight_decay != 0 ? 1 : 0;
    p.nesterov = o.nesterov ? 1 : 0;
    p.lr = o.lr;
    p.momentum = o.momentum;
    p.weight_decay = o.weight_decay;

    if (!has_state) momentum_buffer = empty(param.shape(), param.dtype(), param.device());
    const TensorImpl *in[] = {grad.impl()};
    const TensorImpl *out[] = {param.impl(), momentum_buffer.impl()};
    if (dispatch_if_claimed(op, in, out, &p)) return;

    // Ordinary ops: PyTorch's SGD as written; the first step's buffer is a copy of the step.
    Tensor d = p.decays ? grad + param * p.weight_decay : grad;
    momentum_buffer.assign_(has_state ? momentum_buffer * p.momentum + d : d);
    Tensor step = p.nesterov ? d + momentum_buffer * p.momentum : momentum_buffer;
    Tensor param_next = param - step * p.lr;
    Tensor target = param;
    target.assign_(param_next);
}

}  // namespace tinyfin
