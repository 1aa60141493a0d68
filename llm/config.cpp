// ModelConfig from config.json or GGUF metadata (config.hpp).
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include <tinyfin/llm/config.hpp>
#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/gguf.hpp>
#include <tinyfin/llm/mapped_file.hpp>

#include "json_util.hpp"

namespace tinyfin::llm {

using nlohmann::json;

const char *architecture_name(Architecture arch) {
    switch (arch) {
    case Architecture::llama: return "llama";
    case Architecture::mistral: return "mistral";
    case Architecture::qwen2: return "qwen2";
    }
    return "unknown";
}

void ModelConfig::validate() const {
    auto need = [](bool ok, const std::string &what) {
        if (!ok) throw ConfigError("ConfigError: " + what);
    };
    need(vocab_size > 0, "vocab_size must be positive, got " + std::to_string(vocab_size));
    need(hidden_size > 0, "hidden_size must be positive, got " + std::to_string(hidden_size));
    need(intermediate_size > 0, "intermediate_size must be positive, got " + std::to_string(intermediate_size));
    need(num_layers > 0 && num_layers <= 4096,
         "num_hidden_layers must be in [1, 4096], got " + std::to_string(num_layers));
    need(num_heads > 0, "num_attention_heads must be positive, got " + std::to_string(num_heads));
    need(num_kv_heads > 0 && num_heads % num_kv_heads == 0, "num_key_value_heads " + std::to_string(num_kv_heads) +
                                                                " must divide num_attention_heads " +
                                                                std::to_string(num_heads));
    need(head_dim > 0 && head_dim % 2 == 0, "head_dim must be positive and even, got " + std::to_string(head_dim));
    need(max_position > 0, "max_position_embeddings must be positive, got " + std::to_string(max_position));
    need(rms_norm_eps > 0, "rms_norm_eps must be positive");
    need(rope_theta > 0, "rope_theta must be positive");
    need(sliding_window >= 0, "sliding_window must not be negative");
    need(rope_scaling.factor > 0, "rope_scaling factor must be positive");
    if (rope_scaling.kind == RopeScaling::Kind::llama3)
        need(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor && rope_scaling.low_freq_factor > 0 &&
                 rope_scaling.original_max_position > 0,
             "rope_scaling llama3 needs high_freq_factor > low_freq_factor > 0 and original_max_position_embeddings > "
             "0");
}

namespace {

[[noreturn]] void unsupported(const std::string &name, const std::string &field, const json &value) {
    throw ConfigError("ConfigError: " + name + ": field '" + field + "' = " + value.dump() +
                      " is not supported by tinyfin (it would change the model's output)");
}

int64_t get_int(const json &j, const std::string &name, const char *key, std::optional<int64_t> fallback = {}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        if (fallback) return *fallback;
        throw ConfigError("ConfigError: " + name + ": required field '" + key + "' is missing");
    }
    if (!it->is_number_integer())
        throw ConfigError("ConfigError: " + name + ": field '" + key + "' = " + it->dump() + " is not an integer");
    const int64_t v = it->get<int64_t>();
    if (v < 0 || v > (int64_t{1} << 40))
        throw ConfigError("ConfigError: " + name + ": field '" + key + "' = " + it->dump() + " is out of range");
    return v;
}

double get_double(const json &j, const std::string &name, const char *key, double fallback) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_number())
        throw ConfigError("ConfigError: " + name + ": field '" + key + "' = " + it->dump() + " is not a number");
    const double v = it->get<double>();
    if (!std::isfinite(v)) throw ConfigError("ConfigError: " + name + ": field '" + key + "' is not finite");
    return v;
}

bool get_bool(const json &j, const std::string &name, const char *key, bool fallback) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_boolean())
        throw ConfigError("ConfigError: " + name + ": field '" + key + "' = " + it->dump() + " is not true/false");
    return it->get<bool>();
}

