// tinyfin-bench --train N --autocast D and --train-gpt N --autocast D: the same training step in
// f32 and under autocast, on twin models in one run. Steps alternate (f32 then D, then D then
// f32, ...), so load from other processes and the machine's clock changes fall on both alike;
// each step's process cpu time (all threads, clock_gettime) and wall time are taken alone and the
// medians compared. The steps are those of bench_train.cpp (the Fashion-MNIST CNN, AdamW, batch 64)
// and bench_gpt.cpp (char_gpt's default config, clipping, AdamW), with the examples' autocast
// scope around the forward pass and loss, and a GradScaler for f16.
#include "bench_autocast.hpp"
#include "bench_train.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include <time.h>

#include "corpus.hpp"
#include "model.hpp"
#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

namespace tfbench {

using namespace tinyfin;

namespace {

// One model, its optimizer and (for f16) its loss scaler; step() runs one training step with
// the forward pass under `autocast` (nullopt: f32).
struct Trainer {
    std::shared_ptr<nn::Module> model;
    std::unique_ptr<optim::AdamW> optimizer;
    std::optional<DType> autocast;
    nn::GradScaler scaler;
    std::function<Tensor()> loss;  // forward pass and loss on the next batch
    bool clip = false;

    void step() {
        optimizer->zero_grad();
        Tensor l;
        {
            AutocastGuard scope(autocast.has_value(), autocast.value_or(DType::bf16));
            l = loss();
        }
        scaler.scale(l).backward();
        if (clip) {
            scaler.unscale_(*optimizer);
            nn::clip_grad_norm(optimizer->params(), 1.0);
        }
        scaler.step(*optimizer);
        scaler.update();
        (void)l.item<float>();  // waits for the step, as the examples' loss report does
    }
};

Trainer make_trainer(Workload workload, std::optional<DType> autocast) {
    Trainer t;
    t.autocast = autocast;
    t.scaler = nn::GradScaler(nn::GradScaler::Options{.enabled = autocast == DType::f16});
    if (workload == Workload::cnn) {
        auto model = make_cnn();
        t.model = model;
        t.optimizer = std::make_unique<optim::AdamW>(model->parameters(), 1e-3);
        constexpr int64_t batch = 64;
        auto x = std::make_shared<std::vector<float>>(static_cast<size_t>(batch) * 28 * 28);
        auto y = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(batch));
        std::mt19937 rng(0);
        std::normal_distribution<float> pixel(0.0f, 1.0f);
        std::uniform_int_distribution<int64_t> label(0, 9);
        for (float &v : *x) v = pixel(rng);
        for (int64_t &v : *y) v = label(rng);
        t.loss = [model, x, y] {
            return cross_entropy((*model)(from_host(x->data(), {batch, 1, 28, 28}, DType::f32)),
                                 from_host(y->data(), {batch}, DType::i64));
        };
        return t;
    }
    static const chargpt::Corpus corpus = chargpt::load_corpus();
    const chargpt::Config config = chargpt::config_named("default", static_cast<int64_t>(corpus.vocab.size()));
    auto model = std::make_shared<chargpt::GPT>(config, 0);
    t.model = model;
    t.optimizer = std::make_unique<optim::AdamW>(optim::decay_matrices_only(model->parameters(), 0.1), 2e-3,
                                                 std::pair<double, double>{0.9, 0.99}, 1e-8);
    t.clip = true;
    const int64_t batch = 32, context = config.context;
    auto state = std::make_shared<uint64_t>(1);
    t.loss = [model, state, batch, context] {
        std::vector<int32_t> x(static_cast<size_t>(batch * context)), y(x.size());
        const auto range = corpus.train.size() - static_cast<size_t>(context) - 1;
        for (int64_t b = 0; b < batch; ++b) {
            *state = *state * 6364136223846793005ull + 1442695040888963407ull;
            const size_t start = (*state >> 11) % range;
            std::copy_n(corpus.train.begin() + static_cast<std::ptrdiff_t>(start), context, x.begin() + b * context);
            std::copy_n(corpus.train.begin() + static_cast<std::ptrdiff_t>(start) + 1, context,
                        y.begin() + b * context);
        }
        return cross_entropy((*model)(from_host(x.data(), {batch, context}, DType::i32)),
                             from_host(y.data(), {batch * context}, DType::i32));
    };
    return t;
}

double cpu_now_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void run_autocast_compare(Workload workload, int steps, DType dtype) {
    Trainer trainers[2] = {make_trainer(workload, std::nullopt), make_trainer(workload, dtype)};
    for (int i = 0; i < 3; ++i)
        for (Trainer &t : trainers) t.step();
    std::vector<double> cpu[2], wall[2];
    for (int i = 0; i < steps; ++i) {
        for (int j = 0; j < 2; ++j) {
            const int which = i % 2 == 0 ? j : 1 - j;
            const double c0 = cpu_now_ms();
            const auto w0 = std::chrono::steady_clock::now();
            trainers[which].step();
            wall[which].push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count());
            cpu[which].push_back(cpu_now_ms() - c0);
        }
    }
    const char *name = workload == Workload::cnn ? "Fashion-MNIST CNN (batch 64)" : "char_gpt default (batch 32 x 64)";
    std::printf("%s train step, f32 vs autocast %s, backend %s, %d steps each after 3 warm-up, alternating:\n", name,
                dtype_name(dtype), backend_name().c_str(), steps);
    const char *labels[2] = {"f32", dtype_name(dtype)};
    for (int j = 0; j < 2; ++j)
        std::printf("  %-5s cpu time per step: median %.1f ms (min %.1f); wall: median %.1f ms\n", labels[j],
                    median(cpu[j]), *std::min_element(cpu[j].begin(), cpu[j].end()), median(wall[j]));
    std::printf("  cpu time ratio %s / f32 (below 1: %s faster): %.2f\n", labels[1], labels[1],
                median(cpu[1]) / median(cpu[0]));
}

}  // namespace tfbench
