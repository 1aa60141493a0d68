// gemm_bf16_dot (kernels_gemm.hpp): bf16 x bf16 -> f32 with AVX512-BF16's vdpbf16ps, which adds
// the two products of a pair of bf16 values to an f32 lane in one instruction (twice the
// multiply-adds per instruction of the f32 FMA path, half the bytes of operands).
//
// A is packed as pairs along k (one 32-bit word per row and pair), B in slivers of 32 columns
// holding, per pair, the two bf16 of each column side by side: the layout vdpbf16ps multiplies.
// A register tile is 8 rows x 32 columns (16 zmm accumulators) over the whole k; each task of
// the thread pool owns the C tiles it writes, so the thread count never changes a result.
//
// Untested on hardware where this was written (no AVX512-BF16 CPU at hand): it only runs where
// cpuid reports AVX512_BF16, and TINYFIN_CPU_ISA=avx512 (or lower) turns it off.
#include "kernels_gemm.hpp"

#include "runtime.hpp"

#include <algorithm>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tf_cpu {

#if defined(__x86_64__)
namespace {

constexpr int64_t k_mr = 8, k_nr = 32;

// Pairs (a(i, 2q), a(i, 2q + 1)) as one word, low half first; rows past m and a last odd
// column are zero.
void pack_a_pairs(int64_t m, int64_t k, BF16Matrix a, int64_t rows, int64_t kp, uint32_t *dst) {
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t q = 0; q < kp; ++q) {
            uint32_t lo = 0, hi = 0;
            if (i < m) {
                lo = a.data[i * a.row_stride + 2 * q * a.col_stride];
                if (2 * q + 1 < k) hi = a.data[i * a.row_stride + (2 * q + 1) * a.col_stride];
            }
            dst[i * kp + q] = lo | hi << 16;
        }
}

// Sliver s, pair q, column j: (b(2q, 32s + j), b(2q + 1, 32s + j)) at dst[(s * kp + q) * 32 + j].
void pack_b_pairs(int64_t k, int64_t n, BF16Matrix b, int64_t s, int64_t kp, uint32_t *dst) {
    for (int64_t q = 0; q < kp; ++q)
        for (int64_t j = 0; j < k_nr; ++j) {
            const int64_t col = s * k_nr + j;
            uint32_t lo = 0, hi = 0;
            if (col < n) {
                lo = b.data[2 * q * b.row_stride + col * b.col_stride];
                if (2 * q + 1 < k) hi = b.data[(2 * q + 1) * b.row_stride + col * b.col_stride];
            }
            dst[(s * kp + q) * k_nr + j] = lo | hi << 16;
        }
}

// C rows [0, rows) x columns [0, cols) of one 8 x 32 tile.
[[gnu::target("avx512f,avx512bf16")]] void tile_dpbf16(int64_t kp, const uint32_t *a, const uint32_t *b, float *c,
                                                       int64_t ldc, int64_t rows, int64_t cols) {
    __m512 acc[k_mr][2];
    for (int i = 0; i < k_mr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t q = 0; q < kp; ++q) {
        const __m512i b0 = _mm512_loadu_si512(b + q * k_nr), b1 = _mm512_loadu_si512(b + q * k_nr + 16);
#pragma GCC unroll 8
        for (int i = 0; i < k_mr; ++i) {
            const __m512i s = _mm512_set1_epi32(static_cast<int>(a[i * kp + q]));
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], (__m512bh)s, (__m512bh)b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], (__m512bh)s, (__m512bh)b1);
        }
    }
    const __mmask16 m0 = cols >= 16 ? 0xffff : static_cast<__mmask16>((1u << cols) - 1);
    const __mmask16 m1 = cols >= 32 ? 0xffff : cols <= 16 ? 0 : static_cast<__mmask16>((1u << (cols - 16)) - 1);
    for (int64_t i = 0; i < rows; ++i) {
        _mm512_mask_storeu_ps(c + i * ldc, m0, acc[i][0]);
        _mm512_mask_storeu_ps(c + i * ldc + 16, m1, acc[i][1]);
    }
}

}  // namespace

void gemm_bf16_dot(int64_t m, int64_t n, int64_t k, BF16Matrix a, BF16Matrix b, float *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    const int64_t kp = (k + 1) / 2;
    const int64_t rows = (m + k_mr - 1) / k_mr * k_mr, slivers = (n + k_nr - 1) / k_nr;
    std::vector<uint32_t> a_pack(static_cast<size_t>(rows * kp)), b_pack(static_cast<size_t>(slivers * kp * k_nr));
    const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const bool threads = macs >= static_cast<double>(k_gemm_parallel_macs);
    pack_a_pairs(m, k, a, rows, kp, a_pack.data());
    auto pack = [&](int64_t s) { pack_b_pairs(k, n, b, s, kp, b_pack.data()); };
    // Tasks: 64-row blocks by slivers.
    constexpr int64_t block = 8 * k_mr;
    const int64_t mblocks = (m + block - 1) / block;
    auto task = [&](int64_t t) {
        const int64_t i0 = (t / slivers) * block, s = t % slivers;
        for (int64_t i = i0; i < std::min(m, i0 + block); i += k_mr)
            tile_dpbf16(kp, a_pack.data() + i * kp, b_pack.data() + s * kp * k_nr, c + i * ldc + s * k_nr, ldc,
                        std::min(k_mr, m - i), std::min(k_nr, n - s * k_nr));
    };
    if (threads) {
        parallel_for(slivers, [&](int64_t s) { pack(s); });
        parallel_for(mblocks * slivers, [&](int64_t t) { task(t); });
        return;
    }
    for (int64_t s = 0; s < slivers; ++s) pack(s);
    for (int64_t t = 0; t < mblocks * slivers; ++t) task(t);
}
#else
void gemm_bf16_dot(int64_t, int64_t, int64_t, BF16Matrix, BF16Matrix, float *, int64_t) {}
#endif

}  // namespace tf_cpu
