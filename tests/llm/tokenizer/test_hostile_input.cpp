// Malformed tokenizer files and vocabularies: each is refused with a TokenizerError that names
// what is wrong, never a crash, a hang or an allocation the file's size does not justify.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <string>
#include <vector>

#include "test_support.hpp"
#include "tinyfin/llm/tokenizer.hpp"

using namespace tinyfin::llm;
using nlohmann::json;
using tokenizer_test::TempDir;

namespace {

// A small valid tokenizer.json: bytes "a", "b", "c", " " and the merge "a b".
json valid() {
    return {{"model",
             {{"type", "BPE"},
              {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"\xC4\xA0", 3}, {"ab", 4}}},
              {"merges", json::array({"a b"})}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"added_tokens", json::array({json{{"id", 5}, {"content", "<|end|>"}, {"special", true}}})}};
}

// Loading `text` as tokenizer.json must fail with a message containing each of `words`.
void refused(const std::string &text, const std::vector<std::string> &words) {
    TempDir dir;
    const std::string path = dir.write("tokenizer.json", text);
    try {
        Tokenizer::from_tokenizer_json(path);
        FAIL("accepted: " << text.substr(0, 200));
    } catch (const TokenizerError &e) {
        for (const std::string &w : words) {
            const std::string message = e.what();
            CAPTURE(message);
            CHECK(std::string(e.what()).find(w) != std::string::npos);
        }
    }
}

json with(json j, const json::json_pointer &where, json value) {
    j[where] = std::move(value);
    return j;
}

}  // namespace

TEST_CASE("tokenizer.json: the valid base case loads") {
    TempDir dir;
    const auto t = Tokenizer::from_tokenizer_json(dir.write("tokenizer.json", valid().dump()));
    CHECK(t->encode("abc ab") == std::vector<int32_t>{4, 2, 3, 4});
    CHECK(t->decode(t->encode("abc ab")) == "abc ab");
}

TEST_CASE("tokenizer.json: malformed JSON and wrong types") {
    refused("", {"not valid JSON"});
    refused("not json at all", {"not valid JSON"});
    refused("{\"model\": ", {"not valid JSON"});
    refused("[1, 2, 3]", {"must be an object"});
    refused(std::string(100000, '['), {"nested deeper"});
    refused(json{{"added_tokens", json::array()}}.dump(), {"no \"model\""});
    refused(with(valid(), "/model/vocab"_json_pointer, json::array({"a"})).dump(), {"model.vocab", "object"});
    refused(with(valid(), "/model/vocab/a"_json_pointer, "zero").dump(), {"model.vocab", "integer"});
    refused(with(valid(), "/model/vocab/a"_json_pointer, 1.5).dump(), {"integer"});
    refused(with(valid(), "/model/merges"_json_pointer, "a b").dump(), {"model.merges", "array"});
    refused(with(valid(), "/model/merges/0"_json_pointer, 7).dump(), {"model.merges[0]"});
    refused(with(valid(), "/model/merges/0"_json_pointer, "ab").dump(), {"not two tokens"});
    refused(with(valid(), "/model/byte_fallback"_json_pointer, "yes").dump(), {"byte_fallback", "true or false"});
    refused(with(valid(), "/added_tokens/0/content"_json_pointer, 5).dump(), {"added_tokens[0].content", "string"});
    refused(with(valid(), "/added_tokens"_json_pointer, json::object()).dump(), {"added_tokens", "array"});
}

TEST_CASE("tokenizer.json: ids out of range and inconsistent vocabularies") {
    // An id far beyond the entries present would make the table larger than the file.
    refused(with(valid(), "/model/vocab/a"_json_pointer, 2000000000).dump(), {"model.vocab", "outside"});
    refused(with(valid(), "/model/vocab/a"_json_pointer, -1).dump(), {"outside"});
    refused(with(valid(), "/model/vocab/a"_json_pointer, 18446744073709551615ull).dump(), {"18446744073709551615, outside"});
    refused(with(valid(), "/added_tokens/0/id"_json_pointer, 1 << 30).dump(), {"added_tokens[0].id", "outside"});
    refused(with(valid(), "/model/vocab/b"_json_pointer, 0).dump(), {"gives id 0 to both"});
    refused(with(valid(), "/model/merges/0"_json_pointer, "a zzz").dump(), {"merge 0", "not in the vocabulary"});
    refused(with(valid(), "/model/merges"_json_pointer, json::array({"a b", "b c"})).dump(),
            {"merge 1", "makes a token that is not in the vocabulary"});
    refused(with(valid(), "/model/unk_token"_json_pointer, "<unk>").dump(), {"unk_token", "not in the vocabulary"});
}

