// Loops of the row kernels (softmax, norms, sums, f32 arithmetic rows) written so GCC and clang
// vectorize them, and the instruction-set dispatch they use. Private to the cpu plugin.
//
// Sums run in k_lanes interleaved double accumulators (element i goes to lane i % k_lanes), folded
// in a fixed order: the association is a function of the length alone, never of the thread count
// or the instruction set, and double accumulators keep the error of a million-term f32 sum at the
// level of the sequential double sum the reference kernels use.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "exp_taylor.hpp"
#include "runtime.hpp"

namespace tf_cpu::vec {

constexpr int k_lanes = 16;

// cond ? a : b on the bits, in f32 and in double. With a plain `?:` GCC keeps a branch around
// the side it can skip (erfc beyond 12 folds to a constant), and under -ftrapping-math (its
// default) cannot turn it back into a select: the loops calling exp ran scalar.
[[gnu::always_inline]] inline float select(bool cond, float a, float b) {
    const uint32_t m = 0u - static_cast<uint32_t>(cond);
    return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}
[[gnu::always_inline]] inline double select(bool cond, double a, double b) {
    const uint64_t m = uint64_t{0} - static_cast<uint64_t>(cond);
    return std::bit_cast<double>((std::bit_cast<uint64_t>(a) & m) | (std::bit_cast<uint64_t>(b) & ~m));
}

// exp(x) in f32 without branches or calls, within 2 ulp of the correctly rounded value for
// normal results: x = n ln2 + r with |r| <= ln2/2, exp(r) by its degree-7 Taylor polynomial
// (truncation error below 6e-9 relative), times 2^n built in the exponent bits. Results below
// FLT_MIN flush to 0, above FLT_MAX give inf, NaN stays NaN.
[[gnu::always_inline]] inline float exp(float x) {
    constexpr float log2e = 1.44269504088896341f;
    constexpr float ln2_hi = 0.693145751953125f;  // ln 2 in 16 bits, so n * ln2_hi is exact
    constexpr float ln2_lo = 1.42860682030941723e-6f;
    constexpr float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    constexpr float lo = -87.3365447505531f, hi = 88.3762626647949f;  // ln FLT_MIN, ln FLT_MAX
    // Below lo the result is the final select's 0: computing e^0 there instead of e^lo keeps the
    // product p * 2^n normal, as a subnormal product costs a microcode assist per vector on x86
    // (a masked attention score, -1e4 or -FLT_MAX, took twice the time of a visible one).
    float c = select(x < lo, 0.0f, x);  // NaN passes both selects
    c = select(c > hi, hi, c);
    float k = c * log2e + round_magic;
    float n = k - round_magic;
    n = select(n > 127.0f, 127.0f, n);  // hi rounds to 128: keep 2^n finite, r grows to 0.35 at most
    const float r = (c - n * ln2_hi) - n * ln2_lo;
    const float p = exp_taylor<7>(r);
    // n + round_magic holds n in its low mantissa bits; reading them there, instead of converting
    // a float to int, keeps a NaN input defined behaviour (its scale is garbage, p is NaN).
    const uint32_t biased = std::bit_cast<uint32_t>(n + round_magic) - std::bit_cast<uint32_t>(round_magic) + 127u;
    const float scale = std::bit_cast<float>(biased << 23);
    const float y = p * scale;
    return select(x < lo, 0.0f, select(x > hi, INFINITY, y));
}

// e^x for x <= 0 (and -inf or NaN): the max-shifted scores of softmax and attention. The same
// arithmetic as exp above, so the same values there, without the clamps and selects an
// argument above 0 needs (30% faster per element on Zen 1; docs/performance.md). A positive
// argument gives a wrong value (its caller never passes one).
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
    constexpr float log2e = 1.44269504088896341f;
    constexpr float ln2_hi = 0.693145751953125f;
    constexpr float ln2_lo = 1.42860682030941723e-6f;
    constexpr float round_magic = 12582912.0f;
    constexpr float lo = -87.3365447505531f;
    const float c = select(x < lo, 0.0f, x);  // as in exp: e^0 computed, 0 selected
    const float k = c * log2e + round_magic;
    const float n = k - round_magic;
    const float r = (c - n * ln2_hi) - n * ln2_lo;
    const float p = exp_taylor<7>(r);
    // k = round_magic + n exactly (|n| <= 126), so its bits give n as exp's n + round_magic does.
    const uint32_t biased = std::bit_cast<uint32_t>(k) - std::bit_cast<uint32_t>(round_magic) + 127u;
    return select(x < lo, 0.0f, p * std::bit_cast<float>(biased << 23));
}

// The sum over i < n of term(i) (a double), lane i % k_lanes, lanes folded pairwise in a fixed
// order.
template <class Term>
[[gnu::always_inline]] inline double lane_sum(int64_t n, Term term) {
    double acc[k_lanes] = {};
    int64_t i = 0;
    for (; i + k_lanes <= n; i += k_lanes)
        for (int j = 0; j < k_lanes; ++j) acc[j] += term(i + j);
    for (int j = 0; i < n; ++i, ++j) acc[j] += term(i);
    for (int w = k_lanes / 2; w > 0; w /= 2)
        for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    return acc[0];
}

// sum of x[0..n) as doubles.
[[gnu::always_inline]] inline double sum(const float *x, int64_t n) {
    return lane_sum(n, [x](int64_t i) { return static_cast<double>(x[i]); });
}

// The largest element (std::max semantics: a NaN element is skipped, the callers' later
// arithmetic propagates it), -inf for n = 0.
[[gnu::always_inline]] inline float max(const float *x, int64_t n) {
    float acc[k_lanes];
    for (float &a : acc) a = -INFINITY;
    int64_t i = 0;
    for (; i + k_lanes <= n; i += k_lanes)
        for (int j = 0; j < k_lanes; ++j) acc[j] = acc[j] < x[i + j] ? x[i + j] : acc[j];
    for (int j = 0; i < n; ++i, ++j) acc[j] = acc[j] < x[i] ? x[i] : acc[j];
    float m = acc[0];
    for (int j = 1; j < k_lanes; ++j) m = m < acc[j] ? acc[j] : m;
    return m;
}

}  // namespace tf_cpu::vec

// Defines NAME##_generic, NAME##_avx2 and NAME##_avx512 from one always-inline body and NAME,
// which calls the one isa_level() allows. The body is compiled once per instruction set, so the
// same loops vectorize to the widest registers the CPU has.
#if defined(__x86_64__)
#define TF_CPU_ISA_DISPATCH(NAME, PARAMS, ARGS)                                                                        \
    static void NAME##_generic PARAMS { NAME##_body ARGS; }                                                            \
    [[gnu::target("avx2,fma")]] static void NAME##_avx2 PARAMS { NAME##_body ARGS; }                                   \
    [[gnu::target("avx512f")]] static void NAME##_avx512 PARAMS { NAME##_body ARGS; }                                  \
    static void NAME PARAMS {                                                                                          \
        const int level = ::tf_cpu::isa_level();                                                                       \
        if (level == 2)                                                                                                \
            NAME##_avx512 ARGS;                                                                                        \
        else if (level == 1)                                                                                           \
            NAME##_avx2 ARGS;                                                                                          \
        else                                                                                                           \
            NAME##_generic ARGS;                                                                                       \
    }
#else
#define TF_CPU_ISA_DISPATCH(NAME, PARAMS, ARGS)                                                                        \
    static void NAME PARAMS { NAME##_body ARGS; }
#endif
