// The reference codecs of ggml's block formats: decoding exactly as the format defines each value
// (f32 arithmetic, each operation rounded), encoding as ggml's quantize_row_*_ref does (round to
// nearest for the 32-formats, the scale search of the k-quants), operation for operation, so the
// bits match ggml's reference on the same input.
#include "kernels.hpp"
#include "quant_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tf_cpu::quant {
namespace {

#define TF_DTYPE(id, sym, name, block_length, block_bytes, ggml_type) constexpr size_t bytes_##sym = block_bytes;
#include <tinyfin/dtypes.def>
#undef TF_DTYPE
static_assert(sizeof(BlockQ8_0) == bytes_Q8_0 && sizeof(BlockQ4_0) == bytes_Q4_0 && sizeof(BlockQ4_1) == bytes_Q4_1 &&
                  sizeof(BlockQ5_0) == bytes_Q5_0 && sizeof(BlockQ5_1) == bytes_Q5_1 &&
                  sizeof(BlockQ4_K) == bytes_Q4_K && sizeof(BlockQ5_K) == bytes_Q5_K &&
                  sizeof(BlockQ6_K) == bytes_Q6_K && sizeof(BlockQ8_K) == bytes_Q8_K,
              "a block struct differs from dtypes.def");

float h2f(uint16_t h) { return f16_to_f32(h); }
uint16_t f2h(float x) { return f32_to_f16(x); }

// ggml's nearest_int: round half to even through the float adder (|x| <= 2^22).
int nearest_int(float x) {
    const float v = x + 12582912.f;
    int32_t i;
    std::memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

// C's float -> int conversion (truncation), then to the narrow type, as ggml's casts do.
int8_t trunc_i8(float x) { return static_cast<int8_t>(static_cast<int32_t>(x)); }
uint8_t trunc_u8(float x) { return static_cast<uint8_t>(static_cast<int32_t>(x)); }

// The value of largest magnitude (the first such), and that magnitude.
void signed_max(const float *x, int n, float *amax, float *max) {
    *amax = 0;
    *max = 0;
    for (int j = 0; j < n; ++j)
        if (*amax < std::fabs(x[j])) {
            *amax = std::fabs(x[j]);
            *max = x[j];
        }
}

// ---- 32-formats ---------------------------------------------------------------------------------

void decode_q8_0(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ8_0 *>(src);
    for (int64_t i = 0; i < n / k_qk; ++i, y += k_qk) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < k_qk; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
    }
}

void encode_q8_0(const float *x, void *dst, int64_t n) {
    auto *b = static_cast<BlockQ8_0 *>(dst);
    for (int64_t i = 0; i < n / k_qk; ++i, x += k_qk) {
        float amax = 0;
        for (int j = 0; j < k_qk; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        for (int j = 0; j < k_qk; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    }
}

void decode_q4_0(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ4_0 *>(src);
    for (int64_t i = 0; i < n / k_qk; ++i, y += k_qk) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < k_qk / 2; ++j) {
            y[j] = static_cast<float>((b[i].qs[j] & 0xF) - 8) * d;
            y[j + k_qk / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void encode_q4_0(const float *x, void *dst, int64_t n) {
    auto *b = static_cast<BlockQ4_0 *>(dst);
    for (int64_t i = 0; i < n / k_qk; ++i, x += k_qk) {
        float amax, max;
        signed_max(x, k_qk, &amax, &max);
        const float d = max / -8;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        for (int j = 0; j < k_qk / 2; ++j) {
            const auto q0 = static_cast<uint8_t>(std::min<int>(15, trunc_i8(x[j] * id + 8.5f)));
            const auto q1 = static_cast<uint8_t>(std::min<int>(15, trunc_i8(x[j + k_qk / 2] * id + 8.5f)));
            b[i].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
        }
    }
}

void decode_q4_1(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ4_1 *>(src);
    for (int64_t i = 0; i < n / k_qk; ++i, y += k_qk) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        for (int j = 0; j < k_qk / 2; ++j) {
            const float p0 = static_cast<float>(b[i].qs[j] & 0xF) * d;
            const float p1 = static_cast<float>(b[i].qs[j] >> 4) * d;
            y[j] = p0 + m;
            y[j + k_qk / 2] = p1 + m;
        }
    }
}

// The min/max of a block, as q4_1 and q5_1 find them.
void min_max(const float *x, int n, float *min, float *max) {
    *min = 3.40282347e+38f;
    *max = -3.40282347e+38f;
    for (int j = 0; j < n; ++j) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

void encode_q4_1(const float *x, void *dst, int64_t n) {
    auto *b = static_cast<BlockQ4_1 *>(dst);
    for (int64_t i = 0; i < n / k_qk; ++i, x += k_qk) {
        float min, max;
        min_max(x, k_qk, &min, &max);
        const float d = (max - min) / 15;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        b[i].m = f2h(min);
        for (int j = 0; j < k_qk / 2; ++j) {
            const auto q0 = static_cast<uint8_t>(std::min<int>(15, trunc_i8((x[j] - min) * id + 0.5f)));
            const auto q1 = static_cast<uint8_t>(std::min<int>(15, trunc_i8((x[j + k_qk / 2] - min) * id + 0.5f)));
            b[i].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
        }
    }
}

// Bit 4 of elements j and j + 16 of a q5 block, from its qh word.
uint32_t high_bits(const uint8_t qh[4]) {
    uint32_t h;
    std::memcpy(&h, qh, sizeof h);
    return h;
}

void decode_q5_0(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ5_0 *>(src);
    for (int64_t i = 0; i < n / k_qk; ++i, y += k_qk) {
        const float d = h2f(b[i].d);
        const uint32_t qh = high_bits(b[i].qh);
        for (int j = 0; j < k_qk / 2; ++j) {
            const int q0 = (b[i].qs[j] & 0xF) | ((qh >> j) << 4 & 0x10);
            const int q1 = (b[i].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
            y[j] = static_cast<float>(q0 - 16) * d;
            y[j + k_qk / 2] = static_cast<float>(q1 - 16) * d;
        }
    }
}

void encode_q5_0(const float *x, void *dst, int64_t n) {
    auto *b = static_cast<BlockQ5_0 *>(dst);
    for (int64_t i = 0; i < n / k_qk; ++i, x += k_qk) {
        float amax, max;
        signed_max(x, k_qk, &amax, &max);
        const float d = max / -16;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        uint32_t qh = 0;
        for (int j = 0; j < k_qk / 2; ++j) {
            const auto q0 = static_cast<uint8_t>(std::min<int>(31, trunc_i8(x[j] * id + 16.5f)));
            const auto q1 = static_cast<uint8_t>(std::min<int>(31, trunc_i8(x[j + k_qk / 2] * id + 16.5f)));
            b[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= uint32_t{(q0 & 0x10u) >> 4} << j;
            qh |= uint32_t{(q1 & 0x10u) >> 4} << (j + k_qk / 2);
        }
        std::memcpy(b[i].qh, &qh, sizeof qh);
    }
}

void decode_q5_1(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ5_1 *>(src);
    for (int64_t i = 0; i < n / k_qk; ++i, y += k_qk) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        const uint32_t qh = high_bits(b[i].qh);
        for (int j = 0; j < k_qk / 2; ++j) {
            const int q0 = (b[i].qs[j] & 0xF) | ((qh >> j) << 4 & 0x10);
            const int q1 = (b[i].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
            const float p0 = static_cast<float>(q0) * d, p1 = static_cast<float>(q1) * d;
            y[j] = p0 + m;
            y[j + k_qk / 2] = p1 + m;
        }
    }
}

void encode_q5_1(const float *x, void *dst, int64_t n) {
    auto *b = static_cast<BlockQ5_1 *>(dst);
    for (int64_t i = 0; i < n / k_qk; ++i, x += k_qk) {
        float min, max;
        min_max(x, k_qk, &min, &max);
        const float d = (max - min) / 31;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        b[i].m = f2h(min);
        uint32_t qh = 0;
        for (int j = 0; j < k_qk / 2; ++j) {
            const uint8_t q0 = trunc_u8((x[j] - min) * id + 0.5f);
            const uint8_t q1 = trunc_u8((x[j + k_qk / 2] - min) * id + 0.5f);
            b[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= uint32_t{(q0 & 0x10u) >> 4} << j;
            qh |= uint32_t{(q1 & 0x10u) >> 4} << (j + k_qk / 2);
        }
        std::memcpy(b[i].qh, &qh, sizeof qh);
    }
}

// ---- k-quants -------------------------------------------------------------------------------------

// ggml's make_qkx2_quants: levels 0..nmax with a scale and a minimum (<= 0) for n values, the
// pair chosen by a weighted least-squares search over nstep + 1 trial scales. Returns the scale;
// *the_min receives -min.
float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min, uint8_t *Laux,
                       float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        float diff = scale * L[i] + min - x[i];
        diff = diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = std::max(0, std::min(nmax, l));
            Laux[i] = static_cast<uint8_t>(l);
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// The shared part of q4_k's and q5_k's encoders: 8 sub-blocks of 32 with scale and minimum
// searched (make_qkx2_quants), both quantized to 6 bits against the super-block's d and dmin,
// then every level recomputed from the rounded scales. L receives the levels 0..nmax.
void encode_k_scales(const float *x, int nmax, float rmin, int nstep, uint16_t *d_out, uint16_t *dmin_out,
                     uint8_t scales_out[12], uint8_t L[k_qk_k]) {
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    std::memset(scales_out, 0, 12);
    for (int j = 0; j < 8; ++j) {
        // ggml stores nearest_int's result in a uint8_t before the MIN.
        uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
        uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
        ls = std::min<uint8_t>(63, ls);
        lm = std::min<uint8_t>(63, lm);
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
            scales_out[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
            scales_out[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
        }
    }
    *d_out = f2h(max_scale / 63.f);
    *dmin_out = f2h(max_min / 63.f);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        scale_min_k4(j, scales_out, &sc, &m);
        const float d = h2f(*d_out) * sc;
        if (d == 0) continue;
        const float dm = h2f(*dmin_out) * m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        }
    }
}

void decode_q4_k(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ4_K *>(src);
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        const uint8_t *q = b[i].qs;
        const float d = h2f(b[i].d), min = h2f(b[i].dmin);
        for (int j = 0, is = 0; j < k_qk_k; j += 64, is += 2, q += 32) {
            uint8_t sc, m;
            scale_min_k4(is, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
        }
    }
}

void encode_q4_k(const float *x, void *dst, int64_t n) {
    auto *b = static_cast<BlockQ4_K *>(dst);
    for (int64_t i = 0; i < n / k_qk_k; ++i, x += k_qk_k) {
        uint8_t L[k_qk_k];
        encode_k_scales(x, 15, -1.f, 20, &b[i].d, &b[i].dmin, b[i].scales, L);
        uint8_t *q = b[i].qs;
        for (int j = 0; j < k_qk_k; j += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
}

void decode_q5_k(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ5_K *>(src);
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        const uint8_t *ql = b[i].qs, *qh = b[i].qh;
        const float d = h2f(b[i].d), min = h2f(b[i].dmin);
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < k_qk_k; j += 64, is += 2, ql += 32) {
            uint8_t sc, m;
            scale_min_k4(is, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            u1 = static_cast<uint8_t>(u1 << 2);
            u2 = static_cast<uint8_t>(u2 << 2);
        }
    }
}

void encode_q5_k(const float *x, void *dst, int64_t n) {
    auto *b = static_cast<BlockQ5_K *>(dst);
    for (int64_t i = 0; i < n / k_qk_k; ++i, x += k_qk_k) {
        uint8_t L[k_qk_k];
        encode_k_scales(x, 31, -0.5f, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        uint8_t *qh = b[i].qh, *ql = b[i].qs;
        std::memset(qh, 0, k_qk_k / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n0 = 0; n0 < k_qk_k; n0 += 64, ql += 32) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n0 + j], l2 = L[n0 + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
            }
            m1 = static_cast<uint8_t>(m1 << 2);
            m2 = static_cast<uint8_t>(m2 << 2);
        }
    }
}

// ggml's make_qx_quants with rmse_type 1 and no importance weights: signed levels -nmax..nmax-1
// (stored + nmax in L), the scale refined by a least-squares search over 18 trial scales.
float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float amax, max;
    signed_max(x, n, &amax, &max);
    if (amax < 1e-15f) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<int8_t>(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void decode_q6_k(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ6_K *>(src);
    for (int64_t i = 0; i < n / k_qk_k; ++i) {
        const float d = h2f(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int n0 = 0; n0 < k_qk_k; n0 += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
                y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
                y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
        }
    }
}

void encode_q6_k(const float *x, void *dst, int64_t n) {
    auto *b = static_cast<BlockQ6_K *>(dst);
    for (int64_t i = 0; i < n / k_qk_k; ++i, x += k_qk_k) {
        int8_t L[k_qk_k];
        float scales[16];
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            if (std::fabs(scale) > max_abs_scale) {
                max_abs_scale = std::fabs(scale);
                max_scale = scale;
            }
        }
        if (max_abs_scale < 1e-15f) {
            std::memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -128.f / max_scale;
        b[i].d = f2h(1 / iscale);
        for (int ib = 0; ib < 16; ++ib)
            b[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
        for (int j = 0; j < 16; ++j) {
            const float d = h2f(b[i].d) * b[i].scales[j];
            if (d == 0) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = std::max(-32, std::min(31, l));
                L[16 * j + ii] = static_cast<int8_t>(l + 32);
            }
        }
        uint8_t *ql = b[i].ql, *qh = b[i].qh;
        for (int j = 0; j < k_qk_k; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const auto q1 = static_cast<uint8_t>(L[j + l] & 0xF), q2 = static_cast<uint8_t>(L[j + l + 32] & 0xF);
                const auto q3 = static_cast<uint8_t>(L[j + l + 64] & 0xF),
                           q4 = static_cast<uint8_t>(L[j + l + 96] & 0xF);
                ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
                ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
                qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                             ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void decode_q8_k(const void *src, float *y, int64_t n) {
    const auto *b = static_cast<const BlockQ8_K *>(src);
    for (int64_t i = 0; i < n / k_qk_k; ++i)
        for (int j = 0; j < k_qk_k; ++j) *y++ = b[i].d * static_cast<float>(b[i].qs[j]);
}

}  // namespace

// Also the activation form of the k-quants' dots (ggml's quantize_row_q8_K_ref). An all-zero block
// gets zero bsums (ggml leaves them unwritten).
void encode_q8_k(const float *x, void *dst, int64_t n) {
    auto *b = static_cast<BlockQ8_K *>(dst);
    for (int64_t i = 0; i < n / k_qk_k; ++i, x += k_qk_k) {
        float amax, max;
        signed_max(x, k_qk_k, &amax, &max);
        if (amax == 0) {
            std::memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < k_qk_k; ++j) b[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
        for (int j = 0; j < 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += b[i].qs[j * 16 + ii];
            b[i].bsums[j] = static_cast<int16_t>(sum);
        }
        b[i].d = 1 / iscale;
    }
}

const Codec *codec_of(int32_t dtype) {
    static constexpr Codec q8_0{32, sizeof(BlockQ8_0), decode_q8_0, encode_q8_0};
    static constexpr Codec q4_0{32, sizeof(BlockQ4_0), decode_q4_0, encode_q4_0};
    static constexpr Codec q4_1{32, sizeof(BlockQ4_1), decode_q4_1, encode_q4_1};
    static constexpr Codec q5_0{32, sizeof(BlockQ5_0), decode_q5_0, encode_q5_0};
    static constexpr Codec q5_1{32, sizeof(BlockQ5_1), decode_q5_1, encode_q5_1};
    static constexpr Codec q4_k{256, sizeof(BlockQ4_K), decode_q4_k, encode_q4_k};
    static constexpr Codec q5_k{256, sizeof(BlockQ5_K), decode_q5_k, encode_q5_k};
    static constexpr Codec q6_k{256, sizeof(BlockQ6_K), decode_q6_k, encode_q6_k};
    static constexpr Codec q8_k{256, sizeof(BlockQ8_K), decode_q8_k, encode_q8_k};
    switch (dtype) {
    case TF_DTYPE_Q8_0: return &q8_0;
    case TF_DTYPE_Q4_0: return &q4_0;
    case TF_DTYPE_Q4_1: return &q4_1;
    case TF_DTYPE_Q5_0: return &q5_0;
    case TF_DTYPE_Q5_1: return &q5_1;
    case TF_DTYPE_Q4_K: return &q4_k;
    case TF_DTYPE_Q5_K: return &q5_k;
    case TF_DTYPE_Q6_K: return &q6_k;
    case TF_DTYPE_Q8_K: return &q8_k;
    default: return nullptr;
    }
}

}  // namespace tf_cpu::quant
