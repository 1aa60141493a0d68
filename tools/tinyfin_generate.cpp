// tinyfin-generate: generates text with a Llama-family model from a Hugging Face directory or a
// GGUF file, streaming it, then reports prompt and generation speed, the backend and the peak
// memory (docs/llm.md).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>

#include <tinyfin/llm.hpp>

namespace {

void usage() {
    std::fprintf(stderr,
                 "usage: tinyfin-generate -m PATH -p PROMPT [-n N] [--chat] [--temp T] [--top-k K] [--top-p P]\n"
                 "                        [--min-p P] [--repeat-penalty R] [--seed S] [--ctx N] [--backend B]\n"
                 "                        [--stop TEXT]... [--ids 1,2,3] [--f32] [--quantize TYPE] [--kv-cache DTYPE]\n"
                 "                        [--ignore-eos] [--no-mmap] [--no-fuse] [--no-prepack]\n"
                 "  -m PATH    a Hugging Face model directory (config.json, *.safetensors) or a .gguf file\n"
                 "  -p PROMPT  the prompt text (--ids: token ids instead, for models without a tokenizer)\n"
                 "  -n N       new tokens at most (default 128)\n"
                 "  --chat     wrap the prompt in the model's chat template (user turn)\n"
                 "  --temp T   temperature (default 0.8; 0 is greedy); --top-k 40, --top-p 0.95, --min-p 0.05\n"
                 "  --ctx N    context the KV cache is sized for (default: prompt + N)\n"
                 "  --backend  cpu, blas, vulkan, opengl, opencl, cuda or auto (default: TINYFIN_BACKEND)\n"
                 "  --quantize TYPE  quantize f32/f16/bf16 weights on load: q8_0, q4_0, q4_1, q5_0, q5_1,\n"
                 "             q4_k (q4_k_m), q4_k_s, q5_k (q5_k_m), q5_k_s, q6_k (as tinyfin-quantize writes them)\n"
                 "  --kv-cache f32, f16 or bf16 (default f32): the KV caches' dtype\n"
                 "  --no-mmap  on cpu copy matrices of 2 MiB or more into huge pages instead of using the\n"
                 "             mapped file in place (faster generation where the kernel has huge pages)\n"
                 "  --no-fuse  one product per matrix (default: a layer's q/k/v and gate/up as one product\n"
                 "             each where the file stores them back to back or they are copied anyway)\n"
                 "  --no-prepack  on cpu use q4_0/q8_0/q4_k/q6_k matrices as the file stores them instead of repacked\n"
                 "             eight rows at a time (LoadOptions::prepack_weights)\n");
}

double number(const char *flag, const char *text) {
    char *end = nullptr;
    const double v = std::strtod(text, &end);
    if (!end || *end) {
        std::fprintf(stderr, "tinyfin-generate: %s needs a number, got '%s'\n", flag, text);
        std::exit(2);
    }
    return v;
}

}  // namespace

