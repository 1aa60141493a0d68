// The repacked layout of q4_0 and q8_0 weights (docs/quantization.md, "Repacked weights"): eight
// rows interleaved block by block, so that one load of an activation block serves eight rows and
// the eight rows' f16 scales of a block column come in one 16-byte load. The same bytes as the
// GGUF rows, rearranged; repack_rows and unpack_row are exact inverses. Built once per weight by
// the prepacked-weight cache (prepacked_weights.hpp) and read by matmul_q (kernels_quant.cpp).
// Private to the cpu plugin.
#pragma once

#include "quant_blocks.hpp"

namespace tf_cpu::quant {

// Rows per interleaved group.
constexpr int k_group_rows = 8;

// A weight of `rows` rows of `blocks` 32-blocks, repacked. Groups of eight rows come first, one
// after the other; group g (rows 8g .. 8g + 7) holds the quants of every block column, then the
// eight rows' f16 scales of every block column:
//   q4_0: block column b's quants at 128 b, four runs of 32 bytes; run c holds nibble bytes
//         4c .. 4c + 3 of rows 0..7 (4 bytes each, row order), so that one 32-byte load meets one
//         broadcast 4-byte run of activations in every row; scales at 128 blocks + 16 b, rows 0..7;
//   q8_0: block column b's quants at 256 b: the 32 bytes of rows 0..7, scales at 256 blocks + 16 b.
// The last rows % 8 rows follow as plain GGUF rows. Exactly the bytes of the GGUF rows in all.
struct RepackedShape {
    int32_t dtype;  // TF_DTYPE_Q4_0 or TF_DTYPE_Q8_0
    int64_t rows;
    int64_t blocks;  // per row

    size_t block_bytes() const;
    // Quant bytes of one block column of a group (128 for q4_0, 256 for q8_0).
    size_t quant_bytes() const;
    size_t group_bytes() const { return static_cast<size_t>(blocks) * (quant_bytes() + 2 * k_group_rows); }
    int64_t groups() const { return rows / k_group_rows; }
    size_t row_bytes() const { return static_cast<size_t>(blocks) * block_bytes(); }
    size_t total_bytes() const { return static_cast<size_t>(rows) * row_bytes(); }
    // The first plain row after the groups.
    size_t tail_offset() const { return static_cast<size_t>(groups()) * group_bytes(); }
};

// Whether a dtype has a repacked layout.
bool repackable(int32_t dtype);

// Rows of GGUF blocks at src (row r at src + r * src_row_bytes) into the layout at dst
// (shape.total_bytes()).
void repack_rows(const RepackedShape &shape, const char *src, int64_t src_row_bytes, char *dst);
// Blocks first .. first + count - 1 of row `row` of a repacked weight back as GGUF blocks at dst;
// unpack_row: the whole row (shape.row_bytes() at dst).
void unpack_blocks(const RepackedShape &shape, const char *packed, int64_t row, int64_t first, int64_t count,
                   void *dst);
void unpack_row(const RepackedShape &shape, const char *packed, int64_t row, void *dst);

// The dot products of the eight rows of one group with an activation row of `blocks` blocks, into
// out[0..7]. q4_0 takes the activation form ActQuadQ8 (as its row dot), q8_0 ActQ8.
using GroupDotFn = void (*)(const char *group, const void *act, int64_t blocks, float *out);
// The AVX2 group dot of dtype (quant_repack_avx2.cpp); nullptr when there is none.
GroupDotFn avx2_group_dot(int32_t dtype);

}  // namespace tf_cpu::quant
