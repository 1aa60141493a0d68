// The file-reading factories: Tokenizer::from_tokenizer_json, from_sentencepiece and
// from_directory, and tinyfin-quantize's tokenizer.json -> GGUF vocabulary. Each file is opened as a regular file (never a FIFO or device) and read whole up
// to a size limit, with its companions (tokenizer_config.json, generation_config.json) beside it.
#include <filesystem>

#include "gguf_vocabulary.hpp"
#include "regular_file.hpp"
#include "sentencepiece_model.hpp"
#include "tokenizer_json.hpp"

namespace tinyfin::llm {

namespace {

constexpr std::size_t max_tokenizer_bytes = std::size_t{1} << 30;  // Llama 3's tokenizer.json is 9 MB
constexpr std::size_t max_config_bytes = std::size_t{64} << 20;

std::string read_file(const std::string &path, std::size_t limit, const char *what) {
    std::string bytes, why;
    if (!tf_common::read_regular_file(path, limit, bytes, why))
        throw TokenizerError(std::string("cannot read the ") + what + " " + path + ": " + why);
    return bytes;
}

// A companion file beside `path`, or "" when there is none.
std::string read_companion(const std::string &path, const char *name) {
    const std::filesystem::path companion = std::filesystem::path(path).parent_path() / name;
    std::error_code ec;
    if (!std::filesystem::exists(companion, ec)) return {};
    return read_file(companion.string(), max_config_bytes, name);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_tokenizer_json(const std::string &json_path) {
    const std::string json = read_file(json_path, max_tokenizer_bytes, "tokenizer file");
    return detail::tokenizer_from_json_text(json, read_companion(json_path, "tokenizer_config.json"),
                                            read_companion(json_path, "generation_config.json"), json_path);
}

Vocabulary detail::gpt2_vocabulary_from_tokenizer_json(const std::string &json_path, int64_t vocab_size) {
    const std::string json = read_file(json_path, max_tokenizer_bytes, "tokenizer file");
    return gpt2_vocabulary_from_json(json_tokenizer_from_text(json, read_companion(json_path, "tokenizer_config.json"),
                                                              read_companion(json_path, "generation_config.json"),
                                                              json_path),
                                     vocab_size);
}

std::unique_ptr<Tokenizer> Tokenizer::from_sentencepiece(const std::string &model_path) {
    const std::string model = read_file(model_path, max_tokenizer_bytes, "SentencePiece model");
    const detail::TokenizerConfig config =
        detail::parse_tokenizer_config(read_companion(model_path, "tokenizer_config.json"),
                                       read_companion(model_path, "generation_config.json"), model_path);
    return detail::sentencepiece_from_bytes(model, config, model_path);
}

std::unique_ptr<Tokenizer> Tokenizer::from_directory(const std::string &dir) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
        throw TokenizerError("tokenizer directory " + dir + " is not a directory");
    const std::filesystem::path base(dir);
    if (std::filesystem::exists(base / "tokenizer.json", ec))
        return from_tokenizer_json((base / "tokenizer.json").string());
    if (std::filesystem::exists(base / "tokenizer.model", ec))
        return from_sentencepiece((base / "tokenizer.model").string());
    throw TokenizerError("no tokenizer in " + dir +
                         ": expected tokenizer.json or tokenizer.model (a GGUF file carries "
                         "its own vocabulary: use Tokenizer::from_vocabulary)");
}

}  // namespace tinyfin::llm
