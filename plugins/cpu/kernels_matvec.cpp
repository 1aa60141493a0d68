// matmul_skinny (kernels_matvec.hpp): few rows of A against a B read once.
//
// A transposed B (linear's x W^T, W [N, K] row-major: every LLM projection) on AVX2: each task
// streams its own contiguous rows of W; each W row is a dot product with the rows of A, widened
// to f32 in registers 16 elements at a time, with no staging buffer (dot_block below).
//
// A row-major B (dense along N) on AVX2: each task owns units of 64 columns of one B, read in
// place a piece of K at a time; each output is the GEMM's chain of FMAs along K (rows_block below).
//
// Any other B (strided) or the portable level: each task owns a range of units of two
// nr-wide column slivers of one B; for every kc-long piece of K it converts the slivers' elements
// into [kc][nr] f32 buffers that stay in L1 (gemm_f32_pack_b's layout) and runs the GEMM's
// register tiles over the staged rows of A (gemm_f32_rows_a; one row on AVX2: a tile of four
// accumulators, the same operations), accumulating in the tile buffer between pieces as the GEMM
// does between its KC blocks: each output element is computed in the GEMM's order of operations.
#include "kernels_matvec.hpp"

#include "kernels.hpp"
#include "kernels_gemm.hpp"
#include "runtime.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace tf_cpu {
namespace {

bool is_float_dtype(int32_t d) { return d == TF_DTYPE_F32 || d == TF_DTYPE_F16 || d == TF_DTYPE_BF16; }

float load_float(int32_t dtype, const char *p) {
    if (dtype == TF_DTYPE_F32) return Traits<float>::load(p);
    if (dtype == TF_DTYPE_F16) return Traits<Half>::load(p);
    return Traits<BFloat16>::load(p);
}

// B's element (p, j) at b + p * row + j * col (bytes), dtype `dtype`.
struct BSource {
    const char *b;
    int64_t row, col;
    int32_t dtype;
};

// dst[p * nr + j] = B(p0 + p, j0 + j) for p < kc, j < cols; zero for cols <= j < nr. Any strides.
void pack_any(const BSource &s, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int64_t nr, float *dst) {
    for (int64_t p = 0; p < kc; ++p) {
        const char *row = s.b + (p0 + p) * s.row + j0 * s.col;
        for (int64_t j = 0; j < cols; ++j) dst[p * nr + j] = load_float(s.dtype, row + j * s.col);
        for (int64_t j = cols; j < nr; ++j) dst[p * nr + j] = 0.0f;
    }
}

#if defined(__x86_64__)
bool cpu_has_f16c() {
    static const bool f16c = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
    }();
    return f16c;
}

// Eight consecutive elements of dtype D at p as f32 (bf16: its bits shifted into the high half,
// exact; f16: F16C's conversion, exact).
template <int32_t D>
[[gnu::target("avx2,fma,f16c")]] inline __m256 load8(const char *p) {
    if constexpr (D == TF_DTYPE_F32) {
        return _mm256_loadu_ps(reinterpret_cast<const float *>(p));
    } else if constexpr (D == TF_DTYPE_F16) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    } else {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
}

// ---- A transposed B (linear's x W^T): dot products along W's rows ------------------------------
//
// Element p of column j of B is W(j, p) at w + j * wrow + p * es: output (i, j) is the dot product
// of row i of A with row j of W, both contiguous along K. W is streamed once, straight from its
// storage, 16 elements per step widened to f32 in registers (bf16: the 32-bit lanes shifted left
// by 16 give the even elements and masked give the odd ones, both exact; f16: F16C, exact; f32:
// as they are) and multiplied by the matching 16 elements of A's f32 row (for bf16 stored with the
// step's even elements first: permute_for_dot). Output (i, j) has two 8-lane accumulators, one per
// half of the step, each summed along K in order; then the two are added and the lanes summed in a
// fixed order (sum_accumulators), then the elements past the last whole step are added one by one.
// These operations do not depend on M, on which rows share a pass or on the thread count.

// How far ahead of the element being multiplied each W row asks for its memory (into L2: the
// hardware prefetchers alone leave the loads waiting on DRAM; docs/performance.md).
constexpr int64_t k_dot_prefetch_bytes = 48 << 10;
// Steps of K per piece when A's rows take several passes over W: a piece of four W rows (4 x 2
// KiB of bf16) stays in L1 between the passes.
constexpr int64_t k_dot_piece_steps = 64;
// Accumulator floats per output, and outputs of W per block of the accumulator array.
constexpr int64_t k_dot_acc = 16, k_dot_rows = 4;
// Outputs (rows of W) per unit of work.
constexpr int64_t k_dot_unit = 16;

