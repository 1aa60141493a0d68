// The cpu plugin's f32 tanh, sigmoid, silu and gelu_tanh (plugins/cpu/vector_tanh.hpp) against long double
// references from their definitions, over a sweep of the f32 range: every 997th bit pattern
// (dense near 0: tiny arguments and subnormals), a dense linear sweep of [-30, 30] and the edges.
// The bounds leave room above the worst cases of a sweep 58 times denser (every 17th pattern:
// tanh 1.55, sigmoid 2.02, silu 2.68 ulp), since no sweep short of all 2^32 floats proves them.
// Each function runs as compiled here (the baseline instruction set: no FMA, nothing contracted,
// as the plugin's portable level) and in an AVX2 + FMA build with contraction on (GCC's default
// even with -std=c++20, as the plugin's AVX2 level is compiled), so the bound holds either way.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "vector_tanh.hpp"

namespace {

// Distance in units in the last place of the f32 nearest to `exact` (subnormal: 2^-149).
double ulps(float got, long double exact) {
    if (std::isnan(exact)) return std::isnan(got) ? 0 : INFINITY;
    const float nearest = static_cast<float>(exact);
    if (std::isinf(nearest)) return got == nearest ? 0 : INFINITY;
    const float next = std::nextafter(nearest, nearest < 0 ? -INFINITY : INFINITY);
    return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) /
                               std::fabs(static_cast<long double>(next) - static_cast<long double>(nearest)));
}

long double tanh_reference(long double x) { return std::tanh(x); }
long double sigmoid_reference(long double x) {
    return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}
long double silu_reference(long double x) { return x * sigmoid_reference(x); }
// gelu's tanh form from its definition, 0.5 x (1 + tanh(u)), written x sigmoid(2u) (the same value;
// the long double 1 + tanh(u) would cancel in the negative tail).
long double gelu_tanh_reference(long double x) {
    const long double u = std::sqrt(2.0L / 3.14159265358979323846264338327950288L) * (x + 0.044715L * x * x * x);
    return x * sigmoid_reference(2 * u);
}

float tanh_plain(float x) { return tf_cpu::vec::tanh(x); }
float sigmoid_plain(float x) { return tf_cpu::vec::sigmoid(x); }
float silu_plain(float x) { return tf_cpu::vec::silu(x); }
float gelu_tanh_plain(float x) { return tf_cpu::vec::gelu_tanh(x); }

#if defined(__x86_64__)
#define TF_FMA_VARIANT [[gnu::target("avx2,fma"), gnu::optimize("fp-contract=fast"), gnu::noinline]]
TF_FMA_VARIANT float tanh_fma(float x) { return tf_cpu::vec::tanh(x); }
TF_FMA_VARIANT float sigmoid_fma(float x) { return tf_cpu::vec::sigmoid(x); }
TF_FMA_VARIANT float silu_fma(float x) { return tf_cpu::vec::silu(x); }
TF_FMA_VARIANT float gelu_tanh_fma(float x) { return tf_cpu::vec::gelu_tanh(x); }

bool cpu_has_avx2_fma() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || (c & bit_FMA) == 0) return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2) != 0;
}
#endif

struct Sweep {
    double worst = 0;
    float worst_x = 0;
    uint64_t checked = 0;

    void add(float x, float got, long double exact) {
        const double u = ulps(got, exact);
        ++checked;
        if (!(u <= worst)) {
            worst = u;
            worst_x = x;
        }
    }
};

// fn against ref over every 997th bit pattern with |x| <= limit and a step of 1/4096 over
// [-30, 30].
template <class Fn, class Ref>
Sweep sweep(Fn fn, Ref ref, float limit) {
    Sweep s;
    for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 997) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
        if (!(std::fabs(x) <= limit)) continue;
        s.add(x, fn(x), ref(static_cast<long double>(x)));
    }
    for (int i = -30 * 4096; i <= 30 * 4096; ++i) {
        const float x = static_cast<float>(i) / 4096;
        s.add(x, fn(x), ref(static_cast<long double>(x)));
    }
    return s;
}

template <class Fn, class Ref>
void check_bound(const std::string &name, Fn fn, Ref ref, float limit, double bound) {
    const Sweep s = sweep(fn, ref, limit);
    INFO(name, ": worst ", s.worst, " ulp at x = ", s.worst_x, " over ", s.checked, " arguments");
    MESSAGE(name, ": worst ", s.worst, " ulp at x = ", s.worst_x);
    CHECK(s.checked > 1'000'000);
    CHECK(s.worst <= bound);
}

