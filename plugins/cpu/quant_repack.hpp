// The repacked layouts of q4_0, q8_0, q4_k and q6_k weights (docs/quantization.md, "Repacked
// weights"): eight rows interleaved block by block, so that one load of an activation block
// serves eight rows and the eight rows' scales of a block column are read (and, for the
// k-quants, decoded) together. The same bytes as the GGUF rows, rearranged; repack_rows and
// unpack_row are exact inverses. Built once per weight by the prepacked-weight cache
// (prepacked_weights.hpp) and read by matmul_q (kernels_quant.cpp). Private to the cpu plugin.
#pragma once

#include "quant_blocks.hpp"

namespace tf_cpu::quant {

// Rows per interleaved group.
constexpr int k_group_rows = 8;

// A weight of `rows` rows of `blocks` blocks (32 elements for q4_0/q8_0, 256 for q4_k/q6_k),
// repacked. Groups of eight rows come first, one after the other; the last rows % 8 rows follow
// as plain GGUF rows. Exactly the bytes of the GGUF rows in all. Inside a group every byte of a
// row's block goes to a run of rows side by side: "n-byte runs" below means run i of the block's
// field holds its bytes n i .. n i + n - 1 of rows 0..7 in row order (8 n bytes), so that one
// 32-byte load meets one broadcast n-byte run of activations in every row.
//   q4_0: the quants of every block column first, block column b's at 128 b (4-byte runs of its
//         16 nibble bytes), then the f16 scales of every block column (2-byte runs) at
//         128 blocks + 16 b;
//   q8_0: quants at 256 b (one 32-byte run), scales at 256 blocks + 16 b;
//   q4_k: block column b whole at 1152 b: d (2-byte runs) at 0, dmin at 16, the 12 packed scale
//         bytes (4-byte runs: word w of rows 0..7 at 32 + 32 w) at 32, the 128 nibble bytes
//         (4-byte runs) at 128;
//   q6_k: block column b whole at 1680 b: the 16 int8 scales (2-byte runs: sub-blocks 2i, 2i + 1
//         of rows 0..7 at 16 i) at 0, d at 128, ql (4-byte runs) at 144, qh (4-byte runs) at 1168.
struct RepackedShape {
    int32_t dtype;  // TF_DTYPE_Q4_0, TF_DTYPE_Q8_0, TF_DTYPE_Q4_K or TF_DTYPE_Q6_K
    int64_t rows;
    int64_t blocks;  // per row

    size_t block_bytes() const;
    int64_t block_length() const { return dtype == TF_DTYPE_Q4_K || dtype == TF_DTYPE_Q6_K ? k_qk_k : k_qk; }
    // Bytes of one block column of a group: eight blocks.
    size_t column_bytes() const { return k_group_rows * block_bytes(); }
    size_t group_bytes() const { return static_cast<size_t>(blocks) * column_bytes(); }
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
// out[0..7], in the activation form act_kind_of(dtype, isa) gives (q4_0: ActQuadQ8 on AVX2;
// q4_k/q6_k: q8_k super-blocks).
using GroupDotFn = void (*)(const char *group, const void *act, int64_t blocks, float *out);
// The AVX2 group dot of dtype (quant_repack_avx2.cpp); nullptr when there is none.
GroupDotFn avx2_group_dot(int32_t dtype);
// The portable group dots (quant_repack.cpp): each row's blocks unpacked and given to the portable
// row dot (quant_dot.cpp), so bit for bit its results; the q4_0 one takes ActQ8 activations (the
// form below AVX2). nullptr for dtypes without a layout.
GroupDotFn portable_group_dot(int32_t dtype);
// The group dot for dtype at level isa (runtime.hpp's isa_level()): AVX2 where the level allows
// and a kernel exists, else portable (nullptr: none).
GroupDotFn group_dot_of(int32_t dtype, int isa);

}  // namespace tf_cpu::quant
