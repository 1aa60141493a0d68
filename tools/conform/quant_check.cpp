#include "quant_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "runner.hpp"

namespace conform {

namespace {

// ---- reading a block, from docs/quantization.md's table ----------------------------------

double f16_at(const uint8_t *p) {
    const unsigned h = p[0] | p[1] << 8;
    const int e = static_cast<int>(h >> 10 & 31), m = static_cast<int>(h & 1023);
    const double mag = e == 0 ? std::ldexp(m, -24) : e == 31 ? INFINITY : std::ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -mag : mag;
}
float f32_at(const uint8_t *p) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
}
// Element j of 32 packed in 16 bytes: low nibbles first, then high.
int nibble32(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }
int bit5(const uint8_t *qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }

// One element as the block stores it: value = step * level + offset, level in [lo, hi].
struct Element {
    int level = 0;
    double step = 0, offset = 0;
};
struct Grid {
    int lo, hi;
};

Grid grid_of(int32_t dt) {
    switch (dt) {
    case TF_DTYPE_Q8_0:
    case TF_DTYPE_Q8_K: return {-128, 127};
    case TF_DTYPE_Q4_0: return {-8, 7};
    case TF_DTYPE_Q5_0: return {-16, 15};
    case TF_DTYPE_Q4_1:
    case TF_DTYPE_Q4_K: return {0, 15};
    case TF_DTYPE_Q5_1:
    case TF_DTYPE_Q5_K: return {0, 31};
    case TF_DTYPE_Q6_K: return {-32, 31};
    default: return {0, 0};
    }
}

// q4_k / q5_k: sub-block s's 6-bit scale and min.
void scale_min(const uint8_t *sc, int s, int *scale, int *min) {
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
        *min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
    }
}

Element element(int32_t dt, const uint8_t *b, int e) {
    Element r;
    switch (dt) {
    case TF_DTYPE_Q8_0:
        r.step = f16_at(b);
        r.level = static_cast<int8_t>(b[2 + e]);
        break;
    case TF_DTYPE_Q4_0:
        r.step = f16_at(b);
        r.level = nibble32(b + 2, e) - 8;
        break;
    case TF_DTYPE_Q4_1:
        r.step = f16_at(b), r.offset = f16_at(b + 2);
        r.level = nibble32(b + 4, e);
        break;
    case TF_DTYPE_Q5_0:
        r.step = f16_at(b);
        r.level = (nibble32(b + 6, e) | bit5(b + 2, e) << 4) - 16;
        break;
    case TF_DTYPE_Q5_1:
        r.step = f16_at(b), r.offset = f16_at(b + 2);
        r.level = nibble32(b + 8, e) | bit5(b + 4, e) << 4;
        break;
    case TF_DTYPE_Q4_K:
    case TF_DTYPE_Q5_K: {
        int sc, m;
        scale_min(b + 4, e / 32, &sc, &m);
        r.step = f16_at(b) * sc, r.offset = -f16_at(b + 2) * m;
        const int c = e / 64, l = e % 32, high = e % 64 >= 32;
        const uint8_t *qs = b + (dt == TF_DTYPE_Q4_K ? 16 : 48);
        r.level = high ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
        if (dt == TF_DTYPE_Q5_K) r.level |= (b[16 + l] >> (2 * c + high) & 1) << 4;
        break;
    }
    case TF_DTYPE_Q6_K: {
        const int h = e / 128, l = e % 32, g = e % 128 / 32;
        const uint8_t ql = b[64 * h + 32 * (g & 1) + l], qh = b[128 + 32 * h + l];
        r.level = ((g < 2 ? ql & 15 : ql >> 4) | (qh >> (2 * g) & 3) << 4) - 32;
        r.step = f16_at(b + 208) * static_cast<int8_t>(b[192 + e / 16]);
        break;
    }
    case TF_DTYPE_Q8_K:
        r.step = f32_at(b);
        r.level = static_cast<int8_t>(b[4 + e]);
        break;
    default: break;
    }
    return r;
}

// ---- the definition's quantities of a block of x -----------------------------------------

// The value of largest magnitude, sign kept (the first such), as the reference encoders read it.
float signed_max(const float *x, int n) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
    return max;
}

// Distance of v outside [a, b] (either order).
double outside(double v, double a, double b) {
    const double lo = std::min(a, b), hi = std::max(a, b);
    return v < lo ? lo - v : v > hi ? v - hi : 0;
}

struct BlockCheck {
    std::string failure;  // the first broken rule, empty when none
    double worst = 0;  // largest round-trip error / bound
};

