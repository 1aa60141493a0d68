// How one matmul descriptor maps onto one cuBLAS strided-batched GEMM call, without copies: pure
// arithmetic on the descriptor (no CUDA), so tests/cuda checks it on the host by running the
// call's column-major semantics against a plain matmul.
#ifndef TINYFIN_CUDA_MATMUL_PLAN_H
#define TINYFIN_CUDA_MATMUL_PLAN_H

#include <tinyfin/plugin.h>

namespace tf_cuda {

// C = op(A) op(B) in cuBLAS's column-major terms, batch times, operands stride_* elements apart.
// With the output row-major the plugin computes out^T = b^T a^T, so A is b and B is a (swapped).
struct GemmCall {
    bool swapped;           // A is the descriptor's b, B its a
    bool trans_a, trans_b;  // CUBLAS_OP_T on A, B
    int m, n, k;
    int lda, ldb, ldc;
    long long stride_a, stride_b, stride_c;
    int batch;
};

// Fills call for a matmul descriptor whose shapes are consistent ([..., M, K] x [..., K, N] ->
// [..., M, N], batch axes expanded). False when cuBLAS cannot take the layout as it is (no unit
// stride on either axis of a matrix, batch axes without one constant stride per operand, sizes
// beyond int) or when there is nothing to multiply (an empty output or K == 0).
bool plan_gemm(const tf_op_desc &op, GemmCall *call);

}  // namespace tf_cuda

#endif  // TINYFIN_CUDA_MATMUL_PLAN_H