template <int32_t D>
constexpr int64_t dot_elem_bytes = D == TF_DTYPE_F32 ? 4 : 2;

// Sixteen elements of dtype D at p as two f32 vectors: lo holds the even elements, hi the odd
// ones. bf16 in element order (lane l: elements 2l and 2l + 1); f32 and f16 in the order one
// in-lane shuffle gives (lane l: elements 2e and 2e + 1, e = k_pair_of_lane[l]).
template <int32_t D>
[[gnu::target("avx2,fma,f16c")]] inline void widen16(const char *p, __m256 &lo, __m256 &hi) {
    if constexpr (D == TF_DTYPE_BF16) {
        __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
        asm("" : "+x"(w));  // one load: GCC would otherwise fold a second one into the mask
        lo = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
        hi = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
        return;
    }
    __m256 v0, v1;
    if constexpr (D == TF_DTYPE_F16) {
        v0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        v1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16)));
    } else {
        v0 = _mm256_loadu_ps(reinterpret_cast<const float *>(p));
        v1 = _mm256_loadu_ps(reinterpret_cast<const float *>(p + 32));
    }
    lo = _mm256_shuffle_ps(v0, v1, 0x88);  // elements 0 2 8 10 | 4 6 12 14
    hi = _mm256_shuffle_ps(v0, v1, 0xDD);  // elements 1 3 9 11 | 5 7 13 15
}

// For f32 and f16, the pair of elements (2e, 2e + 1) of a step that lane l holds.
constexpr int k_pair_of_lane[8] = {0, 1, 4, 5, 2, 3, 6, 7};

// Step s of R rows of W times MB rows of A into the accumulators (output (i, r) at i * R + r).
template <int32_t D, int R, int MB>
[[gnu::target("avx2,fma,f16c"), gnu::always_inline]] inline void dot_step(const char *w, int64_t wrow, int64_t s,
                                                                          const float *x, int64_t xrow,
                                                                          __m256 (&lo)[MB * R], __m256 (&hi)[MB * R]) {
    constexpr int64_t step = 16 * dot_elem_bytes<D>;
    for (int r = 0; r < R; ++r) {
        __m256 wl, wh;
        widen16<D>(w + r * wrow + s * step, wl, wh);
        for (int i = 0; i < MB; ++i) {
            lo[i * R + r] = _mm256_fmadd_ps(wl, _mm256_loadu_ps(x + i * xrow + s * 16), lo[i * R + r]);
            hi[i * R + r] = _mm256_fmadd_ps(wh, _mm256_loadu_ps(x + i * xrow + s * 16 + 8), hi[i * R + r]);
        }
    }
}

// R rows of W (w, w + wrow, ...) times MB rows of A (x, x + xrow, ...: f32, permuted for D) over
// the steps [s0, s1) of 16 elements. Output (i, r)'s accumulators live at acc + i * k_dot_rows *
// k_dot_acc + r * k_dot_acc between calls (zeroed before the first).
template <int32_t D, int R, int MB>
[[gnu::target("avx2,fma,f16c")]] void dot_rows_avx2(const char *w, int64_t wrow, int64_t s0, int64_t s1, const float *x,
                                                    int64_t xrow, float *acc) {
    constexpr int64_t step = 16 * dot_elem_bytes<D>;
    constexpr int64_t per_line = 64 / step;  // steps per cache line of a W row: 2 (16-bit), 1 (f32)
    __m256 lo[MB * R], hi[MB * R];
    for (int i = 0; i < MB; ++i)
        for (int r = 0; r < R; ++r) {
            lo[i * R + r] = _mm256_loadu_ps(acc + (i * k_dot_rows + r) * k_dot_acc);
            hi[i * R + r] = _mm256_loadu_ps(acc + (i * k_dot_rows + r) * k_dot_acc + 8);
        }
    int64_t s = s0;
    for (; s + per_line <= s1; s += per_line) {
        // One line per row, far enough ahead to overlap DRAM with the products.
        for (int r = 0; r < R; ++r) _mm_prefetch(w + r * wrow + s * step + k_dot_prefetch_bytes, _MM_HINT_T1);
        for (int64_t q = 0; q < per_line; ++q) dot_step<D, R, MB>(w, wrow, s + q, x, xrow, lo, hi);
    }
    for (; s < s1; ++s) dot_step<D, R, MB>(w, wrow, s, x, xrow, lo, hi);
    for (int i = 0; i < MB; ++i)
        for (int r = 0; r < R; ++r) {
            _mm256_storeu_ps(acc + (i * k_dot_rows + r) * k_dot_acc, lo[i * R + r]);
            _mm256_storeu_ps(acc + (i * k_dot_rows + r) * k_dot_acc + 8, hi[i * R + r]);
        }
}

