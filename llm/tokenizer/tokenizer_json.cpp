#include "tokenizer_json.hpp"

#include <nlohmann/json.hpp>

#include <limits>

#include "bpe.hpp"
#include "utf8.hpp"

namespace tinyfin::llm::detail {

namespace {

using Json = nlohmann::json;

// Typed reads of untrusted JSON: each failure names the file and the field.
class Reader {
public:
    explicit Reader(const std::string &source) : source_(source) {}

    [[noreturn]] void fail(const std::string &field, const std::string &what) const {
        throw TokenizerError(source_ + ": " + field + " " + what);
    }
    const Json *find(const Json &object, const char *key) const {
        if (!object.is_object()) return nullptr;
        const auto it = object.find(key);
        return it == object.end() || it->is_null() ? nullptr : &*it;
    }
    std::string string(const Json &value, const std::string &field) const {
        if (!value.is_string()) fail(field, std::string("must be a string, not ") + value.type_name());
        return value.get<std::string>();
    }
    std::string string_or(const Json &object, const char *key, const std::string &field, std::string fallback) const {
        const Json *v = find(object, key);
        return v ? string(*v, field + "." + key) : fallback;
    }
    bool boolean_or(const Json &object, const char *key, const std::string &field, bool fallback) const {
        const Json *v = find(object, key);
        if (!v) return fallback;
        if (!v->is_boolean()) fail(field + "." + key, std::string("must be true or false, not ") + v->type_name());
        return v->get<bool>();
    }
    int64_t integer(const Json &value, const std::string &field, int64_t lo, int64_t hi) const {
        if (!value.is_number_integer()) fail(field, std::string("must be an integer, not ") + value.type_name());
        const bool is_unsigned = value.is_number_unsigned();
        if (is_unsigned && value.get<uint64_t>() > static_cast<uint64_t>(hi))
            fail(field, "is " + std::to_string(value.get<uint64_t>()) + ", outside " + std::to_string(lo) + ".." +
                            std::to_string(hi));
        const int64_t v = is_unsigned ? static_cast<int64_t>(value.get<uint64_t>()) : value.get<int64_t>();
        if (v < lo || v > hi)
            fail(field, "is " + std::to_string(v) + ", outside " + std::to_string(lo) + ".." + std::to_string(hi));
        return v;
    }
    const Json &array(const Json &value, const std::string &field) const {
        if (!value.is_array()) fail(field, std::string("must be an array, not ") + value.type_name());
        return value;
    }
    const Json &object(const Json &value, const std::string &field) const {
        if (!value.is_object()) fail(field, std::string("must be an object, not ") + value.type_name());
        return value;
    }
    std::string type_of(const Json &value, const std::string &field) const {
        object(value, field);
        const Json *t = find(value, "type");
        if (!t) fail(field, "has no \"type\"");
        return string(*t, field + ".type");
    }

private:
    const std::string &source_;
};

Json parse(std::string_view text, const std::string &source) {
    check_json_depth(text, 64, source);
    try {
        return Json::parse(text.begin(), text.end());
    } catch (const Json::exception &e) {
        throw TokenizerError(source + ": not valid JSON (" + e.what() + ")");
    }
}

// A Split/Replace pattern: {"Regex": "..."} or {"String": "..."} (a literal, escaped here).
std::string pattern_of(const Reader &r, const Json &step, const std::string &field, bool &is_regex) {
    const Json *p = r.find(step, "pattern");
    if (!p) r.fail(field, "has no \"pattern\"");
    r.object(*p, field + ".pattern");
    if (const Json *regex = r.find(*p, "Regex")) {
        is_regex = true;
        return r.string(*regex, field + ".pattern.Regex");
    }
    if (const Json *literal = r.find(*p, "String")) {
        is_regex = false;
        return r.string(*literal, field + ".pattern.String");
    }
    r.fail(field + ".pattern", "must hold \"Regex\" or \"String\"");
}

std::string escape_regex(std::string_view literal) {
    std::string out;
    for (const char c : literal) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x80 && !std::isalnum(u)) out += '\\';
        out += c;
    }
    return out;
}

