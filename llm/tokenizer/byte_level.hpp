// GPT-2's byte-to-unicode map: byte-level BPE vocabularies spell each byte as a printable code
// point (printable Latin-1 bytes as themselves, the other 68 bytes as U+0100 onwards), so that
// "Ġ" is a space and "Ċ" a newline in tokenizer.json and GGUF "gpt2" vocabularies.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace tinyfin::llm::detail {

class ByteLevel {
public:
    ByteLevel();
    // The vocabulary spelling of raw bytes.
    std::string encode(std::string_view bytes) const;
    // The raw bytes a vocabulary spelling stands for; false when a code point is not in the map.
    bool decode(std::string_view text, std::string &out) const;

private:
    std::array<std::string, 256> byte_to_text_;
    std::array<int, 0x144> code_point_to_byte_;  // every mapped code point is below U+0144
};

const ByteLevel &byte_level();

}  // namespace tinyfin::llm::detail
