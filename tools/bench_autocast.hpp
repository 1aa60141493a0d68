// tinyfin-bench --train N --autocast D / --train-gpt N --autocast D: the training step in f32
// and under autocast D, alternating (bench_autocast.cpp).
#pragma once

#include "tinyfin/tinyfin.hpp"

namespace tfbench {

// Which training step to compare: the Fashion-MNIST CNN (batch 64) or char_gpt's default config.
enum class Workload { cnn, gpt };

// Builds two identical models and optimizers, one trained in f32 and one under
// AutocastGuard(dtype) (with a GradScaler for f16), and times steps steps of each after warm-up,
// alternating f32 and dtype (in the order AB BA AB ... so neither always runs first); prints the
// median cpu time and wall time per step of each and the ratio of the cpu medians.
void run_autocast_compare(Workload workload, int steps, tinyfin::DType dtype);

}  // namespace tfbench
