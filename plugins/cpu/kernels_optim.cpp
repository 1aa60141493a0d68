// The optimizer updates adamw_step and sgd_step (ops.def): one pass over a parameter and its
// state, in place, instead of one pass per operation into fresh temporaries (AdamW written as
// ops is 14 of them). f32 operands without gaps only; the core runs anything else as ordinary
// ops. Every element goes through the f32 operations ops.def lists, in that order and each
// rounded, at every instruction-set level (generic, SSE, AVX2, AVX-512): the bits equal those
// of the same update written as ordinary ops, which round every product. No multiply-add may
// be fused: GCC contracts a * b + c into an FMA by default in C++ (-ffp-contract=fast), also
// across intrinsics, wherever the target has FMA (avx512f implies it), which made the AVX-512
// loop 1-2 ulp off (issue 31); the pragma below turns that off for this file.
#include "kernels_nn.hpp"

#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tf_cpu {
namespace {

// The f32 constants of one AdamW step, each rounded once from the params' double.
using AdamwConstants = AdamwF32;

#if defined(__x86_64__)
// Sixteen elements at a time where the instruction set allows AVX-512 (the divisions and the
// root are most of the time): the same IEEE single operations lane by lane, none fused (see the
// top). Returns how many elements it did.
template <bool HasState, bool Decays>
[[gnu::target("avx512f")]] int64_t adamw_avx512(int64_t n, const AdamwConstants &c, float *__restrict p,
                                                const float *__restrict g, float *__restrict m, float *__restrict v) {
    const __m512 keep = _mm512_set1_ps(c.decay), b1 = _mm512_set1_ps(c.beta1), omb1 = _mm512_set1_ps(c.one_minus_beta1),
                 b2 = _mm512_set1_ps(c.beta2), omb2 = _mm512_set1_ps(c.one_minus_beta2),
                 root = _mm512_set1_ps(c.root_bias_correction2), eps = _mm512_set1_ps(c.eps),
                 step = _mm512_set1_ps(c.step_size);
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
        _mm512_storeu_ps(m + e, mv);
        _mm512_storeu_ps(v + e, vv);
        _mm512_storeu_ps(p + e, _mm512_sub_ps(decayed, _mm512_mul_ps(_mm512_div_ps(mv, denom), step)));
    }
    return e;
}

// Four at a time with SSE (x86-64's baseline): GCC does not vectorise a sqrt that may set errno.
template <bool HasState, bool Decays>
int64_t adamw_sse(int64_t e, int64_t n, const AdamwConstants &c, float *__restrict p, const float *__restrict g,
                  float *__restrict m, float *__restrict v) {
    const __m128 keep = _mm_set1_ps(c.decay), b1 = _mm_set1_ps(c.beta1), omb1 = _mm_set1_ps(c.one_minus_beta1),
                 b2 = _mm_set1_ps(c.beta2), omb2 = _mm_set1_ps(c.one_minus_beta2),
                 root = _mm_set1_ps(c.root_bias_correction2), eps = _mm_set1_ps(c.eps), step = _mm_set1_ps(c.step_size);
    for (; e + 4 <= n; e += 4) {
        const __m128 pv = _mm_loadu_ps(p + e), gv = _mm_loadu_ps(g + e);
        const __m128 m0 = HasState ? _mm_loadu_ps(m + e) : _mm_setzero_ps();
        const __m128 v0 = HasState ? _mm_loadu_ps(v + e) : _mm_setzero_ps();
        const __m128 decayed = Decays ? _mm_mul_ps(pv, keep) : pv;
        const __m128 mv = _mm_add_ps(_mm_mul_ps(m0, b1), _mm_mul_ps(gv, omb1));
        const __m128 vv = _mm_add_ps(_mm_mul_ps(v0, b2), _mm_mul_ps(_mm_mul_ps(gv, gv), omb2));
        const __m128 denom = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vv), root), eps);
        _mm_storeu_ps(m + e, mv);
        _mm_storeu_ps(v + e, vv);
        _mm_storeu_ps(p + e, _mm_sub_ps(decayed, _mm_mul_ps(_mm_div_ps(mv, denom), step)));
    }
    return e;
}
#endif

// One AdamW step over n elements, a template per case so that the loops have no branches. sqrt
// in float is the correctly rounded root, the value the elementwise sqrt gives (computed in
// double and rounded once: double has more than 2 * 24 + 2 bits).
template <bool HasState, bool Decays>
void adamw(int64_t n, const AdamwConstants &c, float *__restrict p, const float *__restrict g, float *__restrict m,
           float *__restrict v) {
    int64_t e = 0;
#if defined(__x86_64__)
    if (isa_level() == 2) e = adamw_avx512<HasState, Decays>(n, c, p, g, m, v);
    e = adamw_sse<HasState, Decays>(e, n, c, p, g, m, v);
#endif
    for (; e < n; ++e) {
        const float pv = p[e], gv = g[e];
        float m0 = 0.0f, v0 = 0.0f;
        if constexpr (HasState) m0 = m[e], v0 = v[e];
        float decayed = pv;
        if constexpr (Decays) decayed = pv * c.decay;
        const float mv = m0 * c.beta1 + gv * c.one_minus_beta1;
        const float square = gv * gv;
        const float vv = v0 * c.beta2 + square * c.one_minus_beta2;
        const float denom = std::sqrt(vv) / c.root_bias_correction2 + c.eps;
        m[e] = mv;
        v[e] = vv;
        p[e] = decayed - (mv / denom) * c.step_size;
    }
}

