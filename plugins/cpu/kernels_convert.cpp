// Runs of f16 / bf16 elements to and from f32: what the staging of kernels_own.cpp, cast and the
// f16/bf16 matmul spend their time in. Every function gives the bits of the scalar conversions
// of kernels.hpp (f16_to_f32, f32_to_f16, bf16_to_f32, f32_to_bf16): round to nearest even once,
// NaN stays a quiet NaN with its sign and top payload bits, overflow gives infinity. So which
// path runs (F16C or not) never changes a result.
//
// f16: F16C's vcvtph2ps / vcvtps2ph (imm 0: round to nearest even, exceptions masked) when the
// CPU has it and TINYFIN_CPU_ISA allows AVX2; bf16: integer bit arithmetic the compiler
// vectorises, compiled per instruction set (vector_math.hpp): 8 or 16 lanes where the baseline
// SSE2 loop does 4 and widens 16-bit lanes in extra steps.
#include "kernels.hpp"
#include "vector_math.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace tf_cpu {
namespace {

#if defined(__x86_64__)
// F16C is not implied by AVX2 in cpuid, so it is asked for on its own; the cap of
// TINYFIN_CPU_ISA applies through isa_level() (generic: no F16C).
bool has_f16c() {
    static const bool cpu = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
    }();
    return cpu && isa_level() >= 1;
}

[[gnu::target("avx,f16c")]] void f16_to_f32_f16c(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i))));
    for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

[[gnu::target("avx,f16c")]] void f32_to_f16_f16c(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}
#endif

// Branch-free, so the loop vectorises: round to nearest even by adding 0x7fff plus the kept
// lsb (a carry into the exponent is the right answer, up to infinity); NaN keeps its top bits
// with the quiet bit set, as f32_to_bf16.
[[gnu::always_inline]] inline uint16_t bf16_of(uint32_t b) {
    const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    const uint32_t quiet = (b >> 16) | 0x40u;
    return static_cast<uint16_t>((b & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

[[gnu::always_inline]] inline void bf16_to_f32_row_body(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t{src[i]} << 16);
}
TF_CPU_ISA_DISPATCH(bf16_to_f32_row, (const uint16_t *src, float *dst, int64_t n), (src, dst, n))

[[gnu::always_inline]] inline void f32_to_bf16_row_body(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_of(std::bit_cast<uint32_t>(src[i]));
}
TF_CPU_ISA_DISPATCH(f32_to_bf16_row, (const float *src, uint16_t *dst, int64_t n), (src, dst, n))

}  // namespace

void f16_run_to_f32(const uint16_t *src, float *dst, int64_t n) {
#if defined(__x86_64__)
    if (has_f16c()) return f16_to_f32_f16c(src, dst, n);
#endif
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void f32_run_to_f16(const float *src, uint16_t *dst, int64_t n) {
#if defined(__x86_64__)
    if (has_f16c()) return f32_to_f16_f16c(src, dst, n);
#endif
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void bf16_run_to_f32(const uint16_t *src, float *dst, int64_t n) { bf16_to_f32_row(src, dst, n); }

void f32_run_to_bf16(const float *src, uint16_t *dst, int64_t n) { f32_to_bf16_row(src, dst, n); }

// The 16-bit float dtypes' run converters, by direction: f16's, else bf16's; nullptr for others.
template <class Run>
Run run_of(int32_t dtype, Run f16, Run bf16) {
    return dtype == TF_DTYPE_F16 ? f16 : dtype == TF_DTYPE_BF16 ? bf16 : nullptr;
}

bool load_f32_run(int32_t dtype, const char *src, int64_t step, float *dst, int64_t n) {
    const auto run = run_of(dtype, f16_run_to_f32, bf16_run_to_f32);
    if (!run || step != 2 || (reinterpret_cast<uintptr_t>(src) & 1) != 0) return false;
    run(reinterpret_cast<const uint16_t *>(src), dst, n);
    return true;
}

bool store_f32_run(int32_t dtype, const float *src, char *dst, int64_t step, int64_t n) {
    const auto run = run_of(dtype, f32_run_to_f16, f32_run_to_bf16);
    if (!run || step != 2 || (reinterpret_cast<uintptr_t>(dst) & 1) != 0) return false;
    run(src, reinterpret_cast<uint16_t *>(dst), n);
    return true;
}

}  // namespace tf_cpu
