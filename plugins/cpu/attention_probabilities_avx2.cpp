// attention_probabilities (kernels_nn.hpp) in AVX2 + FMA intrinsics: the same arithmetic as the
// portable body in kernels_attention.cpp (scores * scale + mask, max-shifted vec::exp_nonpositive,
// sums in 16 double lanes folded as vec::sum folds them, one f32 reciprocal per row), in three
// passes over a row instead of six: the scaling pass also finds the max, the exp pass also sums.
// GCC vectorizes each of the portable body's passes alone but not the fused ones (a lane array
// inside the loop), and the passes over a 128-key row were half of bert's attention
// (docs/performance.md). The exps run four vectors at a time, step by step (exp_nonpositive<N>);
// a tail shorter than 16 keys goes through a buffer, so every key takes the same vector
// arithmetic wherever it falls.
#include "kernels_nn.hpp"
#include "vector_math.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "avx2_region.hpp"

#include <algorithm>
#include <cmath>

// Everything below, the lambdas included, is compiled for AVX2 + FMA; only
// attention_probabilities calls in, when isa_level() says the CPU has both.
TF_CPU_AVX2_BEGIN

namespace tf_cpu {
namespace {

// vec::exp_nonpositive on N vectors of 8 lanes (the same constants and steps): e^x for x <= 0,
// -inf or NaN. Each step is taken for all N vectors before the next, so that their independent
// chains of dependent FMAs overlap (Zen 1 splits each into two halves, and its scheduler sees too
// few of them ahead to overlap one vector's chain with the next one's). Below lo e^0 is computed
// and 0 selected, as there: e^lo's product would be subnormal (a microcode assist per vector).
template <int N>
[[gnu::always_inline]] inline void exp_nonpositive(__m256 *x) {
    const __m256 lo = _mm256_set1_ps(-87.3365447505531f);
    const __m256 magic = _mm256_set1_ps(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
    __m256 below[N], k[N], r[N], p[N];
#pragma GCC unroll 4
    for (int q = 0; q < N; ++q) {
        below[q] = _mm256_cmp_ps(x[q], lo, _CMP_LT_OQ);  // false for NaN, which passes
        const __m256 c = _mm256_andnot_ps(below[q], x[q]);
        k[q] = _mm256_fmadd_ps(c, _mm256_set1_ps(1.44269504088896341f), magic);
        const __m256 n = _mm256_sub_ps(k[q], magic);
        r[q] = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), c);
        r[q] = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723e-6f), r[q]);
        p[q] = _mm256_set1_ps(1.0f / 5040);
    }
    // exp_taylor<7>: 1/7!, then p * r + 1/k! for k = 6 .. 0.
    constexpr float coefficients[] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 1.0f / 2, 1.0f, 1.0f};
#pragma GCC unroll 7
    for (float c : coefficients) {
        const __m256 cv = _mm256_set1_ps(c);
#pragma GCC unroll 4
        for (int q = 0; q < N; ++q) p[q] = _mm256_fmadd_ps(p[q], r[q], cv);
    }
#pragma GCC unroll 4
    for (int q = 0; q < N; ++q) {
        // k's low mantissa bits hold n: 2^n in the exponent field.
        const __m256i biased =
            _mm256_sub_epi32(_mm256_castps_si256(k[q]), _mm256_set1_epi32(0x4b400000 - 127));  // magic's bits
        const __m256 y = _mm256_mul_ps(p[q], _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23)));
        x[q] = _mm256_andnot_ps(below[q], y);
    }
}

// A row's keys in blocks of 16 (lane j % 16 of vec::max's and vec::sum's accumulators: the low 8
// in the first vector, the high 8 in the second): full blocks read and written in place, the tail
// (fewer than 16) through a buffer padded with zeros (masked loads and stores are microcoded on
// AMD's Zen cores: a masked store cost more than the exp). f(x, lanes, j) takes the block's two
// vectors and returns their new values through x; lanes says which lanes are keys.
template <class F>
inline void for_blocks(float *row, int64_t seen, F f) {
    const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    __m256 lanes[2] = {all, all};
    int64_t j = 0;
    for (; j + 16 <= seen; j += 16) {
        __m256 x[2] = {_mm256_loadu_ps(row + j), _mm256_loadu_ps(row + j + 8)};
        f(x, lanes, j);
        _mm256_storeu_ps(row + j, x[0]);
        _mm256_storeu_ps(row + j + 8, x[1]);
    }
    if (j == seen) return;
    alignas(32) float tail[16] = {};
    const int64_t n = seen - j;
    std::copy(row + j, row + seen, tail);
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int h = 0; h < 2; ++h)
        lanes[h] = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - 8 * h)), index));
    __m256 x[2] = {_mm256_load_ps(tail), _mm256_load_ps(tail + 8)};
    f(x, lanes, j);
    _mm256_store_ps(tail, x[0]);
    _mm256_store_ps(tail + 8, x[1]);
    std::copy(tail, tail + n, row + j);
}

