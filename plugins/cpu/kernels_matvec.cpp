// matmul_skinny (kernels_matvec.hpp): few rows of A against a B read once. Each task owns a range
// of units of two nr-wide column slivers of one B; for every kc-long piece of K it converts the
// slivers' elements into [kc][nr] f32 buffers that stay in L1 (gemm_f32_pack_b's layout) and runs
// the GEMM's register tiles over the staged rows of A (gemm_f32_rows_a; one row on AVX2: a tile
// of four accumulators, the same operations), accumulating in the tile buffer between pieces as
// the GEMM does between its KC blocks. Each output element is computed by one task, in the
// GEMM's order of operations.
#include "kernels_matvec.hpp"

#include "kernels.hpp"
#include "kernels_gemm.hpp"
#include "runtime.hpp"

#include <algorithm>
#include <cstring>
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

// How far ahead along a column of a transposed B the packer asks for the memory it will read.
constexpr int64_t k_prefetch_bytes = 256;

// Four vectors whose 128-bit lanes are 4 x 4 blocks, transposed lane by lane: lane l of v[q]
// becomes element q of every v[i]'s lane l.
[[gnu::target("avx2,fma")]] inline void transpose_lanes4(__m256 v[4]) {
    const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
    const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
    v[0] = _mm256_shuffle_ps(t0, t2, 0x44);
    v[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
    v[2] = _mm256_shuffle_ps(t1, t3, 0x44);
    v[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

// Column i's elements p .. p + 3 in lane 0 and column i + 4's in lane 1, as f32 (f32 and f16).
template <int32_t D>
[[gnu::target("avx2,fma,f16c")]] inline __m256 load_pair4(const char *lo, const char *hi) {
    if constexpr (D == TF_DTYPE_F32) {
        return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(reinterpret_cast<const float *>(lo))),
                                    _mm_loadu_ps(reinterpret_cast<const float *>(hi)), 1);
    } else {
        return _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(lo)),
                                                  _mm_loadl_epi64(reinterpret_cast<const __m128i *>(hi))));
    }
}

// A transposed B (column j contiguous along p: W [N, K] row-major seen as W^T), a full sliver of
// nr = 8 * G columns, eight columns at a time: columns i and i + 4 share a register (one 128-bit
// lane each), so a 4 x 4 transpose within the lanes gives element p of all eight. bf16 splits
// into its even elements (shifted up) and odd ones (masked), both exact, with no shuffle.
template <int32_t D, int G>
[[gnu::target("avx2,fma,f16c")]] void pack_cols_avx2(const BSource &s, int64_t p0, int64_t kc, int64_t j0, float *dst) {
    constexpr int64_t nr = 8 * G, es = D == TF_DTYPE_F32 ? 4 : 2;
    for (int g = 0; g < G; ++g) {
        const char *col[8];
        for (int i = 0; i < 8; ++i) col[i] = s.b + (j0 + g * 8 + i) * s.col + p0 * es;
        float *out = dst + g * 8;
        int64_t p = 0;
        if constexpr (D == TF_DTYPE_BF16) {
            const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
            for (; p + 8 <= kc; p += 8) {
                if ((p & 31) == 0)  // a line per column, far enough ahead to overlap DRAM with the work
                    for (int i = 0; i < 8; ++i) _mm_prefetch(col[i] + p * 2 + k_prefetch_bytes, _MM_HINT_T0);
                __m256 even[4], odd[4];
                for (int i = 0; i < 4; ++i) {
                    const __m256i w = _mm256_inserti128_si256(
                        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(col[i] + p * 2))),
                        _mm_loadu_si128(reinterpret_cast<const __m128i *>(col[i + 4] + p * 2)), 1);
                    even[i] = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
                    odd[i] = _mm256_castsi256_ps(_mm256_and_si256(w, high));
                }
                transpose_lanes4(even);
                transpose_lanes4(odd);
                for (int q = 0; q < 4; ++q) {
                    _mm256_storeu_ps(out + (p + 2 * q) * nr, even[q]);
                    _mm256_storeu_ps(out + (p + 2 * q + 1) * nr, odd[q]);
                }
            }
        } else {
            for (; p + 4 <= kc; p += 4) {
                if ((p * es & 63) == 0)
                    for (int i = 0; i < 8; ++i) _mm_prefetch(col[i] + p * es + k_prefetch_bytes, _MM_HINT_T0);
                __m256 v[4];
                for (int i = 0; i < 4; ++i) v[i] = load_pair4<D>(col[i] + p * es, col[i + 4] + p * es);
                transpose_lanes4(v);
                for (int q = 0; q < 4; ++q) _mm256_storeu_ps(out + (p + q) * nr, v[q]);
            }
        }
        for (; p < kc; ++p)
            for (int i = 0; i < 8; ++i) out[p * nr + i] = load_float(D, col[i] + p * es);
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