// One output from its accumulators and the elements of K past the last whole step (x and w there).
// The accumulators' lanes hold pairs p of elements (2p, 2p + 1); they are summed as
// ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)) whatever the lane order of D, so that a bf16 or
// f16 product is bit for bit the f32 product of the converted operands.
template <int32_t D>
[[gnu::target("avx2,fma,f16c")]] float finish_dot(const float *acc, const float *x, const char *w, int64_t from,
                                                  int64_t k) {
    const __m256 v = _mm256_add_ps(_mm256_loadu_ps(acc), _mm256_loadu_ps(acc + 8));
    __m128 h;
    if constexpr (D == TF_DTYPE_BF16) {  // lanes: p0 .. p7
        h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // p0+p4 p1+p5 p2+p6 p3+p7
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    } else {  // lanes: p0 p1 p4 p5 | p2 p3 p6 p7
        const __m256 t = _mm256_add_ps(v, _mm256_permute_ps(v, 0x4E));  // p0+p4 p1+p5 .. | p2+p6 p3+p7 ..
        h = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    }
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float sum = _mm_cvtss_f32(h);
    for (int64_t p = from; p < k; ++p) sum = std::fma(x[p], load_float(D, w + p * dot_elem_bytes<D>), sum);
    return sum;
}

// One row of A (x, permuted) times four rows of W over all `steps` whole steps, accumulators in
// registers from zero: the four outputs' sums of their lanes, in finish_dot's order, in one
// vector (the elements past the last whole step are not added). The loop is dot_rows_avx2's with
// R = 4, MB = 1; the lane sums of the four rows share their shuffles.
template <int32_t D>
[[gnu::target("avx2,fma,f16c")]] __m128 dot4_avx2(const char *w, int64_t wrow, int64_t steps, const float *x) {
    constexpr int64_t step = 16 * dot_elem_bytes<D>;
    constexpr int64_t per_line = 64 / step;
    __m256 lo[4], hi[4];
    for (int r = 0; r < 4; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
    int64_t s = 0;
    for (; s + per_line <= steps; s += per_line) {
        for (int r = 0; r < 4; ++r) _mm_prefetch(w + r * wrow + s * step + k_dot_prefetch_bytes, _MM_HINT_T1);
        for (int64_t q = 0; q < per_line; ++q) dot_step<D, 4, 1>(w, wrow, s + q, x, 0, lo, hi);
    }
    for (; s < steps; ++s) dot_step<D, 4, 1>(w, wrow, s, x, 0, lo, hi);
    // Per row, a[l] = p_l + p_(l+4) for the lane pairs p0 .. p7 (finish_dot's first level).
    __m128 a[4];
    for (int r = 0; r < 4; ++r) {
        const __m256 v = _mm256_add_ps(lo[r], hi[r]);
        const __m128 l = _mm256_castps256_ps128(v), h = _mm256_extractf128_ps(v, 1);
        if constexpr (D == TF_DTYPE_BF16) {  // lanes p0 .. p3 | p4 .. p7
            a[r] = _mm_add_ps(l, h);
        } else {  // lanes p0 p1 p4 p5 | p2 p3 p6 p7
            a[r] = _mm_add_ps(_mm_shuffle_ps(l, h, 0x44), _mm_shuffle_ps(l, h, 0xEE));
        }
    }
    // Row r's sum (a0 + a2) + (a1 + a3), the four rows at once.
    const __m128 s01 = _mm_add_ps(_mm_unpacklo_ps(a[0], a[1]), _mm_unpackhi_ps(a[0], a[1]));
    const __m128 s23 = _mm_add_ps(_mm_unpacklo_ps(a[2], a[3]), _mm_unpackhi_ps(a[2], a[3]));
    return _mm_add_ps(_mm_movelh_ps(s01, s23), _mm_movehl_ps(s23, s01));
}

// A's rows as the dot kernel reads them: each whole step of 16 elements reordered as the
// elements its lo accumulators take, then those of hi (bf16: 0 2 .. 14, then 1 3 .. 15; f32 and
// f16: the pairs in k_pair_of_lane's order); the elements past the last whole step as they are.
void permute_for_dot(int32_t dtype, float *x, int64_t k) {
    float tmp[16];
    for (int64_t s = 0; s + 16 <= k; s += 16) {
        for (int l = 0; l < 8; ++l) {
            const int pair = dtype == TF_DTYPE_BF16 ? l : k_pair_of_lane[l];
            tmp[l] = x[s + 2 * pair];
            tmp[8 + l] = x[s + 2 * pair + 1];
        }
        std::memcpy(x + s, tmp, sizeof tmp);
    }
}

// Rows [0, rows) of W (at w, wrow bytes apart) times m <= k_skinny_max_rows rows of A (xs, xrow
// floats apart, permuted), into c[i * ldc + r].
template <int32_t D>
void dot_block(const char *w, int64_t wrow, int64_t k, int64_t rows, int64_t m, const float *xs, int64_t xrow, float *c,
               int64_t ldc) {
    const int64_t steps = k / 16;
    alignas(32) float acc[k_skinny_max_rows * k_dot_rows * k_dot_acc];
    // One pass over W for up to three rows of A; with more, a piece of W is read again from L1.
    const int64_t piece = m <= 3 ? std::max<int64_t>(steps, 1) : k_dot_piece_steps;
    for (int64_t r0 = 0; r0 < rows; r0 += k_dot_rows) {
        const int64_t rn = std::min(k_dot_rows, rows - r0);
        const char *wr = w + r0 * wrow;
        if (m == 1 && rn == 4) {  // one row of A: four outputs with their sums in registers
            alignas(16) float sums[4];
            _mm_store_ps(sums, dot4_avx2<D>(wr, wrow, steps, xs));
            for (int64_t r = 0; r < 4; ++r) {
                float sum = sums[r];
                const char *wp = wr + r * wrow;
                for (int64_t p = steps * 16; p < k; ++p)
                    sum = std::fma(xs[p], load_float(D, wp + p * dot_elem_bytes<D>), sum);
                c[r0 + r] = sum;
            }
            continue;
        }
        std::memset(acc, 0, sizeof(float) * static_cast<size_t>(m * k_dot_rows * k_dot_acc));
        for (int64_t s0 = 0; s0 < steps; s0 += piece) {
            const int64_t s1 = std::min(steps, s0 + piece);
            for (int64_t i0 = 0; i0 < m; i0 += 3) {
                const int64_t mb = std::min<int64_t>(3, m - i0);
                const float *x = xs + i0 * xrow;
                float *a = acc + i0 * k_dot_rows * k_dot_acc;
                if (mb == 1 && rn == 4) {
                    dot_rows_avx2<D, 4, 1>(wr, wrow, s0, s1, x, xrow, a);
                    continue;
                }
                for (int64_t r = 0; r < rn; r += 2) {  // pairs of W rows, then a single one
                    const char *wp = wr + r * wrow;
                    float *ar = a + r * k_dot_acc;
                    if (rn - r >= 2) {
                        if (mb == 1)
                            dot_rows_avx2<D, 2, 1>(wp, wrow, s0, s1, x, xrow, ar);
                        else if (mb == 2)
                            dot_rows_avx2<D, 2, 2>(wp, wrow, s0, s1, x, xrow, ar);
                        else
                            dot_rows_avx2<D, 2, 3>(wp, wrow, s0, s1, x, xrow, ar);
                    } else {
                        if (mb == 1)
                            dot_rows_avx2<D, 1, 1>(wp, wrow, s0, s1, x, xrow, ar);
                        else if (mb == 2)
                            dot_rows_avx2<D, 1, 2>(wp, wrow, s0, s1, x, xrow, ar);
                        else
                            dot_rows_avx2<D, 1, 3>(wp, wrow, s0, s1, x, xrow, ar);
                    }
                }
            }
        }
        for (int64_t i = 0; i < m; ++i)
            for (int64_t r = 0; r < rn; ++r)
                c[i * ldc + r0 + r] =
                    finish_dot<D>(acc + (i * k_dot_rows + r) * k_dot_acc, xs + i * xrow, wr + r * wrow, steps * 16, k);
    }
}

using DotFn = void (*)(const char *, int64_t, int64_t, int64_t, int64_t, const float *, int64_t, float *, int64_t);

// The dot kernel for a transposed B of this dtype (element stride es, any row stride), or nullptr.
DotFn avx2_dot(const BSource &s) {
    if (isa_level() < 1 || (s.dtype == TF_DTYPE_F16 && !cpu_has_f16c())) return nullptr;
    const int64_t es = s.dtype == TF_DTYPE_F32 ? 4 : 2;
    if (s.row != es) return nullptr;
    switch (s.dtype) {
    case TF_DTYPE_F32: return dot_block<TF_DTYPE_F32>;
    case TF_DTYPE_F16: return dot_block<TF_DTYPE_F16>;
    default: return dot_block<TF_DTYPE_BF16>;
    }
}

// ---- A row-major B read in place (a recurrent step's h R^T, R^T stored [K, N]) ----------------
//
// Row p of B is contiguous along j: B's elements are loaded where they lie (widened to f32 in
// registers: exact) and multiplied by A's rows broadcast, output (i, j) accumulating one FMA per
// p in order from 0: the GEMM's AVX2 sequence (kernels_gemm.hpp), so the GEMM's bits, without its
// per-call packing of B. K is taken in pieces so that the piece of B a unit reads stays in L1
// while A's rows take their passes over it; between pieces the accumulators wait in c (an f32
// store and load: exact), so a piece boundary does not change the sequence.

// Columns of B per unit of work (eight AVX2 vectors), and rows of K per piece (64 KiB of f32 B
// over 64 columns would not fit L1; 16 KiB does).
constexpr int64_t k_rows_unit = 64;
constexpr int64_t k_rows_piece = 64;
// The most rows of A per B read in place: each element of B is then loaded once per unit. With
// more, the rows' passes over a piece of B reread it from L1, where a B whose row stride is a
// multiple of 4 KiB keeps only 8 of the piece's rows (set aliasing: 16 rows of A against a
// [256, 1024] B took 1.6x the packed path's time, 4 rows in tiles of 4 x 2 vectors 1.15x); the
// packed slivers below serve those.
constexpr int64_t k_rows_max_rows = 3;

// MB rows of A (x, xrow floats apart) times NV vectors of 8 columns of B (b, row stride brow
// bytes) over rows [p0, p1) of K; accumulators from c[i * ldc + 8 v] (zero when p0 = 0).
template <int32_t D, int MB, int NV>
[[gnu::target("avx2,fma,f16c")]] void rows_tile_avx2(const char *b, int64_t brow, int64_t p0, int64_t p1,
                                                     const float *x, int64_t xrow, float *c, int64_t ldc) {
    constexpr int64_t es = dot_elem_bytes<D>;
    __m256 acc[MB][NV];
    for (int i = 0; i < MB; ++i)
        for (int v = 0; v < NV; ++v) acc[i][v] = p0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(c + i * ldc + 8 * v);
    for (int64_t p = p0; p < p1; ++p) {
        const char *row = b + p * brow;
        __m256 bv[NV];
        for (int v = 0; v < NV; ++v) bv[v] = load8<D>(row + 8 * v * es);
        for (int i = 0; i < MB; ++i) {
            const __m256 a = _mm256_broadcast_ss(x + i * xrow + p);
            for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(a, bv[v], acc[i][v]);
        }
    }
    for (int i = 0; i < MB; ++i)
        for (int v = 0; v < NV; ++v) _mm256_storeu_ps(c + i * ldc + 8 * v, acc[i][v]);
}

// cols <= k_rows_unit columns of B (b: column 0) times m <= k_skinny_max_rows rows of A (xs, xrow
// floats apart) into c[i * ldc + j].
template <int32_t D>
[[gnu::target("avx2,fma,f16c")]] void rows_block(const char *b, int64_t brow, int64_t k, int64_t cols, int64_t m,
                                                 const float *xs, int64_t xrow, float *c, int64_t ldc) {
    constexpr int64_t es = dot_elem_bytes<D>;
    const int64_t vecs = cols / 8;
    for (int64_t p0 = 0; p0 < k; p0 += k_rows_piece) {
        const int64_t p1 = std::min(k, p0 + k_rows_piece);
        int64_t i0 = 0;
        if (m == 1 && vecs == 8) {
            rows_tile_avx2<D, 1, 8>(b, brow, p0, p1, xs, xrow, c, ldc);
            i0 = 1;
        }
        for (; i0 < m; i0 += 3) {  // three rows of A with four vectors (twelve accumulators), then fewer
            const int64_t mb = std::min<int64_t>(3, m - i0);
            const float *x = xs + i0 * xrow;
            for (int64_t v = 0; v < vecs; v += 4) {
                float *cv = c + i0 * ldc + 8 * v;
                const char *bv = b + 8 * v * es;
                const int64_t nv = std::min<int64_t>(4, vecs - v);
#define TF_ROWS(MB)                                                                                                    \
    if (nv == 4)                                                                                                       \
        rows_tile_avx2<D, MB, 4>(bv, brow, p0, p1, x, xrow, cv, ldc);                                                  \
    else if (nv == 3)                                                                                                  \
        rows_tile_avx2<D, MB, 3>(bv, brow, p0, p1, x, xrow, cv, ldc);                                                  \
    else if (nv == 2)                                                                                                  \
        rows_tile_avx2<D, MB, 2>(bv, brow, p0, p1, x, xrow, cv, ldc);                                                  \
    else                                                                                                               \
        rows_tile_avx2<D, MB, 1>(bv, brow, p0, p1, x, xrow, cv, ldc);
                if (mb == 3) {
                    TF_ROWS(3)
                } else if (mb == 2) {
                    TF_ROWS(2)
                } else {
                    TF_ROWS(1)
                }
#undef TF_ROWS
            }
        }
    }
    // Columns past the last whole vector: the same chain, one FMA at a time.
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = vecs * 8; j < cols; ++j) {
            float sum = 0.0f;
            for (int64_t p = 0; p < k; ++p) sum = std::fma(xs[i * xrow + p], load_float(D, b + p * brow + j * es), sum);
            c[i * ldc + j] = sum;
        }
}

