// The repacked q4_0 / q8_0 layout (quant_repack.hpp): the copy in and out of it, one block at a
// time, from the positions the header defines.
#include "quant_repack.hpp"

#include <cstring>

namespace tf_cpu::quant {

namespace {

// Where row r (0..7) of a group sits among a q4_0 block column's eight 16-byte slots: rows j and
// j + 4 side by side in the j-th 32 bytes.
int q4_0_slot(int r) { return 2 * (r % 4) + r / 4; }

// The byte offsets, inside a group, of row r's quants and scale in block column b.
size_t quant_offset(const RepackedShape &s, int r, int64_t b) {
    const size_t column = static_cast<size_t>(b) * s.quant_bytes();
    return s.dtype == TF_DTYPE_Q4_0 ? column + 16 * static_cast<size_t>(q4_0_slot(r)) : column + 32 * size_t(r);
}
size_t scale_offset(const RepackedShape &s, int r, int64_t b) {
    return static_cast<size_t>(s.blocks) * s.quant_bytes() + static_cast<size_t>(b) * 2 * k_group_rows + 2 * size_t(r);
}

}  // namespace

size_t RepackedShape::block_bytes() const { return dtype == TF_DTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0); }
size_t RepackedShape::quant_bytes() const { return dtype == TF_DTYPE_Q4_0 ? 128 : 256; }

bool repackable(int32_t dtype) { return dtype == TF_DTYPE_Q4_0 || dtype == TF_DTYPE_Q8_0; }

// A block is its f16 scale (2 bytes) then its quants (block_bytes - 2), as quant_blocks.hpp's
// structs lay them out.
void repack_rows(const RepackedShape &s, const char *src, int64_t src_row_bytes, char *dst) {
    const size_t block = s.block_bytes(), quants = block - 2;
    for (int64_t g = 0; g < s.groups(); ++g) {
        char *group = dst + static_cast<size_t>(g) * s.group_bytes();
        for (int r = 0; r < k_group_rows; ++r) {
            const char *row = src + (g * k_group_rows + r) * src_row_bytes;
            for (int64_t b = 0; b < s.blocks; ++b) {
                const char *blk = row + static_cast<size_t>(b) * block;
                std::memcpy(group + scale_offset(s, r, b), blk, 2);
                std::memcpy(group + quant_offset(s, r, b), blk + 2, quants);
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
    const char *group = packed + static_cast<size_t>(g) * s.group_bytes();
    const int r = static_cast<int>(row % k_group_rows);
    for (int64_t b = first; b < first + count; ++b, out += block) {
        std::memcpy(out, group + scale_offset(s, r, b), 2);
        std::memcpy(out + 2, group + quant_offset(s, r, b), block - 2);
    }
}

void unpack_row(const RepackedShape &s, const char *packed, int64_t row, void *dst) {
    unpack_blocks(s, packed, row, 0, s.blocks, dst);
}

}  // namespace tf_cpu::quant
