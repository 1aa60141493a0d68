// AVX2 dot products of one group of eight repacked q4_0 / q8_0 / q4_k / q6_k rows
// (quant_repack.hpp) with an activation row: each activation block is read once for the eight
// rows, the eight rows' sums of a block end in one register of eight int32 (one per row, in row
// order), converted once and scaled by the eight f16 scales of the block column, which one
// vcvtph2ps reads. q4_0/q8_0: the same integer sums per block as the row dots
// (quant_dot_avx2.cpp), so the results differ from theirs only in the order of f32 additions
// across blocks. q4_k/q6_k: each row's exact integer sums of a super-block, then the f32 steps of
// the portable row dots (quant_dot.cpp) in their order, so the results are theirs bit for bit.
#include "quant_repack.hpp"

#if defined(__x86_64__)
#include "quant_avx2.hpp"

#include <cstring>

namespace tf_cpu::quant {
namespace {

using avx2::dot_i8_i8;
using avx2::load;

// The cache lines `bytes` after p, k_prefetch_bytes ahead (as the row dots prefetch).
TF_AVX2 inline void prefetch(const void *p, int bytes) {
    for (int line = 0; line < bytes; line += 64)
        _mm_prefetch(static_cast<const char *>(p) + avx2::k_prefetch_bytes + line, _MM_HINT_T0);
}
TF_AVX2 inline __m256i broadcast16(const void *p) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i *>(p)));
}
// The eight f16 scales of a block column as f32, times the activation block's scale.
TF_AVX2 inline __m256 scales(const char *group_scales, int64_t b, float da) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(group_scales + 16 * b));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(da));
}

// One q4_0 block column of the group against activation block j of a quad (ActQuadQ8). Each
// 32-byte register holds 4 nibble bytes of each of the eight rows (elements 4c .. 4c + 3 in the low
// nibbles, 16 + 4c .. in the high): the matching 4 activation bytes broadcast to every row, so
// vpmaddubsw leaves each row's pair sums in its own 32-bit lane; the eight products of a column
// add up in int16 (|sums| <= 8 * 2 * 15 * 127 < 2^15) and one vpmaddwd gives the eight rows' block
// sums in row order, less the offset 8 sum(a). No horizontal adds.
TF_AVX2 inline __m256 q4_0_column(const uint8_t *q, const ActQuadQ8 &a, int j, const char *sc, int64_t b, __m256 acc) {
    const int pair = j / 2, half = j % 2, lane = 4 * half + 2 * pair;
    const int8_t *a_lo = a.lo[pair] + 16 * half, *a_hi = a.hi[pair] + 16 * half;
    const __m256i low4 = _mm256_set1_epi8(0xF);
    __m256i pairs = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
        int32_t lo, hi;
        std::memcpy(&lo, a_lo + 4 * c, 4);
        std::memcpy(&hi, a_hi + 4 * c, 4);
        const __m256i w = load(q + 32 * c);
        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(_mm256_and_si256(w, low4), _mm256_set1_epi32(lo)));
        pairs = _mm256_add_epi16(
            pairs, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(w, 4), low4), _mm256_set1_epi32(hi)));
    }
    const __m256i sums =
        _mm256_sub_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)), _mm256_set1_epi32(a.offset[lane]));
    return _mm256_fmadd_ps(scales(sc, b, a.d[lane]), _mm256_cvtepi32_ps(sums), acc);
}

TF_AVX2 void group_dot_q4_0(const char *group, const void *act, int64_t blocks, float *out) {
    const auto *q = reinterpret_cast<const uint8_t *>(group);
    const char *sc = group + 128 * blocks;
    const auto *a = static_cast<const ActQuadQ8 *>(act);
    // Two accumulators: consecutive blocks do not wait on one FMA's latency.
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < blocks; b += 2) {
        prefetch(q + 128 * b, 256);
        acc0 = q4_0_column(q + 128 * b, a[b / 4], static_cast<int>(b % 4), sc, b, acc0);
        acc1 = q4_0_column(q + 128 * (b + 1), a[b / 4], static_cast<int>(b % 4) + 1, sc, b + 1, acc1);
    }
    if (b < blocks) acc0 = q4_0_column(q + 128 * b, a[b / 4], static_cast<int>(b % 4), sc, b, acc0);
    _mm256_storeu_ps(out, _mm256_add_ps(acc0, acc1));
}

