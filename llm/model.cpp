// Model: loading from a Hugging Face directory or a GGUF file, and generation (model.hpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numbers>

#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/gguf.hpp>
#include <tinyfin/llm/safetensors.hpp>
#include <tinyfin/llm/sampler.hpp>

#include "model_impl.hpp"
#include "vocabulary.hpp"

namespace tinyfin::llm {

namespace {

namespace fs = std::filesystem;

// Where the weights come from: tensor lookup by the format's names.
struct Source {
    std::shared_ptr<void> holder;  // keeps the mapped files alive
    std::function<const TensorData *(std::string_view)> find;
    bool gguf = false;
    std::string path;
};

enum class Kind { directory, gguf };

Kind classify(const std::string &path) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || st.type() == fs::file_type::not_found)
        throw FileError("FileError: model path '" + path + "' does not exist");
    if (st.type() == fs::file_type::directory) {
        if (!fs::exists(fs::path(path) / "config.json", ec))
            throw FileError(
                "FileError: '" + path +
                "' is a directory without config.json (expected a Hugging Face model directory or a .gguf file)");
        return Kind::directory;
    }
    // Anything else is opened as a GGUF file; MappedFile refuses FIFOs, devices and sockets.
    return Kind::gguf;
}

std::string hf_name(const std::string &what, int64_t layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    if (what == "attn_norm") return p + "input_layernorm.weight";
    if (what == "ffn_norm") return p + "post_attention_layernorm.weight";
    if (what == "wq") return p + "self_attn.q_proj.weight";
    if (what == "wk") return p + "self_attn.k_proj.weight";
    if (what == "wv") return p + "self_attn.v_proj.weight";
    if (what == "wo") return p + "self_attn.o_proj.weight";
    if (what == "bq") return p + "self_attn.q_proj.bias";
    if (what == "bk") return p + "self_attn.k_proj.bias";
    if (what == "bv") return p + "self_attn.v_proj.bias";
    if (what == "w_gate") return p + "mlp.gate_proj.weight";
    if (what == "w_up") return p + "mlp.up_proj.weight";
    if (what == "w_down") return p + "mlp.down_proj.weight";
    if (what == "embed") return "model.embed_tokens.weight";
    if (what == "norm") return "model.norm.weight";
    return "lm_head.weight";
}

std::string gguf_name(const std::string &what, int64_t layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    if (what == "attn_norm") return p + "attn_norm.weight";
    if (what == "ffn_norm") return p + "ffn_norm.weight";
    if (what == "wq") return p + "attn_q.weight";
    if (what == "wk") return p + "attn_k.weight";
    if (what == "wv") return p + "attn_v.weight";
    if (what == "wo") return p + "attn_output.weight";
    if (what == "bq") return p + "attn_q.bias";
    if (what == "bk") return p + "attn_k.bias";
    if (what == "bv") return p + "attn_v.bias";
    if (what == "w_gate") return p + "ffn_gate.weight";
    if (what == "w_up") return p + "ffn_up.weight";
    if (what == "w_down") return p + "ffn_down.weight";
    if (what == "embed") return "token_embd.weight";
    if (what == "norm") return "output_norm.weight";
    return "output.weight";
}

struct Opened {
    Source source;
    ModelConfig config;
    std::shared_ptr<GgufFile> gguf;
};

Opened open_model(const std::string &path) {
    Opened o;
    o.source.path = path;
    if (classify(path) == Kind::directory) {
        o.config = read_hf_config((fs::path(path) / "config.json").string());
        auto set = std::make_shared<SafetensorsSet>(path);
        o.source.holder = set;
        o.source.find = [set](std::string_view name) { return set->find(name); };
    } else {
        o.gguf = std::make_shared<GgufFile>(path);
        o.config = read_gguf_config(*o.gguf);
        o.source.holder = o.gguf;
        o.source.gguf = true;
        o.source.find = [g = o.gguf](std::string_view name) { return g->find(name); };
    }
    return o;
}

// The shape each weight must have.
Shape expected_shape(const ModelConfig &c, const std::string &what) {
    const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    if (what == "attn_norm" || what == "ffn_norm" || what == "norm") return {c.hidden_size};
    if (what == "wq") return {q, c.hidden_size};
    if (what == "wk" || what == "wv") return {kv, c.hidden_size};
    if (what == "wo") return {c.hidden_size, q};
    if (what == "bq") return {q};
    if (what == "bk" || what == "bv") return {kv};
    if (what == "w_gate" || what == "w_up") return {c.intermediate_size, c.hidden_size};
    if (what == "w_down") return {c.hidden_size, c.intermediate_size};
    return {c.vocab_size, c.hidden_size};  // embed, lm_head
}

