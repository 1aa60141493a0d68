#include "byte_level.hpp"

#include "utf8.hpp"

namespace tinyfin::llm::detail {

ByteLevel::ByteLevel() {
    code_point_to_byte_.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        const int cp = printable ? b : next++;
        byte_to_text_[b] = utf8_encode(static_cast<uint32_t>(cp));
        code_point_to_byte_[cp] = b;
    }
}

std::string ByteLevel::encode(std::string_view bytes) const {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) out += byte_to_text_[static_cast<unsigned char>(c)];
    return out;
}

bool ByteLevel::decode(std::string_view text, std::string &out) const {
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        uint32_t cp = 0;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < text.size()) {
            cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
            i += 2;
        } else {
            return false;
        }
        if (cp >= code_point_to_byte_.size() || code_point_to_byte_[cp] < 0) return false;
        out += static_cast<char>(code_point_to_byte_[cp]);
    }
    return true;
}

const ByteLevel &byte_level() {
    static const ByteLevel map;
    return map;
}

}  // namespace tinyfin::llm::detail
