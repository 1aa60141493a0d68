// AVX2 decoders of rows of quantized blocks to f32 (quant_blocks.hpp), for dequantize,
// embedding_q and matmul_q's prefill: the levels unpacked with byte operations, widened 8 at a
// time and scaled. Every element is the same f32 operations as in the reference decoders
// (quant_reference.cpp): the same products and sums in the same order, never fused (fp-contract
// off), so the bits are the reference's. Compiled for AVX2 + F16C per function, chosen at run
// time (quant_dot.cpp's decode_of).
#include "quant_blocks.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#pragma GCC optimize("fp-contract=off")

#define TF_AVX2 [[gnu::target("avx2,f16c")]]

namespace tf_cpu::quant {
namespace {

TF_AVX2 inline float half(uint16_t h) { return _cvtsh_ss(h); }

// Bytes 8 j .. 8 j + 7 of v (signed or unsigned) as 8 f32.
template <bool Signed>
TF_AVX2 inline __m256 widen(__m128i v) {
    return _mm256_cvtepi32_ps(Signed ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v));
}

// 16 levels in a 128-bit register: y[j] = level_j * d (- m / + m), j < 16.
enum class Min { none, add, sub };
template <bool Signed, Min M = Min::none>
TF_AVX2 inline void put16(__m128i levels, __m256 d, __m256 m, float *y) {
    __m256 lo = _mm256_mul_ps(widen<Signed>(levels), d);
    __m256 hi = _mm256_mul_ps(widen<Signed>(_mm_srli_si128(levels, 8)), d);
    if constexpr (M == Min::add) lo = _mm256_add_ps(lo, m), hi = _mm256_add_ps(hi, m);
    if constexpr (M == Min::sub) lo = _mm256_sub_ps(lo, m), hi = _mm256_sub_ps(hi, m);
    _mm256_storeu_ps(y, lo);
    _mm256_storeu_ps(y + 8, hi);
}

// 32 levels (a 256-bit register of bytes) as put16 does.
template <bool Signed, Min M = Min::none>
TF_AVX2 inline void put32(__m256i levels, __m256 d, __m256 m, float *y) {
    put16<Signed, M>(_mm256_castsi256_si128(levels), d, m, y);
    put16<Signed, M>(_mm256_extracti128_si256(levels, 1), d, m, y + 16);
}

// A 32-block's 16 nibble bytes: elements 0..15 (low nibbles) in the low lane, 16..31 (high) in
// the high lane.
TF_AVX2 inline __m256i nibbles32(const uint8_t *qs) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0xF));
}

// Bit j of the 32-bit word at qh as 0x10 in byte j, else 0.
TF_AVX2 inline __m256i fifth_bits(const uint8_t *qh) {
    uint32_t word;
    std::memcpy(&word, qh, sizeof word);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int32_t>(word)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

TF_AVX2 void decode_q8_0(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ8_0 *>(src);
    for (int64_t i = 0; i < n / k_qk; ++i, y += k_qk)
        put32<true>(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(b[i].qs)), _mm256_set1_ps(half(b[i].d)),
                    __m256{}, y);
}

// q4_0 / q5_0: (level - offset) * d, the offset taken off in int8.
template <class Block, int Offset, bool Fifth>
TF_AVX2 void decode_offset(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const Block *>(src);
    for (int64_t i = 0; i < n / k_qk; ++i, y += k_qk) {
        __m256i q = nibbles32(b[i].qs);
        if constexpr (Fifth) q = _mm256_or_si256(q, fifth_bits(b[i].qh));
        put32<true>(_mm256_sub_epi8(q, _mm256_set1_epi8(Offset)), _mm256_set1_ps(half(b[i].d)), __m256{}, y);
    }
}

// q4_1 / q5_1: level * d + m.
template <class Block, bool Fifth>
TF_AVX2 void decode_min(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const Block *>(src);
    for (int64_t i = 0; i < n / k_qk; ++i, y += k_qk) {
        __m256i q = nibbles32(b[i].qs);
        if constexpr (Fifth) q = _mm256_or_si256(q, fifth_bits(b[i].qh));
        put32<false, Min::add>(q, _mm256_set1_ps(half(b[i].d)), _mm256_set1_ps(half(b[i].m)), y);
    }
}

