// The AVX2 integer primitives the quantized dots share (quant_dot_avx2.cpp's row dots and
// quant_repack_avx2.cpp's eight-row group dots): compiled per function for AVX2 + FMA + F16C and
// chosen at run time (runtime.hpp's isa_level()). Include only from x86-64 translation units.
#pragma once

#include <immintrin.h>

#define TF_AVX2 [[gnu::target("avx2,fma,f16c")]]

namespace tf_cpu::quant::avx2 {

TF_AVX2 inline __m256i load(const void *p) { return _mm256_loadu_si256(static_cast<const __m256i *>(p)); }

// Unsigned levels (< 128) times signed activations, summed in pairs twice: 8 int32.
TF_AVX2 inline __m256i dot_u8_i8(__m256i levels, __m256i act) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(levels, act), _mm256_set1_epi16(1));
}

// Signed times signed: the weight's sign moved onto the activation.
TF_AVX2 inline __m256i dot_i8_i8(__m256i w, __m256i act) {
    return dot_u8_i8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(act, w));
}

// How far ahead of the block being multiplied the dots prefetch a weight's bytes (the rows of a
// weight follow each other, so this runs on into the next row): the hardware prefetcher alone
// leaves the loads waiting (docs/performance.md, "Quantized generation on AVX2").
constexpr int k_prefetch_bytes = 4096;

}  // namespace tf_cpu::quant::avx2
