// conv2d and its gradients, one image and one group at a time, as GEMMs over an im2col column
// matrix (kernels_gemm.hpp):
//   forward      y[n, g]  = w[g] col(x[n, g])                      [Og x P] = [Og x Kg] [Kg x P]
//   grad_input   dx[n, g] = col2im(w[g]^T dy[n, g])                [Kg x P] = [Kg x Og] [Og x P]
//   grad_weight  dw[g]   += dy[n, g] col(x[n, g])^T, n = 0, 1, ... [Og x Kg] = [Og x P] [P x Kg]
// with Og = O / groups output channels, Kg = C / groups * KH * KW taps and P = OH * OW output
// positions. Row (c, kh, kw) of the column matrix holds, for every output position, the input
// element that tap reads (0 in the padding). The column matrix covers a band of output rows at
// a time, as many as fit in 16 MiB: all of them for common shapes. A 1x1 kernel with stride 1
// and no padding skips the column matrix: the input already is one.
//
// With stride 1 and enough taps, the products read the rows of the column matrix in place from
// a padded copy of the image instead ("shifted" path, below): no column matrix, no col2im.
//
// Every sum has a fixed order: the GEMM adds taps in (c, kh, kw) order, col2im adds into dx in
// (c, kh, kw, oh, ow) order, the shifted grad_input adds (o, kh, kw) in order, and grad_weight
// adds images in order within chunks of images and the chunks in order. Which path runs and how
// the images are chunked depend on the shapes only (and, for the shifted gradients, on whether
// a value is infinite or NaN); images, bands and chunks are spread over the thread pool
// (runtime.hpp), and the thread count never changes a result.
#include "kernels_conv_one_channel.hpp"
#include "kernels_conv_tile.hpp"
#include "kernels_conv_winograd.hpp"
#include "kernels_gemm.hpp"
#include "kernels_nn.hpp"
#include "packed_weights.hpp"
#include "runtime.hpp"

#include <tinyfin/env.h>
#include <tinyfin/plugin_kit.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tf_cpu {
namespace {

// One convolution's sizes, from descriptors validate_own accepted.
struct ConvGeometry {
    int64_t n, c, h, w;  // input [N, C, H, W]
    int64_t o, kh, kw;  // weight [O, C / groups, KH, KW]
    int64_t oh, ow;  // output [N, O, OH, OW]
    int64_t sh, sw, ph, pw, dh, dw, groups;

    int64_t c_group() const { return c / groups; }
    int64_t o_group() const { return o / groups; }
    int64_t taps() const { return c_group() * kh * kw; }  // Kg: rows of the column matrix
    int64_t positions() const { return oh * ow; }  // P: its columns
    bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

// The geometry of a conv op: x is the forward's input (grad_input's output dx has its shape), w
// the weight (grad_weight's output dw), y the forward's output (the gradients' first input dy).
ConvGeometry geometry_with(const tf_op_desc &op, const tf_params_conv2d &p) {
    const bool forward = op.op == TF_OP_CONV2D || op.op == TF_OP_CONV2D_ACT;
    const bool grad_weight = op.op == TF_OP_CONV2D_GRAD_WEIGHT;
    const tf_tensor_desc &x = forward ? op.inputs[0] : grad_weight ? op.inputs[1] : op.outputs[0];
    const tf_tensor_desc &w = grad_weight ? op.outputs[0] : op.inputs[1], &y = forward ? op.outputs[0] : op.inputs[0];
    return {x.shape[0], x.shape[1],  x.shape[2],  x.shape[3],   w.shape[0],   w.shape[2],    w.shape[3],    y.shape[2],
            y.shape[3], p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups};
}
ConvGeometry geometry(const tf_op_desc &op) {
    return geometry_with(op, *static_cast<const tf_params_conv2d *>(op.params));
}

}  // namespace

// What conv2d_act does to each finished sum of output channel o: adds bias[o] (when there is a
// bias), then the residual's element (when there is one), then the activation (kernels_nn.hpp's
// ConvEpilogue). Applied as the products are stored or while the band they fill is still in
// the cache, never as a pass of its own.
// dst[i] = act(src[i] + b + residual at dst + i) for n elements of y; src may be dst.
void finish_row(float *dst, const float *src, int64_t n, float b, const ConvEpilogue &e) {
    const bool biased = e.bias != nullptr;
    const float *res = e.residual ? e.residual + (dst - e.y) : nullptr;
    int64_t i = 0;
#if defined(__x86_64__)
    if (e.activation != TF_CONV_ACT_CLIP) {
        const __m128 bias = _mm_set1_ps(b), zero = _mm_setzero_ps();
        const bool relu = e.activation == TF_CONV_ACT_RELU;
        for (; i + 4 <= n; i += 4) {
            __m128 v = _mm_loadu_ps(src + i);
            if (biased) v = _mm_add_ps(v, bias);
            if (res) v = _mm_add_ps(v, _mm_loadu_ps(res + i));
            // maxps returns its second operand for a NaN or two zeros: v < 0 ? 0 : v exactly.
            if (relu) v = _mm_max_ps(zero, v);
            _mm_storeu_ps(dst + i, v);
        }
    }
#endif
    for (; i < n; ++i) {
        float v = biased ? src[i] + b : src[i];
        if (res) v += res[i];
        if (e.activation == TF_CONV_ACT_RELU) v = v < 0 ? 0.0f : v;
        if (e.activation == TF_CONV_ACT_CLIP) v = e.clip(v);
        dst[i] = v;
    }
}

namespace {

// The epilogue over rows [0, rows) of a channels-by-positions block: row r is output channel
// channel0 + r, `cols` values at data + r * ld.
void finish_block(float *data, int64_t rows, int64_t cols, int64_t ld, int64_t channel0, const ConvEpilogue &e) {
    if (!e.active()) return;
    for (int64_t r = 0; r < rows; ++r)
        finish_row(data + r * ld, data + r * ld, cols, e.bias ? e.bias[channel0 + r] : 0.0f, e);
}

// The column matrix is built for bands of output rows small enough that it stays under
// k_column_floats (16 MiB): a large kernel over a padded input would otherwise need a column
// matrix many times the size of input and output (the op fuzzer asked for 13 GB). A constant,
// not TINYFIN_SCRATCH_BYTES, so that the band, and with it the order of the sums in the
// gradients, never depends on a setting.
constexpr int64_t k_column_floats = int64_t{1} << 22;

// Output rows per band: as many as fit, at least one.
int64_t band_rows(const ConvGeometry &g) {
    const int64_t row_floats = std::max<int64_t>(1, g.taps() * g.ow);
    return std::clamp<int64_t>(k_column_floats / row_floats, 1, std::max<int64_t>(g.oh, 1));
}

// Floats of one band's column matrix (0 for pointwise convolutions, which need none);
// std::bad_alloc (OUT_OF_MEMORY at the ABI) when it cannot exist.
size_t column_floats(const ConvGeometry &g) {
    if (g.pointwise()) return 0;
    size_t floats = 0;
    if (__builtin_mul_overflow(static_cast<size_t>(g.taps()), static_cast<size_t>(band_rows(g) * g.ow), &floats))
        throw std::bad_alloc();
    return floats;
}

// col [Kg x B] from one group's input planes x [C/groups, H, W], for the B = (oy1 - oy0) * OW
// output positions of output rows [oy0, oy1).
void im2col(const ConvGeometry &g, const float *x, float *col, int64_t oy0, int64_t oy1) {
    const int64_t positions = (oy1 - oy0) * g.ow;
    for (int64_t c = 0; c < g.c_group(); ++c) {
        const float *plane = x + c * g.h * g.w;
        for (int64_t i = 0; i < g.kh; ++i) {
            for (int64_t j = 0; j < g.kw; ++j) {
                float *row = col + ((c * g.kh + i) * g.kw + j) * positions;
                const int64_t x_off = j * g.dw - g.pw;
                int64_t lo = 0, hi = 0;
                tap_span(x_off, g.sw, g.w, g.ow, &lo, &hi);
                for (int64_t oy = oy0; oy < oy1; ++oy) {
                    float *dst = row + (oy - oy0) * g.ow;
                    const int64_t iy = oy * g.sh - g.ph + i * g.dh;
                    if (iy < 0 || iy >= g.h) {
                        std::fill(dst, dst + g.ow, 0.0f);
                        continue;
                    }
                    const float *src = plane + iy * g.w;
                    std::fill(dst, dst + lo, 0.0f);
                    // lo == hi when no tap lands inside the row, e.g. a zero-width input whose
                    // data pointer is null: no pointer arithmetic on it then.
                    if (lo < hi) {
                        if (g.sw == 1)
                            std::copy(src + lo + x_off, src + hi + x_off, dst + lo);
                        else
                            for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * g.sw + x_off];
                    }
                    std::fill(dst + hi, dst + g.ow, 0.0f);
                }
            }
        }
    }
}

// dx [C/groups, H, W] += each column-matrix element at the input element it was read from;
// col holds output rows [oy0, oy1) as im2col wrote them.
void col2im(const ConvGeometry &g, const float *col, float *dx, int64_t oy0, int64_t oy1) {
    const int64_t positions = (oy1 - oy0) * g.ow;
    for (int64_t c = 0; c < g.c_group(); ++c) {
        float *plane = dx + c * g.h * g.w;
        for (int64_t i = 0; i < g.kh; ++i) {
            for (int64_t j = 0; j < g.kw; ++j) {
                const float *row = col + ((c * g.kh + i) * g.kw + j) * positions;
                const int64_t x_off = j * g.dw - g.pw;
                int64_t lo = 0, hi = 0;
                tap_span(x_off, g.sw, g.w, g.ow, &lo, &hi);
                for (int64_t oy = oy0; oy < oy1; ++oy) {
                    const int64_t iy = oy * g.sh - g.ph + i * g.dh;
                    if (iy < 0 || iy >= g.h) continue;
                    const float *src = row + (oy - oy0) * g.ow;
                    float *dst = plane + iy * g.w;
                    for (int64_t ox = lo; ox < hi; ++ox) dst[ox * g.sw + x_off] += src[ox];
                }
            }
        }
    }
}

// dst[j * ld + i] = src[i * cols + j] for a rows x cols src: 4 x 4 blocks transposed in
// registers on x86-64, the edges (and other targets) element by element.
void transpose_into(const float *src, int64_t rows, int64_t cols, float *dst, int64_t ld) {
    int64_t i0 = 0;
#if defined(__x86_64__)
    for (; i0 + 4 <= rows; i0 += 4) {
        int64_t j0 = 0;
        for (; j0 + 4 <= cols; j0 += 4) {
            const float *s = src + i0 * cols + j0;
            __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + cols), r2 = _mm_loadu_ps(s + 2 * cols),
                   r3 = _mm_loadu_ps(s + 3 * cols);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            float *d = dst + j0 * ld + i0;
            _mm_storeu_ps(d, r0);
            _mm_storeu_ps(d + ld, r1);
            _mm_storeu_ps(d + 2 * ld, r2);
            _mm_storeu_ps(d + 3 * ld, r3);
        }
        for (int64_t j = j0; j < cols; ++j)
            for (int64_t i = i0; i < i0 + 4; ++i) dst[j * ld + i] = src[i * cols + j];
    }
#endif
    for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = i0; i < rows; ++i) dst[j * ld + i] = src[i * cols + j];
}

