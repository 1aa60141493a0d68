// main() of the dist test programs, which run as every rank of an mpirun job: a dist::Context
// for the whole program, doctest's cases on every rank, and the worst exit status of all ranks
// (so a check failing on one rank fails the test on all).
#pragma once

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tinyfin/dist.hpp"

namespace dist_test {
inline tinyfin::dist::Context *context = nullptr;
inline tinyfin::dist::Context &ctx() { return *context; }
}  // namespace dist_test

int main(int argc, char **argv) {
    tinyfin::dist::Context context(&argc, &argv);
    dist_test::context = &context;
    doctest::Context runner(argc, argv);
    int status = runner.run();
    auto worst = tinyfin::from_vector<int32_t>({status}, {1}, tinyfin::Device{"cpu", 0});
    context.all_reduce(worst, tinyfin::dist::ReduceOp::max);
    return worst.item<int32_t>();
}