// One SGD step with momentum: no division or root, so the compiler vectorises it for each
// instruction set (TF_CPU_ISA_DISPATCH).
struct SgdConstants {
    float lr, momentum, weight_decay;
};

template <bool HasState, bool Decays, bool Nesterov>
[[gnu::always_inline]] inline void sgd_body(int64_t n, const SgdConstants &c, float *__restrict p,
                                            const float *__restrict g, float *__restrict buf) {
    for (int64_t e = 0; e < n; ++e) {
        float d = g[e];
        if constexpr (Decays) d = d + p[e] * c.weight_decay;
        float b = d;
        if constexpr (HasState) b = buf[e] * c.momentum + d;
        buf[e] = b;
        float step = b;
        if constexpr (Nesterov) step = d + b * c.momentum;
        p[e] = p[e] - step * c.lr;
    }
}

template <bool HasState, bool Decays, bool Nesterov>
void sgd(int64_t n, const SgdConstants &c, float *p, const float *g, float *buf) {
#if defined(__x86_64__)
    struct Isa {
        static void generic(int64_t n, const SgdConstants &c, float *p, const float *g, float *buf) {
            sgd_body<HasState, Decays, Nesterov>(n, c, p, g, buf);
        }
        [[gnu::target("avx2")]] static void avx2(int64_t n, const SgdConstants &c, float *p, const float *g,
                                                 float *buf) {
            sgd_body<HasState, Decays, Nesterov>(n, c, p, g, buf);
        }
        [[gnu::target("avx512f")]] static void avx512(int64_t n, const SgdConstants &c, float *p, const float *g,
                                                      float *buf) {
            sgd_body<HasState, Decays, Nesterov>(n, c, p, g, buf);
        }
    };
    const int level = isa_level();
    if (level == 2)
        Isa::avx512(n, c, p, g, buf);
    else if (level == 1)
        Isa::avx2(n, c, p, g, buf);
    else
        Isa::generic(n, c, p, g, buf);
#else
    sgd_body<HasState, Decays, Nesterov>(n, c, p, g, buf);
#endif
}

float *f32_at(const tf_tensor_desc &d) { return reinterpret_cast<float *>(base_of(d)); }

}  // namespace

// The kernels' limit beyond the rule (every operand of output 0's shape and dtype): every
// operand f32 without gaps. Outputs are distinct tensors (the core's promise), so the restrict
// pointers above hold.
bool dense_f32_operands(const tf_op_desc &op) {
    for (uint32_t i = 0; i < op.n_inputs + op.n_outputs; ++i)
        if (!dense_f32(i < op.n_inputs ? op.inputs[i] : op.outputs[i - op.n_inputs])) return false;
    return true;
}

tf_status run_optim(const tf_op_desc &op, tf_error *err) {
    const int64_t n = numel(op.outputs[0]);
    if (n == 0) return TF_STATUS_OK;
    const uint32_t count = op.n_inputs + op.n_outputs;
    for (uint32_t i = 0; i < count; ++i) {
        const tf_tensor_desc &t = i < op.n_inputs ? op.inputs[i] : op.outputs[i - op.n_inputs];
        if (!t.data)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: operand %u is not in host memory", op_name(op.op), i);
    }
    const float *g = f32_at(op.inputs[0]);
    float *p = f32_at(op.outputs[0]);
    if (op.op == TF_OP_ADAMW_STEP) {
        const auto &k = *static_cast<const tf_params_adamw_step *>(op.params);
        const AdamwConstants c = adamw_f32(k);
        float *m = f32_at(op.outputs[1]), *v = f32_at(op.outputs[2]);
        if (k.has_state && k.decays)
            adamw<true, true>(n, c, p, g, m, v);
        else if (k.has_state)
            adamw<true, false>(n, c, p, g, m, v);
        else if (k.decays)
            adamw<false, true>(n, c, p, g, m, v);
        else
            adamw<false, false>(n, c, p, g, m, v);
        return TF_STATUS_OK;
    }
    const auto &k = *static_cast<const tf_params_sgd_step *>(op.params);
    const SgdConstants c{static_cast<float>(k.lr), static_cast<float>(k.momentum), static_cast<float>(k.weight_decay)};
    float *buf = f32_at(op.outputs[1]);
    const int which = (k.has_state ? 4 : 0) | (k.decays ? 2 : 0) | (k.nesterov ? 1 : 0);
    switch (which) {
    case 0: sgd<false, false, false>(n, c, p, g, buf); break;
    case 1: sgd<false, false, true>(n, c, p, g, buf); break;
    case 2: sgd<false, true, false>(n, c, p, g, buf); break;
    case 3: sgd<false, true, true>(n, c, p, g, buf); break;
    case 4: sgd<true, false, false>(n, c, p, g, buf); break;
    case 5: sgd<true, false, true>(n, c, p, g, buf); break;
    case 6: sgd<true, true, false>(n, c, p, g, buf); break;
    default: sgd<true, true, true>(n, c, p, g, buf); break;
    }
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
