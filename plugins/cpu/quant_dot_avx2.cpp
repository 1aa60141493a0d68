// AVX2 dot products of quantized weight rows with 8-bit activation rows (quant_blocks.hpp): each
// block's levels unpacked to bytes, multiplied with the activations by vpmaddubsw (unsigned levels
// times signed activations) and vpmaddwd, scaled per block in f32. The same sums as the portable
// dots (quant_dot.cpp) up to the order of f32 additions. Compiled for AVX2 + FMA per function and
// chosen at run time (runtime.hpp's isa_level()).
#include "quant_blocks.hpp"

#include "kernels.hpp"

#if defined(__x86_64__)
#include "quant_avx2.hpp"

#include <cstring>

namespace tf_cpu::quant {
namespace {

using avx2::dot_i8_i8;
using avx2::dot_u8_i8;
using avx2::k_prefetch_bytes;
using avx2::load;

// An f16 scale to f32 (exact, as f16_to_f32; F16C instead of bit manipulation).
TF_AVX2 inline float half(uint16_t h) { return _cvtsh_ss(h); }

TF_AVX2 inline float hsum(__m256 v) {
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

TF_AVX2 inline float hsum128(__m128 r) {
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

// scale_min_k4 for all eight j at once on 32-bit words: the 8 scales and the 8 mins as int16.
TF_AVX2 inline void scales_mins_k4(const uint8_t *q, __m128i *scales, __m128i *mins) {
    uint32_t u[3];
    std::memcpy(u, q, sizeof u);
    constexpr uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    const uint32_t s_hi = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
    const uint32_t m_hi = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
    *scales = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int32_t>(s_hi), static_cast<int32_t>(u[0] & m6)));
    *mins = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int32_t>(m_hi), static_cast<int32_t>(u[1] & m6)));
}

// Word w of each 128-bit lane of v in all eight words of that lane.
TF_AVX2 inline __m256i word_of(__m256i v, int w) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>(((2 * w + 1) << 8) | (2 * w))));
}

// A 32-block's 16 bytes of nibbles as 32 levels: element j (low nibble of byte j) in byte j,
// element j + 16 (its high nibble) in byte j + 16.
TF_AVX2 inline __m256i nibbles32(const uint8_t *qs) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(both, _mm256_set1_epi8(0xF));
}

// Bit k of the 32-bit word at qh as 0x10 in byte k (the 5th bit of a q5 level), else 0.
TF_AVX2 inline __m256i fifth_bits(const uint8_t *qh) {
    uint32_t word;
    std::memcpy(&word, qh, sizeof word);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int32_t>(word)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

TF_AVX2 inline void prefetch(const void *p, int offset = 0) {
    _mm_prefetch(static_cast<const char *>(p) + k_prefetch_bytes + offset, _MM_HINT_T0);
}

// A block's eight int32 partial sums as four: the 128-bit halves added (the conversion and the
// FMA then take one 128-bit operation instead of two).
TF_AVX2 inline __m128i halves_added(__m256i s) {
    return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

TF_AVX2 inline __m128 q8_0_terms(const BlockQ8_0 &b, const ActQ8 &a, __m128 acc) {
    const __m128i sums = halves_added(dot_i8_i8(load(b.qs), load(a.qs)));
    return _mm_fmadd_ps(_mm_set1_ps(half(b.d) * a.d), _mm_cvtepi32_ps(sums), acc);
}

TF_AVX2 float dot_q8_0(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ8_0 *>(w);
    const auto *a = static_cast<const ActQ8 *>(act);
    // Two accumulators: consecutive blocks do not wait on one FMA's latency.
    __m128 acc0 = _mm_setzero_ps(), acc1 = _mm_setzero_ps();
    const int64_t blocks = n / k_qk;
    int64_t i = 0;
    for (; i + 1 < blocks; i += 2) {
        prefetch(b + i);
        acc0 = q8_0_terms(b[i], a[i], acc0);
        acc1 = q8_0_terms(b[i + 1], a[i + 1], acc1);
    }
    if (i < blocks) acc0 = q8_0_terms(b[i], a[i], acc0);
    return hsum128(_mm_add_ps(acc0, acc1));
}

// q4_0 against groups of four activation blocks (ActQuadQ8, laid out once per activation row):
// blocks 4q, 4q + 1 in one register (their nibbles' 16 bytes in the low and high lane) and 4q + 2,
// 4q + 3 in another; per register the low and high halves' vpmaddubsw pairs added in int16; the
// two registers folded by vphaddw (|sums| <= 4 * 15 * 127 < 2^15) so that one vpmaddwd, one
// conversion and one FMA serve four blocks; the offset 8 sum(a) and the activations' scales read
// ready in their lanes; the weights' four f16 scales through one vcvtph2ps.
TF_AVX2 inline __m256 q4_0_quad_terms(const BlockQ4_0 *b, const ActQuadQ8 &a, __m256 acc) {
    const __m256i low4 = _mm256_set1_epi8(0xF);
    const __m256i q0 =
        _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(b[1].qs), reinterpret_cast<const __m128i *>(b[0].qs));
    const __m256i q1 =
        _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(b[3].qs), reinterpret_cast<const __m128i *>(b[2].qs));
    const __m256i p0 =
        _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q0, low4), load(a.lo[0])),
                         _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q0, 4), low4), load(a.hi[0])));
    const __m256i p1 =
        _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q1, low4), load(a.lo[1])),
                         _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q1, 4), low4), load(a.hi[1])));
    const __m256i sums =
        _mm256_sub_epi32(_mm256_madd_epi16(_mm256_hadd_epi16(p0, p1), _mm256_set1_epi16(1)), load(a.offset));
    __m128i h = _mm_insert_epi16(_mm_cvtsi32_si128(b[0].d), b[1].d, 1);
    h = _mm_insert_epi16(_mm_insert_epi16(h, b[2].d, 2), b[3].d, 3);
    const __m256 dw =
        _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_cvtph_ps(h)), _mm256_setr_epi32(0, 0, 2, 2, 1, 1, 3, 3));
    return _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_loadu_ps(a.d)), _mm256_cvtepi32_ps(sums), acc);
}

