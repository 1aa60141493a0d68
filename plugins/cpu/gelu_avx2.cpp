// gelu on f32 rows in AVX2 + FMA intrinsics: vector_erf.hpp's vec::gelu (the same erfc fit, the
// same split exponential, the same selects), four vectors of 8 at a time with each step taken for
// all four before the next. The portable row is one vector's long chain of dependent operations a
// loop iteration, with more constants than registers; Zen 1 (each 256-bit operation in two
// halves, a small scheduler) then ran it at ~4 ns an element (docs/performance.md). A tail of
// fewer than 32 elements goes through a buffer, so every element takes the same arithmetic.
#include "kernels.hpp"
#include "vector_erf.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "avx2_region.hpp"

#include <algorithm>

// Everything below is compiled for AVX2 + FMA; only f32_erf_row (kernels_erf.cpp) calls in,
// when isa_level() says the CPU has both.
TF_CPU_AVX2_BEGIN

namespace tf_cpu {
namespace {

constexpr int N = 4;  // vectors in flight

inline __m256 bcast(float v) { return _mm256_set1_ps(v); }

// vec::gelu on N vectors.
[[gnu::always_inline]] inline void gelu_vectors(__m256 *v) {
    const __m256 sign = bcast(-0.0f), far_at = bcast(vec::k_gelu_far), magic = bcast(0x1.8p23f);
    __m256 x[N], a[N], far[N], m[N], r[N], t[N], p[N];
    __m256i ni[N];
#pragma GCC unroll 4
    for (int q = 0; q < N; ++q) {
        x[q] = v[q];
        const __m256 a0 = _mm256_andnot_ps(sign, x[q]);
        far[q] = _mm256_cmp_ps(a0, far_at, _CMP_GT_OQ);  // false for NaN, which passes through
        a[q] = _mm256_blendv_ps(a0, far_at, far[q]);
        // e^(-a^2/2) as m 2^n1 2^n2 (vec::exp_neg_half_square): a^2 = hi + lo from a's top 12 bits.
        const __m256 ah = _mm256_and_ps(a[q], _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0xfffff000u))));
        const __m256 al = _mm256_sub_ps(a[q], ah);
        const __m256 hi = _mm256_mul_ps(ah, ah);
        const __m256 lo = _mm256_mul_ps(_mm256_fmadd_ps(bcast(2.0f), ah, al), al);
        const __m256 y = _mm256_mul_ps(bcast(-0.5f), hi);
        const __m256 k = _mm256_fmadd_ps(y, bcast(1.44269504f), magic);
        const __m256 n = _mm256_sub_ps(k, magic);
        __m256 rr = _mm256_fnmadd_ps(n, bcast(0x1.62e4p-1f), y);
        rr = _mm256_fnmadd_ps(n, bcast(1.42860682e-06f), rr);
        r[q] = _mm256_fnmadd_ps(bcast(0.5f), lo, rr);
        ni[q] = _mm256_sub_epi32(_mm256_castps_si256(k), _mm256_castps_si256(magic));
        // erfc(w) e^(w^2) with w = a / sqrt 2 (vec::erfc_scaled_f32): t = 1 / (1 + w / 2).
        const __m256 w = _mm256_mul_ps(a[q], bcast(0.707106781f));
        t[q] = _mm256_div_ps(bcast(1.0f), _mm256_fmadd_ps(bcast(0.5f), w, bcast(1.0f)));
    }
    // exp_taylor<8>(r): 1/8!, then m * r + 1/k! for k = 7 .. 0.
    constexpr float exp_c[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 1.0f / 2, 1.0f, 1.0f};
#pragma GCC unroll 4
    for (int q = 0; q < N; ++q) m[q] = bcast(1.0f / 40320);
#pragma GCC unroll 8
    for (float c : exp_c)
#pragma GCC unroll 4
        for (int q = 0; q < N; ++q) m[q] = _mm256_fmadd_ps(m[q], r[q], bcast(c));
    // The erfc fit's polynomial in s = t 2 / (1 - t0) - (1 + t0) / (1 - t0), constant term first.
    constexpr float erfc_c[] = {
        0.569408715f,    0.327187896f,    0.103520989f,    0.00630842429f,  -0.00632728171f, -0.000674869108f,
        0.000624954992f, 9.80038294e-06f, -7.0867638e-05f, 6.55303074e-06f, 5.67081133e-06f,
    };
    constexpr float t0 = 1 / (1 + 10.5f / 2);
    __m256 s[N];
#pragma GCC unroll 4
    for (int q = 0; q < N; ++q) {
        s[q] = _mm256_fmsub_ps(t[q], bcast(2 / (1 - t0)), bcast((1 + t0) / (1 - t0)));
        p[q] = bcast(erfc_c[10]);
    }
#pragma GCC unroll 10
    for (int i = 9; i >= 0; --i)
#pragma GCC unroll 4
        for (int q = 0; q < N; ++q) p[q] = _mm256_fmadd_ps(p[q], s[q], bcast(erfc_c[i]));
#pragma GCC unroll 4
    for (int q = 0; q < N; ++q) {
        // 2^n1 and 2^n2 with n1 = n >> 1, n2 = n - n1: no intermediate underflows before the result.
        const __m256i n1 = _mm256_srai_epi32(ni[q], 1), n2 = _mm256_sub_epi32(ni[q], n1);
        const __m256 scale1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
        const __m256 scale2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
        const __m256 erfc_scaled = _mm256_mul_ps(t[q], p[q]);
        // x Q(|x|) = x erfc(|x| / sqrt 2) / 2; gelu = that for x < 0, x minus it above.
        const __m256 qv = _mm256_mul_ps(
            _mm256_mul_ps(_mm256_mul_ps(x[q], _mm256_mul_ps(_mm256_mul_ps(bcast(0.5f), erfc_scaled), m[q])), scale1),
            scale2);
        const __m256 negative = _mm256_cmp_ps(x[q], _mm256_setzero_ps(), _CMP_LT_OQ);
        const __m256 y = _mm256_blendv_ps(_mm256_sub_ps(x[q], qv), qv, negative);
        // Beyond the far point: -0 below, x above.
        const __m256 far_value = _mm256_blendv_ps(x[q], sign, negative);
        v[q] = _mm256_blendv_ps(y, far_value, far[q]);
    }
}

}  // namespace

void gelu_row_avx2(float *o, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 * N <= n; i += 8 * N) {
        __m256 v[N];
        for (int q = 0; q < N; ++q) v[q] = _mm256_loadu_ps(x + i + 8 * q);
        gelu_vectors(v);
        for (int q = 0; q < N; ++q) _mm256_storeu_ps(o + i + 8 * q, v[q]);
    }
    if (i == n) return;
    alignas(32) float tail[8 * N] = {};
    std::copy(x + i, x + n, tail);
    __m256 v[N];
    for (int q = 0; q < N; ++q) v[q] = _mm256_load_ps(tail + 8 * q);
    gelu_vectors(v);
    for (int q = 0; q < N; ++q) _mm256_store_ps(tail + 8 * q, v[q]);
    std::copy(tail, tail + (n - i), o + i);
}

}  // namespace tf_cpu

TF_CPU_AVX2_END
#endif
