// erf, the exact gelu, its gradient and exp for f32 tensors without libm calls, so the loops
// over a row vectorize.
// Private to the cpu plugin; tests/kernels/test_vector_erf.cpp compiles it too.
//
// erf and exp (the erf and exp ops) are evaluated in double from the f32 input and rounded once
// to f32, as the plugin's other transcendental functions are, so their results differ from the
// correctly rounded value by at most one ulp (and rarely at all): erfc(z) for 0 <= z <= 12 is
// t P(s) e^(-z^2) with t = 1 / (1 + z/2), s = (7t - 4) / 3 and P of degree 13 (tools/fit_erfc.py
// derives P; relative error below 3e-11 on [0, 12]); e^y by its degree-11 Taylor polynomial
// around the nearest multiple of ln 2 (relative error below 1e-14). Beyond z = 12 erfc is below
// 1.4e-64, far under f32's smallest subnormal, so it is taken as 0 there.
// erf(z) is its Taylor series below |z| = 0.5 (where 1 - erfc(z) would lose relative accuracy)
// and 1 - erfc(|z|) with z's sign above. NaN stays NaN; erf(+-inf) = +-1.
//
// gelu and gelu_backward, the transformer MLP's hot pair, run in f32 lanes (twice the lanes of
// double, a polynomial of degree 10 instead of 13; docs/performance.md): the same erfc form on
// [0, 10.5] with its own degree-10 fit (tools/fit_erfc.py --f32, relative error 2e-8), and
// e^(-x^2/2) with x^2 split exactly into two floats and the power of two applied in two halves,
// so that no intermediate underflows before the result does. Within 8 ulp of x Phi(x) over the
// f32 range (tests/kernels/test_vector_erf.cpp measures the worst case), relative accuracy kept
// for large negative x where 0.5 x (1 + erf(x / sqrt 2)) would cancel. gelu(x) = x Phi(x) with
// Phi(x) = Q(|x|) for x < 0 and 1 - Q(x) above, Q(a) = erfc(a / sqrt 2) / 2; gelu(-inf) = -0.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "exp_taylor.hpp"
#include "vector_math.hpp"  // select

namespace tf_cpu::vec {

// e^y for -1020 <= y <= 709 (a normal double result): y = n ln2 + r with |r| <= ln2 / 2.
[[gnu::always_inline]] inline double exp_bounded(double y) {
    constexpr double log2e = 1.4426950408889634;
    constexpr double ln2_hi = 0x1.62e42feep-1;  // ln 2 in 32 bits: n * ln2_hi is exact
    constexpr double ln2_lo = 1.9082149292705877e-10;
    constexpr double round_magic = 0x1.8p52;  // adding it rounds to an integer
    const double k = y * log2e + round_magic;
    const double n = k - round_magic;
    const double r = (y - n * ln2_hi) - n * ln2_lo;
    const double p = exp_taylor<11>(r);
    // k's low mantissa bits hold n (two's complement after the subtraction): 2^n in the exponent.
    const uint64_t biased = std::bit_cast<uint64_t>(k) - std::bit_cast<uint64_t>(round_magic) + 1023u;
    return p * std::bit_cast<double>(biased << 52);
}

// e^x for f32 x, evaluated in double and rounded once to f32 (as libm's expf computes it; the
// exp op's kernel, where vector_math.hpp's faster vec::exp, within 2 ulp, serves softmax):
// within half an ulp + 1e-14 relative of e^x, so it rarely rounds differently from the correctly
// rounded value. The argument is clamped to [-110, 89] first: e^-110 is below half the smallest
// f32 subnormal (0 after rounding) and e^89 above FLT_MAX (inf), so -inf gives 0 and inf gives
// inf; NaN passes the clamps and stays NaN.
[[gnu::always_inline]] inline float exp_rounded(float x) {
    double y = x;
    y = select(y < -110, -110.0, y);  // select, not ?:, for the reason given at select()
    y = select(y > 89, 89.0, y);
    return static_cast<float>(exp_bounded(y));
}

// erfc(z) e^(z^2) for 0 <= z <= 12 (NaN gives NaN); any other value beyond 12 (callers select
// it away).
[[gnu::always_inline]] inline double erfc_scaled_bounded(double z) {
    // tools/fit_erfc.py, constant term first.
    constexpr double c[] = {
        0.56277447878169906,     0.32956191919578326,     0.10737093142076538,    0.0072477600839863628,
        -0.0067813391656051407,  -0.00082802224472750593, 0.00070447659331802882, 1.6952902041671382e-05,
        -8.7002702515914926e-05, 1.5344374585910712e-05,  8.615055148680554e-06,  -4.2320581344417663e-06,
        -3.8641941541474337e-07, 5.0419729657886932e-07,
    };
    const double t = 1 / (1 + 0.5 * z);
    const double s = t * (7.0 / 3) - 4.0 / 3;
    double p = c[13];
    for (int i = 12; i >= 0; --i) p = p * s + c[i];
    return t * p;
}

// erfc(z) for 0 <= z <= 12 (NaN gives NaN); any other value beyond 12 (callers select it away).
[[gnu::always_inline]] inline double erfc_bounded(double z) { return erfc_scaled_bounded(z) * exp_bounded(-z * z); }

[[gnu::always_inline]] inline float erf(float x) {
    const double xd = x, w = xd * xd;
    // Taylor series (2/sqrt pi) sum (-1)^n x^(2n+1) / (n! (2n+1)) to n = 11: the first omitted
    // term is below 3e-16 of the sum for |x| <= 0.5.
    constexpr double two_over_sqrt_pi = 1.1283791670955126;
    double p = -1.0 / (39916800.0 * 23);
    p = p * w + 1.0 / (3628800.0 * 21);
    p = p * w - 1.0 / (362880.0 * 19);
    p = p * w + 1.0 / (40320.0 * 17);
    p = p * w - 1.0 / (5040.0 * 15);
    p = p * w + 1.0 / (720.0 * 13);
    p = p * w - 1.0 / (120.0 * 11);
    p = p * w + 1.0 / (24.0 * 9);
    p = p * w - 1.0 / (6.0 * 7);
    p = p * w + 1.0 / (2.0 * 5);
    p = p * w - 1.0 / 3;
    p = p * w + 1.0;
    const double small = two_over_sqrt_pi * xd * p;
    const double a = std::fabs(xd);
    const double e = erfc_bounded(a);
    const double large = std::copysign(1 - select(a > 12, 0.0, e), xd);  // NaN passes
    return static_cast<float>(select(a < 0.5, small, large));
}

// erfc(w) e^(w^2) for 0 <= w <= 10.5 in f32 (NaN gives NaN).
[[gnu::always_inline]] inline float erfc_scaled_f32(float w) {
    // tools/fit_erfc.py --f32, constant term first.
    constexpr float c[] = {
        0.569408715f,    0.327187896f,    0.103520989f,    0.00630842429f,  -0.00632728171f, -0.000674869108f,
        0.000624954992f, 9.80038294e-06f, -7.0867638e-05f, 6.55303074e-06f, 5.67081133e-06f,
    };
    constexpr float t0 = 1 / (1 + 10.5f / 2);
    const float t = 1 / (1 + 0.5f * w);
    const float s = t * (2 / (1 - t0)) - (1 + t0) / (1 - t0);
    float p = c[10];
    for (int i = 9; i >= 0; --i) p = p * s + c[i];
    return t * p;
}

// e^(-x^2/2) for 0 <= x <= 14.85 as m 2^n1 2^n2: m in [0.7, 1.5], n1 and n2 >= -80, so that
// the caller applies the powers of two last and only its final product can underflow.
struct HalfGaussian {
    float m, scale1, scale2;
};
[[gnu::always_inline]] inline HalfGaussian exp_neg_half_square(float x) {
    // x^2 = hi + lo exactly enough: hi from x's top 12 bits squares exactly, lo = x^2 - hi to a
    // rounding of lo's own size (x^2/2 is up to 110, so rounding x^2 itself would cost ~1e-5).
    const float xh = std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0xfffff000u);
    const float xl = x - xh;
    const float hi = xh * xh, lo = (2 * xh + xl) * xl;
    const float y = -0.5f * hi;
    constexpr float log2e = 1.44269504f, round_magic = 0x1.8p23f;  // adding it rounds to an integer
    constexpr float ln2_hi = 0x1.62e4p-1f;  // 16 bits: n * ln2_hi is exact
    constexpr float ln2_lo = 1.42860682e-06f;  // ln 2 - ln2_hi
    const float k = y * log2e + round_magic;
    const float n = k - round_magic;
    const float r = ((y - n * ln2_hi) - n * ln2_lo) - 0.5f * lo;  // |r| <= ln2 / 2 + 0.05
    const float m = exp_taylor<8>(r);
    // k's low mantissa bits hold n (two's complement after the subtraction).
    const int32_t ni = std::bit_cast<int32_t>(k) - std::bit_cast<int32_t>(round_magic);
    const int32_t n1 = ni >> 1, n2 = ni - n1;
    return {m, std::bit_cast<float>((n1 + 127) << 23), std::bit_cast<float>((n2 + 127) << 23)};
}

