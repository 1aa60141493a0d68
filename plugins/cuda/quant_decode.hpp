// Decoding ggml's block formats (dtypes.def) 32 elements at a time: a whole block of the
// 32-formats, one of the eight 32-element sub-blocks of the k-quants (a "chunk"). __host__
// __device__ code: quant.cu's kernels run it on the GPU and tests/cuda/test_cuda_quant.cpp runs
// the same functions on the host against the cpu plugin's reference codec, bit for bit.
//
// Each value is computed in f32 as plugins/cpu/quant_reference.cpp computes it (and
// shaders/quant.comp, shaders/opencl/quant.cl): the product of an f16 scale with a small integer,
// then the minimum added (q4_1, q5_1) or subtracted (q4_k, q5_k), each operation rounded on its
// own. mul_rn/add_rn/sub_rn keep nvcc from fusing the product into the add (an FMA rounds once
// and changes the bits).
//
// Reads: every field of every block starts at an even byte, every block size is even, and a
// quantized tensor starts at a multiple of its block size (whole_blocks) in a cudaMalloc'd
// (256-byte aligned) buffer, so every read below is a 16-bit load at an even address; the 32-bit
// fields are two of them.
#pragma once

#include <tinyfin/plugin.h>

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "geometry.hpp"  // TF_CUDA_HD

// Device code only (nvcc also passes __CUDACC__ to the host compiler, which has no such pragma).
#ifdef __CUDA_ARCH__
#define TF_CUDA_UNROLL _Pragma("unroll")
#else
#define TF_CUDA_UNROLL
#endif

namespace tf_cuda::quant {

// Elements a decode produces.
constexpr int chunk = 32;

// Elements and bytes per block of the quantized dtypes (dtypes.def; quant.cu checks them
// against the kit's table), 0 for any other dtype.
TF_CUDA_HD constexpr int64_t block_length(int32_t dtype) {
    return dtype >= TF_DTYPE_Q8_0 && dtype <= TF_DTYPE_Q5_1   ? 32
           : dtype >= TF_DTYPE_Q4_K && dtype <= TF_DTYPE_Q8_K ? 256
                                                              : 0;
}
TF_CUDA_HD constexpr int64_t block_bytes(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_Q8_0: return 34;
    case TF_DTYPE_Q4_0: return 18;
    case TF_DTYPE_Q4_1: return 20;
    case TF_DTYPE_Q5_0: return 22;
    case TF_DTYPE_Q5_1: return 24;
    case TF_DTYPE_Q4_K: return 144;
    case TF_DTYPE_Q5_K: return 176;
    case TF_DTYPE_Q6_K: return 210;
    case TF_DTYPE_Q8_K: return 292;
    default: return 0;
    }
}

// The bytes of a quantized tensor, read in 16-bit words (see above). Byte offsets b count from
// the tensor's first byte.
struct Blocks {
    const uint16_t *words;

    TF_CUDA_HD uint32_t u16(int64_t b) const {  // b even
#ifdef __CUDA_ARCH__
        return __ldg(words + (b >> 1));
#else
        return words[b >> 1];
#endif
    }
    TF_CUDA_HD uint32_t u8(int64_t b) const { return (u16(b) >> ((b & 1) * 8)) & 0xffu; }
    // Little-endian, b even.
    TF_CUDA_HD uint32_t u32(int64_t b) const { return u16(b) | (u16(b + 2) << 16); }
    TF_CUDA_HD float f16(int64_t b) const {
        return __half2float(__ushort_as_half(static_cast<unsigned short>(u16(b))));
    }
    TF_CUDA_HD float f32(int64_t b) const {
        const uint32_t bits = u32(b);
#ifdef __CUDA_ARCH__
        return __uint_as_float(bits);
#else
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
#endif
    }
};

// f32 operations rounded on their own (never contracted into an FMA).
TF_CUDA_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
TF_CUDA_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
TF_CUDA_HD float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

// Byte i (0..3) of a little-endian word as a signed integer.
TF_CUDA_HD int32_t signed_byte(uint32_t word, int i) { return static_cast<int32_t>(word << (24 - 8 * i)) >> 24; }

