// Model::Impl: the loaded weights and the forward pass (private to libtinyfin-llm).
#pragma once

#include <memory>
#include <vector>

#include <tinyfin/llm/model.hpp>
#include <tinyfin/llm/tokenizer.hpp>

#include "fusion.hpp"

namespace tinyfin::llm {

struct LayerWeights {
    Tensor attn_norm;
    SharedInput qkv;  // members wq, wk, wv
    Tensor wo, bq, bk, bv;
    Tensor ffn_norm;
    SharedInput gate_up;  // members w_gate, w_up
    Tensor w_down;
};

// The KV caches of one session: per layer [batch, kv_heads, context, head_dim].
struct KVCache {
    std::vector<Tensor> k, v;
};

struct Model::Impl {
    ModelConfig config;
    LoadOptions options;
    Device device;
    std::shared_ptr<void> files;  // the mapped model files, while weights use them in place
    Tensor embed, norm, lm_head;
    std::vector<LayerWeights> layers;
    std::vector<double> inv_freq;  // rotary frequencies after rope_scaling / rope_freqs
    std::unique_ptr<Tokenizer> tokenizer;
    uint64_t bytes_in_place = 0, bytes_copied = 0, bytes_prepacked = 0;
    int64_t fused_matrices = 0;  // matrices computed inside a product with others (fusion.hpp)
    double load_seconds = 0;
    MemoryEstimate estimate;

    // cos and sin of position * inv_freq for positions 0..n-1: [n, head_dim/2] f32 on device.
    std::pair<Tensor, Tensor> rope_tables(int64_t n) const;
    // One forward pass of ids [B, T] (i64) whose keys/values go to cache slots start..start+T-1.
    // rope_index [B, T] (i64): each token's position (a row of the rope tables). mask: additive
    // [B, 1, 1, T, start+T] f32, or undefined for plain causal attention. Returns the final
    // normalised hidden states [B, T, hidden].
    Tensor forward(const Tensor &ids, const Tensor &rope_index, const Tensor &mask, KVCache &cache, int64_t start,
                   const Tensor &cos_table, const Tensor &sin_table) const;
    // LM head of hidden [..., hidden] -> logits [..., vocab] f32.
    Tensor head(const Tensor &hidden) const;
};

MemoryEstimate estimate_memory(const ModelConfig &config, uint64_t weight_bytes, const LoadOptions &options);

}  // namespace tinyfin::llm