void read_normalizer(const Reader &r, const Json &n, const std::string &field, std::vector<NormalizerStep> &out,
                     int depth) {
    if (depth > 8) r.fail(field, "nests Sequences too deeply");
    const std::string type = r.type_of(n, field);
    if (type == "Sequence") {
        const Json *list = r.find(n, "normalizers");
        if (!list) r.fail(field, "has no \"normalizers\"");
        r.array(*list, field + ".normalizers");
        for (std::size_t i = 0; i < list->size(); ++i)
            read_normalizer(r, (*list)[i], field + ".normalizers[" + std::to_string(i) + "]", out, depth + 1);
    } else if (type == "NFC") {
        out.push_back({NormalizerStep::NFC, "", ""});
    } else if (type == "Prepend") {
        out.push_back({NormalizerStep::Prepend, r.string_or(n, "prepend", field, ""), ""});
    } else if (type == "Replace") {
        bool is_regex = false;
        std::string pattern = pattern_of(r, n, field, is_regex);
        const std::string content = r.string_or(n, "content", field, "");
        out.push_back({is_regex ? NormalizerStep::ReplaceRegex : NormalizerStep::Replace, std::move(pattern), content});
    } else {
        r.fail(field,
               "has type \"" + type +
                   "\", a normalizer tinyfin does not implement (it implements NFC, Prepend, Replace, Sequence)");
    }
}

void read_pre_tokenizer(const Reader &r, const Json &p, const std::string &field, std::vector<PreTokenizerStep> &out,
                        int depth) {
    if (depth > 8) r.fail(field, "nests Sequences too deeply");
    const std::string type = r.type_of(p, field);
    PreTokenizerStep step{};
    if (type == "Sequence") {
        const Json *list = r.find(p, "pretokenizers");
        if (!list) r.fail(field, "has no \"pretokenizers\"");
        r.array(*list, field + ".pretokenizers");
        for (std::size_t i = 0; i < list->size(); ++i)
            read_pre_tokenizer(r, (*list)[i], field + ".pretokenizers[" + std::to_string(i) + "]", out, depth + 1);
        return;
    }
    if (type == "Split") {
        step.kind = PreTokenizerStep::Split;
        bool is_regex = false;
        step.pattern = pattern_of(r, p, field, is_regex);
        if (!is_regex) step.pattern = escape_regex(step.pattern);
        if (r.boolean_or(p, "invert", field, false)) r.fail(field + ".invert", "true is not implemented");
        const std::string behavior = r.string_or(p, "behavior", field, "Isolated");
        if (behavior == "Isolated")
            step.behavior = PreTokenizerStep::Isolated;
        else if (behavior == "Removed")
            step.behavior = PreTokenizerStep::Removed;
        else if (behavior == "MergedWithPrevious")
            step.behavior = PreTokenizerStep::MergedWithPrevious;
        else if (behavior == "MergedWithNext")
            step.behavior = PreTokenizerStep::MergedWithNext;
        else
            r.fail(field + ".behavior", "\"" + behavior + "\" is not implemented");
    } else if (type == "ByteLevel") {
        step.kind = PreTokenizerStep::ByteLevel;
        step.add_prefix_space = r.boolean_or(p, "add_prefix_space", field, true);
        if (r.boolean_or(p, "use_regex", field, true)) step.pattern = gpt2_pre_tokenizer_pattern();
    } else if (type == "Digits") {
        step.kind = PreTokenizerStep::Split;
        step.pattern = r.boolean_or(p, "individual_digits", field, false) ? R"(\p{N})" : R"(\p{N}+)";
    } else if (type == "Metaspace") {
        step.kind = PreTokenizerStep::Metaspace;
        step.replacement = r.string_or(p, "replacement", field, "\xE2\x96\x81");
        if (utf8_chars(step.replacement).size() != 1) r.fail(field + ".replacement", "must be one character");
        const bool legacy_prefix = r.boolean_or(p, "add_prefix_space", field, true);
        step.prepend_scheme = r.string_or(p, "prepend_scheme", field, legacy_prefix ? "always" : "never");
        if (step.prepend_scheme != "always" && step.prepend_scheme != "first" && step.prepend_scheme != "never")
            r.fail(field + ".prepend_scheme", "\"" + step.prepend_scheme + "\" is not always, first or never");
        step.split = r.boolean_or(p, "split", field, true);
    } else {
        r.fail(field, "has type \"" + type +
                          "\", a pre-tokenizer tinyfin does not implement (it implements Split, ByteLevel, Digits, "
                          "Metaspace, Sequence)");
    }
    out.push_back(std::move(step));
}

