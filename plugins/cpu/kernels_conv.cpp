// conv2d and its gradients, one image and one group at a time, as GEMMs over an im2col column
// matrix (kernels_gemm.h):
//   forward      y[n, g]  = w[g] col(x[n, g])                      [Og x P] = [Og x Kg] [Kg x P]
//   grad_input   dx[n, g] = col2im(w[g]^T dy[n, g])                [Kg x P] = [Kg x Og] [Og x P]
//   grad_weight  dw[g]   += dy[n, g] col(x[n, g])^T, n = 0, 1, ... [Og x Kg] = [Og x P] [P x Kg]
// with Og = O / groups output channels, Kg = C / groups * KH * KW taps and P = OH * OW output
// positions. Row (c, kh, kw) of the column matrix holds, for every output position, the input
// element that tap reads (0 in the padding). The column matrix covers a band of output rows at
// a time, as many as fit in 16 MiB: all of them for common shapes.
//
// Every sum has a fixed order: the GEMM adds taps in (c, kh, kw) order, col2im adds into dx in
// (c, kh, kw, oh, ow) order, and grad_weight adds images in order within fixed chunks of images
// and the chunks in order. Images are spread over the thread pool (runtime.h); the thread count
// never changes a result. A 1x1 kernel with stride 1 and
// no padding skips the column matrix: the input already is one.
#include "kernels_gemm.h"
#include "kernels_nn.h"
#include "runtime.h"

#include <algorithm>
#include <new>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tf_cpu {
namespace {

// One convolution's sizes, from descriptors validate_own accepted.
struct conv_geometry {
    int64_t n, c, h, w;  // input [N, C, H, W]
    int64_t o, kh, kw;   // weight [O, C / groups, KH, KW]
    int64_t oh, ow;      // output [N, O, OH, OW]
    int64_t sh, sw, ph, pw, dh, dw, groups;

