// How one matmul descriptor maps onto one cuBLAS strided-batched GEMM call, without copies: pure
// arithmetic on the descriptor (no CUDA), so tests/cuda checks it on the host by running the
// call's column-major semantics against a plain matmul.
#pragma once

#include <tinyfin/plugin.h>

namespace tf_cuda {

// C = op(A) op(B) in cuBLAS's column-major terms, batch times, operands stride_* elements apart.
// With the output row-major the plugin computes out^T = b^T a^T, so A is b and B is a (swapped).
// Batch axes that do not collapse into that one stride (a broadcast on one batch axis but not its
// neighbour) become an outer loop of such calls: outer_count of them, each with the operands moved
// by outer_offsets().
struct GemmCall {
    bool swapped;  // A is the descriptor's b, B its a
    bool trans_a, trans_b;  // CUBLAS_OP_T on A, B
    int m, n, k;
    int lda, ldb, ldc;
    long long stride_a, stride_b, stride_c;
    int batch;
    // The outer loop, in the descriptor's operand order (a, b, out), element strides.
    int outer_rank;
    long long outer_count;
    long long outer_shape[TF_MAX_RANK];
    long long outer_strides[3][TF_MAX_RANK];
};

// Element offsets of the descriptor's a, b and out for outer iteration index (0 <= index <
// outer_count).
void outer_offsets(const GemmCall &call, long long index, long long (&offsets)[3]);

// Fills call for a matmul descriptor whose shapes are consistent ([..., M, K] x [..., K, N] ->
// [..., M, N], batch axes expanded). False when cuBLAS cannot take the layout as it is (no unit
// stride on either axis of a matrix, output batches that share memory, sizes beyond int) or when
// there is nothing to multiply (an empty output or K == 0).
bool plan_gemm(const tf_op_desc &op, GemmCall *call);

}  // namespace tf_cuda
