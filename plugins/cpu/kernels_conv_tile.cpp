// The 16-channel x 6-position convolution tile of kernels_conv_tile.hpp. Per tap p: two vector
// loads of weights, one broadcast per position, two fused multiply-adds per position: 12 FMAs
// in flight over 12 accumulators for the full tile, as in the GEMM's 6 x 16 tile.
#include "kernels_conv_tile.hpp"

#include "runtime.hpp"

#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tf_cpu {
namespace {

#if defined(__x86_64__)
template <int NP, int NV>
[[gnu::target("avx2,fma")]] void tile(int64_t kc, const float *w, const float *const *x, const int64_t *offsets,
                                      float *c, bool load_c) {
    __m256 acc[NP][NV];
    const float *xs[NP];
#pragma GCC unroll 6
    for (int i = 0; i < NP; ++i) {
        xs[i] = x[i];
        for (int j = 0; j < NV; ++j) acc[i][j] = load_c ? _mm256_loadu_ps(c + i * 16 + 8 * j) : _mm256_setzero_ps();
    }
#pragma GCC unroll 2
    for (int64_t p = 0; p < kc; ++p) {
        const int64_t o = offsets[p];
        __m256 wv[NV];
        for (int j = 0; j < NV; ++j) wv[j] = _mm256_loadu_ps(w + p * 16 + 8 * j);
#pragma GCC unroll 6
        for (int i = 0; i < NP; ++i) {
            const __m256 s = _mm256_broadcast_ss(xs[i] + o);
            for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(s, wv[j], acc[i][j]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < NP; ++i)
        for (int j = 0; j < NV; ++j) _mm256_storeu_ps(c + i * 16 + 8 * j, acc[i][j]);
}

using TileFn = void (*)(int64_t, const float *, const float *const *, const int64_t *, float *, bool);

template <int NV>
constexpr TileFn k_tiles[6] = {tile<1, NV>, tile<2, NV>, tile<3, NV>, tile<4, NV>, tile<5, NV>, tile<6, NV>};
#endif

}  // namespace

bool conv_tile_available() {
#if defined(__x86_64__)
    return isa_level() == 1;
#else
    return false;
#endif
}

void conv_tile_f32(int64_t positions, int64_t channels, int64_t kc, const float *w, const float *const *x,
                   const int64_t *offsets, float *c, bool load_c) {
#if defined(__x86_64__)
    const TileFn fn = channels > 8 ? k_tiles<2>[positions - 1] : k_tiles<1>[positions - 1];
    fn(kc, w, x, offsets, c, load_c);
#else
    // Never called here (conv_tile_available() is false); the same sequence in scalar code.
    const int64_t width = channels > 8 ? 16 : 8;
    for (int64_t q = 0; q < positions; ++q)
        for (int64_t j = 0; j < width; ++j) {
            float v = load_c ? c[q * 16 + j] : 0.0f;
            for (int64_t p = 0; p < kc; ++p) v = std::fma(x[q][offsets[p]], w[p * 16 + j], v);
            c[q * 16 + j] = v;
        }
#endif
}

}  // namespace tf_cpu
