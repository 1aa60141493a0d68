// Portable dot products of quantized weight rows with 8-bit activation rows, in integers per block
// and f32 across blocks (quant_blocks.hpp); the activation encoders; the choice of a dot per ISA.
#include "quant_blocks.hpp"

#include "kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tf_cpu::quant {

void encode_q8_k(const float *x, void *dst, int64_t n);  // quant_reference.cpp

namespace {

float h2f(uint16_t h) { return f16_to_f32(h); }

int nearest_int(float x) {
    const float v = x + 12582912.f;
    int32_t i;
    std::memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

// ---- 32-formats: a block's 32 quants as integers, then one integer dot ------------------------

int32_t dot32(const int8_t *a, const int8_t *b) {
    int32_t s = 0;
    for (int j = 0; j < k_qk; ++j) s += int32_t{a[j]} * b[j];
    return s;
}

float dot_q8_0(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ8_0 *>(w);
    const auto *a = static_cast<const ActQ8 *>(act);
    float sum = 0;
    for (int64_t i = 0; i < n / k_qk; ++i) sum += h2f(b[i].d) * a[i].d * static_cast<float>(dot32(b[i].qs, a[i].qs));
    return sum;
}

// Unpacks a 4-bit (and optional 5th-bit) block to its levels 0..15 (0..31).
void levels4(const uint8_t *qs, int8_t *q) {
    for (int j = 0; j < k_qk / 2; ++j) {
        q[j] = static_cast<int8_t>(qs[j] & 0xF);
        q[j + k_qk / 2] = static_cast<int8_t>(qs[j] >> 4);
    }
}
void levels5(const uint8_t *qs, const uint8_t qh_bytes[4], int8_t *q) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, sizeof qh);
    for (int j = 0; j < k_qk / 2; ++j) {
        q[j] = static_cast<int8_t>((qs[j] & 0xF) | ((qh >> j) << 4 & 0x10));
        q[j + k_qk / 2] = static_cast<int8_t>((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10));
    }
}

// sum over blocks of d * da * (dot(levels, a) - offset * sum(a)) [+ m * da * sum(a)].
float dot_q4_0(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ4_0 *>(w);
    const auto *a = static_cast<const ActQ8 *>(act);
    float sum = 0;
    int8_t q[k_qk];
    for (int64_t i = 0; i < n / k_qk; ++i) {
        levels4(b[i].qs, q);
        sum += h2f(b[i].d) * a[i].d * static_cast<float>(dot32(q, a[i].qs) - 8 * a[i].sum);
    }
    return sum;
}

float dot_q4_1(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ4_1 *>(w);
    const auto *a = static_cast<const ActQ8 *>(act);
    float sum = 0;
    int8_t q[k_qk];
    for (int64_t i = 0; i < n / k_qk; ++i) {
        levels4(b[i].qs, q);
        sum += h2f(b[i].d) * a[i].d * static_cast<float>(dot32(q, a[i].qs)) +
               h2f(b[i].m) * a[i].d * static_cast<float>(a[i].sum);
    }
    return sum;
}

float dot_q5_0(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ5_0 *>(w);
    const auto *a = static_cast<const ActQ8 *>(act);
    float sum = 0;
    int8_t q[k_qk];
    for (int64_t i = 0; i < n / k_qk; ++i) {
        levels5(b[i].qs, b[i].qh, q);
        sum += h2f(b[i].d) * a[i].d * static_cast<float>(dot32(q, a[i].qs) - 16 * a[i].sum);
    }
    return sum;
}

float dot_q5_1(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ5_1 *>(w);
    const auto *a = static_cast<const ActQ8 *>(act);
    float sum = 0;
    int8_t q[k_qk];
    for (int64_t i = 0; i < n / k_qk; ++i) {
        levels5(b[i].qs, b[i].qh, q);
        sum += h2f(b[i].d) * a[i].d * static_cast<float>(dot32(q, a[i].qs)) +
               h2f(b[i].m) * a[i].d * static_cast<float>(a[i].sum);
    }
    return sum;
}

// ---- k-quants against q8_k: levels of a super-block, per-sub-block integer dots ----------------

// q4_k / q5_k: d * sum_j sc_j dot_j - dmin * sum_j m_j (sum of the sub-block's activations).
template <bool Five, class Block>
float dot_k45(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const Block *>(w);
    const auto *a = static_cast<const BlockQ8_K *>(act);
    float sum = 0;
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        int8_t q[k_qk_k];
        const uint8_t *qs = b[i].qs;
        for (int j = 0; j < 4; ++j, qs += 32)
            for (int l = 0; l < 32; ++l) {
                int lo = qs[l] & 0xF, hi = qs[l] >> 4;
                if constexpr (Five) {
                    lo += (b[i].qh[l] >> (2 * j) & 1) << 4;
                    hi += (b[i].qh[l] >> (2 * j + 1) & 1) << 4;
                }
                q[64 * j + l] = static_cast<int8_t>(lo);
                q[64 * j + 32 + l] = static_cast<int8_t>(hi);
            }
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            scale_min_k4(j, b[i].scales, &sc, &m);
            int32_t s = 0;
            for (int l = 0; l < 32; ++l) s += int32_t{q[32 * j + l]} * a[i].qs[32 * j + l];
            sumi += sc * s;
            summ += m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
        }
        sum += h2f(b[i].d) * a[i].d * static_cast<float>(sumi) - h2f(b[i].dmin) * a[i].d * static_cast<float>(summ);
    }
    return sum;
}

