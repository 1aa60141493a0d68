// What AVX512-BF16's vdpbf16ps computes (docs/numerics.md), probed where the CPU has it, and the
// same probes through the cpu plugin's bf16 matmul on both of its paths.
//
// Intel's SDM: each f32 lane i gets acc += a[2i+1] b[2i+1], then acc += a[2i] b[2i], two
// separately rounded (round to nearest even) multiply-adds, odd element first, with subnormal
// inputs, products and results read and written as zero. The probe of issue 31 (k = 6, exact
// result 2^-23): products 2^-24, 1, -1, 2^-24, 0, 0 in k order:
//   vdpbf16ps (pairs (0,1), (2,3), (4,5), odd first): 0 + 1 = 1, 1 + 2^-24 = 1 (tie to even),
//     1 + 2^-24 = 1, 1 - 1 = 0, then 0 + 0 + 0: returns 0;
//   the f32 GEMM (k in order, each step rounded): 2^-24, 1 (tie), 0, 2^-24: returns 2^-24;
//   the pair summed exactly before one rounding into the accumulator (what docs/numerics.md said
//   before): 1 + 2^-24 -> 1, 1 + (-1 + 2^-24) = 2^-24: returns 2^-24.
// The instruction's probe runs only where cpuid reports AVX512_BF16 (the plugin's bf16_matmul
// feature says so); elsewhere the test prints that it did not run it and why.
#include <doctest/doctest.h>

#include <tinyfin/plugin.h>

#include "cpu_plugin_table.hpp"

#include <dlfcn.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

const tf_plugin &P() { return cpu_plugin_table(); }

// Restarts the plugin under TINYFIN_CPU_ISA=isa (nullptr: unset) and returns its bf16_matmul
// feature: "avx512bf16" where vdpbf16ps runs, "f32" where the f32 GEMM does.
std::string restart(const char *isa) {
    P().shutdown();
    if (isa)
        setenv("TINYFIN_CPU_ISA", isa, 1);
    else
        unsetenv("TINYFIN_CPU_ISA");
    tf_error err{};
    err.struct_size = sizeof err;
    REQUIRE(P().init(&err) == TF_STATUS_OK);
    std::string value;
    P().list_features(
        [](void *user, const char *k, const char *v) {
            if (std::strcmp(k, "bf16_matmul") == 0) *static_cast<std::string *>(user) = v;
        },
        &value);
    REQUIRE(!value.empty());
    return value;
}

// bf16 bits of values that bf16 holds exactly (the tests use only such values).
uint16_t bf16(float x) {
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    REQUIRE((bits & 0xffffu) == 0);
    return static_cast<uint16_t>(bits >> 16);
}
float from_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// [1, k] x [k, 1] in bf16 through the plugin's matmul: the one output element, as f32.
float matmul_bf16(const std::vector<uint16_t> &a, const std::vector<uint16_t> &b) {
    const int64_t k = static_cast<int64_t>(a.size());
    tf_error err{};
    err.struct_size = sizeof err;
    tf_buffer *buf = nullptr;
    REQUIRE(P().buffer_alloc(0, static_cast<uint64_t>(2 * k + 1) * 2, &buf, &err) == TF_STATUS_OK);
    auto *data = static_cast<uint16_t *>(P().buffer_host_ptr(buf));
    std::memcpy(data, a.data(), static_cast<size_t>(k) * 2);
    std::memcpy(data + k, b.data(), static_cast<size_t>(k) * 2);
    auto desc = [&](int64_t rows, int64_t cols, int64_t first) {
        tf_tensor_desc d{};
        d.struct_size = sizeof d;
        d.dtype = TF_DTYPE_BF16;
        d.rank = 2;
        d.shape[0] = rows;
        d.shape[1] = cols;
        d.strides[0] = cols;
        d.strides[1] = 1;
        d.offset = static_cast<uint64_t>(first) * 2;
        d.buffer = buf;
        d.data = data;
        return d;
    };
    const tf_tensor_desc in[2] = {desc(1, k, 0), desc(k, 1, k)}, out = desc(1, 1, 2 * k);
    const tf_op_desc op{sizeof op, TF_OP_MATMUL, 2, 1, in, &out, nullptr};
    REQUIRE(P().run(0, &op, &err) == TF_STATUS_OK);
    const float y = from_bf16(data[2 * k]);
    P().buffer_free(buf);
    return y;
}

const float k_2m12 = 0x1p-12f, k_2m24 = 0x1p-24f;

