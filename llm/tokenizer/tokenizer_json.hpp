// Hugging Face tokenizer.json (with tokenizer_config.json and generation_config.json beside it)
// to a BpeConfig: the model, added tokens, normalizer, pre-tokenizer, decoder and BOS/EOS policy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bpe.hpp"
#include "tinyfin/llm/tokenizer.hpp"

namespace tinyfin::llm::detail {

// The texts of the three files (the last two may be empty: absent) and the name used in messages.
std::unique_ptr<Tokenizer> tokenizer_from_json_text(std::string_view tokenizer_json, std::string_view config_json,
                                                    std::string_view generation_json, const std::string &source);

// What tokenizer_from_json_text builds its tokenizer from, and the padding token's id (-1: none),
// which only the GGUF conversion (gguf_vocabulary.hpp) keeps.
struct JsonTokenizer {
    BpeConfig config;
    int32_t pad_id = -1;
};
JsonTokenizer json_tokenizer_from_text(std::string_view tokenizer_json, std::string_view config_json,
                                       std::string_view generation_json, const std::string &source);

// The BOS/EOS/PAD settings and chat template of a tokenizer_config.json (all optional).
struct TokenizerConfig {
    std::optional<bool> add_bos, add_eos;
    std::optional<std::string> bos_token, eos_token, pad_token;
    std::string chat_template;
    std::vector<int32_t> generation_eos_ids;  // generation_config.json's eos_token_id (int or list)
};
TokenizerConfig parse_tokenizer_config(std::string_view config_json, std::string_view generation_json,
                                       const std::string &source);

// Rejects JSON nested deeper than `limit` before it is parsed (the parser and the tree recurse).
void check_json_depth(std::string_view text, int limit, const std::string &source);

}  // namespace tinyfin::llm::detail
