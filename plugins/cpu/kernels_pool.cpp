// max_pool2d, avg_pool2d and their backward ops on [N, C, H, W], one plane at a time.
//
//  - max: padding counts as -inf and never wins, so a window's maximum is one of its input
//    elements (padding <= kernel / 2 puts one in every window of a non-empty input; a window
//    with none gives -inf). NaN is the maximum (it propagates, as in torch); ties and several
//    NaNs go to the first in window order (row by row), and max_pool2d_backward sends the
//    window's gradient to that element only.
//  - avg: divides by kernel_h * kernel_w with count_include_pad, else by the window's input
//    elements (0 / 0 = NaN for a window with none). Sums run in double, in window order.
//  - backward ops zero dx, then add each window's share window by window in row-major order.
#include "kernels_nn.hpp"
#include "runtime.hpp"

#include <algorithm>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tf_cpu {
namespace {

struct PoolGeometry {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
    bool count_include_pad;
};

// The geometry of a pool op: x is the forward's input (the backward ops' output dx has its
// shape), y the forward's output (the backward ops' first input dy).
PoolGeometry geometry(const tf_op_desc &op) {
    const bool forward = op.op == TF_OP_MAX_POOL2D || op.op == TF_OP_AVG_POOL2D;
    const tf_tensor_desc &x = forward ? op.inputs[0] : op.outputs[0], &y = forward ? op.outputs[0] : op.inputs[0];
    const auto &p = *static_cast<const tf_params_pool2d *>(op.params);
    return {x.shape[0] * x.shape[1],
            x.shape[2],
            x.shape[3],
            y.shape[2],
            y.shape[3],
            p.kernel[0],
            p.kernel[1],
            p.stride[0],
            p.stride[1],
            p.padding[0],
            p.padding[1],
            p.count_include_pad != 0};
}

// The part of a window that lies inside the input: rows [y0, y1), columns [x0, x1).
struct Window {
    int64_t y0, y1, x0, x1;
};

inline Window window_at(const PoolGeometry &g, int64_t oy, int64_t ox) {
    const int64_t top = oy * g.sh - g.ph, left = ox * g.sw - g.pw;
    const int64_t y0 = std::max<int64_t>(top, 0), x0 = std::max<int64_t>(left, 0);
    return {y0, std::max(y0, std::min(top + g.kh, g.h)), x0, std::max(x0, std::min(left + g.kw, g.w))};
}

// The first maximum of every window of output row oy: best_at[ox] is its index in the plane
// (-1 for a window without input elements) and best[ox] its value (-inf then). Taps are visited
// in window order (row by row) for all windows of the row at once, so the windows' compare
// chains are independent; the selects are branch-free, since with real data "v > best" is a
// coin flip no predictor learns.
void row_argmax(const PoolGeometry &g, const float *plane, int64_t oy, float *best, int64_t *best_at) {
    std::fill(best, best + g.ow, -INFINITY);
    std::fill(best_at, best_at + g.ow, int64_t{-1});
    for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t iy = oy * g.sh - g.ph + i;
        if (iy < 0 || iy >= g.h) continue;
        const float *row = plane + iy * g.w;
        const int64_t row_at = iy * g.w, sw = g.sw;  // locals: the stores below may alias g
        for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t offset = j - g.pw;
            int64_t lo = 0, hi = 0;
            tap_span(offset, sw, g.w, g.ow, &lo, &hi);
            for (int64_t ox = lo; ox < hi; ++ox) {
                const int64_t ix = ox * sw + offset;
                const float v = row[ix], b = best[ox];
                // All ones when v wins: the window's first element, a larger value, or a NaN
                // over a number.
                const int64_t take = -static_cast<int64_t>((best_at[ox] < 0) | (v > b) | ((v != v) & (b == b)));
                const auto bits = static_cast<uint32_t>(take);
                best[ox] =
                    std::bit_cast<float>((std::bit_cast<uint32_t>(v) & bits) | (std::bit_cast<uint32_t>(b) & ~bits));
                best_at[ox] = ((row_at + ix) & take) | (best_at[ox] & ~take);
            }
        }
    }
}