// The probe: a = [2^-12, 1, -1, 2^-12, 0, 0], b = [2^-12, 1, 1, 2^-12, 0, 0]; exact dot 2^-23.
std::vector<uint16_t> probe_a() { return {bf16(k_2m12), bf16(1.0f), bf16(-1.0f), bf16(k_2m12), 0, 0}; }
std::vector<uint16_t> probe_b() { return {bf16(k_2m12), bf16(1.0f), bf16(1.0f), bf16(k_2m12), 0, 0}; }

#if defined(__x86_64__)
// Lane 0 of vdpbf16ps applied pair after pair to acc: a[2q] and a[2q + 1] in one 32-bit word.
[[gnu::target("avx512f,avx512bf16")]] float vdpbf16ps_lane(float acc, const std::vector<uint16_t> &a,
                                                           const std::vector<uint16_t> &b) {
    __m512 c = _mm512_set1_ps(acc);
    for (size_t q = 0; 2 * q + 1 < a.size(); ++q) {
        const __m512i av = _mm512_set1_epi32(static_cast<int>(a[2 * q] | static_cast<uint32_t>(a[2 * q + 1]) << 16));
        const __m512i bv = _mm512_set1_epi32(static_cast<int>(b[2 * q] | static_cast<uint32_t>(b[2 * q + 1]) << 16));
        c = _mm512_dpbf16_ps(c, (__m512bh)av, (__m512bh)bv);
    }
    return _mm512_cvtss_f32(c);
}
#endif

}  // namespace

TEST_CASE("bf16 matmul, k = 6 probe: the f32 GEMM path gives 2^-24 (exact 2^-23)") {
    // TINYFIN_CPU_ISA=avx512 keeps vdpbf16ps off on every CPU; generic is the portable tile.
    for (const char *isa : {"generic", "avx512"}) {
        CAPTURE(isa);
        REQUIRE(restart(isa) == "f32");
        CHECK(matmul_bf16(probe_a(), probe_b()) == k_2m24);
        // A subnormal product stays: 2^-65 * 2^-65 = 2^-130 (bf16 holds it).
        CHECK(matmul_bf16({bf16(0x1p-65f), 0}, {bf16(0x1p-65f), 0}) == 0x1p-130f);
        // So does a subnormal input: 2^-133 (bf16 bits 0x0001) * 2^10 = 2^-123.
        CHECK(matmul_bf16({0x0001, 0}, {bf16(0x1p10f), 0}) == 0x1p-123f);
    }
    unsetenv("TINYFIN_CPU_ISA");
}

TEST_CASE("vdpbf16ps: two rounded multiply-adds per pair, odd element first, subnormals as zero") {
    if (restart(nullptr) != "avx512bf16") {
        MESSAGE("vdpbf16ps probe not run: this CPU does not report AVX512_BF16 (cpuid leaf 7 subleaf 1, EAX "
                "bit 5) with AVX-512 enabled, so the instruction cannot execute here; the f32 GEMM path's "
                "probe above ran");
        return;
    }
#if defined(__x86_64__)
    // The instruction itself: 0 only with two roundings per pair, odd element first (even first,
    // or the pair summed before the accumulator, gives 2^-24; see the top).
    CHECK(vdpbf16ps_lane(0.0f, probe_a(), probe_b()) == 0.0f);
    CHECK(vdpbf16ps_lane(0.0f, {bf16(0x1p-65f), 0}, {bf16(0x1p-65f), 0}) == 0.0f);  // subnormal product
    CHECK(vdpbf16ps_lane(0.0f, {0x0001, 0}, {bf16(0x1p10f), 0}) == 0.0f);  // subnormal input
    // A subnormal sum: 1.5 * 2^-126 - 2^-126 = 2^-127.
    CHECK(vdpbf16ps_lane(0x1.8p-126f, {bf16(-0x1p-126f), 0}, {bf16(1.0f), 0}) == 0.0f);
    // The plugin's matmul on this path gives the instruction's values.
    CHECK(matmul_bf16(probe_a(), probe_b()) == 0.0f);
    CHECK(matmul_bf16({bf16(0x1p-65f), 0}, {bf16(0x1p-65f), 0}) == 0.0f);
    CHECK(matmul_bf16({0x0001, 0}, {bf16(0x1p10f), 0}) == 0.0f);
    MESSAGE("vdpbf16ps probe ran on this CPU: k = 6 probe 0 (exact 2^-23), subnormals flushed");
#endif
    unsetenv("TINYFIN_CPU_ISA");
}
