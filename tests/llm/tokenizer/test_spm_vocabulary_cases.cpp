// The SentencePiece-style encoder of GGUF "llama" vocabularies on a vocabulary built by hand, with
// the merge order worked out by hand (tests/llm/tokenizer/test_tokenizer_sentencepiece.py compares
// it with libsentencepiece on a trained model).
#include <doctest/doctest.h>

#include "tinyfin/llm/tokenizer.hpp"

using namespace tinyfin::llm;
using Ids = std::vector<int32_t>;

namespace {

// <unk> <s> </s> <0x00>..<0xFF> then the pieces below (ids from 259 on).
const std::vector<std::pair<std::string, float>> pieces = {
    {"\xE2\x96\x81", -100}, {"h", -100}, {"e", -100}, {"l", -100}, {"o", -100}, {"w", -100},  // 259..264
    {"\xE2\x96\x81h", -1},                                                                  // 265 ▁h
    {"ll", -2},                                                                             // 266
    {"\xE2\x96\x81he", -3},                                                                 // 267 ▁he
    {"\xE2\x96\x81hell", -4},                                                               // 268 ▁hell
    {"\xE2\x96\x81hello", -5},                                                              // 269 ▁hello
    {"el", -0.5f},                                                                          // 270 el: scores above ▁h
    {"<|eot|>", 0},                                                                         // 271 control
};

Vocabulary vocabulary() {
    Vocabulary v;
    v.model = "llama";
    v.tokens = {"<unk>", "<s>", "</s>"};
    v.scores = {0, 0, 0};
    v.token_types = {2, 3, 3};
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        v.tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
        v.scores.push_back(0);
        v.token_types.push_back(6);
    }
    for (const auto &[piece, score] : pieces) {
        v.tokens.push_back(piece);
        v.scores.push_back(score);
        v.token_types.push_back(piece == "<|eot|>" ? 3 : 1);
    }
    v.unk_id = 0, v.bos_id = 1, v.eos_id = 2;
    return v;
}

}  // namespace

TEST_CASE("SentencePiece-style vocabulary: merges by score, byte fallback, space prefix") {
    auto v = vocabulary();
    const auto t = Tokenizer::from_vocabulary(v);
    const EncodeOptions raw{.add_bos = false};
    // "▁hello": el (-0.5) merges first, so ▁h e l never becomes ▁he: ▁h|el|l|o, then nothing
    // more (▁hel, ell are not pieces).
    CHECK(t->encode("hello", raw) == Ids{265, 270, 262, 263});
    // Without "el" the chain ▁h, ll, ▁he, ▁hell, ▁hello runs to the end.
    v.scores[270] = -1000;
    v.tokens[270] = "zz";
    const auto chain = Tokenizer::from_vocabulary(v);
    CHECK(chain->encode("hello", raw) == Ids{269});
    CHECK(chain->encode("hello") == Ids{1, 269});
    // A space is "▁"; characters outside the vocabulary become their UTF-8 bytes.
    CHECK(chain->encode("hello w\xC3\xA9", raw) == Ids{269, 259, 264, 3 + 0xC3, 3 + 0xA9});
    CHECK(chain->decode(chain->encode("hello w\xC3\xA9")) == "hello w\xC3\xA9");
    CHECK(chain->decode(Ids{1, 269, 259, 264, 2}, false) == "<s>hello w</s>");
    CHECK(chain->token_to_piece(269) == " hello");
    CHECK(chain->token_to_piece(3 + 0xC3) == "\xC3");
    // Control tokens: spelled out unless parse_special; the text after one gets the space prefix.
    CHECK(chain->encode("hello<|eot|>hello", {.add_bos = false, .parse_special = true}) == Ids{269, 271, 269});
    CHECK(chain->encode("<s>hello", {.parse_special = true}) == Ids{1, 269});
    const Ids spelled = chain->encode("<|eot|>", raw);
    CHECK(spelled.size() == 8);  // ▁ < | e o t | >: e and o are pieces, the rest bytes
    CHECK(spelled == Ids{259, 3 + '<', 3 + '|', 261, 263, 3 + 't', 3 + '|', 3 + '>'});
    v.add_space_prefix = false;
    CHECK(Tokenizer::from_vocabulary(v)->encode("hello", raw) == Ids{260, 261, 266, 263});
}
