// The char_gpt transformer; see model.hpp.
#include "model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace chargpt {

using namespace tinyfin;

Config config_named(const std::string &name, int64_t vocab) {
    Config c;
    c.vocab = vocab;
    if (name == "tiny") {
        c.context = 16, c.dim = 32, c.layers = 2, c.heads = 2;
    } else if (name == "small") {
        c.context = 32, c.dim = 64, c.layers = 2, c.heads = 4;
    } else if (name == "default") {
        c.context = 64, c.dim = 128, c.layers = 4, c.heads = 4;
    } else {
        throw ValueError("ValueError: unknown config '" + name + "'; use tiny, small or default");
    }
    return c;
}

uint64_t KVCache::bytes() const {
    uint64_t total = 0;
    for (const Tensor &t : keys) total += t.nbytes();
    for (const Tensor &t : values) total += t.nbytes();
    return total;
}

// ---- Block ------------------------------------------------------------------------------------

Block::Block(const Config &config, uint64_t seed) : config_(config) {
    const int64_t e = config.dim;
    if (config.heads < 1 || e % config.heads != 0)
        throw ValueError("ValueError: char_gpt: dim " + std::to_string(e) + " does not divide into " +
                         std::to_string(config.heads) + " heads");
    ln1_ = std::make_shared<nn::LayerNorm>(e);
    qkv_ = std::make_shared<nn::Linear>(e, 3 * e, true, nn::mix_seed(seed, 1));
    proj_ = std::make_shared<nn::Linear>(e, e, true, nn::mix_seed(seed, 2));
    ln2_ = std::make_shared<nn::LayerNorm>(e);
    fc_ = std::make_shared<nn::Linear>(e, 4 * e, true, nn::mix_seed(seed, 3));
    fc2_ = std::make_shared<nn::Linear>(4 * e, e, true, nn::mix_seed(seed, 4));
    drop1_ = std::make_shared<nn::Dropout>(config.dropout, nn::mix_seed(seed, 5));
    drop2_ = std::make_shared<nn::Dropout>(config.dropout, nn::mix_seed(seed, 6));
    register_module("ln1", ln1_);
    register_module("qkv", qkv_);
    register_module("proj", proj_);
    register_module("ln2", ln2_);
    register_module("fc", fc_);
    register_module("fc2", fc2_);
    register_module("drop1", drop1_);
    register_module("drop2", drop2_);
}

Tensor Block::forward(const Tensor &) {
    throw ValueError("ValueError: char_gpt Block needs the batch and length: call "
                     "forward(x, batch, length, cache, layer)");
}

Tensor Block::forward(const Tensor &x, int64_t batch, int64_t length, KVCache *cache, std::size_t layer) {
    const int64_t e = config_.dim, h = config_.heads, d = e / h;
    // [B*T, 3E] -> three [B, H, T, D] views (no copies: the heads are column blocks).
    Tensor qkv = (*qkv_)((*ln1_)(x));
    std::vector<Tensor> parts = split(qkv, {e, e, e}, 1);
    auto heads = [&](const Tensor &t) { return t.view({batch, length, h, d}).transpose(1, 2); };
    Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
    if (cache != nullptr) {
        Tensor &ck = cache->keys[layer], &cv = cache->values[layer];
        const int64_t start = cache->length;
        ck.slice(2, start, start + length).assign_(k);
        cv.slice(2, start, start + length).assign_(v);
        k = ck.slice(2, 0, start + length);
        v = cv.slice(2, 0, start + length);
    }
    // The causal mask is aligned bottom-right (key j is hidden from query i when
    // j > i + Tk - Tq), which is what appending queries to a cache needs.
    Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), true);
    y = y.transpose(1, 2).reshape({batch * length, e});
    Tensor r = x + (*drop1_)((*proj_)(y));
    return r + (*drop2_)((*fc2_)(gelu((*fc_)((*ln2_)(r)))));
}

std::string Block::describe() const {
    return "Block(dim=" + std::to_string(config_.dim) + ", heads=" + std::to_string(config_.heads) + ")";
}

// ---- GPT --------------------------------------------------------------------------------------

