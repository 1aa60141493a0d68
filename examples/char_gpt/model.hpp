// The char_gpt model: a decoder-only transformer (nanoGPT's pre-norm layout) built from tinyfin
// modules and ops, with incremental decoding through a key/value cache on the device. Shared
// by the example, tinyfin-bench and tests/nn.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

namespace chargpt {

struct Config {
    int64_t vocab = 0;  // distinct tokens
    int64_t context = 64;  // longest sequence (learned positions)
    int64_t dim = 128;  // embedding width E
    int64_t layers = 4;
    int64_t heads = 4;  // E must divide by heads
    double dropout = 0.0;  // after the embeddings, the attention projection and the MLP
};

// "tiny" (tests: 2 layers, 2 heads, 32 dims, context 16), "small" (2 layers, 4 heads, 64 dims,
// context 32), "default" (4 layers, 4 heads, 128 dims, context 64). Throws tinyfin::ValueError
// for another name.
Config config_named(const std::string &name, int64_t vocab);

// Keys and values of every layer for `batch` sequences of up to config.context tokens, as
// [batch, heads, context, head_dim] tensors on one device; `length` positions are filled.
struct KVCache {
    std::vector<tinyfin::Tensor> keys, values;
    int64_t batch = 0;
    int64_t length = 0;
    int64_t capacity = 0;
    // The bytes the cache holds on its device.
    uint64_t bytes() const;
};

// Pre-norm block: x + drop(proj(attn(ln1(x)))), then x + drop(fc2(gelu(fc(ln2(x))))).
class Block : public tinyfin::nn::Module {
public:
    Block(const Config &config, uint64_t seed);
    // x [B*T, E] rows of B sequences of T tokens.
    tinyfin::Tensor forward(const tinyfin::Tensor &x) override;
    // The same with batch and length given; with cache, keys and values are appended to layer
    // `layer` of it at positions cache->length.. and attention covers the whole cache.
    tinyfin::Tensor forward(const tinyfin::Tensor &x, int64_t batch, int64_t length, KVCache *cache, std::size_t layer);
    std::string describe() const override;

private:
    Config config_;
    std::shared_ptr<tinyfin::nn::LayerNorm> ln1_, ln2_;
    std::shared_ptr<tinyfin::nn::Linear> qkv_, proj_, fc_, fc2_;
    std::shared_ptr<tinyfin::nn::Dropout> drop1_, drop2_;
};

class GPT : public tinyfin::nn::Module {
public:
    // Parameters on default_device(); each layer draws from its own stream of seed. Linear
    // layers and layer norms start as in PyTorch, embeddings from N(0, 1).
    GPT(const Config &config, uint64_t seed);
    // Integer tokens [B, T] (T <= context) -> logits [B*T, vocab].
    tinyfin::Tensor forward(const tinyfin::Tensor &tokens) override;
    std::string describe() const override;
    const Config &config() const { return config_; }

    // An empty cache for `batch` sequences on the parameters' device.
    KVCache make_cache(int64_t batch) const;
    // Appends tokens [B, T] (cache.length + T <= context) to the cache and returns their logits
    // [B*T, vocab]: the same values forward() gives for those positions of the whole prefix.
    // Runs without recording history.
    tinyfin::Tensor forward_cached(const tinyfin::Tensor &tokens, KVCache &cache);

private:
    tinyfin::Tensor embed(const tinyfin::Tensor &tokens, int64_t offset);
    tinyfin::Tensor head(const tinyfin::Tensor &x);

    Config config_;
    std::shared_ptr<tinyfin::nn::Embedding> tok_, pos_;
    std::shared_ptr<tinyfin::nn::Dropout> drop_;
    std::vector<std::shared_ptr<Block>> blocks_;
    std::shared_ptr<tinyfin::nn::LayerNorm> ln_f_;
    std::shared_ptr<tinyfin::nn::Linear> lm_head_;
};

struct SampleOptions {
    int64_t tokens = 200;
    double temperature = 1.0;  // <= 0: greedy
    int64_t top_k = 0;  // 0: the whole vocabulary
    uint64_t seed = 0;
};

struct SampleResult {
    std::vector<int32_t> tokens;  // the generated tokens (without the prompt)
    double seconds = 0;  // decoding time after the prompt
};

// Generates from prompt (at least one token) with the KV cache, one token at a time. When the
// cache is full the last context/2 tokens are fed again into an emptied cache (the learned
// positions end at context). Draws come from a splitmix64 stream of seed: the same seed gives
// the same text on every run.
SampleResult sample(GPT &model, const std::vector<int32_t> &prompt, const SampleOptions &options);

// Picks the next token from logits (host floats) with temperature and top-k; u in [0, 1).
int32_t pick_token(const std::vector<float> &logits, double temperature, int64_t top_k, double u);

// Bytes of the model's training state (parameters, gradients, AdamW's two moments) and the
// activations autograd keeps for one batch of batch x context tokens; and of inference
// (parameters and a KV cache for `batch` sequences). f32 throughout.
uint64_t training_bytes(const Config &config, int64_t batch);
uint64_t inference_bytes(const Config &config, int64_t batch);

}  // namespace chargpt
