// Optimizers: SGD and AdamW with PyTorch's update rules, as tensor ops on the parameters'
// devices. State (momentum, moments) is rebound each step; only parameters are written in place.
#include <cmath>
#include <string>

#include "../errors.hpp"
#include "tinyfin/nn.hpp"

namespace tinyfin::optim {

using detail::raise;

namespace {

void require_finite_nonnegative(double value, const char *what, const char *op) {
    if (!(value >= 0) || !std::isfinite(value))
        raise<ValueError>(std::string(op) + ": " + what + " must be finite and >= 0, got " +
                          std::to_string(value));
}

// Writes a new value into a parameter without recording history.
void write(const Tensor &param, const Tensor &value) {
    Tensor target = param;
    target.assign_(value);
}

} // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
    require_finite_nonnegative(lr, "lr", "optimizer");
    for (std::size_t i = 0; i < params_.size(); ++i) {
        const Tensor &p = params_[i];
        if (!p.defined()) raise<ValueError>("optimizer: parameter " + std::to_string(i) + " is undefined");
        if (p.dtype() != DType::f32 && p.dtype() != DType::f16 && p.dtype() != DType::bf16)
            raise<DTypeError>("optimizer: parameter " + std::to_string(i) + " is " +
                              dtype_name(p.dtype()) + "; only float tensors can be optimized");
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
    : Optimizer(std::move(params), lr), momentum_(momentum), weight_decay_(weight_decay),
      nesterov_(nesterov), momentum_buffers_(params_.size()) {
    require_finite_nonnegative(momentum, "momentum", "SGD");
    require_finite_nonnegative(weight_decay, "weight_decay", "SGD");
    if (nesterov && momentum == 0) raise<ValueError>("SGD: nesterov needs a momentum > 0");
}

void SGD::step() {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
        const Tensor &p = params_[i];
        Tensor g = p.grad();
        if (!g.defined()) continue;
        if (weight_decay_ != 0) g = g + p * weight_decay_;
        if (momentum_ != 0) {
            Tensor &buf = momentum_buffers_[i];
            buf = buf.defined() ? buf * momentum_ + g : g;
            g = nesterov_ ? g + buf * momentum_ : buf;
        }
        write(p, p - g * lr_);
    }
}

// ---- AdamW --------------------------------------------------------------------------------

AdamW::AdamW(std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps,
             double weight_decay)
    : Optimizer(std::move(params), lr), beta1_(betas.first), beta2_(betas.second), eps_(eps),
      weight_decay_(weight_decay), exp_avg_(params_.size()), exp_avg_sq_(params_.size()),
      steps_(params_.size(), 0) {
    if (!(beta1_ >= 0 && beta1_ < 1) || !(beta2_ >= 0 && beta2_ < 1))
        raise<ValueError>("AdamW: betas must be in [0, 1), got (" + std::to_string(beta1_) + ", " +
                          std::to_string(beta2_) + ")");
    require_finite_nonnegative(eps, "eps", "AdamW");
    require_finite_nonnegative(weight_decay, "weight_decay", "AdamW");
}

void AdamW::step() {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
        const Tensor &p = params_[i];
        Tensor g = p.grad();
        if (!g.defined()) continue;
        int64_t t = ++steps_[i];
        Tensor &m = exp_avg_[i];
        Tensor &v = exp_avg_sq_[i];
        if (!m.defined()) {
            m = zeros(p.shape(), p.dtype(), p.device());
            v = zeros(p.shape(), p.dtype(), p.device());
        }
        Tensor decayed = weight_decay_ != 0 ? p * (1.0 - lr_ * weight_decay_) : p;
        m = m * beta1_ + g * (1.0 - beta1_);
        v = v * beta2_ + (g * g) * (1.0 - beta2_);
        double bias_correction1 = 1.0 - std::pow(beta1_, static_cast<double>(t));
        double bias_correction2 = 1.0 - std::pow(beta2_, static_cast<double>(t));
        Tensor denom = sqrt(v) / std::sqrt(bias_correction2) + eps_;
        write(p, decayed - (m / denom) * (lr_ / bias_correction1));
    }
}

} // namespace tinyfin::optim
