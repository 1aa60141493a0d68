// The 3 x 3 stride-1 convolution by Winograd's minimal filtering F(2 x 2, 3 x 3): each 2 x 2
// block of outputs ("tile") from a 4 x 4 patch of the input, with 16 multiply-adds per channel
// pair instead of 36. The patches and the weights are transformed into 16 planes ("xi"), each
// plane a product [O x C] x [C x tiles] through the GEMM (kernels_gemm.hpp), and the 16 products
// transformed back into the tiles. 2.25 times fewer multiply-adds than the direct convolution,
// whose tile already runs at this core's FMA peak (docs/performance.md); the sums are not the
// direct convolution's, so the results differ from it in the last bits (within a few f32
// roundings of the exact value; the tests bound them against a double reference). Private to
// the plugin; kernels_conv.cpp decides where it runs.
#pragma once

#include "kernels_nn.hpp"

#include <cstdint>

namespace tf_cpu {

// One convolution: x [N, C, H, W], weights [O, C, 3, 3], padding ph, pw, output [N, O, OH, OW]
// with OH = H + 2 ph - 2, OW = W + 2 pw - 2.
struct WinogradShape {
    int64_t n, c, h, w, o, ph, pw;
    int64_t oh() const { return h + 2 * ph - 2; }
    int64_t ow() const { return w + 2 * pw - 2; }
};

// Whether the transforms run here (AVX2: isa_level() 1; the GEMM's 6 x 16 tile).
bool winograd_available();

// Floats of the transformed weights: 16 planes [O x C], each packed by gemm_f32_pack_a.
int64_t winograd_weight_floats(int64_t o, int64_t c);
// u = the transformed weights of w [O, C, 3, 3] (dense).
void winograd_transform_weights(int64_t o, int64_t c, const float *w, float *u);

// y = the convolution of x with the weights u transformed by winograd_transform_weights, with
// conv2d_act's epilogue applied to each sum as it is stored (bias, residual, then relu or clip,
// in f32 in that order, as kernels_conv.cpp's other paths apply it). Spread over the thread
// pool; the thread count changes no result.
void winograd_conv_f32(const WinogradShape &s, const float *x, const float *u, float *y, const ConvEpilogue &e);

}  // namespace tf_cpu