// ---- Convolutions read in place from a padded image ("shifted") -----------------------------
//
// With stride 1, tap (c, i, j) of output (oy, ox) reads the padded planes xp [C, Hp, Wp] at
// c Hp Wp + (oy + i dh) Wp + ox + j dw = offset(c, i, j) + q, with q = oy Wp + ox: each row of
// the column matrix is a contiguous run of xp, which gemm_f32_rows_b reads in place. The product
// covers a "wide" output of OH rows of Wp positions; the last Wp - OW of each row are discarded.
//   - forward: y = w xp, per image and group.
//   - grad_input: the same convolution of dy padded by (K - 1) d - p, with the kernel flipped and
//     its two channel axes swapped.
//   - grad_weight: dw^T = xp dy^T, xp read in place as A (a row per tap), dy^T packed over the
//     wide positions with zeros in the discarded ones.
// With stride s > 1 (the forward only) the padded image is split into s_h x s_w phase planes,
// phase (ry, rx) holding the padded elements (ry + s_h Y, rx + s_w X): tap (c, i, j) reads
// phase ((i dh) mod s_h, (j dw) mod s_w) from row (i dh) / s_h, column (j dw) / s_w on, again
// a contiguous run per output row. The taps stay in (c, i, j) order, so every output is the
// same sequence of operations as through the column matrix.
// No im2col, no column matrix to pack; the forward reads its weights in place, grad_input packs
// its flipped weights once per op.

// The input of a shifted convolution: planes [channels, h, w], padded by pad_h, pad_w, read
// with strides sh, sw.
//
// With sw = 1 a padded row is pad_w zeros, the w values, and zeros up to wp. The right padding
// of a row is the left padding of the next one (or zeros after the last), so wp = w + pad_w
// suffices unless the output is wider: a 3x3 kernel with padding 1 over 14 columns computes 15
// positions per output row for 14 outputs, not 16. A phase row (sw > 1) holds the output
// width plus the kernel's reach in it (the positions past the output width read the next row
// and are discarded).
//
// Exact rows (stride 1, output as wide as the input, 0 < pad_w < w: resnet's and the example's
// 3x3 convolutions with padding 1): rows of w positions, no discarded column, in one copy of
// the band per kernel column j. Tap (c, i, j) reads x column ox + s with s = j dw - pad_w;
// where that leaves the row (ox + s < 0 or >= w) it reads the previous or next row's columns
// [w + s, w) or [0, s) instead, which copy j holds as zeros (it never reads them otherwise,
// since |s| < w). The copies are kw times the band, and the wide output is the output: 14 x 14
// positions are 196 columns (12.25 tiles of 16), not 14 x 15 = 210 (13.1).
struct ShiftedInput {
    int64_t channels, h, w, pad_h, pad_w, sh = 1, sw = 1;
    bool exact = false;  // exact rows, where exact_rows() allows them
    int64_t out_w(const ConvGeometry &g) const { return (w + 2 * pad_w - (g.kw - 1) * g.dw - 1) / sw + 1; }
    int64_t wp(const ConvGeometry &g) const {
        if (exact) return w;
        return sw == 1 ? std::max(w + pad_w, out_w(g)) : out_w(g) + (g.kw - 1) * g.dw / sw;
    }
};

// Whether in may take exact rows (see ShiftedInput).
bool exact_rows(const ConvGeometry &g, const ShiftedInput &in) {
    return in.sh == 1 && in.sw == 1 && in.pad_w > 0 && in.pad_w < in.w && in.out_w(g) == in.w;
}

// A band of padded rows laid out [channels, sh, sw, rows, wp] (phase planes; [channels, rows,
// wp] with stride 1) and the offsets of the taps in it: the band covers out_rows output rows
// (rows = out_rows + (KH - 1) dh / sh).
// With exact rows: kw copies of [channels, rows, w], each after a guard of w zeros (what a
// shift reads before the first row), copy j's zeros in the columns shift[j] reads past a row.
struct ShiftedPlan {
    int64_t channels, phases, rows, wp, out_rows, out_w;
    std::vector<int64_t> offsets;  // per tap (channel, i, j) in row-major order
    std::vector<int64_t> shifts;  // exact rows: j dw - pad_w per copy j; empty otherwise
    int64_t wide() const { return out_rows * wp; }
    int64_t guard() const { return shifts.empty() ? 0 : wp; }
    int64_t copy_floats() const { return channels * phases * rows * wp + guard(); }  // one copy and its guard
    // Floats of the band plus what the GEMM reads past it (whole tiles).
    int64_t floats(int64_t nr) const {
        const int64_t wide_pad = (wide() + nr - 1) / nr * nr;
        const int64_t reach = offsets.empty() ? 0 : *std::max_element(offsets.begin(), offsets.end()) + wide_pad;
        return std::max(copy_floats() * std::max<int64_t>(1, static_cast<int64_t>(shifts.size())) + guard(), reach);
    }
};