// The common 2x2 window with stride 2 and no padding (every window whole, none overlapping) has
// its own kernels below: the four taps in window order with row_argmax's rule, without the
// general bookkeeping, reading and writing the planes in order.
bool is_2x2(const PoolGeometry &g) {
    return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && 2 * g.oh <= g.h &&
           2 * g.ow <= g.w;
}

inline bool take_if(float v, float &b) {
    const bool take = (v > b) | ((v != v) & (b == b));
    b = take ? v : b;
    return take;
}

#if defined(__x86_64__)
// The 2x2 rule on four windows at once: b (the best so far) takes v where v wins, and the
// returned mask says where it did. take_if's rule, lane by lane.
inline __m128 take_4(__m128 v, __m128 &b) {
    // !(v <= b) is v > b or v NaN; a NaN b keeps its place.
    const __m128 take = _mm_and_ps(_mm_cmpnle_ps(v, b), _mm_cmpord_ps(b, b));
    b = _mm_or_ps(_mm_and_ps(take, v), _mm_andnot_ps(take, b));
    return take;
}

// The even and odd elements of p[0, 8): the first and second columns of four 2x2 windows.
inline void split_pairs(const float *p, __m128 &even, __m128 &odd) {
    const __m128 lo = _mm_loadu_ps(p), hi = _mm_loadu_ps(p + 4);
    even = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    odd = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
}

// Four windows whose rows start at a and c (eight floats each): their maxima, and in dx_a and
// dx_c (eight floats each) the gradient dy of each window at its first maximum, 0 elsewhere.
// dx gets 0 + dy, not dy: the general path zeroes dx and adds, which turns -0 into +0.
inline __m128 windows_4(const float *a, const float *c) {
    __m128 a0, a1, c0, c1;
    split_pairs(a, a0, a1);
    split_pairs(c, c0, c1);
    __m128 b = a0;
    take_4(a1, b);
    take_4(c0, b);
    take_4(c1, b);
    return b;
}

inline void windows_backward_4(const float *a, const float *c, const float *dy, float *dx_a, float *dx_c) {
    __m128 a0, a1, c0, c1;
    split_pairs(a, a0, a1);
    split_pairs(c, c0, c1);
    __m128 b = a0;
    const __m128 t1 = take_4(a1, b), t2 = take_4(c0, b), t3 = take_4(c1, b);
    // The last tap taken is the window's first maximum.
    const __m128 w2 = _mm_andnot_ps(t3, t2), w1 = _mm_andnot_ps(_mm_or_ps(t2, t3), t1);
    const __m128 g = _mm_add_ps(_mm_setzero_ps(), _mm_loadu_ps(dy));
    const __m128 g0 = _mm_andnot_ps(_mm_or_ps(t1, _mm_or_ps(t2, t3)), g), g1 = _mm_and_ps(w1, g),
                 g2 = _mm_and_ps(w2, g), g3 = _mm_and_ps(t3, g);
    _mm_storeu_ps(dx_a, _mm_unpacklo_ps(g0, g1));
    _mm_storeu_ps(dx_a + 4, _mm_unpackhi_ps(g0, g1));
    _mm_storeu_ps(dx_c, _mm_unpacklo_ps(g2, g3));
    _mm_storeu_ps(dx_c + 4, _mm_unpackhi_ps(g2, g3));
}

// The backward with AVX2, two output rows at once: 128-bit lane 0 holds four windows of output row oy, lane 1
// the same four of row oy + 1, and every operation above runs lane by lane (the shuffles and
// unpacks of AVX2 stay within 128-bit lanes), so the bits are those of the SSE2 functions.
#define TF_AVX2 [[gnu::target("avx2")]]

TF_AVX2 inline __m256 take_8(__m256 v, __m256 &b) {
    const __m256 take = _mm256_and_ps(_mm256_cmp_ps(v, b, _CMP_NLE_UQ), _mm256_cmp_ps(b, b, _CMP_ORD_Q));
    b = _mm256_blendv_ps(b, v, take);
    return take;
}

