// bench-optim BACKEND [sgd]: one optimizer step over the Fashion-MNIST bench CNN's 8 parameters
// (AdamW, or SGD with momentum 0.9 and weight decay) on one backend: the ops it dispatches
// (stats()) and the median wall time of steps 2-41, synchronised. For docs/performance.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "tinyfin/nn.hpp"

using namespace tinyfin;

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench-optim BACKEND [sgd]\n");
        return 2;
    }
    const Device dev = Device::parse(argv[1]);
    const bool sgd = argc > 2;
    std::vector<Tensor> params;
    const Shape shapes[] = {{32, 1, 3, 3}, {32}, {64, 32, 3, 3}, {64}, {128, 3136}, {128}, {10, 128}, {10}};
    for (const Shape &s : shapes) params.push_back(zeros(s, DType::f32, dev).requires_grad_());
    std::unique_ptr<optim::Optimizer> opt;
    if (sgd)
        opt = std::make_unique<optim::SGD>(params, 0.01, 0.9, 1e-4);
    else
        opt = std::make_unique<optim::AdamW>(params, 1e-3);
    std::vector<double> ms;
    uint64_t ops = 0;
    for (int step = 0; step < 41; ++step) {
        for (Tensor &p : params) p.set_grad(full(p.shape(), 0.5, DType::f32, dev));
        synchronize();
        reset_stats();
        const auto start = std::chrono::steady_clock::now();
        opt->step();
        synchronize();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        ops = 0;
        for (const Stats::Backend &b : stats().backends) ops += b.ops;
    }
    std::sort(ms.begin() + 1, ms.end());
    std::printf("%s on %s: %llu ops a step, median step %.2f ms\n", sgd ? "SGD" : "AdamW", dev.str().c_str(),
                static_cast<unsigned long long>(ops), ms[21]);
}