ShiftedPlan make_plan(const ConvGeometry &g, const ShiftedInput &in, int64_t out_rows) {
    ShiftedPlan p{in.channels, in.sh * in.sw, out_rows + (g.kh - 1) * g.dh / in.sh, in.wp(g), out_rows, in.out_w(g), {},
                  {}};
    if (in.exact)
        for (int64_t j = 0; j < g.kw; ++j) p.shifts.push_back(j * g.dw - in.pad_w);
    p.offsets.reserve(static_cast<size_t>(in.channels * g.kh * g.kw));
    for (int64_t c = 0; c < in.channels; ++c)
        for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
                if (in.exact) {
                    p.offsets.push_back(p.guard() + j * p.copy_floats() + (c * p.rows + i * g.dh) * p.wp + p.shifts[j]);
                    continue;
                }
                const int64_t plane = (c * in.sh + i * g.dh % in.sh) * in.sw + j * g.dw % in.sw;
                p.offsets.push_back((plane * p.rows + i * g.dh / in.sh) * p.wp + j * g.dw / in.sw);
            }
    return p;
}

// Copies an image row: inline vector moves, since a call into the C library's memmove costs
// more than the copy for the 14 to 60 floats of the rows here.
inline void copy_row(float *dst, const float *src, int64_t n) {
    if (n < 8) {
        for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
        return;
    }
    for (int64_t i = 0; i + 8 <= n; i += 8) __builtin_memcpy(dst + i, src + i, 8 * sizeof(float));
    __builtin_memcpy(dst + n - 8, src + n - 8, 8 * sizeof(float));  // the tail, overlapping
}

// The band of the padded planes of src for output rows [r0, r0 + p.out_rows) (phase rows
// [r0, r0 + p.rows)), zeros around and up to `floats`.
void pad_band(const float *src, const ShiftedInput &in, int64_t r0, const ShiftedPlan &p, float *dst, int64_t floats) {
    float *d = dst;
    if (!p.shifts.empty()) {  // exact rows: a copy per shift
        for (const int64_t s : p.shifts) {
            std::fill(d, d + p.guard(), 0.0f);
            d += p.guard();
            for (int64_t c = 0; c < in.channels; ++c) {
                for (int64_t r = 0; r < p.rows; ++r, d += p.wp) {
                    const int64_t y = r0 + r - in.pad_h;
                    if (y < 0 || y >= in.h) {
                        std::fill(d, d + p.wp, 0.0f);
                        continue;
                    }
                    copy_row(d, src + (c * in.h + y) * in.w, in.w);
                    if (s < 0) std::fill(d + in.w + s, d + in.w, 0.0f);
                    if (s > 0) std::fill(d, d + s, 0.0f);
                }
            }
        }
        std::fill(d, dst + floats, 0.0f);
        return;
    }
    for (int64_t c = 0; c < in.channels; ++c) {
        for (int64_t ry = 0; ry < in.sh; ++ry) {
            for (int64_t rx = 0; rx < in.sw; ++rx) {
                for (int64_t r = 0; r < p.rows; ++r, d += p.wp) {
                    const int64_t y = ry + in.sh * (r0 + r) - in.pad_h;
                    if (y < 0 || y >= in.h) {
                        std::fill(d, d + p.wp, 0.0f);
                        continue;
                    }
                    const float *row = src + (c * in.h + y) * in.w;
                    if (in.sw == 1) {
                        std::fill(d, d + in.pad_w, 0.0f);
                        copy_row(d + in.pad_w, row, in.w);
                        std::fill(d + in.pad_w + in.w, d + p.wp, 0.0f);
                        continue;
                    }
                    // Phase columns q read x = rx + sw q - pad_w: those in [0, w) are [q0, q1).
                    int64_t q0 = 0, q1 = 0;
                    tap_span(rx - in.pad_w, in.sw, in.w, p.wp, &q0, &q1);
                    std::fill(d, d + q0, 0.0f);
                    for (int64_t q = q0, x = rx + in.sw * q0 - in.pad_w; q < q1; ++q, x += in.sw) d[q] = row[x];
                    std::fill(d + q1, d + p.wp, 0.0f);
                }
            }
        }
    }
    std::fill(d, dst + floats, 0.0f);
}

// Whether no value is infinite or NaN (the weight gradient multiplies discarded positions of
// the image by zero, which must not turn an infinity into a NaN).
bool all_finite(const float *v, int64_t count) {
    uint32_t exponent = 0;  // the largest exponent field: all ones for infinities and NaNs
    for (int64_t i = 0; i < count; ++i) {
        uint32_t bits;
        std::memcpy(&bits, v + i, sizeof bits);
        exponent = std::max(exponent, bits & 0x7f800000u);
    }
    return exponent != 0x7f800000u;
}

// Wide output positions per band of output rows of the shifted forward and grad_input (about):
// a band's wide output is round_up(rows * Wp, nr) columns of the GEMM, so bands of many
// positions fill its tiles (7 x 8 positions of resnet's last stage as one band fill 56 of 64
// columns; one 8-position row per band filled 8 of 16), and its own padded rows stay small.
constexpr int64_t k_shifted_band_positions = 256;

// Output channels per task of the shifted forward and grad_input at most (a block of the
// weights, read in place, stays in L2 while the band's columns pass), and tasks per thread
// from which no block is split further. Splitting output channels between tasks never changes
// an element's sequence of operations, so the thread count may decide it.
constexpr int64_t k_shifted_task_channels = 144;
constexpr int64_t k_shifted_tasks_per_thread = 4;

// Below these the im2col path is faster (docs/performance.md): the tiles' zeroing and stores or
// their empty rows dominate.
// The weight gradient's tiles are Og columns wide: a depthwise conv (Og = 1) would fill 1 of 32.
constexpr int64_t k_shifted_min_taps = 32;
constexpr int64_t k_shifted_min_rows = 8;

// Buffers of the shifted path stay moderate (4 Mi floats each): larger ones take the banded
// im2col path.
constexpr int64_t k_shifted_floats = int64_t{1} << 22;

// Whether the shifted path runs: something to save (not a pointwise conv, which reads
// its input as the column matrix already), and moderate buffers for `whole`, the plan of the
// whole image, with m_out output rows.
bool shifted_fits(const ConvGeometry &g, const ShiftedPlan &whole, int64_t m_out) {
    if (g.pointwise() || whole.offsets.empty()) return false;
    const GemmF32Tiling t = gemm_f32_tile();
    const int64_t wide_pad = (whole.wide() + t.nr - 1) / t.nr * t.nr;
    return whole.floats(t.nr) <= k_shifted_floats && (m_out + t.mr) * wide_pad <= k_shifted_floats;
}

// Output rows per band: about k_shifted_band_positions wide positions, the bands of an image
// equal but the last.
int64_t shifted_band(const ConvGeometry &g, const ShiftedInput &in, int64_t out_h) {
    const int64_t wide = std::max<int64_t>(1, out_h * in.wp(g));
    const int64_t bands = std::clamp<int64_t>((wide + k_shifted_band_positions / 2) / k_shifted_band_positions, 1,
                                              std::max<int64_t>(out_h, 1));
    return (out_h + bands - 1) / bands;
}

