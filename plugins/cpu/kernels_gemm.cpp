// The f32 GEMM of kernels_gemm.hpp, blocked the way BLIS and GotoBLAS block it: B is packed in
// KC x NC blocks (L3/L2), A in MC x KC blocks (L2), and a register tile of MR x NR elements of
// C is computed from an MR-wide sliver of A and an NR-wide sliver of B (L1).
//
// Register tiles: AVX2 + FMA 6 x 16 and AVX-512F 12 x 32 with fused multiply-adds (intrinsics in
// functions compiled for that target only, called only when cpuid says the CPU has it), and a
// portable 4 x 8 tile of GCC vector types (SSE2 on x86-64) that rounds products and sums
// separately. Every tile accumulates over p in order and starts from C's current value after the
// first KC block, so an element's result does not depend on where it falls in the blocking.
//
// Threads: the packing of a B block is split by slivers, then the MC x NC block grid by A blocks
// and ranges of B slivers; each task owns the C elements it writes, so the thread count never
// changes a result.
#include "kernels_gemm.hpp"

#include "runtime.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// The portable tile must not be contracted into FMAs (and this file's other code has no
// floating-point arithmetic to contract).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tf_cpu {
namespace {

typedef float v4f __attribute__((vector_size(16)));

// How a register tile reads its operands: A(i, p) for its MR rows and B's row p (NR floats) for
// p = 0, 1, ..., kc - 1. Packed slivers (pack_a, pack_b) or matrices read in place through a
// table of row offsets (the convolutions of kernels_conv.cpp read a padded image that way).
struct ASliver {  // A(i, p) at a[p * MR + i]
    const float *a;
    template <int MR>
    float at(int64_t p, int i) const {
        return a[p * MR + i];
    }
};
struct AOffsetRows {  // A(i, p) at a[rows[i] + p]
    const float *a;
    const int64_t *rows;
    template <int MR>
    float at(int64_t p, int i) const {
        return a[rows[i] + p];
    }
};
struct AStridedRows {  // A(i, p) at a[i * lda + p]: a row-major A read in place
    const float *a;
    int64_t lda;
    template <int MR>
    float at(int64_t p, int i) const {
        return a[i * lda + p];
    }
};
struct BSliver {  // B's row p at b + p * NR
    const float *b;
    template <int NR>
    const float *row(int64_t p) const {
        return b + p * NR;
    }
};
struct BOffsetRows {  // B's row p at b + rows[p]
    const float *b;
    const int64_t *rows;
    template <int NR>
    const float *row(int64_t p) const {
        return b + rows[p];
    }
};

// c[i * ldc + j] (+)= sum over p < kc of A(i, p) * B(p, j) for i < MR, j < NR. load_c starts
// from C's values, else from zero. bias (NR floats, or null): bias[j] added to column j's finished
// sums while they are in registers (matmul_bias's last K block), one f32 addition per element,
// the bits of add_bias on the stored tile. MR is the tile's full height or a shorter one for the last
// rows of A (the same operations per element, so the same bits).
template <int MR, class A, class B>
void tile_generic(int64_t kc, A a, B b, float *c, int64_t ldc, bool load_c, const float *bias = nullptr) {
    constexpr int NV = 2, L = 4, NR = NV * L;
    v4f acc[MR][NV];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NV; ++j) {
            if (load_c)
                std::memcpy(&acc[i][j], c + i * ldc + j * L, sizeof(v4f));
            else
                acc[i][j] = v4f{};
        }
    for (int64_t p = 0; p < kc; ++p) {
        const float *row = b.template row<NR>(p);
        v4f bv[NV];
        for (int j = 0; j < NV; ++j) std::memcpy(&bv[j], row + j * L, sizeof(v4f));
        for (int i = 0; i < MR; ++i) {
            const float s = a.template at<MR>(p, i);
            for (int j = 0; j < NV; ++j) acc[i][j] += bv[j] * s;
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NV; ++j) {
            if (bias != nullptr) {
                v4f w;
                std::memcpy(&w, bias + j * L, sizeof w);
                acc[i][j] += w;
            }
            std::memcpy(c + i * ldc + j * L, &acc[i][j], sizeof(v4f));
        }
}

#if defined(__x86_64__)
// NV vectors of 8 per row: the full 6 x 16 tile (NV 2), or half its width (NV 1) for the last
// 8 or fewer columns of an in-place B (gemm_f32_rows_b), the same operations per element.
template <int MR, class A, class B, int NV = 2>
[[gnu::target("avx2,fma")]] void tile_avx2(int64_t kc, A a, B b, float *c, int64_t ldc, bool load_c,
                                           const float *bias = nullptr) {
    __m256 acc[MR][NV];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NV; ++j) acc[i][j] = load_c ? _mm256_loadu_ps(c + i * ldc + 8 * j) : _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; ++p) {
        const float *row = b.template row<8 * NV>(p);
        __m256 bv[NV];
        for (int j = 0; j < NV; ++j) bv[j] = _mm256_loadu_ps(row + 8 * j);
#pragma GCC unroll 6
        for (int i = 0; i < MR; ++i) {
            const __m256 s = _mm256_set1_ps(a.template at<MR>(p, i));
            for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(s, bv[j], acc[i][j]);
        }
    }
    // The loops as the store's (fully unrolled): indexed at run time, acc would live on the stack.
    if (bias != nullptr)