// One q8_0 block column: eight rows' eight int32 partial sums folded by three levels of vphaddd
// (rows 0..3 of both lanes in x, 4..7 in y), then the lanes added into rows 0..7.
TF_AVX2 inline __m256 q8_0_column(const int8_t *q, const ActQ8 &a, const char *sc, int64_t b, __m256 acc) {
    const __m256i av = load(a.qs);
    __m256i s[8];
    for (int r = 0; r < 8; ++r) s[r] = dot_i8_i8(load(q + 32 * r), av);
    const __m256i x = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i y = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    const __m256i sums = _mm256_add_epi32(_mm256_blend_epi32(x, y, 0xF0), _mm256_permute2x128_si256(x, y, 0x21));
    return _mm256_fmadd_ps(scales(sc, b, a.d), _mm256_cvtepi32_ps(sums), acc);
}

TF_AVX2 void group_dot_q8_0(const char *group, const void *act, int64_t blocks, float *out) {
    const auto *q = reinterpret_cast<const int8_t *>(group);
    const char *sc = group + 256 * blocks;
    const auto *a = static_cast<const ActQ8 *>(act);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < blocks; b += 2) {
        prefetch(q + 256 * b, 512);
        acc0 = q8_0_column(q + 256 * b, a[b], sc, b, acc0);
        acc1 = q8_0_column(q + 256 * (b + 1), a[b + 1], sc, b + 1, acc1);
    }
    if (b < blocks) acc0 = q8_0_column(q + 256 * b, a[b], sc, b, acc0);
    _mm256_storeu_ps(out, _mm256_add_ps(acc0, acc1));
}

// v with no FMA contraction across this point: the product is rounded to f32 before it is added,
// as the portable dots (compiled without FMA) round it.
TF_AVX2 inline __m256 rounded(__m256 v) {
    asm("" : "+x"(v));
    return v;
}

// Bytes `first` and `second` of each row's 32-bit lane of v, zero-extended to the low and high
// int16 of that lane (vpshufb; rows 0..3 in the low 128-bit lane, 4..7 in the high).
TF_AVX2 inline __m256i row_bytes_as_words(__m256i v, int first, int second) {
    const auto pattern = static_cast<int32_t>(static_cast<uint32_t>(first) | 0x8000u |
                                              static_cast<uint32_t>(second) << 16 | 0x80000000u);
    const __m256i rows = _mm256_setr_epi32(0, 0x40004, 0x80008, 0xC000C, 0, 0x40004, 0x80008, 0xC000C);
    return _mm256_shuffle_epi8(v, _mm256_add_epi32(_mm256_set1_epi32(pattern), rows));
}