// Whether the shifted forward or grad_input over in (out_h output rows, m_out output channels)
// takes exact rows: where they allow them and the multiply-adds saved (the discarded columns
// and the tiles' rounding, whole tiles of nr and a half- or quarter-width one for the last
// nr / 2 or nr / 4 or fewer columns of a band) outweigh the kw - 1 more copies of the band (a
// copied float counted as 16 multiply-adds), and at least 1/16 of the columns go, since the
// copies also crowd the caches the tiles read B from: 7 x 7 and 14 x 14 images, not 28 x 28 or
// 56 x 56 (4.9% and 2.8% fewer columns, measured slower). docs/performance.md has the numbers.
bool take_exact_rows(const ConvGeometry &g, ShiftedInput in, int64_t out_h, int64_t m_out) {
    if (!exact_rows(g, in) || out_h <= 0) return false;
    const int64_t nr = gemm_f32_tile().nr;
    const auto columns = [&](const ShiftedInput &s, int64_t *bands) {
        const int64_t band = shifted_band(g, s, out_h);
        int64_t total = 0;
        *bands = 0;
        for (int64_t r0 = 0; r0 < out_h; r0 += band, ++*bands) {
            const int64_t wide = std::min(band, out_h - r0) * s.wp(g), rest = wide % nr;
            total += wide - rest + (rest == 0 ? 0 : rest <= nr / 4 ? nr / 4 : rest <= nr / 2 ? nr / 2 : nr);
        }
        return total;
    };
    int64_t bands = 0;
    const int64_t plain = columns(in, &bands);
    in.exact = true;
    const int64_t exact = columns(in, &bands);
    const int64_t copies = (g.kw - 1) * in.channels * (out_h + bands * (g.kh - 1) * g.dh) * in.w;
    // The copies must not push the shifted path's buffers past their limit (plain rows then).
    return (plain - exact) * 16 >= plain && (plain - exact) * m_out * in.channels * g.kh * g.kw >= 16 * copies &&
           shifted_fits(g, make_plan(g, in, out_h), m_out);
}

// The A operand of a shifted convolution per group: row-major m_out x taps matrices `lda` floats
// apart along rows, read in place, or (lda 0) packed by gemm_f32_pack_a; group gi's at
// data + gi * group_stride.
struct ShiftedWeights {
    const float *data;
    int64_t lda, group_stride;
};

// dst [m_out, out_h, out_w] of every image and group = the group's weights times the padded
// planes of src. src holds src_c channels per image, a group reads in.channels of them from
// channel gi * in.channels; dst holds dst_c per image, a group writes m_out from gi * m_out.
// A task computes one block of output channels of one band of one (image, group): it pads the
// band's rows, multiplies, and copies the wide output's valid columns into dst.
void shifted_conv(const ConvGeometry &g, const ShiftedInput &in, int64_t out_h, const float *src, int64_t src_c,
                  const ShiftedWeights &a, int64_t m_out, float *dst, int64_t dst_c,
                  const ConvEpilogue &epilogue = {}) {
    if (m_out <= 0 || out_h <= 0) return;
    const GemmF32Tiling t = gemm_f32_tile();
    const int64_t k = in.channels * g.kh * g.kw;
    const int64_t band = shifted_band(g, in, out_h), bands = (out_h + band - 1) / band;
    const int64_t out_w = in.out_w(g), images = g.n * g.groups;
    int64_t blocks = (m_out + k_shifted_task_channels - 1) / k_shifted_task_channels;
    const int64_t want = k_shifted_tasks_per_thread * thread_count();
    if (images * bands * blocks < want)
        blocks = std::min((m_out + t.mr - 1) / t.mr, (want + images * bands - 1) / (images * bands));
    const int64_t block_rows = ((m_out + blocks - 1) / blocks + t.mr - 1) / t.mr * t.mr;
    blocks = (m_out + block_rows - 1) / block_rows;
    const ShiftedPlan full = make_plan(g, in, band), last = make_plan(g, in, out_h - (bands - 1) * band);
    const int64_t ldc_max = (band * full.wp + t.nr - 1) / t.nr * t.nr;
    parallel_for(images * bands * blocks, [&](int64_t task) {
        const int64_t block = task % blocks, b = task / blocks % bands, image = task / blocks / bands;
        const int64_t gi = image % g.groups, n = image / g.groups;
        const int64_t m0 = block * block_rows, rows_m = std::min(block_rows, m_out - m0);
        const float *planes = src + (n * src_c + gi * in.channels) * in.h * in.w;
        float *wide_out = scratch_floats(k_slot_temp, static_cast<size_t>((block_rows + t.mr) * ldc_max));
        const ShiftedPlan &padded = b == bands - 1 ? last : full;
        const int64_t xp_floats = padded.floats(t.nr);
        float *xp = scratch_floats(k_slot_col, static_cast<size_t>(xp_floats));
        pad_band(planes, in, b * band, padded, xp, xp_floats);
        const int64_t rows = std::min(band, out_h - b * band), wide = rows * padded.wp;
        const int64_t ldc = (wide + t.nr - 1) / t.nr * t.nr;
        const float *a_rows = a.data + gi * a.group_stride + (a.lda ? m0 * a.lda : m0 * k);  // packed: whole slivers
        gemm_f32_rows_b(rows_m, wide, k, a_rows, a.lda, xp, padded.offsets.data(), wide_out, ldc);
        for (int64_t m = 0; m < rows_m; ++m) {
            const int64_t channel = gi * m_out + m0 + m;
            float *out = dst + ((n * dst_c + channel) * out_h + b * band) * out_w;
            if (epilogue.active()) {
                const float bias = epilogue.bias ? epilogue.bias[channel] : 0.0f;
                for (int64_t oy = 0; oy < rows; ++oy, out += out_w)
                    finish_row(out, wide_out + m * ldc + oy * padded.wp, out_w, bias, epilogue);
                continue;
            }
            for (int64_t oy = 0; oy < rows; ++oy, out += out_w)
                copy_row(out, wide_out + m * ldc + oy * padded.wp, out_w);
        }
    });
}

// Each group's m x k matrix matrix(gi), packed for the shifted GEMM one group after another.
template <class Matrix>
std::vector<float> packed_groups(const ConvGeometry &g, int64_t m, int64_t k, Matrix &&matrix) {
    const int64_t a_floats = gemm_f32_packed_a_floats(m, k);
    std::vector<float> packed(static_cast<size_t>(g.groups * a_floats));
    for (int64_t gi = 0; gi < g.groups; ++gi) gemm_f32_pack_a(m, k, matrix(gi), packed.data() + gi * a_floats);
    return packed;
}

// ---- The tiled forward (kernels_conv_tile.hpp) -------------------------------------------
//
// The shifted forward's padded band (plain rows of wp positions, or phase planes), read in place
// by the 16-channel x 6-position tile: output position (r, ox) of a band reads tap t at
// r wp + ox + offsets[t], and only the OW output positions of a row are computed, so no column
// is discarded and positions round up to 1, not to the GEMM tile's 16 (a 28 x 28 band of 10 rows:
// 280 columns, where the 6 x 16 tile computes 10 x 29 = 290 rounded to 304), with no copy of the
// band per kernel column. The weights are w^T in gemm_f32_prepack_b's layout (K blocks of
// slivers of 16 output channels): packed once for a constant weight (packed_weights.hpp), else
// on every call. Each output is the same fused multiply-add sequence over the same tap values,
// zeros of the padding included, as on the shifted path: the same bits.

// Weights packed per call only where the product is at least this many output positions per
// weight (packing w^T costs about as much as a few positions' multiply-adds per weight).
constexpr int64_t k_tiled_pack_positions = 512;

// Taps from which the tiled forward runs (fewer: the column matrix): the Fashion-MNIST example's
// first layer (one channel, 3 x 3) took it before kernels_conv_one_channel.hpp had its own path.
constexpr int64_t k_tiled_min_taps = 8;

// TINYFIN_CPU_CONV_TILE: "0" turns the tiled forward off (the shifted path or the column matrix
// runs, with the same bits), "1" or unset leaves it on; for measuring one against the other.
bool tiled_enabled() {
    static const bool on = tf_kit::env_flag("TINYFIN_CPU_CONV_TILE", true, "tiled forward on");
    return on;
}

// K rows of the packed weights per pass over a band's positions: a sliver of 16 channels by
// this many taps (16 KiB) stays in L1 while the band's position tiles pass.
constexpr int64_t k_tiled_kc = 256;

// Each group's w^T [Kg x Og] in gemm_f32_prepack_b's layout, or an empty list where the tiled
// forward does not run: not on this instruction set, too few channels to fill the tile's
// vectors, more than one N block of the packed layout, or a weight that is not constant and too
// few positions to pay for packing it now. w_desc: the op's weight where its own f32 storage is
// read (a constant's packed form is kept), else null.
struct TiledWeights {
    std::vector<std::shared_ptr<const std::vector<float>>> kept;  // per group, when constant
    std::vector<float> own;  // packed now: group gi at gi * group_floats
    std::vector<const float *> groups;
};

