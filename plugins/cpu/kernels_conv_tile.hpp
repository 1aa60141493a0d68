// The convolution's register tile over output channels (AVX2): up to 16 output channels (two
// vectors of 8) by up to 6 output positions, the weights loaded as vectors of channels and each
// position's image value broadcast, so that positions round up to 1 and channels to 8 instead
// of positions to 16. kernels_conv.cpp's "tiled" forward reads the padded image in place
// through it and computes only positions that are outputs (no discarded column per row).
// Private to the plugin.
#pragma once

#include <cstdint>

namespace tf_cpu {

constexpr int64_t k_conv_tile_channels = 16;  // one sliver of the packed weights
constexpr int64_t k_conv_tile_positions = 6;

// Whether conv_tile_f32 runs here: the AVX2 level (isa_level() 1), whose GEMM packs B in
// slivers of 16 columns.
bool conv_tile_available();

// c[q * 16 + j] (+)= sum over p < kc of w[p * 16 + j] * x[q][offsets[p]], for q < positions
// (1 to 6) and j < channels (1 to 16; the 8 past a count of 8 or fewer are neither computed nor
// written). From 0, or from c's values with load_c; each element one fused multiply-add per p
// in order, the same sequence gemm_f32 computes for it.
void conv_tile_f32(int64_t positions, int64_t channels, int64_t kc, const float *w, const float *const *x,
                   const int64_t *offsets, float *c, bool load_c);

}  // namespace tf_cpu
