// The BPE tokenizer of tokenizer.json files and GGUF "gpt2" vocabularies: added tokens, a
// normalizer, a pre-tokenizer (regular-expression splits, byte-level mapping, metaspace), BPE
// merges by rank with optional byte fallback, and a decoder. The loaders (tokenizer_json.cpp,
// gguf_vocabulary.cpp) translate their files into a BpeConfig; this file knows no file format.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "added_tokens.hpp"
#include "tinyfin/llm/tokenizer.hpp"

namespace tinyfin::llm::detail {

struct NormalizerStep {
    enum Kind { NFC, Prepend, Replace, ReplaceRegex } kind;
    std::string a, b;  // Prepend: a = text; Replace: a -> b (ReplaceRegex: a is a pattern)
};

struct PreTokenizerStep {
    enum Kind { Split, ByteLevel, Metaspace } kind;
    // Split: the pattern and how matches and the text between them become pieces.
    std::string pattern;
    enum Behavior { Isolated, Removed, MergedWithPrevious, MergedWithNext } behavior = Isolated;
    // ByteLevel: add a space before the first piece when it does not start with one.
    bool add_prefix_space = false;
    // Metaspace: the space replacement ("▁"), when to prepend it ("always", "first", "never"),
    // and whether to split before each replacement.
    std::string replacement;
    std::string prepend_scheme;
    bool split = true;
};

struct DecoderStep {
    enum Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace } kind;
    std::string a, b;  // Replace: a -> b; Strip: a = the character; Metaspace: a = replacement
    int start = 0, stop = 0;  // Strip: how many characters to strip at each end of each token
    bool strip_first = true;  // Metaspace: drop the space its replacement leaves before the first token
};

struct BpeConfig {
    std::string source;                                     // the file or "GGUF vocabulary", for messages
    std::vector<std::string> tokens;                        // id -> vocabulary spelling; "" for an unused id
    std::vector<std::pair<std::string, std::string>> merges;  // in rank order
    std::vector<AddedToken> added;
    std::vector<NormalizerStep> normalizer;
    std::vector<PreTokenizerStep> pre_tokenizer;
    std::vector<DecoderStep> decoder;
    bool byte_fallback = false;  // characters outside the vocabulary as <0xXX> tokens
    bool ignore_merges = false;  // a pre-token that is a whole vocabulary entry is not merged
    bool fuse_unk = false;
    int32_t unk_id = -1, bos_id = -1, eos_id = -1;
    bool add_bos = false, add_eos = false;
    std::vector<int32_t> extra_eos_ids;  // <|eot_id|>, <|im_end|> ... besides eos_id
    std::string chat_template;
};

// GPT-2's pre-tokenizer pattern, which a ByteLevel pre-tokenizer with use_regex applies.
std::string gpt2_pre_tokenizer_pattern();

// Checks the configuration (merges and ids against the vocabulary, patterns compile) and builds
// the tokenizer; TokenizerError naming config.source and the offending entry otherwise.
std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeConfig config);

// Well-known end-of-turn tokens of chat models, added to eos_ids() when the vocabulary has them.
inline constexpr const char *end_of_turn_tokens[] = {"<|eot_id|>", "<|im_end|>", "<|end_of_text|>", "<|eom_id|>",
                                                     "<|endoftext|>", "<end_of_turn>", "</s>"};

}  // namespace tinyfin::llm::detail