// Beyond |x| = 14.85 gelu(x) is -0 or x in f32 and Phi + x phi is 0 or 1 (below 1e-46).
constexpr float k_gelu_far = 14.85f;

[[gnu::always_inline]] inline float gelu(float x) {
    constexpr float inv_sqrt2 = 0.707106781f;
    const float a0 = std::fabs(x);
    const bool far = a0 > k_gelu_far;  // false for NaN, which passes through
    const float a = select(far, k_gelu_far, a0);
    const HalfGaussian e = exp_neg_half_square(a);
    const float q = ((x * (0.5f * erfc_scaled_f32(a * inv_sqrt2) * e.m)) * e.scale1) * e.scale2;  // x Q(|x|)
    const float y = select(x < 0, q, x - q);
    return select(far, select(x < 0, -0.0f, x), y);
}

// gelu's gradient dy (Phi(x) + x phi(x)) with phi(x) = e^(-x^2/2) / sqrt(2 pi) from the same
// exponential as Q's. Within a few 1e-7 of |dy| (1 + |x| phi(x)), the terms' size: relative
// accuracy is lost only near x = -0.75, where Phi + x phi crosses 0. +-inf give NaN (inf * 0, the
// formula's value); NaN stays NaN.
[[gnu::always_inline]] inline float gelu_backward(float dy, float x) {
    constexpr float inv_sqrt2 = 0.707106781f, inv_sqrt_2pi = 0.398942280f;
    const float a0 = std::fabs(x);
    const bool far = a0 > k_gelu_far;
    const float a = select(far, k_gelu_far, a0);
    const HalfGaussian e = exp_neg_half_square(a);
    const float qm = 0.5f * erfc_scaled_f32(a * inv_sqrt2) * e.m;
    const float v = x * (inv_sqrt_2pi * e.m) + select(x < 0, qm, -qm);  // (Phi + x phi) / 2^n, or that minus 1
    const float below = ((dy * v) * e.scale1) * e.scale2;
    const float above = dy * (1 + (v * e.scale1) * e.scale2);  // not dy + dy (...): inf - inf
    const float far_value = dy * (select(x < 0, 0.0f, 1.0f) + x * 0.0f);  // x * 0: NaN at +-inf
    return select(far, far_value, select(x < 0, below, above));
}

}  // namespace tf_cpu::vec