bool is_small(const std::string &what) { return what.find("norm") != std::string::npos || what[0] == 'b'; }

std::vector<std::string> layer_weights(const ModelConfig &c) {
    std::vector<std::string> w = {"attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_up", "w_down"};
    if (c.attention_bias) w.insert(w.end(), {"bq", "bk", "bv"});
    return w;
}

uint64_t weight_bytes(const Opened &o, const LoadOptions &options) {
    const ModelConfig &c = o.config;
    uint64_t total = 0;
    auto add = [&](const std::string &what, int64_t layer) {
        const std::string name = o.source.gguf ? gguf_name(what, layer) : hf_name(what, layer);
        const TensorData *t = o.source.find(name);
        if (!t) return;
        const uint64_t n = t->bytes.size();
        total += (options.weights_f32 || is_small(what)) && t->type != TensorType::f32 ? n * 2 : n;
    };
    add("embed", 0);
    add("norm", 0);
    if (!c.tie_word_embeddings) add("lm_head", 0);
    for (int64_t l = 0; l < c.num_layers; ++l)
        for (const auto &w : layer_weights(c)) add(w, l);
    return total;
}

int64_t default_context(const ModelConfig &c, const LoadOptions &o) {
    return o.context > 0 ? o.context : std::min<int64_t>(c.max_position, 4096);
}

std::vector<double> rotary_frequencies(const ModelConfig &c, const Opened &o) {
    const int64_t half = c.head_dim / 2;
    std::vector<double> f(static_cast<std::size_t>(half));
    for (int64_t i = 0; i < half; ++i)
        f[static_cast<std::size_t>(i)] =
            std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
    const RopeScaling &rs = c.rope_scaling;
    if (rs.kind == RopeScaling::Kind::linear)
        for (double &x : f) x /= rs.factor;
    if (rs.kind == RopeScaling::Kind::llama3) {
        // transformers' _compute_llama3_parameters: long wavelengths slowed by factor, short ones
        // kept, a smooth blend between.
        const double low_wavelen = static_cast<double>(rs.original_max_position) / rs.low_freq_factor;
        const double high_wavelen = static_cast<double>(rs.original_max_position) / rs.high_freq_factor;
        for (double &x : f) {
            const double wavelen = 2 * std::numbers::pi / x;
            if (wavelen < high_wavelen) continue;
            if (wavelen > low_wavelen) {
                x /= rs.factor;
                continue;
            }
            const double smooth = (static_cast<double>(rs.original_max_position) / wavelen - rs.low_freq_factor) /
                                  (rs.high_freq_factor - rs.low_freq_factor);
            x = (1 - smooth) * x / rs.factor + smooth * x;
        }
    }
    // GGUF keeps llama3's scaling as per-frequency divisors (rope_freqs.weight).
    if (o.source.gguf)
        if (const TensorData *rf = o.source.find("rope_freqs.weight")) {
            if (rf->type != TensorType::f32 || rf->shape != Shape{half})
                throw ConfigError("ConfigError: GGUF rope_freqs.weight must be F32 [" + std::to_string(half) + "]");
            for (int64_t i = 0; i < half; ++i) {
                float d;
                std::memcpy(&d, rf->bytes.data() + i * 4, 4);
                if (!(d > 0) || !std::isfinite(d))
                    throw ConfigError("ConfigError: GGUF rope_freqs.weight has a non-positive factor");
                f[static_cast<std::size_t>(i)] /= d;
            }
        }
    return f;
}

std::string human_bytes(uint64_t b) {
    char buf[64];
    if (b >= (1ull << 30))
        std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1ull << 30));
    else if (b >= (1ull << 20))
        std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1ull << 20));
    else
        std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024.0);
    return buf;
}

}  // namespace

