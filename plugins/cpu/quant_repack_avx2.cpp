// AVX2 dot products of one group of eight repacked q4_0 / q8_0 rows (quant_repack.hpp) with an
// activation row: each activation block is read once for the eight rows, the eight rows' sums of
// a block end in one register of eight int32 (one per row, in row order), converted once
// and scaled by the eight f16 scales of the block column, which one vcvtph2ps reads. The same
// integer sums per block as the row dots (quant_dot_avx2.cpp), so the results differ from theirs
// only in the order of f32 additions across blocks.
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

}  // namespace

GroupDotFn avx2_group_dot(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_Q4_0: return group_dot_q4_0;
    case TF_DTYPE_Q8_0: return group_dot_q8_0;
    default: return nullptr;
    }
}

}  // namespace tf_cpu::quant

#else

namespace tf_cpu::quant {
GroupDotFn avx2_group_dot(int32_t) { return nullptr; }
}  // namespace tf_cpu::quant

#endif
