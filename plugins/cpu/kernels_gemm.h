// The cpu plugin's f32 matrix product: the cache-blocked GEMM behind conv2d (forward and both
// gradients) and attention. Private to the plugin; nothing here crosses the ABI.
#ifndef TINYFIN_CPU_KERNELS_GEMM_H
#define TINYFIN_CPU_KERNELS_GEMM_H

#include <cstdint>
#include <vector>

namespace tf_cpu {

// One f32 matrix in memory: element (i, j) is at data[i * row_stride + j * col_stride]. A
// transposed operand is the same memory with the two strides swapped.
struct f32_matrix {
    const float *data;
    int64_t row_stride;
    int64_t col_stride;
};

// C = A B, or C += A B with accumulate; A is m x k, B is k x n, C is m x n, dense along rows
// (element (i, j) at c[i * ldc + j]). Strides are in elements and may be anything (0 included).
//
// Every C element is one fixed sequence of f32 operations: start from 0 (or C's value with
// accumulate), then add a(i, p) * b(p, j) for p = 0, 1, ..., k - 1, rounding the product and
// the sum separately (no fused multiply-add). The result does not depend on m, n, the blocking
// or the SIMD path this machine takes, and equals a plain i-k-j loop in f32.
//
// scratch holds the packed blocks; pass the same vector to consecutive calls to reuse it.
// Single-threaded. Throws std::bad_alloc when the packing buffers cannot be allocated.
void gemm_f32(int64_t m, int64_t n, int64_t k, f32_matrix a, f32_matrix b, float *c, int64_t ldc,
              bool accumulate, std::vector<float> &scratch);

}  // namespace tf_cpu

#endif  // TINYFIN_CPU_KERNELS_GEMM_H
