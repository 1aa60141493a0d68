// A model's weight files opened for reading (private to libtinyfin-llm): the config, the tensors
// by the loader's role names ("wq", "embed", ...) in either format, and the shape each must have.
// Shared by the loader (model.cpp) and the GGUF quantizer (quantize.cpp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <tinyfin/llm/config.hpp>
#include <tinyfin/llm/gguf.hpp>
#include <tinyfin/llm/tensor_data.hpp>

namespace tinyfin::llm {

// Where the weights come from: tensor lookup by the format's names.
struct Source {
    std::shared_ptr<void> holder;  // keeps the mapped files alive
    std::function<const TensorData *(std::string_view)> find;
    bool gguf = false;
    std::string path;
};

struct Opened {
    Source source;
    ModelConfig config;
    std::shared_ptr<GgufFile> gguf;
    // The file's name of a role's tensor (layer ignored for the global ones).
    std::string name(const std::string &what, int64_t layer) const;
};

// A Hugging Face directory (config.json) or a GGUF file: FileError, FormatError, ConfigError.
Opened open_model(const std::string &path);

std::string hf_name(const std::string &what, int64_t layer);
std::string gguf_name(const std::string &what, int64_t layer);
// The shape each weight must have.
Shape expected_shape(const ModelConfig &c, const std::string &what);
// Norm weights and biases (kept in f32).
bool is_small(const std::string &what);
// The roles of one layer's tensors.
std::vector<std::string> layer_weights(const ModelConfig &c);
// Rotary inverse frequencies from rope_theta and rope_scaling (not GGUF's rope_freqs tensor).
std::vector<double> config_frequencies(const ModelConfig &c);

}  // namespace tinyfin::llm
