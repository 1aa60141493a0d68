// Reads the fortunes text files into one token stream; see corpus.hpp.
#include "corpus.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

namespace chargpt {

namespace fs = std::filesystem;

namespace {

bool is_text_file(const fs::directory_entry &entry) {
    std::error_code ec;
    // The .u8 entries are symlinks to UTF-8 copies; only plain files are read.
    if (!entry.is_regular_file(ec) || entry.is_symlink(ec)) return false;
    std::string ext = entry.path().extension().string();
    return ext != ".dat" && ext != ".u8";
}

}  // namespace

Corpus load_corpus(const std::string &dir, int64_t min_chars) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw CorpusError("corpus directory " + dir +
                          " not found; install Debian's fortunes package (apt-get install fortunes)");
    Corpus c;
    for (const fs::directory_entry &entry : fs::directory_iterator(dir, ec))
        if (is_text_file(entry)) c.files.push_back(entry.path().string());
    if (ec) throw CorpusError("cannot list " + dir + ": " + ec.message());
    if (c.files.empty())
        throw CorpusError("no fortune text files in " + dir +
                          " (only .dat indexes or .u8 links); install Debian's fortunes package");
    std::sort(c.files.begin(), c.files.end());
    std::string text;
    for (const std::string &path : c.files) {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw CorpusError("cannot read " + path);
        text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (static_cast<int64_t>(text.size()) < min_chars)
        throw CorpusError("the fortune files in " + dir + " hold " + std::to_string(text.size()) +
                          " bytes together, fewer than the " + std::to_string(min_chars) +
                          " needed; reinstall Debian's fortunes package");
    std::array<bool, 256> seen{};
    for (char ch : text) seen[static_cast<unsigned char>(ch)] = true;
    for (int b = 0; b < 256; ++b)
        if (seen[b]) c.vocab.push_back(static_cast<char>(b));
    std::vector<int32_t> tokens = encode(c.vocab, text);
    auto n_train = static_cast<std::ptrdiff_t>(static_cast<double>(tokens.size()) * 0.9);
    c.train.assign(tokens.begin(), tokens.begin() + n_train);
    c.val.assign(tokens.begin() + n_train, tokens.end());
    return c;
}

std::vector<int32_t> encode(const std::string &vocab, const std::string &text) {
    std::array<int32_t, 256> index;
    index.fill(-1);
    for (std::size_t i = 0; i < vocab.size(); ++i)
        index[static_cast<unsigned char>(vocab[i])] = static_cast<int32_t>(i);
    std::vector<int32_t> out;
    out.reserve(text.size());
    for (char ch : text) {
        int32_t id = index[static_cast<unsigned char>(ch)];
        if (id < 0)
            throw CorpusError("character " + std::to_string(static_cast<unsigned char>(ch)) +
                              " is not in the vocabulary");
        out.push_back(id);
    }
    return out;
}

std::string decode(const std::string &vocab, const std::vector<int32_t> &tokens) {
    std::string out;
    out.reserve(tokens.size());
    for (int32_t t : tokens) {
        if (t < 0 || static_cast<std::size_t>(t) >= vocab.size())
            throw CorpusError("token " + std::to_string(t) + " is outside the vocabulary of " +
                              std::to_string(vocab.size()));
        out.push_back(vocab[static_cast<std::size_t>(t)]);
    }
    return out;
}

}  // namespace chargpt