using RowsFn = void (*)(const char *, int64_t, int64_t, int64_t, int64_t, const float *, int64_t, float *, int64_t);

// The in-place kernel for a row-major B of this dtype (unit column stride, any row stride) where
// the GEMM's tiles run FMA chains (AVX2 and AVX-512 levels), or nullptr.
RowsFn avx2_rows(const BSource &s) {
    if (isa_level() < 1 || (s.dtype == TF_DTYPE_F16 && !cpu_has_f16c())) return nullptr;
    if (s.col != (s.dtype == TF_DTYPE_F32 ? 4 : 2)) return nullptr;
    switch (s.dtype) {
    case TF_DTYPE_F32: return rows_block<TF_DTYPE_F32>;
    case TF_DTYPE_F16: return rows_block<TF_DTYPE_F16>;
    default: return rows_block<TF_DTYPE_BF16>;
    }
}

// A row-major B (row p contiguous along j), a full sliver of nr = 8 * G columns.
template <int32_t D, int G>
[[gnu::target("avx2,fma,f16c")]] void pack_rows_avx2(const BSource &s, int64_t p0, int64_t kc, int64_t j0, float *dst) {
    constexpr int64_t nr = 8 * G, es = D == TF_DTYPE_F32 ? 4 : 2;
    for (int64_t p = 0; p < kc; ++p) {
        const char *row = s.b + (p0 + p) * s.row + j0 * es;
        for (int g = 0; g < G; ++g) _mm256_storeu_ps(dst + p * nr + g * 8, load8<D>(row + g * 8 * es));
    }
}