TiledWeights tiled_weights(const ConvGeometry &g, const float *w, const tf_tensor_desc *w_desc) {
    TiledWeights t;
    const int64_t og = g.o_group(), kg = g.taps();
    constexpr int64_t nr = k_conv_tile_channels;
    const int64_t width = (og + nr - 1) / nr * nr, half = (og + nr / 2 - 1) / (nr / 2) * (nr / 2);
    if (!tiled_enabled() || !conv_tile_available() || kg < k_tiled_min_taps || og * 4 < half * 3 ||
        gemm_f32_prepacked_b_floats(kg, og) != kg * width)
        return t;
    if (w_desc) {
        for (int64_t gi = 0; gi < g.groups; ++gi) {
            auto p = packed_constant_b(*w_desc, w + gi * og * kg, kg, og, 1, kg);
            if (!p) break;
            t.groups.push_back(p->data());
            t.kept.push_back(std::move(p));
        }
        if (static_cast<int64_t>(t.groups.size()) == g.groups) return t;
        t.groups.clear();
        t.kept.clear();
    }
    if (g.n * g.positions() < k_tiled_pack_positions) return t;
    t.own.resize(static_cast<size_t>(g.groups * kg * width));
    for (int64_t gi = 0; gi < g.groups; ++gi) {
        gemm_f32_prepack_b(kg, og, {w + gi * og * kg, 1, kg}, t.own.data() + gi * kg * width);
        t.groups.push_back(t.own.data() + gi * kg * width);
    }
    return t;
}

// dst[q] of `channels` rows ld apart = c[q * 16 + j] of channel j, for q < positions, with
// conv2d_act's epilogue (channel j is output channel channel0 + j): 4 x 4 blocks transposed in
// registers on x86-64, bias, residual and relu applied to them as finish_row applies them (the
// same f32 operations in the same order), the rest stored and then finished by finish_row.
void store_sliver(const float *c, int64_t positions, int64_t channels, float *dst, int64_t ld, int64_t channel0,
                  const ConvEpilogue &e) {
    const bool active = e.active();
    const auto bias_of = [&](int64_t j) { return e.bias ? e.bias[channel0 + j] : 0.0f; };
    int64_t j0 = 0, q_done = 0;  // rows [0, j0) are finished in columns [0, q_done)
#if defined(__x86_64__)
    if (e.activation != TF_CONV_ACT_CLIP) {
        const bool relu = e.activation == TF_CONV_ACT_RELU;
        const __m128 zero = _mm_setzero_ps();
        q_done = positions / 4 * 4;
        for (; j0 + 4 <= channels; j0 += 4) {
            __m128 b[4];
            for (int k = 0; k < 4; ++k) b[k] = _mm_set1_ps(bias_of(j0 + k));
            for (int64_t q = 0; q < q_done; q += 4) {
                const float *s = c + q * 16 + j0;
                __m128 r[4] = {_mm_loadu_ps(s), _mm_loadu_ps(s + 16), _mm_loadu_ps(s + 32), _mm_loadu_ps(s + 48)};
                _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
                float *d = dst + j0 * ld + q;
                for (int k = 0; k < 4; ++k) {
                    __m128 v = r[k];
                    if (e.bias) v = _mm_add_ps(v, b[k]);
                    if (e.residual) v = _mm_add_ps(v, _mm_loadu_ps(e.residual + (d + k * ld - e.y)));
                    if (relu) v = _mm_max_ps(zero, v);
                    _mm_storeu_ps(d + k * ld, v);
                }
            }
        }
    }
#endif
    for (int64_t j = 0; j < channels; ++j) {
        const int64_t from = j < j0 ? q_done : 0;
        for (int64_t q = from; q < positions; ++q) dst[j * ld + q] = c[q * 16 + j];
        if (active && from < positions)
            finish_row(dst + j * ld + from, dst + j * ld + from, positions - from, bias_of(j), e);
    }
}

// Floats of padded images the tiled forward prepares at once (4 MiB, so that they stay in L3): a
// batch of small images pads them all, so that a task's positions may span images and each
// sliver of weights passes more positions while it is in L1 (resnet18's 7 x 7 stage: 49
// positions per image, 28 images at once).
constexpr int64_t k_tiled_pad_floats = int64_t{1} << 20;

// Output positions per task of the tiled forward (about): the task's rows of the padded image
// stay in L2 while its slivers pass them.
constexpr int64_t k_tiled_task_positions = 256;

// The tiled forward's split of `positions` output positions by `slivers` slivers of output
// channels into ranges x blocks tasks: blocks of at most k_shifted_task_channels, more blocks
// (a divisor of the slivers, so blocks are equal) and then more ranges until each thread has
// k_shifted_tasks_per_thread, and a task count the threads divide (equal tasks end together).
// Any split computes the same bits.
struct TiledSplit {
    int64_t ranges, blocks;
};

TiledSplit tiled_split(int64_t positions, int64_t slivers, int64_t threads) {
    constexpr int64_t nr = k_conv_tile_channels, np = k_conv_tile_positions;
    const int64_t max_ranges = std::max<int64_t>(1, positions / np);
    const auto divisor_from = [&](int64_t want) {
        for (int64_t d = std::max<int64_t>(want, 1); d < slivers; ++d)
            if (slivers % d == 0) return d;
        return slivers;
    };
    TiledSplit s{std::clamp<int64_t>((positions + k_tiled_task_positions / 2) / k_tiled_task_positions, 1, max_ranges),
                 divisor_from((slivers * nr + k_shifted_task_channels - 1) / k_shifted_task_channels)};
    const int64_t want = k_shifted_tasks_per_thread * threads;
    if (s.ranges * s.blocks < want) s.blocks = divisor_from((want + s.ranges - 1) / s.ranges);
    if (s.ranges * s.blocks < want) s.ranges = std::min(max_ranges, (want + s.blocks - 1) / s.blocks);
    while (threads > 1 && s.ranges * s.blocks % threads != 0 && s.ranges < max_ranges) ++s.ranges;
    return s;
}

