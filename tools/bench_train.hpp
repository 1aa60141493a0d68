// tinyfin-bench --train STEPS: the Fashion-MNIST training step (bench_train.cpp).
#pragma once

#include <memory>

#include <sys/resource.h>

#include "tinyfin/nn.hpp"

namespace tfbench {

// User and system time of all threads in ms: on a loaded machine the wall time says little about
// the work a step does, this does.
double cpu_ms(const rusage &r);

// The example's CNN (conv 32 - pool - conv 64 - pool - linear 128 - linear 10), seeded as
// examples/fashion_mnist seeds it for seed 0.
std::shared_ptr<tinyfin::nn::Sequential> make_cnn();

// Runs steps timed training steps of batch images after warm-up and prints the results; returns
// the images/s of the median step.
double run_train(int steps, int batch);

}  // namespace tfbench