// q4_k / q5_k: per 64 elements, (d sc) level - (dmin m) for the low nibbles (sub-block 2 j) and
// the high ones (2 j + 1).
template <class Block, bool Five>
TF_AVX2 void decode_k45(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const Block *>(src);
    const __m256i low4 = _mm256_set1_epi8(0xF);
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        const float d = half(b[i].d), min = half(b[i].dmin);
        [[maybe_unused]] __m256i qh;
        if constexpr (Five) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b[i].qh));
        for (int j = 0; j < 4; ++j, y += 64) {
            uint8_t sc, m;
            scale_min_k4(2 * j, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(2 * j + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b[i].qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if constexpr (Five) {
                const __m256i one = _mm256_set1_epi8(1);
                lo = _mm256_or_si256(
                    lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j)), one), 4));
                hi = _mm256_or_si256(
                    hi,
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j + 1)), one), 4));
            }
            put32<false, Min::sub>(lo, _mm256_set1_ps(d1), _mm256_set1_ps(m1), y);
            put32<false, Min::sub>(hi, _mm256_set1_ps(d2), _mm256_set1_ps(m2), y + 32);
        }
    }
}

// q6_k: (d sc) (level - 32), per 16 elements one signed scale; 128 elements per pass from 64 ql
// and 32 qh bytes.
TF_AVX2 void decode_q6_k(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ6_K *>(src);
    const __m256i low4 = _mm256_set1_epi8(0xF), low2 = _mm256_set1_epi8(3), offset = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        const float d = half(b[i].d);
        for (int h = 0; h < 2; ++h, y += 128) {
            const uint8_t *ql = b[i].ql + 64 * h;
            const int8_t *sc = b[i].scales + 8 * h;
            const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql));
            const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql + 32));
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b[i].qh + 32 * h));
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, low2), 4)),
                _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), low2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), low2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), low2), 4)),
            };
            for (int g = 0; g < 4; ++g) {
                const __m256i levels = _mm256_sub_epi8(q[g], offset);  // -32..31
                put16<true>(_mm256_castsi256_si128(levels), _mm256_set1_ps(d * static_cast<float>(sc[2 * g])), __m256{},
                            y + 32 * g);
                put16<true>(_mm256_extracti128_si256(levels, 1), _mm256_set1_ps(d * static_cast<float>(sc[2 * g + 1])),
                            __m256{}, y + 32 * g + 16);
            }
        }
    }
}

TF_AVX2 void decode_q8_k(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ8_K *>(src);
    for (int64_t i = 0; i < n / k_qk_k; ++i)
        for (int j = 0; j < k_qk_k; j += 32, y += 32)
            put32<true>(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(b[i].qs + j)), _mm256_set1_ps(b[i].d),
                        __m256{}, y);
}

}  // namespace

DecodeRow avx2_decode(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_Q8_0: return decode_q8_0;
    case TF_DTYPE_Q4_0: return decode_offset<BlockQ4_0, 8, false>;
    case TF_DTYPE_Q4_1: return decode_min<BlockQ4_1, false>;
    case TF_DTYPE_Q5_0: return decode_offset<BlockQ5_0, 16, true>;
    case TF_DTYPE_Q5_1: return decode_min<BlockQ5_1, true>;
    case TF_DTYPE_Q4_K: return decode_k45<BlockQ4_K, false>;
    case TF_DTYPE_Q5_K: return decode_k45<BlockQ5_K, true>;
    case TF_DTYPE_Q6_K: return decode_q6_k;
    case TF_DTYPE_Q8_K: return decode_q8_k;
    default: return nullptr;
    }
}

}  // namespace tf_cpu::quant

#else

namespace tf_cpu::quant {
DecodeRow avx2_decode(int32_t) { return nullptr; }
}  // namespace tf_cpu::quant

#endif
