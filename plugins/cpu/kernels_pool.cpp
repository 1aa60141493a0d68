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
#include "kernels_nn.h"

#include <vector>

namespace tf_cpu {
namespace {

struct pool_geometry {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
    bool count_include_pad;
};

pool_geometry geometry(const tf_tensor_desc &x, const tf_tensor_desc &y, const tf_params_pool2d &p) {
    return {x.shape[0] * x.shape[1], x.shape[2], x.shape[3], y.shape[2], y.shape[3], p.kernel[0], p.kernel[1],
            p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.count_include_pad != 0};
}

// The part of a window that lies inside the input: rows [y0, y1), columns [x0, x1).
struct window {
    int64_t y0, y1, x0, x1;
};

inline window window_at(const pool_geometry &g, int64_t oy, int64_t ox) {
    const int64_t top = oy * g.sh - g.ph, left = ox * g.sw - g.pw;
    const int64_t y0 = std::max<int64_t>(top, 0), x0 = std::max<int64_t>(left, 0);
    return {y0, std::max(y0, std::min(top + g.kh, g.h)), x0, std::max(x0, std::min(left + g.kw, g.w))};
}

// The first maximum of every window of output row oy: best_at[ox] is its index in the plane
// (-1 for a window without input elements) and best[ox] its value (-inf then). Taps are visited
// in window order (row by row) for all windows of the row at once, so the windows' compare
// chains are independent; the selects are branch-free, since with real data "v > best" is a
// coin flip no predictor learns.
void row_argmax(const pool_geometry &g, const float *plane, int64_t oy, float *best, int64_t *best_at) {
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
                best[ox] = std::bit_cast<float>((std::bit_cast<uint32_t>(v) & bits) | (std::bit_cast<uint32_t>(b) & ~bits));
                best_at[ox] = ((row_at + ix) & take) | (best_at[ox] & ~take);
            }
        }
    }
}

double divisor_of(const pool_geometry &g, const window &win) {
    if (g.count_include_pad) return static_cast<double>(g.kh * g.kw);
    return static_cast<double>((win.y1 - win.y0) * (win.x1 - win.x0));
}

const tf_params_pool2d &params_of(const tf_op_desc &op) { return *static_cast<const tf_params_pool2d *>(op.params); }

}  // namespace

tf_status run_max_pool2d(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &xd = op.inputs[0], &yd = op.outputs[0];
    if (numel(yd) == 0) return TF_STATUS_OK;
    const pool_geometry g = geometry(xd, yd, params_of(op));
    const f32_input x(xd);
    f32_output y(yd);
    std::vector<int64_t> best_at(static_cast<size_t>(g.ow));
    for (int64_t pl = 0; pl < g.planes; ++pl) {
        const float *plane = x.data() + pl * g.h * g.w;
        float *out = y.data() + pl * g.oh * g.ow;
        for (int64_t oy = 0; oy < g.oh; ++oy) row_argmax(g, plane, oy, out + oy * g.ow, best_at.data());
    }
    y.finish();
    return TF_STATUS_OK;
}

tf_status run_max_pool2d_backward(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &dyd = op.inputs[0], &xd = op.inputs[1], &dxd = op.outputs[0];
    if (numel(dxd) == 0) return TF_STATUS_OK;
    const pool_geometry g = geometry(xd, dyd, params_of(op));
    const f32_input dy(dyd), x(xd);
    f32_output dx(dxd);
    std::fill(dx.data(), dx.data() + numel(dxd), 0.0f);
    std::vector<float> best(static_cast<size_t>(g.ow));
    std::vector<int64_t> best_at(static_cast<size_t>(g.ow));
    for (int64_t pl = 0; pl < g.planes; ++pl) {
        const float *plane = x.data() + pl * g.h * g.w;
        const float *grad = dy.data() + pl * g.oh * g.ow;
        float *out = dx.data() + pl * g.h * g.w;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
            row_argmax(g, plane, oy, best.data(), best_at.data());
            for (int64_t ox = 0; ox < g.ow; ++ox)
                if (best_at[ox] >= 0) out[best_at[ox]] += grad[oy * g.ow + ox];
        }
    }
    dx.finish();
    return TF_STATUS_OK;
}

tf_status run_avg_pool2d(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &xd = op.inputs[0], &yd = op.outputs[0];
    if (numel(yd) == 0) return TF_STATUS_OK;
    const pool_geometry g = geometry(xd, yd, params_of(op));
    const f32_input x(xd);
    f32_output y(yd);
    for (int64_t pl = 0; pl < g.planes; ++pl) {
        const float *plane = x.data() + pl * g.h * g.w;
        float *out = y.data() + pl * g.oh * g.ow;
        for (int64_t oy = 0; oy < g.oh; ++oy)
            for (int64_t ox = 0; ox < g.ow; ++ox) {
                const window win = window_at(g, oy, ox);
                double sum = 0;
                for (int64_t iy = win.y0; iy < win.y1; ++iy)
                    for (int64_t ix = win.x0; ix < win.x1; ++ix) sum += plane[iy * g.w + ix];
                out[oy * g.ow + ox] = static_cast<float>(sum / divisor_of(g, win));
            }
    }
    y.finish();
    return TF_STATUS_OK;
}

tf_status run_avg_pool2d_backward(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &dyd = op.inputs[0], &dxd = op.outputs[0];
    if (numel(dxd) == 0) return TF_STATUS_OK;
    const pool_geometry g = geometry(dxd, dyd, params_of(op));
    const f32_input dy(dyd);
    f32_output dx(dxd);
    std::fill(dx.data(), dx.data() + numel(dxd), 0.0f);
    for (int64_t pl = 0; pl < g.planes; ++pl) {
        const float *grad = dy.data() + pl * g.oh * g.ow;
        float *out = dx.data() + pl * g.h * g.w;
        for (int64_t oy = 0; oy < g.oh; ++oy)
            for (int64_t ox = 0; ox < g.ow; ++ox) {
                const window win = window_at(g, oy, ox);
                const auto share = static_cast<float>(grad[oy * g.ow + ox] / divisor_of(g, win));
                for (int64_t iy = win.y0; iy < win.y1; ++iy)
                    for (int64_t ix = win.x0; ix < win.x1; ++ix) out[iy * g.w + ix] += share;
            }
    }
    dx.finish();
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