void read_decoder(const Reader &r, const Json &d, const std::string &field, std::vector<DecoderStep> &out, int depth) {
    if (depth > 8) r.fail(field, "nests Sequences too deeply");
    const std::string type = r.type_of(d, field);
    DecoderStep step{};
    if (type == "Sequence") {
        const Json *list = r.find(d, "decoders");
        if (!list) r.fail(field, "has no \"decoders\"");
        r.array(*list, field + ".decoders");
        for (std::size_t i = 0; i < list->size(); ++i)
            read_decoder(r, (*list)[i], field + ".decoders[" + std::to_string(i) + "]", out, depth + 1);
        return;
    }
    if (type == "ByteLevel") {
        step.kind = DecoderStep::ByteLevel;
    } else if (type == "ByteFallback") {
        step.kind = DecoderStep::ByteFallback;
    } else if (type == "Fuse") {
        step.kind = DecoderStep::Fuse;
    } else if (type == "Replace") {
        step.kind = DecoderStep::Replace;
        bool is_regex = false;
        step.a = pattern_of(r, d, field, is_regex);
        if (is_regex) r.fail(field + ".pattern", "a Regex pattern in a decoder is not implemented (String is)");
        step.b = r.string_or(d, "content", field, "");
    } else if (type == "Strip") {
        step.kind = DecoderStep::Strip;
        step.a = r.string_or(d, "content", field, " ");
        if (step.a.empty()) r.fail(field + ".content", "must not be empty");
        const Json *start = r.find(d, "start");
        const Json *stop = r.find(d, "stop");
        step.start = start ? static_cast<int>(r.integer(*start, field + ".start", 0, 1 << 20)) : 0;
        step.stop = stop ? static_cast<int>(r.integer(*stop, field + ".stop", 0, 1 << 20)) : 0;
    } else if (type == "Metaspace") {
        step.kind = DecoderStep::Metaspace;
        step.a = r.string_or(d, "replacement", field, "\xE2\x96\x81");
        if (step.a.empty()) r.fail(field + ".replacement", "must not be empty");
        const bool legacy_prefix = r.boolean_or(d, "add_prefix_space", field, true);
        step.strip_first = r.string_or(d, "prepend_scheme", field, legacy_prefix ? "always" : "never") != "never";
    } else {
        r.fail(field, "has type \"" + type +
                          "\", a decoder tinyfin does not implement (it implements ByteLevel, ByteFallback, Fuse, "
                          "Replace, Strip, Metaspace, Sequence)");
    }
    out.push_back(std::move(step));
}

// The first special token the post-processor puts before a single sequence ("<|begin_of_text|>").
std::optional<std::string> post_processor_prefix(const Reader &r, const Json &p, int depth) {
    if (depth > 8 || !p.is_object()) return std::nullopt;
    const Json *type = r.find(p, "type");
    if (!type || !type->is_string()) return std::nullopt;
    if (*type == "Sequence") {
        const Json *list = r.find(p, "processors");
        if (!list || !list->is_array()) return std::nullopt;
        for (const Json &q : *list)
            if (auto found = post_processor_prefix(r, q, depth + 1)) return found;
        return std::nullopt;
    }
    if (*type != "TemplateProcessing") return std::nullopt;
    const Json *single = r.find(p, "single");
    if (!single || !single->is_array() || single->empty()) return std::nullopt;
    const Json *special = r.find((*single)[0], "SpecialToken");
    if (!special) return std::nullopt;
    const Json *id = r.find(*special, "id");
    if (!id || !id->is_string()) return std::nullopt;
    return id->get<std::string>();
}