TF_AVX2 float dot_q4_0(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ4_0 *>(w);
    const auto *a = static_cast<const ActQuadQ8 *>(act);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const int64_t blocks = n / k_qk;
    int64_t i = 0;
    for (; i + 7 < blocks; i += 8) {
        acc0 = q4_0_quad_terms(b + i, a[i / 4], acc0);
        acc1 = q4_0_quad_terms(b + i + 4, a[i / 4 + 1], acc1);
    }
    for (; i + 3 < blocks; i += 4) acc0 = q4_0_quad_terms(b + i, a[i / 4], acc0);
    if (i < blocks) {
        // The last one to three blocks with zero blocks after them (the activations' are zero too),
        // so that nothing past the row is read.
        BlockQ4_0 tail[4] = {};
        std::memcpy(tail, b + i, static_cast<size_t>(blocks - i) * sizeof(BlockQ4_0));
        acc1 = q4_0_quad_terms(tail, a[i / 4], acc1);
    }
    return hsum(_mm256_add_ps(acc0, acc1));
}

// One 32-format block with unsigned levels: 8 int32 partial sums of levels * a, less
// Offset * a when the format has one (in int16 before vpmaddwd: |values| stay below 2^15).
template <class Block, int Offset, bool Fifth>
TF_AVX2 inline __m256i block_sums(const Block &b, const ActQ8 &a) {
    __m256i levels = nibbles32(b.qs);
    if constexpr (Fifth) levels = _mm256_or_si256(levels, fifth_bits(b.qh));
    const __m256i av = load(a.qs);
    __m256i pairs = _mm256_maddubs_epi16(levels, av);
    if constexpr (Offset != 0) pairs = _mm256_sub_epi16(pairs, _mm256_maddubs_epi16(_mm256_set1_epi8(Offset), av));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// The 5th bits of two q5 blocks (qh words q0 and q1) for the two-block layout of levels_pair: bit j
// (element j, j < 16) as 0x10 in byte j of the low registers' lanes, bit j + 16 in byte j of the
// high registers' lanes; block 0 in the low lane, block 1 in the high.
TF_AVX2 inline void fifth_bits_pair(const uint8_t *qh0, const uint8_t *qh1, __m256i *lo, __m256i *hi) {
    uint32_t w0, w1;
    std::memcpy(&w0, qh0, sizeof w0);
    std::memcpy(&w1, qh1, sizeof w1);
    const __m256i words = _mm256_setr_epi32(static_cast<int32_t>(w0), 0, 0, 0, static_cast<int32_t>(w1), 0, 0, 0);
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    const __m256i five = _mm256_set1_epi8(0x10);
    const __m256i spread_lo =
        _mm256_shuffle_epi8(words, _mm256_set_epi64x(0x0101010101010101, 0, 0x0101010101010101, 0));
    const __m256i spread_hi = _mm256_shuffle_epi8(
        words, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0303030303030303, 0x0202020202020202));
    *lo = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread_lo, bit), bit), five);
    *hi = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread_hi, bit), bit), five);
}

