// Tokenizer::from_vocabulary: GGUF's tokenizer.ggml.* arrays. "llama" is SentencePiece-style
// (spm_vocabulary.cpp); "gpt2" is byte-level BPE (bpe.cpp) whose pre-tokenizer regular expressions
// are chosen by tokenizer.ggml.pre, since GGUF stores the name, not the patterns.
#include <string_view>

#include "bpe.hpp"
#include "spm_vocabulary.hpp"
#include "utf8.hpp"

namespace tinyfin::llm {

namespace {

// The Llama 3 pattern: contractions in any case, letters with one leading non-letter, numbers in
// groups of 1 to 3 digits, punctuation runs with trailing newlines, newline runs, other spaces.
constexpr const char *llama3_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: the same with single digits.
constexpr const char *qwen2_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct NamedPreTokenizer {
    std::string_view name;
    const char *pattern;  // nullptr: GPT-2's
    bool ignore_merges;
};
constexpr NamedPreTokenizer named_pre_tokenizers[] = {
    {"llama-bpe", llama3_pattern, true}, {"llama3", llama3_pattern, true}, {"qwen2", qwen2_pattern, false},
    {"gpt-2", nullptr, false},           {"gpt2", nullptr, false},         {"default", nullptr, false},
};

std::unique_ptr<Tokenizer> from_gpt2_vocabulary(const Vocabulary &v) {
    const std::string where = "GGUF vocabulary (tokenizer.ggml.model \"gpt2\")";
    const std::string pre = v.pre.empty() ? "default" : v.pre;
    const NamedPreTokenizer *named = nullptr;
    for (const NamedPreTokenizer &p : named_pre_tokenizers)
        if (p.name == pre) named = &p;
    if (!named) {
        std::string known;
        for (const NamedPreTokenizer &p : named_pre_tokenizers) known += (known.empty() ? "" : ", ") + std::string(p.name);
        throw TokenizerError(where + ": tokenizer.ggml.pre is " + detail::quote_for_message(pre) +
                             ", a pre-tokenizer tinyfin does not know (it knows " + known + ")");
    }
    if (!v.token_types.empty() && v.token_types.size() != v.tokens.size())
        throw TokenizerError(where + ": tokenizer.ggml.token_type has " + std::to_string(v.token_types.size()) +
                             " entries for " + std::to_string(v.tokens.size()) + " tokens");
    detail::BpeConfig c;
    c.source = where;
    c.tokens = v.tokens;
    for (std::size_t id = 0; id < c.tokens.size(); ++id)
        if (c.tokens[id].empty()) throw TokenizerError(where + ": token " + std::to_string(id) + " is empty");
    c.merges.reserve(v.merges.size());
    for (std::size_t i = 0; i < v.merges.size(); ++i) {
        const std::string &m = v.merges[i];
        const std::size_t space = m.find(' ', 1);
        if (space == std::string::npos || space + 1 >= m.size())
            throw TokenizerError(where + ": tokenizer.ggml.merges[" + std::to_string(i) + "] is " +
                                 detail::quote_for_message(m) + ", not two tokens separated by a space");
        c.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
    // Control (3) tokens are parsed only when asked; user-defined (4) ones always.
    for (std::size_t id = 0; id < v.token_types.size(); ++id) {
        const int32_t type = v.token_types[id];
        if (type == 3 || type == 4) c.added.push_back({static_cast<int32_t>(id), v.tokens[id], type == 3, false, false});
    }
    detail::PreTokenizerStep split{};
    split.kind = detail::PreTokenizerStep::Split;
    split.pattern = named->pattern ? named->pattern : detail::gpt2_pre_tokenizer_pattern();
    detail::PreTokenizerStep bytes{};
    bytes.kind = detail::PreTokenizerStep::ByteLevel;
    c.pre_tokenizer = {split, bytes};
    detail::DecoderStep decoder{};
    decoder.kind = detail::DecoderStep::ByteLevel;
    c.decoder = {decoder};
    c.ignore_merges = named->ignore_merges;
    c.unk_id = v.unk_id;
    c.bos_id = v.bos_id;
    c.eos_id = v.eos_id;
    c.add_bos = v.add_bos;
    c.add_eos = v.add_eos;
    c.chat_template = v.chat_template;
    if (v.eot_id >= 0) c.extra_eos_ids.push_back(v.eot_id);
    for (const char *name : detail::end_of_turn_tokens)
        for (const detail::AddedToken &t : c.added)
            if (t.special && t.content == name) c.extra_eos_ids.push_back(t.id);
    return detail::make_bpe_tokenizer(std::move(c));
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_vocabulary(const Vocabulary &v) {
    if (v.model == "llama") return detail::make_spm_vocabulary_tokenizer(v);
    if (v.model == "gpt2") return from_gpt2_vocabulary(v);
    throw TokenizerError("GGUF vocabulary: tokenizer.ggml.model is " + detail::quote_for_message(v.model) +
                         "; tinyfin reads \"llama\" (SentencePiece-style) and \"gpt2\" (byte-level BPE)");
}

}  // namespace tinyfin::llm