TEST_CASE("tokenizer.json: unsupported parts are named") {
    refused(with(valid(), "/model/type"_json_pointer, "Unigram").dump(), {"Unigram", "tokenizer.model"});
    refused(with(valid(), "/model/type"_json_pointer, "WordPiece").dump(), {"WordPiece"});
    refused(with(valid(), "/normalizer"_json_pointer, {{"type", "NFKD"}}).dump(), {"NFKD", "normalizer"});
    refused(with(valid(), "/normalizer"_json_pointer, {{"type", "Sequence"}, {"normalizers", json::array({json{{"type", "Lowercase"}}})}}).dump(),
            {"normalizer.normalizers[0]", "Lowercase"});
    refused(with(valid(), "/pre_tokenizer"_json_pointer, {{"type", "Whitespace"}}).dump(), {"Whitespace", "pre-tokenizer"});
    refused(with(valid(), "/decoder"_json_pointer, {{"type", "WordPiece"}}).dump(), {"WordPiece", "decoder"});
    refused(with(valid(), "/pre_tokenizer"_json_pointer, {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}}).dump(),
            {"does not compile"});
    refused(with(valid(), "/pre_tokenizer"_json_pointer, {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"invert", true}}).dump(),
            {"invert"});
    refused(with(valid(), "/pre_tokenizer"_json_pointer, {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Contiguous"}}).dump(),
            {"Contiguous"});
    refused(with(valid(), "/model/continuing_subword_prefix"_json_pointer, "##").dump(), {"continuing_subword_prefix"});
    json deep = {{"type", "NFC"}};
    for (int i = 0; i < 20; ++i) deep = {{"type", "Sequence"}, {"normalizers", json::array({deep})}};
    refused(with(valid(), "/normalizer"_json_pointer, deep).dump(), {"too deeply"});
}

TEST_CASE("tokenizer_config.json beside a tokenizer: malformed is refused") {
    TempDir dir;
    const std::string path = dir.write("tokenizer.json", valid().dump());
    for (const auto &[config, word] : std::vector<std::pair<std::string, std::string>>{
             {"{", "tokenizer_config.json"},
             {R"({"add_bos_token": "yes"})", "add_bos_token"},
             {R"({"bos_token": 3})", "bos_token"},
             {R"({"eos_token": "<missing>"})", "eos_token"},
             {R"({"chat_template": 7})", "chat_template"}}) {
        dir.write("tokenizer_config.json", config);
        CAPTURE(config);
        CHECK_THROWS_WITH_AS(Tokenizer::from_tokenizer_json(path), doctest::Contains(word.c_str()), TokenizerError);
    }
}

TEST_CASE("tokenizer files: paths that are not regular files") {
    TempDir dir;
    CHECK_THROWS_WITH_AS(Tokenizer::from_tokenizer_json(dir.path.string()), doctest::Contains("directory"), TokenizerError);
    CHECK_THROWS_WITH_AS(Tokenizer::from_sentencepiece(dir.path.string()), doctest::Contains("directory"), TokenizerError);
    CHECK_THROWS_WITH_AS(Tokenizer::from_tokenizer_json((dir.path / "missing.json").string()),
                         doctest::Contains("missing.json"), TokenizerError);
    const std::string fifo = (dir.path / "fifo").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH_AS(Tokenizer::from_tokenizer_json(fifo), doctest::Contains("FIFO"), TokenizerError);
    CHECK_THROWS_WITH_AS(Tokenizer::from_directory(dir.path.string()), doctest::Contains("no tokenizer"), TokenizerError);
    CHECK_THROWS_WITH_AS(Tokenizer::from_directory(fifo), doctest::Contains("not a directory"), TokenizerError);
    dir.write("tokenizer.model", "\x0a\xff\xff\xff\xff\x0f garbage");
    CHECK_THROWS_WITH_AS(Tokenizer::from_directory(dir.path.string()), doctest::Contains("SentencePiece"), TokenizerError);
}

TEST_CASE("encode and decode refuse what they cannot handle") {
    TempDir dir;
    const auto t = Tokenizer::from_tokenizer_json(dir.write("tokenizer.json", valid().dump()));
    CHECK_THROWS_WITH_AS(t->encode("ab\xff"), doctest::Contains("not valid UTF-8"), TokenizerError);
    CHECK_THROWS_WITH_AS(t->encode("abz"), doctest::Contains("not in the vocabulary"), TokenizerError);
    CHECK_THROWS_WITH_AS(t->decode(std::vector<int32_t>{0, 6}), doctest::Contains("out of range"), TokenizerError);
    CHECK_THROWS_AS(t->decode(std::vector<int32_t>{INT32_MIN}), TokenizerError);
    CHECK_THROWS_AS(t->id_to_token(-5), TokenizerError);
}

TEST_CASE("GGUF vocabularies: malformed arrays are refused") {
    const auto refused_vocabulary = [](const Vocabulary &v, const std::string &word) {
        CHECK_THROWS_WITH_AS(Tokenizer::from_vocabulary(v), doctest::Contains(word.c_str()), TokenizerError);
    };
    Vocabulary gpt2;
    gpt2.model = "gpt2";
    gpt2.tokens = {"a", "b", "ab"};
    gpt2.merges = {"a b"};
    gpt2.bos_id = gpt2.eos_id = -1;
    CHECK(Tokenizer::from_vocabulary(gpt2)->encode("ab") == std::vector<int32_t>{2});
    refused_vocabulary(Vocabulary{}, "tokenizer.ggml.model");
    Vocabulary v = gpt2;
    v.merges = {"a q"};
    refused_vocabulary(v, "not in the vocabulary");
    v = gpt2, v.merges = {"ab"};
    refused_vocabulary(v, "not two tokens");
    v = gpt2, v.tokens[1] = "\xff\xfe";
    refused_vocabulary(v, "not valid UTF-8");
    v = gpt2, v.tokens[1] = "";
    refused_vocabulary(v, "empty");
    v = gpt2, v.bos_id = 3;
    refused_vocabulary(v, "BOS");
    v = gpt2, v.eos_id = -7;
    refused_vocabulary(v, "EOS");
    v = gpt2, v.token_types = {1};
    refused_vocabulary(v, "token_type");
    v = gpt2, v.tokens.clear(), v.merges.clear();
    refused_vocabulary(v, "empty");

    Vocabulary llama;
    llama.model = "llama";
    llama.tokens = {"<unk>", "a"};
    llama.scores = {0.0f, -1.0f};
    llama.token_types = {2, 1};
    llama.bos_id = llama.eos_id = -1;
    llama.unk_id = 0;
    CHECK(Tokenizer::from_vocabulary(llama)->encode("a") == std::vector<int32_t>{0, 1});  // "▁" unknown, "a"
    v = llama, v.scores = {0.0f};
    refused_vocabulary(v, "scores");
    v = llama, v.scores[1] = std::numeric_limits<float>::quiet_NaN();
    refused_vocabulary(v, "not finite");
    v = llama, v.tokens[1] = "\xc3";
    refused_vocabulary(v, "not valid UTF-8");
    v = llama, v.unk_id = 2;
    refused_vocabulary(v, "unknown_token_id");
    v = llama, v.token_types[1] = 6;
    refused_vocabulary(v, "byte type");
    v = llama, v.tokens.clear(), v.scores.clear(), v.token_types.clear();
    refused_vocabulary(v, "empty");
    const auto t = Tokenizer::from_vocabulary(llama);
    CHECK_THROWS_WITH_AS(t->decode(std::vector<int32_t>{2}), doctest::Contains("out of range"), TokenizerError);
}
