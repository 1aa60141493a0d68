// matmul with few rows of A per B (a generated token's projections: x [1..16, K] times a weight):
// the weight is streamed once from its storage, never converted or packed whole. Private to the
// plugin.
#pragma once

#include <tinyfin/plugin.h>

#include <cstdint>

namespace tf_cpu {

// The most rows of A that multiply one B for matmul_skinny to take the product.
constexpr int64_t k_skinny_max_rows = 16;

// matmul (kernels_matmul.cpp's operands: [..., M, K] x [..., K, N] -> [..., M, N], any strides,
// f32/f16/bf16 operands and output) when every B is multiplied by at most k_skinny_max_rows rows
// of A (batch elements sharing one B count together). A B seen transposed and dense along K
// (linear's x W^T, W [N, K] row-major) takes, on AVX2, dot products along W's rows, each row
// streamed once and widened in registers; an output's operations (two 8-lane f32 accumulators
// along K, their lanes summed in a fixed order) do not depend on M or the thread count, but differ
// from the GEMM's order. A row-major B (dense along N, any row stride: a recurrent step's h R^T)
// with at most 3 rows of A is read in place on AVX2, widened in registers, each output one FMA per element of K in order
// from 0: the GEMM's sequence of operations. Any other B (strided, or the portable level) is read
// in slivers of the GEMM's register-tile width, converted into an L1 buffer and multiplied there
// by the GEMM's own tiles (gemm_f32_rows_a), the same sequence of f32 operations as on the packed
// path (kernels_gemm.hpp). Both give the GEMM's bits. The
// result is rounded once to out's dtype. Returns false, doing nothing, when the product is not of
// that kind (more rows, k = 0, bf16 x bf16 where AVX512-BF16's vdpbf16ps runs instead).
bool matmul_skinny(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out);

// f32 matmul (the same operands) when at most 3 rows of A multiply one row-major B that lies in a
// buffer marked constant, on AVX2: B is read from the packed copy the GEMM keeps for it
// (packed_weights.hpp; packed now on the first call), streamed contiguously. Each output is the
// GEMM's sequence of operations, as on the in-place path it replaces; bias (n floats, or null) is
// then added to it (matmul_bias: the bits of matmul then add). Returns false, doing nothing,
// otherwise (kernels_rows_prepacked.cpp).
bool matmul_rows_prepacked(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out,
                           const float *bias);

}  // namespace tf_cpu
