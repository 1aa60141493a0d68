// The repacked q4_0 / q8_0 layout (quant_repack.hpp): the copy in and out of it, one block at a
// time, from the positions the header defines.
#include "quant_repack.hpp"

#include <cstring>

namespace tf_cpu::quant {

namespace {

// Where row r's quants of block column b sit inside a group: q4_0 in four runs of 4 bytes (run c
// at 32 c + 4 r of the column: nibble bytes 4c .. 4c + 3), q8_0 in one run of 32 at 32 r.
constexpr int k_q4_0_run = 4;

size_t scale_offset(const RepackedShape &s, int r, int64_t b) {
    return static_cast<size_t>(s.blocks) * s.quant_bytes() + static_cast<size_t>(b) * 2 * k_group_rows + 2 * size_t(r);
}

// Copies row r's quants of block column b between a GGUF block's quants and the group.
void copy_quants(const RepackedShape &s, char *group, int r, int64_t b, char *quants, bool into_group) {
    char *column = group + static_cast<size_t>(b) * s.quant_bytes();
    auto copy = [into_group](char *in_group, char *in_block, size_t n) {
        into_group ? std::memcpy(in_group, in_block, n) : std::memcpy(in_block, in_group, n);
    };
    if (s.dtype == TF_DTYPE_Q8_0) return copy(column + 32 * size_t(r), quants, 32);
    for (int c = 0; c < 16 / k_q4_0_run; ++c)
        copy(column + 32 * size_t(c) + k_q4_0_run * size_t(r), quants + k_q4_0_run * c, k_q4_0_run);
}

}  // namespace

size_t RepackedShape::block_bytes() const { return dtype == TF_DTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0); }
size_t RepackedShape::quant_bytes() const { return dtype == TF_DTYPE_Q4_0 ? 128 : 256; }

bool repackable(int32_t dtype) { return dtype == TF_DTYPE_Q4_0 || dtype == TF_DTYPE_Q8_0; }

// A block is its f16 scale (2 bytes) then its quants (block_bytes - 2), as quant_blocks.hpp's
// structs lay them out.
void repack_rows(const RepackedShape &s, const char *src, int64_t src_row_bytes, char *dst) {
    const size_t block = s.block_bytes();
    for (int64_t g = 0; g < s.groups(); ++g) {
        char *group = dst + static_cast<size_t>(g) * s.group_bytes();
        for (int r = 0; r < k_group_rows; ++r) {
            const char *row = src + (g * k_group_rows + r) * src_row_bytes;
            for (int64_t b = 0; b < s.blocks; ++b) {
                const char *blk = row + static_cast<size_t>(b) * block;
                std::memcpy(group + scale_offset(s, r, b), blk, 2);
                copy_quants(s, group, r, b, const_cast<char *>(blk) + 2, true);
            }
        }
    }
    char *tail = dst + s.tail_offset();
    for (int64_t r = s.groups() * k_group_rows; r < s.rows; ++r, tail += s.row_bytes())
        std::memcpy(tail, src + r * src_row_bytes, s.row_bytes());
}

void unpack_blocks(const RepackedShape &s, const char *packed, int64_t row, int64_t first, int64_t count, void *dst) {
    auto *out = static_cast<char *>(dst);
    const size_t block = s.block_bytes();
    const int64_t g = row / k_group_rows;
    if (g >= s.groups()) {
        const char *plain =
            packed + s.tail_offset() + static_cast<size_t>(row - s.groups() * k_group_rows) * s.row_bytes();
        std::memcpy(out, plain + static_cast<size_t>(first) * block, static_cast<size_t>(count) * block);
        return;
    }
    char *group = const_cast<char *>(packed) + static_cast<size_t>(g) * s.group_bytes();
    const int r = static_cast<int>(row % k_group_rows);
    for (int64_t b = first; b < first + count; ++b, out += block) {
        std::memcpy(out, group + scale_offset(s, r, b), 2);
        copy_quants(s, group, r, b, out + 2, false);
    }
}

void unpack_row(const RepackedShape &s, const char *packed, int64_t row, void *dst) {
    unpack_blocks(s, packed, row, 0, s.blocks, dst);
}

}  // namespace tf_cpu::quant
