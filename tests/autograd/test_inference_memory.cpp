// What an inference forward costs in memory (issue 17): under no_grad, a model's forward
// allocates its ops' outputs and nothing else: no constants, no detached copies for a backward
// that will not run. Counted with stats() (every buffer the core allocates), against the sizes of
// the outputs worked out by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>

#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

struct Counted {
    uint64_t ops = 0, allocations = 0, bytes = 0;
};

// The forward on a fresh thread (empty per-thread constant caches), counted from zero on the
// backend it runs on.
template <typename F>
Counted count(const std::string &backend, F forward) {
    Counted c;
    std::thread([&] {
        reset_stats();
        forward();
        const Stats s = stats();
        const Stats::Backend *b = s.backend(backend);
        REQUIRE(b != nullptr);
        c = {b->ops, b->allocations, b->bytes_allocated};
    }).join();
    return c;
}

}  // namespace

TEST_CASE("an inference forward allocates its outputs and nothing else") {
    // [4, 8] -> Linear(8, 16) -> ReLU -> LayerNorm(16) -> Linear(16, 3). Without a gradient, linear
    // is one matmul_bias op where the backend claims it (4 ops: three [4, 16] f32 outputs of 256
    // bytes and one [4, 3] of 48); with one, or where the backend declines, a matmul and a bias add
    // (6 ops: four [4, 16] outputs and two [4, 3]).
    auto model =
        std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(),
                                         std::make_shared<nn::LayerNorm>(16), std::make_shared<nn::Linear>(16, 3));
    REQUIRE(model->parameters().size() == 6);
    for (const Tensor &p : model->parameters()) REQUIRE(p.requires_grad());
    Tensor x = randn({4, 8}, 41);
    const uint64_t ops = 6, bytes = 4 * 256 + 2 * 48;

    Tensor y;
    const std::string backend = x.device().backend;
    const std::vector<std::string> claimed = backend_report(backend).supported_ops;
    const bool fused = std::find(claimed.begin(), claimed.end(), "matmul_bias") != claimed.end();
    const uint64_t inference_ops = fused ? 4 : ops, inference_bytes = fused ? 3 * 256 + 48 : bytes;
    const Counted inference = count(backend, [&] {
        NoGradGuard no_grad;
        y = model->forward(x);
    });
    CHECK(inference.ops == inference_ops);
    CHECK(inference.allocations == inference_ops);  // one buffer per op: its output
    CHECK(inference.bytes == inference_bytes);
    CHECK_FALSE(y.requires_grad());

    // Recording the graph costs no tensor memory either: the backward closures hold the inputs
    // (views, not copies) and build their own tensors only when backward runs.
    const Counted training = count(backend, [&] { y = model->forward(x); });
    CHECK(y.requires_grad());
    CHECK(training.ops == ops);
    CHECK(training.allocations == ops);
    CHECK(training.bytes == bytes);
}
