// tinyfin-quantize: writes a quantized GGUF file (llama.cpp's block types, metadata and tensor
// names) from a Hugging Face model directory or a GGUF file (docs/llm.md "Quantized weights").
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include <tinyfin/llm.hpp>
#include <tinyfin/llm/quantize.hpp>

namespace {

void usage() {
    std::string names;
    for (const auto &n : tinyfin::llm::quant_scheme_names()) names += (names.empty() ? "" : "|") + n;
    std::fprintf(stderr,
                 "usage: tinyfin-quantize IN OUT --type TYPE [--allow-requantize] [--quiet]\n"
                 "  IN      a Hugging Face model directory (config.json, *.safetensors) or a .gguf file\n"
                 "  OUT     the GGUF file to write\n"
                 "  --type  %s\n"
                 "          (q4_k = q4_k_m, q5_k = q5_k_m: llama.cpp's mixes; the output matrix is Q6_K\n"
                 "          except in q8_0; norms and biases stay F32)\n",
                 names.c_str());
}

}  // namespace

int main(int argc, char **argv) {
    std::string in, out;
    tinyfin::llm::QuantizeFileOptions options;
    options.verbose = true;
    bool have_type = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--type" || a == "-t") {
            if (i + 1 >= argc) {
                usage();
                return 2;
            }
            options.scheme = argv[++i];
            have_type = true;
        } else if (a == "--allow-requantize") {
            options.allow_requantize = true;
        } else if (a == "--quiet") {
            options.verbose = false;
        } else if (a == "-h" || a == "--help") {
            usage();
            return 0;
        } else if (!a.empty() && a[0] == '-') {
            std::fprintf(stderr, "tinyfin-quantize: unknown argument '%s'\n", a.c_str());
            usage();
            return 2;
        } else if (in.empty()) {
            in = a;
        } else if (out.empty()) {
            out = a;
        } else {
            usage();
            return 2;
        }
    }
    if (in.empty() || out.empty() || !have_type) {
        usage();
        return 2;
    }
    try {
        const auto r = tinyfin::llm::quantize_model_file(in, out, options);
        std::map<std::string, int> counts;
        for (const auto &[name, type] : r.types) ++counts[type];
        std::string summary;
        for (const auto &[type, n] : counts) summary += " " + type + ":" + std::to_string(n);
        std::fprintf(stderr, "tinyfin-quantize: wrote %s: %llu tensors (%s), %.2f MiB -> %.2f MiB\n", out.c_str(),
                     static_cast<unsigned long long>(r.tensors), summary.c_str() + 1,
                     static_cast<double>(r.bytes_in) / (1 << 20), static_cast<double>(r.bytes_out) / (1 << 20));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "tinyfin-quantize: %s\n", e.what());
        return 1;
    }
    return 0;
}
