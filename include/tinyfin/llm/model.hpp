// A Llama-family decoder (Llama 1/2/3, TinyLlama, Mistral, Qwen2) loaded from a Hugging Face
// directory or a GGUF file, run through tinyfin's public ops on any backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tinyfin/llm/config.hpp>
#include <tinyfin/tinyfin.hpp>

namespace tinyfin::llm {

class Tokenizer;

struct LoadOptions {
    // Backend for the weights and the computation: "" follows TINYFIN_BACKEND / the current
    // selection; "auto" picks the best backend whose device has room for memory_estimate().
    std::string backend;
    // Context length the KV caches are sized for by default (0: min(max_position, 4096)).
    int64_t context = 0;
    // Sequences per batch the estimate counts KV caches for.
    int64_t batch = 1;
    // Prompt tokens per forward pass during prefill (bounds the activations' memory).
    int64_t prefill_chunk = 512;
    // Weights stored as f16/bf16 are converted to f32 at load when true (twice the memory, f32
    // matmuls); otherwise the matrices stay in their file dtype and used in place on cpu.
    bool weights_f32 = false;
    // true (the default): on cpu every F32/F16/BF16 or block-quantized tensor whose mapped address
    // is aligned is used in place over the file's mapping (zero-copy: fast loading, pages shared
    // with other processes mapping the file). false (`--no-mmap`): matrices of 2 MiB or more are
    // copied into host memory the kernel backs with transparent huge pages where it has them (the
    // generation's dots read those faster than the file's 4 KiB pages), the mapped pages given
    // back as each is copied, so the peak stays near the model's size.
    bool map_weights = true;
    // true (the default): the block-quantized matrices the cpu plugin has a faster layout for
    // (q4_0, q8_0, q4_k, q6_k on AVX2: eight rows interleaved, docs/quantization.md) are repacked once at
    // load (prepack_weight) and the mapped pages given back, so memory stays near the model's
    // size; false (`--no-prepack`): used as the file stores them.
    bool prepack_weights = true;
    // true (the default): matrices that multiply the same activations (a layer's q/k/v, its
    // gate/up) run as one product over their rows stacked where the file stores them back to back
    // (in place, no copy) or where the loader copies them anyway (a GPU backend, map_weights =
    // false, quantize); fused_matrices() counts them. false: one product per matrix.
    bool fuse_products = true;
    // Quantize the f32/f16/bf16 matrices on load under a scheme of llama.cpp's ("q8_0", "q4_0",
    // "q4_k", ...; llm/quantize.hpp): each weight gets the block type tinyfin-quantize would
    // write (norms and biases stay f32). "" keeps the file's types; tensors already quantized in
    // the file are kept as they are.
    std::string quantize;
    // dtype of the KV caches: f32, or f16 / bf16 for half the memory (and bytes read per token);
    // attention then runs in that dtype (the queries rounded to it), its output back in f32.
    DType kv_cache_dtype = DType::f32;
    // Print the memory estimate and load progress to stderr.
    bool verbose = false;
};

// Bytes a model needs for inference (issue 33's "memory-aware placement").
struct MemoryEstimate {
    uint64_t weights = 0;
    uint64_t kv_cache = 0;
    uint64_t activations = 0;  // one prefill chunk's
    // The part of activations that is one chunk's attention scores (the cpu kernel's scratch,
    // which tinyfin::stats() does not count; a tensor on backends that materialise them).
    uint64_t attention_scores = 0;
    uint64_t total() const { return weights + kv_cache + activations; }
};

struct SamplingOptions {
    double temperature = 0;  // 0: greedy (argmax)
    int64_t top_k = 0;  // 0: off
    double top_p = 1;  // 1: off
    double min_p = 0;  // 0: off
    double repetition_penalty = 1;  // 1: off (the CTRL rule, over prompt and generated tokens)
    uint64_t seed = 0;
};

struct GenerationOptions {
    int64_t max_new_tokens = 128;
    SamplingOptions sampling;
    // Generation of a sequence stops after a token whose text completes one of these.
    std::vector<std::string> stop;
    // Token ids that end a sequence (empty: the model's EOS ids).
    std::vector<int32_t> eos_ids;
    bool ignore_eos = false;
    // Called for each new token of each sequence (sequence index, token id); returning false
    // stops that sequence.
    std::function<bool(std::size_t, int32_t)> on_token;
};

struct GenerationResult {
    std::vector<std::vector<int32_t>> tokens;  // new tokens per sequence
    std::vector<std::string> finish_reason;  // "eos", "stop", "length", "callback"
    int64_t prompt_tokens = 0;
    int64_t generated_tokens = 0;
    double prompt_seconds = 0, generate_seconds = 0;
};

class Model;

// The KV caches of `batch` sequences of at most `context` tokens, preallocated on the model's
// device, and the position each sequence has reached. Sequences of a batch advance together;
// shorter prompts are left-padded and the padding is masked out.
class Session {
public:
    Session(const Model &model, int64_t batch, int64_t context);
    ~Session();
    Session(Session &&) noexcept;
    Session &operator=(Session &&) noexcept;

    int64_t batch() const;
    int64_t context() const;
    int64_t length() const;  // cache slots used (the longest prompt plus tokens decoded)
    void reset();

    // Appends prompts (one per sequence; left-padded to the longest) in chunks and returns the
    // logits of each sequence's last token: [batch, vocab] f32.
    Tensor prefill(const std::vector<std::vector<int32_t>> &prompts);
    // Appends one token per sequence; logits [batch, vocab].
    Tensor decode(const std::vector<int32_t> &tokens);

    struct State;

private:
    const Model *model_;
    std::unique_ptr<State> state_;
};

class Model {
public:
    // path: a Hugging Face model directory (config.json + safetensors) or a .gguf file.
    // Errors: FileError, FormatError, ConfigError, tinyfin::OutOfMemoryError.
    static Model load(const std::string &path, const LoadOptions &options = {});
    // The estimate for a model path without loading its weights.
    static MemoryEstimate estimate(const std::string &path, const LoadOptions &options = {});

    Model(Model &&) noexcept;
    Model &operator=(Model &&) noexcept;
    ~Model();

    const ModelConfig &config() const;
    const LoadOptions &options() const;
    Device device() const;
    MemoryEstimate memory_estimate() const;
    // The tokenizer from the model's files; nullptr when it has none.
    const Tokenizer *tokenizer() const;
    // Bytes of weights mapped in place (cpu) and uploaded or converted.
    uint64_t bytes_in_place() const;
    uint64_t bytes_copied() const;
    // Bytes of the in-place weights the backend also keeps in a layout of its own
    // (LoadOptions::prepack_weights).
    uint64_t bytes_prepacked() const;
    // Matrices computed inside a fused product (LoadOptions::fuse_products), 0 when none is.
    int64_t fused_matrices() const;
    double load_seconds() const;

    // Logits [T, vocab] (f32) of every position of one sequence, computed without a cache.
    Tensor logits(const std::vector<int32_t> &tokens) const;
    // Generates from token-id prompts, one sequence per prompt, in one batch.
    GenerationResult generate(const std::vector<std::vector<int32_t>> &prompts, const GenerationOptions &options,
                              int64_t context = 0) const;
    // Text in, text out (needs a tokenizer): the prompts are encoded with BOS as the model's
    // tokenizer says, the new tokens decoded without special tokens.
    std::vector<std::string> generate_text(const std::vector<std::string> &prompts, const GenerationOptions &options,
                                           int64_t context = 0) const;

    struct Impl;
    const Impl &impl() const { return *impl_; }

private:
    explicit Model(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace tinyfin::llm
