#include "bpe.hpp"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <optional>
#include <queue>
#include <unordered_map>

#include "byte_level.hpp"
#include "regex.hpp"
#include "utf8.hpp"

namespace tinyfin::llm::detail {

namespace {

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    if (from.empty()) return std::string(s);
    std::string out;
    std::size_t i = 0;
    for (;;) {
        const std::size_t k = s.find(from, i);
        if (k == std::string_view::npos) break;
        out.append(s.substr(i, k - i));
        out.append(to);
        i = k + from.size();
    }
    out.append(s.substr(i));
    return out;
}

std::string nfc(std::string_view s) {
    if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
        return std::string(s);
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2 *normalizer = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status)) throw TokenizerError(std::string("NFC normalizer unavailable (ICU): ") + u_errorName(status));
    const icu::UnicodeString in = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
    const icu::UnicodeString normalized = normalizer->normalize(in, status);
    if (U_FAILURE(status)) throw TokenizerError(std::string("NFC normalization failed (ICU): ") + u_errorName(status));
    std::string out;
    normalized.toUTF8String(out);
    return out;
}

// A compiled pipeline step: the step plus its regular expression when it has one.
struct CompiledNormalizer {
    NormalizerStep step;
    std::optional<Regex> regex;
};
struct CompiledPreTokenizer {
    PreTokenizerStep step;
    std::optional<Regex> regex;
};

// GPT-2's pre-tokenizer pattern, which ByteLevel applies when it splits (use_regex).
constexpr const char *gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class BpeTokenizer final : public Tokenizer {
public:
    explicit BpeTokenizer(BpeConfig c) : config_(std::move(c)) { build(); }

    std::vector<int32_t> encode(std::string_view text, const EncodeOptions &options) const override {
        std::vector<int32_t> ids;
        if (options.add_bos && config_.add_bos && config_.bos_id >= 0) ids.push_back(config_.bos_id);
        bool first = true;
        for (const Fragment &f : added_.split(text, options.parse_special)) {
            if (f.id >= 0) {
                // The prompt already spells BOS (a chat template's text): no second one.
                if (!(f.id == config_.bos_id && ids.size() == 1 && ids[0] == config_.bos_id && first)) ids.push_back(f.id);
            } else {
                encode_text(f.text, first, ids);
            }
            first = false;
        }
        if (options.add_eos && config_.add_eos && config_.eos_id >= 0) ids.push_back(config_.eos_id);
        return ids;
    }

    std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
        std::string out;
        std::vector<std::string> group;
        bool first_group = true;
        const auto flush = [&] {
            if (group.empty()) return;
            out += run_decoder(group, first_group);
            group.clear();
            first_group = false;
        };
        for (const int32_t id : ids) {
            check_id(id);
            if (added_index_[id] >= 0) {
                const AddedToken &t = config_.added[added_index_[id]];
                if (t.special && skip_special) continue;
                flush();
                out += t.content;
                if (!t.special) first_group = false;  // the text after a leading BOS is still the start
                continue;
            }
            group.push_back(config_.tokens[id]);
        }
        flush();
        return out;
    }

    std::string token_to_piece(int32_t id) const override {
        check_id(id);
        if (added_index_[id] >= 0) return config_.added[added_index_[id]].content;
        std::vector<std::string> one{config_.tokens[id]};
        return run_decoder(one, false);
    }

    int32_t vocab_size() const override { return static_cast<int32_t>(config_.tokens.size()); }
    int32_t bos_id() const override { return config_.bos_id; }
    int32_t eos_id() const override { return config_.eos_id; }
    std::vector<int32_t> eos_ids() const override { return eos_ids_; }
    std::string chat_template() const override { return config_.chat_template; }
    std::optional<int32_t> token_to_id(std::string_view token) const override {
        const auto it = token_ids_.find(std::string(token));
        if (it == token_ids_.end()) return std::nullopt;
        return it->second;
    }
    std::string id_to_token(int32_t id) const override {
        check_id(id);
        return config_.tokens[id];
    }
    bool is_special(int32_t id) const override {
        if (id < 0 || id >= vocab_size()) return false;
        return added_index_[id] >= 0 && config_.added[added_index_[id]].special;
    }
    bool adds_bos() const override { return config_.add_bos && config_.bos_id >= 0; }
    bool adds_eos() const override { return config_.add_eos && config_.eos_id >= 0; }