// One row of A times two AVX2 slivers (32 columns) of packed B: c[j] (+)= sum over p of x[p] B(p, j),
// the operations of the GEMM's AVX2 tile (one FMA per p, in order) with four independent
// accumulators instead of the two per row a tile of height 1 would have.
[[gnu::target("avx2,fma")]] void row_times_two_slivers(int64_t kc, const float *x, const float *b0, const float *b1,
                                                       float *c, bool load_c) {
    __m256 a0 = load_c ? _mm256_loadu_ps(c) : _mm256_setzero_ps();
    __m256 a1 = load_c ? _mm256_loadu_ps(c + 8) : _mm256_setzero_ps();
    __m256 a2 = load_c ? _mm256_loadu_ps(c + 16) : _mm256_setzero_ps();
    __m256 a3 = load_c ? _mm256_loadu_ps(c + 24) : _mm256_setzero_ps();
    for (int64_t p = 0; p < kc; ++p) {
        const __m256 v = _mm256_set1_ps(x[p]);
        a0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b0 + p * 16), a0);
        a1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b0 + p * 16 + 8), a1);
        a2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b1 + p * 16), a2);
        a3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b1 + p * 16 + 8), a3);
    }
    _mm256_storeu_ps(c, a0);
    _mm256_storeu_ps(c + 8, a1);
    _mm256_storeu_ps(c + 16, a2);
    _mm256_storeu_ps(c + 24, a3);
}