// split_pairs of p[0, 8) in lane 0 and of q[0, 8) in lane 1.
TF_AVX2 inline void split_pairs_8(const float *p, const float *q, __m256 &even, __m256 &odd) {
    const __m256 lo = _mm256_loadu2_m128(q, p), hi = _mm256_loadu2_m128(q + 4, p + 4);
    even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    odd = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
}

TF_AVX2 inline void store_8(float *lane0, float *lane1, __m256 v) {
    _mm_storeu_ps(lane0, _mm256_castps256_ps128(v));
    _mm_storeu_ps(lane1, _mm256_extractf128_ps(v, 1));
}

// windows_backward_4 of (a, c, dy, dx_a, dx_c) in lane 0 and of the next output row's in lane 1.
TF_AVX2 inline void windows_backward_8(const float *a, const float *c, const float *dy, float *dx_a, float *dx_c,
                                       const float *a2, const float *c2, const float *dy2, float *dx_a2, float *dx_c2) {
    __m256 a0, a1, c0, c1;
    split_pairs_8(a, a2, a0, a1);
    split_pairs_8(c, c2, c0, c1);
    __m256 b = a0;
    const __m256 t1 = take_8(a1, b), t2 = take_8(c0, b), t3 = take_8(c1, b);
    const __m256 w2 = _mm256_andnot_ps(t3, t2), w1 = _mm256_andnot_ps(_mm256_or_ps(t2, t3), t1);
    const __m256 g = _mm256_add_ps(_mm256_setzero_ps(), _mm256_loadu2_m128(dy2, dy));
    const __m256 g0 = _mm256_andnot_ps(_mm256_or_ps(t1, _mm256_or_ps(t2, t3)), g), g1 = _mm256_and_ps(w1, g),
                 g2 = _mm256_and_ps(w2, g), g3 = _mm256_and_ps(t3, g);
    store_8(dx_a, dx_a2, _mm256_unpacklo_ps(g0, g1));
    store_8(dx_a + 4, dx_a2 + 4, _mm256_unpackhi_ps(g0, g1));
    store_8(dx_c, dx_c2, _mm256_unpacklo_ps(g2, g3));
    store_8(dx_c + 4, dx_c2 + 4, _mm256_unpackhi_ps(g2, g3));
}
#endif

// Output row oy of a 2x2 stride-2 pool from the rows 2 oy and 2 oy + 1 of the plane, read in
// order: four windows per step with SSE2 on x86-64. A last group that does not fit ends at the
// row's end and overlaps the one before (a window computed twice gives the same bits): a scalar
// or padded-copy tail costs more than the vector work on the 7- and 14-wide rows of the example.
void row_max_2x2(const PoolGeometry &g, const float *plane, int64_t oy, float *best) {
    const float *a = plane + 2 * oy * g.w, *c = a + g.w;
#if defined(__x86_64__)
    if (g.ow >= 4) {
        for (int64_t ox = 0; ox < g.ow; ox += 4) {
            const int64_t at = std::min(ox, g.ow - 4);
            _mm_storeu_ps(best + at, windows_4(a + 2 * at, c + 2 * at));
        }
        return;
    }
#endif
    for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t x = 2 * ox;
        float b = a[x];
        take_if(a[x + 1], b);
        take_if(c[x], b);
        take_if(c[x + 1], b);
        best[ox] = b;
    }
}