// "bos_token": "<s>" or {"content": "<s>", ...}
std::optional<std::string> token_name(const Reader &r, const Json &config, const char *key) {
    const Json *v = r.find(config, key);
    if (!v) return std::nullopt;
    if (v->is_object()) {
        const Json *content = r.find(*v, "content");
        if (!content) r.fail(key, "has no \"content\"");
        return r.string(*content, std::string(key) + ".content");
    }
    return r.string(*v, key);
}

}  // namespace

void check_json_depth(std::string_view text, int limit, const std::string &source) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"')
            in_string = true;
        else if (c == '[' || c == '{') {
            if (++depth > limit)
                throw TokenizerError(source + ": JSON nested deeper than " + std::to_string(limit) +
                                     " levels; not a tokenizer file");
        } else if (c == ']' || c == '}')
            --depth;
    }
}

TokenizerConfig parse_tokenizer_config(std::string_view config_json, std::string_view generation_json,
                                       const std::string &source) {
    TokenizerConfig out;
    if (!config_json.empty()) {
        const std::string name = source + " (tokenizer_config.json)";
        const Reader r(name);
        const Json config = parse(config_json, name);
        r.object(config, "the top level");
        if (const Json *v = r.find(config, "add_bos_token"))
            out.add_bos = r.boolean_or(config, "add_bos_token", "", false), (void)v;
        if (const Json *v = r.find(config, "add_eos_token"))
            out.add_eos = r.boolean_or(config, "add_eos_token", "", false), (void)v;
        out.bos_token = token_name(r, config, "bos_token");
        out.eos_token = token_name(r, config, "eos_token");
        out.pad_token = token_name(r, config, "pad_token");
        if (const Json *t = r.find(config, "chat_template")) {
            if (t->is_string()) {
                out.chat_template = t->get<std::string>();
            } else {
                // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
                r.array(*t, "chat_template");
                for (std::size_t i = 0; i < t->size(); ++i) {
                    const std::string field = "chat_template[" + std::to_string(i) + "]";
                    const Json &entry = r.object((*t)[i], field);
                    const std::string name_of = r.string_or(entry, "name", field, "");
                    if (out.chat_template.empty() || name_of == "default")
                        out.chat_template = r.string_or(entry, "template", field, "");
                }
            }
        }
    }
    if (!generation_json.empty()) {
        const std::string name = source + " (generation_config.json)";
        const Reader r(name);
        const Json generation = parse(generation_json, name);
        r.object(generation, "the top level");
        if (const Json *eos = r.find(generation, "eos_token_id")) {
            if (eos->is_array()) {
                for (std::size_t i = 0; i < eos->size() && i < 64; ++i)
                    out.generation_eos_ids.push_back(static_cast<int32_t>(
                        r.integer((*eos)[i], "eos_token_id[" + std::to_string(i) + "]", 0, INT32_MAX)));
            } else {
                out.generation_eos_ids.push_back(static_cast<int32_t>(r.integer(*eos, "eos_token_id", 0, INT32_MAX)));
            }
        }
    }
    return out;
}

std::unique_ptr<Tokenizer> tokenizer_from_json_text(std::string_view tokenizer_json, std::string_view config_json,
                                                    std::string_view generation_json, const std::string &source) {
    return make_bpe_tokenizer(json_tokenizer_from_text(tokenizer_json, config_json, generation_json, source).config);
}

