// attention_backward: the fused gradient of scaled_dot_product_attention (attention_backward.hpp).
#include "attention_backward.hpp"

#include "ops_common.hpp"

namespace tinyfin::detail {

std::optional<std::vector<Tensor>> attention_backward_fused(const Tensor &q, const Tensor &k, const Tensor &v,
                                                            const Tensor &mask, const Tensor &dy, bool causal,
                                                            double scale) {
    // The batch axes are dy's (the forward's broadcast of q's, k's and v's).
    const Shape &out_shape = dy.shape();
    const Shape batch(out_shape.begin(), out_shape.end() - 2);
    const int64_t tq = dy.size(-2), dv = dy.size(-1), d = q.size(-1), tk = k.size(-2);
    auto with_batch = [&](int64_t rows, int64_t cols) {
        Shape s = batch;
        s.insert(s.end(), {rows, cols});
        return s;
    };
    const Shape sq = with_batch(tq, d), sk = with_batch(tk, d), sv = with_batch(tk, dv), sm = with_batch(tq, tk);
    NoGradGuard no_grad;
    // q, k or v broadcast over batch axes in f16/bf16: the op's per-batch gradients would be
    // rounded before sum_to adds them (rounded twice, issue 31); in f32 they are summed, then
    // rounded once.
    auto count = [](const Shape &s) {
        int64_t n = 1;
        for (int64_t d : s) n *= d;
        return n;
    };
    if (dy.dtype() != DType::f32 && (q.numel() != count(sq) || k.numel() != count(sk) || v.numel() != count(sv))) {
        auto f32 = [](const Tensor &t) { return t.defined() ? cast(t, DType::f32) : t; };
        auto grads = attention_backward_fused(f32(q), f32(k), f32(v), f32(mask), f32(dy), causal, scale);
        if (!grads) return std::nullopt;
        return std::vector<Tensor>{cast((*grads)[0], q.dtype()), cast((*grads)[1], k.dtype()),
                                   cast((*grads)[2], v.dtype())};
    }
    const Tensor eq = raw_expand(q, sq), ek = raw_expand(k, sk), ev = raw_expand(v, sv);
    // No mask: the operand is absent (ops.def marks it optional), as in the forward's call.
    const Tensor em = mask.defined() ? raw_expand(mask, sm) : Tensor();
    const TensorImpl absent = mask.defined() ? TensorImpl() : absent_input(dy.dtype(), sm);
    if (!may_claim(TF_OP_ATTENTION_BACKWARD, *dy.impl(), dy.dtype())) return std::nullopt;
    Tensor gq = empty_like_device(dy, sq, dy.dtype()), gk = empty_like_device(dy, sk, dy.dtype()),
           gv = empty_like_device(dy, sv, dy.dtype());
    const TensorImpl *inputs[] = {eq.impl(), ek.impl(), ev.impl(), mask.defined() ? em.impl() : &absent, dy.impl()};
    const TensorImpl *outputs[] = {gq.impl(), gk.impl(), gv.impl()};
    const tf_params_attention p{sizeof(tf_params_attention), causal ? 1 : 0, 0, scale};
    if (!dispatch_if_claimed(TF_OP_ATTENTION_BACKWARD, inputs, outputs, &p)) return std::nullopt;
    return std::vector<Tensor>{sum_to(gq, q.shape()), sum_to(gk, k.shape()), sum_to(gv, v.shape())};
}

}  // namespace tinyfin::detail