// The AVX2 packer for a full sliver of nr columns of this B, or nullptr.
PackFn avx2_packer(const BSource &s, int64_t nr) {
    if (isa_level() < 1 || (s.dtype == TF_DTYPE_F16 && !cpu_has_f16c())) return nullptr;
    const int64_t es = s.dtype == TF_DTYPE_F32 ? 4 : 2;
    const bool cols = s.row == es, rows = s.col == es;
    if (!cols && !rows) return nullptr;
#define TF_PICK(G)                                                                                                     \
    switch (s.dtype) {                                                                                                 \
    case TF_DTYPE_F32: return cols ? pack_cols_avx2<TF_DTYPE_F32, G> : pack_rows_avx2<TF_DTYPE_F32, G>;                \
    case TF_DTYPE_F16: return cols ? pack_cols_avx2<TF_DTYPE_F16, G> : pack_rows_avx2<TF_DTYPE_F16, G>;                \
    default: return cols ? pack_cols_avx2<TF_DTYPE_BF16, G> : pack_rows_avx2<TF_DTYPE_BF16, G>;                        \
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

    const GemmF32Tiling tile = gemm_f32_tile();
    const int64_t nr = tile.nr;
    const int64_t kc = std::max<int64_t>(64, 4096 / nr);  // two [kc][nr] buffers of 16 KiB each
    const BSource src0{nullptr, vb.strides[r - 2], vb.strides[r - 1], b.dtype};
#if defined(__x86_64__)
    const PackFn fast = avx2_packer(src0, nr);
#endif
    const int64_t o_col = vo.strides[r - 1];
    // A unit of work: two slivers (2 nr columns) of one B.
    const int64_t width = 2 * nr;
    const int64_t pairs = (n + width - 1) / width;
    const auto units = static_cast<int64_t>(groups.size()) * pairs;
    const double macs = static_cast<double>(total) * static_cast<double>(n) * static_cast<double>(k);
    const int threads = macs >= static_cast<double>(k_gemm_parallel_macs) / 8 ? thread_count() : 1;
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
            for (int64_t i = 0; i < g.count; ++i) {
                char *o = rows[static_cast<size_t>(g.first + i)].o + j0 * o_col;
                const float *ci = c + i * width;
                if (out.dtype == TF_DTYPE_F32 && o_col == 4) {
                    std::memcpy(o, ci, static_cast<size_t>(cols) * sizeof(float));
                } else if (out.dtype == TF_DTYPE_F32) {
                    for (int64_t j = 0; j < cols; ++j) Traits<float>::store(o + j * o_col, ci[j]);
                } else if (out.dtype == TF_DTYPE_F16) {
                    for (int64_t j = 0; j < cols; ++j) Traits<Half>::store(o + j * o_col, ci[j]);
                } else {
                    for (int64_t j = 0; j < cols; ++j) Traits<BFloat16>::store(o + j * o_col, ci[j]);
                }
            }
        }
    });
    return true;
}

}  // namespace tf_cpu
