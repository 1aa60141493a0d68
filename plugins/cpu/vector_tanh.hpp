// tanh, sigmoid and silu for f32 tensors in f32 lanes, without libm calls, so the loops over a row
// vectorize (a recurrent layer's gates spent most of their time in libm's double tanh;
// docs/performance.md). Private to the cpu plugin; tests/kernels/test_vector_tanh.cpp compiles it
// too and checks the bounds below against long double references over a sweep of the f32 range.
//
// Both rest on e^y with y = n ln 2 + r, |r| <= ln2 / 2 (n * ln2_hi exact, ln2_lo the rest):
//  - tanh(x) = sign(x) E / (E + 2) with E = e^(2|x|) - 1, written 2^n (e^r - 1) + (2^n - 1) and
//    e^r - 1 = r Q(r) (Q: the Taylor series of (e^r - 1) / r to degree 7), so E keeps its relative
//    accuracy as |x| goes to 0 (tanh(x) = x there; no 1 - something cancellation anywhere).
//    |x| is clamped to 10 first (tanh rounds to 1 beyond 9.01), so E stays finite. Below |x| = 0.4
//    the odd Taylor series to x^17 instead (x plus a correction under 6%).
//  - sigmoid(x) = 1 / (1 + e^-|x|) for x >= 0, e^-|x| / (1 + e^-|x|) below; e^-|x| = m 2^n1 2^n2
//    with m in [0.7, 1.42] and the powers of two applied last, so a subnormal result (x below
//    -87.3) is rounded once; |x| is clamped to 120 (e^-120 rounds to 0). The rounding error of
//    d = 1 + e^-|x| (exact as e^-|x| - (d - 1)) is taken back by a first-order correction.
//  - silu(x) = x sigmoid(x): x / (1 + e^-|x|) for x >= 0, ((x m) / (1 + e^-|x|)) 2^n1 2^n2 below,
//    so its subnormal results too are rounded once; -0 (its limit) below x = -120 and at -inf.
// Bounds (tests/kernels/test_vector_tanh.cpp, normal and subnormal results, with and without FMA
// contraction): tanh within 2 ulp of the exact value, sigmoid within 2.5, silu within 3 (x e^-|x|
// adds a rounding for x < 0); a sweep of every 17th bit pattern measured 1.55, 2.02 and 2.68.
// tanh(+-0) = +-0, tanh(+-inf) = +-1, sigmoid(-inf) = 0, sigmoid(inf) = 1, silu(inf) = inf,
// silu(-0) = -0; NaN stays NaN.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "exp_taylor.hpp"
#include "vector_math.hpp"  // select for f32 lanes

