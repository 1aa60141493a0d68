// tinyfin-bench --train STEPS: the Fashion-MNIST training step (bench_train.cpp).
#pragma once

#include <string>

namespace tfbench {

// PyTorch's step for comparison (bench_train_torch.py), run after tinyfin's in the same process
// lifetime: its default configuration and the hand-tuned one (OpenBLAS pinned to 1 thread,
// channels_last, malloc tunables that keep its temporaries mapped).
struct TrainPeer {
    bool torch = false;
    std::string python;  // interpreter with torch (Debian's /usr/bin/python3)
    std::string script;  // path of bench_train_torch.py
    int threads = 1;
};

// Runs steps timed training steps of batch images after warm-up and prints the results, then the
// peer's when asked; 0 on success.
int run_train(int steps, int batch, const TrainPeer &peer = {});

}  // namespace tfbench
