// Optimizers: SGD and AdamW with PyTorch's update rules, as tensor ops on the parameters'
// devices. State (momentum, moments) is rebound each step; only parameters are written in place.
#include <cmath>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../errors.hpp"
#include "../tensor_impl.hpp"
#include "tinyfin/nn.hpp"

// The one-pass AdamW loop below must round after every operation, as the op-by-op path does:
// no contraction into fused multiply-adds (ISO C++ mode already says so; this makes it explicit,
// also for targets where FMA is baseline).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tinyfin::optim {

using detail::raise;

namespace {

void require_finite_nonnegative(double value, const char *what, const char *op) {
    if (!(value >= 0) || !std::isfinite(value))
        raise<ValueError>(std::string(op) + ": " + what + " must be finite and >= 0, got " +
                          std::to_string(value));
}

// The f32 elements of a dense tensor in host memory that the core may update in place: memory of
// the cpu plugin, or of blas, which claims only matmul and conv2d and so has every elementwise op
// run by the cpu plugin on that memory. Both run ops synchronously, so nothing is in flight.
// Null otherwise (other backends, other dtypes, views with gaps).
float *host_f32(const Tensor &t) {
    const TensorImpl &impl = *t.impl();
    if (impl.dtype != DType::f32 || !t.is_contiguous() || !impl.storage || !impl.storage->host) return nullptr;
    const std::string &backend = impl.storage->backend->name();
    if (backend != "cpu" && backend != "blas") return nullptr;
    return static_cast<float *>(impl.storage->host) + impl.offset;
}

// The f32 constants of one AdamW step, as the op path's scalar operands round them.
struct adamw_constants {
    float keep, b1, one_minus_b1, b2, one_minus_b2, root_bc2, eps, step_size;
};

// One AdamW step over n elements, a template per case so that the loop has no branches; the six
// arrays are distinct tensors' memory. sqrt in float is the correctly
// rounded root, the same value as the cpu plugin's root in double rounded once to float (double
// has more than 2 * 24 + 2 bits).
#if defined(__x86_64__)
// The loop below sixteen at a time, where the CPU has AVX-512 (the divisions and the root are
// most of its time): the same IEEE single operations lane by lane, so the same bits. Returns
// how many elements it did.
template <bool HasState, bool Decays>
[[gnu::target("avx512f")]] int64_t adamw_update_avx512(int64_t n, const adamw_constants &c, float *__restrict p,
                                                      const float *__restrict g, const float *__restrict m,
                                                      const float *__restrict v, float *__restrict m_out,
                                                      float *__restrict v_out) {
    const __m512 keep = _mm512_set1_ps(c.keep), b1 = _mm512_set1_ps(c.b1), omb1 = _mm512_set1_ps(c.one_minus_b1),
                 b2 = _mm512_set1_ps(c.b2), omb2 = _mm512_set1_ps(c.one_minus_b2), root = _mm512_set1_ps(c.root_bc2),
                 eps = _mm512_set1_ps(c.eps), step = _mm512_set1_ps(c.step_size);
    int64_t e = 0;
    for (; e + 16 <= n; e += 16) {
        const __m512 pv = _mm512_loadu_ps(p + e), gv = _mm512_loadu_ps(g + e);
        const __m512 m0 = HasState ? _mm512_loadu_ps(m + e) : _mm512_setzero_ps();
        const __m512 v0 = HasState ? _mm512_loadu_ps(v + e) : _mm512_setzero_ps();
        const __m512 decayed = Decays ? _mm512_mul_ps(pv, keep) : pv;
        const __m512 mv = _mm512_add_ps(_mm512_mul_ps(m0, b1), _mm512_mul_ps(gv, omb1));
        const __m512 vv = _mm512_add_ps(_mm512_mul_ps(v0, b2), _mm512_mul_ps(_mm512_mul_ps(gv, gv), omb2));
        // maskz: _mm512_sqrt_ps's undefined pass-through trips GCC 12's -Wmaybe-uninitialized.
        const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_maskz_sqrt_ps(0xffff, vv), root), eps);
        _mm512_storeu_ps(m_out + e, mv);
        _mm512_storeu_ps(v_out + e, vv);
        _mm512_storeu_ps(p + e, _mm512_sub_ps(decayed, _mm512_mul_ps(_mm512_div_ps(mv, denom), step)));
    }
    return e;
}
#endif

