// Loads and stores of the first lanes of an AVX2 vector, for the last, short vector of a row:
// stores in pieces of 4, 2 and 1 floats, not vmaskmovps, whose store form costs many times a
// plain store on some x86-64 cores (AMD Zen 1), nor a buffer and a copy (a call into memmove for
// a few floats).
// x86-64 only; callers run when isa_level() says the CPU has AVX2.
#pragma once

#include <cstdint>
#include <immintrin.h>

namespace tf_cpu {

// d[i] = v[i] for i < count (0 to 8).
[[gnu::target("avx2,fma")]] inline void store_lanes(float *d, __m256 v, int64_t count) {
    if (count >= 8) {
        _mm256_storeu_ps(d, v);
        return;
    }
    __m128 part = _mm256_castps256_ps128(v);
    if (count >= 4) {
        _mm_storeu_ps(d, part);
        part = _mm256_extractf128_ps(v, 1);
        d += 4;
        count -= 4;
    }
    if (count >= 2) {
        _mm_storel_pi(reinterpret_cast<__m64 *>(d), part);
        part = _mm_movehl_ps(part, part);
        d += 2;
        count -= 2;
    }
    if (count) _mm_store_ss(d, part);
}

// The vector of s[i] for i < count (0 to 8), zeros past them; reads no float past count.
[[gnu::target("avx2,fma")]] inline __m256 load_lanes(const float *s, int64_t count) {
    if (count >= 8) return _mm256_loadu_ps(s);
    alignas(32) float buf[8] = {};
    for (int64_t i = 0; i < count; ++i) buf[i] = s[i];
    return _mm256_load_ps(buf);
}

}  // namespace tf_cpu