// y [N, O, OH, OW] = the groups' weights (tiled_weights) times the padded planes of x (in: the
// shifted forward's plain layout, plan: its plan for the whole image). Per group and batch of
// images: one pass pads the images (tasks of channels), the next computes; a task computes one
// block of output channels (whole slivers) for one range of the batch's positions, counted
// image after image, in tiles of 5 or 6 positions (the 6 x 16 tile's rate; a last tile of 1
// or 2 positions runs at a fraction of it).
void tiled_conv(const ConvGeometry &g, const ShiftedInput &in, const ShiftedPlan &plan, const float *x,
                const std::vector<const float *> &w, float *y, const ConvEpilogue &epilogue) {
    const int64_t m_out = g.o_group(), plane = g.oh * g.ow;
    if (m_out <= 0 || plane <= 0 || g.n <= 0) return;
    constexpr int64_t nr = k_conv_tile_channels, np = k_conv_tile_positions;
    const int64_t k = in.channels * g.kh * g.kw, kc_pack = gemm_f32_prepack_kc();
    const int64_t width = (m_out + nr - 1) / nr * nr, slivers = width / nr;
    // One image's padded planes [channels, phases, rows, wp]; a channel's at c * channel_floats.
    const int64_t channel_floats = plan.phases * plan.rows * plan.wp, image_floats = in.channels * channel_floats;
    // What the last image's taps read past its planes (the right padding of its last row).
    const int64_t tail = std::max<int64_t>(0, plan.floats(nr) - image_floats);
    const int64_t batch = std::clamp<int64_t>(k_tiled_pad_floats / std::max<int64_t>(image_floats, 1), 1, g.n);
    float *xp = scratch_floats(k_slot_col, static_cast<size_t>(batch * image_floats + tail));
    const int64_t threads = thread_count();
    for (int64_t gi = 0; gi < g.groups; ++gi) {
        for (int64_t n0 = 0; n0 < g.n; n0 += batch) {
            const int64_t count = std::min(batch, g.n - n0);
            std::fill(xp + count * image_floats, xp + count * image_floats + tail, 0.0f);
            const int64_t chunks = std::min(in.channels, (2 * threads + count - 1) / count);
            parallel_for(count * chunks, [&](int64_t task) {
                const int64_t i = task / chunks, chunk = task % chunks;
                const int64_t c0 = in.channels * chunk / chunks, c1 = in.channels * (chunk + 1) / chunks;
                ShiftedInput part = in;
                part.channels = c1 - c0;
                ShiftedPlan rows{part.channels, plan.phases, plan.rows, plan.wp, plan.out_rows, plan.out_w, {}, {}};
                pad_band(x + ((n0 + i) * g.c + gi * in.channels + c0) * in.h * in.w, part, 0, rows,
                         xp + i * image_floats + c0 * channel_floats, part.channels * channel_floats);
            });
            const int64_t positions = count * plane;
            const TiledSplit split = tiled_split(positions, slivers, threads);
            const int64_t per_block = slivers / split.blocks;
            parallel_for(split.ranges * split.blocks, [&](int64_t task) {
                const int64_t s0 = task % split.blocks * per_block, s1 = s0 + per_block;
                const int64_t range = task / split.blocks;
                const int64_t q0 = positions * range / split.ranges, q1 = positions * (range + 1) / split.ranges;
                const int64_t span = q1 - q0;
                float *c = scratch_floats(k_slot_temp, static_cast<size_t>((s1 - s0) * nr * span));
                std::vector<const float *> at(static_cast<size_t>(span));  // where each position's taps start
                for (int64_t q = q0; q < q1; ++q) {
                    const int64_t i = q / plane, oy = q % plane / g.ow, ox = q % g.ow;
                    at[static_cast<size_t>(q - q0)] = xp + i * image_floats + oy * plan.wp + ox;
                }
                const int64_t tiles = (span + np - 1) / np, small = span / tiles, large = span % tiles;
                for (int64_t pc = 0; pc < k; pc += kc_pack) {
                    const int64_t kcb = std::min(kc_pack, k - pc);
                    const int64_t subs = (kcb + k_tiled_kc - 1) / k_tiled_kc, sub = (kcb + subs - 1) / subs;
                    for (int64_t p0 = 0; p0 < kcb; p0 += sub) {
                        const int64_t kk = std::min(sub, kcb - p0);
                        const int64_t *offsets = plan.offsets.data() + pc + p0;
                        for (int64_t s = s0; s < s1; ++s) {
                            const float *ws = w[static_cast<size_t>(gi)] + pc * width + s * nr * kcb + p0 * nr;
                            const int64_t channels = std::min(nr, m_out - s * nr);
                            float *cs = c + (s - s0) * nr * span;
                            // `large` tiles of small + 1 positions, then tiles of `small`.
                            for (int64_t t = 0, q = 0; t < tiles; ++t) {
                                const int64_t size = t < large ? small + 1 : small;
                                conv_tile_f32(size, channels, kk, ws, at.data() + q, offsets, cs + q * nr, pc + p0 > 0);
                                q += size;
                            }
                        }
                    }
                }
                // The range's positions image by image into y.
                for (int64_t q = q0; q < q1;) {
                    const int64_t i = q / plane, end = std::min(q1, (i + 1) * plane);
                    for (int64_t s = s0; s < s1; ++s) {
                        const int64_t ch0 = gi * m_out + s * nr, channels = std::min(nr, m_out - s * nr);
                        float *out = y + ((n0 + i) * g.o + ch0) * plane + q % plane;
                        store_sliver(c + ((s - s0) * span + q - q0) * nr, end - q, channels, out, plane, ch0, epilogue);
                    }
                    q = end;
                }
            });
        }
    }
}

// ---- Winograd F(2 x 2, 3 x 3) (kernels_conv_winograd.hpp) ---------------------------------
//
// For a constant weight only (transformed once, kept with the packed weights): 2.25 times fewer
// multiply-adds than the tiled forward, other sums (not the fused multiply-add sequence in
// (c, kh, kw) order the other paths share), so a weight that is not marked constant keeps the
// direct paths and their bits.

// TINYFIN_CPU_CONV_WINOGRAD: "0" turns it off (the tiled forward runs instead), "1" or unset
// leaves it on.
bool winograd_enabled() {
    static const bool on = tf_kit::env_flag("TINYFIN_CPU_CONV_WINOGRAD", true, "Winograd 3x3 forward on");
    return on;
}

constexpr int k_form_winograd = 1;  // prepared_constant's form of the transformed weights

// Input and output channels from which it runs (fewer: the GEMMs over channels are too short
// to pay for the transforms).
constexpr int64_t k_winograd_min_channels = 16;

// The transformed weights where Winograd runs: a constant f32 weight, 3 x 3, stride 1, dilation
// 1, one group, padding up to 2, enough channels, finite weights (a transform would turn an
// infinity into NaNs in outputs the direct sum keeps infinite); else null.
std::shared_ptr<const std::vector<float>> winograd_weights(const ConvGeometry &g, const float *w,
                                                           const tf_tensor_desc *w_desc) {
    if (!w_desc || !winograd_enabled() || !winograd_available() || g.kh != 3 || g.kw != 3 || g.sh != 1 || g.sw != 1 ||
        g.dh != 1 || g.dw != 1 || g.groups != 1 || g.ph > 2 || g.pw > 2 || g.c < k_winograd_min_channels ||
        g.o < k_winograd_min_channels || g.oh < 2 || g.ow < 2)
        return nullptr;
    auto u = prepared_constant(*w_desc, w, k_form_winograd, g.o, g.c, [&] {
        if (!all_finite(w, g.o * g.c * 9)) return std::vector<float>{};
        std::vector<float> t(static_cast<size_t>(winograd_weight_floats(g.o, g.c)));
        winograd_transform_weights(g.o, g.c, w, t.data());
        return t;
    });
    return u && !u->empty() ? u : nullptr;
}

// TINYFIN_CPU_CONV_ONE_CHANNEL: "0" turns the one-input-channel 3 x 3 forward off (the tiled
// forward or the column matrix runs, with the same bits), "1" or unset leaves it on.
bool one_channel_enabled() {
    static const bool on = tf_kit::env_flag("TINYFIN_CPU_CONV_ONE_CHANNEL", true, "one-channel 3x3 forward on");
    return on;
}

// Whether kernels_conv_one_channel.hpp's forward takes g: groups of one input channel, 3 x 3,
// stride 1, dilation 1.
bool one_channel_runs(const ConvGeometry &g) {
    return g.c_group() == 1 && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
           one_channel_enabled() && conv_one_channel_available();
}

// Runs image(n, col) for every image, one per task of the pool's threads, with the task's own
// column buffer (null for a pointwise conv, which needs none); one image: threads inside the GEMM.
template <class Image>
void parallel_images(const ConvGeometry &g, Image &&image) {
    const size_t col_floats = column_floats(g);
    parallel_for(g.n, [&](int64_t n) { image(n, col_floats ? scratch_floats(k_slot_col, col_floats) : nullptr); });
}

