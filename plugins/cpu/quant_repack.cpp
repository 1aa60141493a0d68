// The repacked layouts (quant_repack.hpp): the copy in and out of them, one run of bytes at a time,
// from a table of where each field of a GGUF block goes; the portable group dots.
#include "quant_repack.hpp"

#include <cstring>

namespace tf_cpu::quant {

namespace {

// `count` runs of `run` bytes of a block's field starting at its byte `src`: run i of row r of
// block column b at area_base + b * area_column + at + (8 i + r) run (quant_repack.hpp's layouts).
struct Segment {
    int src, run, count, area, at;
};

// A dtype's group: its areas (the k-quants have one, the 32-formats' scales a second after the
// quants of every block column) and the segments of a block.
struct Layout {
    size_t block_bytes;
    size_t area_column[2];  // bytes per block column of each area
    Segment segments[4];
    int n_segments;
};

const Layout &layout_of(int32_t dtype) {
    static constexpr Layout q4_0{sizeof(BlockQ4_0), {128, 16}, {{2, 4, 4, 0, 0}, {0, 2, 1, 1, 0}}, 2};
    static constexpr Layout q8_0{sizeof(BlockQ8_0), {256, 16}, {{2, 32, 1, 0, 0}, {0, 2, 1, 1, 0}}, 2};
    static constexpr Layout q4_k{sizeof(BlockQ4_K),
                                 {8 * sizeof(BlockQ4_K), 0},
                                 {{0, 2, 1, 0, 0}, {2, 2, 1, 0, 16}, {4, 4, 3, 0, 32}, {16, 4, 32, 0, 128}},
                                 4};
    static constexpr Layout q6_k{sizeof(BlockQ6_K),
                                 {8 * sizeof(BlockQ6_K), 0},
                                 {{192, 2, 8, 0, 0}, {208, 2, 1, 0, 128}, {0, 4, 32, 0, 144}, {128, 4, 16, 0, 1168}},
                                 4};
    switch (dtype) {
    case TF_DTYPE_Q4_0: return q4_0;
    case TF_DTYPE_Q8_0: return q8_0;
    case TF_DTYPE_Q4_K: return q4_k;
    default: return q6_k;
    }
}

// count runs of Run bytes between a block's field and the group (runs k_group_rows * Run apart);
// the size a constant, so that each copy is one load and store (prefill unpacks every block).
template <size_t Run>
void copy_runs(char *at, char *field, int count, bool into_group) {
    for (int i = 0; i < count; ++i, at += k_group_rows * Run, field += Run)
        into_group ? std::memcpy(at, field, Run) : std::memcpy(field, at, Run);
}

// Copies row r's block of column b between a GGUF block and the group.
void copy_block(const RepackedShape &s, char *group, int r, int64_t b, char *block, bool into_group) {
    const Layout &l = layout_of(s.dtype);
    const size_t area_base[2] = {0, static_cast<size_t>(s.blocks) * l.area_column[0]};
    for (int g = 0; g < l.n_segments; ++g) {
        const Segment &seg = l.segments[g];
        char *at = group + area_base[seg.area] + static_cast<size_t>(b) * l.area_column[seg.area] +
                   static_cast<size_t>(seg.at + r * seg.run);
        char *field = block + seg.src;
        switch (seg.run) {
        case 2: copy_runs<2>(at, field, seg.count, into_group); break;
        case 4: copy_runs<4>(at, field, seg.count, into_group); break;
        default: copy_runs<32>(at, field, seg.count, into_group); break;
        }
    }
}

}  // namespace

size_t RepackedShape::block_bytes() const { return layout_of(dtype).block_bytes; }

bool repackable(int32_t dtype) {
    return dtype == TF_DTYPE_Q4_0 || dtype == TF_DTYPE_Q8_0 || dtype == TF_DTYPE_Q4_K || dtype == TF_DTYPE_Q6_K;
}

void repack_rows(const RepackedShape &s, const char *src, int64_t src_row_bytes, char *dst) {
    const size_t block = s.block_bytes();
    for (int64_t g = 0; g < s.groups(); ++g) {
        char *group = dst + static_cast<size_t>(g) * s.group_bytes();
        for (int r = 0; r < k_group_rows; ++r) {
            const char *row = src + (g * k_group_rows + r) * src_row_bytes;
            for (int64_t b = 0; b < s.blocks; ++b)
                copy_block(s, group, r, b, const_cast<char *>(row) + static_cast<size_t>(b) * block, true);
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
    for (int64_t b = first; b < first + count; ++b, out += block) copy_block(s, group, r, b, out, false);
}

void unpack_row(const RepackedShape &s, const char *packed, int64_t row, void *dst) {
    unpack_blocks(s, packed, row, 0, s.blocks, dst);
}

namespace {

// Each row's block unpacked and multiplied by the portable row dot, one block at a time: the row
// dot adds its blocks' terms to 0 in order, so the sums are its bits exactly.
template <int32_t Dtype, class Block, class Act>
void portable_group(const char *group, const void *act, int64_t blocks, float *out) {
    const RepackedShape shape{Dtype, k_group_rows, blocks};
    const DotFn dot = portable_dot(Dtype);
    const auto *a = static_cast<const Act *>(act);
    for (int r = 0; r < k_group_rows; ++r) {
        float sum = 0;
        for (int64_t b = 0; b < blocks; ++b) {
            Block block;
            unpack_blocks(shape, group, r, b, 1, &block);
            sum += dot(&block, a + b, shape.block_length());
        }
        out[r] = sum;
    }
}

}  // namespace

GroupDotFn portable_group_dot(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_Q4_0: return portable_group<TF_DTYPE_Q4_0, BlockQ4_0, ActQ8>;
    case TF_DTYPE_Q8_0: return portable_group<TF_DTYPE_Q8_0, BlockQ8_0, ActQ8>;
    case TF_DTYPE_Q4_K: return portable_group<TF_DTYPE_Q4_K, BlockQ4_K, BlockQ8_K>;
    case TF_DTYPE_Q6_K: return portable_group<TF_DTYPE_Q6_K, BlockQ6_K, BlockQ8_K>;
    default: return nullptr;
    }
}

bool avx2_usable(int isa);  // quant_dot.cpp

GroupDotFn group_dot_of(int32_t dtype, int isa) {
    if (avx2_usable(isa))
        if (GroupDotFn f = avx2_group_dot(dtype)) return f;
    return portable_group_dot(dtype);
}

}  // namespace tf_cpu::quant
