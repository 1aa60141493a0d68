// Tokenizers of model paths (vocabulary.hpp).
#include <filesystem>

#include <tinyfin/llm/errors.hpp>

#include "vocabulary.hpp"

namespace tinyfin::llm {

namespace {

const GgufValue *array_of(const GgufFile &f, const char *key, GgufType element) {
    const GgufValue *v = f.find_value(key);
    if (!v) return nullptr;
    if (v->type != GgufType::array || v->element_type != element)
        throw FormatError(std::string("FormatError: GGUF '") + f.name() + "': " + key + " must be an array of " +
                          gguf_type_name(element));
    return v;
}

int32_t token_id(const GgufFile &f, const char *key, std::size_t vocab) {
    const GgufValue *v = f.find_value(key);
    if (!v) return -1;
    const int64_t id = v->to_int(key);
    if (id < 0 || static_cast<uint64_t>(id) >= vocab)
        throw FormatError(std::string("FormatError: GGUF '") + f.name() + "': " + key + " = " + std::to_string(id) +
                          " is outside the vocabulary of " + std::to_string(vocab) + " tokens");
    return static_cast<int32_t>(id);
}

}  // namespace

std::optional<Vocabulary> read_gguf_vocabulary(const GgufFile &f) {
    const GgufValue *model = f.find_value("tokenizer.ggml.model");
    if (!model) return std::nullopt;
    Vocabulary v;
    v.model = model->to_string("tokenizer.ggml.model");
    if (const GgufValue *pre = f.find_value("tokenizer.ggml.pre")) v.pre = pre->to_string("tokenizer.ggml.pre");
    const GgufValue *tokens = array_of(f, "tokenizer.ggml.tokens", GgufType::string);
    if (!tokens)
        throw FormatError("FormatError: GGUF '" + f.name() + "' has tokenizer.ggml.model but no tokenizer.ggml.tokens");
    for (const auto &t : tokens->array) v.tokens.push_back(t.s);
    const std::size_t n = v.tokens.size();
    if (const GgufValue *scores = array_of(f, "tokenizer.ggml.scores", GgufType::f32)) {
        if (scores->array.size() != n)
            throw FormatError("FormatError: GGUF '" + f.name() + "': tokenizer.ggml.scores has " +
                              std::to_string(scores->array.size()) + " entries for " + std::to_string(n) + " tokens");
        for (const auto &s : scores->array) v.scores.push_back(static_cast<float>(s.f));
    }
    if (const GgufValue *types = array_of(f, "tokenizer.ggml.token_type", GgufType::i32)) {
        if (types->array.size() != n)
            throw FormatError("FormatError: GGUF '" + f.name() + "': tokenizer.ggml.token_type has " +
                              std::to_string(types->array.size()) + " entries for " + std::to_string(n) + " tokens");
        for (const auto &t : types->array) v.token_types.push_back(static_cast<int32_t>(t.i));
    }
    if (const GgufValue *merges = array_of(f, "tokenizer.ggml.merges", GgufType::string))
        for (const auto &m : merges->array) v.merges.push_back(m.s);
    v.bos_id = token_id(f, "tokenizer.ggml.bos_token_id", n);
    v.eos_id = token_id(f, "tokenizer.ggml.eos_token_id", n);
    v.pad_id = token_id(f, "tokenizer.ggml.padding_token_id", n);
    v.unk_id = token_id(f, "tokenizer.ggml.unknown_token_id", n);
    v.eot_id = token_id(f, "tokenizer.ggml.eot_token_id", n);
    if (const GgufValue *b = f.find_value("tokenizer.ggml.add_bos_token"))
        v.add_bos = b->to_bool("tokenizer.ggml.add_bos_token");
    if (const GgufValue *b = f.find_value("tokenizer.ggml.add_eos_token"))
        v.add_eos = b->to_bool("tokenizer.ggml.add_eos_token");
    if (const GgufValue *b = f.find_value("tokenizer.ggml.add_space_prefix"))
        v.add_space_prefix = b->to_bool("tokenizer.ggml.add_space_prefix");
    if (const GgufValue *t = f.find_value("tokenizer.chat_template"))
        v.chat_template = t->to_string("tokenizer.chat_template");
    return v;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string &path, const GgufFile *gguf) {
    if (gguf) {
        auto v = read_gguf_vocabulary(*gguf);
        return v ? Tokenizer::from_vocabulary(*v) : nullptr;
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(fs::path(path) / "tokenizer.json", ec) && !fs::exists(fs::path(path) / "tokenizer.model", ec))
        return nullptr;
    return Tokenizer::from_directory(path);
}

}  // namespace tinyfin::llm
