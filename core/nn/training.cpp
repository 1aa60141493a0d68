// Training helpers beside the optimizers: gradient clipping by global norm and the warmup +
// cosine learning-rate schedule.
#include <cmath>
#include <numbers>
#include <string>

#include "../errors.hpp"
#include "tinyfin/nn.hpp"

namespace tinyfin::nn {

using detail::raise;

Tensor clip_grad_norm(const std::vector<Tensor> &params, double max_norm) {
    if (!(max_norm >= 0) || !std::isfinite(max_norm))
        raise<ValueError>("clip_grad_norm: max_norm must be finite and >= 0, got " + std::to_string(max_norm));
    NoGradGuard no_grad;
    Tensor total;
    for (const Tensor &p : params) {
        Tensor g = p.grad();
        if (!g.defined()) continue;
        if (total.defined() && g.device() != total.device())
            raise<DeviceError>("clip_grad_norm: gradients on " + total.device().str() + " and " + g.device().str() +
                               "; move the model to one device first");
        Tensor s = sum(square(g.dtype() == DType::f32 ? g : cast(g, DType::f32)));
        total = total.defined() ? add(total, s) : s;
    }
    if (!total.defined()) return zeros({});
    Tensor norm = sqrt(total);
    // min(1, max_norm / (norm + 1e-6)) on the device: no read-back, as torch does it.
    Tensor coef = clamp(div(scalar_like(norm, max_norm), norm + 1e-6), -INFINITY, 1.0);
    for (const Tensor &p : params) {
        Tensor g = p.grad();
        if (!g.defined()) continue;
        Tensor target = p;
        target.set_grad(mul(g, g.dtype() == coef.dtype() ? coef : cast(coef, g.dtype())));
    }
    return norm;
}

WarmupCosine::WarmupCosine(double max_lr_, double min_lr_, int64_t warmup_, int64_t total_)
    : max_lr(max_lr_), min_lr(min_lr_), warmup(warmup_), total(total_) {
    if (!(max_lr >= 0) || !(min_lr >= 0) || !std::isfinite(max_lr) || !std::isfinite(min_lr))
        raise<ValueError>("WarmupCosine: learning rates must be finite and >= 0, got max " + std::to_string(max_lr) +
                          ", min " + std::to_string(min_lr));
    if (warmup < 0 || total < 0 || warmup > total)
        raise<ValueError>("WarmupCosine: need 0 <= warmup <= total, got warmup " + std::to_string(warmup) + ", total " +
                          std::to_string(total));
}

double WarmupCosine::operator()(int64_t step) const {
    if (step < warmup) return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
    if (step >= total) return min_lr;
    double r = static_cast<double>(step - warmup) / static_cast<double>(total - warmup);
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * r));
}

}  // namespace tinyfin::nn
