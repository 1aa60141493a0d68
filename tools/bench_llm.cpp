// tinyfin-bench --llm (bench_llm.hpp): times prefill and greedy decoding of one sequence through
// libtinyfin-llm's public API and computes the bytes a generated token must read.
#include "bench_llm.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <ctime>
#include <vector>

#include "tinyfin/llm.hpp"

namespace tfbench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Elements of the matrices one token multiplies (every projection of every layer and the LM head)
// and of all weights (the embedding table and the norms too).
struct ParamCounts {
    double per_token = 0, total = 0;
    double layers = 0;  // the decoder layers' matrices: a prompt token's products (the head runs on the last only)
};

ParamCounts count_params(const tinyfin::llm::ModelConfig &c) {
    const double h = static_cast<double>(c.hidden_size), d = static_cast<double>(c.head_dim);
    const double q = static_cast<double>(c.num_heads) * d, kv = static_cast<double>(c.num_kv_heads) * d;
    const double inter = static_cast<double>(c.intermediate_size), vocab = static_cast<double>(c.vocab_size);
    const double layer = h * q + 2 * h * kv + q * h + 3 * h * inter;
    const double layers = static_cast<double>(c.num_layers);
    ParamCounts p;
    p.per_token = layers * layer + vocab * h;
    p.layers = layers * layer;
    p.total = layers * (layer + 2 * h + (c.attention_bias ? q + 2 * kv : 0)) + h +
              vocab * h * (c.tie_word_embeddings ? 1 : 2);
    return p;
}

// Bytes a generated token reads of a GGUF file's tensors (their types as stored: quantized files
// mix block types): every tensor but the embedding table, of which one row is read, unless the
// table doubles as the head (no output.weight). 0 for a path that is not a .gguf file.
double gguf_bytes_per_token(const std::string &path) {
    if (path.size() < 5 || path.compare(path.size() - 5, 5, ".gguf") != 0) return 0;
    const tinyfin::llm::GgufFile file(path);
    const bool tied = file.find("output.weight") == nullptr;
    double bytes = 0;
    for (const tinyfin::llm::TensorData &t : file.tensors())
        if (tied || t.name != "token_embd.weight") bytes += static_cast<double>(t.bytes.size());
    return bytes;
}

int32_t argmax_of(const tinyfin::Tensor &logits) {
    return static_cast<int32_t>(tinyfin::argmax(logits.view({-1})).item<int64_t>());
}

// GFLOP/s of one layer's products for a prompt of p tokens ({wall, cpu}): the median of three
// timed rounds after one untimed.
// On a GPU backend the products are left on the device and waited for (synchronize), not read back.
std::pair<double, double> layer_gemm_rate(const tinyfin::llm::ModelConfig &c, tinyfin::DType dtype, int64_t p,
                                          const tinyfin::Device &device) {
    const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim,
                  inter = c.intermediate_size;
    const int64_t shapes[][2] = {{q, h}, {kv, h}, {kv, h}, {h, q}, {inter, h}, {inter, h}, {h, inter}};
    const tinyfin::Device cpu{"cpu", 0};
    const bool on_cpu = device.backend == "cpu";
    std::vector<std::pair<tinyfin::Tensor, tinyfin::Tensor>> operands;
    double flops = 0;
    uint64_t seed = 7;
    for (const auto &nk : shapes) {
        tinyfin::Tensor x = tinyfin::randn({p, nk[1]}, seed++, cpu).to(dtype).to(device);
        tinyfin::Tensor w = tinyfin::randn({nk[0], nk[1]}, seed++, cpu).to(dtype).to(device);
        operands.emplace_back(std::move(x), std::move(w));
        flops += 2.0 * static_cast<double>(p * nk[0] * nk[1]);
    }
    std::vector<double> wall, cpu_rates;
    for (int round = 0; round < 4; ++round) {
        const double c0 = cpu_seconds();
        const auto t0 = Clock::now();
        for (const auto &[x, w] : operands) {
            tinyfin::Tensor y = tinyfin::linear(x, w);
            if (on_cpu) (void)y.to_vector<float>()[0];
        }
        if (!on_cpu) tinyfin::synchronize();
        if (round == 0) continue;
        wall.push_back(flops / 1e9 / seconds_since(t0));
        cpu_rates.push_back(flops / 1e9 / (cpu_seconds() - c0));
    }
    return {median(wall), median(cpu_rates)};
}

}  // namespace