// The four activation bytes at p broadcast to every row's lane.
TF_AVX2 inline __m256i broadcast4(const int8_t *p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

// q4_k, one super-block column (1152 bytes: d, dmin, the packed scales as three words of eight
// rows, the nibbles in 4-byte runs). The six-bit scales and mins of the eight rows are unpacked
// together (scale_min_k4's formula on each row's words); per 64 elements (chunk j: sub-blocks 2j
// in the low nibbles, 2j + 1 in the high) eight registers of 4 nibble bytes of each row meet the
// broadcast 4-byte activation runs in vpmaddubsw; the eight products of a sub-block add up in
// int16 (|sum| <= 8 * 2 * 15 * 127 < 2^15), and one vpmaddwd with the eight rows' scales of the
// sub-block gives its scaled sums per row. The mins meet the activations' sub-block sums in four
// vpmaddwd (two sub-blocks each).
TF_AVX2 void group_dot_q4_k(const char *group, const void *act, int64_t blocks, float *out) {
    const auto *a = static_cast<const BlockQ8_K *>(act);
    const __m256i low4 = _mm256_set1_epi8(0xF);
    const __m256i m6 = _mm256_set1_epi32(0x3f3f3f3f), m4 = _mm256_set1_epi32(0x0f0f0f0f),
                  m2 = _mm256_set1_epi32(0x03030303);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
        const char *col = group + 8 * sizeof(BlockQ4_K) * static_cast<size_t>(b);
        const __m256i u0 = load(col + 32), u1 = load(col + 64), u2 = load(col + 96);
        const __m256i s_lo = _mm256_and_si256(u0, m6), m_lo = _mm256_and_si256(u1, m6);
        const __m256i s_hi = _mm256_or_si256(_mm256_and_si256(u2, m4),
                                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), m2), 4));
        const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m4),
                                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), m2), 4));
        // The activations' eight sub-block sums, two per 32-bit word.
        const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(a[b].bsums)),
                                          _mm_loadu_si128(reinterpret_cast<const __m128i *>(a[b].bsums + 8)));
        __m256i summ = _mm256_madd_epi16(row_bytes_as_words(m_lo, 0, 1), _mm256_broadcastd_epi32(bs));
        summ = _mm256_add_epi32(
            summ, _mm256_madd_epi16(row_bytes_as_words(m_lo, 2, 3), _mm256_broadcastd_epi32(_mm_srli_si128(bs, 4))));
        summ = _mm256_add_epi32(
            summ, _mm256_madd_epi16(row_bytes_as_words(m_hi, 0, 1), _mm256_broadcastd_epi32(_mm_srli_si128(bs, 8))));
        summ = _mm256_add_epi32(
            summ, _mm256_madd_epi16(row_bytes_as_words(m_hi, 2, 3), _mm256_broadcastd_epi32(_mm_srli_si128(bs, 12))));
        const auto *q = reinterpret_cast<const uint8_t *>(col + 128);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            prefetch(col + 320 * j, 320);  // the column's 18 lines, five per step (as q6_k's)
            const int8_t *a_lo = a[b].qs + 64 * j, *a_hi = a_lo + 32;
            __m256i p_lo = _mm256_setzero_si256(), p_hi = _mm256_setzero_si256();
            for (int c = 0; c < 8; ++c) {
                const __m256i w = load(q + 256 * j + 32 * c);
                p_lo =
                    _mm256_add_epi16(p_lo, _mm256_maddubs_epi16(_mm256_and_si256(w, low4), broadcast4(a_lo + 4 * c)));
                p_hi = _mm256_add_epi16(p_hi, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(w, 4), low4),
                                                                   broadcast4(a_hi + 4 * c)));
            }
            const __m256i sc = j < 2 ? s_lo : s_hi;
            const int s = (2 * j) % 4;
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p_lo, row_bytes_as_words(sc, s, s)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p_hi, row_bytes_as_words(sc, s + 1, s + 1)));
        }
        const __m256 da = _mm256_set1_ps(a[b].d);
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(col))), da);
        const __m256 dmin =
            _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(col + 16))), da);
        acc = _mm256_add_ps(acc, _mm256_sub_ps(rounded(_mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi))),
                                               rounded(_mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summ)))));
    }
    _mm256_storeu_ps(out, acc);
}

// The levels 0..63 of four elements 32 apart (t = 0..3) of each row from one run of ql's first 32
// bytes of a half (la), the matching run of its second 32 (lb) and of qh (hb), times the
// activations' four bytes at av + 32 t broadcast to every row: vpmaddubsw's int16 pair sums.
struct Q6Products {
    __m256i t[4];
};
TF_AVX2 inline Q6Products q6_k_products(const uint8_t *la_p, const uint8_t *lb_p, const uint8_t *hb_p,
                                        const int8_t *av) {
    const __m256i low4 = _mm256_set1_epi8(0xF), bits45 = _mm256_set1_epi8(0x30);
    const __m256i la = load(la_p), lb = load(lb_p), hb = load(hb_p);
    const __m256i l0 = _mm256_or_si256(_mm256_and_si256(la, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), bits45));
    const __m256i l1 = _mm256_or_si256(_mm256_and_si256(lb, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), bits45));
    const __m256i l2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), low4), _mm256_and_si256(hb, bits45));
    const __m256i l3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), low4),
                                       _mm256_and_si256(_mm256_srli_epi16(hb, 2), bits45));
    return {{_mm256_maddubs_epi16(l0, broadcast4(av)), _mm256_maddubs_epi16(l1, broadcast4(av + 32)),
             _mm256_maddubs_epi16(l2, broadcast4(av + 64)), _mm256_maddubs_epi16(l3, broadcast4(av + 96))}};
}

