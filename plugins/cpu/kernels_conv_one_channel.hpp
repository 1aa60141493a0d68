// The forward of a 3 x 3, stride-1, dilation-1 convolution whose groups each read one input
// channel: a first layer over a grey image (the Fashion-MNIST example's 1 -> 32 channels) or a
// depthwise convolution. Vectors of 8 output positions along a row, 4 rows at a time, each
// output channel's 9 weights in registers: 9 FMAs per vector on registers and loaded rows,
// where the tiled forward's 16-channel x 6-position tile spends most of its time storing and
// transposing 9-tap sums. Each output is the same f32 sequence the other paths compute: one FMA
// per tap in (kh, kw) order from 0, then conv2d_act's epilogue. Private to the plugin.
#pragma once

#include "kernels_nn.hpp"

#include <cstdint>

namespace tf_cpu {

struct OneChannelShape {
    int64_t n, groups, h, w;  // x [n, groups, h, w]
    int64_t og;  // output channels per group: y [n, groups * og, oh, ow]
    int64_t ph, pw;  // zero padding
    int64_t oh() const { return h + 2 * ph - 2; }
    int64_t ow() const { return w + 2 * pw - 2; }
};

// Whether conv_one_channel_3x3_f32 runs here (AVX2 + FMA).
bool conv_one_channel_available();

// y = conv(x, w) with e's bias, residual and activation; w [groups * og, 1, 3, 3].
void conv_one_channel_3x3_f32(const OneChannelShape &s, const float *x, const float *w, float *y,
                              const ConvEpilogue &e);

}  // namespace tf_cpu
