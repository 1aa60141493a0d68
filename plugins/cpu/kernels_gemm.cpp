// The f32 GEMM of kernels_gemm.h, blocked the way BLIS and GotoBLAS block it: B is packed in
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
#include "kernels_gemm.h"

#include "runtime.h"

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

using tile_fn = void (*)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool load_c);

// c[i * ldc + j] (+)= sum over p < kc of a[p * MR + i] * b[p * NR + j]: the packed slivers of
// A and B (see pack_a, pack_b). load_c starts from C's values, else from zero.
void tile_generic(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool load_c) {
    constexpr int MR = 4, NV = 2, L = 4, NR = NV * L;
    v4f acc[MR][NV];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NV; ++j) {
            if (load_c)
                std::memcpy(&acc[i][j], c + i * ldc + j * L, sizeof(v4f));
            else
                acc[i][j] = v4f{};
        }
    for (int64_t p = 0; p < kc; ++p) {
        v4f bv[NV];
        for (int j = 0; j < NV; ++j) std::memcpy(&bv[j], b + p * NR + j * L, sizeof(v4f));
        for (int i = 0; i < MR; ++i) {
            const float s = a[p * MR + i];
            for (int j = 0; j < NV; ++j) acc[i][j] += bv[j] * s;
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NV; ++j) std::memcpy(c + i * ldc + j * L, &acc[i][j], sizeof(v4f));
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] void tile_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                           bool load_c) {
    constexpr int MR = 6;
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
        acc[i][0] = load_c ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
        acc[i][1] = load_c ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
    }
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; ++p) {
        const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; ++i) {
            const __m256 s = _mm256_broadcast_ss(a + i);
            acc[i][0] = _mm256_fmadd_ps(s, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(s, b1, acc[i][1]);
        }
        a += MR;
        b += 16;
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
        _mm256_storeu_ps(c + i * ldc, acc[i][0]);
        _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
    }
}

[[gnu::target("avx512f")]] void tile_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                            bool load_c) {
    constexpr int MR = 12;
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
        acc[i][0] = load_c ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
        acc[i][1] = load_c ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < kc; ++p) {
        const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) {
            const __m512 s = _mm512_set1_ps(a[i]);
            acc[i][0] = _mm512_fmadd_ps(s, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(s, b1, acc[i][1]);
        }
        a += MR;
        b += 32;
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
        _mm512_storeu_ps(c + i * ldc, acc[i][0]);
        _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
}
#endif

// One register tile and the block sizes that go with it.
struct gemm_kernel {
    tile_fn fn;
    int64_t mr, nr;      // register tile
    int64_t mc, kc, nc;  // packed blocks of A (mc x kc) and B (kc x nc)
};

constexpr int64_t k_max_tile = 12 * 32;  // largest mr * nr below
constexpr gemm_kernel k_generic = {tile_generic, 4, 8, 128, 256, 4096};
#if defined(__x86_64__)
constexpr gemm_kernel k_avx2 = {tile_avx2, 6, 16, 72, 512, 4080};
constexpr gemm_kernel k_avx512 = {tile_avx512, 12, 32, 120, 256, 4096};
static_assert(k_avx2.mr * k_avx2.nr <= k_max_tile && k_avx512.mr * k_avx512.nr <= k_max_tile);
#endif
static_assert(k_generic.mr * k_generic.nr <= k_max_tile);