// q6_k, one super-block column (1680 bytes: the int8 scales in 2-byte runs (sub-blocks 2i, 2i + 1
// of each row side by side), d, ql and qh in 4-byte runs). Each scale pair widened once to two
// int16 in its row's lane meets the activations' two sub-block sums in one vpmaddwd (the offset
// 32 sum_j scale_j bsum_j, taken off in int32 as the row dots do). Per half h and two runs c, c + 1
// (c < 8) of ql's first 32 bytes, its second 32 and qh: the levels of four elements 32 apart in
// four registers; the two runs' vpmaddubsw products add up in int16 (|sum| <= 2 * 2 * 63 * 127 <
// 2^15) before the vpmaddwd with the sub-block's scale of each row in both int16 of its lane.
TF_AVX2 void group_dot_q6_k(const char *group, const void *act, int64_t blocks, float *out) {
    const auto *a = static_cast<const BlockQ8_K *>(act);
    // The low (high) int16 of each 32-bit lane in both halves.
    const __m256i low_word = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4,
                                              5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i high_word = _mm256_add_epi8(low_word, _mm256_set1_epi8(2));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
        const char *col = group + 8 * sizeof(BlockQ6_K) * static_cast<size_t>(b);
        __m256i pairs[8];
        __m256i offset = _mm256_setzero_si256();
        for (int i = 0; i < 8; ++i) {
            pairs[i] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(col + 16 * i)));
            int32_t bsum_pair;
            std::memcpy(&bsum_pair, a[b].bsums + 2 * i, sizeof bsum_pair);
            offset = _mm256_add_epi32(offset, _mm256_madd_epi16(pairs[i], _mm256_set1_epi32(bsum_pair)));
        }
        const auto *ql = reinterpret_cast<const uint8_t *>(col + 144), *qh = ql + 1024;
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h)
            for (int c = 0; c < 8; c += 2) {  // element 128 h + 32 t + 4 c: sub-block 8 h + 2 t + c / 4
                // The column's 27 cache lines k_prefetch_bytes ahead, four per step: all at once they
                // would queue behind one another (measured slower than the row dot from memory).
                prefetch(col + 256 * (4 * h + c / 2), 256);
                const uint8_t *la = ql + 512 * h + 32 * c, *lb = la + 256, *hb = qh + 256 * h + 32 * c;
                const int8_t *av = a[b].qs + 128 * h + 4 * c;
                const Q6Products p0 = q6_k_products(la, lb, hb, av);
                const Q6Products p1 = q6_k_products(la + 32, lb + 32, hb + 32, av + 4);
                const __m256i pick = c < 4 ? low_word : high_word;
                for (int t = 0; t < 4; ++t)
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_add_epi16(p0.t[t], p1.t[t]),
                                                                    _mm256_shuffle_epi8(pairs[4 * h + t], pick)));
            }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(col + 128))),
                                       _mm256_set1_ps(a[b].d));
        acc = _mm256_add_ps(acc, rounded(_mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi))));
    }
    _mm256_storeu_ps(out, acc);
}

}  // namespace

GroupDotFn avx2_group_dot(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_Q4_0: return group_dot_q4_0;
    case TF_DTYPE_Q8_0: return group_dot_q8_0;
    case TF_DTYPE_Q4_K: return group_dot_q4_k;
    case TF_DTYPE_Q6_K: return group_dot_q6_k;
    default: return nullptr;
    }
}

}  // namespace tf_cpu::quant

#else

namespace tf_cpu::quant {
GroupDotFn avx2_group_dot(int32_t) { return nullptr; }
}  // namespace tf_cpu::quant

#endif
