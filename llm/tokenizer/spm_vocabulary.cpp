// SentencePiece-style ("llama") tokenizer from a GGUF vocabulary: tokens, scores and types. The
// text gets a leading space, spaces become U+2581, and adjacent pieces merge by the score of the
// merged piece (highest first, leftmost on ties) as long as the merge is a vocabulary entry;
// characters outside the vocabulary become <0xXX> byte tokens (or the unknown token). This is
// the algorithm of SentencePiece's BPE model, so the ids equal libsentencepiece's on the same
// vocabulary (tests/llm/tokenizer/test_tokenizer_sentencepiece.py checks it).
#include "spm_vocabulary.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <unordered_map>

#include "added_tokens.hpp"
#include "bpe.hpp"
#include "utf8.hpp"

namespace tinyfin::llm::detail {

namespace {

constexpr const char *space_marker = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

enum TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class SpmVocabularyTokenizer final : public Tokenizer {
public:
    explicit SpmVocabularyTokenizer(const Vocabulary &v) : v_(v) { build(); }

    std::vector<int32_t> encode(std::string_view text, const EncodeOptions &options) const override {
        std::vector<int32_t> ids;
        if (options.add_bos && v_.add_bos && v_.bos_id >= 0) ids.push_back(v_.bos_id);
        bool space_prefix = v_.add_space_prefix;  // at the start, and after a control token
        bool first = true;
        for (const Fragment &f : added_.split(text, options.parse_special)) {
            if (f.id >= 0) {
                if (!(first && f.id == v_.bos_id && ids.size() == 1 && ids[0] == v_.bos_id)) ids.push_back(f.id);
                space_prefix = v_.add_space_prefix && type_of(f.id) == Control;
            } else {
                encode_text(f.text, space_prefix, ids);
                space_prefix = false;
            }
            first = false;
        }
        if (options.add_eos && v_.add_eos && v_.eos_id >= 0) ids.push_back(v_.eos_id);
        return ids;
    }

    std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
        std::string out;
        bool at_start = true;
        for (const int32_t id : ids) {
            check_id(id);
            if (is_special(id) && skip_special) continue;
            std::string piece = token_to_piece(id);
            // The space the encoder added before the text is not part of it.
            if (at_start && v_.add_space_prefix && type_of(id) != Control && !piece.empty() && piece[0] == ' ')
                piece.erase(0, 1);
            if (type_of(id) != Control) at_start = false;
            out += piece;
        }
        return out;
    }

    std::string token_to_piece(int32_t id) const override {
        check_id(id);
        const std::string &t = v_.tokens[id];
        switch (type_of(id)) {
        case Byte:
            if (const int b = parse_byte_token(t); b >= 0) return std::string(1, static_cast<char>(b));
            return t;
        case Control: return t;
        case Unknown: return " \xE2\x81\x87 ";  // " ⁇ ", as libsentencepiece decodes it
        default: {
            std::string out;
            std::size_t i = 0;
            for (;;) {
                const std::size_t k = t.find(space_marker, i);
                if (k == std::string::npos) break;
                out.append(t, i, k - i);
                out += ' ';
                i = k + 3;
            }
            out.append(t, i);
            return out;
        }
        }
    }

    int32_t vocab_size() const override { return static_cast<int32_t>(v_.tokens.size()); }
    int32_t bos_id() const override { return v_.bos_id; }
    int32_t eos_id() const override { return v_.eos_id; }
    std::vector<int32_t> eos_ids() const override { return eos_ids_; }
    std::string chat_template() const override { return v_.chat_template; }
    std::optional<int32_t> token_to_id(std::string_view token) const override {
        const auto it = ids_.find(std::string(token));
        if (it == ids_.end()) return std::nullopt;
        return it->second;
    }
    std::string id_to_token(int32_t id) const override {
        check_id(id);
        return v_.tokens[id];
    }
    bool is_special(int32_t id) const override {
        return id >= 0 && id < vocab_size() && (type_of(id) == Control || id == v_.bos_id || id == v_.eos_id);
    }
    bool adds_bos() const override { return v_.add_bos && v_.bos_id >= 0; }
    bool adds_eos() const override { return v_.add_eos && v_.eos_id >= 0; }

private:
    [[noreturn]] void fail(const std::string &what) const {
        throw TokenizerError("GGUF vocabulary (tokenizer.ggml.model \"llama\"): " + what);
    }
    void check_id(int32_t id) const {
        if (id < 0 || id >= vocab_size())
            throw TokenizerError("token id " + std::to_string(id) + " is out of range: the vocabulary has " +
                                 std::to_string(vocab_size()) + " tokens");
    }
    int32_t type_of(int32_t id) const { return v_.token_types.empty() ? Normal : v_.token_types[id]; }