using PackFn = void (*)(const BSource &, int64_t, int64_t, int64_t, float *);

// The AVX2 packer for a full sliver of nr columns of a row-major B, or nullptr.
PackFn avx2_packer(const BSource &s, int64_t nr) {
    if (isa_level() < 1 || (s.dtype == TF_DTYPE_F16 && !cpu_has_f16c())) return nullptr;
    if (s.col != (s.dtype == TF_DTYPE_F32 ? 4 : 2)) return nullptr;
#define TF_PICK(G)                                                                                                     \
    switch (s.dtype) {                                                                                                 \
    case TF_DTYPE_F32: return pack_rows_avx2<TF_DTYPE_F32, G>;                                                         \
    case TF_DTYPE_F16: return pack_rows_avx2<TF_DTYPE_F16, G>;                                                         \
    default: return pack_rows_avx2<TF_DTYPE_BF16, G>;                                                                  \
    }
    if (nr == 8) TF_PICK(1)
    if (nr == 16) TF_PICK(2)
    if (nr == 32) TF_PICK(4)
#undef TF_PICK
    return nullptr;
}
#endif

// One B and the rows of A that multiply it: rows [first, first + count) of the staged A.
struct Group {
    const char *b;
    int64_t first, count;
};

// cols f32 results c into an output row at o (element stride o_col), rounded once to dtype.
void store_row(int32_t dtype, char *o, int64_t o_col, const float *c, int64_t cols) {
    if (dtype == TF_DTYPE_F32 && o_col == 4) {
        std::memcpy(o, c, static_cast<size_t>(cols) * sizeof(float));
    } else if (dtype == TF_DTYPE_F32) {
        for (int64_t j = 0; j < cols; ++j) Traits<float>::store(o + j * o_col, c[j]);
    } else if (dtype == TF_DTYPE_F16) {
        for (int64_t j = 0; j < cols; ++j) Traits<Half>::store(o + j * o_col, c[j]);
    } else {
        for (int64_t j = 0; j < cols; ++j) Traits<BFloat16>::store(o + j * o_col, c[j]);
    }
}

}  // namespace