// The edges every variant must meet exactly.
template <class Tanh, class Sigmoid, class Silu>
void check_edges(Tanh tanh_f, Sigmoid sigmoid_f, Silu silu_f) {
    const auto bits = [](float v) { return std::bit_cast<uint32_t>(v); };
    CHECK(bits(tanh_f(0.0f)) == 0u);
    CHECK(bits(tanh_f(-0.0f)) == 0x80000000u);
    CHECK(tanh_f(INFINITY) == 1.0f);
    CHECK(tanh_f(-INFINITY) == -1.0f);
    CHECK(tanh_f(9.5f) == 1.0f);
    CHECK(tanh_f(-1e30f) == -1.0f);
    CHECK(std::isnan(tanh_f(NAN)));
    CHECK(std::isnan(tanh_f(-NAN)));
    // tanh(x) = x - x^3/3 + ...: x itself below 2^-12, subnormals included (no cancellation).
    for (const float x : {1e-30f, -1e-30f, 1e-40f, -1e-40f, 0x1p-149f, 1e-5f, -2e-4f}) CHECK(tanh_f(x) == x);
    CHECK(sigmoid_f(0.0f) == 0.5f);
    CHECK(sigmoid_f(-0.0f) == 0.5f);
    CHECK(sigmoid_f(INFINITY) == 1.0f);
    CHECK(sigmoid_f(30.0f) == 1.0f);
    CHECK(bits(sigmoid_f(-INFINITY)) == 0u);
    CHECK(bits(sigmoid_f(-200.0f)) == 0u);
    CHECK(std::isnan(sigmoid_f(NAN)));
    CHECK(sigmoid_f(1e-40f) == 0.5f);
    // sigmoid(-100) = e^-100 / (1 + e^-100) = 3.7200759760208e-44, a subnormal, rounded once.
    CHECK(sigmoid_f(-100.0f) == static_cast<float>(sigmoid_reference(-100.0L)));
    CHECK(sigmoid_f(-100.0f) > 0);
    CHECK(silu_f(INFINITY) == INFINITY);
    CHECK(bits(silu_f(-INFINITY)) == 0x80000000u);
    CHECK(bits(silu_f(-1000.0f)) == 0x80000000u);
    CHECK(silu_f(1e30f) == 1e30f);
    CHECK(std::isnan(silu_f(NAN)));
    CHECK(bits(silu_f(0.0f)) == 0u);
    CHECK(bits(silu_f(-0.0f)) == 0x80000000u);
    CHECK(silu_f(-100.0f) == static_cast<float>(silu_reference(-100.0L)));  // a subnormal
    CHECK(silu_f(-100.0f) < 0);
}

template <class GeluTanh>
void check_gelu_tanh_edges(GeluTanh f) {
    const auto bits = [](float v) { return std::bit_cast<uint32_t>(v); };
    CHECK(bits(f(0.0f)) == 0u);
    CHECK(bits(f(-0.0f)) == 0x80000000u);
    CHECK(f(INFINITY) == INFINITY);
    CHECK(bits(f(-INFINITY)) == 0x80000000u);
    CHECK(bits(f(-1000.0f)) == 0x80000000u);
    CHECK(bits(f(-3e38f)) == 0x80000000u);  // 2u overflows f32, not double
    CHECK(f(1e30f) == 1e30f);
    CHECK(f(3e38f) == 3e38f);
    CHECK(std::isnan(f(NAN)));
    CHECK(f(1.0f) == doctest::Approx(0.8411919906).epsilon(1e-6));  // torch's gelu(1, 'tanh')
    CHECK(f(-1.0f) == doctest::Approx(-0.1588080094).epsilon(1e-6));
    // -10.3: 2u = -94.4, a subnormal result (-9.6e-41), rounded once; the tail keeps its sign.
    const float tail = f(-10.3f);
    CHECK(tail < 0);
    CHECK(std::fabs(static_cast<long double>(tail) - gelu_tanh_reference(static_cast<long double>(-10.3f))) <=
          3 * 0x1p-149L);
}

}  // namespace

TEST_CASE("vec::gelu_tanh within 4 ulp of its exact value, at the edges too") {
    check_bound("gelu_tanh", gelu_tanh_plain, gelu_tanh_reference, 1e6f, 4.0);
    check_gelu_tanh_edges(gelu_tanh_plain);
#if defined(__x86_64__)
    if (!cpu_has_avx2_fma()) return;
    check_bound("gelu_tanh (fma)", gelu_tanh_fma, gelu_tanh_reference, 1e6f, 4.0);
    check_gelu_tanh_edges(gelu_tanh_fma);
#endif
}

TEST_CASE("vec::tanh within 2 ulp, vec::sigmoid within 2.5, vec::silu within 3 of their exact values") {
    check_bound("tanh", tanh_plain, tanh_reference, 40.0f, 2.0);
    check_bound("sigmoid", sigmoid_plain, sigmoid_reference, 130.0f, 2.5);
    check_bound("silu", silu_plain, silu_reference, 130.0f, 3.0);
}

TEST_CASE("vec::tanh, vec::sigmoid and vec::silu at the edges") { check_edges(tanh_plain, sigmoid_plain, silu_plain); }

#if defined(__x86_64__)
TEST_CASE("vec::tanh, vec::sigmoid and vec::silu with FMA contraction") {
    if (!cpu_has_avx2_fma()) return;
    check_bound("tanh (fma)", tanh_fma, tanh_reference, 40.0f, 2.0);
    check_bound("sigmoid (fma)", sigmoid_fma, sigmoid_reference, 130.0f, 2.5);
    check_bound("silu (fma)", silu_fma, silu_reference, 130.0f, 3.0);
    check_edges(tanh_fma, sigmoid_fma, silu_fma);
}
#endif