// Scores [0, seen) of a row scaled (+ mask) in place; their max as vec::max finds it: lane
// j % 16 keeps max(v, acc) (acc < v ? v : acc, a NaN skipped), then the lanes folded in order.
float scale_and_max(float *row, const float *mrow, int64_t seen, float scale) {
    const __m256 s = _mm256_set1_ps(scale), none = _mm256_set1_ps(-INFINITY);
    __m256 acc0 = none, acc1 = none;
    for_blocks(row, seen, [&](__m256 *x, const __m256 *lanes, int64_t j) {
        if (mrow) {
            alignas(32) float m[16] = {};
            const float *mj = mrow + j;
            if (j + 16 > seen) {
                std::copy(mrow + j, mrow + seen, m);
                mj = m;
            }
            x[0] = _mm256_fmadd_ps(x[0], s, _mm256_loadu_ps(mj));
            x[1] = _mm256_fmadd_ps(x[1], s, _mm256_loadu_ps(mj + 8));
        } else {
            x[0] = _mm256_mul_ps(x[0], s);
            x[1] = _mm256_mul_ps(x[1], s);
        }
        acc0 = _mm256_max_ps(_mm256_blendv_ps(none, x[0], lanes[0]), acc0);
        acc1 = _mm256_max_ps(_mm256_blendv_ps(none, x[1], lanes[1]), acc1);
    });
    alignas(32) float lane[16];
    _mm256_store_ps(lane, acc0);
    _mm256_store_ps(lane + 8, acc1);
    float m = lane[0];
    for (int l = 1; l < 16; ++l) m = m < lane[l] ? lane[l] : m;
    return m;
}

// row[j] = e^(row[j] - max) for j < seen; their sum as vec::sum adds them: lane j % 16 in double,
// the lanes folded pairwise.
double exp_and_sum(float *row, int64_t seen, float max) {
    const __m256 m = _mm256_set1_ps(max);
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    const auto add = [&](const __m256 *e) {
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e[0])));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e[0], 1)));
        a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(e[1])));
        a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(e[1], 1)));
    };
    // Two blocks of 16 at a time (four exps in flight), each added into the lanes in order.
    int64_t j = 0;
    for (; j + 32 <= seen; j += 32) {
        __m256 x[4];
        for (int q = 0; q < 4; ++q) x[q] = _mm256_sub_ps(_mm256_loadu_ps(row + j + 8 * q), m);
        exp_nonpositive<4>(x);
        for (int q = 0; q < 4; ++q) _mm256_storeu_ps(row + j + 8 * q, x[q]);
        add(x);
        add(x + 2);
    }
    for_blocks(row + j, seen - j, [&](__m256 *x, const __m256 *lanes, int64_t) {
        x[0] = _mm256_sub_ps(x[0], m);
        x[1] = _mm256_sub_ps(x[1], m);
        exp_nonpositive<2>(x);
        x[0] = _mm256_and_ps(x[0], lanes[0]);
        x[1] = _mm256_and_ps(x[1], lanes[1]);
        add(x);
    });
    alignas(32) double lane[16];
    _mm256_store_pd(lane, a0);
    _mm256_store_pd(lane + 4, a1);
    _mm256_store_pd(lane + 8, a2);
    _mm256_store_pd(lane + 12, a3);
    for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
    return lane[0];
}

// row[j] *= f for j < seen.
void scale_row(float *row, int64_t seen, float f) {
    const __m256 v = _mm256_set1_ps(f);
    for_blocks(row, seen, [&](__m256 *x, const __m256 *, int64_t) {
        x[0] = _mm256_mul_ps(x[0], v);
        x[1] = _mm256_mul_ps(x[1], v);
    });
}

}  // namespace

void attention_probabilities_avx2(float *scores, const float *mask, int64_t mask_stride, int64_t tq, int64_t tk,
                                  bool causal, float scale, char *blind) {
    for (int64_t i = 0; i < tq; ++i) {
        float *row = scores + i * tk;
        // Keys [0, seen) are visible to query i; causal hides the rest (0 after the softmax).
        const int64_t seen = causal ? std::clamp<int64_t>(i + tk - tq + 1, 0, tk) : tk;
        const float max = scale_and_max(row, mask ? mask + i * mask_stride : nullptr, seen, scale);
        blind[i] = max == -INFINITY;
        if (blind[i]) {
            std::fill(row, row + tk, NAN);  // softmax over no finite score
            continue;
        }
        const float inv = static_cast<float>(1.0 / exp_and_sum(row, seen, max));
        std::fill(row + seen, row + tk, 0.0f);
        scale_row(row, seen, inv);
    }
}

}  // namespace tf_cpu

TF_CPU_AVX2_END
#endif
