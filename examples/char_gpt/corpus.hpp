// The char_gpt corpus: the text files of Debian's fortunes package, a character vocabulary and
// a fixed 90/10 train/validation split (shared with tests/nn).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace chargpt {

// The corpus cannot be read: a missing directory, no text files, or only empty ones.
class CorpusError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

inline const char *default_corpus_dir() { return "/usr/share/games/fortunes"; }

struct Corpus {
    std::vector<std::string> files;  // the files read, sorted by name
    std::string vocab;  // the distinct bytes, ascending; token i is vocab[i]
    std::vector<int32_t> train;  // the first 90% of the tokens
    std::vector<int32_t> val;  // the last 10%
    int64_t size() const { return static_cast<int64_t>(train.size() + val.size()); }
};

// Reads every regular file of dir whose name has no extension ending in .dat or .u8 (the
// fortunes indexes and the UTF-8 links), in name order, as bytes (the files are Latin-1).
// Throws CorpusError naming dir and what to install when it is missing, holds no text file, or
// the files hold fewer than `min_chars` bytes together.
Corpus load_corpus(const std::string &dir = default_corpus_dir(), int64_t min_chars = 1024);

// Token ids of text under vocab (characters outside it are an error).
std::vector<int32_t> encode(const std::string &vocab, const std::string &text);
std::string decode(const std::string &vocab, const std::vector<int32_t> &tokens);

}  // namespace chargpt
