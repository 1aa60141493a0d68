// The f32 GEMM of kernels_gemm.h, blocked the way BLIS and GotoBLAS block it: B is packed in
// KC x NC blocks (L3/L2), A in MC x KC blocks (L2), and a register tile of MR x NR elements of
// C is computed from an MR-wide sliver of A and an NR-wide sliver of B (L1).
//
// The register tile is written once with GCC vector types and compiled per instruction set
// (generic SSE2, AVX2, AVX-512F); the widest one the CPU and OS support is picked at the first
// call. No path uses fused multiply-add and every tile starts from C's current value, so each
// element of C sees the same rounded operations in the same order on every path.
#include "kernels_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

// Compilers contract a * b + c into one fused multiply-add wherever the target has one (AVX-512F
// does, and -march= builds may; GCC even across statements), which would make results depend on
// the path taken.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tf_cpu {
namespace {

typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));

// c[i * ldc + j] (+)= sum over p < kc of a[p * MR + i] * b[p * NR + j]: the packed slivers of
// A and B (see pack_a, pack_b). load_c starts from C's values, else from zero.
template <int MR, int NV, class V>
[[gnu::always_inline]] inline void tile(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                        bool load_c) {
    constexpr int L = sizeof(V) / sizeof(float);
    constexpr int NR = NV * L;
    V acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) {
            if (load_c)
                std::memcpy(&acc[i][j], c + i * ldc + j * L, sizeof(V));
            else
                acc[i][j] = V{};
        }
    }
    for (int64_t p = 0; p < kc; ++p) {
        V bv[NV];
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) std::memcpy(&bv[j], b + p * NR + j * L, sizeof(V));
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
            const float s = a[p * MR + i];
#pragma GCC unroll 4
            for (int j = 0; j < NV; ++j) acc[i][j] += bv[j] * s;
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) std::memcpy(c + i * ldc + j * L, &acc[i][j], sizeof(V));
    }
}

using tile_fn = void (*)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool load_c);

void tile_generic(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool load_c) {
    tile<4, 2, v4f>(kc, a, b, c, ldc, load_c);
}

#if defined(__x86_64__)
[[gnu::target("avx2")]] void tile_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                       bool load_c) {
    tile<6, 2, v8f>(kc, a, b, c, ldc, load_c);
}

[[gnu::target("avx512f")]] void tile_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                            bool load_c) {
    tile<8, 2, v16f>(kc, a, b, c, ldc, load_c);
}
#endif

// One register tile and the block sizes that go with it.
struct gemm_kernel {
    tile_fn fn;
    int64_t mr, nr;  // register tile
    int64_t mc, kc, nc;  // packed blocks of A (mc x kc) and B (kc x nc)
};

constexpr int64_t k_max_tile = 8 * 32;  // largest mr * nr below
constexpr gemm_kernel k_generic = {tile_generic, 4, 8, 128, 256, 4096};
#if defined(__x86_64__)
constexpr gemm_kernel k_avx2 = {tile_avx2, 6, 16, 120, 256, 4096};
constexpr gemm_kernel k_avx512 = {tile_avx512, 8, 32, 96, 256, 4096};
static_assert(k_avx2.mr * k_avx2.nr <= k_max_tile && k_avx512.mr * k_avx512.nr <= k_max_tile);
#endif
static_assert(k_generic.mr * k_generic.nr <= k_max_tile);

// 0 generic, 1 AVX2, 2 AVX-512F: what the CPU has and the OS saves the registers of. cpuid by
// hand: __builtin_cpu_supports would link libgcc's static constructor (see plugin.cpp).
int detect_level() {
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX)) return 0;
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6 || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & bit_AVX2)) return 0;
    // AVX-512 state: opmask, upper halves of zmm0-15, zmm16-31 (XCR0 bits 5-7).
    if ((b & bit_AVX512F) && (lo & 0xe0) == 0xe0) return 2;
    return 1;
#else
    return 0;
#endif
}

const gemm_kernel &pick_kernel() {
    // Constant-initialised, so no static constructor; racing first calls store the same value.
    static std::atomic<int> level{-1};
    int l = level.load(std::memory_order_relaxed);
    if (l < 0) {
        l = detect_level();
        level.store(l, std::memory_order_relaxed);
    }
#if defined(__x86_64__)
    if (l == 2) return k_avx512;
    if (l == 1) return k_avx2;
#endif
    return k_generic;
}