float dot_q6_k(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ6_K *>(w);
    const auto *a = static_cast<const BlockQ8_K *>(act);
    float sum = 0;
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        int8_t q[k_qk_k];
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        for (int h = 0; h < 2; ++h, ql += 64, qh += 32)
            for (int l = 0; l < 32; ++l) {
                int8_t *o = q + 128 * h;
                o[l] = static_cast<int8_t>((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4));
                o[l + 32] = static_cast<int8_t>((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4));
                o[l + 64] = static_cast<int8_t>((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4));
                o[l + 96] = static_cast<int8_t>((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4));
            }
        int32_t sumi = 0;
        for (int j = 0; j < 16; ++j) {
            int32_t s = 0;
            for (int l = 0; l < 16; ++l) s += int32_t{q[16 * j + l]} * a[i].qs[16 * j + l];
            sumi += b[i].scales[j] * (s - 32 * a[i].bsums[j]);
        }
        sum += h2f(b[i].d) * a[i].d * static_cast<float>(sumi);
    }
    return sum;
}

float dot_q8_k(const void *w, const void *act, int64_t n) {
    const auto *b = static_cast<const BlockQ8_K *>(w);
    const auto *a = static_cast<const BlockQ8_K *>(act);
    float sum = 0;
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        int32_t s = 0;
        for (int j = 0; j < k_qk_k; ++j) s += int32_t{b[i].qs[j]} * a[i].qs[j];
        sum += b[i].d * a[i].d * static_cast<float>(s);
    }
    return sum;
}

// 32-blocks with an f32 scale amax / 127 and round-to-nearest quants.
void encode_act_q8(const float *x, void *dst, int64_t n) {
    auto *a = static_cast<ActQ8 *>(dst);
    for (int64_t i = 0; i < n / k_qk; ++i, x += k_qk) {
        float amax = 0;
        for (int j = 0; j < k_qk; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        a[i].d = d;
        int32_t s = 0;
        for (int j = 0; j < k_qk; ++j) {
            a[i].qs[j] = static_cast<int8_t>(nearest_int(x[j] * id));
            s += a[i].qs[j];
        }
        a[i].sum = s;
    }
}

// Groups of four 32-blocks for the AVX2 q4_0 dot (ActQuadQ8): each block encoded as
// encode_act_q8 does, then placed where that kernel reads it.
void encode_act_quads(const float *x, void *dst, int64_t n) {
    auto *g = static_cast<ActQuadQ8 *>(dst);
    const int64_t blocks = n / k_qk;
    for (int64_t i = 0; i < blocks; i += 4, ++g) {
        *g = ActQuadQ8{};
        for (int b = 0; b < 4 && i + b < blocks; ++b) {
            ActQ8 a;
            encode_act_q8(x + (i + b) * k_qk, &a, k_qk);
            const int pair = b / 2, half = b % 2;  // register, and its 128-bit lane
            const int lane = 4 * half + 2 * pair;  // the first of the block's two sum lanes
            std::memcpy(g->lo[pair] + 16 * half, a.qs, 16);
            std::memcpy(g->hi[pair] + 16 * half, a.qs + 16, 16);
            g->offset[lane] = 8 * a.sum;
            g->d[lane] = g->d[lane + 1] = a.d;
        }
    }
}

}  // namespace

bool avx2_usable(int isa);

ActKind act_kind_of(int32_t weight_dtype, int isa) {
    switch (weight_dtype) {
    case TF_DTYPE_Q4_0: return avx2_usable(isa) ? ActKind::q8_32_quads : ActKind::q8_32;
    case TF_DTYPE_Q4_K:
    case TF_DTYPE_Q5_K:
    case TF_DTYPE_Q6_K:
    case TF_DTYPE_Q8_K: return ActKind::q8_k;
    default: return ActKind::q8_32;
    }
}

size_t act_bytes(ActKind kind, int64_t n) {
    if (kind == ActKind::q8_k) return static_cast<size_t>(n / k_qk_k) * sizeof(BlockQ8_K);
    if (kind == ActKind::q8_32_quads) return static_cast<size_t>((n / k_qk + 3) / 4) * sizeof(ActQuadQ8);
    return static_cast<size_t>(n / k_qk) * sizeof(ActQ8);
}

void quantize_act(ActKind kind, const float *x, void *dst, int64_t n) {
    if (kind == ActKind::q8_k) return encode_q8_k(x, dst, n);
    if (kind == ActKind::q8_32_quads) return encode_act_quads(x, dst, n);
    encode_act_q8(x, dst, n);
}

DotFn portable_dot(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_Q8_0: return dot_q8_0;
    case TF_DTYPE_Q4_0: return dot_q4_0;
    case TF_DTYPE_Q4_1: return dot_q4_1;
    case TF_DTYPE_Q5_0: return dot_q5_0;
    case TF_DTYPE_Q5_1: return dot_q5_1;
    case TF_DTYPE_Q4_K: return dot_k45<false, BlockQ4_K>;
    case TF_DTYPE_Q5_K: return dot_k45<true, BlockQ5_K>;
    case TF_DTYPE_Q6_K: return dot_q6_k;
    case TF_DTYPE_Q8_K: return dot_q8_k;
    default: return nullptr;
    }
}

// The AVX2 kernels read f16 scales with F16C, which cpuid reports apart from AVX2.
bool avx2_usable(int isa) {
#if defined(__x86_64__)
    static const bool f16c = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
    }();
    return isa >= 1 && f16c;
#else
    (void)isa;
    return false;
#endif
}

DotFn dot_of(int32_t dtype, int isa) {
    if (avx2_usable(isa))
        if (DotFn f = avx2_dot(dtype)) return f;
    return portable_dot(dtype);
}

DecodeRow decode_of(int32_t dtype, int isa) {
    if (avx2_usable(isa))
        if (DecodeRow f = avx2_decode(dtype)) return f;
    const Codec *codec = codec_of(dtype);
    return codec ? codec->decode : nullptr;
}

}  // namespace tf_cpu::quant
