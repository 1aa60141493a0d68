// tinyfin-bench --train STEPS: the Fashion-MNIST training step (bench_train.cpp).
#pragma once

namespace tfbench {

// Runs steps timed training steps of batch images after warm-up and prints the results; returns
// the images/s of the median step.
double run_train(int steps, int batch);

}  // namespace tfbench