#pragma GCC unroll 6
        for (int i = 0; i < MR; ++i)
            for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_add_ps(acc[i][j], _mm256_loadu_ps(bias + 8 * j));
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NV; ++j) _mm256_storeu_ps(c + i * ldc + 8 * j, acc[i][j]);
}

// A quarter of the 6 x 16 tile's width (4 columns in 128-bit vectors) for the last 4 or fewer
// columns of an in-place B: on cores that split 256-bit FMAs in two halves a 128-bit FMA costs
// half as much, so the 49th position of a 7 x 7 image costs 4 columns, not 8. The same
// operations per element.
template <int MR, class A, class B>
[[gnu::target("avx2,fma")]] void tile_avx2_quarter(int64_t kc, A a, B b, float *c, int64_t ldc, bool load_c) {
    __m128 acc[MR];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) acc[i] = load_c ? _mm_loadu_ps(c + i * ldc) : _mm_setzero_ps();
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; ++p) {
        const __m128 bv = _mm_loadu_ps(b.template row<4>(p));
#pragma GCC unroll 6
        for (int i = 0; i < MR; ++i) acc[i] = _mm_fmadd_ps(_mm_set1_ps(a.template at<MR>(p, i)), bv, acc[i]);
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) _mm_storeu_ps(c + i * ldc, acc[i]);
}

