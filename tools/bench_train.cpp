// tinyfin-bench --train: the Fashion-MNIST example's training step (the model and optimizer of
// examples/fashion_mnist and ../shared/peers/torch_fmnist.py: conv 32, pool, conv 64, pool,
// linear 128, linear 10, AdamW 1e-3, batch 64) on fixed random images, so it needs no data set.
// Prints the median step time, images/s, the cpu time and the page faults per step (getrusage) after warm-up:
// with the cpu plugin's caching allocator and scratch arena a steady step maps no new memory.
// Then the same number of steps again with a synchronize() between the phases (forward and loss,
// backward, optimizer), and their medians: where a step's time goes. They are timed apart from
// the step so that the extra synchronisation does not change the step's time.
#include "bench_train.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include <sys/resource.h>

#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

namespace tfbench {

using namespace tinyfin;

double cpu_ms(const rusage &r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-3;
}

std::shared_ptr<nn::Sequential> make_cnn() {
    Conv2dOptions pad1;
    pad1.pad_h = pad1.pad_w = 1;
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Conv2d>(1, 32, 3, pad1, true, nn::mix_seed(0, 1)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Conv2d>(32, 64, 3, pad1, true, nn::mix_seed(0, 2)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(64 * 7 * 7, 128, true, nn::mix_seed(0, 3)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(128, 10, true, nn::mix_seed(0, 4)),
    });
}

double run_train(int steps, int batch) {
    auto model = make_cnn();
    optim::AdamW optimizer(model->parameters(), 1e-3);

    std::mt19937 rng(0);
    std::normal_distribution<float> pixel(0.0f, 1.0f);
    std::uniform_int_distribution<int64_t> label(0, 9);
    std::vector<float> x(static_cast<size_t>(batch) * 28 * 28);
    std::vector<int64_t> y(static_cast<size_t>(batch));
    for (float &v : x) v = pixel(rng);
    for (int64_t &v : y) v = label(rng);

    auto step = [&] {
        Tensor xb = from_host(x.data(), {batch, 1, 28, 28}, DType::f32);
        Tensor yb = from_host(y.data(), {batch}, DType::i64);
        optimizer.zero_grad();
        Tensor loss = cross_entropy((*model)(xb), yb);
        loss.backward();
        optimizer.step();
        synchronize();
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
    const double median = ms[ms.size() / 2];
    std::vector<double> phase[3];
    for (int i = 0; i < steps; ++i) {
        Tensor xb = from_host(x.data(), {batch, 1, 28, 28}, DType::f32);
        Tensor yb = from_host(y.data(), {batch}, DType::i64);
        optimizer.zero_grad();
        auto t0 = std::chrono::steady_clock::now();
        Tensor loss = cross_entropy((*model)(xb), yb);
        synchronize();
        auto t1 = std::chrono::steady_clock::now();
        loss.backward();
        synchronize();
        auto t2 = std::chrono::steady_clock::now();
        optimizer.step();
        synchronize();
        auto t3 = std::chrono::steady_clock::now();
        phase[0].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        phase[1].push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        phase[2].push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
    }
    for (auto &p : phase) std::sort(p.begin(), p.end());
    std::printf("train step (batch %d, backend %s, %d steps after 3 warm-up): median %.2f ms (min %.2f, max %.2f), "
                "%.0f img/s, cpu time per step %.2f ms (all threads), page faults per step: %.1f minor, %.1f major\n",
                batch, backend_name().c_str(), steps, median, ms.front(), ms.back(), batch * 1000.0 / median,
                (cpu_ms(after) - cpu_ms(before)) / steps,
                static_cast<double>(after.ru_minflt - before.ru_minflt) / steps,
                static_cast<double>(after.ru_majflt - before.ru_majflt) / steps);
    std::printf("  phases (medians of %d more steps, synchronised between phases): forward + loss %.2f ms, "
                "backward %.2f ms, optimizer %.2f ms\n",
                steps, phase[0][phase[0].size() / 2], phase[1][phase[1].size() / 2], phase[2][phase[2].size() / 2]);
    return batch * 1000.0 / median;
}

}  // namespace tfbench
