// Tokenizer::from_vocabulary: GGUF's tokenizer.ggml.* arrays. "llama" is SentencePiece-style
// (spm_vocabulary.cpp); "gpt2" is byte-level BPE (bpe.cpp) whose pre-tokenizer regular expressions
// are chosen by tokenizer.ggml.pre, since GGUF stores the name, not the patterns. And the way
// back for tinyfin-quantize: a tokenizer.json as a "gpt2" vocabulary (gguf_vocabulary.hpp).
#include "gguf_vocabulary.hpp"

#include <algorithm>
#include <string_view>

#include "bpe.hpp"
#include "spm_vocabulary.hpp"
#include "tokenizer_json.hpp"
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

// What a tokenizer.ggml.pre name stands for: the pre-tokenizer's split, whether merges are skipped
// for a pre-token that is a whole vocabulary entry, and an NFC normalizer (Qwen2's tokenizer.json
// has one; without it a text that is not NFC would encode otherwise than from the directory).
struct NamedPreTokenizer {
    std::string_view name;
    const char *pattern;  // nullptr: GPT-2's
    bool ignore_merges;
    bool nfc;
};
// The first entry of each pattern is the name tinyfin-quantize writes (llama.cpp's).
constexpr NamedPreTokenizer named_pre_tokenizers[] = {
    {"llama-bpe", llama3_pattern, true, false},
    {"llama3", llama3_pattern, true, false},
    {"qwen2", qwen2_pattern, false, true},
    {"gpt-2", nullptr, false, false},
    {"gpt2", nullptr, false, false},
    {"default", nullptr, false, false},
};

// The normalizer, pre-tokenizer, decoder and merge policy a "gpt2" vocabulary of this name gets.
void apply_named(const NamedPreTokenizer &named, detail::BpeConfig &c) {
    c.normalizer.clear();
    if (named.nfc) c.normalizer.push_back({detail::NormalizerStep::NFC, "", ""});
    detail::PreTokenizerStep split{};
    split.kind = detail::PreTokenizerStep::Split;
    split.pattern = named.pattern ? named.pattern : detail::gpt2_pre_tokenizer_pattern();
    detail::PreTokenizerStep bytes{};
    bytes.kind = detail::PreTokenizerStep::ByteLevel;
    c.pre_tokenizer = {split, bytes};
    detail::DecoderStep decoder{};
    decoder.kind = detail::DecoderStep::ByteLevel;
    c.decoder = {decoder};
    c.ignore_merges = named.ignore_merges;
}

std::unique_ptr<Tokenizer> from_gpt2_vocabulary(const Vocabulary &v) {
    const std::string where = "GGUF vocabulary (tokenizer.ggml.model \"gpt2\")";
    const std::string pre = v.pre.empty() ? "default" : v.pre;
    const NamedPreTokenizer *named = nullptr;
    for (const NamedPreTokenizer &p : named_pre_tokenizers)
        if (p.name == pre) named = &p;
    if (!named) {
        std::string known;
        for (const NamedPreTokenizer &p : named_pre_tokenizers)
            known += (known.empty() ? "" : ", ") + std::string(p.name);
        throw TokenizerError(where + ": tokenizer.ggml.pre is " + detail::quote_for_message(pre) +
                             ", a pre-tokenizer tinyfin does not know (it knows " + known + ")");
    }
    if (!v.token_types.empty() && v.token_types.size() != v.tokens.size())
        throw TokenizerError(where + ": tokenizer.ggml.token_type has " + std::to_string(v.token_types.size()) +
                             " entries for " + std::to_string(v.tokens.size()) + " tokens");
    detail::BpeConfig c;
    c.source = where;
    c.tokens = v.tokens;
    for (std::size_t id = 0; id < c.tokens.size(); ++id) {
        if (c.tokens[id].empty()) throw TokenizerError(where + ": token " + std::to_string(id) + " is empty");
        // Unused (5): an id the tokenizer never produces ("[PAD<id>]" filling a gap up to the
        // model's vocabulary size), not a spelling BPE may reach.
        if (id < v.token_types.size() && v.token_types[id] == 5) c.tokens[id].clear();
    }
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
        if (type == 3 || type == 4)
            c.added.push_back({static_cast<int32_t>(id), v.tokens[id], type == 3, false, false});
    }
    apply_named(*named, c);
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

namespace tinyfin::llm::detail {

namespace {

// A ByteLevel step that splits (use_regex) as the Split it is followed by the plain mapping, the
// form a "gpt2" vocabulary's pre-tokenizer takes (bpe.cpp splits both the same way).
std::vector<PreTokenizerStep> canonical(const std::vector<PreTokenizerStep> &steps) {
    std::vector<PreTokenizerStep> out;
    for (const PreTokenizerStep &s : steps) {
        if (s.kind == PreTokenizerStep::ByteLevel && !s.pattern.empty()) {
            PreTokenizerStep split{};
            split.kind = PreTokenizerStep::Split;
            split.pattern = s.pattern;
            out.push_back(split);
            PreTokenizerStep bytes = s;
            bytes.pattern.clear();
            out.push_back(bytes);
        } else {
            out.push_back(s);
        }
    }
    return out;
}

bool same_steps(const std::vector<PreTokenizerStep> &a, const std::vector<PreTokenizerStep> &b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const PreTokenizerStep &x, const PreTokenizerStep &y) {
        return x.kind == y.kind && x.pattern == y.pattern && x.behavior == y.behavior &&
               x.add_prefix_space == y.add_prefix_space && x.kind != PreTokenizerStep::Metaspace;
    });
}