bool matmul_skinny(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out) {
    const int r = out.rank;
    if (r < 2 || !is_float_dtype(a.dtype) || !is_float_dtype(b.dtype) || !is_float_dtype(out.dtype)) return false;
    const int64_t m = out.shape[r - 2], n = out.shape[r - 1], k = a.shape[r - 1];
    if (numel(out) == 0 || k == 0 || m > k_skinny_max_rows) return false;
    if (out.dtype == TF_DTYPE_BF16 && a.dtype == TF_DTYPE_BF16 && b.dtype == TF_DTYPE_BF16 && bf16_dot_level() > 0)
        return false;
    const View va = view_of(a), vb = view_of(b), vo = view_of(out);

    // Rows of A and of the output, batch element by batch element; consecutive elements that
    // share their B (a broadcast weight) form one group.
    struct Row {
        const char *a;
        char *o;
    };
    std::vector<Row> rows;
    std::vector<Group> groups;
    bool fits = true;
    walk<3>(r - 2, out.shape, {vo, va, vb}, [&](char *const *p, int64_t count, const int64_t *step) {
        for (int64_t t = 0; t < count && fits; ++t) {
            const char *bp = p[2] + t * step[2];
            if (groups.empty() || groups.back().b != bp) groups.push_back({bp, static_cast<int64_t>(rows.size()), 0});
            if (groups.back().count + m > k_skinny_max_rows) {
                fits = false;
                return;
            }
            groups.back().count += m;
            for (int64_t i = 0; i < m; ++i)
                rows.push_back(
                    {p[1] + t * step[1] + i * va.strides[r - 2], p[0] + t * step[0] + i * vo.strides[r - 2]});
        }
    });
    if (!fits || rows.empty()) return false;

    // A's rows as dense f32 (exact conversions).
    const auto total = static_cast<int64_t>(rows.size());
    float *xs = scratch_floats(k_slot_col, static_cast<size_t>(total * k));
    const int64_t a_col = va.strides[r - 1];
    for (int64_t i = 0; i < total; ++i) {
        float *dst = xs + i * k;
        const char *src = rows[static_cast<size_t>(i)].a;
        if (a.dtype == TF_DTYPE_F32 && a_col == 4) {
            std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
            continue;
        }
        if (load_f32_run(a.dtype, src, a_col, dst, k)) continue;
        for (int64_t p = 0; p < k; ++p) dst[p] = load_float(a.dtype, src + p * a_col);
    }

    const BSource src0{nullptr, vb.strides[r - 2], vb.strides[r - 1], b.dtype};
    const int64_t o_col = vo.strides[r - 1];
    const double macs = static_cast<double>(total) * static_cast<double>(n) * static_cast<double>(k);
    const int threads = macs >= static_cast<double>(k_gemm_parallel_macs) / 8 ? thread_count() : 1;
#if defined(__x86_64__)
    // Each group's output columns in units of `unit`, split into at most max_tasks contiguous
    // ranges of units; kernel(g, j0, cols, c) writes the group's rows for columns [j0, j0 + cols)
    // into c (unit floats a row), which are then stored.
    const auto by_units = [&](auto unit, int64_t max_tasks, const auto &kernel) {
        constexpr int64_t u_cols = decltype(unit)::value;
        const int64_t blocks = (n + u_cols - 1) / u_cols;
        const auto units = static_cast<int64_t>(groups.size()) * blocks;
        const int64_t tasks = std::min(units, max_tasks);
        const int64_t per = (units + tasks - 1) / tasks;
        parallel_for((units + per - 1) / per, [&](int64_t t) {
            alignas(64) float c[k_skinny_max_rows * u_cols];
            for (int64_t u = t * per; u < std::min(units, (t + 1) * per); ++u) {
                const Group &g = groups[static_cast<size_t>(u / blocks)];
                const int64_t j0 = (u % blocks) * u_cols, cols = std::min(u_cols, n - j0);
                kernel(g, j0, cols, c);
                for (int64_t i = 0; i < g.count; ++i)
                    store_row(out.dtype, rows[static_cast<size_t>(g.first + i)].o + j0 * o_col, o_col, c + i * u_cols,
                              cols);
            }
        });
    };
    // A transposed B: each task streams its own contiguous rows of W (units of k_dot_unit rows).
    if (const DotFn dot = avx2_dot(src0)) {
        for (int64_t i = 0; i < total; ++i) permute_for_dot(b.dtype, xs + i * k, k);
        // One unit per task with threads: the pool gives each thread a contiguous range of tasks,
        // so each streams its own part of W in order, and balances the end unit by unit.
        by_units(std::integral_constant<int64_t, k_dot_unit>{}, threads > 1 ? INT64_MAX : 1,
                 [&](const Group &g, int64_t j0, int64_t cols, float *c) {
                     dot(g.b + j0 * src0.col, src0.col, k, cols, g.count, xs + g.first * k, k, c, k_dot_unit);
                 });
        return true;
    }
    // A row-major B with at most k_rows_max_rows rows of A each: read in place, a unit of
    // k_rows_unit columns of one B per step of a task.
    bool few = true;
    for (const Group &g : groups) few = few && g.count <= k_rows_max_rows;
    const RowsFn rows_fn = few ? avx2_rows(src0) : nullptr;
    if (rows_fn) {
        by_units(std::integral_constant<int64_t, k_rows_unit>{}, threads > 1 ? 4 * threads : 1,
                 [&](const Group &g, int64_t j0, int64_t cols, float *c) {
                     rows_fn(g.b + j0 * src0.col, src0.row, k, cols, g.count, xs + g.first * k, k, c, k_rows_unit);
                 });
        return true;
    }
#endif

    const GemmF32Tiling tile = gemm_f32_tile();
    const int64_t nr = tile.nr;
    const int64_t kc = std::max<int64_t>(64, 4096 / nr);  // two [kc][nr] buffers of 16 KiB each
#if defined(__x86_64__)
    const PackFn fast = avx2_packer(src0, nr);
#endif
    // A unit of work: two slivers (2 nr columns) of one B.
    const int64_t width = 2 * nr;
    const int64_t pairs = (n + width - 1) / width;
    const auto units = static_cast<int64_t>(groups.size()) * pairs;
    const int64_t tasks = std::min<int64_t>(units, threads > 1 ? 4 * threads : 1);
    const int64_t per = (units + tasks - 1) / tasks;
    const bool avx2_rows = isa_level() == 1 && nr == 16;

    parallel_for((units + per - 1) / per, [&](int64_t t) {
        float *buf = scratch_floats(k_slot_pack_b, static_cast<size_t>(kc * width));
        alignas(64) float c[(k_skinny_max_rows + 12) * 64];
        int64_t offsets[k_skinny_max_rows];
        for (int64_t u = t * per; u < std::min(units, (t + 1) * per); ++u) {
            const Group &g = groups[static_cast<size_t>(u / pairs)];
            const int64_t j0 = (u % pairs) * width, cols = std::min(width, n - j0);
            const int64_t halves = cols > nr ? 2 : 1;
            BSource src = src0;
            src.b = g.b;
            for (int64_t i = 0; i < g.count; ++i) offsets[i] = i * k;
            for (int64_t p0 = 0; p0 < k; p0 += kc) {
                const int64_t len = std::min(kc, k - p0);
                for (int64_t h = 0; h < halves; ++h) {  // sliver h at buf + h * nr * len
                    const int64_t hc = std::min(nr, cols - h * nr);
#if defined(__x86_64__)
                    if (fast && hc == nr) {
                        fast(src, p0, len, j0 + h * nr, buf + h * nr * len);
                        continue;
                    }
#endif
                    pack_any(src, p0, len, j0 + h * nr, hc, nr, buf + h * nr * len);
                }
                const float *x = xs + g.first * k + p0;
#if defined(__x86_64__)
                if (avx2_rows && g.count == 1 && halves == 2) {
                    row_times_two_slivers(len, x, buf, buf + nr * len, c, p0 > 0);
                    continue;
                }
#endif
                gemm_f32_rows_a(g.count, halves * nr, len, x, offsets, buf, c, width, p0 > 0);
            }
            for (int64_t i = 0; i < g.count; ++i)
                store_row(out.dtype, rows[static_cast<size_t>(g.first + i)].o + j0 * o_col, o_col, c + i * width, cols);
        }
    });
    return true;
}

}  // namespace tf_cpu