// q4_1, q5_0 and q5_1 two blocks per register as q4_0 (levels 0..31 keep each int16 pair sum
// of the low and high halves below 2^14): 4 int32 sums per block of levels * a, less Offset
// sum(a) in int32.
template <class Block, int Offset, bool Fifth>
TF_AVX2 inline __m256i levels_pair(const Block *b, const ActQ8 *a) {
    const __m256i q =
        _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(b[1].qs), reinterpret_cast<const __m128i *>(b[0].qs));
    const __m256i low4 = _mm256_set1_epi8(0xF);
    __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    if constexpr (Fifth) {
        __m256i five_lo, five_hi;
        fifth_bits_pair(b[0].qh, b[1].qh, &five_lo, &five_hi);
        lo = _mm256_or_si256(lo, five_lo);
        hi = _mm256_or_si256(hi, five_hi);
    }
    const __m256i a_lo =
        _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(a[1].qs), reinterpret_cast<const __m128i *>(a[0].qs));
    const __m256i a_hi = _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(a[1].qs + 16),
                                             reinterpret_cast<const __m128i *>(a[0].qs + 16));
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi));
    const __m256i sums = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    if constexpr (Offset == 0) return sums;
    const __m256i offset = _mm256_set_m128i(_mm_cvtsi32_si128(Offset * a[1].sum), _mm_cvtsi32_si128(Offset * a[0].sum));
    return _mm256_sub_epi32(sums, offset);
}

// The scales of two blocks as dot_pairs takes them: d da of block 0 in the low lane and block 1's
// in the high; with Min, m da sum(a) of the two blocks in lanes 2 and 3 of m_sum (lanes 0, 1 zero).
// The f16 d (and m) of both blocks go through one vcvtph2ps.
template <class Block, bool Min>
TF_AVX2 inline void pair_scales(const Block *b, const ActQ8 *a, __m256 *d, __m128 *m_sum) {
    __m128i h = _mm_insert_epi16(_mm_cvtsi32_si128(b[0].d), b[1].d, 1);
    if constexpr (Min) h = _mm_insert_epi16(_mm_insert_epi16(h, b[0].m, 2), b[1].m, 3);
    const __m128 da = _mm_unpacklo_ps(_mm_load_ss(&a[0].d), _mm_load_ss(&a[1].d));
    const __m128 s = _mm_mul_ps(_mm_cvtph_ps(h), _mm_movelh_ps(da, da));
    *d = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    if constexpr (Min) *m_sum = _mm_mul_ps(s, _mm_cvtepi32_ps(_mm_setr_epi32(0, 0, a[0].sum, a[1].sum)));
}

// The 32-formats with unsigned levels, two blocks per register, four per pass: sum of
// d da (dot(levels, a) - Offset sum(a)) [+ m da sum(a)]. Both blocks' d (and m) go through one
// vcvtph2ps (pair_scales); the minimum's terms m da sum(a) accumulate in two f32 lanes.
template <class Block, int Offset, bool Fifth, bool Min>
TF_AVX2 float dot_pairs(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const Block *>(w);
    const auto *a = static_cast<const ActQ8 *>(act);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    const int64_t blocks = n / k_qk;
    int64_t i = 0;
    for (; i + 3 < blocks; i += 4) {
        prefetch(b + i);
        prefetch(b + i, 64);
        __m256 d0, d1;
        __m128 m0 = _mm_setzero_ps(), m1 = _mm_setzero_ps();
        pair_scales<Block, Min>(b + i, a + i, &d0, &m0);
        pair_scales<Block, Min>(b + i + 2, a + i + 2, &d1, &m1);
        acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(levels_pair<Block, Offset, Fifth>(b + i, a + i)), acc0);
        acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(levels_pair<Block, Offset, Fifth>(b + i + 2, a + i + 2)), acc1);
        if constexpr (Min) acc_m = _mm_add_ps(acc_m, _mm_add_ps(m0, m1));
    }
    float extra = 0;
    for (; i < blocks; ++i) {
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half(b[i].d) * a[i].d),
                               _mm256_cvtepi32_ps(block_sums<Block, Offset, Fifth>(b[i], a[i])), acc0);
        if constexpr (Min) extra += half(b[i].m) * a[i].d * static_cast<float>(a[i].sum);
    }
    return hsum(_mm256_add_ps(acc0, acc1)) + hsum128(acc_m) + extra;
}