private:
    void fail(const std::string &what) const { throw TokenizerError(config_.source + ": " + what); }

    void check_id(int32_t id) const {
        if (id < 0 || id >= vocab_size())
            throw TokenizerError("token id " + std::to_string(id) + " is out of range: the vocabulary of " +
                                 config_.source + " has " + std::to_string(vocab_size()) + " tokens");
    }

    void check_optional_id(int32_t id, const char *what) const {
        if (id < -1 || id >= vocab_size())
            fail(std::string(what) + " id " + std::to_string(id) + " is outside the vocabulary of " +
                 std::to_string(vocab_size()) + " tokens");
    }

    void build() {
        const std::size_t n = config_.tokens.size();
        if (n == 0) fail("the vocabulary is empty");
        if (n > static_cast<std::size_t>(INT32_MAX)) fail("the vocabulary has more than 2^31 tokens");
        token_ids_.reserve(n);
        for (std::size_t id = 0; id < n; ++id) {
            const std::string &t = config_.tokens[id];
            if (t.empty()) continue;
            if (!is_valid_utf8(t)) fail("token " + std::to_string(id) + " is not valid UTF-8: " + quote_for_message(t));
            token_ids_.emplace(t, static_cast<int32_t>(id));  // the first id of a duplicated spelling wins
        }
        added_index_.assign(n, -1);
        for (std::size_t k = 0; k < config_.added.size(); ++k) {
            AddedToken &t = config_.added[k];
            if (t.id < 0 || static_cast<std::size_t>(t.id) >= n)
                fail("added token " + quote_for_message(t.content) + " has id " + std::to_string(t.id) +
                     ", outside the vocabulary of " + std::to_string(n) + " tokens");
            if (t.content.empty()) fail("added token " + std::to_string(t.id) + " is empty");
            if (!is_valid_utf8(t.content)) fail("added token " + std::to_string(t.id) + " is not valid UTF-8");
            added_index_[t.id] = static_cast<int32_t>(k);
            if (config_.tokens[t.id].empty()) config_.tokens[t.id] = t.content;
            token_ids_.try_emplace(t.content, t.id);
        }
        added_ = AddedTokenMatcher(config_.added);
        check_optional_id(config_.unk_id, "the unknown token's");
        check_optional_id(config_.bos_id, "the BOS");
        check_optional_id(config_.eos_id, "the EOS");

        merges_.reserve(config_.merges.size());
        for (std::size_t rank = 0; rank < config_.merges.size(); ++rank) {
            const std::string &a = config_.merges[rank].first, &b = config_.merges[rank].second;
            const auto ia = token_ids_.find(a), ib = token_ids_.find(b), iab = token_ids_.find(a + b);
            const auto where = [&] {
                return "merge " + std::to_string(rank) + " (" + quote_for_message(a) + " " + quote_for_message(b) + ")";
            };
            if (ia == token_ids_.end() || ib == token_ids_.end())
                fail(where() + " names a token that is not in the vocabulary");
            if (iab == token_ids_.end()) fail(where() + " makes a token that is not in the vocabulary");
            merges_.try_emplace(pair_key(ia->second, ib->second),
                                Merge{static_cast<int32_t>(rank), iab->second});  // the first rank of a repeat wins
        }
        if (config_.byte_fallback) {
            for (int b = 0; b < 256; ++b) {
                const auto it = token_ids_.find(byte_token_text(static_cast<unsigned char>(b)));
                byte_ids_[b] = it == token_ids_.end() ? -1 : it->second;
            }
        }
        for (const NormalizerStep &s : config_.normalizer) {
            CompiledNormalizer c{s, std::nullopt};
            if (s.kind == NormalizerStep::ReplaceRegex) c.regex.emplace(s.a, config_.source + ": normalizer Replace");
            normalizer_.push_back(std::move(c));
        }
        for (const PreTokenizerStep &s : config_.pre_tokenizer) {
            CompiledPreTokenizer c{s, std::nullopt};
            if (s.kind == PreTokenizerStep::Split) c.regex.emplace(s.pattern, config_.source + ": pre-tokenizer Split");
            if (s.kind == PreTokenizerStep::ByteLevel && !s.pattern.empty())
                c.regex.emplace(s.pattern, config_.source + ": pre-tokenizer ByteLevel");
            if (s.kind == PreTokenizerStep::ByteLevel) byte_level_ = true;
            pre_tokenizer_.push_back(std::move(c));
        }
        if (config_.eos_id >= 0) eos_ids_.push_back(config_.eos_id);
        for (const int32_t id : config_.extra_eos_ids) {
            check_optional_id(id, "an end-of-generation token's");
            if (id >= 0 && std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);
        }
    }

    static uint64_t pair_key(int32_t a, int32_t b) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }

    std::string normalize(std::string_view text) const {
        std::string s(text);
        for (const CompiledNormalizer &c : normalizer_) {
            switch (c.step.kind) {
            case NormalizerStep::NFC: s = nfc(s); break;
            case NormalizerStep::Prepend:
                if (!s.empty()) s = c.step.a + s;
                break;
            case NormalizerStep::Replace: s = replace_all(s, c.step.a, c.step.b); break;
            case NormalizerStep::ReplaceRegex: {
                std::string out;
                std::size_t last = 0;
                for (const auto &[b, e] : c.regex->find_all(s)) {
                    out.append(s, last, b - last);
                    out += c.step.b;
                    last = e;
                }
                out.append(s, last);
                s = std::move(out);
                break;
            }
            }
        }
        return s;
    }

    static void split_pieces(const Regex &regex, PreTokenizerStep::Behavior behavior, const std::string &piece,
                             std::vector<std::string> &out) {
        std::size_t last = 0;
        std::string pending;  // MergedWithNext: a match waiting for the text after it
        for (const auto &[b, e] : regex.find_all(piece)) {
            std::string gap = piece.substr(last, b - last), match = piece.substr(b, e - b);
            last = e;
            switch (behavior) {
            case PreTokenizerStep::Isolated:
                if (!gap.empty()) out.push_back(std::move(gap));
                out.push_back(std::move(match));
                break;
            case PreTokenizerStep::Removed:
                if (!gap.empty()) out.push_back(std::move(gap));
                break;
            case PreTokenizerStep::MergedWithPrevious:
                out.push_back(gap + match);
                break;
            case PreTokenizerStep::MergedWithNext:
                if (!pending.empty() || !gap.empty()) out.push_back(pending + gap);
                pending = std::move(match);
                break;
            }
        }
        std::string tail = pending + piece.substr(last);
        if (!tail.empty()) out.push_back(std::move(tail));
    }

    std::vector<std::string> pre_tokenize(std::string text, bool first_fragment) const {
        std::vector<std::string> pieces{std::move(text)};
        for (const CompiledPreTokenizer &c : pre_tokenizer_) {
            std::vector<std::string> next;
            switch (c.step.kind) {
            case PreTokenizerStep::Split:
                for (const std::string &p : pieces) split_pieces(*c.regex, c.step.behavior, p, next);
                break;
            case PreTokenizerStep::ByteLevel:
                if (c.step.add_prefix_space && !pieces.empty() && !pieces[0].empty() && pieces[0][0] != ' ')
                    pieces[0] = " " + pieces[0];
                if (!c.regex) {
                    next = std::move(pieces);
                    break;
                }
                for (const std::string &p : pieces) split_pieces(*c.regex, PreTokenizerStep::Isolated, p, next);
                break;
            case PreTokenizerStep::Metaspace: {
                const std::string &r = c.step.replacement;
                for (std::size_t k = 0; k < pieces.size(); ++k) {
                    std::string p = replace_all(pieces[k], " ", r);
                    const bool prepend = c.step.prepend_scheme == "always" ||
                                         (c.step.prepend_scheme == "first" && first_fragment && k == 0);
                    if (prepend && p.compare(0, r.size(), r) != 0) p = r + p;
                    if (!c.step.split) {
                        next.push_back(std::move(p));
                        continue;
                    }
                    std::size_t start = 0;
                    for (std::size_t i = r.size(); i <= p.size(); ++i) {
                        if (i == p.size() || p.compare(i, r.size(), r) == 0) {
                            if (i > start) next.push_back(p.substr(start, i - start));
                            start = i;
                        }
                    }
                }
                break;
            }
            }
            pieces = std::move(next);
        }
        if (byte_level_)
            for (std::string &p : pieces) p = byte_level().encode(p);
        return pieces;
    }

    struct Merge {
        int32_t rank;
        int32_t merged;
    };

    // One pre-token through BPE: characters to ids, then the lowest-ranked adjacent pair merged
    // until no pair has a merge (a heap of candidate pairs, checked against the current symbols
    // when popped, so a long pre-token costs O(n log n), not O(n^2)).
    void bpe(const std::string &piece, std::vector<int32_t> &ids) const {
        if (config_.ignore_merges) {
            if (const auto it = token_ids_.find(piece); it != token_ids_.end() && added_index_[it->second] < 0) {
                ids.push_back(it->second);
                return;
            }
        }
        struct Symbol {
            int32_t id;
            int32_t prev, next;  // neighbours in the list, -1 at the ends
        };
        std::vector<Symbol> symbols;
        for (const std::string_view ch : utf8_chars(piece)) {
            const auto it = token_ids_.find(std::string(ch));
            if (it != token_ids_.end()) {
                symbols.push_back({it->second, 0, 0});
                continue;
            }
            if (config_.byte_fallback) {
                bool all = true;
                for (const char b : ch) all = all && byte_ids_[static_cast<unsigned char>(b)] >= 0;
                if (all) {
                    for (const char b : ch) symbols.push_back({byte_ids_[static_cast<unsigned char>(b)], 0, 0});
                    continue;
                }
            }
            if (config_.unk_id < 0)
                fail("the character " + quote_for_message(ch) +
                     " is not in the vocabulary, and there is no unknown token or byte fallback");
            if (config_.fuse_unk && !symbols.empty() && symbols.back().id == config_.unk_id) continue;
            symbols.push_back({config_.unk_id, 0, 0});
        }
        const int32_t count = static_cast<int32_t>(symbols.size());
        for (int32_t i = 0; i < count; ++i) symbols[i].prev = i - 1, symbols[i].next = i + 1 < count ? i + 1 : -1;

        struct Candidate {
            int32_t rank, left, left_id, right_id;
            bool operator>(const Candidate &o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
        };
        std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
        const auto consider = [&](int32_t left) {
            if (left < 0) return;
            const int32_t right = symbols[left].next;
            if (right < 0) return;
            const auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
            if (it != merges_.end()) heap.push({it->second.rank, left, symbols[left].id, symbols[right].id});
        };
        for (int32_t i = 0; i + 1 < count; ++i) consider(i);
        while (!heap.empty()) {
            const Candidate c = heap.top();
            heap.pop();
            Symbol &left = symbols[c.left];
            if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;  // stale
            const int32_t right = left.next;
            left.id = merges_.at(pair_key(c.left_id, c.right_id)).merged;
            left.next = symbols[right].next;
            if (left.next >= 0) symbols[left.next].prev = c.left;
            symbols[right].id = -1;
            consider(left.prev);
            consider(c.left);
        }
        for (int32_t i = count > 0 ? 0 : -1; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
    }

    void encode_text(std::string_view text, bool first_fragment, std::vector<int32_t> &ids) const {
        for (std::size_t i = 0; i < text.size();) {
            const std::size_t n = utf8_sequence_length(text, i);
            if (n == 0)
                throw TokenizerError("the text to encode is not valid UTF-8 at byte " + std::to_string(i) +
                                     " (" + config_.source + " tokenizes Unicode text)");
            i += n;
        }
        for (const std::string &piece : pre_tokenize(normalize(text), first_fragment)) bpe(piece, ids);
    }

    std::string run_decoder(std::vector<std::string> tokens, bool first_group) const {
        for (const DecoderStep &d : config_.decoder) {
            switch (d.kind) {
            case DecoderStep::ByteLevel: {
                std::string joined;
                for (const std::string &t : tokens) joined += t;
                std::string bytes;
                for (const std::string_view ch : utf8_chars(joined))
                    if (!byte_level().decode(ch, bytes)) bytes.append(ch);  // not a byte-level character: as is
                tokens.assign(1, std::move(bytes));
                break;
            }
            case DecoderStep::Replace:
                for (std::string &t : tokens) t = replace_all(t, d.a, d.b);
                break;
            case DecoderStep::ByteFallback:
                for (std::string &t : tokens)
                    if (const int b = parse_byte_token(t); b >= 0) t.assign(1, static_cast<char>(b));
                break;
            case DecoderStep::Fuse: {
                std::string joined;
                for (const std::string &t : tokens) joined += t;
                tokens.assign(1, std::move(joined));
                break;
            }
            case DecoderStep::Strip:
                if (!first_group) break;  // strips the prefix space the normalizer added at the start
                for (std::string &t : tokens) {
                    int k = 0;
                    while (k < d.start && t.compare(0, d.a.size(), d.a) == 0 && !t.empty()) t.erase(0, d.a.size()), ++k;
                    k = 0;
                    while (k < d.stop && t.size() >= d.a.size() && t.compare(t.size() - d.a.size(), d.a.size(), d.a) == 0)
                        t.erase(t.size() - d.a.size()), ++k;
                }
                break;
            case DecoderStep::Metaspace:
                for (std::size_t k = 0; k < tokens.size(); ++k) {
                    tokens[k] = replace_all(tokens[k], d.a, " ");
                    if (k == 0 && first_group && d.strip_first && !tokens[k].empty() && tokens[k][0] == ' ')
                        tokens[k].erase(0, 1);
                }
                break;
            }
        }
        std::string out;
        for (const std::string &t : tokens) out += t;
        return out;
    }

    BpeConfig config_;
    std::unordered_map<std::string, int32_t> token_ids_;
    std::unordered_map<uint64_t, Merge> merges_;
    std::vector<int32_t> added_index_;  // per id: index into config_.added, or -1
    AddedTokenMatcher added_;
    int32_t byte_ids_[256] = {};
    std::vector<CompiledNormalizer> normalizer_;
    std::vector<CompiledPreTokenizer> pre_tokenizer_;
    bool byte_level_ = false;
    std::vector<int32_t> eos_ids_;
};

}  // namespace

std::string gpt2_pre_tokenizer_pattern() { return gpt2_pattern; }

std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeConfig config) {
    return std::make_unique<BpeTokenizer>(std::move(config));
}

}  // namespace tinyfin::llm::detail