    void build() {
        std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
        const std::size_t n = v_.tokens.size();
        if (n == 0) fail("tokenizer.ggml.tokens is empty");
        if (n > static_cast<std::size_t>(INT32_MAX)) fail("tokenizer.ggml.tokens has more than 2^31 entries");
        if (v_.scores.size() != n)
            fail("tokenizer.ggml.scores has " + std::to_string(v_.scores.size()) + " entries for " + std::to_string(n) +
                 " tokens");
        if (!v_.token_types.empty() && v_.token_types.size() != n)
            fail("tokenizer.ggml.token_type has " + std::to_string(v_.token_types.size()) + " entries for " +
                 std::to_string(n) + " tokens");
        for (const auto &[id, name] : {std::pair{v_.bos_id, "bos"}, {v_.eos_id, "eos"}, {v_.pad_id, "padding"},
                                      {v_.unk_id, "unknown"}, {v_.eot_id, "eot"}})
            if (id < -1 || id >= static_cast<int32_t>(n))
                fail(std::string("tokenizer.ggml.") + name + "_token_id is " + std::to_string(id) +
                     ", outside the vocabulary of " + std::to_string(n) + " tokens");
        std::vector<AddedToken> added;
        ids_.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            const int32_t id = static_cast<int32_t>(i);
            const std::string &t = v_.tokens[i];
            const int32_t type = type_of(id);
            if (type < Normal || type > Byte)
                fail("token " + std::to_string(i) + " has type " + std::to_string(type) + " (expected 1..6)");
            if (!std::isfinite(v_.scores[i])) fail("token " + std::to_string(i) + " has a score that is not finite");
            if (!is_valid_utf8(t)) fail("token " + std::to_string(i) + " is not valid UTF-8: " + quote_for_message(t));
            ids_.try_emplace(t, id);
            if (type == Byte) {
                const int b = parse_byte_token(t);
                if (b < 0) fail("token " + std::to_string(i) + " has the byte type but is " + quote_for_message(t));
                if (byte_ids_[b] < 0) byte_ids_[b] = id;
            }
            // libsentencepiece merges into normal, user-defined and unused pieces only.
            if ((type == Normal || type == UserDefined || type == Unused) && !t.empty()) pieces_.try_emplace(t, id);
            if ((type == Control || type == UserDefined) && !t.empty())
                added.push_back({id, t, type == Control, false, false});
        }
        added_ = AddedTokenMatcher(std::move(added));
        if (v_.eos_id >= 0) eos_ids_.push_back(v_.eos_id);
        if (v_.eot_id >= 0 && v_.eot_id != v_.eos_id) eos_ids_.push_back(v_.eot_id);
    }

    void encode_text(std::string_view text, bool space_prefix, std::vector<int32_t> &ids) const {
        if (text.empty()) return;
        std::string s;
        s.reserve(text.size() + 3);
        if (space_prefix) s += space_marker;
        for (const char c : text) {
            if (c == ' ') s += space_marker;
            else s += c;
        }
        struct Symbol {
            std::size_t begin, size;
            int32_t prev, next;
        };
        std::vector<Symbol> symbols;
        for (std::size_t i = 0; i < s.size();) {
            std::size_t len = utf8_sequence_length(s, i);
            if (len == 0) len = 1;
            const int32_t k = static_cast<int32_t>(symbols.size());
            symbols.push_back({i, len, k - 1, -1});
            if (k > 0) symbols[k - 1].next = k;
            i += len;
        }
        struct Pair {
            float score;
            int32_t left;
            std::size_t size;  // of the merged text, to recognise a stale pair
            bool operator<(const Pair &o) const { return score != o.score ? score < o.score : left > o.left; }
        };
        std::priority_queue<Pair> agenda;
        std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> unused_parts;
        const std::string_view view(s);
        const auto consider = [&](int32_t left) {
            if (left < 0 || symbols[left].next < 0) return;
            const Symbol &a = symbols[left], &b = symbols[a.next];
            const std::string_view merged = view.substr(a.begin, a.size + b.size);
            const auto it = pieces_.find(std::string(merged));
            if (it == pieces_.end()) return;
            agenda.push({v_.scores[it->second], left, merged.size()});
            if (type_of(it->second) == Unused)
                unused_parts[merged] = {view.substr(a.begin, a.size), view.substr(b.begin, b.size)};
        };
        for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
        while (!agenda.empty()) {
            const Pair p = agenda.top();
            agenda.pop();
            Symbol &a = symbols[p.left];
            if (a.size == 0 || a.next < 0 || a.size + symbols[a.next].size != p.size) continue;  // stale
            Symbol &b = symbols[a.next];
            a.size += b.size;
            b.size = 0;
            a.next = b.next;
            if (a.next >= 0) symbols[a.next].prev = p.left;
            consider(a.prev);
            consider(p.left);
        }
        for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next)
            resegment(view.substr(symbols[i].begin, symbols[i].size), unused_parts, ids);
    }

    void resegment(std::string_view piece,
                   const std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> &parts,
                   std::vector<int32_t> &ids) const {
        const auto it = pieces_.find(std::string(piece));
        if (it != pieces_.end() && type_of(it->second) != Unused) {
            ids.push_back(it->second);
            return;
        }
        if (const auto split = parts.find(piece); split != parts.end()) {
            resegment(split->second.first, parts, ids);
            resegment(split->second.second, parts, ids);
            return;
        }
        bool bytes = true;
        for (const char c : piece) bytes = bytes && byte_ids_[static_cast<unsigned char>(c)] >= 0;
        if (bytes) {
            for (const char c : piece) ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
            return;
        }
        if (v_.unk_id < 0)
            fail("the text " + quote_for_message(piece) +
                 " is not in the vocabulary, which has neither byte tokens nor an unknown token");
        ids.push_back(v_.unk_id);
    }

    Vocabulary v_;
    std::unordered_map<std::string, int32_t> ids_;     // every token's spelling
    std::unordered_map<std::string, int32_t> pieces_;  // the pieces merges may produce
    int32_t byte_ids_[256];
    AddedTokenMatcher added_;
    std::vector<int32_t> eos_ids_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm_vocabulary_tokenizer(const Vocabulary &v) {
    return std::make_unique<SpmVocabularyTokenizer>(v);
}

}  // namespace tinyfin::llm::detail
