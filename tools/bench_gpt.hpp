// tinyfin-bench --train-gpt STEPS: examples/char_gpt's training step and KV-cached sampling
// (bench_gpt.cpp).
#pragma once

namespace tfbench {

struct GptRates {
    double train_tokens_per_s = 0;  // median training step
    double train_cpu_ms = 0;  // cpu time per step, all threads
    double sample_tokens_per_s = 0;  // KV-cached decoding, one token at a time
};

// Times steps training steps of the default config (batch 32, context 64) on the fortunes
// corpus after warm-up, then 200 sampled tokens; prints the results.
GptRates run_train_gpt(int steps);

}  // namespace tfbench
