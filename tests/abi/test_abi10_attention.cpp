// ABI 1.1 made attention's mask optional (absent when the caller passes none); a plugin built
// against ABI 1.0 must never receive an absent input. abi10 (plugin_1_0.c, frozen 1.0 header)
// claims attention only with a whole mask descriptor and fails run() on an absent one, so under
// TINYFIN_FALLBACK=error attention without a mask runs on it only if the core gives it zeros.
#include <doctest/doctest.h>

#include <tinyfin/tinyfin.hpp>

#include <cmath>
#include <thread>
#include <vector>

using namespace tinyfin;

namespace {

const Device k_abi10{"abi10", 0};

void check_close(const std::vector<float> &got, const std::vector<float> &want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
        CHECK(std::abs(got[i] - want[i]) <= 1e-5 * (1 + std::abs(want[i])));
    }
}

}  // namespace

TEST_CASE("attention without a mask on an ABI 1.0 plugin: the core gives it one zero, not an absent input") {
    const Tensor q = randn({2, 3, 4}, 71), k = randn({2, 5, 4}, 72), v = randn({2, 5, 6}, 73);
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        // On cpu (ABI 1.1, the mask absent) and with an explicit zero mask: the reference.
        const std::vector<float> want = scaled_dot_product_attention(q, k, v, Tensor(), causal).to_vector<float>();
        check_close(scaled_dot_product_attention(q, k, v, zeros({3, 5}), causal).to_vector<float>(), want);
        const Tensor qa = q.to(k_abi10), ka = k.to(k_abi10), va = v.to(k_abi10);
        // A fresh thread: the core keeps the zero per thread once written.
        Tensor got;
        Stats s;
        std::thread([&] {
            reset_stats();
            got = scaled_dot_product_attention(qa, ka, va, Tensor(), causal);
            s = stats();
        }).join();
        CHECK(got.device() == k_abi10);
        REQUIRE(s.backend("abi10") != nullptr);
        CHECK(s.backend("abi10")->ops == 1);  // attention ran on abi10 itself: no fallback
        CHECK(s.total_fallbacks == 0);
        // The output and the one zero element that stands in for the mask.
        CHECK(s.backend("abi10")->allocations == 2);
        CHECK(s.backend("abi10")->bytes_allocated == got.nbytes() + sizeof(float));
        check_close(got.to_vector<float>(), want);
        // With the caller's mask nothing stands in: the output alone.
        const Tensor mask = randn({3, 5}, 74);
        reset_stats();
        const Tensor masked = scaled_dot_product_attention(qa, ka, va, mask.to(k_abi10), causal);
        CHECK(stats().backend("abi10")->allocations == 2);  // the mask's copy and the output
        check_close(masked.to_vector<float>(), scaled_dot_product_attention(q, k, v, mask, causal).to_vector<float>());
    }
}