template <int MR, class A, class B>
[[gnu::target("avx512f")]] void tile_avx512(int64_t kc, A a, B b, float *c, int64_t ldc, bool load_c,
                                            const float *bias = nullptr) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
        acc[i][0] = load_c ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
        acc[i][1] = load_c ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < kc; ++p) {
        const float *row = b.template row<32>(p);
        const __m512 b0 = _mm512_loadu_ps(row), b1 = _mm512_loadu_ps(row + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) {
            const __m512 s = _mm512_set1_ps(a.template at<MR>(p, i));
            acc[i][0] = _mm512_fmadd_ps(s, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(s, b1, acc[i][1]);
        }
    }
    if (bias != nullptr) {
        const __m512 w0 = _mm512_loadu_ps(bias), w1 = _mm512_loadu_ps(bias + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) {
            acc[i][0] = _mm512_add_ps(acc[i][0], w0);
            acc[i][1] = _mm512_add_ps(acc[i][1], w1);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
        _mm512_storeu_ps(c + i * ldc, acc[i][0]);
        _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
}
#endif

// One register tile and the block sizes that go with it.
struct GemmKernel {
    int level;  // isa_level() of the tile
    int64_t mr, nr;  // register tile
    int64_t mc, kc, nc;  // packed blocks of A (mc x kc) and B (kc x nc)
};

constexpr int64_t k_max_tile = 12 * 32;  // largest mr * nr below
constexpr int64_t k_max_mr = 12;
constexpr GemmKernel k_generic = {0, 4, 8, 128, 256, 4096};
#if defined(__x86_64__)
constexpr GemmKernel k_avx2 = {1, 6, 16, 72, 512, 4080};
constexpr GemmKernel k_avx512 = {2, 12, 32, 120, 256, 4096};
static_assert(k_avx2.mr * k_avx2.nr <= k_max_tile && k_avx512.mr * k_avx512.nr <= k_max_tile);
#endif
static_assert(k_generic.mr * k_generic.nr <= k_max_tile && k_avx512.mr <= k_max_mr);

const GemmKernel &pick_kernel() {
#if defined(__x86_64__)
    const int l = isa_level();
    if (l == 2) return k_avx512;
    if (l == 1) return k_avx2;
#endif
    return k_generic;
}

// The height of the tile that computes `rows` (<= mr) rows of A: the full tile, or a shorter
// one for the last rows (64 rows are 5 x 12 + 4, not 6 x 12 with 8 rows of zeros).
int64_t tile_rows(const GemmKernel &g, int64_t rows) {
    if (g.level == 0) return 4;
    const int64_t quarter = g.mr / 3;  // AVX-512 12, 8 or 4; AVX2 6, 4 or 2
    return std::min(g.mr, (rows + quarter - 1) / quarter * quarter);
}

#if defined(__x86_64__)
template <int MR, class A, class B>
void narrow_tile_avx2(bool quarter, int64_t kc, A a, B b, float *c, int64_t ldc, bool load_c) {
    if (quarter)
        tile_avx2_quarter<MR, A, B>(kc, a, b, c, ldc, load_c);
    else
        tile_avx2<MR, A, B, 1>(kc, a, b, c, ldc, load_c);
}
#endif

// Runs the AVX2 tile of height tile_rows(g, rows) narrowed to the last `columns` of the tile's
// width: a quarter of it (4 columns) or half (8); false where neither fits or there is none
// (other instruction sets: the caller runs the full tile).
template <class A, class B>
bool run_narrow_tile(const GemmKernel &g, int64_t columns, int64_t rows, int64_t kc, A a, B b, float *c, int64_t ldc,
                     bool load_c) {
#if defined(__x86_64__)
    if (g.level == 1 && columns <= g.nr / 2) {
        const bool quarter = columns <= g.nr / 4;
        const int64_t height = tile_rows(g, rows);
        if (height == 6)
            narrow_tile_avx2<6>(quarter, kc, a, b, c, ldc, load_c);
        else if (height == 4)
            narrow_tile_avx2<4>(quarter, kc, a, b, c, ldc, load_c);
        else
            narrow_tile_avx2<2>(quarter, kc, a, b, c, ldc, load_c);
        return true;
    }
#endif
    (void)g, (void)columns, (void)rows, (void)kc, (void)a, (void)b, (void)c, (void)ldc, (void)load_c;
    return false;
}

// Runs the tile of height tile_rows(g, rows).
template <class A, class B>
void run_tile(const GemmKernel &g, int64_t rows, int64_t kc, A a, B b, float *c, int64_t ldc, bool load_c,
              const float *bias = nullptr) {
    const int64_t height = tile_rows(g, rows);
#if defined(__x86_64__)
    if (g.level == 2) {
        if (height == 12) return tile_avx512<12>(kc, a, b, c, ldc, load_c, bias);
        if (height == 8) return tile_avx512<8>(kc, a, b, c, ldc, load_c, bias);
        return tile_avx512<4>(kc, a, b, c, ldc, load_c, bias);
    }
    if (g.level == 1) {
        if (height == 6) return tile_avx2<6>(kc, a, b, c, ldc, load_c, bias);
        if (height == 4) return tile_avx2<4>(kc, a, b, c, ldc, load_c, bias);
        return tile_avx2<2>(kc, a, b, c, ldc, load_c, bias);
    }
#endif
    (void)height;
    tile_generic<4>(kc, a, b, c, ldc, load_c, bias);
}

#if defined(__x86_64__)
// Four runs of kc floats, `stride` apart from src, as four adjacent columns of a sliver `width`
// floats wide: dst[p * width + q] = src[q * stride + p]. 4 x 4 blocks are transposed in
// registers (a scalar loop writes width * 4 bytes apart for every element).
void transpose_4_runs(const float *src, int64_t stride, int64_t kc, float *dst, int64_t width) {
    const float *s0 = src, *s1 = s0 + stride, *s2 = s1 + stride, *s3 = s2 + stride;
    int64_t p = 0;
    for (; p + 4 <= kc; p += 4) {
        __m128 q0 = _mm_loadu_ps(s0 + p), q1 = _mm_loadu_ps(s1 + p), q2 = _mm_loadu_ps(s2 + p),
               q3 = _mm_loadu_ps(s3 + p);
        _MM_TRANSPOSE4_PS(q0, q1, q2, q3);
        _mm_storeu_ps(dst + p * width, q0);
        _mm_storeu_ps(dst + (p + 1) * width, q1);
        _mm_storeu_ps(dst + (p + 2) * width, q2);
        _mm_storeu_ps(dst + (p + 3) * width, q3);
    }
    for (; p < kc; ++p) {
        dst[p * width] = s0[p];
        dst[p * width + 1] = s1[p];
        dst[p * width + 2] = s2[p];
        dst[p * width + 3] = s3[p];
    }
}
#endif

// kc runs of W floats, `stride` apart from src, one after the other at dst.
template <int W>
void copy_runs(const float *src, int64_t stride, int64_t kc, float *dst) {
    for (int64_t p = 0; p < kc; ++p) std::memcpy(dst + p * W, src + p * stride, W * sizeof(float));
}

// A's rows [0, mc) x columns [0, kc) as slivers: sliver s holds a(s*mr + i, p) at [p * h + i],
// h = tile_rows(g, rows of the sliver) (mr but for the last sliver); rows past mc are zero.
void pack_a(const GemmKernel &g, int64_t mc, int64_t kc, const float *a, int64_t rs, int64_t cs, float *dst) {
    for (int64_t r0 = 0; r0 < mc; r0 += g.mr) {
        const int64_t rows = std::min(g.mr, mc - r0), mr = tile_rows(g, rows);
        if (cs == 1 && rs != 1) {
            int64_t i = 0;
#if defined(__x86_64__)
            for (; i + 4 <= rows; i += 4) transpose_4_runs(a + (r0 + i) * rs, rs, kc, dst + i, mr);
#endif
            for (; i < rows; ++i) {
                const float *src = a + (r0 + i) * rs;
                for (int64_t p = 0; p < kc; ++p) dst[p * mr + i] = src[p];
            }
        } else if (rs == 1) {  // A^T views (a weight gradient's g^T): a column of A is contiguous
            // A full sliver copies a fixed number of floats per p, which the compiler turns into
            // a few vector moves (a loop bound known only at run time stays scalar).
            if (rows == 6 && mr == 6)
                copy_runs<6>(a + r0, cs, kc, dst);
            else if (rows == 12 && mr == 12)
                copy_runs<12>(a + r0, cs, kc, dst);
            else if (rows == 4 && mr == 4)
                copy_runs<4>(a + r0, cs, kc, dst);
            else
                for (int64_t p = 0; p < kc; ++p) {
                    const float *src = a + p * cs + r0;
                    for (int64_t i = 0; i < rows; ++i) dst[p * mr + i] = src[i];
                }
        } else {
            for (int64_t i = 0; i < rows; ++i) {
                const float *src = a + (r0 + i) * rs;
                for (int64_t p = 0; p < kc; ++p) dst[p * mr + i] = src[p * cs];
            }
        }
        if (rows < mr)
            for (int64_t p = 0; p < kc; ++p)
                for (int64_t i = rows; i < mr; ++i) dst[p * mr + i] = 0.0f;
        dst += mr * kc;
    }
}

// B's rows [0, kc) x columns [c0, c1) (c0 a multiple of nr) as slivers of nr columns: sliver s
// holds b(p, s*nr + j) at dst[s * sliver_stride + p * nr + j]; columns past nc are zero.
void pack_b(int64_t kc, int64_t nc, const float *b, int64_t rs, int64_t cs, int64_t nr, float *dst, int64_t c0,
            int64_t c1, int64_t sliver_stride) {
    for (dst += c0 / nr * sliver_stride; c0 < c1; c0 += nr, dst += sliver_stride) {
        const int64_t cols = std::min(nr, nc - c0);
        if (cs == 1) {
            // A full sliver as fixed-width copies (vector moves): a memcpy call per 64-byte run
            // was a visible share of a weight gradient's product (docs/performance.md).
            if (cols == 16 && nr == 16) {
                copy_runs<16>(b + c0, rs, kc, dst);
                continue;
            }
            if (cols == 32 && nr == 32) {
                copy_runs<32>(b + c0, rs, kc, dst);
                continue;
            }
            for (int64_t p = 0; p < kc; ++p) {
                std::memcpy(dst + p * nr, b + p * rs + c0, static_cast<size_t>(cols) * sizeof(float));
                std::fill(dst + p * nr + cols, dst + (p + 1) * nr, 0.0f);
            }
            continue;
        }
        if (rs == 1) {  // B^T views: a column of B is contiguous
            int64_t j = 0;
#if defined(__x86_64__)
            for (; j + 4 <= cols; j += 4) transpose_4_runs(b + (c0 + j) * cs, cs, kc, dst + j, nr);
#endif
            for (; j < cols; ++j) {
                const float *src = b + (c0 + j) * cs;
                for (int64_t p = 0; p < kc; ++p) dst[p * nr + j] = src[p];
            }
        } else {
            for (int64_t j = 0; j < cols; ++j) {
                const float *src = b + (c0 + j) * cs;
                for (int64_t p = 0; p < kc; ++p) dst[p * nr + j] = src[p * rs];
            }
        }
        if (cols < nr)
            for (int64_t p = 0; p < kc; ++p) std::fill(dst + p * nr + cols, dst + (p + 1) * nr, 0.0f);
    }
}

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }
int64_t ceil_div(int64_t v, int64_t by) { return (v + by - 1) / by; }

// How compute_block reads the current A block (mc x kc): packed by pack_a, or, for a row-major
// A (unit column stride), in place with its row stride lda, which saves the packing pass (about a
// fifth of the GEMM's time on the transformer's products of K = 128 to 512). Each tile sees the
// same A(i, p) values in the same order either way, so the bits do not change.
struct ABlock {
    const float *a;
    int64_t lda;  // 0: packed slivers
};

// The register tile of C rows [ir, ir + rows), rows <= mr, from A block `a`.
template <class B>
void run_a_tile(const GemmKernel &g, const ABlock &a, int64_t ir, int64_t rows, int64_t kc, B b, float *c, int64_t ldc,
                bool load_c, const float *bias = nullptr) {
    if (a.lda == 0) return run_tile(g, rows, kc, ASliver{a.a + ir * kc}, b, c, ldc, load_c, bias);
    if (rows == tile_rows(g, rows))
        return run_tile(g, rows, kc, AStridedRows{a.a + ir * a.lda, a.lda}, b, c, ldc, load_c, bias);
    // A short last tile reads its last row again for the rows past the block (their C rows are
    // the edge buffer's scratch), never past A's end.
    int64_t offsets[k_max_mr];
    for (int64_t i = 0; i < g.mr; ++i) offsets[i] = (ir + std::min(i, rows - 1)) * a.lda;
    run_tile(g, rows, kc, AOffsetRows{a.a, offsets}, b, c, ldc, load_c, bias);
}

// A bias added to each finished element of a block: bias[j] for the block's column j
// (col, at the block's first column) or bias[i] for its row i (row, when the product runs as
// C^T = B^T A^T); null members add nothing.
struct BlockBias {
    const float *col = nullptr;
    const float *row = nullptr;
    bool active() const { return col != nullptr || row != nullptr; }
};

// tile[i * ld + j] += bias for rows [0, rows) and columns [0, cols) of a finished tile whose
// first element is C(i0, j0) of the block.
// Four lanes at a time (each lane one f32 addition, as the scalar loop's).
void add_bias(float *tile, int64_t ld, int64_t rows, int64_t cols, int64_t i0, int64_t j0, const BlockBias &bias) {
    for (int64_t i = 0; i < rows; ++i) {
        float *t = tile + i * ld;
        int64_t j = 0;
        if (bias.col != nullptr) {
            const float *b = bias.col + j0;
            for (; j + 4 <= cols; j += 4) {
                v4f v, w;
                std::memcpy(&v, t + j, sizeof v);
                std::memcpy(&w, b + j, sizeof w);
                v += w;
                std::memcpy(t + j, &v, sizeof v);
            }
            for (; j < cols; ++j) t[j] += b[j];
            continue;
        }
        const float b = bias.row[i0 + i];
        const v4f w = {b, b, b, b};
        for (; j + 4 <= cols; j += 4) {
            v4f v;
            std::memcpy(&v, t + j, sizeof v);
            v += w;
            std::memcpy(t + j, &v, sizeof v);
        }
        for (; j < cols; ++j) t[j] += b;
    }
}

// The C tiles of rows [ic, ic + mc) and B slivers [s0, s1) of the current packed B block; C's
// element (i, j) is at c[i * rs + j * cs]. bias: added to each tile once computed (the last K
// block only).
void compute_block(const GemmKernel &g, int64_t kc, const ABlock &a, const float *b_pack, int64_t mc, int64_t nc,
                   int64_t s0, int64_t s1, float *c, int64_t rs, int64_t cs, bool load_c, const BlockBias &bias) {
    alignas(64) float edge[k_max_tile];
    for (int64_t s = s0; s < s1; ++s) {
        const int64_t jr = s * g.nr;
        const int64_t cols = std::min(g.nr, nc - jr);
        const float *bs = b_pack + jr * kc;
        for (int64_t ir = 0; ir < mc; ir += g.mr) {
            const int64_t rows = std::min(g.mr, mc - ir);
            float *ct = c + ir * rs + jr * cs;
            const int64_t height = tile_rows(g, rows);
            if (rows == height && cols == g.nr && cs == 1) {
                // A full, untransposed tile adds a column bias in its registers (all nr of the
                // bias's floats exist); a row bias only comes with a transposed C.
                run_a_tile(g, a, ir, rows, kc, BSliver{bs}, ct, rs, load_c,
                           bias.col != nullptr ? bias.col + jr : nullptr);
                if (bias.row != nullptr) add_bias(ct, rs, rows, cols, ir, jr, bias);
                continue;
            }
            // A partial or transposed tile goes through a full-size buffer: the same operations
            // per element.
            if (load_c) {
                for (int64_t i = 0; i < rows; ++i) {
                    if (cs == 1) {
                        std::memcpy(edge + i * g.nr, ct + i * rs, static_cast<size_t>(cols) * sizeof(float));
                        continue;
                    }
                    for (int64_t j = 0; j < cols; ++j) edge[i * g.nr + j] = ct[i * rs + j * cs];
                }
            }
            run_a_tile(g, a, ir, rows, kc, BSliver{bs}, edge, g.nr, load_c);
            if (bias.active()) add_bias(edge, g.nr, rows, cols, ir, jr, bias);
            if (cs == 1) {
                for (int64_t i = 0; i < rows; ++i)
                    std::memcpy(ct + i * rs, edge + i * g.nr, static_cast<size_t>(cols) * sizeof(float));
                continue;
            }
            for (int64_t j = 0; j < cols; ++j)  // transposed: a tile column is a run of C's memory
                for (int64_t i = 0; i < rows; ++i) ct[i * rs + j * cs] = edge[i * g.nr + j];
        }
    }
}

// The share of the computed tile elements that land in an m x n product.
double tile_fill(const GemmKernel &g, int64_t m, int64_t n) {
    return static_cast<double>(m) / static_cast<double>(round_up(m, g.mr)) * static_cast<double>(n) /
           static_cast<double>(round_up(n, g.nr));
}

}  // namespace