std::string text(const char *fmt, double a, double b, double c = 0) {
    char buf[200];
    std::snprintf(buf, sizeof buf, fmt, a, b, c);
    return buf;
}

// One block: x (n = the block length values, as f32), b its bytes.
BlockCheck check_block(int32_t dt, const float *x, const uint8_t *b) {
    BlockCheck r;
    const int n = static_cast<int>(tf_kit::dtype_block_length(dt));
    const Grid grid = grid_of(dt);
    auto fail = [&](std::string why) {
        if (r.failure.empty()) r.failure = std::move(why);
    };
    // The 32-formats: the definition's unrounded d (and m) from x; the stored f16 fields must be
    // exactly those rounded.
    bool defined = true;  // d_def / m_def known (all but the k-quants' searched scales)
    float d_def = 0, m_def = 0;
    float lo = x[0], hi = x[0];
    for (int i = 0; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    switch (dt) {
    case TF_DTYPE_Q8_0: {
        float amax = 0;
        for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
        d_def = amax / 127;
        break;
    }
    case TF_DTYPE_Q4_0: d_def = signed_max(x, n) / -8; break;
    case TF_DTYPE_Q5_0: d_def = signed_max(x, n) / -16; break;
    case TF_DTYPE_Q4_1: d_def = (hi - lo) / 15, m_def = lo; break;
    case TF_DTYPE_Q5_1: d_def = (hi - lo) / 31, m_def = lo; break;
    case TF_DTYPE_Q8_K: {
        const float max = signed_max(x, n);
        d_def = max != 0 ? 1 / (-127.f / max) : 0.f;
        break;
    }
    default: defined = false; break;
    }
    if (defined) {
        const bool f32_d = dt == TF_DTYPE_Q8_K;
        const double d_stored = f32_d ? f32_at(b) : f16_at(b);
        const double d_want = f32_d ? d_def : round_to(d_def, TF_DTYPE_F16);
        if (d_stored != d_want) fail(text("d = %.9g, the definition gives %.9g", d_stored, d_want));
        if (dt == TF_DTYPE_Q4_1 || dt == TF_DTYPE_Q5_1) {
            const double m_stored = f16_at(b + 2), m_want = round_to(m_def, TF_DTYPE_F16);
            if (m_stored != m_want) fail(text("m = %.9g, the definition gives f16(min) = %.9g", m_stored, m_want));
        }
    }
    if (dt == TF_DTYPE_Q8_K)
        for (int g = 0; g < 16; ++g) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += static_cast<int8_t>(b[4 + 16 * g + i]);
            int16_t stored;
            std::memcpy(&stored, b + 260 + 2 * g, 2);
            if (stored != sum) fail(text("bsums[%.0f] = %.0f, the quants sum to %.0f", g, stored, sum));
        }
    if (dt == TF_DTYPE_Q4_K || dt == TF_DTYPE_Q5_K) {
        // The 6-bit scales and mins are rounded against the largest one: it is stored as 63.
        int max_sc = 0, max_m = 0;
        for (int s = 0; s < 8; ++s) {
            int sc, m;
            scale_min(b + 4, s, &sc, &m);
            max_sc = std::max(max_sc, sc), max_m = std::max(max_m, m);
        }
        if (f16_at(b) != 0 && max_sc != 63)
            fail(text("d = %.9g but the largest sub-block scale is %.0f, not 63", f16_at(b), max_sc));
        if (f16_at(b + 2) != 0 && max_m != 63)
            fail(text("dmin = %.9g but the largest sub-block min is %.0f, not 63", f16_at(b + 2), max_m));
    }
    if (dt == TF_DTYPE_Q6_K && f16_at(b + 208) != 0) {
        bool found = false;
        for (int s = 0; s < 16; ++s) found |= static_cast<int8_t>(b[192 + s]) == -128;
        if (!found)
            fail(text("d = %.9g but no sub-block scale is -128 (the largest is stored so)", f16_at(b + 208), 0));
    }
    // The k-quants' looser bound: their scales come from a search, rounded to 6 (8) bits against
    // the super-block's largest; an element's error stays within one step of the super-block's
    // coarsest grid (its range, 0 included, over the levels) plus amax / 64 for the 6-bit
    // rounding of the scales and mins (each within 1/126 of the largest).
    const double amax = std::max(std::fabs(lo), std::fabs(hi));
    const double range = std::max<double>(hi, 0) - std::min<double>(lo, 0);
    const double k_bound = range / (grid.hi - grid.lo) + amax / 64;
    for (int e = 0; e < n; ++e) {
        const Element el = element(dt, b, e);
        const double xe = x[e];
        if (el.level < grid.lo || el.level > grid.hi) {
            fail(text("element %.0f: level %.0f outside the format's range", e, el.level));
            continue;
        }
        // Rounding: the level nearest x on the grid the encoder rounds on (float slack for its
        // f32 arithmetic: a reciprocal and a product, a few ulps of x / step levels).
        const double step = defined ? d_def : el.step, offset = defined ? m_def : el.offset;
        const double slack = 0x1p-18 * (std::fabs(xe) + std::fabs(offset) + std::fabs(step) * (grid.hi - grid.lo));
        const double range_out = outside(xe, step * grid.lo + offset, step * grid.hi + offset);
        if (step != 0 || defined) {
            const double err = std::fabs(xe - (step * el.level + offset));
            const double bound = std::fabs(step) / 2 + range_out + slack;
            if (err > bound)
                fail(text("element %.0f: level %.0f is not the nearest to x = %.9g", e, el.level, xe) +
                     text(" on the grid step %.9g offset %.9g", step, offset));
        }
        // Round trip through the stored fields.
        const double deq = el.step * el.level + el.offset;
        const double err = std::fabs(xe - deq);
        double bound = defined ? std::fabs(d_def) / 2 + range_out + std::abs(el.level) * std::fabs(el.step - d_def) +
                                     std::fabs(el.offset - m_def) + slack
                               : k_bound + slack;
        if (bound == 0) bound = 1e-300;  // a zero block must come back exactly
        r.worst = std::max(r.worst, err / bound);
        if (err > bound)
            fail(text("element %.0f: x = %.9g dequantizes to %.9g", e, xe, deq) +
                 text(", error %.3g over the format's bound %.3g", err, bound));
    }
    return r;
}