bool same_steps(const std::vector<NormalizerStep> &a, const std::vector<NormalizerStep> &b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const NormalizerStep &x, const NormalizerStep &y) {
        return x.kind == y.kind && x.a == y.a && x.b == y.b;
    });
}

bool same_steps(const std::vector<DecoderStep> &a, const std::vector<DecoderStep> &b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const DecoderStep &x, const DecoderStep &y) { return x.kind == y.kind; });
}

}  // namespace

Vocabulary gpt2_vocabulary_from_json(const JsonTokenizer &tokenizer, int64_t vocab_size) {
    const BpeConfig &c = tokenizer.config;
    const auto refuse = [&](const std::string &what) {
        throw TokenizerError(c.source + ": " + what +
                             ", which a GGUF \"gpt2\" vocabulary cannot carry: the GGUF file would not encode as "
                             "this tokenizer does");
    };

    const std::vector<PreTokenizerStep> steps = canonical(c.pre_tokenizer);
    const NamedPreTokenizer *named = nullptr;
    for (const NamedPreTokenizer &n : named_pre_tokenizers) {
        BpeConfig want;
        apply_named(n, want);
        if (same_steps(want.pre_tokenizer, steps)) {
            named = &n;  // the first name of a pattern: llama.cpp's
            break;
        }
    }
    if (!named)
        refuse("its pre-tokenizer is not one GGUF names (GPT-2's ByteLevel split, or Llama 3's or Qwen2's Split "
               "pattern followed by ByteLevel without add_prefix_space)");
    BpeConfig want;
    apply_named(*named, want);
    if (!same_steps(want.normalizer, c.normalizer))
        refuse(std::string("its normalizer is not ") + (named->nfc ? "NFC" : "empty") + ", the one GGUF's \"" +
               std::string(named->name) + "\" implies");
    if (!same_steps(want.decoder, c.decoder)) refuse("its decoder is not ByteLevel alone");
    if (c.ignore_merges != named->ignore_merges)
        refuse(std::string("model.ignore_merges is ") + (c.ignore_merges ? "true" : "false") + " where GGUF's \"" +
               std::string(named->name) + "\" implies " + (named->ignore_merges ? "true" : "false"));
    if (c.byte_fallback) refuse("model.byte_fallback is true");
    if (c.fuse_unk && c.unk_id >= 0) refuse("model.fuse_unk is true");

    if (vocab_size < static_cast<int64_t>(c.tokens.size()))
        refuse("it has " + std::to_string(c.tokens.size()) + " token ids, more than the model's vocab_size of " +
               std::to_string(vocab_size));
    const auto n = static_cast<std::size_t>(vocab_size);
    Vocabulary v;
    v.model = "gpt2";
    v.pre = std::string(named->name);
    v.tokens.resize(n);
    v.token_types.assign(n, 1);
    std::copy(c.tokens.begin(), c.tokens.end(), v.tokens.begin());
    for (const AddedToken &t : c.added) {
        if (t.lstrip || t.rstrip) refuse("added token " + quote_for_message(t.content) + " strips whitespace");
        std::string &spelling = v.tokens[static_cast<std::size_t>(t.id)];
        if (!spelling.empty() && spelling != t.content)
            refuse("added token " + quote_for_message(t.content) + " has id " + std::to_string(t.id) +
                   ", which the vocabulary spells " + quote_for_message(spelling));
        spelling = t.content;
        v.token_types[static_cast<std::size_t>(t.id)] = t.special ? 3 : 4;
    }
    for (std::size_t id = 0; id < n; ++id)
        if (v.tokens[id].empty()) {
            v.tokens[id] = "[PAD" + std::to_string(id) + "]";
            v.token_types[id] = 5;
        }
    v.merges.reserve(c.merges.size());
    for (const auto &[a, b] : c.merges) {
        if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
            refuse("merge " + quote_for_message(a) + " + " + quote_for_message(b) + " holds a space");
        v.merges.push_back(a + " " + b);
    }
    v.bos_id = c.bos_id;
    v.eos_id = c.eos_id;
    v.pad_id = tokenizer.pad_id;
    v.unk_id = c.unk_id;
    // Without the id the tokenizer adds nothing; a GGUF reader would add the model's.
    v.add_bos = c.add_bos && c.bos_id >= 0;
    v.add_eos = c.add_eos && c.eos_id >= 0;
    v.chat_template = c.chat_template;
    // End-of-generation ids: a GGUF reader finds EOS and the special tokens named in
    // end_of_turn_tokens itself; one more goes in tokenizer.ggml.eot_token_id.
    for (const int32_t id : c.extra_eos_ids) {
        if (id == c.eos_id) continue;
        const auto special = std::find_if(c.added.begin(), c.added.end(), [&](const AddedToken &t) {
            return t.id == id && t.special &&
                   std::find_if(std::begin(end_of_turn_tokens), std::end(end_of_turn_tokens),
                                [&](const char *name) { return t.content == name; }) != std::end(end_of_turn_tokens);
        });
        if (special == c.added.end()) {
            v.eot_id = id;
            break;
        }
    }
    return v;
}

}  // namespace tinyfin::llm::detail
