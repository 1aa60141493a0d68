// Quantized model weights: which block type each tensor gets under one of llama.cpp's file types
// (the rules of its llama_tensor_get_type for dense Llama-family models), used both when a
// checkpoint is quantized on load (LoadOptions::quantize) and by tinyfin-quantize, which writes
// the result as a GGUF file llama.cpp reads (docs/llm.md "Quantized weights").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tinyfin/tinyfin.hpp>

namespace tinyfin::llm {

// A named scheme ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_s", "q4_k_m" (alias "q4_k"),
// "q5_k_s", "q5_k_m" (alias "q5_k"), "q6_k"): the base block type and llama.cpp's
// general.file_type number (enum llama_ftype).
struct QuantScheme {
    std::string name;
    DType base;
    uint32_t file_type;
};
// ConfigError listing the names for an unknown one.
QuantScheme quant_scheme(std::string_view name);
std::vector<std::string> quant_scheme_names();

// The storage of one weight under a scheme. role: the loader's names ("embed", "lm_head", "wq",
// "wk", "wv", "wo", "w_gate", "w_up", "w_down", norms and biases); lm_head also stands for a
// tied embedding used as the head. Returns nullopt for a tensor that keeps its dtype (1-D
// tensors: norms and biases stay f32, as in llama.cpp). k-quants fall back as llama.cpp does
// when the rows are not whole 256-blocks (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), and a row
// that is not whole 32-blocks keeps its dtype.
std::optional<DType> quant_type_for(const QuantScheme &scheme, std::string_view role, int64_t layer, int64_t num_layers,
                                    const Shape &shape);

struct QuantizeFileOptions {
    std::string scheme = "q8_0";
    bool verbose = false;  // progress bar on stderr
    // Quantize tensors already quantized in a GGUF input (dequantized first: the error adds up).
    bool allow_requantize = false;
};

struct QuantizeFileResult {
    uint64_t tensors = 0, bytes_in = 0, bytes_out = 0;
    std::vector<std::pair<std::string, std::string>> types;  // tensor name, GGUF type name
};

// Reads a Hugging Face directory or a GGUF file and writes a GGUF file (version 3) with the
// weights quantized under the scheme: general.architecture, general.name, general.file_type,
// general.quantization_version 2, general.alignment 32, the <arch>.* hyperparameters, the
// tokenizer.ggml.* keys of a GGUF input (a Hugging Face input: BOS/EOS ids and its tokenizer as
// the directory's loader reads it: a byte-level BPE tokenizer.json as the "gpt2" vocabulary, else
// tokenizer.model as the "llama" one), llama.cpp's tensor names, Q/K rows permuted for llama and
// mistral as llama.cpp's converter does.
// Errors: FileError, FormatError, ConfigError; TokenizerError for a tokenizer.json that a GGUF
// vocabulary cannot carry (and no tokenizer.model beside it).
QuantizeFileResult quantize_model_file(const std::string &input, const std::string &output,
                                       const QuantizeFileOptions &options = {});

}  // namespace tinyfin::llm