// dx for the rows 2 oy and 2 oy + 1 of a 2x2 stride-2 pool, written rather than accumulated:
// the windows do not overlap, so each element gets its window's gradient or 0. Columns past
// 2 OW, which no window reads, get 0. Groups of four as in row_max_2x2, the last one overlapping.
void rows_backward_2x2(const PoolGeometry &g, const float *plane, const float *grad, int64_t oy, float *dx) {
    const int64_t r0 = 2 * oy * g.w;
    const float *a = plane + r0, *c = a + g.w;
    float *da = dx + r0, *dc = da + g.w;
    bool done = false;
#if defined(__x86_64__)
    if (g.ow >= 4) {
        for (int64_t ox = 0; ox < g.ow; ox += 4) {
            const int64_t at = std::min(ox, g.ow - 4);
            windows_backward_4(a + 2 * at, c + 2 * at, grad + at, da + 2 * at, dc + 2 * at);
        }
        done = true;
    }
#endif
    for (int64_t ox = 0; !done && ox < g.ow; ++ox) {
        const int64_t x = 2 * ox;
        float b = a[x];
        int at = 0;
        if (take_if(a[x + 1], b)) at = 1;
        if (take_if(c[x], b)) at = 2;
        if (take_if(c[x + 1], b)) at = 3;
        const float dy = 0.0f + grad[ox];
        da[x] = at == 0 ? dy : 0.0f;
        da[x + 1] = at == 1 ? dy : 0.0f;
        dc[x] = at == 2 ? dy : 0.0f;
        dc[x + 1] = at == 3 ? dy : 0.0f;
    }
    std::fill(da + 2 * g.ow, da + g.w, 0.0f);
    std::fill(dc + 2 * g.ow, dc + g.w, 0.0f);
}

#if defined(__x86_64__)
// The 2x2 stride-2 forward with max instructions where no input is NaN: take_if's rule in window
// order is then the tree max(max(c1, c0), max(a1, a0)) with maxps(x, y) = x > y ? x : y, so each
// window's first maximum wins, -0 and +0 included (the top pair before the bottom one, each
// pair's left element before its right one). `nan` collects the unordered compares of all inputs.
//
// Four windows from rows a and c (eight floats each).
TF_AVX2 inline __m128 windows_max_4(const float *a, const float *c, __m128 &nan) {
    const __m128 a0 = _mm_loadu_ps(a), a1 = _mm_loadu_ps(a + 4), c0 = _mm_loadu_ps(c), c1 = _mm_loadu_ps(c + 4);
    nan = _mm_or_ps(nan, _mm_or_ps(_mm_cmpunord_ps(a0, a1), _mm_cmpunord_ps(c0, c1)));
    const __m128 top =
        _mm_max_ps(_mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)), _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0)));
    const __m128 bottom =
        _mm_max_ps(_mm_shuffle_ps(c0, c1, _MM_SHUFFLE(3, 1, 3, 1)), _mm_shuffle_ps(c0, c1, _MM_SHUFFLE(2, 0, 2, 0)));
    return _mm_max_ps(bottom, top);
}

// Eight windows: a0/a1 and c0/c1 the two halves of each row's sixteen floats, or (paired rows)
// lane 0 one output row's eight floats and lane 1 the next's. The shuffles stay within lanes:
// sixteen floats give windows 0, 1, 4, 5 in lane 0 and 2, 3, 6, 7 in lane 1.
TF_AVX2 inline __m256 windows_max_8(__m256 a0, __m256 a1, __m256 c0, __m256 c1, __m256 &nan) {
    nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(a0, a1, _CMP_UNORD_Q), _mm256_cmp_ps(c0, c1, _CMP_UNORD_Q)));
    const __m256 top = _mm256_max_ps(_mm256_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)),
                                     _mm256_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0)));
    const __m256 bottom = _mm256_max_ps(_mm256_shuffle_ps(c0, c1, _MM_SHUFFLE(3, 1, 3, 1)),
                                        _mm256_shuffle_ps(c0, c1, _MM_SHUFFLE(2, 0, 2, 0)));
    return _mm256_max_ps(bottom, top);
}