// q4_k and q5_k: per 64 elements, low nibbles (sub-block 2j) and high nibbles (2j + 1), each
// product scaled by its 6-bit scale in vpmaddwd (the scales unpacked with word operations and
// broadcast by vpshufb); the mins times the activations' sub-block sums in vpmaddwd, accumulated
// in four f32 lanes.
template <bool Five, class Block>
TF_AVX2 float dot_k45(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const Block *>(w);
    const auto *a = static_cast<const BlockQ8_K *>(act);
    const __m256i low4 = _mm256_set1_epi8(0xF);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        for (int line = 0; line < static_cast<int>(sizeof(Block)); line += 64) prefetch(b + i, line);
        __m128i sc16, mn16;
        scales_mins_k4(b[i].scales, &sc16, &mn16);
        const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(a[i].bsums)),
                                             _mm_loadu_si128(reinterpret_cast<const __m128i *>(a[i].bsums + 8)));
        acc_m =
            _mm_fmadd_ps(_mm_set1_ps(half(b[i].dmin) * a[i].d), _mm_cvtepi32_ps(_mm_madd_epi16(mn16, bsums)), acc_m);
        const __m256i sc = _mm256_set_m128i(sc16, sc16);
        __m256i sumi = _mm256_setzero_si256();
        [[maybe_unused]] __m256i qh;
        if constexpr (Five) qh = load(b[i].qh);
        for (int j = 0; j < 4; ++j) {
            const __m256i q = load(b[i].qs + 32 * j);
            __m256i lo = _mm256_and_si256(q, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if constexpr (Five) {
                const __m256i one = _mm256_set1_epi8(1);
                const __m256i blo = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j)), one);
                const __m256i bhi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j + 1)), one);
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(blo, 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(bhi, 4));
            }
            const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load(a[i].qs + 64 * j)), word_of(sc, 2 * j));
            const __m256i phi =
                _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load(a[i].qs + 64 * j + 32)), word_of(sc, 2 * j + 1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half(b[i].d) * a[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum(acc) - hsum128(acc_m);
}

// q6_k: levels 0..63 in vpmaddubsw, scaled per 16 by vpmaddwd (the signed scales as int16, even
// ones in the low lane and odd ones in the high, broadcast by vpshufb); the offset 32 taken off in
// int32 as 32 sum_j scale_j bsum_j, so that each block converts one exact sum.
TF_AVX2 float dot_q6_k(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ6_K *>(w);
    const auto *a = static_cast<const BlockQ8_K *>(act);
    const __m256i low4 = _mm256_set1_epi8(0xF), low2 = _mm256_set1_epi8(3);
    const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        for (int line = 0; line < static_cast<int>(sizeof(BlockQ6_K)); line += 64) prefetch(b + i, line);
        const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b[i].scales));
        const __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), load(a[i].bsums));
        const __m256i sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, even_odd));
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i ql0 = load(b[i].ql + 64 * h), ql1 = load(b[i].ql + 64 * h + 32);
            const __m256i qh = load(b[i].qh + 32 * h);
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, low2), 4)),
                _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), low2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), low2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), low2), 4)),
            };
            for (int k = 0; k < 4; ++k) {
                const int g = 4 * h + k;  // 32 elements at 32 g: sub-blocks 2 g and 2 g + 1
                const __m256i p = _mm256_maddubs_epi16(q[k], load(a[i].qs + 32 * g));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, word_of(sc, g)));
            }
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half(b[i].d) * a[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum(acc);
}

TF_AVX2 float dot_q8_k(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ8_K *>(w);
    const auto *a = static_cast<const BlockQ8_K *>(act);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < k_qk_k; j += 32)
            sumi = _mm256_add_epi32(sumi, dot_i8_i8(load(b[i].qs + j), load(a[i].qs + j)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(b[i].d * a[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum(acc);
}

}  // namespace

DotFn avx2_dot(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_Q8_0: return dot_q8_0;
    case TF_DTYPE_Q4_0: return dot_q4_0;
    case TF_DTYPE_Q4_1: return dot_pairs<BlockQ4_1, 0, false, true>;
    case TF_DTYPE_Q5_0: return dot_pairs<BlockQ5_0, 16, true, false>;
    case TF_DTYPE_Q5_1: return dot_pairs<BlockQ5_1, 0, true, true>;
    case TF_DTYPE_Q4_K: return dot_k45<false, BlockQ4_K>;
    case TF_DTYPE_Q5_K: return dot_k45<true, BlockQ5_K>;
    case TF_DTYPE_Q6_K: return dot_q6_k;
    case TF_DTYPE_Q8_K: return dot_q8_k;
    default: return nullptr;
    }
}

}  // namespace tf_cpu::quant

#else

namespace tf_cpu::quant {
DotFn avx2_dot(int32_t) { return nullptr; }
}  // namespace tf_cpu::quant

#endif