// Fields that do not change inference output: training, bookkeeping, generation defaults.
const std::set<std::string> kIgnored = {
    "architectures",
    "model_type",
    "_name_or_path",
    "transformers_version",
    "torch_dtype",
    "use_cache",
    "initializer_range",
    "attention_dropout",
    "pretraining_tp",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "max_position_embeddings",
    "output_attentions",
    "output_hidden_states",
    "return_dict",
    "tie_word_embeddings",
    "max_window_layers",
    "dropout",
    "hidden_dropout",
    "embd_pdrop",
    "resid_pdrop",
    "torchscript",
    "id2label",
    "label2id",
    "problem_type",
    "tokenizer_class",
    "task_specific_params",
    "is_decoder",
    "bad_words_ids",
    "do_sample",
    "num_beams",
    "temperature",
    "top_k",
    "top_p",
    "repetition_penalty",
    "max_length",
    "min_length",
    "chunk_size_feed_forward",
    "cross_attention_hidden_size",
    "add_cross_attention",
    "tf_legacy_loss",
    "use_bfloat16",
    "prefix",
    "sep_token_id",
    "decoder_start_token_id",
    "finetuning_task",
    "early_stopping",
    "no_repeat_ngram_size",
    "num_return_sequences",
    "length_penalty",
    "diversity_penalty",
    "num_beam_groups",
    "output_scores",
    "return_dict_in_generate",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "remove_invalid_values",
    "exponential_decay_length_penalty",
    "suppress_tokens",
    "begin_suppress_tokens",
    "typical_p",
    "encoder_no_repeat_ngram_size",
    "pruned_heads",
    "is_encoder_decoder",
    "cache_implementation",
};

std::vector<int32_t> eos_ids(const json &j) {
    std::vector<int32_t> out;
    auto it = j.find("eos_token_id");
    if (it == j.end() || it->is_null()) return out;
    auto add = [&](const json &v) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
            throw ConfigError("ConfigError: eos_token_id " + v.dump() + " is not a token id");
        out.push_back(static_cast<int32_t>(v.get<int64_t>()));
    };
    if (it->is_array())
        for (const auto &v : *it) add(v);
    else
        add(*it);
    return out;
}

}  // namespace