// Every output row of one plane (g.ow >= 4): eight windows a step along rows of eight or more
// (a last group overlapping the one before), else four of two output rows at once, the last odd
// row four at a time. Returns whether a NaN was among the inputs: the caller then recomputes the
// plane by the rule.
TF_AVX2 bool plane_max_2x2_no_nan(const PoolGeometry &g, const float *plane, float *out) {
    __m256 nan8 = _mm256_setzero_ps();
    __m128 nan4 = _mm_setzero_ps();
    int64_t oy = 0;
    if (g.ow >= 8) {
        for (; oy < g.oh; ++oy) {
            const float *a = plane + 2 * oy * g.w, *c = a + g.w;
            for (int64_t ox = 0; ox < g.ow; ox += 8) {
                const int64_t at = std::min(ox, g.ow - 8), x = 2 * at;
                const __m256 m = windows_max_8(_mm256_loadu_ps(a + x), _mm256_loadu_ps(a + x + 8),
                                               _mm256_loadu_ps(c + x), _mm256_loadu_ps(c + x + 8), nan8);
                _mm256_storeu_ps(out + oy * g.ow + at,
                                 _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(m), 0xD8)));
            }
        }
    }
    for (; oy + 1 < g.oh; oy += 2) {
        const float *a = plane + 2 * oy * g.w, *c = a + g.w, *a2 = c + g.w, *c2 = a2 + g.w;
        for (int64_t ox = 0; ox < g.ow; ox += 4) {
            const int64_t at = std::min(ox, g.ow - 4), x = 2 * at;
            const __m256 m =
                windows_max_8(_mm256_loadu2_m128(a2 + x, a + x), _mm256_loadu2_m128(a2 + x + 4, a + x + 4),
                              _mm256_loadu2_m128(c2 + x, c + x), _mm256_loadu2_m128(c2 + x + 4, c + x + 4), nan8);
            _mm256_storeu2_m128(out + (oy + 1) * g.ow + at, out + oy * g.ow + at, m);
        }
    }
    for (; oy < g.oh; ++oy) {
        const float *a = plane + 2 * oy * g.w, *c = a + g.w;
        for (int64_t ox = 0; ox < g.ow; ox += 4) {
            const int64_t at = std::min(ox, g.ow - 4);
            _mm_storeu_ps(out + oy * g.ow + at, windows_max_4(a + 2 * at, c + 2 * at, nan4));
        }
    }
    return !_mm256_testz_ps(nan8, nan8) || _mm_movemask_ps(nan4) != 0;
}

TF_AVX2 void rows_pair_backward_avx2(const PoolGeometry &g, const float *plane, const float *grad, int64_t oy,
                                     float *dx) {
    const int64_t r0 = 2 * oy * g.w;
    const float *a = plane + r0, *c = a + g.w, *a2 = c + g.w, *c2 = a2 + g.w;
    float *da = dx + r0, *dc = da + g.w, *da2 = dc + g.w, *dc2 = da2 + g.w;
    for (int64_t ox = 0; ox < g.ow; ox += 4) {
        const int64_t at = std::min(ox, g.ow - 4), x = 2 * at;
        windows_backward_8(a + x, c + x, grad + at, da + x, dc + x, a2 + x, c2 + x, grad + g.ow + at, da2 + x, dc2 + x);
    }
    for (float *row : {da, dc, da2, dc2}) std::fill(row + 2 * g.ow, row + g.w, 0.0f);
}
#endif

// The maxima of output row oy's windows without their positions (the forward): take_if's rule
// tap by tap in window order from -inf, which gives row_argmax's values (a window's first
// element always beats -inf unless it is -inf itself), four windows at a time where the taps'
// columns are 1 or 2 apart (resnet's 3x3 stride-2 pool).
void row_max(const PoolGeometry &g, const float *plane, int64_t oy, float *best) {
    std::fill(best, best + g.ow, -INFINITY);
    for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t iy = oy * g.sh - g.ph + i;
        if (iy < 0 || iy >= g.h) continue;
        const float *row = plane + iy * g.w;
        const int64_t sw = g.sw, w = g.w;  // locals: the stores below may alias g
        for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t offset = j - g.pw;
            int64_t lo = 0, hi = 0;
            tap_span(offset, sw, w, g.ow, &lo, &hi);
            int64_t ox = lo;
#if defined(__x86_64__)
            if (sw == 1) {
                for (; ox + 4 <= hi; ox += 4) {
                    __m128 b = _mm_loadu_ps(best + ox);
                    take_4(_mm_loadu_ps(row + ox + offset), b);
                    _mm_storeu_ps(best + ox, b);
                }
            } else if (sw == 2) {
                // split_pairs reads eight floats: one past the fourth window's tap.
                for (; ox + 4 <= hi && (ox + 3) * 2 + offset + 1 < w; ox += 4) {
                    __m128 even, odd, b = _mm_loadu_ps(best + ox);
                    split_pairs(row + 2 * ox + offset, even, odd);
                    take_4(even, b);
                    _mm_storeu_ps(best + ox, b);
                }
            }
#endif
            for (; ox < hi; ++ox) take_if(row[ox * sw + offset], best[ox]);
        }
    }
}

