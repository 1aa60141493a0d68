// tinyfin-bench --train-gpt: examples/char_gpt's default config (4 layers, 4 heads, 128 dims,
// context 64, batch 32) and recipe (AdamW with decay on matrices, clipping to norm 1) on the
// fortunes corpus; the median step and its cpu time (getrusage: on a loaded machine the wall
// time says little about the work a step does), then 200 tokens sampled with the KV cache.
// tools/bench_gpt_torch.py is the same in PyTorch.
#include "bench_gpt.hpp"
#include "bench_train.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <sys/resource.h>

#include "corpus.hpp"
#include "model.hpp"
#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

namespace tfbench {

using namespace tinyfin;

GptRates run_train_gpt(int steps) {
    chargpt::Corpus corpus = chargpt::load_corpus();
    chargpt::Config config = chargpt::config_named("default", static_cast<int64_t>(corpus.vocab.size()));
    const int64_t batch = 32, t = config.context;
    chargpt::GPT model(config, 0);
    optim::AdamW optimizer(optim::decay_matrices_only(model.parameters(), 0.1), 2e-3, {0.9, 0.99}, 1e-8);
    std::vector<int32_t> x(static_cast<size_t>(batch * t)), y(x.size());
    uint64_t state = 1;
    auto step = [&] {
        const auto range = corpus.train.size() - static_cast<size_t>(t) - 1;
        for (int64_t b = 0; b < batch; ++b) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            size_t start = (state >> 11) % range;
            std::copy_n(corpus.train.begin() + static_cast<std::ptrdiff_t>(start), t, x.begin() + b * t);
            std::copy_n(corpus.train.begin() + static_cast<std::ptrdiff_t>(start) + 1, t, y.begin() + b * t);
        }
        Tensor xb = from_host(x.data(), {batch, t}, DType::i32);
        Tensor yb = from_host(y.data(), {batch * t}, DType::i32);
        optimizer.zero_grad();
        Tensor loss = cross_entropy(model(xb), yb);
        loss.backward();
        nn::clip_grad_norm(optimizer.params(), 1.0);
        optimizer.step();
        (void)loss.item<float>();  // as the torch side's loss.item()
    };
    for (int i = 0; i < 3; ++i) step();
    std::vector<double> ms;
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    for (int i = 0; i < steps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        step();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    getrusage(RUSAGE_SELF, &after);
    std::sort(ms.begin(), ms.end());
    GptRates r;
    const double median = ms[ms.size() / 2];
    r.train_tokens_per_s = static_cast<double>(batch * t) * 1e3 / median;
    r.train_cpu_ms = (cpu_ms(after) - cpu_ms(before)) / steps;
    std::printf("gpt train step (batch %lld x context %lld, backend %s, %d steps after 3 warm-up): median %.1f ms "
                "(min %.1f, max %.1f), %.0f tokens/s, cpu time per step %.1f ms (all threads)\n",
                static_cast<long long>(batch), static_cast<long long>(t), backend_name().c_str(), steps, median,
                ms.front(), ms.back(), r.train_tokens_per_s, r.train_cpu_ms);
    chargpt::SampleOptions so;
    so.tokens = 200;
    so.temperature = 0.8;
    getrusage(RUSAGE_SELF, &before);
    chargpt::SampleResult s = chargpt::sample(model, chargpt::encode(corpus.vocab, "\n"), so);
    getrusage(RUSAGE_SELF, &after);
    r.sample_tokens_per_s = static_cast<double>(s.tokens.size()) / s.seconds;
    std::printf("gpt sampling with the KV cache: %zu tokens in %.2f s, %.0f tokens/s, cpu time per token %.2f ms\n",
                s.tokens.size(), s.seconds, r.sample_tokens_per_s,
                (cpu_ms(after) - cpu_ms(before)) / static_cast<double>(s.tokens.size()));
    return r;
}

}  // namespace tfbench
