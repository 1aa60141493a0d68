// Byte-level BPE on hand-built vocabularies, with every expected id worked out by hand: ids 0..255
// are the bytes themselves (GPT-2's byte characters in byte order), so an unmerged byte's id is
// its value; the merges below are the only way longer tokens appear.
#include <doctest/doctest.h>

#include <vector>

#include "test_support.hpp"
#include "tinyfin/llm/tokenizer.hpp"

using namespace tinyfin::llm;
using tokenizer_test::byte_chars;
using tokenizer_test::TempDir;
using Ids = std::vector<int32_t>;
using nlohmann::json;

namespace {

const char *llama3_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char *qwen2_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Merges (in rank order) as raw byte strings; each makes the next id from 256 on.
const std::vector<std::pair<std::string, std::string>> merges = {
    {"H", "e"},          // 256 He
    {"l", "l"},          // 257 ll
    {"He", "ll"},        // 258 Hell
    {"Hell", "o"},       // 259 Hello
    {" ", "w"},          // 260 " w"
    {"o", "r"},          // 261 or
    {" w", "or"},        // 262 " wor"
    {"l", "d"},          // 263 ld
    {" wor", "ld"},      // 264 " world"
    {"1", "2"},          // 265 12
    {"12", "3"},         // 266 123
    {" ", " "},          // 267 two spaces
    {"\n", "\n"},        // 268 two newlines
    {"\xF0", "\x9F"},    // 269 the first two bytes of U+1F642 and other emoji
    {"3", "4"},          // 270 34: only where "0034" is one pre-token (GPT-2), not 003|4 (Llama 3)
    {"'", "T"},          // 271 'T: only where 'T is one pre-token (Llama 3's case-insensitive contractions)
};
constexpr int32_t ab = 272;  // "ab": a vocabulary entry no merge makes (ignore_merges)
constexpr int32_t bos = 273, eot = 274, user_token = 275;

json vocab_json() {
    json vocab = json::object();
    for (unsigned b = 0; b < 256; ++b) vocab[byte_chars(std::string(1, static_cast<char>(b)))] = b;
    int32_t id = 256;
    for (const auto &[a, b] : merges) vocab[byte_chars(a + b)] = id++;
    vocab[byte_chars("ab")] = ab;
    return vocab;
}

json merges_json() {
    json out = json::array();
    for (const auto &[a, b] : merges) out.push_back(byte_chars(a) + " " + byte_chars(b));
    return out;
}

json added_json() {
    const auto added = [](int32_t id, const char *content, bool special) {
        return json{{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
                    {"rstrip", false},   {"normalized", false}, {"special", special}};
    };
    return json::array({added(bos, "<|begin_of_text|>", true), added(eot, "<|eot_id|>", true),
                        added(user_token, "<|user_tok|>", false)});
}

json split_pre_tokenizer(const char *pattern) {
    return {{"type", "Sequence"},
            {"pretokenizers",
             json::array({json{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                          json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
}

// A Llama 3 style tokenizer.json: Split + ByteLevel, ignore_merges, BOS from the post-processor.
json llama3_json() {
    return {{"version", "1.0"},
            {"added_tokens", added_json()},
            {"normalizer", nullptr},
            {"pre_tokenizer", split_pre_tokenizer(llama3_pattern)},
            {"post_processor",
             {{"type", "TemplateProcessing"},
              {"single", json::array({json{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                                      json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model",
             {{"type", "BPE"}, {"ignore_merges", true}, {"vocab", vocab_json()}, {"merges", merges_json()}}}};
}

std::unique_ptr<Tokenizer> load(const TempDir &dir, const json &j) {
    return Tokenizer::from_tokenizer_json(dir.write("tokenizer.json", j.dump()));
}

Vocabulary gguf_vocabulary(const std::string &pre) {
    Vocabulary v;
    v.model = "gpt2";
    v.pre = pre;
    v.tokens.resize(user_token + 1);
    const json vocab = vocab_json();
    for (const auto &[token, id] : vocab.items()) v.tokens[id.get<int32_t>()] = token;
    v.tokens[bos] = "<|begin_of_text|>";
    v.tokens[eot] = "<|eot_id|>";
    v.tokens[user_token] = "<|user_tok|>";
    v.token_types.assign(v.tokens.size(), 1);
    v.token_types[bos] = v.token_types[eot] = 3;
    v.token_types[user_token] = 4;
    for (const auto &m : merges_json()) v.merges.push_back(m.get<std::string>());
    v.bos_id = bos;
    v.eos_id = eot;
    v.add_bos = true;
    return v;
}

}  // namespace

TEST_CASE("byte-level BPE: Llama 3 pre-tokenizer, hand-computed ids") {
    TempDir dir;
    const auto t = load(dir, llama3_json());
    const EncodeOptions raw{.add_bos = false};
    CHECK(t->encode("Hello world", raw) == Ids{259, 264});
    CHECK(t->encode("Hello world") == Ids{bos, 259, 264});  // the post-processor's BOS
    // Numbers in groups of 1-3 digits: 003|4 (the "34" merge would join one pre-token "0034").
    CHECK(t->encode("0034", raw) == Ids{'0', '0', '3', '4'});
    CHECK(t->encode("12345", raw) == Ids{266, '4', '5'});
    CHECK(t->encode("1234567", raw) == Ids{266, '4', '5', '6', '7'});  // 123|456|7, no merge for 45 or 56
    // Contractions split off, case-insensitively: DON|'T, where the 'T merge applies.
    CHECK(t->encode("DON'T", raw) == Ids{'D', 'O', 'N', 271});
    CHECK(t->encode("I'm", raw) == Ids{'I', '\'', 'm'});
    // Whitespace runs: a|"  "|" b" (the run gives its last space to the word after it).
    CHECK(t->encode("a   b", raw) == Ids{'a', 267, ' ', 'b'});
    CHECK(t->encode("a\n\nb", raw) == Ids{'a', 268, 'b'});
    CHECK(t->encode("   ", raw) == Ids{267, ' '});
    // Multi-byte UTF-8: each byte its own id unless merged; the emoji's first two bytes merge.
    CHECK(t->encode("\xC3\xA9", raw) == Ids{0xC3, 0xA9});                // é
    CHECK(t->encode("\xF0\x9F\x99\x82", raw) == Ids{269, 0x99, 0x82});   // U+1F642
    CHECK(t->encode("\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", raw) == Ids{269, 0x91, 0x8D, 269, 0x8F, 0xBD});  // 👍🏽
    // ignore_merges: a pre-token that is a vocabulary entry is taken whole.
    CHECK(t->encode("ab", raw) == Ids{ab});
    CHECK(t->encode("", raw).empty());
}

TEST_CASE("byte-level BPE: special tokens only with parse_special, added tokens always") {
    TempDir dir;
    const auto t = load(dir, llama3_json());
    const EncodeOptions raw{.add_bos = false};
    // Spelled out: Hello|<||eot|_id||> by the pre-tokenizer, each a run of byte ids.
    CHECK(t->encode("Hello<|eot_id|>", raw) == Ids{259, '<', '|', 'e', 'o', 't', '_', 'i', 'd', '|', '>'});
    CHECK(t->encode("Hello<|eot_id|>", {.add_bos = false, .parse_special = true}) == Ids{259, eot});
    // A non-special added token is matched either way.
    CHECK(t->encode("<|user_tok|>Hello", raw) == Ids{user_token, 259});
    // A prompt that spells BOS gets no second one.
    CHECK(t->encode("<|begin_of_text|>Hello", {.parse_special = true}) == Ids{bos, 259});
    CHECK(t->is_special(eot));
    CHECK_FALSE(t->is_special(user_token));
    CHECK_FALSE(t->is_special(259));
    CHECK(t->token_to_id("<|eot_id|>") == eot);
    CHECK(t->token_to_id(byte_chars(" world")) == 264);
    CHECK_FALSE(t->token_to_id("no such token").has_value());
    CHECK(t->id_to_token(264) == byte_chars(" world"));
    CHECK(t->bos_id() == bos);
    CHECK(t->adds_bos());
    CHECK_FALSE(t->adds_eos());
    CHECK(t->vocab_size() == user_token + 1);
}

TEST_CASE("byte-level BPE: decode and token_to_piece give the bytes back") {
    TempDir dir;
    const auto t = load(dir, llama3_json());
    for (const std::string text : {"Hello world", "a   b\n\n\tc", "12345 DON'T I'm", "\xC3\xA9t\xC3\xA9 \xF0\x9F\x99\x82",
                                   "  leading and trailing  ", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", "\r\n\r\n"}) {
        CAPTURE(text);
        CHECK(t->decode(t->encode(text)) == text);
        CHECK(t->decode(t->encode(text, {.parse_special = true})) == text);
    }
    const Ids ids{bos, 259, eot};
    CHECK(t->decode(ids) == "Hello");
    CHECK(t->decode(ids, false) == "<|begin_of_text|>Hello<|eot_id|>");
    // Streaming: one token's bytes, possibly part of a UTF-8 sequence.
    CHECK(t->token_to_piece(264) == " world");
    CHECK(t->token_to_piece(269) == "\xF0\x9F");
    CHECK(t->token_to_piece(0x82) == "\x82");
    CHECK(t->token_to_piece(eot) == "<|eot_id|>");
    CHECK_THROWS_AS(t->decode(Ids{1, user_token + 1}), TokenizerError);
    CHECK_THROWS_AS(t->decode(Ids{-1}), TokenizerError);
    CHECK_THROWS_AS(t->token_to_piece(1 << 30), TokenizerError);
}

TEST_CASE("byte-level BPE: GPT-2's pre-tokenizer through ByteLevel(use_regex)") {
    TempDir dir;
    json j = llama3_json();
    j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
    j["model"]["ignore_merges"] = false;
    j["post_processor"] = nullptr;
    const auto t = load(dir, j);
    // GPT-2 keeps digit runs whole (" ?\p{N}+"): 0034 is one pre-token, where 34 merges; and its
    // contractions are lower-case only: DON'T -> DON|'|T, so the 'T merge cannot apply.
    CHECK(t->encode("0034") == Ids{'0', '0', 270});
    CHECK(t->encode("x1234") == Ids{'x', 266, '4'});
    CHECK(t->encode("DON'T") == Ids{'D', 'O', 'N', '\'', 'T'});
    CHECK(t->encode("ab") == Ids{'a', 'b'});  // no ignore_merges
    CHECK(t->encode("Hello world") == Ids{259, 264});  // no BOS: no post-processor
    CHECK(t->bos_id() == -1);
}

TEST_CASE("byte-level BPE: Qwen2's single digits and NFC normalizer") {
    TempDir dir;
    json j = llama3_json();
    j["pre_tokenizer"] = split_pre_tokenizer(qwen2_pattern);
    j["normalizer"] = {{"type", "NFC"}};
    j["post_processor"] = nullptr;
    const auto t = load(dir, j);
    CHECK(t->encode("123") == Ids{'1', '2', '3'});
    CHECK(t->encode("0034") == Ids{'0', '0', '3', '4'});
    CHECK(t->encode("e\xCC\x81") == Ids{0xC3, 0xA9});  // e + U+0301 composes to U+00E9
}

TEST_CASE("byte-level BPE: tokenizer_config.json and generation_config.json beside tokenizer.json") {
    TempDir dir;
    dir.write("tokenizer_config.json",
              json{{"add_bos_token", false},
                   {"bos_token", {{"content", "<|begin_of_text|>"}}},
                   {"eos_token", "<|eot_id|>"},
                   {"chat_template", "{% for m in messages %}<|start_header_id|>{% endfor %}"}}
                  .dump());
    dir.write("generation_config.json", json{{"eos_token_id", json::array({eot, 263})}}.dump());
    const auto t = load(dir, llama3_json());
    CHECK(t->encode("Hello") == Ids{259});  // add_bos_token false wins over the post-processor
    CHECK(t->eos_id() == eot);
    CHECK(t->eos_ids() == Ids{eot, 263});
    CHECK(detect_chat_family(t->chat_template()) == "llama3");
    const auto same = Tokenizer::from_directory(dir.path.string());
    CHECK(same->encode("Hello world") == Ids{259, 264});
}

TEST_CASE("GGUF gpt2 vocabulary: the same ids as tokenizer.json, pre-tokenizer by name") {
    TempDir dir;
    const auto json_tokenizer = load(dir, llama3_json());
    const auto gguf = Tokenizer::from_vocabulary(gguf_vocabulary("llama-bpe"));
    for (const std::string text : {"Hello world", "12345", "1234567", "0034", "DON'T I'm", "a   b", "a\n\nb", "ab",
                                   "\xF0\x9F\x99\x82 \xC3\xA9", "Hello<|eot_id|><|user_tok|>"}) {
        CAPTURE(text);
        CHECK(gguf->encode(text) == json_tokenizer->encode(text));
        CHECK(gguf->encode(text, {.parse_special = true}) == json_tokenizer->encode(text, {.parse_special = true}));
        CHECK(gguf->decode(gguf->encode(text)) == text);
    }
    CHECK(gguf->eos_ids() == Ids{eot});
    const auto qwen = Tokenizer::from_vocabulary(gguf_vocabulary("qwen2"));
    CHECK(qwen->encode("123", {.add_bos = false}) == Ids{'1', '2', '3'});
    const auto gpt2 = Tokenizer::from_vocabulary(gguf_vocabulary("gpt-2"));
    CHECK(gpt2->encode("DON'T", {.add_bos = false}) == Ids{'D', 'O', 'N', '\'', 'T'});
    CHECK(gpt2->encode("0034", {.add_bos = false}) == Ids{'0', '0', 270});
    try {
        Tokenizer::from_vocabulary(gguf_vocabulary("mystery-pre"));
        FAIL("an unknown tokenizer.ggml.pre was accepted");
    } catch (const TokenizerError &e) {
        CHECK(std::string(e.what()).find("mystery-pre") != std::string::npos);
        CHECK(std::string(e.what()).find("llama-bpe") != std::string::npos);
    }
}
