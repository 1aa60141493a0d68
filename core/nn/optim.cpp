// Optimizers: SGD and AdamW with PyTorch's update rules, on the parameters' devices: one fused
// op per parameter (adamw_step_, sgd_step_ in tinyfin.hpp), which updates the parameter and its
// state in place. Plain SGD without momentum has no state and stays three ordinary ops.
#include <cmath>
#include <string>

#include "tinyfin/nn.hpp"

namespace tinyfin::optim {

namespace {

void require_finite_nonnegative(double value, const char *what, const char *op) {
    if (!(value >= 0) || !std::isfinite(value))
        throw ValueError(std::string(op) + ": " + what + " must be finite and >= 0, got " + std::to_string(value));
}

// Writes a new value into a parameter without recording history.
void write(const Tensor &param, const Tensor &value) {
    Tensor target = param;
    target.assign_(value);
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
    require_finite_nonnegative(lr, "lr", "optimizer");
    for (std::size_t i = 0; i < params_.size(); ++i) {
        const Tensor &p = params_[i];
        if (!p.defined()) throw ValueError("optimizer: parameter " + std::to_string(i) + " is undefined");
        if (p.dtype() != DType::f32 && p.dtype() != DType::f16 && p.dtype() != DType::bf16)
            throw DTypeError("optimizer: parameter " + std::to_string(i) + " is " + dtype_name(p.dtype()) +
                             "; only float tensors can be optimized");
    }
}

void Optimizer::zero_grad() {
    for (Tensor &p : params_) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
    require_finite_nonnegative(lr, "lr", "set_lr");
    lr_ = lr;
}

// ---- SGD ----------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(std::move(params), lr), momentum_(momentum), weight_decay_(weight_decay), nesterov_(nesterov),
      momentum_buffers_(params_.size()) {
    require_finite_nonnegative(momentum, "momentum", "SGD");
    require_finite_nonnegative(weight_decay, "weight_decay", "SGD");
    if (nesterov && momentum == 0) throw ValueError("SGD: nesterov needs a momentum > 0");
}

void SGD::step() {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
        const Tensor &p = params_[i];
        Tensor g = p.grad();
        if (!g.defined()) continue;
        if (momentum_ != 0) {
            sgd_step_(p, g, momentum_buffers_[i], {lr_, momentum_, weight_decay_, nesterov_});
            continue;
        }
        if (weight_decay_ != 0) g = g + p * weight_decay_;
        write(p, p - g * lr_);
    }
}

// ---- AdamW --------------------------------------------------------------------------------

namespace {

std::vector<Tensor> flatten_groups(const std::vector<ParamGroup> &groups) {
    std::vector<Tensor> out;
    for (const ParamGroup &g : groups) out.insert(out.end(), g.params.begin(), g.params.end());
    return out;
}

}  // namespace

std::vector<ParamGroup> decay_matrices_only(const std::vector<Tensor> &params, double weight_decay) {
    require_finite_nonnegative(weight_decay, "weight_decay", "decay_matrices_only");
    ParamGroup decay{{}, weight_decay}, no_decay{{}, 0.0};
    for (const Tensor &p : params) (p.defined() && p.rank() >= 2 ? decay : no_decay).params.push_back(p);
    return {std::move(decay), std::move(no_decay)};
}

AdamW::AdamW(std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps, double weight_decay)
    : AdamW(std::vector<ParamGroup>{ParamGroup{std::move(params), weight_decay}}, lr, betas, eps, weight_decay) {}

AdamW::AdamW(std::vector<ParamGroup> groups, double lr, std::pair<double, double> betas, double eps,
             double weight_decay)
    : Optimizer(flatten_groups(groups), lr), beta1_(betas.first), beta2_(betas.second), eps_(eps),
      exp_avg_(params_.size()), exp_avg_sq_(params_.size()), steps_(params_.size(), 0) {
    if (!(beta1_ >= 0 && beta1_ < 1) || !(beta2_ >= 0 && beta2_ < 1))
        throw ValueError("AdamW: betas must be in [0, 1), got (" + std::to_string(beta1_) + ", " +
                         std::to_string(beta2_) + ")");
    require_finite_nonnegative(eps, "eps", "AdamW");
    require_finite_nonnegative(weight_decay, "weight_decay", "AdamW");
    for (const ParamGroup &g : groups) {
        double wd = g.weight_decay < 0 ? weight_decay : g.weight_decay;
        require_finite_nonnegative(wd, "weight_decay", "AdamW parameter group");
        decay_.insert(decay_.end(), g.params.size(), wd);
    }
}

void AdamW::step() {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
        const Tensor &p = params_[i];
        Tensor g = p.grad();
        if (!g.defined()) continue;
        adamw_step_(p, g, exp_avg_[i], exp_avg_sq_[i], {lr_, beta1_, beta2_, eps_, decay_[i], ++steps_[i]});
    }
}

}  // namespace tinyfin::optim