// The 6-bit scale and minimum of sub-block s (0..7) of a q4_k/q5_k block whose 12 packed scale
// bytes start at byte b (ggml's get_scale_min_k4).
TF_CUDA_HD void scale_min_k4(const Blocks &q, int64_t b, int s, uint32_t &scale, uint32_t &min) {
    if (s < 4) {
        scale = q.u8(b + s) & 63u;
        min = q.u8(b + s + 4) & 63u;
    } else {
        const uint32_t hi = q.u8(b + s + 4);
        scale = (hi & 15u) | ((q.u8(b + s - 4) >> 6) << 4);
        min = (hi >> 4) | ((q.u8(b + s) >> 6) << 4);
    }
}

// Elements 32 c .. 32 c + 31 of the row of QT blocks starting at byte rb.
template <int32_t QT>
TF_CUDA_HD void decode32(const Blocks &q, int64_t rb, int64_t c, float (&v)[chunk]) {
    static_assert(block_bytes(QT) > 0, "a quantized dtype");
    if constexpr (QT == TF_DTYPE_Q8_0) {
        // {f16 d; i8 qs[32]}: x = q d.
        const int64_t b = rb + 34 * c;
        const float d = q.f16(b);
        TF_CUDA_UNROLL
        for (int i = 0; i < 8; ++i) {
            const uint32_t word = q.u32(b + 2 + 4 * i);
            TF_CUDA_UNROLL
            for (int j = 0; j < 4; ++j) v[4 * i + j] = mul_rn(static_cast<float>(signed_byte(word, j)), d);
        }
    } else if constexpr (QT == TF_DTYPE_Q4_0 || QT == TF_DTYPE_Q4_1 || QT == TF_DTYPE_Q5_0 || QT == TF_DTYPE_Q5_1) {
        // {f16 d; [f16 m;] [u8 qh[4];] u8 qs[16]}: element j in qs[j]'s low nibble, j + 16 in its
        // high one; the 5-bit formats' bit 4 of element j is bit j of qh (a little-endian u32).
        // x = (q - 8) d, (q - 16) d, or q d + m.
        constexpr bool five = QT == TF_DTYPE_Q5_0 || QT == TF_DTYPE_Q5_1;
        constexpr bool with_min = QT == TF_DTYPE_Q4_1 || QT == TF_DTYPE_Q5_1;
        constexpr int qh_at = with_min ? 4 : 2;
        constexpr int qs_at = qh_at + (five ? 4 : 0);
        constexpr int offset = with_min ? 0 : five ? 16 : 8;
        const int64_t b = rb + block_bytes(QT) * c;
        const float d = q.f16(b);
        const float m = with_min ? q.f16(b + 2) : 0.f;
        const uint32_t qh = five ? q.u32(b + qh_at) : 0u;
        TF_CUDA_UNROLL
        for (int i = 0; i < 4; ++i) {
            const uint32_t word = q.u32(b + qs_at + 4 * i);
            TF_CUDA_UNROLL
            for (int j = 0; j < 4; ++j) {
                const int e = 4 * i + j;
                const uint32_t byte = (word >> (8 * j)) & 0xffu;
                const int32_t q0 = static_cast<int32_t>((byte & 15u) | (((qh >> e) & 1u) << 4)) - offset;
                const int32_t q1 = static_cast<int32_t>((byte >> 4) | (((qh >> (e + 16)) & 1u) << 4)) - offset;
                float p0 = mul_rn(static_cast<float>(q0), d), p1 = mul_rn(static_cast<float>(q1), d);
                if constexpr (with_min) {
                    p0 = add_rn(p0, m);
                    p1 = add_rn(p1, m);
                }
                v[e] = p0;
                v[e + 16] = p1;
            }
        }
    } else if constexpr (QT == TF_DTYPE_Q4_K || QT == TF_DTYPE_Q5_K) {
        // {f16 d; f16 dmin; u8 scales[12]; [u8 qh[32];] u8 qs[128]}: sub-block s (32 elements)
        // in the low (s even) or high (s odd) nibbles of qs[32 (s / 2) ..], q5_k's bit 4 of its
        // element l in bit s of qh[l]; x = (d sc) q - (dmin m).
        constexpr bool five = QT == TF_DTYPE_Q5_K;
        const int64_t b = rb + block_bytes(QT) * (c >> 3);
        const int s = static_cast<int>(c & 7);
        uint32_t sc = 0, mn = 0;
        scale_min_k4(q, b + 4, s, sc, mn);
        const float d1 = mul_rn(q.f16(b), static_cast<float>(sc));
        const float m1 = mul_rn(q.f16(b + 2), static_cast<float>(mn));
        const int64_t qs = b + (five ? 48 : 16) + 32 * (s >> 1);
        const int shift = (s & 1) * 4;
        TF_CUDA_UNROLL
        for (int i = 0; i < 8; ++i) {
            const uint32_t word = q.u32(qs + 4 * i);
            const uint32_t high = five ? q.u32(b + 16 + 4 * i) : 0u;
            TF_CUDA_UNROLL
            for (int j = 0; j < 4; ++j) {
                uint32_t value = (word >> (8 * j + shift)) & 15u;
                if (five && ((high >> (8 * j + s)) & 1u) != 0u) value += 16u;
                v[4 * i + j] = sub_rn(mul_rn(d1, static_cast<float>(value)), m1);
            }
        }
    } else if constexpr (QT == TF_DTYPE_Q6_K) {
        // {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: two halves of 128 elements, each four
        // quarters of 32; quarter k's element l: low 4 bits in ql[64 h + 32 (k & 1) + l] (low
        // nibble for k < 2), high 2 bits at bit 2 k of qh[32 h + l]; scale scales[8 h + 2 k + l / 16];
        // x = (d sc) (q - 32).
        const int64_t b = rb + 210 * (c >> 3);
        const int cb = static_cast<int>(c & 7), h = cb >> 2, quarter = cb & 3;
        const float d = q.f16(b + 208);
        const int64_t ql = b + 64 * h + 32 * (quarter & 1), qh = b + 128 + 32 * h;
        const int shift = (quarter >> 1) * 4;
        const int64_t scales = b + 192 + 8 * h + 2 * quarter;
        const float d0 = mul_rn(d, static_cast<float>(static_cast<int8_t>(q.u8(scales))));
        const float d1 = mul_rn(d, static_cast<float>(static_cast<int8_t>(q.u8(scales + 1))));
        TF_CUDA_UNROLL
        for (int i = 0; i < 8; ++i) {
            const uint32_t lo = q.u32(ql + 4 * i), hi = q.u32(qh + 4 * i);
            TF_CUDA_UNROLL
            for (int j = 0; j < 4; ++j) {
                const int l = 4 * i + j;
                const int32_t value = static_cast<int32_t>(((lo >> (8 * j + shift)) & 15u) |
                                                           (((hi >> (8 * j + 2 * quarter)) & 3u) << 4)) -
                                      32;
                v[l] = mul_rn(l < 16 ? d0 : d1, static_cast<float>(value));
            }
        }
    } else {
        // q8_k: {f32 d; i8 qs[256]; i16 bsums[16]}: x = d q.
        const int64_t b = rb + 292 * (c >> 3);
        const float d = q.f32(b);
        const int64_t qs = b + 4 + 32 * (c & 7);
        TF_CUDA_UNROLL
        for (int i = 0; i < 8; ++i) {
            const uint32_t word = q.u32(qs + 4 * i);
            TF_CUDA_UNROLL
            for (int j = 0; j < 4; ++j) v[4 * i + j] = mul_rn(d, static_cast<float>(signed_byte(word, j)));
        }
    }
}

