// Opening a model's weight files and the loader's names for them (weights.hpp).
#include <cmath>
#include <filesystem>
#include <numbers>

#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/safetensors.hpp>

#include "weights.hpp"

namespace tinyfin::llm {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

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

std::string Opened::name(const std::string &what, int64_t layer) const {
    return source.gguf ? gguf_name(what, layer) : hf_name(what, layer);
}

std::vector<double> config_frequencies(const ModelConfig &c) {
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
    return f;
}

}  // namespace tinyfin::llm