ModelConfig parse_hf_config(std::string_view text, const std::string &name) {
    const json j = parse_json(text, name);
    if (!j.is_object()) throw ConfigError("ConfigError: " + name + " is not a JSON object");
    ModelConfig c;
    const std::string model_type =
        j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
    if (model_type == "llama")
        c.architecture = Architecture::llama;
    else if (model_type == "mistral")
        c.architecture = Architecture::mistral;
    else if (model_type == "qwen2")
        c.architecture = Architecture::qwen2;
    else
        throw ConfigError("ConfigError: " + name + ": model_type '" + model_type +
                          "' is not supported (tinyfin runs llama, mistral and qwen2)");
    std::set<std::string> handled = {
        "vocab_size",          "hidden_size",    "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim",       "rms_norm_eps",      "rope_theta",        "rope_scaling",
        "hidden_act",          "attention_bias", "mlp_bias",          "sliding_window",    "use_sliding_window"};
    c.vocab_size = get_int(j, name, "vocab_size");
    c.hidden_size = get_int(j, name, "hidden_size");
    c.intermediate_size = get_int(j, name, "intermediate_size");
    c.num_layers = get_int(j, name, "num_hidden_layers");
    c.num_heads = get_int(j, name, "num_attention_heads");
    c.num_kv_heads = get_int(j, name, "num_key_value_heads", c.num_heads);
    if (c.num_heads == 0) throw ConfigError("ConfigError: " + name + ": num_attention_heads is 0");
    c.head_dim = get_int(j, name, "head_dim", c.hidden_size / c.num_heads);
    c.max_position = get_int(j, name, "max_position_embeddings", 2048);
    c.rms_norm_eps = get_double(j, name, "rms_norm_eps", 1e-6);
    c.rope_theta = get_double(j, name, "rope_theta", 10000);
    c.tie_word_embeddings = get_bool(j, name, "tie_word_embeddings", false);
    c.eos_token_ids = eos_ids(j);
    c.bos_token_id = j.contains("bos_token_id") && !j["bos_token_id"].is_null()
                         ? static_cast<int32_t>(get_int(j, name, "bos_token_id"))
                         : -1;
    if (auto it = j.find("hidden_act"); it != j.end() && *it != "silu") unsupported(name, "hidden_act", *it);
    if (get_bool(j, name, "mlp_bias", false)) unsupported(name, "mlp_bias", true);
    c.attention_bias = c.architecture == Architecture::qwen2 ? true : get_bool(j, name, "attention_bias", false);
    if (c.architecture == Architecture::qwen2 && j.contains("attention_bias") && j["attention_bias"] == false)
        unsupported(name, "attention_bias", false);
    if (c.architecture == Architecture::mistral) {
        c.sliding_window = get_int(j, name, "sliding_window", 0);
    } else if (c.architecture == Architecture::qwen2) {
        // Qwen2 applies sliding_window only with use_sliding_window, and then per layer.
        if (get_bool(j, name, "use_sliding_window", false)) unsupported(name, "use_sliding_window", true);
    } else if (auto it = j.find("sliding_window"); it != j.end() && !it->is_null()) {
        unsupported(name, "sliding_window", *it);
    }
    if (auto it = j.find("rope_scaling"); it != j.end() && !it->is_null()) {
        if (!it->is_object()) unsupported(name, "rope_scaling", *it);
        const json &rs = *it;
        std::string type = rs.contains("rope_type") ? rs["rope_type"].dump()
                           : rs.contains("type")    ? rs["type"].dump()
                                                    : "null";
        if (type == "\"linear\"") {
            c.rope_scaling.kind = RopeScaling::Kind::linear;
            c.rope_scaling.factor = get_double(rs, name, "factor", 1);
        } else if (type == "\"llama3\"") {
            c.rope_scaling.kind = RopeScaling::Kind::llama3;
            c.rope_scaling.factor = get_double(rs, name, "factor", 8);
            c.rope_scaling.low_freq_factor = get_double(rs, name, "low_freq_factor", 1);
            c.rope_scaling.high_freq_factor = get_double(rs, name, "high_freq_factor", 4);
            c.rope_scaling.original_max_position = get_int(rs, name, "original_max_position_embeddings", 8192);
        } else if (type == "\"default\"") {
        } else {
            unsupported(name, "rope_scaling.type",
                        rs.contains("rope_type") ? rs["rope_type"]
                        : rs.contains("type")    ? rs["type"]
                                                 : json());
        }
        for (auto f = rs.begin(); f != rs.end(); ++f) {
            static const std::set<std::string> known = {"type",
                                                        "rope_type",
                                                        "factor",
                                                        "low_freq_factor",
                                                        "high_freq_factor",
                                                        "original_max_position_embeddings"};
            if (!known.count(f.key())) unsupported(name, "rope_scaling." + f.key(), f.value());
        }
    }
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (handled.count(it.key()) || kIgnored.count(it.key())) continue;
        const json &v = it.value();
        if (v.is_null() || v == false) continue;
        unsupported(name, it.key(), v);
    }
    c.validate();
    return c;
}

ModelConfig read_hf_config(const std::string &path) {
    MappedFile file(path);
    if (file.size() > (16u << 20)) throw FormatError("FormatError: '" + path + "' is larger than 16 MB");
    const auto b = file.bytes();
    return parse_hf_config(std::string_view(reinterpret_cast<const char *>(b.data()), b.size()), "'" + path + "'");
}