// w_desc: the op's weight tensor where w is its own f32 storage (a constant's packed form may
// be kept for the tiled forward), else null.
void conv_forward(const ConvGeometry &g, const float *x, const float *w, float *y, const ConvEpilogue &epilogue,
                  const tf_tensor_desc *w_desc = nullptr) {
    const int64_t og = g.o_group(), kg = g.taps(), positions = g.positions(), cg = g.c_group();
    if (const auto u = winograd_weights(g, w, w_desc); u && all_finite(x, g.n * g.c * g.h * g.w)) {
        winograd_conv_f32({g.n, g.c, g.h, g.w, g.o, g.ph, g.pw}, x, u->data(), y, epilogue);
        return;
    }
    if (one_channel_runs(g)) {
        conv_one_channel_3x3_f32({g.n, g.groups, g.h, g.w, og, g.ph, g.pw}, x, w, y, epilogue);
        return;
    }
    ShiftedInput in{cg, g.h, g.w, g.ph, g.pw, g.sh, g.sw};
    if (!g.pointwise()) {
        const ShiftedPlan whole = make_plan(g, in, g.oh);
        if (shifted_fits(g, whole, og)) {
            const TiledWeights tiled = tiled_weights(g, w, w_desc);
            if (!tiled.groups.empty()) {
                tiled_conv(g, in, whole, x, tiled.groups, y, epilogue);
                return;
            }
        }
    }
    in.exact = take_exact_rows(g, in, g.oh, og);
    if (kg >= k_shifted_min_taps && shifted_fits(g, make_plan(g, in, g.oh), og)) {
        shifted_conv(g, in, g.oh, x, g.c, {w, kg, og * kg}, og, y, g.o, epilogue);
        return;
    }
    const int64_t rows = band_rows(g);
    parallel_images(g, [&](int64_t n, float *col) {
        for (int64_t gi = 0; gi < g.groups; ++gi) {
            const float *xg = x + (n * g.c + gi * cg) * g.h * g.w;
            float *yg = y + (n * g.o + gi * og) * positions;
            if (g.pointwise()) {
                gemm_f32(og, positions, kg, {w + gi * og * kg, kg, 1}, {xg, positions, 1}, yg, positions, false);
                finish_block(yg, og, positions, positions, gi * og, epilogue);
                continue;
            }
            for (int64_t oy0 = 0; oy0 < g.oh; oy0 += rows) {
                const int64_t oy1 = std::min(g.oh, oy0 + rows), band = (oy1 - oy0) * g.ow;
                im2col(g, xg, col, oy0, oy1);
                const F32Matrix wm{w + gi * og * kg, kg, 1};
                if (kg < 64 || gemm_f32_tile_fill(band, og) < 1.08 * gemm_f32_tile_fill(og, band)) {
                    gemm_f32(og, band, kg, wm, {col, band, 1}, yg + oy0 * g.ow, positions, false);
                    finish_block(yg + oy0 * g.ow, og, band, positions, gi * og, epilogue);
                    continue;
                }
                // y^T = col^T w^T fills the GEMM's tiles clearly better (196 x 64 for the
                // example's second conv: 96% of 12 x 32 tiles, 64 x 196 78%); the same products
                // in the same order, so the same bits. Computed dense, then transposed into y:
                // worth it when there are enough taps to pay for the transpose (not for the
                // 9 of a one-channel 3x3 conv).
                float *yt = scratch_floats(k_slot_temp, static_cast<size_t>(band * og));
                gemm_f32(band, og, kg, {col, 1, band}, {wm.data, 1, kg}, yt, og, false);
                transpose_into(yt, band, og, yg + oy0 * g.ow, positions);
                finish_block(yg + oy0 * g.ow, og, band, positions, gi * og, epilogue);
            }
        }
    });
}

void conv_grad_input(const ConvGeometry &g, const float *dy, const float *w, float *dx) {
    const int64_t og = g.o_group(), kg = g.taps(), positions = g.positions(), cg = g.c_group();
    // The flipped convolution needs padding (K - 1) d - p >= 0, and finite weights (it
    // multiplies them by the zeros around dy, where an infinite weight would make a NaN).
    if (g.sh == 1 && g.sw == 1 && g.ph <= (g.kh - 1) * g.dh && g.pw <= (g.kw - 1) * g.dw) {
        ShiftedInput in{og, g.oh, g.ow, (g.kh - 1) * g.dh - g.ph, (g.kw - 1) * g.dw - g.pw};
        in.exact = take_exact_rows(g, in, g.h, cg);
        const int64_t taps = og * g.kh * g.kw;
        if (taps >= k_shifted_min_taps && cg >= k_shifted_min_rows && shifted_fits(g, make_plan(g, in, g.h), cg) &&
            all_finite(w, g.o * kg)) {
            // w'[c][o][i][j] = w[o][c][KH - 1 - i][KW - 1 - j] per group, packed.
            std::vector<float> flipped(static_cast<size_t>(cg * taps));
            const auto flip = [&](int64_t gi) {
                for (int64_t c = 0; c < cg; ++c)
                    for (int64_t o = 0; o < og; ++o)
                        for (int64_t i = 0; i < g.kh; ++i)
                            for (int64_t j = 0; j < g.kw; ++j)
                                flipped[static_cast<size_t>(c * taps + (o * g.kh + i) * g.kw + j)] =
                                    w[(((gi * og + o) * cg + c) * g.kh + g.kh - 1 - i) * g.kw + g.kw - 1 - j];
                return F32Matrix{flipped.data(), taps, 1};
            };
            const std::vector<float> packed = packed_groups(g, cg, taps, flip);
            shifted_conv(g, in, g.h, dy, g.o, {packed.data(), 0, gemm_f32_packed_a_floats(cg, taps)}, cg, dx, g.c);
            return;
        }
    }
    const int64_t rows = band_rows(g);
    parallel_images(g, [&](int64_t n, float *col) {
        if (!g.pointwise()) std::fill(dx + n * g.c * g.h * g.w, dx + (n + 1) * g.c * g.h * g.w, 0.0f);
        for (int64_t gi = 0; gi < g.groups; ++gi) {
            const F32Matrix wt = {w + gi * og * kg, 1, kg};  // w[g]^T: [Kg x Og]
            const F32Matrix dyg = {dy + (n * g.o + gi * og) * positions, positions, 1};
            float *dxg = dx + (n * g.c + gi * cg) * g.h * g.w;
            if (g.pointwise()) {
                gemm_f32(kg, positions, og, wt, dyg, dxg, positions, false);
                continue;
            }
            for (int64_t oy0 = 0; oy0 < g.oh; oy0 += rows) {
                const int64_t oy1 = std::min(g.oh, oy0 + rows), band = (oy1 - oy0) * g.ow;
                gemm_f32(kg, band, og, wt, {dyg.data + oy0 * g.ow, positions, 1}, col, band, false);
                col2im(g, col, dxg, oy0, oy1);
            }
        }
    });
}

// Images are summed in chunks: each chunk accumulates its images in order into its own partial
// gradient, then the partials are added in chunk order. A chunk is k_weight_chunk images (N / 4,
// at most that, on the shifted path): the shape decides, so the thread count changes no result.
constexpr int64_t k_weight_chunk = 8;

// dw[g][o][t] = the chunks' transposed gradients added in chunk order: chunk c's dw^T[g][t][o]
// is at partial[c * chunk_stride + g * group_stride + t * ld + o].
void add_transposed_partials(const ConvGeometry &g, const float *partial, int64_t chunks, int64_t chunk_stride,
                             int64_t group_stride, int64_t ld, float *dw) {
    const int64_t og = g.o_group(), kg = g.taps();
    for (int64_t gi = 0; gi < g.groups; ++gi)
        for (int64_t o = 0; o < og; ++o)
            for (int64_t t = 0; t < kg; ++t) {
                const int64_t at = gi * group_stride + t * ld + o;
                float v = partial[at];
                for (int64_t c = 1; c < chunks; ++c) v += partial[c * chunk_stride + at];
                dw[(gi * og + o) * kg + t] = v;
            }
}

