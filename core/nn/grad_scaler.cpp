// nn::GradScaler: dynamic loss scaling for f16 training (nn.hpp), torch.cuda.amp.GradScaler's
// rules. The inf/NaN check is one reduction per gradient into a single scalar and one host read
// per step: 0 * g is 0 for every finite element and NaN for inf or NaN, so the sum of all of
// them is 0 exactly when every gradient is finite.
#include <cmath>
#include <string>

#include "../errors.hpp"
#include "tinyfin/nn.hpp"

namespace tinyfin::nn {

using detail::raise;

GradScaler::GradScaler() : GradScaler(Options{}) {}

GradScaler::GradScaler(Options options) : options_(options), scale_(options.init_scale) {
    if (!(options.init_scale > 0) || !std::isfinite(options.init_scale))
        raise<ValueError>("GradScaler: init_scale must be finite and > 0, got " + std::to_string(options.init_scale));
    if (!(options.growth_factor > 1) || !std::isfinite(options.growth_factor))
        raise<ValueError>("GradScaler: growth_factor must be finite and > 1, got " +
                          std::to_string(options.growth_factor));
    if (!(options.backoff_factor > 0 && options.backoff_factor < 1))
        raise<ValueError>("GradScaler: backoff_factor must be in (0, 1), got " +
                          std::to_string(options.backoff_factor));
    if (options.growth_interval < 1)
        raise<ValueError>("GradScaler: growth_interval must be >= 1, got " + std::to_string(options.growth_interval));
}

Tensor GradScaler::scale(const Tensor &loss) const {
    if (!options_.enabled) return loss;
    return mul(loss, scale_);
}

void GradScaler::unscale_(optim::Optimizer &optimizer) {
    if (!options_.enabled) return;
    if (unscaled_)
        raise<AutogradError>("GradScaler: unscale_ was already called since the last update(); call it at "
                             "most once per step");
    NoGradGuard no_grad;
    Tensor nonfinite;  // sum of 0 * g over every gradient, f32 on the first gradient's device
    const double inverse = 1.0 / scale_;
    for (const Tensor &p : optimizer.params()) {
        Tensor g = p.grad();
        if (!g.defined()) continue;
        Tensor unscaled = mul(g, inverse);
        Tensor probe = sum(mul(unscaled, 0.0)).to(DType::f32);
        nonfinite = nonfinite.defined() ? add(nonfinite, probe.to(nonfinite.device())) : probe;
        g.assign_(unscaled);
    }
    found_inf_ = nonfinite.defined() && !std::isfinite(nonfinite.item<float>());
    unscaled_ = true;
}

bool GradScaler::step(optim::Optimizer &optimizer) {
    if (!options_.enabled) {
        optimizer.step();
        return true;
    }
    if (!unscaled_) unscale_(optimizer);
    stepped_ = true;
    if (found_inf_) return false;
    optimizer.step();
    return true;
}

void GradScaler::update() {
    if (!options_.enabled) return;
    if (!stepped_)
        raise<AutogradError>("GradScaler: update() without step() since the last update(); call step() first");
    if (found_inf_) {
        scale_ *= options_.backoff_factor;
        growth_tracker_ = 0;
    } else if (++growth_tracker_ >= options_.growth_interval) {
        const double grown = scale_ * options_.growth_factor;
        // torch keeps the old scale when growing would overflow f32.
        if (std::isfinite(static_cast<float>(grown))) scale_ = grown;
        growth_tracker_ = 0;
    }
    unscaled_ = false;
    stepped_ = false;
    found_inf_ = false;
}

NamedTensors GradScaler::state_dict(const std::string &prefix) const {
    return {{prefix + "scale", scalar(scale_, DType::f32)},
            {prefix + "growth_tracker", scalar(static_cast<double>(growth_tracker_), DType::i64)}};
}

void GradScaler::load_state_dict(const NamedTensors &dict, const std::string &prefix) {
    const Tensor *scale = nullptr, *tracker = nullptr;
    for (const auto &[name, t] : dict) {
        if (name == prefix + "scale") scale = &t;
        if (name == prefix + "growth_tracker") tracker = &t;
    }
    if (!scale || !tracker)
        raise<ValueError>("GradScaler::load_state_dict: the dict has no " + prefix +
                          (scale ? "growth_tracker" : "scale") +
                          " entry; save it with nn::save(path, ...scaler.state_dict())");
    if (scale->numel() != 1 || tracker->numel() != 1)
        raise<ValueError>("GradScaler::load_state_dict: " + prefix + "scale and " + prefix +
                          "growth_tracker must have one element each");
    const double value = scale->item<float>();
    const int64_t steps = tracker->item<int64_t>();
    if (!(value > 0) || !std::isfinite(value) || steps < 0)
        raise<ValueError>("GradScaler::load_state_dict: scale " + std::to_string(value) + " and growth_tracker " +
                          std::to_string(steps) + " are not a scaler's state (need scale > 0, tracker >= 0)");
    scale_ = value;
    growth_tracker_ = steps;
    unscaled_ = stepped_ = found_inf_ = false;
}

}  // namespace tinyfin::nn