JsonTokenizer json_tokenizer_from_text(std::string_view tokenizer_json, std::string_view config_json,
                                       std::string_view generation_json, const std::string &source) {
    const Reader r(source);
    const Json root = parse(tokenizer_json, source);
    try {
        r.object(root, "the top level");
        JsonTokenizer out;
        BpeConfig &c = out.config;
        c.source = source;
        const Json *model = r.find(root, "model");
        if (!model) r.fail("the top level", "has no \"model\"");
        r.object(*model, "model");
        const std::string type = r.string_or(*model, "type", "model", "BPE");
        if (type != "BPE")
            r.fail("model.type", "is \"" + type +
                                     "\": tinyfin reads BPE tokenizer.json models (for SentencePiece "
                                     "Unigram models use tokenizer.model)");
        if (!r.string_or(*model, "continuing_subword_prefix", "model", "").empty() ||
            !r.string_or(*model, "end_of_word_suffix", "model", "").empty())
            r.fail("model", "uses continuing_subword_prefix or end_of_word_suffix, which tinyfin does not implement");

        // The vocabulary: {"token": id}; ids may leave gaps but must stay within the entries present,
        // so a file cannot make the table larger than itself.
        const Json *vocab = r.find(*model, "vocab");
        if (!vocab) r.fail("model", "has no \"vocab\"");
        r.object(*vocab, "model.vocab");
        const Json *added = r.find(root, "added_tokens");
        if (added) r.array(*added, "added_tokens");
        const std::size_t limit = vocab->size() + (added ? added->size() : 0);
        if (limit > static_cast<std::size_t>(INT32_MAX)) r.fail("model.vocab", "is too large");
        std::vector<std::pair<std::string, int32_t>> entries;
        entries.reserve(vocab->size());
        int64_t max_id = -1;
        for (const auto &[token, id_json] : vocab->items()) {
            const int64_t id =
                r.integer(id_json, "model.vocab[" + quote_for_message(token) + "]", 0, static_cast<int64_t>(limit) - 1);
            entries.emplace_back(token, static_cast<int32_t>(id));
            max_id = std::max(max_id, id);
        }
        std::vector<AddedToken> added_tokens;
        if (added) {
            for (std::size_t i = 0; i < added->size(); ++i) {
                const std::string field = "added_tokens[" + std::to_string(i) + "]";
                const Json &a = r.object((*added)[i], field);
                AddedToken t;
                const Json *id = r.find(a, "id");
                if (!id) r.fail(field, "has no \"id\"");
                t.id = static_cast<int32_t>(r.integer(*id, field + ".id", 0, static_cast<int64_t>(limit) - 1));
                const Json *content = r.find(a, "content");
                if (!content) r.fail(field, "has no \"content\"");
                t.content = r.string(*content, field + ".content");
                t.special = r.boolean_or(a, "special", field, false);
                t.lstrip = r.boolean_or(a, "lstrip", field, false);
                t.rstrip = r.boolean_or(a, "rstrip", field, false);
                max_id = std::max<int64_t>(max_id, t.id);
                added_tokens.push_back(std::move(t));
            }
        }
        c.tokens.assign(static_cast<std::size_t>(max_id + 1), std::string());
        for (auto &[token, id] : entries) {
            if (!c.tokens[id].empty() && c.tokens[id] != token)
                r.fail("model.vocab", "gives id " + std::to_string(id) + " to both " + quote_for_message(c.tokens[id]) +
                                          " and " + quote_for_message(token));
            if (token.empty()) r.fail("model.vocab", "has an empty token (id " + std::to_string(id) + ")");
            c.tokens[id] = std::move(token);
        }
        c.added = std::move(added_tokens);

        const Json *merges = r.find(*model, "merges");
        if (merges) {
            r.array(*merges, "model.merges");
            c.merges.reserve(merges->size());
            for (std::size_t i = 0; i < merges->size(); ++i) {
                const std::string field = "model.merges[" + std::to_string(i) + "]";
                const Json &m = (*merges)[i];
                if (m.is_string()) {
                    // "a b": the tokens themselves never hold a plain space in these vocabularies.
                    const std::string s = m.get<std::string>();
                    const std::size_t space = s.find(' ', 1);
                    if (space == std::string::npos || space + 1 >= s.size())
                        r.fail(field, "is " + quote_for_message(s) + ", not two tokens separated by a space");
                    c.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
                } else if (m.is_array() && m.size() == 2) {
                    c.merges.emplace_back(r.string(m[0], field + "[0]"), r.string(m[1], field + "[1]"));
                } else {
                    r.fail(field, "must be \"a b\" or [\"a\", \"b\"]");
                }
            }
        }
        c.byte_fallback = r.boolean_or(*model, "byte_fallback", "model", false);
        c.ignore_merges = r.boolean_or(*model, "ignore_merges", "model", false);
        c.fuse_unk = r.boolean_or(*model, "fuse_unk", "model", false);
        const auto id_of = [&](const std::string &token) -> int32_t {
            for (const AddedToken &t : c.added)
                if (t.content == token) return t.id;
            for (std::size_t id = 0; id < c.tokens.size(); ++id)
                if (c.tokens[id] == token) return static_cast<int32_t>(id);
            return -1;
        };
        if (const Json *unk = r.find(*model, "unk_token")) {
            const std::string name = r.string(*unk, "model.unk_token");
            c.unk_id = id_of(name);
            if (c.unk_id < 0) r.fail("model.unk_token", quote_for_message(name) + " is not in the vocabulary");
        }

        if (const Json *n = r.find(root, "normalizer")) read_normalizer(r, *n, "normalizer", c.normalizer, 0);
        if (const Json *p = r.find(root, "pre_tokenizer"))
            read_pre_tokenizer(r, *p, "pre_tokenizer", c.pre_tokenizer, 0);
        if (const Json *d = r.find(root, "decoder")) read_decoder(r, *d, "decoder", c.decoder, 0);

        // BOS/EOS: tokenizer_config.json when present, else what the post-processor prepends.
        const TokenizerConfig config = parse_tokenizer_config(config_json, generation_json, source);
        c.chat_template = config.chat_template;
        const std::optional<std::string> prefix =
            r.find(root, "post_processor") ? post_processor_prefix(r, root["post_processor"], 0) : std::nullopt;
        const std::optional<std::string> bos = config.bos_token ? config.bos_token : prefix;
        if (bos) {
            c.bos_id = id_of(*bos);
            if (c.bos_id < 0) r.fail("bos_token", quote_for_message(*bos) + " is not in the vocabulary");
        }
        c.add_bos = config.add_bos ? *config.add_bos : (prefix.has_value() && prefix == bos);
        if (config.eos_token) {
            c.eos_id = id_of(*config.eos_token);
            if (c.eos_id < 0) r.fail("eos_token", quote_for_message(*config.eos_token) + " is not in the vocabulary");
        }
        c.add_eos = config.add_eos.value_or(false);
        for (const int32_t id : config.generation_eos_ids) c.extra_eos_ids.push_back(id);
        for (const char *name : end_of_turn_tokens)
            for (const AddedToken &t : c.added)
                if (t.special && t.content == name) c.extra_eos_ids.push_back(t.id);
        for (int32_t &id : c.extra_eos_ids)
            if (id >= static_cast<int32_t>(c.tokens.size())) id = -1;  // a generation_config id beyond the vocabulary
        std::erase(c.extra_eos_ids, -1);
        if (c.eos_id < 0 && !c.extra_eos_ids.empty()) c.eos_id = c.extra_eos_ids.front();
        // Encoding never uses it: a pad_token outside the vocabulary is no error, only no id.
        if (config.pad_token) out.pad_id = id_of(*config.pad_token);
        return out;
    } catch (const Json::exception &e) {
        throw TokenizerError(source + ": unexpected JSON content (" + e.what() + ")");
    }
}

}  // namespace tinyfin::llm::detail