MemoryEstimate estimate_memory(const ModelConfig &c, uint64_t weights, const LoadOptions &o) {
    MemoryEstimate e;
    e.weights = weights;
    const auto ctx = static_cast<uint64_t>(default_context(c, o)),
               batch = static_cast<uint64_t>(std::max<int64_t>(1, o.batch));
    e.kv_cache =
        2 * static_cast<uint64_t>(c.num_layers) * batch * ctx * static_cast<uint64_t>(c.num_kv_heads * c.head_dim) * 4;
    const auto chunk = std::min<uint64_t>(static_cast<uint64_t>(std::max<int64_t>(1, o.prefill_chunk)), ctx);
    // One layer's live activations for a chunk (residual, norm, q/k/v, rotated copies, attention
    // output, three MLP intermediates, scores), plus the logits of the last tokens and the rope tables.
    const uint64_t per_token =
        static_cast<uint64_t>(4 * c.hidden_size + 3 * (c.num_heads + 2 * c.num_kv_heads) * c.head_dim +
                              3 * c.intermediate_size) *
        4;
    e.attention_scores = batch * static_cast<uint64_t>(c.num_heads) * chunk * ctx * 4;
    e.activations = batch * chunk * per_token + e.attention_scores + batch * static_cast<uint64_t>(c.vocab_size) * 4 +
                    ctx * static_cast<uint64_t>(c.head_dim) * 4;
    return e;
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model &&) noexcept = default;
Model &Model::operator=(Model &&) noexcept = default;
Model::~Model() = default;

const ModelConfig &Model::config() const { return impl_->config; }
const LoadOptions &Model::options() const { return impl_->options; }
Device Model::device() const { return impl_->device; }
MemoryEstimate Model::memory_estimate() const { return impl_->estimate; }
const Tokenizer *Model::tokenizer() const { return impl_->tokenizer.get(); }
uint64_t Model::bytes_in_place() const { return impl_->bytes_in_place; }
uint64_t Model::bytes_copied() const { return impl_->bytes_copied; }
double Model::load_seconds() const { return impl_->load_seconds; }

MemoryEstimate Model::estimate(const std::string &path, const LoadOptions &options) {
    const Opened o = open_model(path);
    return estimate_memory(o.config, weight_bytes(o, options), options);
}