namespace tf_cpu::vec {

namespace logistic {

constexpr float log2e = 1.44269504f, round_magic = 0x1.8p23f;  // adding round_magic rounds to an integer
constexpr float ln2_hi = 0x1.62e4p-1f;  // 16 bits: n * ln2_hi is exact for |n| < 256
constexpr float ln2_lo = 1.42860682e-06f;  // ln 2 - ln2_hi

// y - n ln 2 for the n nearest y / ln 2 (returned in n and in k, whose low mantissa bits hold it).
struct Reduced {
    float r, n, k;
};
[[gnu::always_inline]] inline Reduced reduce(float y) {
    const float k = y * log2e + round_magic;
    const float n = k - round_magic;
    return {(y - n * ln2_hi) - n * ln2_lo, n, k};
}

// n (|n| < 2^22) from k = round_magic + n, as an integer; unsigned so that a NaN's garbage wraps
// instead of overflowing.
[[gnu::always_inline]] inline uint32_t exponent_of(float k) {
    return std::bit_cast<uint32_t>(k) - std::bit_cast<uint32_t>(round_magic);
}

// 2^n for the integer n held as exponent_of gives it (-126 <= n <= 127).
[[gnu::always_inline]] inline float pow2(uint32_t n) { return std::bit_cast<float>((n + 127u) << 23); }

// (e^r - 1) / r for |r| <= ln2 / 2: the sum of r^j / (j + 1)! for j = 0..7 (the first omitted
// term is below 2e-9 of the sum).
[[gnu::always_inline]] inline float expm1_over_r(float r) {
    float p = 1.0f / 362880.0f;  // 1 / 9!
    p = p * r + 1.0f / 40320.0f;
    p = p * r + 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    return p * r + 1.0f;
}

// e^-a for 0 <= a <= 120 as m 2^n1 2^n2 (m in [0.7, 1.42], n1, n2 >= -87: normal).
struct Scaled {
    float m, scale1, scale2;
};
[[gnu::always_inline]] inline Scaled exp_neg(float a) {
    const Reduced d = reduce(-a);
    const uint32_t n = exponent_of(d.k);
    const uint32_t n1 = static_cast<uint32_t>(static_cast<int32_t>(n) >> 1), n2 = n - n1;
    return {exp_taylor<7>(d.r), pow2(n1), pow2(n2)};
}

constexpr float tanh_clamp = 10.0f, sigmoid_clamp = 120.0f;

}  // namespace logistic

[[gnu::always_inline]] inline float tanh(float x) {
    using namespace logistic;
    const float a0 = std::fabs(x);
    const float a = select(a0 > tanh_clamp, tanh_clamp, a0);  // NaN passes
    const Reduced d = reduce(2 * a);  // n in [0, 29]
    const float scale = pow2(exponent_of(d.k));
    const float e = scale * (d.r * expm1_over_r(d.r)) + (scale - 1);  // e^(2a) - 1
    const float big = e / (e + 2);
    // Below 0.4 the odd Taylor series to x^17 (first omitted term below 1e-9 of the sum):
    // x plus a small correction, a smaller error than E / (E + 2)'s two roundings.
    const float z = a * a;
    float p = 6404582.0f / 10854718875.0f;
    p = p * z - 929569.0f / 638512875.0f;
    p = p * z + 21844.0f / 6081075.0f;
    p = p * z - 1382.0f / 155925.0f;
    p = p * z + 62.0f / 2835.0f;
    p = p * z - 17.0f / 315.0f;
    p = p * z + 2.0f / 15.0f;
    p = p * z - 1.0f / 3.0f;
    const float small = a + a * (z * p);
    const float t = select(a < 0.4f, small, big);
    return std::bit_cast<float>(std::bit_cast<uint32_t>(t) | (std::bit_cast<uint32_t>(x) & 0x80000000u));
}

[[gnu::always_inline]] inline float sigmoid(float x) {
    using namespace logistic;
    const float a0 = std::fabs(x);
    const float a = select(a0 > sigmoid_clamp, sigmoid_clamp, a0);
    const Scaled e = exp_neg(a);
    const float ev = (e.m * e.scale1) * e.scale2;
    const float d = 1 + ev;  // 1 + e^-|x|
    const float dl = ev - (d - 1);  // d's rounding error (d - 1 is exact)
    const float q = e.m / d, inv = 1 / d, c = dl * inv;  // 1 / (d + dl) = (1 / d) (1 - c) closely
    const float below = ((q - q * c) * e.scale1) * e.scale2;
    return select(x < 0, below, inv - inv * c);  // NaN: 1 / NaN
}

[[gnu::always_inline]] inline float silu(float x) {
    using namespace logistic;
    const float a0 = std::fabs(x);
    const bool far = a0 > sigmoid_clamp;  // false for NaN
    const float a = select(far, sigmoid_clamp, a0);
    const Scaled e = exp_neg(a);
    const float ev = (e.m * e.scale1) * e.scale2;
    const float d = 1 + ev;
    const float dl = ev - (d - 1);
    const float qn = (x * e.m) / d, qp = x / d, c = dl / d;
    const float below = ((qn - qn * c) * e.scale1) * e.scale2;
    const float y = select(x < 0, below, select(x == 0, x, qp - qp * c));  // -0 - -0 would be +0
    return select(far, select(x < 0, -0.0f, x), y);
}

// gelu's tanh form, 0.5 x (1 + tanh(u)) with u = sqrt(2 / pi) (x + 0.044715 x^3), as
// x sigmoid(2u), silu's arithmetic with 2u in place of x (1 + tanh(u) cancels for x < 0). 2u =
// x (c1 + c3 x^2) and its reduction by ln 2 are computed in double: rounded to f32, 2u's error
// times |2u| (up to 120 in e^-|2u|) would cost tens of ulp in the negative tail. 2u has x's sign
// and cannot overflow in double.
[[gnu::always_inline]] inline float gelu_tanh(float x) {
    using namespace logistic;
    constexpr double c1 = 1.5957691216057308;  // 2 sqrt(2 / pi)
    constexpr double c3 = c1 * 0.044715;
    const double xd = x;
    const double a0 = std::fabs(xd * (c1 + c3 * (xd * xd)));  // |2u|
    const bool far = a0 > sigmoid_clamp;  // false for NaN
    const double a = select(far, static_cast<double>(sigmoid_clamp), a0);
    // e^-a = e^r 2^n1 2^n2, n = n1 + n2 in [-174, 0] (n1, n2 >= -87: normal powers of two).
    constexpr double round_magic_wide = 0x1.8p52;  // adding it rounds a double to an integer
    const double k = -a * 1.4426950408889634 + round_magic_wide, n = k - round_magic_wide;
    const float r = static_cast<float>(-a - n * 0.6931471805599453);
    // n from k's low bits, as an integer (a NaN's garbage wraps instead of overflowing).
    const uint32_t ni = static_cast<uint32_t>(std::bit_cast<uint64_t>(k));
    const uint32_t n1 = static_cast<uint32_t>(static_cast<int32_t>(ni) >> 1), n2 = ni - n1;
    const float m = exp_taylor<7>(r), scale1 = pow2(n1), scale2 = pow2(n2);
    const float ev = (m * scale1) * scale2;
    const float d = 1 + ev;
    const float dl = ev - (d - 1);
    const float qn = (x * m) / d, qp = x / d, c = dl / d;
    const float below = ((qn - qn * c) * scale1) * scale2;
    const float y = select(x < 0, below, select(x == 0, x, qp - qp * c));  // -0 - -0 would be +0
    return select(far, select(x < 0, -0.0f, x), y);
}

}  // namespace tf_cpu::vec
