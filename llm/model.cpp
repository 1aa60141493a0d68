// Model: loading from a Hugging Face directory or a GGUF file, and generation (model.hpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numbers>

#include <sys/mman.h>
#include <unistd.h>

#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/gguf.hpp>
#include <tinyfin/llm/quantize.hpp>
#include <tinyfin/llm/safetensors.hpp>
#include <tinyfin/llm/sampler.hpp>

#include "model_impl.hpp"
#include "vocabulary.hpp"
#include "weights.hpp"

namespace tinyfin::llm {

namespace {

// Gives back the resident pages of a mapped tensor the loader has copied (uploaded, converted or
// quantized): the file stays mapped, and its pages count in the process's resident memory once
// read, so without this a model copied to a host-memory backend (blas, lavapipe's vulkan) would
// peak at twice its size. The mapping is read-only and private: the bytes come back from the
// file if read again. Only the pages wholly inside the tensor (neighbours may be used in place).
void release_copied_pages(const std::byte *data, std::size_t size) noexcept {
    static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    if (page == 0 || page & (page - 1)) return;
    const auto begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
    const auto end = (reinterpret_cast<uintptr_t>(data) + size) & ~(page - 1);
    if (end > begin) ::madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

// Whether anonymous memory can be backed by transparent huge pages (the host allocator advises
// its blocks of 2 MiB and more): /sys's setting is "always" or "madvise".
bool huge_pages_available() {
    static const bool available = [] {
        std::FILE *f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
        if (!f) return false;
        char text[128] = {};
        const std::size_t n = std::fread(text, 1, sizeof text - 1, f);
        std::fclose(f);
        const std::string setting(text, n);
        return setting.find("[always]") != std::string::npos || setting.find("[madvise]") != std::string::npos;
    }();
    return available;
}

// Tensors from this size on are copied into huge pages on cpu and blas under map_weights = false.
constexpr std::size_t k_huge_page_bytes = std::size_t{2} << 20;

// Whether tensors on `device` can live in host memory the loader lends (from_blob wraps it there:
// cpu and blas, whose memory is host memory); GPU backends take copies.
bool wraps_host_memory(const Device &device) {
    static float probe = 0;
    try {
        (void)from_blob(
            &probe, {1}, {1}, DType::f32, [] {}, device);
        return true;
    } catch (const BackendError &) {
        return false;
    }
}

// The storage a weight gets: its file type, or the scheme's block type under --quantize.
std::optional<DType> quantized_type(const Opened &o, const std::optional<QuantScheme> &scheme, const std::string &what,
                                    int64_t layer, const TensorData &t) {
    if (!scheme || is_small(what)) return std::nullopt;
    const TensorTypeInfo &info = tensor_type_info(t.type);
    if (info.dtype && is_quantized(*info.dtype)) return std::nullopt;  // already quantized: kept
    // A tied embedding is also the head: llama.cpp gives it the output's type.
    const std::string role = what == "embed" && o.config.tie_word_embeddings ? "lm_head" : what;
    return quant_type_for(*scheme, role, layer, o.config.num_layers, t.shape);
}

std::optional<QuantScheme> scheme_of(const LoadOptions &options) {
    if (options.quantize.empty()) return std::nullopt;
    return quant_scheme(options.quantize);
}

uint64_t weight_bytes(const Opened &o, const LoadOptions &options) {
    const ModelConfig &c = o.config;
    const std::optional<QuantScheme> scheme = scheme_of(options);
    uint64_t total = 0;
    auto add = [&](const std::string &what, int64_t layer) {
        const TensorData *t = o.source.find(o.name(what, layer));
        if (!t) return;
        const uint64_t n = t->bytes.size();
        if (const auto q = quantized_type(o, scheme, what, layer, *t)) {
            const auto elements = static_cast<uint64_t>(checked_element_count(t->shape, t->name));
            total += elements / static_cast<uint64_t>(dtype_block_length(*q)) * dtype_block_bytes(*q);
            return;
        }
        const TensorTypeInfo &info = tensor_type_info(t->type);
        const bool quantized = info.dtype && is_quantized(*info.dtype);
        if (quantized && is_small(what))  // dequantized to f32
            total += static_cast<uint64_t>(checked_element_count(t->shape, t->name)) * 4;
        else
            total += !quantized && (options.weights_f32 || is_small(what)) && t->type != TensorType::f32 ? n * 2 : n;
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
    std::vector<double> f = config_frequencies(c);
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
    const DType kv = o.kv_cache_dtype;
    if (kv != DType::f32 && kv != DType::f16 && kv != DType::bf16)
        throw ValueError(std::string("ValueError: kv_cache_dtype ") + dtype_name(kv) + " is not f32, f16 or bf16");
    e.kv_cache = 2 * static_cast<uint64_t>(c.num_layers) * batch * ctx *
                 static_cast<uint64_t>(c.num_kv_heads * c.head_dim) * dtype_size(kv);
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
uint64_t Model::bytes_prepacked() const { return impl_->bytes_prepacked; }
int64_t Model::fused_matrices() const { return impl_->fused_matrices; }
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
    const bool in_place = wraps_host_memory(impl->device);

    const std::optional<QuantScheme> scheme = scheme_of(options);
    // The tensor of a role, its type and shape checked; nullptr when absent and not required.
    auto find_one = [&](const std::string &what, int64_t layer, bool required) -> const TensorData * {
        const std::string name = o.name(what, layer);
        const TensorData *t = o.source.find(name);
        if (!t) {
            if (required) throw ConfigError("ConfigError: model '" + path + "' has no tensor '" + name + "'");
            return nullptr;
        }
        const TensorTypeInfo &info = tensor_type_info(t->type);
        if (!info.dtype || *info.dtype == DType::i32 || *info.dtype == DType::i64)
            throw ConfigError(std::string("ConfigError: tensor '") + name + "' has type " + info.name +
                              "; tinyfin loads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K and Q8_K "
                              "weights");
        const Shape want = expected_shape(c, what);
        if (t->shape != want)
            throw ConfigError("ConfigError: tensor '" + name + "' has shape " + shape_str(t->shape) +
                              ", the config needs " + shape_str(want));
        return t;
    };
    // Whether a checked tensor is used over the mapping as it lies (no copy).
    auto stays_in_place = [&](const TensorData &t, const std::string &what, int64_t layer) {
        const DType dtype = *tensor_type_info(t.type).dtype;
        // Blocks are read bytewise by the kernels; plain dtypes need their natural alignment.
        const bool aligned =
            is_quantized(dtype) || reinterpret_cast<uintptr_t>(t.bytes.data()) % dtype_size(dtype) == 0;
        const bool to_huge_pages =
            !options.map_weights && t.bytes.size() >= k_huge_page_bytes && huge_pages_available();
        return in_place && aligned && o.source.holder && !to_huge_pages && !quantized_type(o, scheme, what, layer, t);
    };
    // A checked tensor as the device gets it: in place, uploaded, copied, converted or quantized.
    // `staged`: t's bytes are the loader's own buffer, not the mapping (always copied).
    auto place = [&](const TensorData &t, const std::string &what, int64_t layer, bool staged) -> Tensor {
        const DType dtype = *tensor_type_info(t.type).dtype;
        const bool quantized = is_quantized(dtype);
        Shape strides(t.shape.size(), 1);
        for (std::size_t i = strides.size(); i-- > 1;) strides[i - 1] = strides[i] * t.shape[i];
        const auto *data = t.bytes.data();
        const bool mapped = o.source.holder && !staged;
        if (const std::optional<DType> to_quantize = quantized_type(o, scheme, what, layer, t)) {
            // Quantized on the cpu one tensor at a time (a transient copy of the mapped bytes:
            // a from_blob tensor freed here would be subtracted from stats()' bytes_in_use without
            // having been added), then uploaded: no f32 copy of the model.
            const Tensor src = from_host(data, t.shape, dtype, Device::parse("cpu"));
            Tensor q = quantize(src, *to_quantize);
            if (!on_cpu) q = q.to(impl->device);
            impl->bytes_copied += static_cast<uint64_t>(q.nbytes());
            if (mapped) release_copied_pages(data, t.bytes.size());
            return q;
        }
        // q4_0/q8_0/q4_k/q6_k matrices on cpu: the plugin keeps them repacked for its dots (prepack_weight,
        // docs/quantization.md), read once from the mapping, whose pages are then given back; the
        // tensor stays over the mapping for any other reader (embedding rows).
        // A fused product's stacked matrices (back to back in the file) are prepacked as one.
        if (on_cpu && options.prepack_weights && quantized && !is_small(what) && in_place && mapped &&
            (what != "embed" || c.tie_word_embeddings)) {
            Tensor m = from_blob(
                const_cast<std::byte *>(data), t.shape, strides, dtype, [keep = o.source.holder] {}, impl->device);
            if (const uint64_t packed = prepack_weight(m)) {
                impl->bytes_in_place += t.bytes.size();
                impl->bytes_prepacked += packed;
                release_copied_pages(data, t.bytes.size());
                return m;
            }
        }
        Tensor w;
        if (!staged && stays_in_place(t, what, layer)) {
            w = from_blob(
                const_cast<std::byte *>(data), t.shape, strides, dtype, [keep = o.source.holder] {}, impl->device);
            impl->bytes_in_place += t.bytes.size();
        } else {
            w = from_host(data, t.shape, dtype, impl->device);
            impl->bytes_copied += t.bytes.size();
            if (mapped) release_copied_pages(data, t.bytes.size());
        }
        // Norm weights and biases join f32 activations: f32 always (they are small).
        if (quantized && is_small(what)) {
            w = dequantize(w, DType::f32);
            impl->bytes_copied += static_cast<uint64_t>(w.nbytes());
        } else if (!quantized && dtype != DType::f32 && (options.weights_f32 || is_small(what))) {
            w = w.to(DType::f32);
            impl->bytes_copied += static_cast<uint64_t>(w.nbytes());
        }
        return w;
    };
    auto load_one = [&](const std::string &what, int64_t layer, bool required) -> Tensor {
        const TensorData *t = find_one(what, layer, required);
        return t ? place(*t, what, layer, false) : Tensor();
    };
    // A layer's matrices that multiply the same activations, as the products group_products
    // makes of them: a group back to back in the file is one tensor over its bytes; any other
    // group of several (all copied anyway) is stacked in a transient buffer first.
    auto load_shared = [&](const std::vector<std::string> &roles, int64_t layer) -> SharedInput {
        std::vector<FusionCandidate> members;
        for (const auto &what : roles) {
            const TensorData *t = find_one(what, layer, true);
            const bool converted =
                options.weights_f32 && t->type != TensorType::f32 && !is_quantized(*tensor_type_info(t->type).dtype);
            members.push_back(
                {t, quantized_type(o, scheme, what, layer, *t), converted || !stays_in_place(*t, what, layer)});
        }
        SharedInput s;
        s.members = static_cast<int>(roles.size());
        for (const std::vector<int> &group : group_products(members, options.fuse_products)) {
            Product p;
            p.members = group;
            const TensorData &first = *members[static_cast<std::size_t>(group.front())].tensor;
            const std::string &what = roles[static_cast<std::size_t>(group.front())];
            if (group.size() == 1) {
                p.rows = {first.shape[0]};
                p.weight = place(first, what, layer, false);
                s.products.push_back(std::move(p));
                continue;
            }
            TensorData stacked{first.name, first.type, {0, first.shape[1]}, {}};
            std::size_t bytes = 0;
            for (int m : group) {
                const TensorData &t = *members[static_cast<std::size_t>(m)].tensor;
                p.rows.push_back(t.shape[0]);
                stacked.shape[0] += t.shape[0];
                bytes += t.bytes.size();
                if (m != group.front()) stacked.name += "+" + t.name;
            }
            std::vector<std::byte> buffer;
            const bool staged = !back_to_back(members, group);
            if (staged) {
                buffer.reserve(bytes);
                for (int m : group) {
                    const auto part = members[static_cast<std::size_t>(m)].tensor->bytes;
                    buffer.insert(buffer.end(), part.begin(), part.end());
                }
                stacked.bytes = buffer;
            } else {
                stacked.bytes = {first.bytes.data(), bytes};
            }
            p.weight = place(stacked, what, layer, staged);
            if (staged && o.source.holder)
                for (int m : group) {
                    const auto part = members[static_cast<std::size_t>(m)].tensor->bytes;
                    release_copied_pages(part.data(), part.size());
                }
            impl->fused_matrices += static_cast<int64_t>(group.size());
            s.products.push_back(std::move(p));
        }
        return s;
    };
    impl->embed = load_one("embed", 0, true);
    impl->norm = load_one("norm", 0, true);
    impl->lm_head = c.tie_word_embeddings ? impl->embed : load_one("lm_head", 0, true);
    for (int64_t l = 0; l < c.num_layers; ++l) {
        LayerWeights w;
        w.attn_norm = load_one("attn_norm", l, true);
        w.qkv = load_shared({"wq", "wk", "wv"}, l);
        w.wo = load_one("wo", l, true);
        if (c.attention_bias) {
            w.bq = load_one("bq", l, true);
            w.bk = load_one("bk", l, true);
            w.bv = load_one("bv", l, true);
        }
        w.ffn_norm = load_one("ffn_norm", l, true);
        w.gate_up = load_shared({"w_gate", "w_up"}, l);
        w.w_down = load_one("w_down", l, true);
        impl->layers.push_back(std::move(w));
        if (options.verbose) {
            const int width = 30, done = static_cast<int>(width * (l + 1) / c.num_layers);
            std::fprintf(stderr, "\rtinyfin-llm: %s [%.*s%*s] %lld/%lld",
                         scheme ? ("quantizing to " + scheme->name).c_str() : "loading", done,
                         "##############################", width - done, "", static_cast<long long>(l + 1),
                         static_cast<long long>(c.num_layers));
        }
    }
    impl->inv_freq = rotary_frequencies(c, o);
    impl->tokenizer = load_tokenizer(path, o.gguf.get());
    if (!on_cpu) synchronize();
    impl->files = impl->bytes_in_place > 0 ? o.source.holder : nullptr;
    impl->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (options.verbose)
        std::fprintf(stderr,
                     "\ntinyfin-llm: loaded in %.2f s on %s: %s used in place (%s of them also kept repacked), %s "
                     "uploaded or converted, %lld matrices in fused products\n",
                     impl->load_seconds, impl->device.str().c_str(), human_bytes(impl->bytes_in_place).c_str(),
                     human_bytes(impl->bytes_prepacked).c_str(), human_bytes(impl->bytes_copied).c_str(),
                     static_cast<long long>(impl->fused_matrices));
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
        cache.k.push_back(empty({1, c.num_kv_heads, t, c.head_dim}, impl_->options.kv_cache_dtype, impl_->device));
        cache.v.push_back(empty({1, c.num_kv_heads, t, c.head_dim}, impl_->options.kv_cache_dtype, impl_->device));
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