Model Model::load(const std::string &path, const LoadOptions &options) {
    const auto t0 = std::chrono::steady_clock::now();
    Opened o = open_model(path);
    auto impl = std::make_unique<Impl>();
    impl->config = o.config;
    impl->options = options;
    const ModelConfig &c = impl->config;
    impl->estimate = estimate_memory(c, weight_bytes(o, options), options);
    if (options.verbose)
        std::fprintf(stderr,
                     "tinyfin-llm: %s %s, %lld layers, memory estimate %s (weights %s, KV cache %s for %lld tokens, "
                     "activations %s)\n",
                     architecture_name(c.architecture), path.c_str(), static_cast<long long>(c.num_layers),
                     human_bytes(impl->estimate.total()).c_str(), human_bytes(impl->estimate.weights).c_str(),
                     human_bytes(impl->estimate.kv_cache).c_str(), static_cast<long long>(default_context(c, options)),
                     human_bytes(impl->estimate.activations).c_str());
    if (options.backend == "auto") {
        select_backend_for_memory(impl->estimate.total(), "auto");
    } else if (!options.backend.empty() && options.backend != backend_name()) {
        if (!set_backend(options.backend))
            throw BackendError("BackendError: backend '" + options.backend + "' is not usable (see tinyfin-info)");
    }
    impl->device = default_device();
    const bool on_cpu = impl->device.backend == "cpu";

    auto load_one = [&](const std::string &what, int64_t layer, bool required) -> Tensor {
        const std::string name = o.source.gguf ? gguf_name(what, layer) : hf_name(what, layer);
        const TensorData *t = o.source.find(name);
        if (!t) {
            if (required) throw ConfigError("ConfigError: model '" + path + "' has no tensor '" + name + "'");
            return Tensor();
        }
        const TensorTypeInfo &info = tensor_type_info(t->type);
        if (!info.dtype || (*info.dtype != DType::f32 && *info.dtype != DType::f16 && *info.dtype != DType::bf16))
            throw ConfigError(std::string("ConfigError: tensor '") + name + "' has type " + info.name +
                              "; tinyfin loads F32, F16 and BF16 weights (block-quantized types: issue 34)");
        const Shape want = expected_shape(c, what);
        if (t->shape != want)
            throw ConfigError("ConfigError: tensor '" + name + "' has shape " + shape_str(t->shape) +
                              ", the config needs " + shape_str(want));
        const DType dtype = *info.dtype;
        Shape strides(t->shape.size(), 1);
        for (std::size_t i = strides.size(); i-- > 1;) strides[i - 1] = strides[i] * t->shape[i];
        const auto *data = t->bytes.data();
        const bool aligned = reinterpret_cast<uintptr_t>(data) % dtype_size(dtype) == 0;
        Tensor w;
        if (on_cpu && aligned && o.source.holder) {
            w = from_blob(const_cast<std::byte *>(data), t->shape, strides, dtype, [keep = o.source.holder] {});
            impl->bytes_in_place += t->bytes.size();
        } else {
            w = from_host(data, t->shape, dtype, impl->device);
            impl->bytes_copied += t->bytes.size();
        }
        // Norm weights and biases join f32 activations: f32 always (they are small).
        if (dtype != DType::f32 && (options.weights_f32 || is_small(what))) {
            w = w.to(DType::f32);
            impl->bytes_copied += static_cast<uint64_t>(w.nbytes());
        }
        return w;
    };
    impl->embed = load_one("embed", 0, true);
    impl->norm = load_one("norm", 0, true);
    impl->lm_head = c.tie_word_embeddings ? impl->embed : load_one("lm_head", 0, true);
    for (int64_t l = 0; l < c.num_layers; ++l) {
        LayerWeights w;
        w.attn_norm = load_one("attn_norm", l, true);
        w.wq = load_one("wq", l, true);
        w.wk = load_one("wk", l, true);
        w.wv = load_one("wv", l, true);
        w.wo = load_one("wo", l, true);
        if (c.attention_bias) {
            w.bq = load_one("bq", l, true);
            w.bk = load_one("bk", l, true);
            w.bv = load_one("bv", l, true);
        }
        w.ffn_norm = load_one("ffn_norm", l, true);
        w.w_gate = load_one("w_gate", l, true);
        w.w_up = load_one("w_up", l, true);
        w.w_down = load_one("w_down", l, true);
        impl->layers.push_back(std::move(w));
        if (options.verbose) {
            const int width = 30, done = static_cast<int>(width * (l + 1) / c.num_layers);
            std::fprintf(stderr, "\rtinyfin-llm: loading [%.*s%*s] %lld/%lld", done, "##############################",
                         width - done, "", static_cast<long long>(l + 1), static_cast<long long>(c.num_layers));
        }
    }
    impl->inv_freq = rotary_frequencies(c, o);
    impl->tokenizer = load_tokenizer(path, o.gguf.get());
    if (!on_cpu) synchronize();
    impl->files = impl->bytes_in_place > 0 ? o.source.holder : nullptr;
    impl->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (options.verbose)
        std::fprintf(stderr, "\ntinyfin-llm: loaded in %.2f s on %s: %s used in place, %s uploaded or converted\n",
                     impl->load_seconds, impl->device.str().c_str(), human_bytes(impl->bytes_in_place).c_str(),
                     human_bytes(impl->bytes_copied).c_str());
    return Model(std::move(impl));
}

Tensor Model::logits(const std::vector<int32_t> &tokens) const {
    if (tokens.empty()) throw ValueError("ValueError: logits: no tokens");
    const auto t = static_cast<int64_t>(tokens.size());
    Session s(*this, 1, t);
    // One pass over the whole sequence, every position's logits.
    std::vector<int64_t> ids(tokens.begin(), tokens.end()), pos(tokens.size());
    for (std::size_t i = 0; i < pos.size(); ++i) {
        if (tokens[i] < 0 || tokens[i] >= impl_->config.vocab_size)
            throw ValueError("ValueError: logits: token id " + std::to_string(tokens[i]) +
                             " is outside the vocabulary");
        pos[i] = static_cast<int64_t>(i);
    }
    KVCache cache;
    const ModelConfig &c = impl_->config;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        cache.k.push_back(empty({1, c.num_kv_heads, t, c.head_dim}, DType::f32, impl_->device));
        cache.v.push_back(empty({1, c.num_kv_heads, t, c.head_dim}, DType::f32, impl_->device));
    }
    auto [cs, sn] = impl_->rope_tables(t);
    Tensor mask;
    if (c.sliding_window > 0 && t > c.sliding_window) {
        std::vector<float> mv(static_cast<std::size_t>(t * t));
        for (int64_t q = 0; q < t; ++q)
            for (int64_t k = 0; k < t; ++k)
                mv[static_cast<std::size_t>(q * t + k)] = k <= q && q - k < c.sliding_window ? 0.0f : -INFINITY;
        mask = from_vector(mv, {1, 1, 1, t, t}, impl_->device);
    }
    const Tensor hidden = impl_->forward(from_vector(ids, {1, t}, impl_->device),
                                         from_vector(pos, {1, t}, impl_->device), mask, cache, 0, cs, sn);
    return impl_->head(hidden).reshape({t, c.vocab_size});
}

