// The libsentencepiece-backed tokenizer of tokenizer.model files (sentencepiece_model.cpp).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tinyfin/llm/tokenizer.hpp"
#include "tokenizer_json.hpp"

namespace tinyfin::llm::detail {

std::unique_ptr<Tokenizer> sentencepiece_from_bytes(std::string_view model_bytes, const TokenizerConfig &config,
                                                    const std::string &source);

}  // namespace tinyfin::llm::detail
