// The hyperparameters of a Llama-family model, read from a Hugging Face config.json or from
// GGUF metadata; both give the same ModelConfig for the same model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tinyfin::llm {

class GgufFile;

enum class Architecture { llama, mistral, qwen2 };
const char *architecture_name(Architecture arch);

// rope_scaling: how the rotary frequencies are stretched for longer contexts.
struct RopeScaling {
    enum class Kind { none, linear, llama3 };
    Kind kind = Kind::none;
    double factor = 1;
    // llama3 only (transformers' _compute_llama3_parameters).
    double low_freq_factor = 1, high_freq_factor = 4;
    int64_t original_max_position = 8192;
};

struct ModelConfig {
    Architecture architecture = Architecture::llama;
    int64_t vocab_size = 0;
    int64_t hidden_size = 0;
    int64_t intermediate_size = 0;
    int64_t num_layers = 0;
    int64_t num_heads = 0;
    int64_t num_kv_heads = 0;  // grouped-query attention when < num_heads
    int64_t head_dim = 0;
    int64_t max_position = 2048;
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000;
    RopeScaling rope_scaling;
    bool tie_word_embeddings = false;
    bool attention_bias = false;  // q/k/v projections have biases (Qwen2)
    int64_t sliding_window = 0;  // 0: every earlier key is visible (Mistral: the window size)
    std::vector<int32_t> eos_token_ids;
    int32_t bos_token_id = -1;
    // GGUF's llama files store the Q and K projections with each head's rows permuted so that
    // rotary pairs are adjacent (llama.cpp's convert script): rope then rotates adjacent pairs.
    bool rope_interleaved = false;

    // Checks the sizes fit together (head_dim even, heads divisible by kv heads, ...):
    // ConfigError otherwise.
    void validate() const;
};

// config.json of a Hugging Face model directory. A field tinyfin does not implement with a
// value other than its default, an unknown architecture or model_type: ConfigError naming the
// field and the value.
ModelConfig read_hf_config(const std::string &config_json_path);
ModelConfig parse_hf_config(std::string_view json_text, const std::string &name = "config.json");
// general.architecture and the <arch>.* keys of a GGUF file.
ModelConfig read_gguf_config(const GgufFile &file);

}  // namespace tinyfin::llm