template <bool HasState, bool Decays>
void adamw_update(int64_t n, const adamw_constants &k, float *__restrict p, const float *__restrict g,
                  const float *__restrict m, const float *__restrict v, float *__restrict m_out,
                  float *__restrict v_out) {
    const adamw_constants c = k;
    int64_t e = 0;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f"))
        e = adamw_update_avx512<HasState, Decays>(n, c, p, g, m, v, m_out, v_out);
    // Four at a time with SSE: the compiler will not vectorise a sqrt that may set errno. The
    // same IEEE single operations, lane by lane.
    const __m128 keep = _mm_set1_ps(c.keep), b1 = _mm_set1_ps(c.b1), omb1 = _mm_set1_ps(c.one_minus_b1),
                 b2 = _mm_set1_ps(c.b2), omb2 = _mm_set1_ps(c.one_minus_b2), root = _mm_set1_ps(c.root_bc2),
                 eps = _mm_set1_ps(c.eps), step = _mm_set1_ps(c.step_size);
    for (; e + 4 <= n; e += 4) {
        const __m128 pv = _mm_loadu_ps(p + e), gv = _mm_loadu_ps(g + e);
        const __m128 m0 = HasState ? _mm_loadu_ps(m + e) : _mm_setzero_ps();
        const __m128 v0 = HasState ? _mm_loadu_ps(v + e) : _mm_setzero_ps();
        const __m128 decayed = Decays ? _mm_mul_ps(pv, keep) : pv;
        const __m128 mv = _mm_add_ps(_mm_mul_ps(m0, b1), _mm_mul_ps(gv, omb1));
        const __m128 vv = _mm_add_ps(_mm_mul_ps(v0, b2), _mm_mul_ps(_mm_mul_ps(gv, gv), omb2));
        const __m128 denom = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vv), root), eps);
        _mm_storeu_ps(m_out + e, mv);
        _mm_storeu_ps(v_out + e, vv);
        _mm_storeu_ps(p + e, _mm_sub_ps(decayed, _mm_mul_ps(_mm_div_ps(mv, denom), step)));
    }
#endif
    for (; e < n; ++e) {
        const float pv = p[e], gv = g[e];
        float m0 = 0.0f, v0 = 0.0f;  // the op path starts from zeros
        if constexpr (HasState) m0 = m[e], v0 = v[e];
        float decayed = pv;
        if constexpr (Decays) decayed = pv * c.keep;
        const float mv = m0 * c.b1 + gv * c.one_minus_b1;
        const float square = gv * gv;
        const float vv = v0 * c.b2 + square * c.one_minus_b2;
        const float denom = std::sqrt(vv) / c.root_bc2 + c.eps;
        m_out[e] = mv;
        v_out[e] = vv;
        p[e] = decayed - (mv / denom) * c.step_size;
    }
}

struct adamw_settings {
    double lr, beta1, beta2, eps, weight_decay;
};