LlmRates run_llm_bench(const LlmBenchOptions &o, const std::function<ReadSample()> &read_sample) {
    namespace llm = tinyfin::llm;
    LlmRates r;
    llm::LoadOptions lo;
    lo.backend = o.backend;
    lo.map_weights = o.map_weights;
    lo.fuse_products = o.fuse_products;
    lo.prepack_weights = o.prepack_weights;
    lo.context = o.prompt_tokens + o.generate_tokens + 1;
    const auto t_load = Clock::now();
    const llm::Model model = llm::Model::load(o.path, lo);
    r.load_seconds = seconds_since(t_load);
    const llm::ModelConfig &c = model.config();
    const ParamCounts params = count_params(c);
    const double weight_bytes = static_cast<double>(model.memory_estimate().weights);
    // The file's bytes per element (2 for f16/bf16, 4 for f32), from the whole model's size; a
    // GGUF file's own tensor sizes where it has them (quantized types mix within a file).
    const double element = std::round(weight_bytes / params.total * 8) / 8;
    const double gguf_bytes = gguf_bytes_per_token(o.path);
    r.weight_bytes_per_token = gguf_bytes > 0 ? gguf_bytes : element * params.per_token;
    const double mean_position = o.prompt_tokens + 0.5 * o.generate_tokens;
    r.kv_bytes_per_token = 2.0 * static_cast<double>(c.num_layers * c.num_kv_heads * c.head_dim) * mean_position * 4;

    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(c.vocab_size - 1));
    std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_tokens));
    for (int32_t &id : prompt) id = pick(rng);

    std::vector<double> prompt_rates, generate_rates, bandwidth, prompt_cpu, generate_cpu, bandwidth_cpu;
    std::vector<double> plain, plain_cpu;
    auto sample = [&] {
        const ReadSample r = read_sample();
        bandwidth.push_back(r.wall);
        bandwidth_cpu.push_back(r.cpu);
        plain.push_back(r.plain_wall);
        plain_cpu.push_back(r.plain_cpu);
    };
    llm::Session session(model, 1, lo.context);
    for (int rep = 0; rep <= o.repeat; ++rep) {  // repeat 0 warms up (pages, scratch) untimed
        sample();
        session.reset();
        double c0 = cpu_seconds();
        auto t0 = Clock::now();
        tinyfin::Tensor logits = session.prefill({prompt});
        int32_t next = argmax_of(logits);
        const double prompt_s = seconds_since(t0), prompt_c = cpu_seconds() - c0;
        c0 = cpu_seconds();
        t0 = Clock::now();
        for (int i = 0; i < o.generate_tokens; ++i) next = argmax_of(session.decode({next}));
        const double generate_s = seconds_since(t0), generate_c = cpu_seconds() - c0;
        std::fprintf(stderr,
                     "tinyfin-bench --llm: %s: prompt %.2f tokens/s (%.2f per CPU second), generation %.3f tokens/s "
                     "(%.3f per CPU second); read %.2f GB/s (%.2f GB per CPU second)\n",
                     rep == 0 ? "warm-up" : ("repeat " + std::to_string(rep)).c_str(), o.prompt_tokens / prompt_s,
                     o.prompt_tokens / prompt_c, o.generate_tokens / generate_s, o.generate_tokens / generate_c,
                     bandwidth.back(), bandwidth_cpu.back());
        if (o.after_repeat) o.after_repeat(rep, prompt);
        if (rep == 0) continue;
        prompt_rates.push_back(o.prompt_tokens / prompt_s);
        generate_rates.push_back(o.generate_tokens / generate_s);
        prompt_cpu.push_back(o.prompt_tokens / prompt_c);
        generate_cpu.push_back(o.generate_tokens / generate_c);
    }
    sample();
    r.prompt_tokens_per_s = median(prompt_rates);
    r.generate_tokens_per_s = median(generate_rates);
    r.read_gbps = median(bandwidth);
    r.read_plain_gbps = median(plain);
    r.read_plain_gb_per_cpu_s = median(plain_cpu);
    r.ceiling_tokens_per_s = r.read_gbps * 1e9 / (r.weight_bytes_per_token + r.kv_bytes_per_token);
    const auto [gemm_wall, gemm_cpu] = layer_gemm_rate(c, element == 2 ? tinyfin::DType::bf16 : tinyfin::DType::f32,
                                                       o.prompt_tokens, tinyfin::Device{o.backend, 0});
    r.gemm_gflops = gemm_wall;
    r.gemm_gflops_cpu = gemm_cpu;
    r.prompt_gflops = 2 * params.layers * r.prompt_tokens_per_s / 1e9;
    r.prompt_tokens_per_cpu_s = median(prompt_cpu);
    r.prompt_gflops_cpu = 2 * params.layers * r.prompt_tokens_per_cpu_s / 1e9;
    r.generate_tokens_per_cpu_s = median(generate_cpu);
    r.read_gb_per_cpu_s = median(bandwidth_cpu);
    r.ceiling_tokens_per_cpu_s = r.read_gb_per_cpu_s * 1e9 / (r.weight_bytes_per_token + r.kv_bytes_per_token);
    return r;
}

}  // namespace tfbench