ModelConfig read_gguf_config(const GgufFile &file) {
    const GgufValue *arch_value = file.find_value("general.architecture");
    if (!arch_value) throw ConfigError("ConfigError: GGUF '" + file.name() + "' has no general.architecture");
    const std::string arch = arch_value->to_string("general.architecture");
    ModelConfig c;
    if (arch == "llama")
        c.architecture = Architecture::llama;
    else if (arch == "mistral")
        c.architecture = Architecture::mistral;
    else if (arch == "qwen2")
        c.architecture = Architecture::qwen2;
    else
        throw ConfigError("ConfigError: GGUF '" + file.name() + "': general.architecture '" + arch +
                          "' is not supported (tinyfin runs llama, mistral and qwen2)");
    auto key = [&](const char *suffix) { return arch + "." + suffix; };
    auto get_int = [&](const char *suffix, std::optional<int64_t> fallback) -> int64_t {
        const std::string k = key(suffix);
        const GgufValue *v = file.find_value(k);
        if (!v) {
            if (fallback) return *fallback;
            throw ConfigError("ConfigError: GGUF '" + file.name() + "' has no " + k);
        }
        const int64_t x = v->to_int(k);
        if (x < 0 || x > (int64_t{1} << 40))
            throw ConfigError("ConfigError: GGUF " + k + " = " + std::to_string(x) + " is out of range");
        return x;
    };
    auto get_double = [&](const char *suffix, double fallback) {
        const std::string k = key(suffix);
        const GgufValue *v = file.find_value(k);
        return v ? v->to_double(k) : fallback;
    };
    c.hidden_size = get_int("embedding_length", {});
    c.intermediate_size = get_int("feed_forward_length", {});
    c.num_layers = get_int("block_count", {});
    c.num_heads = get_int("attention.head_count", {});
    c.num_kv_heads = get_int("attention.head_count_kv", c.num_heads);
    if (c.num_heads == 0) throw ConfigError("ConfigError: GGUF attention.head_count is 0");
    c.head_dim = get_int("attention.key_length", c.hidden_size / c.num_heads);
    if (get_int("attention.value_length", c.head_dim) != c.head_dim)
        throw ConfigError("ConfigError: GGUF " + key("attention.value_length") + " differs from the key length");
    if (const GgufValue *rd = file.find_value(key("rope.dimension_count"));
        rd && rd->to_int(key("rope.dimension_count")) != c.head_dim)
        throw ConfigError("ConfigError: GGUF " + key("rope.dimension_count") + " = " +
                          std::to_string(rd->to_int(key("rope.dimension_count"))) +
                          ": partial rotary embeddings are not supported");
    c.max_position = get_int("context_length", 2048);
    c.rms_norm_eps = get_double("attention.layer_norm_rms_epsilon", 1e-6);
    c.rope_theta = get_double("rope.freq_base", 10000);
    c.sliding_window = c.architecture == Architecture::qwen2 ? 0 : get_int("attention.sliding_window", 0);
    if (const GgufValue *t = file.find_value(key("rope.scaling.type"))) {
        const std::string type = t->to_string(key("rope.scaling.type"));
        if (type == "linear") {
            c.rope_scaling.kind = RopeScaling::Kind::linear;
            c.rope_scaling.factor = get_double("rope.scaling.factor", 1);
        } else if (type != "none") {
            throw ConfigError("ConfigError: GGUF " + key("rope.scaling.type") + " = '" + type + "' is not supported");
        }
    } else if (const GgufValue *f = file.find_value(key("rope.scale_linear"))) {
        c.rope_scaling.kind = RopeScaling::Kind::linear;
        c.rope_scaling.factor = f->to_double(key("rope.scale_linear"));
    }
    c.attention_bias = file.find("blk.0.attn_q.bias") != nullptr;
    // The converter permutes Q/K for llama-style architectures; Qwen2 keeps the Hugging Face layout.
    c.rope_interleaved = c.architecture != Architecture::qwen2;
    const TensorData *embd = file.find("token_embd.weight");
    if (!embd || embd->shape.size() != 2)
        throw ConfigError("ConfigError: GGUF '" + file.name() + "' has no 2-D token_embd.weight");
    c.vocab_size = get_int("vocab_size", embd->shape[0]);
    c.tie_word_embeddings = file.find("output.weight") == nullptr;
    if (const GgufValue *eos = file.find_value("tokenizer.ggml.eos_token_id"))
        c.eos_token_ids.push_back(static_cast<int32_t>(eos->to_int("tokenizer.ggml.eos_token_id")));
    if (const GgufValue *bos = file.find_value("tokenizer.ggml.bos_token_id"))
        c.bos_token_id = static_cast<int32_t>(bos->to_int("tokenizer.ggml.bos_token_id"));
    c.validate();
    return c;
}

}  // namespace tinyfin::llm