GPT::GPT(const Config &config, uint64_t seed) : config_(config) {
    if (config.vocab < 1 || config.context < 1 || config.layers < 1)
        throw ValueError("ValueError: char_gpt: vocab, context and layers must be >= 1");
    tok_ = std::make_shared<nn::Embedding>(config.vocab, config.dim, nn::mix_seed(seed, 1));
    pos_ = std::make_shared<nn::Embedding>(config.context, config.dim, nn::mix_seed(seed, 2));
    drop_ = std::make_shared<nn::Dropout>(config.dropout, nn::mix_seed(seed, 3));
    register_module("tok", tok_);
    register_module("pos", pos_);
    register_module("drop", drop_);
    for (int64_t i = 0; i < config.layers; ++i) {
        blocks_.push_back(std::make_shared<Block>(config, nn::mix_seed(seed, 100 + static_cast<uint64_t>(i))));
        register_module("blocks." + std::to_string(i), blocks_.back());
    }
    ln_f_ = std::make_shared<nn::LayerNorm>(config.dim);
    lm_head_ = std::make_shared<nn::Linear>(config.dim, config.vocab, true, nn::mix_seed(seed, 4));
    register_module("ln_f", ln_f_);
    register_module("head", lm_head_);
}

Tensor GPT::embed(const Tensor &tokens, int64_t offset) {
    if (tokens.rank() != 2)
        throw ShapeError("ShapeError: char_gpt: tokens must be [batch, time], got " + shape_str(tokens.shape()));
    const int64_t b = tokens.size(0), t = tokens.size(1);
    if (offset + t > config_.context)
        throw ValueError("ValueError: char_gpt: positions up to " + std::to_string(offset + t) +
                         " exceed the context of " + std::to_string(config_.context));
    Tensor positions =
        arange(static_cast<double>(offset), static_cast<double>(offset + t), 1, DType::i64, tok_->weight.device());
    Tensor x = (*tok_)(tokens) + (*pos_)(positions);  // [B, T, E] + [T, E]
    return (*drop_)(x.reshape({b * t, config_.dim}));
}

Tensor GPT::head(const Tensor &x) { return (*lm_head_)((*ln_f_)(x)); }

Tensor GPT::forward(const Tensor &tokens) {
    Tensor x = embed(tokens, 0);
    const int64_t b = tokens.size(0), t = tokens.size(1);
    for (std::size_t i = 0; i < blocks_.size(); ++i) x = blocks_[i]->forward(x, b, t, nullptr, i);
    return head(x);
}

std::string GPT::describe() const {
    return "GPT(vocab=" + std::to_string(config_.vocab) + ", context=" + std::to_string(config_.context) +
           ", dim=" + std::to_string(config_.dim) + ", layers=" + std::to_string(config_.layers) +
           ", heads=" + std::to_string(config_.heads) + ")";
}

KVCache GPT::make_cache(int64_t batch) const {
    KVCache c;
    c.batch = batch;
    c.capacity = config_.context;
    const Shape shape{batch, config_.heads, config_.context, config_.dim / config_.heads};
    const Device device = tok_->weight.device();
    for (int64_t i = 0; i < config_.layers; ++i) {
        c.keys.push_back(zeros(shape, DType::f32, device));
        c.values.push_back(zeros(shape, DType::f32, device));
    }
    return c;
}

Tensor GPT::forward_cached(const Tensor &tokens, KVCache &cache) {
    NoGradGuard no_grad;
    if (tokens.rank() != 2 || tokens.size(0) != cache.batch)
        throw ShapeError("ShapeError: char_gpt: tokens " + shape_str(tokens.shape()) + " do not fit a cache of batch " +
                         std::to_string(cache.batch));
    const int64_t b = tokens.size(0), t = tokens.size(1);
    Tensor x = embed(tokens, cache.length);
    for (std::size_t i = 0; i < blocks_.size(); ++i) x = blocks_[i]->forward(x, b, t, &cache, i);
    cache.length += t;
    return head(x);
}

// ---- Sampling ---------------------------------------------------------------------------------

int32_t pick_token(const std::vector<float> &logits, double temperature, int64_t top_k, double u) {
    const auto n = static_cast<int64_t>(logits.size());
    if (temperature <= 0) return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    int64_t k = top_k > 0 && top_k < n ? top_k : n;
    // The k largest first, ties to the lower index, so the draw does not depend on sort order.
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    std::vector<double> p(static_cast<std::size_t>(k));
    const double top = logits[order[0]];
    double total = 0;
    for (int64_t i = 0; i < k; ++i) total += p[i] = std::exp((logits[order[i]] - top) / temperature);
    double target = u * total;
    for (int64_t i = 0; i < k; ++i) {
        target -= p[i];
        if (target < 0) return order[i];
    }
    return order[k - 1];
}