// A's rows [0, mc) x columns [0, kc) as slivers of mr rows: sliver s holds a(s*mr + i, p) at
// [p * mr + i]; rows past mc are zero.
void pack_a(int64_t mc, int64_t kc, const float *a, int64_t rs, int64_t cs, int64_t mr, float *dst) {
    for (int64_t r0 = 0; r0 < mc; r0 += mr, dst += mr * kc) {
        const int64_t rows = std::min(mr, mc - r0);
        for (int64_t i = 0; i < rows; ++i) {
            const float *src = a + (r0 + i) * rs;
            for (int64_t p = 0; p < kc; ++p) dst[p * mr + i] = src[p * cs];
        }
        for (int64_t i = rows; i < mr; ++i)
            for (int64_t p = 0; p < kc; ++p) dst[p * mr + i] = 0.0f;
    }
}

// B's rows [0, kc) x columns [0, nc) as slivers of nr columns: sliver s holds b(p, s*nr + j) at
// [p * nr + j]; columns past nc are zero.
void pack_b(int64_t kc, int64_t nc, const float *b, int64_t rs, int64_t cs, int64_t nr, float *dst) {
    for (int64_t c0 = 0; c0 < nc; c0 += nr, dst += nr * kc) {
        const int64_t cols = std::min(nr, nc - c0);
        if (cs == 1) {
            for (int64_t p = 0; p < kc; ++p) {
                std::memcpy(dst + p * nr, b + p * rs + c0, static_cast<size_t>(cols) * sizeof(float));
                std::fill(dst + p * nr + cols, dst + (p + 1) * nr, 0.0f);
            }
            continue;
        }
        for (int64_t j = 0; j < cols; ++j) {
            const float *src = b + (c0 + j) * cs;
            for (int64_t p = 0; p < kc; ++p) dst[p * nr + j] = src[p * rs];
        }
        for (int64_t j = cols; j < nr; ++j)
            for (int64_t p = 0; p < kc; ++p) dst[p * nr + j] = 0.0f;
    }
}

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

}  // namespace

void gemm_f32(int64_t m, int64_t n, int64_t k, f32_matrix a, f32_matrix b, float *c, int64_t ldc, bool accumulate,
              std::vector<float> &scratch) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        if (!accumulate)
            for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
        return;
    }
    const gemm_kernel &g = pick_kernel();
    const int64_t kc_max = std::min(k, g.kc);
    const int64_t b_floats = kc_max * round_up(std::min(n, g.nc), g.nr);
    const int64_t a_floats = kc_max * round_up(std::min(m, g.mc), g.mr);
    constexpr int64_t align = 16;  // floats: 64 bytes
    const auto need = static_cast<size_t>(b_floats + a_floats + 2 * align);
    if (scratch.size() < need) scratch.resize(need);
    float *base = scratch.data();
    float *b_pack = base + (align - static_cast<int64_t>(reinterpret_cast<uintptr_t>(base) / sizeof(float) % align)) % align;
    float *a_pack = b_pack + round_up(b_floats, align);

    alignas(64) float edge[k_max_tile] = {};
    for (int64_t jc = 0; jc < n; jc += g.nc) {
        const int64_t nc = std::min(g.nc, n - jc);
        for (int64_t pc = 0; pc < k; pc += g.kc) {
            const int64_t kc = std::min(g.kc, k - pc);
            const bool load_c = accumulate || pc > 0;
            pack_b(kc, nc, b.data + pc * b.row_stride + jc * b.col_stride, b.row_stride, b.col_stride, g.nr, b_pack);
            for (int64_t ic = 0; ic < m; ic += g.mc) {
                const int64_t mc = std::min(g.mc, m - ic);
                pack_a(mc, kc, a.data + ic * a.row_stride + pc * a.col_stride, a.row_stride, a.col_stride, g.mr, a_pack);
                for (int64_t jr = 0; jr < nc; jr += g.nr) {
                    const int64_t cols = std::min(g.nr, nc - jr);
                    const float *bs = b_pack + jr * kc;
                    for (int64_t ir = 0; ir < mc; ir += g.mr) {
                        const int64_t rows = std::min(g.mr, mc - ir);
                        const float *as = a_pack + ir * kc;
                        float *ct = c + (ic + ir) * ldc + jc + jr;
                        if (rows == g.mr && cols == g.nr) {
                            g.fn(kc, as, bs, ct, ldc, load_c);
                            continue;
                        }
                        // A partial tile goes through a full-size buffer.
                        if (load_c)
                            for (int64_t i = 0; i < rows; ++i)
                                std::memcpy(edge + i * g.nr, ct + i * ldc, static_cast<size_t>(cols) * sizeof(float));
                        g.fn(kc, as, bs, edge, g.nr, load_c);
                        for (int64_t i = 0; i < rows; ++i)
                            std::memcpy(ct + i * ldc, edge + i * g.nr, static_cast<size_t>(cols) * sizeof(float));
                    }
                }
            }
        }
    }
}

}  // namespace tf_cpu