double gemm_f32_tile_fill(int64_t m, int64_t n) { return tile_fill(pick_kernel(), m, n); }

int64_t gemm_f32_prepacked_b_floats(int64_t k, int64_t n) {
    const GemmKernel &g = pick_kernel();
    int64_t floats = 0;
    for (int64_t jc = 0; jc < n; jc += g.nc) floats += k * round_up(std::min(g.nc, n - jc), g.nr);
    return floats;
}

int64_t gemm_f32_prepack_kc() { return pick_kernel().kc; }
int64_t gemm_f32_prepack_nc() { return pick_kernel().nc; }

void gemm_f32_prepack_b(int64_t k, int64_t n, F32Matrix b, float *dst) {
    const GemmKernel &g = pick_kernel();
    for (int64_t jc = 0; jc < n; jc += g.nc) {
        const int64_t nc = std::min(g.nc, n - jc), width = round_up(nc, g.nr);
        for (int64_t pc = 0; pc < k; pc += g.kc) {
            const int64_t kc = std::min(g.kc, k - pc);
            pack_b(kc, nc, b.data + pc * b.row_stride + jc * b.col_stride, b.row_stride, b.col_stride, g.nr, dst, 0,
                   width, g.nr * kc);
            dst += kc * width;
        }
    }
}