int main(int argc, char **argv) {
    using namespace tinyfin;
    std::string path, prompt, ids_text;
    bool chat = false, have_prompt = false;
    llm::GenerationOptions gen;
    gen.sampling.temperature = 0.8;
    gen.sampling.top_k = 40;
    gen.sampling.top_p = 0.95;
    gen.sampling.min_p = 0.05;
    llm::LoadOptions load;
    load.verbose = true;
    int64_t ctx = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "tinyfin-generate: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "-m" || a == "--model")
            path = value();
        else if (a == "-p" || a == "--prompt")
            prompt = value(), have_prompt = true;
        else if (a == "--ids")
            ids_text = value();
        else if (a == "-n")
            gen.max_new_tokens = static_cast<int64_t>(number("-n", value()));
        else if (a == "--chat")
            chat = true;
        else if (a == "--temp")
            gen.sampling.temperature = number("--temp", value());
        else if (a == "--top-k")
            gen.sampling.top_k = static_cast<int64_t>(number("--top-k", value()));
        else if (a == "--top-p")
            gen.sampling.top_p = number("--top-p", value());
        else if (a == "--min-p")
            gen.sampling.min_p = number("--min-p", value());
        else if (a == "--repeat-penalty")
            gen.sampling.repetition_penalty = number("--repeat-penalty", value());
        else if (a == "--seed")
            gen.sampling.seed = static_cast<uint64_t>(number("--seed", value()));
        else if (a == "--ctx")
            ctx = static_cast<int64_t>(number("--ctx", value()));
        else if (a == "--backend")
            load.backend = value();
        else if (a == "--no-mmap")
            load.map_weights = false;
        else if (a == "--no-prepack")
            load.prepack_weights = false;
        else if (a == "--no-fuse")
            load.fuse_products = false;
        else if (a == "--stop")
            gen.stop.push_back(value());
        else if (a == "--kv-cache") {
            const char *v = value();
            const auto dt = tinyfin::dtype_named(v);
            if (!dt || (*dt != DType::f32 && *dt != DType::f16 && *dt != DType::bf16)) {
                std::fprintf(stderr, "tinyfin-generate: --kv-cache takes f32, f16 or bf16, got '%s'\n", v);
                return 2;
            }
            load.kv_cache_dtype = *dt;
        } else if (a == "--quantize")
            load.quantize = value();
        else if (a == "--f32")
            load.weights_f32 = true;
        else if (a == "--ignore-eos")
            gen.ignore_eos = true;
        else if (a == "-h" || a == "--help") {
            usage();
            return 0;
        } else {
            std::fprintf(stderr, "tinyfin-generate: unknown argument '%s'\n", a.c_str());
            usage();
            return 2;
        }
    }
    if (path.empty() || (!have_prompt && ids_text.empty())) {
        usage();
        return 2;
    }
    try {
        load.context = ctx;
        const llm::Model model = llm::Model::load(path, load);
        const llm::Tokenizer *tok = model.tokenizer();
        std::vector<int32_t> ids;
        if (!ids_text.empty()) {
            std::stringstream ss(ids_text);
            std::string item;
            while (std::getline(ss, item, ',')) ids.push_back(static_cast<int32_t>(number("--ids", item.c_str())));
        } else {
            if (!tok) throw ValueError("ValueError: this model has no tokenizer; pass token ids with --ids");
            std::string text = prompt;
            llm::EncodeOptions eo;
            if (chat) {
                text = llm::apply_chat_template({{"user", prompt}}, "auto", tok->chat_template());
                eo.parse_special = true;
            }
            ids = tok->encode(text, eo);
            std::fputs(prompt.c_str(), stdout);
        }
        // Stream: pieces of the tokens as they come (bytes; the terminal joins UTF-8 sequences).
        gen.on_token = [&](std::size_t, int32_t id) {
            if (tok)
                std::fputs(tok->token_to_piece(id).c_str(), stdout);
            else
                std::printf(" %d", id);
            std::fflush(stdout);
            return true;
        };
        const llm::GenerationResult r = model.generate({ids}, gen, ctx);
        std::printf("\n");
        struct rusage ru {};
        getrusage(RUSAGE_SELF, &ru);
        uint64_t device_peak = 0;
        for (const auto &b : stats().backends) device_peak = std::max(device_peak, b.peak_bytes_in_use);
        std::fprintf(stderr,
                     "tinyfin-generate: prompt %lld tokens in %.3f s (%.2f tokens/s), generated %lld tokens in %.3f s "
                     "(%.2f tokens/s), finish: %s\n"
                     "tinyfin-generate: backend %s, peak resident memory %.1f MiB, peak tensor memory %.1f MiB\n",
                     static_cast<long long>(r.prompt_tokens), r.prompt_seconds,
                     r.prompt_seconds > 0 ? static_cast<double>(r.prompt_tokens) / r.prompt_seconds : 0.0,
                     static_cast<long long>(r.generated_tokens), r.generate_seconds,
                     r.generate_seconds > 0 ? static_cast<double>(r.generated_tokens) / r.generate_seconds : 0.0,
                     r.finish_reason[0].c_str(), model.device().str().c_str(),
                     static_cast<double>(ru.ru_maxrss) / 1024.0, static_cast<double>(device_peak) / (1 << 20));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "tinyfin-generate: %s\n", e.what());
        return 1;
    }
    return 0;
}