// Calls fn(std::integral_constant<int32_t, QT>{}) for a quantized dtype QT (host code: the
// launchers and the host test); false for any other dtype.
template <class Fn>
inline bool with_quantized(int32_t dtype, Fn &&fn) {
    switch (dtype) {
    case TF_DTYPE_Q8_0: fn(std::integral_constant<int32_t, TF_DTYPE_Q8_0>{}); return true;
    case TF_DTYPE_Q4_0: fn(std::integral_constant<int32_t, TF_DTYPE_Q4_0>{}); return true;
    case TF_DTYPE_Q4_1: fn(std::integral_constant<int32_t, TF_DTYPE_Q4_1>{}); return true;
    case TF_DTYPE_Q5_0: fn(std::integral_constant<int32_t, TF_DTYPE_Q5_0>{}); return true;
    case TF_DTYPE_Q5_1: fn(std::integral_constant<int32_t, TF_DTYPE_Q5_1>{}); return true;
    case TF_DTYPE_Q4_K: fn(std::integral_constant<int32_t, TF_DTYPE_Q4_K>{}); return true;
    case TF_DTYPE_Q5_K: fn(std::integral_constant<int32_t, TF_DTYPE_Q5_K>{}); return true;
    case TF_DTYPE_Q6_K: fn(std::integral_constant<int32_t, TF_DTYPE_Q6_K>{}); return true;
    case TF_DTYPE_Q8_K: fn(std::integral_constant<int32_t, TF_DTYPE_Q8_K>{}); return true;
    default: return false;
    }
}

}  // namespace tf_cuda::quant
