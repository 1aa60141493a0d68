// Tokenizer::from_sentencepiece: a tokenizer.model (Llama 2, TinyLlama, Mistral) through Debian's
// libsentencepiece, which does normalization and encoding; tinyfin adds the BOS/EOS policy of
// tokenizer_config.json, special tokens in the prompt (parse_special) and byte-exact decoding.
#include <sentencepiece_processor.h>

#include <algorithm>

#include "added_tokens.hpp"
#include "bpe.hpp"
#include "regular_file.hpp"
#include "sentencepiece_model.hpp"
#include "tokenizer_json.hpp"
#include "utf8.hpp"

namespace tinyfin::llm::detail {

namespace {

constexpr std::string_view space_marker = "\xE2\x96\x81";

class SentencePieceTokenizer final : public Tokenizer {
public:
    SentencePieceTokenizer(std::string_view model_bytes, const TokenizerConfig &config, const std::string &source)
        : source_(source) {
        const auto status = sp_.LoadFromSerializedProto(model_bytes);
        if (!status.ok())
            throw TokenizerError(source + ": not a SentencePiece model libsentencepiece can load (" + status.ToString() +
                                 ")");
        const int n = sp_.GetPieceSize();
        if (n <= 0) throw TokenizerError(source + ": the SentencePiece model has no pieces");
        // Whether the model's normalizer adds the dummy "▁" before the text (decode removes it).
        std::vector<std::string> pieces;
        if (sp_.Encode("x", &pieces).ok() && !pieces.empty())
            dummy_prefix_ = pieces.front().compare(0, space_marker.size(), space_marker) == 0;
        bos_id_ = sp_.bos_id() < n ? sp_.bos_id() : -1;
        eos_id_ = sp_.eos_id() < n ? sp_.eos_id() : -1;
        const auto id_of = [&](const std::string &piece) {
            const int id = sp_.PieceToId(piece);
            return id >= 0 && sp_.IdToPiece(id) == piece ? id : -1;
        };
        if (config.bos_token) bos_id_ = id_of(*config.bos_token);
        if (config.eos_token) eos_id_ = id_of(*config.eos_token);
        add_bos_ = config.add_bos.value_or(true);  // every SentencePiece LLM tokenizer starts with <s>
        add_eos_ = config.add_eos.value_or(false);
        chat_template_ = config.chat_template;
        std::vector<AddedToken> controls;
        for (int id = 0; id < n; ++id)
            if (sp_.IsControl(id) && !sp_.IdToPiece(id).empty()) controls.push_back({id, sp_.IdToPiece(id), true});
        if (eos_id_ >= 0) eos_ids_.push_back(eos_id_);
        for (const char *name : end_of_turn_tokens) {
            const int id = id_of(name);
            if (id >= 0 && sp_.IsControl(id) && std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end())
                eos_ids_.push_back(id);
        }
        for (const int id : config.generation_eos_ids)
            if (id < n && std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);
        controls_ = AddedTokenMatcher(std::move(controls));
    }

    std::vector<int32_t> encode(std::string_view text, const EncodeOptions &options) const override {
        std::vector<int32_t> ids;
        if (options.add_bos && add_bos_ && bos_id_ >= 0) ids.push_back(bos_id_);
        bool first = true;
        for (const Fragment &f : controls_.split(text, options.parse_special)) {
            if (f.id >= 0) {
                if (!(first && f.id == bos_id_ && ids.size() == 1 && ids[0] == bos_id_)) ids.push_back(f.id);
            } else {
                std::vector<int> part;
                const auto status = sp_.Encode(f.text, &part);
                if (!status.ok()) throw TokenizerError(source_ + ": libsentencepiece could not encode: " + status.ToString());
                ids.insert(ids.end(), part.begin(), part.end());
            }
            first = false;
        }
        if (options.add_eos && add_eos_ && eos_id_ >= 0) ids.push_back(eos_id_);
        return ids;
    }

    std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
        std::string out;
        bool at_start = true;
        for (const int32_t id : ids) {
            check_id(id);
            const bool control = sp_.IsControl(id);
            if (control && skip_special) continue;
            std::string piece = token_to_piece(id);
            if (at_start && dummy_prefix_ && !control && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
            if (!control) at_start = false;
            out += piece;
        }
        return out;
    }

    std::string token_to_piece(int32_t id) const override {
        check_id(id);
        const std::string &piece = sp_.IdToPiece(id);
        if (sp_.IsByte(id)) {
            if (const int b = parse_byte_token(piece); b >= 0) return std::string(1, static_cast<char>(b));
        }
        if (sp_.IsUnknown(id)) return " \xE2\x81\x87 ";
        if (sp_.IsControl(id)) return piece;
        std::string out;
        for (std::size_t i = 0; i < piece.size();) {
            if (piece.compare(i, space_marker.size(), space_marker) == 0) {
                out += ' ';
                i += space_marker.size();
            } else {
                out += piece[i++];
            }
        }
        return out;
    }

    int32_t vocab_size() const override { return sp_.GetPieceSize(); }
    int32_t bos_id() const override { return bos_id_; }
    int32_t eos_id() const override { return eos_id_; }
    std::vector<int32_t> eos_ids() const override { return eos_ids_; }
    std::string chat_template() const override { return chat_template_; }
    std::optional<int32_t> token_to_id(std::string_view token) const override {
        const int id = sp_.PieceToId(token);
        if (id < 0 || sp_.IdToPiece(id) != token) return std::nullopt;
        return id;
    }
    std::string id_to_token(int32_t id) const override {
        check_id(id);
        return sp_.IdToPiece(id);
    }
    bool is_special(int32_t id) const override { return id >= 0 && id < vocab_size() && sp_.IsControl(id); }
    bool adds_bos() const override { return add_bos_ && bos_id_ >= 0; }
    bool adds_eos() const override { return add_eos_ && eos_id_ >= 0; }

private:
    void check_id(int32_t id) const {
        if (id < 0 || id >= vocab_size())
            throw TokenizerError("token id " + std::to_string(id) + " is out of range: the vocabulary of " + source_ +
                                 " has " + std::to_string(vocab_size()) + " tokens");
    }

    std::string source_;
    sentencepiece::SentencePieceProcessor sp_;
    bool dummy_prefix_ = true;
    int32_t bos_id_ = -1, eos_id_ = -1;
    bool add_bos_ = true, add_eos_ = false;
    std::string chat_template_;
    std::vector<int32_t> eos_ids_;
    AddedTokenMatcher controls_;
};

}  // namespace

std::unique_ptr<Tokenizer> sentencepiece_from_bytes(std::string_view model_bytes, const TokenizerConfig &config,
                                                    const std::string &source) {
    return std::make_unique<SentencePieceTokenizer>(model_bytes, config, source);
}

}  // namespace tinyfin::llm::detail