void gemm_f32(int64_t m, int64_t n, int64_t k, F32Matrix a, F32Matrix b, float *c, int64_t ldc, bool accumulate,
              const float *b_prepacked, const float *bias) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        if (!accumulate)
            for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
        if (bias != nullptr) add_bias(c, ldc, m, n, 0, 0, BlockBias{bias, nullptr});
        return;
    }
    const GemmKernel &g = pick_kernel();
    // C^T = B^T A^T when that fills the register tiles far better: a conv weight gradient with a
    // 3x3 kernel over one channel is 32 x 9, a quarter of 12 x 32 tiles, its transpose three
    // quarters. Each element is the same sequence of operations either way (only a product's
    // factors swap places), so the bits do not change. The transposed tiles are stored through
    // the edge buffer, which costs more than it saves unless the gain is large and k long.
    int64_t rs = ldc, cs = 1;
    bool swapped = false;  // the bias then runs along C^T's rows
    if (k >= 64 && tile_fill(g, n, m) > 1.5 * tile_fill(g, m, n)) {
        std::swap(m, n);
        std::swap(a, b);
        std::swap(a.row_stride, a.col_stride);
        std::swap(b.row_stride, b.col_stride);
        std::swap(rs, cs);
        b_prepacked = nullptr;  // B is now the old A
        swapped = true;
    }
    // A row-major A is read in place (ABlock); a row stride of 0 (a broadcast row) or 1 (a
    // column vector seen as a row) is packed as before.
    const bool in_place_a = a.col_stride == 1 && a.row_stride > 1 && m > 1;
    const int64_t kc_max = std::min(k, g.kc);
    const int64_t nc_max = std::min(n, g.nc);
    float *b_pack =
        b_prepacked ? nullptr : scratch_floats(k_slot_pack_b, static_cast<size_t>(kc_max * round_up(nc_max, g.nr)));

    // Threads only for big enough products (the answer is the same either way).
    const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const int threads = macs >= static_cast<double>(k_gemm_parallel_macs) ? thread_count() : 1;

    for (int64_t jc = 0; jc < n; jc += g.nc) {
        const int64_t nc = std::min(g.nc, n - jc);
        const int64_t slivers = ceil_div(nc, g.nr);
        int64_t mblocks = ceil_div(m, g.mc);
        // The A blocks evened out (128 rows: 66 + 62, not 72 + 56): they are tasks of the pool.
        int64_t mc_block = round_up(ceil_div(m, mblocks), g.mr);
        // Column ranges per A block: enough tasks for every thread, at least 4 slivers each.
        int64_t nchunks = 1;
        if (threads > 1)
            nchunks = std::clamp<int64_t>(ceil_div(4 * threads, mblocks), 1, std::max<int64_t>(1, slivers / 4));
        const int64_t per_chunk = ceil_div(slivers, nchunks);
        nchunks = ceil_div(slivers, per_chunk);
        // Too few column ranges for the threads (a Linear's [64 x 3136] x [3136 x 128] has 4
        // slivers: one task): split the rows into smaller A blocks instead. Blocking never
        // changes an element's sequence of operations.
        if (threads > 1 && mblocks * nchunks < threads && m > g.mr) {
            mc_block = round_up(ceil_div(m, ceil_div(threads, nchunks)), g.mr);
            mblocks = ceil_div(m, mc_block);
        }
        for (int64_t pc = 0; pc < k; pc += g.kc) {
            const int64_t kc = std::min(g.kc, k - pc);
            const bool load_c = accumulate || pc > 0;
            const float *bsrc = b.data + pc * b.row_stride + jc * b.col_stride;
            const float *b_block = b_prepacked;
            if (b_prepacked) {  // gemm_f32_prepack_b's blocks, in this loop's order
                b_prepacked += kc * round_up(nc, g.nr);
            } else {
                const int64_t pack_tasks = threads > 1 ? std::min<int64_t>(slivers, 2 * threads) : 1;
                const int64_t per_pack = ceil_div(slivers, pack_tasks);
                parallel_for(ceil_div(slivers, per_pack), [&](int64_t t) {
                    pack_b(kc, nc, bsrc, b.row_stride, b.col_stride, g.nr, b_pack, t * per_pack * g.nr,
                           std::min(slivers, (t + 1) * per_pack) * g.nr, g.nr * kc);
                });
                b_block = b_pack;
            }
            parallel_for(mblocks * nchunks, [&](int64_t t) {
                const int64_t ic = (t / nchunks) * mc_block, chunk = t % nchunks;
                const int64_t mc = std::min(mc_block, m - ic);
                const float *a_src = a.data + ic * a.row_stride + pc * a.col_stride;
                ABlock block{a_src, a.row_stride};
                if (!in_place_a) {
                    float *a_pack = scratch_floats(k_slot_pack_a, static_cast<size_t>(kc * round_up(mc, g.mr)));
                    pack_a(g, mc, kc, a_src, a.row_stride, a.col_stride, a_pack);
                    block = {a_pack, 0};
                }
                BlockBias block_bias;
                if (bias != nullptr && pc + kc == k) {
                    if (swapped)
                        block_bias.row = bias + ic;
                    else
                        block_bias.col = bias + jc;
                }
                compute_block(g, kc, block, b_block, mc, nc, chunk * per_chunk,
                              std::min(slivers, (chunk + 1) * per_chunk), c + ic * rs + jc * cs, rs, cs, load_c,
                              block_bias);
            });
        }
    }
}