// Whether the 2x2 kernels take their AVX2 paths (the backward two output rows at a time, the
// forward plane_max_2x2_no_nan): AVX2, and rows of four windows or more (shorter ones take
// row_max_2x2's scalar loop).
bool row_pairs(const PoolGeometry &g) {
#if defined(__x86_64__)
    return isa_level() >= 1 && g.ow >= 4;
#else
    (void)g;
    return false;
#endif
}

// A plane of the 2x2 stride-2 forward: by max instructions where it has no NaN (where
// row_pairs(g)), else row by row by the rule.
void plane_max_2x2(const PoolGeometry &g, const float *plane, float *out) {
#if defined(__x86_64__)
    if (!plane_max_2x2_no_nan(g, plane, out)) return;
#endif
    for (int64_t oy = 0; oy < g.oh; ++oy) row_max_2x2(g, plane, oy, out + oy * g.ow);
}

// rows_backward_2x2 of output rows oy and oy + 1 at once, where row_pairs(g).
void rows_pair_backward_2x2(const PoolGeometry &g, const float *plane, const float *grad, int64_t oy, float *dx) {
#if defined(__x86_64__)
    rows_pair_backward_avx2(g, plane, grad, oy, dx);
#else
    (void)g, (void)plane, (void)grad, (void)oy, (void)dx;
#endif
}

// Planes per task of the pool's threads: each plane's output is its own, so any split gives the
// same bits.
int64_t plane_tasks(const PoolGeometry &g) { return split_count(g.planes * g.h * g.w, 1 << 15); }

double divisor_of(const PoolGeometry &g, const Window &win) {
    if (g.count_include_pad) return static_cast<double>(g.kh * g.kw);
    return static_cast<double>((win.y1 - win.y0) * (win.x1 - win.x0));
}

// Runs planes(first, last) on the pool's threads for consecutive ranges of planes.
template <class Planes>
void parallel_planes(const PoolGeometry &g, Planes &&planes) {
    const int64_t tasks = plane_tasks(g), per = (g.planes + tasks - 1) / tasks;
    parallel_for((g.planes + per - 1) / per, [&](int64_t t) { planes(t * per, std::min(g.planes, (t + 1) * per)); });
}

// Runs pair(oy) for output rows oy and oy + 1 together where pairs allows, single(oy) for the rest.
template <class Pair, class Single>
void each_output_row(const PoolGeometry &g, bool pairs, Pair &&pair, Single &&single) {
    for (int64_t oy = 0; oy < g.oh; ++oy) {
        if (pairs && oy + 1 < g.oh)
            pair(oy++);
        else
            single(oy);
    }
}

// Runs window(in, out, win) for every window in plane order: in is the plane's offset in x (and
// dx), out the window's index in y (and dy), win its part inside the input.
template <class Fn>
void each_window(const PoolGeometry &g, Fn &&window) {
    for (int64_t pl = 0; pl < g.planes; ++pl)
        for (int64_t oy = 0; oy < g.oh; ++oy)
            for (int64_t ox = 0; ox < g.ow; ++ox)
                window(pl * g.h * g.w, (pl * g.oh + oy) * g.ow + ox, window_at(g, oy, ox));
}

