// tinyfin-bench --train STEPS: the Fashion-MNIST training step (bench_train.cpp).
#pragma once

namespace tfbench {

// Runs steps timed training steps of batch images after warm-up and prints one line; 0 on success.
int run_train(int steps, int batch);

}  // namespace tfbench