// AdamW::step() for one f32 parameter in host memory (host_f32), in one pass instead of 14 ops,
// each a pass over the parameter into a fresh temporary: the optimizer was 5-10% of the
// Fashion-MNIST step. Every element goes through the same f32 operations in the same order as
// the op path, with the same f32 constants (a scalar operand is a fill of the dtype), and sqrt
// rounded once from double as the cpu plugin does, so the bits match the op path exactly. The
// moments are fresh tensors each step, as there. False: the caller uses the ops.
bool fused_adamw_step(const Tensor &p, const Tensor &g, Tensor &m, Tensor &v, int64_t t, const adamw_settings &o) {
    float *pp = host_f32(p);
    const float *gp = host_f32(g);
    const float *mp = m.defined() ? host_f32(m) : nullptr;
    const float *vp = v.defined() ? host_f32(v) : nullptr;
    if (!pp || !gp || g.shape() != p.shape() || (m.defined() && (!mp || !vp))) return false;
    Tensor m_next = empty(p.shape(), p.dtype(), p.device());
    Tensor v_next = empty(p.shape(), p.dtype(), p.device());
    float *mo = host_f32(m_next), *vo = host_f32(v_next);
    if (!mo || !vo) return false;

    const bool decay = o.weight_decay != 0;
    const auto keep = static_cast<float>(1.0 - o.lr * o.weight_decay);
    const auto b1 = static_cast<float>(o.beta1), one_minus_b1 = static_cast<float>(1.0 - o.beta1);
    const auto b2 = static_cast<float>(o.beta2), one_minus_b2 = static_cast<float>(1.0 - o.beta2);
    const double bias_correction1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
    const double bias_correction2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
    const auto root_bc2 = static_cast<float>(std::sqrt(bias_correction2));
    const auto eps = static_cast<float>(o.eps);
    const auto step_size = static_cast<float>(o.lr / bias_correction1);
    const int64_t n = p.numel();
    const adamw_constants k{keep, b1, one_minus_b1, b2, one_minus_b2, root_bc2, eps, step_size};
    if (mp && decay) adamw_update<true, true>(n, k, pp, gp, mp, vp, mo, vo);
    else if (mp) adamw_update<true, false>(n, k, pp, gp, mp, vp, mo, vo);
    else if (decay) adamw_update<false, true>(n, k, pp, gp, mp, vp, mo, vo);
    else adamw_update<false, false>(n, k, pp, gp, mp, vp, mo, vo);
    m = std::move(m_next);
    v = std::move(v_next);
    return true;
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

namespace {

std::vector<Tensor> flatten_groups(const std::vector<ParamGroup> &groups) {
    std::vector<Tensor> out;
    for (const ParamGroup &g : groups) out.insert(out.end(), g.params.begin(), g.params.end());
    return out;
}

} // namespace

std::vector<ParamGroup> decay_matrices_only(const std::vector<Tensor> &params, double weight_decay) {
    require_finite_nonnegative(weight_decay, "weight_decay", "decay_matrices_only");
    ParamGroup decay{{}, weight_decay}, no_decay{{}, 0.0};
    for (const Tensor &p : params) (p.defined() && p.rank() >= 2 ? decay : no_decay).params.push_back(p);
    return {std::move(decay), std::move(no_decay)};
}

AdamW::AdamW(std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps,
             double weight_decay)
    : AdamW(std::vector<ParamGroup>{ParamGroup{std::move(params), weight_decay}}, lr, betas, eps,
            weight_decay) {}

AdamW::AdamW(std::vector<ParamGroup> groups, double lr, std::pair<double, double> betas, double eps,
             double weight_decay)
    : Optimizer(flatten_groups(groups), lr), beta1_(betas.first), beta2_(betas.second), eps_(eps),
      exp_avg_(params_.size()), exp_avg_sq_(params_.size()), steps_(params_.size(), 0) {
    if (!(beta1_ >= 0 && beta1_ < 1) || !(beta2_ >= 0 && beta2_ < 1))
        raise<ValueError>("AdamW: betas must be in [0, 1), got (" + std::to_string(beta1_) + ", " +
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
        int64_t t = ++steps_[i];
        Tensor &m = exp_avg_[i];
        Tensor &v = exp_avg_sq_[i];
        const double weight_decay = decay_[i];
        if (fused_adamw_step(p, g, m, v, t, {lr_, beta1_, beta2_, eps_, weight_decay})) continue;
        if (!m.defined()) {
            m = zeros(p.shape(), p.dtype(), p.device());
            v = zeros(p.shape(), p.dtype(), p.device());
        }
        Tensor decayed = weight_decay != 0 ? p * (1.0 - lr_ * weight_decay) : p;
        m = m * beta1_ + g * (1.0 - beta1_);
        v = v * beta2_ + (g * g) * (1.0 - beta2_);
        double bias_correction1 = 1.0 - std::pow(beta1_, static_cast<double>(t));
        double bias_correction2 = 1.0 - std::pow(beta2_, static_cast<double>(t));
        Tensor denom = sqrt(v) / std::sqrt(bias_correction2) + eps_;
        write(p, decayed - (m / denom) * (lr_ / bias_correction1));
    }
}

} // namespace tinyfin::optim
