// matmul_rows_prepacked (kernels_matvec.hpp): at most 3 rows of A against a constant row-major f32
// B that the GEMM keeps packed (packed_weights.hpp), on AVX2.
//
// A row-major B read in place by a few rows (matmul_skinny's rows kernel) reads each B row in
// pieces of 64 columns, 256 bytes out of every row stride: a half-used stream when B is wider
// than a unit, slower from memory than a contiguous one (docs/performance.md, "fashion_cnn's
// Linear and MaxPool"). The packed copy the GEMM keeps for the same weight (one copy serves both)
// holds each 16-column sliver contiguous along K: the rows here stream S slivers at once, each
// one cache line per step of K, which the hardware prefetchers follow (software prefetches added
// nothing).
//
// Every output element is the GEMM's sequence of operations (kernels_gemm.hpp): from 0, one FMA
// per p = 0, 1, ..., k - 1 in order, then + bias[j] (one f32 addition) for matmul_bias; the
// accumulators stay in registers across the packed K blocks (the GEMM stores and reloads them
// between blocks: exact). Tasks own whole column groups, so the thread count never changes a bit.
#include "kernels.hpp"
#include "kernels_gemm.hpp"
#include "kernels_matvec.hpp"
#include "packed_weights.hpp"
#include "runtime.hpp"

#include <algorithm>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tf_cpu {
namespace {

constexpr int64_t k_max_rows = 3;  // rows of A per B: register tiles of 1-3 rows
constexpr int64_t k_nr = 16;  // the AVX2 GEMM's sliver width

#if defined(__x86_64__)
// Where the packed B of gemm_f32_prepack_b keeps sliver `s` (k_nr columns from s * k_nr) of the
// K block starting at row pc: N blocks of nc columns outer, K blocks of kc rows inner, each a run
// of slivers of its block's rows.
struct PackedLayout {
    const float *b;
    int64_t k, n, kc, nc;
    const float *sliver(int64_t s, int64_t pc) const {
        const int64_t jc = s * k_nr / nc * nc, width = std::min(nc, n - jc);
        const int64_t padded = (width + k_nr - 1) / k_nr * k_nr;
        return b + jc * k + pc * padded + (s * k_nr - jc) * std::min(kc, k - pc);
    }
};

// MB rows of A (x, k floats apart) times S slivers [s0, s0 + S) of the packed B, all of K, into
// acc rows of S * k_nr floats (out, row stride ld).
template <int MB, int S>
[[gnu::target("avx2,fma")]] void rows_slivers(const PackedLayout &b, int64_t s0, const float *x, float *out,
                                              int64_t ld) {
    __m256 acc[MB][2 * S];
    for (int i = 0; i < MB; ++i)
        for (int v = 0; v < 2 * S; ++v) acc[i][v] = _mm256_setzero_ps();
    for (int64_t pc = 0; pc < b.k; pc += b.kc) {
        const int64_t kc = std::min(b.kc, b.k - pc);
        const float *bs[S];
        for (int s = 0; s < S; ++s) bs[s] = b.sliver(s0 + s, pc);
        for (int64_t p = 0; p < kc; ++p) {
            for (int s = 0; s < S; ++s) {
                const __m256 b0 = _mm256_loadu_ps(bs[s] + p * k_nr), b1 = _mm256_loadu_ps(bs[s] + p * k_nr + 8);
                for (int i = 0; i < MB; ++i) {
                    const __m256 a = _mm256_broadcast_ss(x + i * b.k + pc + p);
                    acc[i][2 * s] = _mm256_fmadd_ps(a, b0, acc[i][2 * s]);
                    acc[i][2 * s + 1] = _mm256_fmadd_ps(a, b1, acc[i][2 * s + 1]);
                }
            }
        }
    }
    for (int i = 0; i < MB; ++i)
        for (int v = 0; v < 2 * S; ++v) _mm256_storeu_ps(out + i * ld + 8 * v, acc[i][v]);
}

using SliversFn = void (*)(const PackedLayout &, int64_t, const float *, float *, int64_t);

// The tile for `rows` rows and `slivers` (1 to slivers_per_group(rows)) slivers.
template <int MB>
SliversFn tile_for(int64_t slivers) {
    if constexpr (MB == 1) {  // eight accumulators: FMA chains enough to hide the latency
        if (slivers == 4) return rows_slivers<1, 4>;
        if (slivers == 3) return rows_slivers<1, 3>;
    }
    if (slivers == 2) return rows_slivers<MB, 2>;
    return rows_slivers<MB, 1>;
}

int64_t slivers_per_group(int64_t rows) { return rows == 1 ? 4 : 2; }
#endif

}  // namespace

