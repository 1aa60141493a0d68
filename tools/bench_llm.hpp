// tinyfin-bench --llm PATH: a language model's prompt and generation speed on the cpu backend (or
// the one --backend names), read against the memory-bandwidth ceiling measured in the same process
// (bench_llm.cpp): the host's for cpu, the device's (tinyfin_bench.cpp's sample) for a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tfbench {

struct LlmBenchOptions {
    std::string path;  // a Hugging Face directory or a .gguf file
    int prompt_tokens = 512;  // the prompt prefilled (one chunk of up to 512 tokens at a time)
    int generate_tokens = 16;  // tokens decoded one at a time after it, per repeat
    int repeat = 3;  // timed repeats; medians reported
    std::string backend = "cpu";  // where the model is loaded and run (tinyfin-bench --llm ... --backend NAME)
    bool map_weights = true;  // false: --no-mmap (LoadOptions::map_weights)
    bool fuse_products = true;  // false: --no-fuse (LoadOptions::fuse_products)
    bool prepack_weights = true;  // false: --no-prepack (LoadOptions::prepack_weights)
    // Called after each repeat (0: the warm-up) with its prompt's token ids: a peer's turn
    // (--compare llamacpp), so that the two alternate under the same load.
    std::function<void(int repeat, const std::vector<int32_t> &prompt)> after_repeat;
};

// One sample of the memory read bandwidth: the better of the plain and the prefetching probe
// (mem_read, mem_read_pf) and the plain one alone, GB/s on the wall clock and GB per CPU second.
struct ReadSample {
    double wall = 0, cpu = 0, plain_wall = 0, plain_cpu = 0;
};

struct LlmRates {
    double prompt_tokens_per_s = 0;  // median over repeats
    double generate_tokens_per_s = 0;  // median over repeats
    double read_gbps = 0;  // median of the bandwidth samples taken between the repeats (the better probe)
    double read_plain_gbps = 0, read_plain_gb_per_cpu_s = 0;  // the plain probe's alone (wall, CPU clock)
    double weight_bytes_per_token = 0;  // matrix weights a generated token reads (embedding row aside)
    double kv_bytes_per_token = 0;  // KV cache read by a generated token at the mean position
    double ceiling_tokens_per_s = 0;  // read_gbps / bytes per token
    // The same on the process's CPU clock (all threads' time): on a shared machine, with one
    // thread, what the wall clock would show without the other processes.
    double prompt_tokens_per_cpu_s = 0, generate_tokens_per_cpu_s = 0, read_gb_per_cpu_s = 0;
    double ceiling_tokens_per_cpu_s = 0;
    // The GEMM rate of the prompt's products in the same run: x [prompt, K] times each of one
    // layer's weights [N, K] (random, in the model's element size: bf16 for 2 bytes, else f32: a
    // quantized model's prompt is compared with the f32 GEMM)
    // through linear, GFLOP/s on the wall and on the CPU clock; and the prompt's own rate in
    // GFLOP/s (2 flops per layer weight element per token; attention's products and the head,
    // which runs on the last token only, left out).
    double gemm_gflops = 0, gemm_gflops_cpu = 0, prompt_gflops = 0, prompt_gflops_cpu = 0;
    double load_seconds = 0;
};

// Loads the model on options.backend, then `repeat` times: a sample of the memory read bandwidth
// (read_sample()), a fresh session, a random prompt of prompt_tokens ids prefilled,
// generate_tokens decoded greedily (argmax), the logits read back as generation does. Runs at the
// thread count TINYFIN_THREADS says; prints progress to stderr.
LlmRates run_llm_bench(const LlmBenchOptions &options, const std::function<ReadSample()> &read_sample);

}  // namespace tfbench
