// A training loop in which the last rank fails at step 3, for test_failure.py:
//   dist-fail throw    the rank throws; main catches it and calls Context::abort
//   dist-fail escape   the exception leaves main (std::terminate, SIGABRT)
//   dist-fail unwind   the exception unwinds through the Context (its destructor aborts)
//   dist-fail exit     the rank calls std::exit(3) without finalising MPI
//   dist-fail hang     the rank stops taking part; the others time out (TINYFIN_DIST_TIMEOUT)
// The other ranks keep allreducing and must be stopped with a clear error, not hang.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "tinyfin/dist.hpp"

using namespace tinyfin;

namespace {

void train(dist::Context &ctx, const std::string &mode) {
    auto model = std::make_shared<nn::Linear>(4, 2, true, 1);
    dist::DistributedDataParallel ddp(ctx, model);
    Tensor x = ones({3, 4});
    for (int step = 0; step < 1000; ++step) {
        if (step == 3 && ctx.rank() == ctx.world_size() - 1) {
            if (mode == "exit") std::exit(3);
            if (mode == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
            throw std::runtime_error("simulated failure in the data loader at step 3");
        }
        ddp.backward(sum(ddp(x)));
    }
}

}  // namespace

int main(int argc, char **argv) {
    std::string mode = argc > 1 ? argv[1] : "throw";
    if (mode == "unwind") {
        try {
            dist::Context scoped(&argc, &argv);
            train(scoped, mode);
        } catch (const std::exception &e) {
            std::fprintf(stderr, "not reached: %s\n", e.what());
        }
        return 0;
    }
    dist::Context ctx(&argc, &argv);
    if (mode == "escape") {
        train(ctx, mode);
        return 0;
    }
    try {
        train(ctx, mode);
    } catch (const std::exception &e) {
        ctx.abort(2, e.what());
    }
    return 0;
}