bool matmul_rows_prepacked(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out,
                           const float *bias) {
#if defined(__x86_64__)
    const int r = out.rank;
    if (isa_level() != 1 || gemm_f32_tile().nr != k_nr || r < 2) return false;
    if (a.dtype != TF_DTYPE_F32 || b.dtype != TF_DTYPE_F32 || out.dtype != TF_DTYPE_F32) return false;
    const int64_t m = out.shape[r - 2], n = out.shape[r - 1], k = a.shape[r - 1];
    if (numel(out) == 0 || k == 0 || m > k_max_rows) return false;
    const View va = view_of(a), vb = view_of(b), vo = view_of(out);
    constexpr int64_t fs = sizeof(float);
    // B row-major (the GEMM's bits on the in-place path too), rows of the output dense.
    if (vb.strides[r - 1] != fs || vo.strides[r - 1] != fs) return false;

    // The rows of A and of the output; every batch element must share one B.
    struct Row {
        const char *a;
        float *o;
    };
    std::vector<Row> rows;
    const char *b0 = nullptr;
    bool fits = true;
    walk<3>(r - 2, out.shape, {vo, va, vb}, [&](char *const *p, int64_t count, const int64_t *step) {
        for (int64_t t = 0; t < count && fits; ++t) {
            const char *bp = p[2] + t * step[2];
            if (b0 == nullptr) b0 = bp;
            fits = bp == b0 && static_cast<int64_t>(rows.size()) + m <= k_max_rows;
            for (int64_t i = 0; i < m && fits; ++i)
                rows.push_back({p[1] + t * step[1] + i * va.strides[r - 2],
                                reinterpret_cast<float *>(p[0] + t * step[0] + i * vo.strides[r - 2])});
        }
    });
    if (!fits || rows.empty()) return false;
    const auto *b_start = reinterpret_cast<const float *>(b0);
    const auto packed = packed_constant_b(b, b_start, k, n, vb.strides[r - 2] / fs, 1);
    if (!packed) return false;  // not a marked constant: matmul_skinny reads it in place

    // A's rows as dense f32 rows, k floats apart.
    const auto total = static_cast<int64_t>(rows.size());
    float *xs = scratch_floats(k_slot_col, static_cast<size_t>(total * k));
    for (int64_t i = 0; i < total; ++i) {
        const char *src = rows[static_cast<size_t>(i)].a;
        if (va.strides[r - 1] == fs) {
            std::memcpy(xs + i * k, src, static_cast<size_t>(k) * sizeof(float));
            continue;
        }
        for (int64_t p = 0; p < k; ++p) std::memcpy(xs + i * k + p, src + p * va.strides[r - 1], sizeof(float));
    }

    const PackedLayout layout{packed->data(), k, n, gemm_f32_prepack_kc(), gemm_f32_prepack_nc()};
    // Units of work: groups of `per` slivers inside one N block of the packed layout.
    const int64_t slivers = (n + k_nr - 1) / k_nr, per = slivers_per_group(total);
    const int64_t block_slivers = layout.nc / k_nr, groups_per_block = (block_slivers + per - 1) / per;
    const int64_t units = (slivers + block_slivers - 1) / block_slivers * groups_per_block;
    const double macs = static_cast<double>(total) * static_cast<double>(n) * static_cast<double>(k);
    const int64_t tasks = macs >= static_cast<double>(k_gemm_parallel_macs) / 8 ? units : 1;
    const int64_t units_per_task = (units + tasks - 1) / tasks;
    parallel_for((units + units_per_task - 1) / units_per_task, [&](int64_t t) {
        constexpr int64_t ld = 4 * k_nr;
        alignas(64) float c[k_max_rows * ld];
        for (int64_t u = t * units_per_task; u < std::min(units, (t + 1) * units_per_task); ++u) {
            const int64_t block = u / groups_per_block, s0 = block * block_slivers + u % groups_per_block * per;
            const int64_t count = std::min({per, slivers - s0, (block + 1) * block_slivers - s0});
            if (count <= 0) continue;  // the last block's groups past n
            const SliversFn fn = total == 1 ? tile_for<1>(count) : total == 2 ? tile_for<2>(count) : tile_for<3>(count);
            fn(layout, s0, xs, c, ld);
            const int64_t j0 = s0 * k_nr, cols = std::min(count * k_nr, n - j0);
            for (int64_t i = 0; i < total; ++i) {
                float *o = rows[static_cast<size_t>(i)].o + j0;
                const float *ci = c + i * ld;
                for (int64_t j = 0; j < cols; ++j) o[j] = bias ? ci[j] + bias[j0 + j] : ci[j];
            }
        }
    });
    return true;
#else
    (void)a, (void)b, (void)out, (void)bias;
    return false;
#endif
}

}  // namespace tf_cpu
