// conv2d_act's epilogue (kernels_nn.hpp's ConvEpilogue) on AVX2 vectors of finished sums, as the
// convolutions that compute 8 positions of a row in a register store them: Winograd's output
// transform and the one-input-channel forward. The same f32 operations in the same order as
// finish_row. x86-64 only; callers run when isa_level() says the CPU has AVX2.
#pragma once

#include "avx2_lanes.hpp"
#include "kernels_nn.hpp"

#include <cstdint>
#include <immintrin.h>

namespace tf_cpu {

// The epilogue of output channel o, its loop invariants taken once (values, so that the stores
// into y need not reload them).
struct ConvVectorEpilogue {
    const ConvEpilogue &e;
    const float *residual, *y;
    float bias_value;
    __m256 bias;
    bool biased, relu, clip;

    [[gnu::target("avx2,fma")]] ConvVectorEpilogue(const ConvEpilogue &epilogue, int64_t o)
        : e(epilogue), residual(epilogue.residual), y(epilogue.y), bias_value(epilogue.bias ? epilogue.bias[o] : 0.0f),
          bias(_mm256_set1_ps(bias_value)), biased(epilogue.bias != nullptr),
          relu(epilogue.activation == TF_CONV_ACT_RELU), clip(epilogue.activation == TF_CONV_ACT_CLIP) {}

    // d[i] = the epilogue of v[i] for i < count (1 to 8): the bias, then the residual's element,
    // then relu in the register; clip stores the sums and lets finish_row apply all three.
    [[gnu::target("avx2,fma")]] void store(__m256 v, float *d, int64_t count) const {
        if (!clip) {
            if (biased) v = _mm256_add_ps(v, bias);
            if (residual) v = _mm256_add_ps(v, load_lanes(residual + (d - y), count));
            // maxps returns its second operand for a NaN or two zeros: v < 0 ? 0 : v exactly.
            if (relu) v = _mm256_max_ps(_mm256_setzero_ps(), v);
        }
        store_lanes(d, v, count);
        if (clip) finish_row(d, d, count, bias_value, e);
    }
};

}  // namespace tf_cpu
