// The Python tests' way into the C++ tokenizers: loads a tokenizer and encodes or decodes a batch.
//   tokenizer_tool encode (--model FILE | --json FILE | --vocabulary FILE) [--parse-special] [--no-bos]
//   tokenizer_tool decode (...same...) [--keep-special]
// stdin: a JSON array of strings (encode) or of id arrays (decode); stdout: a JSON array of id
// arrays (encode) or of hex strings of the decoded bytes (decode). --vocabulary reads a JSON
// object with the fields of tinyfin::llm::Vocabulary, as the tests write it.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "tinyfin/llm/tokenizer.hpp"

using nlohmann::json;
using tinyfin::llm::Tokenizer;

static tinyfin::llm::Vocabulary read_vocabulary(const std::string &path) {
    std::ifstream in(path);
    const json j = json::parse(in);
    tinyfin::llm::Vocabulary v;
    v.model = j.at("model").get<std::string>();
    v.pre = j.value("pre", "");
    v.tokens = j.at("tokens").get<std::vector<std::string>>();
    v.scores = j.value("scores", std::vector<float>{});
    v.token_types = j.value("token_types", std::vector<int32_t>{});
    v.merges = j.value("merges", std::vector<std::string>{});
    v.bos_id = j.value("bos_id", -1);
    v.eos_id = j.value("eos_id", -1);
    v.unk_id = j.value("unk_id", -1);
    v.add_bos = j.value("add_bos", true);
    v.add_space_prefix = j.value("add_space_prefix", true);
    return v;
}

int main(int argc, char **argv) try {
    if (argc < 4) {
        std::fprintf(stderr, "usage: tokenizer_tool encode|decode --model|--json|--vocabulary FILE [options]\n");
        return 2;
    }
    const std::string mode = argv[1], kind = argv[2], path = argv[3];
    std::unique_ptr<Tokenizer> tokenizer;
    if (kind == "--model") tokenizer = Tokenizer::from_sentencepiece(path);
    else if (kind == "--json") tokenizer = Tokenizer::from_tokenizer_json(path);
    else if (kind == "--vocabulary") tokenizer = Tokenizer::from_vocabulary(read_vocabulary(path));
    else if (kind == "--directory") tokenizer = Tokenizer::from_directory(path);
    else throw std::runtime_error("unknown tokenizer kind " + kind);
    tinyfin::llm::EncodeOptions options;
    bool skip_special = true;
    for (int i = 4; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--parse-special") options.parse_special = true;
        else if (a == "--no-bos") options.add_bos = false;
        else if (a == "--keep-special") skip_special = false;
        else throw std::runtime_error("unknown option " + a);
    }
    const json input = json::parse(std::string(std::istreambuf_iterator<char>(std::cin), {}));
    json output = json::array();
    for (const json &item : input) {
        if (mode == "encode") {
            output.push_back(tokenizer->encode(item.get<std::string>(), options));
        } else if (mode == "decode") {
            const auto ids = item.get<std::vector<int32_t>>();
            const std::string bytes = tokenizer->decode(ids, skip_special);
            static const char hex[] = "0123456789abcdef";
            std::string h;
            for (const char c : bytes) h += hex[static_cast<unsigned char>(c) >> 4], h += hex[c & 15];
            output.push_back(h);
        } else {
            throw std::runtime_error("unknown mode " + mode);
        }
    }
    std::cout << output.dump() << "\n";
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "tokenizer_tool: %s\n", e.what());
    return 1;
}
