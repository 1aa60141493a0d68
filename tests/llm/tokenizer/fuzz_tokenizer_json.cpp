// libFuzzer target: bytes as a tokenizer.json; when they load, encode and decode with them. Any
// TokenizerError is a correct answer; a crash, a hang, a sanitizer report or another exception
// type is a finding. Replayed on corpus/ in every build (fuzz-tokenizer-json-corpus).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tinyfin/llm/tokenizer.hpp"
#include "tokenizer_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    using namespace tinyfin::llm;
    const std::string_view bytes(reinterpret_cast<const char *>(data), size);
    std::unique_ptr<Tokenizer> t;
    try {
        t = detail::tokenizer_from_json_text(bytes, "", "", "fuzz input");
    } catch (const TokenizerError &) {
        return 0;
    }
    const std::string texts[] = {"Hello world 12345", "  a\n\nb\t", "\xC3\xA9\xF0\x9F\x99\x82", "<|endoftext|>x", ""};
    for (const std::string &text : texts) {
        for (const bool special : {false, true}) {
            try {
                const std::vector<int32_t> ids = t->encode(text, {.parse_special = special});
                for (const int32_t id : ids)
                    if (id < 0 || id >= t->vocab_size()) __builtin_trap();  // encode made an invalid id
                (void)t->decode(ids);
                (void)t->decode(ids, false);
            } catch (const TokenizerError &) {
            }
        }
    }
    const std::vector<int32_t> odd = {0, t->vocab_size() - 1, t->vocab_size(), -1};
    try {
        (void)t->decode(odd);
    } catch (const TokenizerError &) {
    }
    for (const int32_t id : odd) {
        try {
            (void)t->token_to_piece(id);
        } catch (const TokenizerError &) {
        }
    }
    return 0;
}