SampleResult sample(GPT &model, const std::vector<int32_t> &prompt, const SampleOptions &options) {
    if (prompt.empty()) throw ValueError("ValueError: char_gpt: sample needs a prompt of at least one token");
    const int64_t context = model.config().context;
    const Device device = model.parameters().front().device();
    bool was_training = model.is_training();
    model.eval();
    KVCache cache = model.make_cache(1);
    uint64_t state = nn::mix_seed(options.seed, 0x5a3b1e);
    auto uniform = [&state] {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
    };
    std::vector<int32_t> all = prompt;
    auto feed = [&](const int32_t *tokens, int64_t n) {
        Tensor t = from_host(tokens, {1, n}, DType::i32, device);
        Tensor logits = model.forward_cached(t, cache);
        return logits.slice(0, n - 1, n).to_vector<float>();
    };
    // The prompt's last `context` tokens prime the cache.
    int64_t start = std::max<int64_t>(0, static_cast<int64_t>(all.size()) - context);
    std::vector<float> logits = feed(all.data() + start, static_cast<int64_t>(all.size()) - start);
    SampleResult r;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < options.tokens; ++i) {
        int32_t next = pick_token(logits, options.temperature, options.top_k, uniform());
        all.push_back(next);
        r.tokens.push_back(next);
        if (i + 1 == options.tokens) break;
        if (cache.length == context) {
            cache.length = 0;
            const int64_t keep = std::max<int64_t>(1, context / 2);
            logits = feed(all.data() + all.size() - keep, keep);
        } else {
            logits = feed(&all.back(), 1);
        }
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    model.train(was_training);
    return r;
}

// ---- Memory -----------------------------------------------------------------------------------

namespace {

uint64_t parameter_count(const Config &c) {
    const int64_t e = c.dim;
    int64_t per_block = 2 * 2 * e + (e * 3 * e + 3 * e) + (e * e + e) + (e * 4 * e + 4 * e) + (4 * e * e + e);
    return static_cast<uint64_t>(c.vocab * e + c.context * e + c.layers * per_block + 2 * e + e * c.vocab + c.vocab);
}

}  // namespace

uint64_t training_bytes(const Config &c, int64_t batch) {
    const uint64_t params = parameter_count(c);
    const auto n = static_cast<uint64_t>(batch * c.context), e = static_cast<uint64_t>(c.dim);
    const auto t = static_cast<uint64_t>(c.context), h = static_cast<uint64_t>(c.heads);
    // What autograd keeps per block, in [N, E] units: the input, ln1's output, qkv (3), the
    // attention output and its row-major copy, the residual, ln2's output, fc (4) and gelu (4)
    // outputs: 17 (the projection, fc2's output and the second residual are not kept).
    // Embeddings: token, sum; final norm input/output: 4. Logits, their log-softmax: 2 N V. The
    // attention backward of one block at a time composed of ordinary ops (the GPU backends)
    // holds a few [B, H, T, T] score tensors: 4 (the cpu plugin's fused kernel tiles them, so
    // there the estimate is high by as much).
    uint64_t activations = n * e * (17 * static_cast<uint64_t>(c.layers) + 4) + 2 * n * static_cast<uint64_t>(c.vocab) +
                           4 * static_cast<uint64_t>(batch) * h * t * t;
    // Parameters, gradients, AdamW's exp_avg and exp_avg_sq.
    return 4 * (4 * params + activations);
}

uint64_t inference_bytes(const Config &c, int64_t batch) {
    const uint64_t cache = 2 * static_cast<uint64_t>(c.layers * batch * c.context * c.dim);
    // Plus one step's activations (a handful of [batch, 4E] rows and the logits): negligible
    // beside the parameters, but counted.
    const auto step = static_cast<uint64_t>(batch * (8 * c.dim + 2 * c.vocab));
    return 4 * (parameter_count(c) + cache + step);
}

}  // namespace chargpt
