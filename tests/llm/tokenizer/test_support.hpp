// What the tokenizer doctests share: a temporary directory, writing files, byte-level spellings.
#pragma once

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace tokenizer_test {

namespace fs = std::filesystem;

struct TempDir {
    fs::path path;
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "tinyfin-tokenizer-XXXXXX").string();
        path = ::mkdtemp(pattern.data());
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string write(const std::string &name, const std::string &bytes) const {
        std::ofstream(path / name, std::ios::binary) << bytes;
        return (path / name).string();
    }
};

// GPT-2's spelling of a byte, from its definition: printable Latin-1 bytes are themselves, the
// others count up from U+0100 in byte order.
inline std::string byte_char(unsigned b) {
    const auto printable = [](unsigned c) { return (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE; };
    unsigned cp = b;
    if (!printable(b)) {
        cp = 0x100;
        for (unsigned k = 0; k < b; ++k) cp += printable(k) ? 0 : 1;
    }
    std::string out;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
}

inline std::string byte_chars(const std::string &bytes) {
    std::string out;
    for (const char c : bytes) out += byte_char(static_cast<unsigned char>(c));
    return out;
}

}  // namespace tokenizer_test
