// The SentencePiece-style tokenizer of GGUF "llama" vocabularies (spm_vocabulary.cpp).
#pragma once

#include <memory>

#include "tinyfin/llm/tokenizer.hpp"

namespace tinyfin::llm::detail {

std::unique_ptr<Tokenizer> make_spm_vocabulary_tokenizer(const Vocabulary &v);

}  // namespace tinyfin::llm::detail