// dw = sum over images of dy[n] col(x[n])^T through the shifted path. Per chunk of images,
// group and block of taps, dw^T [taps x Og] is accumulated in a partial (round_up(taps, mr) x
// round_up(Og, nr)); the partials are then added in chunk order while transposing into dw. An
// image with a non-finite value takes the column matrix instead (see all_finite): the same
// products, summed in another order.
void shifted_grad_weight(const ConvGeometry &g, const ShiftedInput &in, const float *dy, const float *x, int64_t images,
                         float *dw) {
    const GemmF32Tiling t = gemm_f32_tile();
    const int64_t og = g.o_group(), kg = g.taps(), positions = g.positions();
    const ShiftedPlan plan = make_plan(g, in, g.oh);
    const int64_t chunks = (g.n + images - 1) / images;
    const int64_t wide = plan.wide(), ldc = (og + t.nr - 1) / t.nr * t.nr, rows_c = (kg + t.mr - 1) / t.mr * t.mr;
    const int64_t part = g.groups * rows_c * ldc, xp_floats = plan.floats(t.nr);
    const size_t col_floats = column_floats(g);
    const int64_t band = band_rows(g);
    std::vector<float> partial(static_cast<size_t>(chunks * part));
    parallel_for(chunks * g.groups, [&](int64_t task) {
        const int64_t gi = task % g.groups, chunk = task / g.groups;
        float *acc = partial.data() + chunk * part + gi * rows_c * ldc;
        float *dyt = scratch_floats(k_slot_temp2, static_cast<size_t>(wide * ldc));
        for (int64_t n = chunk * images; n < std::min(g.n, (chunk + 1) * images); ++n) {
            const float *xg = x + (n * g.c + gi * in.channels) * g.h * g.w;
            const float *dyg = dy + (n * g.o + gi * og) * positions;
            float *xp = scratch_floats(k_slot_col, static_cast<size_t>(xp_floats));
            if (all_finite(xg, in.channels * g.h * g.w)) {
                pad_band(xg, in, 0, plan, xp, xp_floats);
                // dy^T over the wide positions, output row by output row; zeros where the row's
                // discarded positions are.
                for (int64_t oy = 0; oy < g.oh; ++oy) {
                    gemm_f32_pack_b(g.ow, og, {dyg + oy * g.ow, 1, positions}, dyt + oy * plan.wp * t.nr, t.nr * wide);
                    for (int64_t s = 0; s < ldc / t.nr; ++s)
                        std::fill(dyt + s * t.nr * wide + (oy * plan.wp + g.ow) * t.nr,
                                  dyt + s * t.nr * wide + (oy + 1) * plan.wp * t.nr, 0.0f);
                }
                gemm_f32_rows_a(kg, og, wide, xp, plan.offsets.data(), dyt, acc, ldc, true);
                continue;
            }
            float *col = scratch_floats(k_slot_col, col_floats);
            for (int64_t oy0 = 0; oy0 < g.oh; oy0 += band) {
                const int64_t oy1 = std::min(g.oh, oy0 + band), cols = (oy1 - oy0) * g.ow;
                im2col(g, xg, col, oy0, oy1);
                gemm_f32(kg, og, cols, {col, cols, 1}, {dyg + oy0 * g.ow, 1, positions}, acc, ldc, true);
            }
        }
    });
    add_transposed_partials(g, partial.data(), chunks, part, rows_c * ldc, ldc, dw);
}

void conv_grad_weight(const ConvGeometry &g, const float *dy, const float *x, float *dw) {
    const int64_t og = g.o_group(), kg = g.taps(), positions = g.positions(), cg = g.c_group();
    const size_t col_floats = column_floats(g);
    const int64_t rows = band_rows(g);
    const int64_t dw_floats = g.o * kg;
    const int64_t chunks = std::max<int64_t>(1, (g.n + k_weight_chunk - 1) / k_weight_chunk);  // 1: zeros for N = 0
    // The shifted path sums images in chunks of N / 4 (at most k_weight_chunk): at least 4 tasks,
    // by a rule that looks at the shape only.
    const ShiftedInput in{cg, g.h, g.w, g.ph, g.pw};
    const int64_t images = std::min(k_weight_chunk, g.n / 4);
    if (images >= 1 && og >= k_shifted_min_rows && g.sh == 1 && g.sw == 1 &&
        shifted_fits(g, make_plan(g, in, g.oh), og)) {
        shifted_grad_weight(g, in, dy, x, images, dw);
        return;
    }
    // Each chunk's gradient as dw^T [Kg x Og] per group (= col dy^T) when that fills the GEMM's
    // tiles clearly better (288 x 64 for the example's second conv, against 64 x 288 in 89% of
    // 12 x 32 tiles): the same products summed in the same order, so the same bits. The
    // transposed partials are then added in chunk order while transposing into dw.
    const bool transposed = !g.pointwise() && gemm_f32_tile_fill(kg, og) >= 1.08 * gemm_f32_tile_fill(og, kg);
    const int64_t own = transposed ? chunks : chunks - 1;  // partials not written into dw itself
    std::vector<float> partial(static_cast<size_t>(own * dw_floats));
    parallel_for(chunks, [&](int64_t chunk) {
        float *acc = transposed   ? partial.data() + chunk * dw_floats
                     : chunk == 0 ? dw
                                  : partial.data() + (chunk - 1) * dw_floats;
        std::fill(acc, acc + dw_floats, 0.0f);
        float *col = col_floats ? scratch_floats(k_slot_col, col_floats) : nullptr;
        for (int64_t n = chunk * k_weight_chunk; n < std::min(g.n, (chunk + 1) * k_weight_chunk); ++n) {
            for (int64_t gi = 0; gi < g.groups; ++gi) {
                const float *xg = x + (n * g.c + gi * cg) * g.h * g.w;
                const float *dyg = dy + (n * g.o + gi * og) * positions;
                if (g.pointwise()) {  // x^T: [P x Kg]
                    gemm_f32(og, kg, positions, {dyg, positions, 1}, {xg, 1, positions}, acc + gi * og * kg, kg, true);
                    continue;
                }
                for (int64_t oy0 = 0; oy0 < g.oh; oy0 += rows) {
                    const int64_t oy1 = std::min(g.oh, oy0 + rows), band = (oy1 - oy0) * g.ow;
                    im2col(g, xg, col, oy0, oy1);
                    if (transposed) {  // dy^T: [B x Og]
                        gemm_f32(kg, og, band, {col, band, 1}, {dyg + oy0 * g.ow, 1, positions}, acc + gi * og * kg, og,
                                 true);
                        continue;
                    }
                    // col^T: [B x Kg]
                    gemm_f32(og, kg, band, {dyg + oy0 * g.ow, positions, 1}, {col, 1, band}, acc + gi * og * kg, kg,
                             true);
                }
            }
        }
    });
    if (transposed) {
        add_transposed_partials(g, partial.data(), chunks, dw_floats, og * kg, og, dw);
        return;
    }
    for (int64_t c = 1; c < chunks; ++c) {
        const float *src = partial.data() + (c - 1) * dw_floats;
        for (int64_t i = 0; i < dw_floats; ++i) dw[i] += src[i];
    }
}

}  // namespace

tf_status run_conv2d(const tf_op_desc &op, tf_error *) {
    if (numel(op.outputs[0]) == 0) return TF_STATUS_OK;
    const F32Input x(op.inputs[0]), w(op.inputs[1]);
    F32Output y(op.outputs[0]);
    conv_forward(geometry(op), x.data(), w.data(), y.data(), {}, dense_f32(op.inputs[1]) ? &op.inputs[1] : nullptr);
    y.finish();
    return TF_STATUS_OK;
}

tf_status run_conv2d_act(const tf_op_desc &op, tf_error *) {
    if (numel(op.outputs[0]) == 0) return TF_STATUS_OK;
    const auto &p = tf_kit::params_of<tf_params_conv2d_act>(op);
    const F32Input x(op.inputs[0]), w(op.inputs[1]);
    std::optional<F32Input> bias, residual;
    if (!tf_kit::is_absent(op.inputs[2])) bias.emplace(op.inputs[2]);
    if (!tf_kit::is_absent(op.inputs[3])) residual.emplace(op.inputs[3]);
    F32Output y(op.outputs[0]);
    ConvEpilogue epilogue;
    epilogue.bias = bias ? bias->data() : nullptr;
    epilogue.residual = residual ? residual->data() : nullptr;
    epilogue.y = y.data();
    epilogue.activation = p.activation;
    epilogue.min = static_cast<float>(p.min);
    epilogue.max = static_cast<float>(p.max);
    conv_forward(geometry_with(op, tf_kit::conv_part(p)), x.data(), w.data(), y.data(), epilogue,
                 dense_f32(op.inputs[1]) ? &op.inputs[1] : nullptr);
    y.finish();
    return TF_STATUS_OK;
}
tf_status run_conv2d_grad_input(const tf_op_desc &op, tf_error *) {
    return run_dense_f32(op, geometry, conv_grad_input);
}
tf_status run_conv2d_grad_weight(const tf_op_desc &op, tf_error *) {
    return run_dense_f32(op, geometry, conv_grad_weight);
}

}  // namespace tf_cpu
