// The decoder's forward pass on tinyfin ops (model_impl.hpp).
#include <cmath>

#include "model_impl.hpp"

namespace tinyfin::llm {

namespace {

// Activations x [..., in] as the products with several weights take them: cast once to
// the weights' dtype when they are stored in f16/bf16 (q, k and v share one cast; so do gate and
// up), as they are for f32 and block-quantized weights.
class Input {
public:
    explicit Input(const Tensor &x) : x_(x) {}
    const Tensor &as_is() const { return x_; }
    const Tensor &for_weight(const Tensor &w) const {
        if (is_quantized(w.dtype()) || w.dtype() == x_.dtype()) return x_;
        if (!cast_.defined() || cast_.dtype() != w.dtype()) cast_ = x_.to(w.dtype());
        return cast_;
    }

private:
    Tensor x_;
    mutable Tensor cast_;
};

// x [..., in] by a weight of any float dtype: a weight stored in f16/bf16 is used as it is, the
// activations cast to its dtype for the product and the result back to x's dtype. A
// block-quantized weight goes to matmul_q (its blocks used as they are, never dequantized).
Tensor project(const Input &x, const Tensor &w, const Tensor &bias = Tensor()) {
    const Tensor &in = x.for_weight(w);
    const DType out = x.as_is().dtype();
    Tensor y = is_quantized(w.dtype()) ? matmul_q(in, w, out) : linear(in, w);
    if (y.dtype() != out) y = y.to(out);
    return bias.defined() ? add(y, bias) : y;
}
Tensor project(const Tensor &x, const Tensor &w, const Tensor &bias = Tensor()) { return project(Input(x), w, bias); }

// Activations of more rows than this (a prompt) multiply a fused f16/bf16 matrix member by member,
// through views of its rows: the cpu GEMM converts such a weight to f32 scratch on every call (an
// arena of 64 MiB by default, TINYFIN_SCRATCH_BYTES), which a fused gate/up of a 1.1B model (92
// MB as f32) outgrows, so it was allocated and faulted in anew each time (prefill 20-35% slower).
// Decoding's few rows (the matvec reads the weight in place) and f32 and quantized matrices (no
// whole-matrix conversion) keep the one product.
constexpr int64_t k_fused_max_rows = 16;

// The outputs of a set of matrices sharing their input x, one per member: each product's output
// split into its members' columns (views, no copies).
std::vector<Tensor> project(const Input &x, const SharedInput &s) {
    std::vector<Tensor> out(static_cast<std::size_t>(s.members));
    const Tensor &in = x.as_is();
    const int64_t rows = in.size(-1) > 0 ? in.numel() / in.size(-1) : 0;
    for (const Product &p : s.products) {
        const DType d = p.weight.dtype();
        const bool by_member = p.members.size() > 1 && rows > k_fused_max_rows && (d == DType::f16 || d == DType::bf16);
        const Tensor y = by_member ? Tensor() : project(x, p.weight);
        int64_t at = 0;
        for (std::size_t i = 0; i < p.members.size(); ++i) {
            Tensor &o = out[static_cast<std::size_t>(p.members[i])];
            if (by_member)
                o = project(x, narrow(p.weight, 0, at, p.rows[i]));
            else
                o = p.members.size() == 1 ? y : narrow(y, -1, at, p.rows[i]);
            at += p.rows[i];
        }
    }
    return out;
}

Tensor with_bias(const Tensor &y, const Tensor &bias) { return bias.defined() ? add(y, bias) : y; }

// Rotary embedding of x [B, T, H, D] with per-token tables cos/sin [B, T, 1, D/2]: rotate_half
// pairs (i, i + D/2) as Hugging Face does, or adjacent pairs (2i, 2i+1) for GGUF's permuted
// projections.
Tensor rotate(const Tensor &x, const Tensor &c, const Tensor &s, bool interleaved) {
    const int64_t half = x.size(-1) / 2;
    if (interleaved) {
        Shape pairs = x.shape();
        pairs.back() = half;
        pairs.push_back(2);
        const Tensor xp = x.reshape(pairs);
        const Tensor c2 = c.view({c.size(0), c.size(1), 1, half, 1}), s2 = s.view({s.size(0), s.size(1), 1, half, 1});
        const Tensor x1 = narrow(xp, -1, 0, 1), x2 = narrow(xp, -1, 1, 1);
        return concat({sub(mul(x1, c2), mul(x2, s2)), add(mul(x1, s2), mul(x2, c2))}, -1).reshape(x.shape());
    }
    const Tensor x1 = narrow(x, -1, 0, half), x2 = narrow(x, -1, half, half);
    return concat({sub(mul(x1, c), mul(x2, s)), add(mul(x2, c), mul(x1, s))}, -1);
}

}  // namespace

std::pair<Tensor, Tensor> Model::Impl::rope_tables(int64_t n) const {
    const auto half = static_cast<int64_t>(inv_freq.size());
    std::vector<float> c(static_cast<std::size_t>(n * half)), s(c.size());
    for (int64_t p = 0; p < n; ++p)
        for (int64_t i = 0; i < half; ++i) {
            const double angle = static_cast<double>(p) * inv_freq[static_cast<std::size_t>(i)];
            c[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
            s[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
        }
    return {from_vector(c, {n, half}, device), from_vector(s, {n, half}, device)};
}

Tensor Model::Impl::forward(const Tensor &ids, const Tensor &rope_index, const Tensor &mask, KVCache &cache,
                            int64_t start, const Tensor &cos_table, const Tensor &sin_table) const {
    NoGradGuard no_grad;
    const ModelConfig &c = config;
    const int64_t b = ids.size(0), t = ids.size(1), hd = c.head_dim, hkv = c.num_kv_heads;
    const int64_t group = c.num_heads / hkv, total = start + t;
    Tensor x = embedding(embed, ids);
    if (x.dtype() != DType::f32) x = x.to(DType::f32);
    const Tensor cs = embedding(cos_table, rope_index).view({b, t, 1, hd / 2});
    const Tensor sn = embedding(sin_table, rope_index).view({b, t, 1, hd / 2});
    for (std::size_t l = 0; l < layers.size(); ++l) {
        const LayerWeights &w = layers[l];
        const Input h(rms_norm(x, 1, w.attn_norm, c.rms_norm_eps));
        const std::vector<Tensor> qkv = project(h, w.qkv);
        const Tensor q = rotate(with_bias(qkv[0], w.bq).reshape({b, t, c.num_heads, hd}), cs, sn, c.rope_interleaved);
        const Tensor k = rotate(with_bias(qkv[1], w.bk).reshape({b, t, hkv, hd}), cs, sn, c.rope_interleaved);
        const Tensor v = with_bias(qkv[2], w.bv).reshape({b, t, hkv, hd});
        narrow(cache.k[l], 2, start, t).assign_(k.permute({0, 2, 1, 3}));
        narrow(cache.v[l], 2, start, t).assign_(v.permute({0, 2, 1, 3}));
        // The query heads of a group share one K/V head: K/V [B, Hkv, 1, L, D] broadcast over the
        // group axis of Q [B, Hkv, G, T, D] (no copy per query head).
        const Tensor keys = narrow(cache.k[l], 2, 0, total).reshape({b, hkv, 1, total, hd});
        const Tensor values = narrow(cache.v[l], 2, 0, total).reshape({b, hkv, 1, total, hd});
        const Tensor qh = q.view({b, t, hkv, group, hd}).permute({0, 2, 3, 1, 4});
        // A half-precision cache: attention in its dtype, the result back to f32.
        const DType kv = keys.dtype();
        const Tensor a = kv == DType::f32
                             ? scaled_dot_product_attention(qh, keys, values, mask, !mask.defined())
                             : scaled_dot_product_attention(qh.to(kv), keys, values,
                                                            mask.defined() ? mask.to(kv) : mask, !mask.defined())
                                   .to(DType::f32);
        const Tensor merged = a.permute({0, 3, 1, 2, 4}).reshape({b, t, c.num_heads * hd});
        x = add(x, project(merged, w.wo));
        const Input h2(rms_norm(x, 1, w.ffn_norm, c.rms_norm_eps));
        const std::vector<Tensor> gate_up = project(h2, w.gate_up);
        x = add(x, project(mul(silu(gate_up[0]), gate_up[1]), w.w_down));
    }
    return rms_norm(x, 1, norm, c.rms_norm_eps);
}

Tensor Model::Impl::head(const Tensor &hidden) const {
    NoGradGuard no_grad;
    Tensor y = project(hidden, lm_head);
    return y.dtype() == DType::f32 ? y : y.to(DType::f32);
}

}  // namespace tinyfin::llm