GemmF32Tiling gemm_f32_tile() {
    const GemmKernel &g = pick_kernel();
    return {g.mr, g.nr};
}

int64_t gemm_f32_packed_a_floats(int64_t m, int64_t k) { return round_up(m, pick_kernel().mr) * k; }

void gemm_f32_pack_a(int64_t m, int64_t k, F32Matrix a, float *dst) {
    pack_a(pick_kernel(), m, k, a.data, a.row_stride, a.col_stride, dst);
}

void gemm_f32_pack_b(int64_t k, int64_t n, F32Matrix b, float *dst, int64_t sliver_stride) {
    const int64_t nr = pick_kernel().nr;
    pack_b(k, n, b.data, b.row_stride, b.col_stride, nr, dst, 0, round_up(n, nr), sliver_stride);
}

void gemm_f32_rows_b(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                     const int64_t *b_rows, float *c, int64_t ldc) {
    const GemmKernel &g = pick_kernel();
    // Blocked like gemm_f32: a KC-row piece of a B sliver (the image rows it reads, a few KiB
    // since neighbouring taps overlap) stays in L1 while every A sliver of an MC x KC block (L2)
    // passes over it; A is read once per block of rows instead of once per B sliver (a 512 x 4608
    // weight is 9 MiB). Later KC blocks start from C's values: the same operations per element.
    // K blocks of equal length, at most half the packed GEMM's: 288 taps as 2 x 144, not 256 + 32
    // (a C tile is loaded and stored once per block).
    const int64_t kc_block = ceil_div(k, std::max<int64_t>(1, ceil_div(k, g.kc / 2))), mc_block = g.mc * 2;
    for (int64_t pc = 0; pc < k; pc += kc_block) {
        const int64_t kc = std::min(kc_block, k - pc);
        for (int64_t ic = 0; ic < m; ic += mc_block) {
            const int64_t mc = std::min(mc_block, m - ic);
            for (int64_t jr = 0; jr < n; jr += g.nr) {
                const BOffsetRows bs{b + jr, b_rows + pc};
                // The last 8 or fewer columns: half a tile (7 x 8 positions of resnet's last
                // stage are 3.5 tiles of 16).
                // The last 4 or fewer: a quarter tile (the 49th position of a 7 x 7 image).
                const int64_t columns = n - jr;
                for (int64_t ir = ic; ir < ic + mc; ir += g.mr) {
                    const int64_t rows = std::min(g.mr, m - ir);
                    float *ct = c + ir * ldc + jr;
                    if (lda == 0) {  // packed: sliver ir holds [p * height + i], height = tile_rows
                        const ASliver as{a + ir * k + pc * tile_rows(g, rows)};
                        if (!run_narrow_tile(g, columns, rows, kc, as, bs, ct, ldc, pc > 0))
                            run_tile(g, rows, kc, as, bs, ct, ldc, pc > 0);
                        continue;
                    }
                    const AStridedRows ar{a + pc + ir * lda, lda};
                    if (rows == tile_rows(g, rows) && run_narrow_tile(g, columns, rows, kc, ar, bs, ct, ldc, pc > 0))
                        continue;
                    run_a_tile(g, ABlock{a + pc, lda}, ir, rows, kc, bs, ct, ldc, pc > 0);
                }
            }
        }
    }
}

void gemm_f32_rows_a(int64_t m, int64_t n, int64_t k, const float *a, const int64_t *a_rows, const float *b_packed,
                     float *c, int64_t ldc, bool accumulate) {
    const GemmKernel &g = pick_kernel();
    int64_t rows[k_max_mr];
    for (int64_t ir = 0; ir < m; ir += g.mr) {
        const int64_t count = std::min(g.mr, m - ir);
        // The rows past m of the last tile repeat its last row: their C rows are scratch.
        for (int64_t i = 0; i < g.mr; ++i) rows[i] = a_rows[ir + std::min(i, count - 1)];
        for (int64_t jr = 0; jr < n; jr += g.nr)
            run_tile(g, count, k, AOffsetRows{a, rows}, BSliver{b_packed + jr * k}, c + ir * ldc + jr, ldc, accumulate);
    }
}

}  // namespace tf_cpu