// Calls f(ordinal of the block in row-major order, its first element's storage index) for every
// block of t (its last axis contiguous in whole blocks).
template <typename F>
void for_each_block(const TensorSpec &t, F f) {
    const int64_t blk = tf_kit::dtype_block_length(t.dtype), n = t.numel();
    if (n == 0) return;
    std::vector<int64_t> coord(t.shape.size(), 0);
    for (int64_t i = 0; i < n; i += blk) {
        int64_t at = t.offset;
        for (std::size_t k = 0; k < coord.size(); ++k) at += coord[k] * t.strides[k];
        f(i / blk, at);
        coord.back() += blk;
        for (std::size_t k = coord.size(); k-- > 0;) {
            if (coord[k] < t.shape[k]) break;
            coord[k] = 0;
            if (k > 0) ++coord[k - 1];
        }
    }
}

std::size_t block_at(const TensorSpec &t, int64_t at) {
    return quant_pad(t) +
           static_cast<std::size_t>(at / tf_kit::dtype_block_length(t.dtype)) * tf_kit::dtype_block_bytes(t.dtype);
}

}  // namespace

Verdict check_quantized(const TensorSpec &out, const std::vector<uint8_t> &image, const std::vector<double> &x) {
    Verdict v;
    v.tolerance = 1;
    const int64_t blk = tf_kit::dtype_block_length(out.dtype);
    std::vector<float> xb(static_cast<std::size_t>(blk));
    for_each_block(out, [&](int64_t ordinal, int64_t at) {
        for (int64_t i = 0; i < blk; ++i) xb[i] = static_cast<float>(x[static_cast<std::size_t>(ordinal * blk + i)]);
        const BlockCheck c = check_block(out.dtype, xb.data(), &image[block_at(out, at)]);
        v.nmse = std::max(v.nmse, c.worst);
        if (!c.failure.empty() && v.pass) {
            v.pass = false;
            v.detail = "block " + std::to_string(ordinal) + ": " + c.failure;
        }
    });
    return v;
}

Verdict compare_blocks(const TensorSpec &out, const std::vector<uint8_t> &got, const std::vector<uint8_t> &want) {
    Verdict v;
    const std::size_t bytes = tf_kit::dtype_block_bytes(out.dtype);
    for_each_block(out, [&](int64_t ordinal, int64_t at) {
        const std::size_t o = block_at(out, at);
        if (v.pass && std::memcmp(&got[o], &want[o], bytes) != 0) {
            std::size_t i = 0;
            while (got[o + i] == want[o + i]) ++i;
            v.pass = false;
            v.detail = "block " + std::to_string(ordinal) + " differs from the cpu plugin's at byte " +
                       std::to_string(i) + " (quantize is bit for bit ggml's reference encoder)";
        }
    });
    return v;
}

}  // namespace conform
