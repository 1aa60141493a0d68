// The cpu plugin's f32 matrix product: the packed, cache-blocked GEMM behind matmul, conv2d
// (forward and both gradients) and attention. Private to the plugin; nothing here crosses the ABI.
#pragma once

#include <cstdint>

namespace tf_cpu {

// One f32 matrix in memory: element (i, j) is at data[i * row_stride + j * col_stride]. A
// transposed operand is the same memory with the two strides swapped; packing absorbs any
// strides (0 included), so views are never copied first.
struct F32Matrix {
    const float *data;
    int64_t row_stride;
    int64_t col_stride;
};

// C = A B, or C += A B with accumulate; A is m x k, B is k x n, C is m x n, dense along rows
// (element (i, j) at c[i * ldc + j]).
//
// Every C element is one fixed sequence of f32 operations: start from 0 (or C's value with
// accumulate), then for p = 0, 1, ..., k - 1 update it with a(i, p) * b(p, j): one fused
// multiply-add on the AVX2 and AVX-512 paths, a rounded product and a rounded sum on the
// portable path. So the result does not depend on m, n, the blocking or the number of threads
// (TINYFIN_THREADS), only on the instruction set (isa_level(), TINYFIN_CPU_ISA).
//
// Splits the work over the plugin's thread pool when it is big enough and the caller is not
// already a task of the pool. Packing buffers come from the scratch arena (runtime.hpp). Throws
// std::bad_alloc when they cannot be allocated.
//
// b_prepacked: B as gemm_f32_prepack_b wrote it (a constant weight packed once, packed_weights.hpp)
// instead of packing b's blocks on every call; the same floats reach the tiles, so the same bits.
// b still describes B (when the product runs as C^T = B^T A^T the packed form is not used).
//
// bias: n floats; C(i, j) is then the finished sum plus bias[j], one f32 addition (the bits of
// the product followed by an add), done to each register tile as its last K block is stored,
// while it is in L1 (matmul_bias, kernels_matmul.cpp).
void gemm_f32(int64_t m, int64_t n, int64_t k, F32Matrix a, F32Matrix b, float *c, int64_t ldc, bool accumulate,
              const float *b_prepacked = nullptr, const float *bias = nullptr);

// A whole k x n B packed in the blocks gemm_f32 packs it in per call (its KC x NC blocks, N blocks
// outer, K blocks inner, each as nr-column slivers): gemm_f32_prepacked_b_floats(k, n) floats.
int64_t gemm_f32_prepacked_b_floats(int64_t k, int64_t n);
void gemm_f32_prepack_b(int64_t k, int64_t n, F32Matrix b, float *dst);
// The rows of B per K block of that layout (the last block holds the rest) and the columns per N
// block: a reader of the packed form (kernels_conv.cpp's tiled forward, kernels_rows_prepacked.cpp)
// steps through it by these.
int64_t gemm_f32_prepack_kc();
int64_t gemm_f32_prepack_nc();

// The share of the register-tile elements gemm_f32 computes that land in an m x n product (1
// when m and n are multiples of the tile): callers free to compute a product or its transpose
// pick the larger.
double gemm_f32_tile_fill(int64_t m, int64_t n);

// ---- Products with an operand read in place (the convolutions of kernels_conv.cpp) ----------
//
// A matrix whose rows sit at arbitrary offsets (the shifted rows of a padded image) is read in
// place instead of being copied into a column matrix and packed. These products compute whole
// register tiles and run on the calling thread; every C element is the same sequence of
// operations as in gemm_f32.

// The register tile of the instruction set in use (isa_level()).
struct GemmF32Tiling {
    int64_t mr, nr;
};
GemmF32Tiling gemm_f32_tile();

// An m x k A packed once for gemm_f32_rows_b (a convolution's weights, used for every image):
// gemm_f32_packed_a_floats(m, k) floats.
int64_t gemm_f32_packed_a_floats(int64_t m, int64_t k);
void gemm_f32_pack_a(int64_t m, int64_t k, F32Matrix a, float *dst);

// C = A B, row p of B the floats at b + b_rows[p]; A packed by gemm_f32_pack_a (lda 0) or
// row-major with row stride lda, read in place (a convolution's weights as they are). Writes
// round_up(m, mr) rows of round_up(n, nr) floats (c[i * ldc + j]) and reads that many floats of
// every B row: the caller sizes both buffers for it (A itself is read only within its m rows).
void gemm_f32_rows_b(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                     const int64_t *b_rows, float *c, int64_t ldc);

// A k x n B packed in nr-column slivers: sliver s at dst + s * sliver_stride holds B(p, s * nr + j)
// at [p * nr + j], zeros past n. A caller may pack a B in pieces (rows [p0, p1) at
// dst + p0 * nr) and fill rows of its own.
void gemm_f32_pack_b(int64_t k, int64_t n, F32Matrix b, float *dst, int64_t sliver_stride);

// C (+)= A B, row i of A the k floats at a + a_rows[i], B packed by gemm_f32_pack_b with
// sliver_stride nr * k. Writes
// round_up(m, mr) rows of round_up(n, nr) floats; with accumulate, adds to C's values.
void gemm_f32_rows_a(int64_t m, int64_t n, int64_t k, const float *a, const int64_t *a_rows, const float *b_packed,
                     float *c, int64_t ldc, bool accumulate);

// ---- bf16 products with AVX512-BF16 (kernels_gemm_bf16.cpp) ------------------------------------

// One bf16 matrix: element (i, j) is the bf16 at data[i * row_stride + j * col_stride].
struct BF16Matrix {
    const uint16_t *data;
    int64_t row_stride;
    int64_t col_stride;
};

// C = A B with vdpbf16ps (C dense along rows, c[i * ldc + j], f32). Each C element is one fixed
// sequence: from 0, for each pair p = 0, 2, 4, ... of k, one vdpbf16ps step adding
// a(i, p) b(p, j) + a(i, p+1) b(p+1, j) (a zero pads an odd k), whatever m, n, the tiling or the
// thread count; the instruction treats subnormal inputs and results as zero (docs/numerics.md).
// Only when bf16_dot_level() > 0 (runtime.hpp); splits over the thread pool like gemm_f32.
void gemm_bf16_dot(int64_t m, int64_t n, int64_t k, BF16Matrix a, BF16Matrix b, float *c, int64_t ldc);

// Multiply-adds (m * n * k) from which gemm_f32 splits work between threads.
constexpr int64_t k_gemm_parallel_macs = int64_t{1} << 20;

}  // namespace tf_cpu