    int64_t c_group() const { return c / groups; }
    int64_t o_group() const { return o / groups; }
    int64_t taps() const { return c_group() * kh * kw; }  // Kg: rows of the column matrix
    int64_t positions() const { return oh * ow; }         // P: its columns
    bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

conv_geometry geometry(const tf_tensor_desc &x, const tf_tensor_desc &w, const tf_tensor_desc &y,
                       const tf_params_conv2d &p) {
    return {x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], w.shape[2], w.shape[3], y.shape[2], y.shape[3],
            p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups};
}

// The column matrix is built for bands of output rows small enough that it stays under
// k_column_floats (16 MiB): a large kernel over a padded input would otherwise need a column
// matrix many times the size of input and output (the op fuzzer asked for 13 GB). A constant,
// not TINYFIN_SCRATCH_BYTES, so that the band, and with it the order of the sums in the
// gradients, never depends on a setting.
constexpr int64_t k_column_floats = int64_t{1} << 22;

// Output rows per band: as many as fit, at least one.
int64_t band_rows(const conv_geometry &g) {
    const int64_t row_floats = std::max<int64_t>(1, g.taps() * g.ow);
    return std::clamp<int64_t>(k_column_floats / row_floats, 1, std::max<int64_t>(g.oh, 1));
}

// Floats of one band's column matrix (0 for pointwise convolutions, which need none);
// std::bad_alloc (OUT_OF_MEMORY at the ABI) when it cannot exist.
size_t column_floats(const conv_geometry &g) {
    if (g.pointwise()) return 0;
    size_t floats = 0;
    if (__builtin_mul_overflow(static_cast<size_t>(g.taps()), static_cast<size_t>(band_rows(g) * g.ow), &floats))
        throw std::bad_alloc();
    return floats;
}

// col [Kg x B] from one group's input planes x [C/groups, H, W], for the B = (oy1 - oy0) * OW
// output positions of output rows [oy0, oy1).
void im2col(const conv_geometry &g, const float *x, float *col, int64_t oy0, int64_t oy1) {
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
void col2im(const conv_geometry &g, const float *col, float *dx, int64_t oy0, int64_t oy1) {
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

const tf_params_conv2d &params_of(const tf_op_desc &op) { return *static_cast<const tf_params_conv2d *>(op.params); }

}  // namespace

tf_status run_conv2d(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &xd = op.inputs[0], &wd = op.inputs[1], &yd = op.outputs[0];
    if (numel(yd) == 0) return TF_STATUS_OK;
    const conv_geometry g = geometry(xd, wd, yd, params_of(op));
    const int64_t og = g.o_group(), kg = g.taps(), positions = g.positions(), cg = g.c_group();
    const f32_input x(xd), w(wd);
    f32_output y(yd);
    const size_t col_floats = column_floats(g);
    const int64_t rows = band_rows(g);
    // One image per task (its own column buffer and output); one image: threads inside the GEMM.
    parallel_for(g.n, [&](int64_t n) {
        float *col = col_floats ? scratch_floats(k_slot_col, col_floats) : nullptr;
        for (int64_t gi = 0; gi < g.groups; ++gi) {
            const float *xg = x.data() + (n * g.c + gi * cg) * g.h * g.w;
            float *yg = y.data() + (n * g.o + gi * og) * positions;
            if (g.pointwise()) {
                gemm_f32(og, positions, kg, {w.data() + gi * og * kg, kg, 1}, {xg, positions, 1}, yg,
                         positions, false);
                continue;
            }
            for (int64_t oy0 = 0; oy0 < g.oh; oy0 += rows) {
                const int64_t oy1 = std::min(g.oh, oy0 + rows), band = (oy1 - oy0) * g.ow;
                im2col(g, xg, col, oy0, oy1);
                const f32_matrix wm{w.data() + gi * og * kg, kg, 1};
                if (kg < 64 || gemm_f32_tile_fill(band, og) < 1.08 * gemm_f32_tile_fill(og, band)) {
                    gemm_f32(og, band, kg, wm, {col, band, 1}, yg + oy0 * g.ow, positions, false);
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
            }
        }
    });
    y.finish();
    return TF_STATUS_OK;
}

tf_status run_conv2d_grad_input(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &dyd = op.inputs[0], &wd = op.inputs[1], &dxd = op.outputs[0];
    if (numel(dxd) == 0) return TF_STATUS_OK;
    const conv_geometry g = geometry(dxd, wd, dyd, params_of(op));
    const int64_t og = g.o_group(), kg = g.taps(), positions = g.positions(), cg = g.c_group();
    const f32_input dy(dyd), w(wd);
    f32_output dx(dxd);
    const size_t col_floats = column_floats(g);
    const int64_t rows = band_rows(g);
    parallel_for(g.n, [&](int64_t n) {
        float *col = col_floats ? scratch_floats(k_slot_col, col_floats) : nullptr;
        if (!g.pointwise()) std::fill(dx.data() + n * g.c * g.h * g.w, dx.data() + (n + 1) * g.c * g.h * g.w, 0.0f);
        for (int64_t gi = 0; gi < g.groups; ++gi) {
            const f32_matrix wt = {w.data() + gi * og * kg, 1, kg};  // w[g]^T: [Kg x Og]
            const f32_matrix dyg = {dy.data() + (n * g.o + gi * og) * positions, positions, 1};
            float *dxg = dx.data() + (n * g.c + gi * cg) * g.h * g.w;
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
    dx.finish();
    return TF_STATUS_OK;
}

// Images are summed in fixed chunks of k_weight_chunk: each chunk accumulates its images in order
// into its own partial gradient, then the partials are added in chunk order. The chunk size is a
// constant, so the result does not depend on the thread count.
constexpr int64_t k_weight_chunk = 8;

tf_status run_conv2d_grad_weight(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &dyd = op.inputs[0], &xd = op.inputs[1], &dwd = op.outputs[0];
    if (numel(dwd) == 0) return TF_STATUS_OK;
    const conv_geometry g = geometry(xd, dwd, dyd, params_of(op));
    const int64_t og = g.o_group(), kg = g.taps(), positions = g.positions(), cg = g.c_group();
    const f32_input dy(dyd), x(xd);
    f32_output dw(dwd);
    const size_t col_floats = column_floats(g);
    const int64_t rows = band_rows(g);
    const int64_t dw_floats = numel(dwd);
    const int64_t chunks = std::max<int64_t>(1, (g.n + k_weight_chunk - 1) / k_weight_chunk);  // 1: zeros for N = 0
    // Each chunk's gradient as dw^T [Kg x Og] per group (= col dy^T) when that fills the GEMM's
    // tiles clearly better (288 x 64 for the example's second conv, against 64 x 288 in 89% of
    // 12 x 32 tiles): the same products summed in the same order, so the same bits. The
    // transposed partials are then added in chunk order while transposing into dw.
    const bool transposed = !g.pointwise() && gemm_f32_tile_fill(kg, og) >= 1.08 * gemm_f32_tile_fill(og, kg);
    const int64_t own = transposed ? chunks : chunks - 1;  // partials not written into dw itself
    std::vector<float> partial(static_cast<size_t>(own * dw_floats));
    parallel_for(chunks, [&](int64_t chunk) {
        float *acc = transposed ? partial.data() + chunk * dw_floats
                     : chunk == 0 ? dw.data()
                                  : partial.data() + (chunk - 1) * dw_floats;
        std::fill(acc, acc + dw_floats, 0.0f);
        float *col = col_floats ? scratch_floats(k_slot_col, col_floats) : nullptr;
        for (int64_t n = chunk * k_weight_chunk; n < std::min(g.n, (chunk + 1) * k_weight_chunk); ++n) {
            for (int64_t gi = 0; gi < g.groups; ++gi) {
                const float *xg = x.data() + (n * g.c + gi * cg) * g.h * g.w;
                const float *dyg = dy.data() + (n * g.o + gi * og) * positions;
                if (g.pointwise()) {  // x^T: [P x Kg]
                    gemm_f32(og, kg, positions, {dyg, positions, 1}, {xg, 1, positions}, acc + gi * og * kg,
                             kg, true);
                    continue;
                }
                for (int64_t oy0 = 0; oy0 < g.oh; oy0 += rows) {
                    const int64_t oy1 = std::min(g.oh, oy0 + rows), band = (oy1 - oy0) * g.ow;
                    im2col(g, xg, col, oy0, oy1);
                    if (transposed) {  // dy^T: [B x Og]
                        gemm_f32(kg, og, band, {col, band, 1}, {dyg + oy0 * g.ow, 1, positions},
                                 acc + gi * og * kg, og, true);
                        continue;
                    }
                    // col^T: [B x Kg]
                    gemm_f32(og, kg, band, {dyg + oy0 * g.ow, positions, 1}, {col, 1, band},
                             acc + gi * og * kg, kg, true);
                }
            }
        }
    });
    float *out = dw.data();
    if (transposed) {
        // dw[g][o][t] = the chunks' dw^T[g][t][o], added in chunk order.
        for (int64_t gi = 0; gi < g.groups; ++gi)
            for (int64_t o = 0; o < og; ++o)
                for (int64_t t = 0; t < kg; ++t) {
                    const int64_t at = gi * og * kg + t * og + o;
                    float v = partial[static_cast<size_t>(at)];
                    for (int64_t c = 1; c < chunks; ++c) v += partial[static_cast<size_t>(c * dw_floats + at)];
                    out[gi * og * kg + o * kg + t] = v;
                }
        dw.finish();
        return TF_STATUS_OK;
    }
    for (int64_t c = 1; c < chunks; ++c) {
        const float *src = partial.data() + (c - 1) * dw_floats;
        for (int64_t i = 0; i < dw_floats; ++i) out[i] += src[i];
    }
    dw.finish();
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
