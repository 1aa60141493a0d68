// What the core does for a host-memory plugin that runs only a few ops, on abi10 (add, neg and
// f32 attention, plugin_1_0.c) under TINYFIN_FALLBACK=error; blas, the shipped host-memory peer
// of cpu, now runs every op itself, so these cases live here:
// - helper work the core does for an op (the contiguous copy a host read-back of a strided view
//   needs) runs on cpu in place without a FallbackError, while a user's op abi10 lacks is refused;
// - autocast's per-backend allow-list: an op the backend does not claim in the scope's dtype
//   stays f32 there (abi10's attention), while cpu, which claims it, runs it in bf16.
#include <doctest/doctest.h>

#include <tinyfin/tinyfin.hpp>

#include <vector>

using namespace tinyfin;

TEST_CASE("helper work on a host-memory plugin runs on cpu in place; a user's op is refused") {
    const Device abi10{"abi10", 0};
    const Tensor a = randn({3, 4}, 600).to(abi10);
    const std::vector<float> rows = a.to_vector<float>();
    reset_stats();
    const std::vector<float> cols = a.transpose(0, 1).to_vector<float>();
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) CHECK(cols[j * 3 + i] == rows[i * 4 + j]);
    const Stats s = stats();
    CHECK(s.total_fallbacks == 0);
    REQUIRE(s.backend("cpu") != nullptr);
    CHECK(s.backend("cpu")->ops == 1);  // the copy, on cpu
    CHECK(s.backend("cpu")->bytes_to_device == 0);  // in place: nothing staged
    CHECK(s.backend("cpu")->bytes_to_host == 0);
    CHECK_THROWS_AS(exp(a), FallbackError);
    CHECK_NOTHROW(add(a, a));  // abi10's own
}

TEST_CASE("autocast keeps an op in f32 on a backend that does not claim it in the scope's dtype") {
    const Device abi10{"abi10", 0}, cpu{"cpu", 0};
    const Tensor q = randn({2, 3, 4}, 71), k = randn({2, 5, 4}, 72), v = randn({2, 5, 6}, 73);
    AutocastGuard scope(DType::bf16);
    reset_stats();
    const Tensor on_abi10 = scaled_dot_product_attention(q.to(abi10), k.to(abi10), v.to(abi10));
    CHECK(on_abi10.dtype() == DType::f32);
    CHECK(on_abi10.device() == abi10);
    CHECK(stats().total_fallbacks == 0);
    CHECK(scaled_dot_product_attention(q.to(cpu), k.to(cpu), v.to(cpu)).dtype() == DType::bf16);
}
