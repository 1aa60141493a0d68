// erf, the exact gelu, its gradient and exp for f32 tensors without libm calls, so the loops
// over a row vectorize.
// Private to the cpu plugin; tests/kernels/test_vector_erf.cpp compiles it too.
//
// Both are evaluated in double from the f32 input and rounded once to f32, as the plugin's other
// transcendental functions are, so their results differ from the correctly rounded value by at
// most one ulp (and rarely at all): erfc(z) for 0 <= z <= 12 is t P(s) e^(-z^2) with
// t = 1 / (1 + z/2), s = (7t - 4) / 3 and P of degree 13 (tools/fit_erfc.py derives P; relative
// error below 3e-11 on [0, 12]); e^y by its degree-11 Taylor polynomial around the nearest
// multiple of ln 2 (relative error below 1e-14). Beyond z = 12 erfc is below 1.4e-64, far
// under f32's smallest subnormal even after gelu's factor x, so it is taken as 0 there.
// erf(z) is its Taylor series below |z| = 0.5 (where 1 - erfc(z) would lose relative accuracy)
// and 1 - erfc(|z|) with z's sign above. gelu(x) = x Phi(x) with Phi(x) = erfc(-x/sqrt 2) / 2
// written as x Q(|x|) for x < 0 and x (1 - Q(x)) above, Q(z) = erfc(z / sqrt 2) / 2: no
// cancellation for large negative x. NaN stays NaN; erf(+-inf) = +-1; gelu(-inf) = -0.
#ifndef TINYFIN_CPU_VECTOR_ERF_H
#define TINYFIN_CPU_VECTOR_ERF_H

#include <bit>
#include <cmath>
#include <cstdint>

#include "exp_taylor.h"

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

// cond ? a : b on the bits. With a plain `?:` GCC moves the computation of a side into a branch
// when it can (erfc beyond 12 folds to a constant), and under -ftrapping-math, its default, it
// cannot turn that branch back into a select, so the loop would not vectorize.
[[gnu::always_inline]] inline double select(bool cond, double a, double b) {
    const uint64_t m = 0 - static_cast<uint64_t>(cond);
    return std::bit_cast<double>((std::bit_cast<uint64_t>(a) & m) | (std::bit_cast<uint64_t>(b) & ~m));
}

// e^x for f32 x, evaluated in double and rounded once to f32 (as libm's expf computes it; the
// exp op's kernel, where vector_math.h's faster vec::exp, within 2 ulp, serves softmax):
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

[[gnu::always_inline]] inline float gelu(float x) {
    constexpr double inv_sqrt2 = 0.70710678118654752;
    const double xd = x;
    const double z = std::fabs(xd) * inv_sqrt2;
    const double e = erfc_bounded(z);
    const double q = select(z > 12, 0.0, 0.5 * e);  // NaN passes
    const double p = 1 - q;
    const double y = xd * select(xd < 0, q, p);
    // Below x = -16.9 the value is below 1e-63: -0 (also for -inf, where y is -inf * q).
    return static_cast<float>(select((xd < 0) & (z > 12), -0.0, y));
}

// gelu's gradient dy (Phi(x) + x phi(x)) in double, rounded once: Phi as in gelu above and
// phi(x) = e^(-x^2/2) / sqrt(2 pi) from the same exponential as erfc's (one exp per element).
// Beyond |x| = 16.9 phi is below 1e-62 and taken as 0, so Phi + x phi is 0 or 1 there and NaN
// at +-inf (inf * 0), the formula's value; NaN stays NaN.
[[gnu::always_inline]] inline float gelu_backward(float dy, float x) {
    constexpr double inv_sqrt2 = 0.70710678118654752;
    constexpr double inv_sqrt_2pi = 0.39894228040143268;
    const double xd = x;
    const double z = std::fabs(xd) * inv_sqrt2;
    const double e = exp_bounded(-z * z);
    const bool far = z > 12;
    const double q = select(far, 0.0, 0.5 * (erfc_scaled_bounded(z) * e));  // NaN passes
    const double pdf = select(far, 0.0, inv_sqrt_2pi * e);
    const double cdf = select(xd < 0, q, 1 - q);
    return static_cast<float>(static_cast<double>(dy) * (cdf + xd * pdf));
}

}  // namespace tf_cpu::vec

#endif  // TINYFIN_CPU_VECTOR_ERF_H