const gemm_kernel &pick_kernel() {
#if defined(__x86_64__)
    const int l = isa_level();
    if (l == 2) return k_avx512;
    if (l == 1) return k_avx2;
#endif
    return k_generic;
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

// A's rows [0, mc) x columns [0, kc) as slivers of mr rows: sliver s holds a(s*mr + i, p) at
// [p * mr + i]; rows past mc are zero.
void pack_a(int64_t mc, int64_t kc, const float *a, int64_t rs, int64_t cs, int64_t mr, float *dst) {
    for (int64_t r0 = 0; r0 < mc; r0 += mr, dst += mr * kc) {
        const int64_t rows = std::min(mr, mc - r0);
        if (cs == 1 && rs != 1) {
            int64_t i = 0;
#if defined(__x86_64__)
            for (; i + 4 <= rows; i += 4) transpose_4_runs(a + (r0 + i) * rs, rs, kc, dst + i, mr);
#endif
            for (; i < rows; ++i) {
                const float *src = a + (r0 + i) * rs;
                for (int64_t p = 0; p < kc; ++p) dst[p * mr + i] = src[p];
            }
        } else if (rs == 1) {  // A^T views: a column of A is contiguous
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
    }
}

// B's rows [0, kc) x columns [c0, c1) (c0 a multiple of nr) as slivers of nr columns: sliver s
// holds b(p, s*nr + j) at [p * nr + j]; columns past nc are zero.
void pack_b(int64_t kc, int64_t nc, const float *b, int64_t rs, int64_t cs, int64_t nr, float *dst, int64_t c0,
            int64_t c1) {
    for (dst += c0 * kc; c0 < c1; c0 += nr, dst += nr * kc) {
        const int64_t cols = std::min(nr, nc - c0);
        if (cs == 1) {
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

// The C tiles of rows [ic, ic + mc) and B slivers [s0, s1) of the current packed B block; C's
// element (i, j) is at c[i * rs + j * cs].
void compute_block(const gemm_kernel &g, int64_t kc, const float *a_pack, const float *b_pack, int64_t mc,
                   int64_t nc, int64_t s0, int64_t s1, float *c, int64_t rs, int64_t cs, bool load_c) {
    alignas(64) float edge[k_max_tile];
    for (int64_t s = s0; s < s1; ++s) {
        const int64_t jr = s * g.nr;
        const int64_t cols = std::min(g.nr, nc - jr);
        const float *bs = b_pack + jr * kc;
        for (int64_t ir = 0; ir < mc; ir += g.mr) {
            const int64_t rows = std::min(g.mr, mc - ir);
            const float *as = a_pack + ir * kc;
            float *ct = c + ir * rs + jr * cs;
            if (rows == g.mr && cols == g.nr && cs == 1) {
                g.fn(kc, as, bs, ct, rs, load_c);
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
            g.fn(kc, as, bs, edge, g.nr, load_c);
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
double tile_fill(const gemm_kernel &g, int64_t m, int64_t n) {
    return static_cast<double>(m) / static_cast<double>(round_up(m, g.mr)) * static_cast<double>(n) /
           static_cast<double>(round_up(n, g.nr));
}

}  // namespace

double gemm_f32_tile_fill(int64_t m, int64_t n) { return tile_fill(pick_kernel(), m, n); }

void gemm_f32(int64_t m, int64_t n, int64_t k, f32_matrix a, f32_matrix b, float *c, int64_t ldc, bool accumulate) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        if (!accumulate)
            for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
        return;
    }
    const gemm_kernel &g = pick_kernel();
    // C^T = B^T A^T when that fills the register tiles far better: a conv weight gradient with a
    // 3x3 kernel over one channel is 32 x 9, a quarter of 12 x 32 tiles, its transpose three
    // quarters. Each element is the same sequence of operations either way (only a product's
    // factors swap places), so the bits do not change. The transposed tiles are stored through
    // the edge buffer, which costs more than it saves unless the gain is large and k long.
    int64_t rs = ldc, cs = 1;
    if (k >= 64 && tile_fill(g, n, m) > 1.5 * tile_fill(g, m, n)) {
        std::swap(m, n);
        std::swap(a, b);
        std::swap(a.row_stride, a.col_stride);
        std::swap(b.row_stride, b.col_stride);
        std::swap(rs, cs);
    }
    const int64_t kc_max = std::min(k, g.kc);
    const int64_t nc_max = std::min(n, g.nc);
    float *b_pack = scratch_floats(k_slot_pack_b, static_cast<size_t>(kc_max * round_up(nc_max, g.nr)));

    // Threads only for big enough products (the answer is the same either way).
    const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const int threads = macs >= static_cast<double>(k_gemm_parallel_macs) ? thread_count() : 1;

    for (int64_t jc = 0; jc < n; jc += g.nc) {
        const int64_t nc = std::min(g.nc, n - jc);
        const int64_t slivers = ceil_div(nc, g.nr);
        int64_t mc_block = g.mc;
        int64_t mblocks = ceil_div(m, mc_block);
        // Column ranges per A block: enough tasks for every thread, at least 4 slivers each.
        int64_t nchunks = 1;
        if (threads > 1) nchunks = std::clamp<int64_t>(ceil_div(4 * threads, mblocks), 1, std::max<int64_t>(1, slivers / 4));
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
            const int64_t pack_tasks = threads > 1 ? std::min<int64_t>(slivers, 2 * threads) : 1;
            const int64_t per_pack = ceil_div(slivers, pack_tasks);
            parallel_for(ceil_div(slivers, per_pack), [&](int64_t t) {
                pack_b(kc, nc, bsrc, b.row_stride, b.col_stride, g.nr, b_pack, t * per_pack * g.nr,
                       std::min(slivers, (t + 1) * per_pack) * g.nr);
            });
            parallel_for(mblocks * nchunks, [&](int64_t t) {
                const int64_t ic = (t / nchunks) * mc_block, chunk = t % nchunks;
                const int64_t mc = std::min(mc_block, m - ic);
                float *a_pack = scratch_floats(k_slot_pack_a, static_cast<size_t>(kc * round_up(mc, g.mr)));
                pack_a(mc, kc, a.data + ic * a.row_stride + pc * a.col_stride, a.row_stride, a.col_stride, g.mr, a_pack);
                compute_block(g, kc, a_pack, b_pack, mc, nc, chunk * per_chunk, std::min(slivers, (chunk + 1) * per_chunk),
                              c + ic * rs + jc * cs, rs, cs, load_c);
            });
        }
    }
}

}  // namespace tf_cpu