GenerationResult Model::generate(const std::vector<std::vector<int32_t>> &prompts, const GenerationOptions &options,
                                 int64_t context) const {
    if (prompts.empty()) throw ValueError("ValueError: generate: no prompts");
    if (options.max_new_tokens < 0) throw ValueError("ValueError: generate: max_new_tokens must not be negative");
    const auto b = static_cast<int64_t>(prompts.size());
    int64_t longest = 0;
    for (const auto &p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    const int64_t ctx =
        context > 0 ? context : std::min(default_context(config(), impl_->options), longest + options.max_new_tokens);
    GenerationResult r;
    r.tokens.resize(prompts.size());
    r.finish_reason.assign(prompts.size(), "");
    if (!options.stop.empty() && !impl_->tokenizer)
        throw ValueError("ValueError: generate: stop strings need the model's tokenizer, and this model has none");
    std::vector<int32_t> eos = options.eos_ids;
    if (eos.empty()) eos = impl_->tokenizer ? impl_->tokenizer->eos_ids() : config().eos_token_ids;
    if (eos.empty()) eos = config().eos_token_ids;
    std::vector<Sampler> samplers;
    for (int64_t i = 0; i < b; ++i) samplers.emplace_back(options.sampling, static_cast<uint64_t>(i));
    std::vector<std::vector<int32_t>> history = prompts;
    const auto t0 = std::chrono::steady_clock::now();
    Session session(*this, b, ctx);
    Tensor logits = session.prefill(prompts);
    std::vector<float> host = logits.to_vector<float>();
    const auto t1 = std::chrono::steady_clock::now();
    r.prompt_tokens = b * longest;
    r.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
    const auto vocab = static_cast<std::size_t>(config().vocab_size);
    std::vector<int32_t> next(prompts.size(), 0);
    for (int64_t step = 0; step < options.max_new_tokens; ++step) {
        bool any = false;
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            if (!r.finish_reason[i].empty()) continue;
            const int32_t tok = samplers[i].sample(std::span<const float>(host.data() + i * vocab, vocab), history[i]);
            next[i] = tok;
            history[i].push_back(tok);
            r.tokens[i].push_back(tok);
            ++r.generated_tokens;
            if (options.on_token && !options.on_token(i, tok))
                r.finish_reason[i] = "callback";
            else if (!options.ignore_eos && std::find(eos.begin(), eos.end(), tok) != eos.end())
                r.finish_reason[i] = "eos";
            else if (!options.stop.empty()) {
                const std::string text = impl_->tokenizer->decode(r.tokens[i], true);
                for (const auto &s : options.stop)
                    if (!s.empty() && text.find(s) != std::string::npos) r.finish_reason[i] = "stop";
            }
            any = any || r.finish_reason[i].empty();
        }
        if (!any || step + 1 == options.max_new_tokens) break;
        if (session.length() >= session.context()) break;
        host = session.decode(next).to_vector<float>();
    }
    for (auto &f : r.finish_reason)
        if (f.empty()) f = "length";
    r.generate_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    return r;
}

std::vector<std::string> Model::generate_text(const std::vector<std::string> &prompts, const GenerationOptions &options,
                                              int64_t context) const {
    if (!impl_->tokenizer) throw ValueError("ValueError: generate_text: this model has no tokenizer (use token ids)");
    std::vector<std::vector<int32_t>> ids;
    for (const auto &p : prompts) ids.push_back(impl_->tokenizer->encode(p));
    const GenerationResult r = generate(ids, options, context);
    std::vector<std::string> out;
    for (std::size_t i = 0; i < r.tokens.size(); ++i) {
        std::vector<int32_t> toks = r.tokens[i];
        std::string text = impl_->tokenizer->decode(toks, true);
        if (r.finish_reason[i] == "stop")
            for (const auto &s : options.stop)
                if (auto at = text.find(s); !s.empty() && at != std::string::npos) text.resize(at);
        out.push_back(std::move(text));
    }
    return out;
}

}  // namespace tinyfin::llm
