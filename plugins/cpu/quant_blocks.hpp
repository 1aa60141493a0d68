// ggml's block formats as C++ structs (the fields dtypes.def lists, bit for bit as GGUF stores
// them), the reference encoders and decoders of a row of blocks (quant_reference.cpp), the
// activation blocks the integer dot products take, and the dot products (quant_dot*.cpp).
// Private to the cpu plugin; docs/quantization.md has the formats.
#pragma once

#include <tinyfin/plugin.h>

#include <cstddef>
#include <cstdint>

namespace tf_cpu::quant {

constexpr int k_qk = 32;  // elements per block of the 32-formats
constexpr int k_qk_k = 256;  // elements per super-block of the k-quants

// f16 stored as its bits.
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[k_qk];
};
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[k_qk / 2];
};
struct BlockQ4_1 {
    uint16_t d, m;
    uint8_t qs[k_qk / 2];
};
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[k_qk / 2];
};
struct BlockQ5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[k_qk / 2];
};
struct BlockQ4_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[k_qk_k / 2];
};
struct BlockQ5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[k_qk_k / 8];
    uint8_t qs[k_qk_k / 2];
};
struct BlockQ6_K {
    uint8_t ql[k_qk_k / 2];
    uint8_t qh[k_qk_k / 4];
    int8_t scales[k_qk_k / 16];
    uint16_t d;
};
struct BlockQ8_K {
    float d;
    int8_t qs[k_qk_k];
    int16_t bsums[k_qk_k / 16];
};

// An activation block of 32 for the 32-formats' dots: f32 scale (no f16 rounding), the sum of
// its quants (for the formats with a minimum).
struct ActQ8 {
    float d;
    int32_t sum;
    int8_t qs[k_qk];
};

// One row of each dtype: bytes per block and the reference codecs (quant_reference.cpp).
// decode: n elements (a multiple of the block length) of blocks at src to f32.
// encode: n f32 to blocks, as ggml's quantize_row_*_ref does.
using DecodeRow = void (*)(const void *src, float *dst, int64_t n);
using EncodeRow = void (*)(const float *src, void *dst, int64_t n);

// The 6-bit scale and minimum j (0..7) of a q4_k / q5_k block's packed scales.
inline void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

struct Codec {
    int64_t block;
    size_t block_bytes;
    DecodeRow decode;
    EncodeRow encode;
};
// The codec of a quantized dtype; nullptr for any other.
const Codec *codec_of(int32_t dtype);

// ---- Dot products of a weight row with quantized activations --------------------------------

// Four activation blocks laid out for the AVX2 q4_0 dot, which reads two weight blocks per
// register and folds two registers into one with vphaddw before a single conversion: pair p (0
// for blocks 4q, 4q + 1; 1 for 4q + 2, 4q + 3) has the low halves (elements 0..15) of its two
// blocks side by side in lo[p], the high halves likewise in hi[p]; offset (q4_0's 8 sum(a)) and d
// (the scale) are in the lanes where the folded sums of their block land: blocks 4q, 4q + 2 in
// lanes 0-1, 2-3 and 4q + 1, 4q + 3 in lanes 4-5, 6-7 (the offset in the first lane of the two,
// the other 0). Blocks past the row's end are zero blocks (zero quants, sum and scale).
struct ActQuadQ8 {
    int8_t lo[2][32];
    int8_t hi[2][32];
    int32_t offset[8];
    float d[8];
};

// The activation form a weight dtype's dot takes at level isa: 32-blocks (ActQ8), groups of four
// (ActQuadQ8: q4_0 on AVX2) or q8_k super-blocks.
enum class ActKind { q8_32, q8_32_quads, q8_k };
ActKind act_kind_of(int32_t weight_dtype, int isa);
// Bytes of the activation form of a row of n elements.
size_t act_bytes(ActKind kind, int64_t n);
// Encodes a row of n f32 activations (n a multiple of the block length).
void quantize_act(ActKind kind, const float *x, void *dst, int64_t n);

// The dot product of a weight row of n elements (dtype's blocks) with an activation row.
using DotFn = float (*)(const void *w, const void *act, int64_t n);
// The best dot for dtype at instruction set level `isa` (runtime.hpp's isa_level()): AVX2 where
// the level is >= 1 and a kernel exists, else portable.
DotFn dot_of(int32_t dtype, int isa);

// Portable and AVX2 dots (quant_dot.cpp, quant_dot_avx2.cpp); nullptr when a dtype has none.
DotFn portable_dot(int32_t dtype);
DotFn avx2_dot(int32_t dtype);

// The fastest decoder of a row of dtype's blocks at level `isa`, bit for bit the reference
// codec's (quant_decode_avx2.cpp where the level is >= 1, else codec_of(dtype)->decode).
DecodeRow decode_of(int32_t dtype, int isa);
DecodeRow avx2_decode(int32_t dtype);  // nullptr when a dtype has none

}  // namespace tf_cpu::quant
