// GGUF's "gpt2" vocabulary written from a tokenizer.json, for tinyfin-quantize: the inverse of
// Tokenizer::from_vocabulary (gguf_vocabulary.cpp) for byte-level BPE.
#pragma once

#include <cstdint>
#include <string>

#include "tinyfin/llm/tokenizer.hpp"
#include "tokenizer_json.hpp"

namespace tinyfin::llm::detail {

// The tokens by id (the vocabulary's spellings, added tokens' contents, "[PAD<id>]" of type unused
// for ids the tokenizer leaves out, up to vocab_size), token types (1 normal, 3 control: special
// added tokens, 4 user defined: the other added tokens, 5 unused), merges as "a b", BOS, EOS, PAD
// and UNK ids, add_bos/add_eos, the chat template, one more end-of-generation id when the
// tokenizer has one GGUF's rules do not find (as tokenizer.ggml.eot_token_id), and
// tokenizer.ggml.pre as llama.cpp names the pre-tokenizer. Tokenizer::from_vocabulary of the
// result encodes and decodes as the tokenizer.json does; what GGUF cannot carry (another
// pre-tokenizer, normalizer or decoder, byte fallback, added tokens that strip whitespace, merges
// of tokens holding a space, more tokens than vocab_size) is a TokenizerError naming it.
Vocabulary gpt2_vocabulary_from_json(const JsonTokenizer &tokenizer, int64_t vocab_size);

// The same from a tokenizer.json file (tokenizer_config.json and generation_config.json beside it).
Vocabulary gpt2_vocabulary_from_tokenizer_json(const std::string &json_path, int64_t vocab_size);

}  // namespace tinyfin::llm::detail