// Runs tap(element) for the input elements of win in plane, in window order.
template <class T, class Fn>
void each_tap(const PoolGeometry &g, const Window &win, T *plane, Fn &&tap) {
    for (int64_t iy = win.y0; iy < win.y1; ++iy)
        for (int64_t ix = win.x0; ix < win.x1; ++ix) tap(plane[iy * g.w + ix]);
}

void max_pool(const PoolGeometry &g, const float *x, const float *, float *y) {
    const bool fast = is_2x2(g), vector = fast && row_pairs(g);
    parallel_planes(g, [&](int64_t first, int64_t last) {
        for (int64_t pl = first; pl < last; ++pl) {
            const float *plane = x + pl * g.h * g.w;
            float *out = y + pl * g.oh * g.ow;
            if (vector) {
                plane_max_2x2(g, plane, out);
                continue;
            }
            for (int64_t oy = 0; oy < g.oh; ++oy) {
                if (fast)
                    row_max_2x2(g, plane, oy, out + oy * g.ow);
                else
                    row_max(g, plane, oy, out + oy * g.ow);
            }
        }
    });
}

void max_pool_backward(const PoolGeometry &g, const float *dy, const float *x, float *dx) {
    const bool fast = is_2x2(g), pairs = fast && row_pairs(g);
    parallel_planes(g, [&](int64_t first, int64_t last) {
        if (fast) {
            for (int64_t pl = first; pl < last; ++pl) {
                float *out = dx + pl * g.h * g.w;
                const float *plane = x + pl * g.h * g.w, *grad = dy + pl * g.oh * g.ow;
                each_output_row(
                    g, pairs, [&](int64_t oy) { rows_pair_backward_2x2(g, plane, grad + oy * g.ow, oy, out); },
                    [&](int64_t oy) { rows_backward_2x2(g, plane, grad + oy * g.ow, oy, out); });
                std::fill(out + 2 * g.oh * g.w, out + g.h * g.w, 0.0f);  // a last row no window reads
            }
            return;
        }
        std::vector<float> best(static_cast<size_t>(g.ow));
        std::vector<int64_t> best_at(static_cast<size_t>(g.ow));
        std::fill(dx + first * g.h * g.w, dx + last * g.h * g.w, 0.0f);
        for (int64_t pl = first; pl < last; ++pl) {
            const float *plane = x + pl * g.h * g.w;
            const float *grad = dy + pl * g.oh * g.ow;
            float *out = dx + pl * g.h * g.w;
            for (int64_t oy = 0; oy < g.oh; ++oy) {
                row_argmax(g, plane, oy, best.data(), best_at.data());
                for (int64_t ox = 0; ox < g.ow; ++ox)
                    if (best_at[ox] >= 0) out[best_at[ox]] += grad[oy * g.ow + ox];
            }
        }
    });
}

void avg_pool(const PoolGeometry &g, const float *x, const float *, float *y) {
    each_window(g, [&](int64_t in, int64_t out, const Window &win) {
        double sum = 0;
        each_tap(g, win, x + in, [&](float v) { sum += v; });
        y[out] = static_cast<float>(sum / divisor_of(g, win));
    });
}

void avg_pool_backward(const PoolGeometry &g, const float *dy, const float *, float *dx) {
    std::fill(dx, dx + g.planes * g.h * g.w, 0.0f);
    each_window(g, [&](int64_t in, int64_t out, const Window &win) {
        const auto share = static_cast<float>(dy[out] / divisor_of(g, win));
        each_tap(g, win, dx + in, [&](float &v) { v += share; });
    });
}

}  // namespace

tf_status run_max_pool2d(const tf_op_desc &op, tf_error *) { return run_dense_f32(op, geometry, max_pool); }
tf_status run_max_pool2d_backward(const tf_op_desc &op, tf_error *) {
    return run_dense_f32(op, geometry, max_pool_backward);
}
tf_status run_avg_pool2d(const tf_op_desc &op, tf_error *) { return run_dense_f32(op, geometry, avg_pool); }
tf_status run_avg_pool2d_backward(const tf_op_desc &op, tf_error *) {
    return run_dense_f32(op, geometry, avg_pool_backward);
}

}  // namespace tf_cpu
