// layer_norm, its backward, rms_norm and rope: ops that work row by row on the last axes.
//
//  - layer_norm: y = (x - mean) / sqrt(var + eps) * weight + bias over each row of the last
//    n_axes axes, var biased (divided by the row length), two-pass; statistics in double.
//  - layer_norm_backward: x, weight, dy -> dx, dweight, dbias, the row statistics recomputed by
//    layer_norm's code; with xhat = (x - mean) rstd and g = dy weight,
//    dx = rstd (g - mean(g) - xhat mean(g xhat)), all in double, rounded once. dweight and dbias
//    sum dy xhat and dy over the rows: each block of rows (a fixed split of the rows, not of the
//    threads) sums its own in double, and the blocks are added in order, so the result does not
//    depend on the thread count. One pass over the rows instead of the ~14 ops the core composes
//    it from elsewhere.
//  - rms_norm: y = x / sqrt(mean(x^2) + eps) * weight; statistics in double.
//    Both sum in the fixed double lanes of vector_math.hpp, compute each output in double and
//    split rows over the thread pool (each row by the same code: thread-count invariant).
//  - rope on [..., T, D]: pair i (i < D/2) is (2i, 2i+1) when interleaved, else (i, i + D/2), and
//    at position t (the index along axis -2) it is rotated by
//    angle = (position_offset + t) * theta^(-2i/D), or by -angle with inverse. Angles, cos, sin
//    and the rotation are computed in double.
#include "kernels_nn.hpp"
#include "vector_math.hpp"

#include <algorithm>
#include <optional>

namespace tf_cpu {
namespace {

// The rows of x [..., *S] when S is its last n_axes axes: their count and length.
void rows_of(const tf_tensor_desc &x, int n_axes, int64_t *rows, int64_t *len) {
    *rows = 1;
    *len = 1;
    for (int i = 0; i < x.rank; ++i) (i < x.rank - n_axes ? *rows : *len) *= x.shape[i];
}

// A row's mean and 1 / sqrt(variance + eps), in double: layer_norm's forward and its backward
// (which recomputes them) must agree to the bit.
struct RowStats {
    double mean, rstd;
};
[[gnu::always_inline]] inline RowStats row_stats(const float *x, int64_t len, double eps) {
    const auto n = static_cast<double>(len);
    const double mean = vec::sum(x, len) / n;
    const double var = vec::lane_sum(len,
                                     [&](int64_t i) {
                                         const double d = static_cast<double>(x[i]) - mean;
                                         return d * d;
                                     }) /
                       n;
    return {mean, 1.0 / std::sqrt(var + eps)};
}

// b == nullptr: rms_norm (no centring, no bias); else layer_norm.
[[gnu::always_inline]] inline void norm_rows_body(const float *x, const float *w, const float *b, float *y, int64_t len,
                                                  int64_t rows, double eps) {
    const auto n = static_cast<double>(len);
    for (int64_t r = 0; r < rows; ++r, x += len, y += len) {
        if (b) {
            const RowStats stats = row_stats(x, len, eps);
            // The output in f32, twice the lanes of double: the mean as a sum of two floats, so
            // that x - mean keeps its relative accuracy however large the mean is against the
            // spread (x - hi is exact near the mean, then one rounding), then one rounding per step.
            const auto hi = static_cast<float>(stats.mean);
            const auto lo = static_cast<float>(stats.mean - static_cast<double>(hi));
            const auto rstd = static_cast<float>(stats.rstd);
            for (int64_t i = 0; i < len; ++i) y[i] = ((x[i] - hi) - lo) * rstd * w[i] + b[i];
        } else {
            const double squares = vec::lane_sum(len, [&](int64_t i) { return static_cast<double>(x[i]) * x[i]; });
            const double rms_inv = 1.0 / std::sqrt(squares / n + eps);
            for (int64_t i = 0; i < len; ++i)
                y[i] = static_cast<float>(static_cast<double>(x[i]) * rms_inv * static_cast<double>(w[i]));
        }
    }
}
TF_CPU_ISA_DISPATCH(norm_rows,
                    (const float *x, const float *w, const float *b, float *y, int64_t len, int64_t rows, double eps),
                    (x, w, b, y, len, rows, eps))

// Rows of x normalised into y, rows split over the thread pool.
tf_status run_norm(const tf_op_desc &op, bool centre) {
    const tf_tensor_desc &xd = op.inputs[0], &yd = op.outputs[0];
    if (numel(yd) == 0) return TF_STATUS_OK;
    const auto &p = *static_cast<const tf_params_norm *>(op.params);
    int64_t rows = 0, len = 0;
    rows_of(xd, p.n_axes, &rows, &len);
    const F32Input x(xd), weight(op.inputs[1]);
    const std::optional<F32Input> bias = centre ? std::optional<F32Input>(op.inputs[2]) : std::nullopt;
    F32Output y(yd);
    const float *b = bias ? bias->data() : nullptr;
    // 4096 elements a task (~8 us): a transformer's [1, 128, 64] norm is worth two threads.
    const int64_t tasks = std::min(rows, split_count(rows * len, int64_t{1} << 12));
    parallel_for(tasks, [&](int64_t t) {
        const int64_t lo = rows * t / tasks, hi = rows * (t + 1) / tasks;
        norm_rows(x.data() + lo * len, weight.data(), b, y.data() + lo * len, len, hi - lo, p.eps);
    });
    y.finish();
    return TF_STATUS_OK;
}

// Rows [0, rows) of layer_norm's backward: dx written, dy xhat and dy added into dw and db.
[[gnu::always_inline]] inline void norm_backward_rows_body(const float *x, const float *w, const float *dy, float *dx,
                                                           double *dw, double *db, int64_t len, int64_t rows,
                                                           double eps) {
    const auto n = static_cast<double>(len);
    for (int64_t r = 0; r < rows; ++r, x += len, dy += len, dx += len) {
        const RowStats stats = row_stats(x, len, eps);
        const double mean = stats.mean, rstd = stats.rstd;
        const double g_mean =
            vec::lane_sum(len, [&](int64_t i) { return static_cast<double>(dy[i]) * static_cast<double>(w[i]); }) / n;
        const double gx_mean = vec::lane_sum(len,
                                             [&](int64_t i) {
                                                 return static_cast<double>(dy[i]) * static_cast<double>(w[i]) *
                                                        ((static_cast<double>(x[i]) - mean) * rstd);
                                             }) /
                               n;
        for (int64_t i = 0; i < len; ++i) {
            const double xhat = (static_cast<double>(x[i]) - mean) * rstd;
            const double d = static_cast<double>(dy[i]);
            dx[i] = static_cast<float>(rstd * (d * static_cast<double>(w[i]) - g_mean - xhat * gx_mean));
            dw[i] += d * xhat;
            db[i] += d;
        }
    }
}
TF_CPU_ISA_DISPATCH(norm_backward_rows,
                    (const float *x, const float *w, const float *dy, float *dx, double *dw, double *db, int64_t len,
                     int64_t rows, double eps),
                    (x, w, dy, dx, dw, db, len, rows, eps))

}  // namespace

tf_status run_layer_norm_backward(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &xd = op.inputs[0];
    const auto &p = *static_cast<const tf_params_norm *>(op.params);
    int64_t rows = 0, len = 0;
    rows_of(xd, p.n_axes, &rows, &len);
    F32Output dx(op.outputs[0]), dw(op.outputs[1]), db(op.outputs[2]);
    if (len == 0) return TF_STATUS_OK;
    // Blocks of at least 2^14 elements, at most 64 of them (the partial sums' memory), fixed by
    // the shape alone.
    const int64_t block = std::max<int64_t>({1, ((int64_t{1} << 14) + len - 1) / len, (rows + 63) / 64});
    const int64_t blocks = (rows + block - 1) / block;
    std::vector<double> partial(static_cast<size_t>(std::max<int64_t>(blocks, 1) * 2 * len), 0.0);
    if (rows > 0) {
        const F32Input x(xd), weight(op.inputs[1]), dy(op.inputs[2]);
        parallel_for(blocks, [&](int64_t t) {
            const int64_t lo = t * block, hi = std::min(rows, lo + block);
            double *sums = partial.data() + t * 2 * len;
            norm_backward_rows(x.data() + lo * len, weight.data(), dy.data() + lo * len, dx.data() + lo * len, sums,
                               sums + len, len, hi - lo, p.eps);
        });
    }
    for (int64_t t = 1; t < blocks; ++t) {
        const double *sums = partial.data() + t * 2 * len;
        for (int64_t i = 0; i < 2 * len; ++i) partial[static_cast<size_t>(i)] += sums[i];
    }
    for (int64_t i = 0; i < len; ++i) {
        dw.data()[i] = static_cast<float>(partial[static_cast<size_t>(i)]);
        db.data()[i] = static_cast<float>(partial[static_cast<size_t>(len + i)]);
    }
    dx.finish();
    dw.finish();
    db.finish();
    return TF_STATUS_OK;
}

tf_status run_layer_norm(const tf_op_desc &op, tf_error *) { return run_norm(op, true); }

tf_status run_rms_norm(const tf_op_desc &op, tf_error *) { return run_norm(op, false); }

tf_status run_rope(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &xd = op.inputs[0], &yd = op.outputs[0];
    if (numel(yd) == 0) return TF_STATUS_OK;
    const auto &p = *static_cast<const tf_params_rope *>(op.params);
    const int64_t t_len = xd.shape[xd.rank - 2], d = xd.shape[xd.rank - 1], half = d / 2;
    const int64_t batches = numel(xd) / (t_len * d);
    // cos and sin of every (t, i), shared by all batches.
    std::vector<double> cos_t(static_cast<size_t>(t_len * half)), sin_t(cos_t.size());
    for (int64_t i = 0; i < half; ++i) {
        const double freq = std::pow(p.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
        for (int64_t t = 0; t < t_len; ++t) {
            const double angle = (static_cast<double>(p.position_offset) + static_cast<double>(t)) * freq;
            cos_t[static_cast<size_t>(t * half + i)] = std::cos(angle);
            sin_t[static_cast<size_t>(t * half + i)] = p.inverse ? -std::sin(angle) : std::sin(angle);
        }
    }
    // Element offsets of pair i's two members in a row.
    const int64_t first_step = p.interleaved ? 2 : 1, second_at = p.interleaved ? 1 : half;
    const F32Input x(xd);
    F32Output y(yd);
    for (int64_t b = 0; b < batches; ++b) {
        for (int64_t t = 0; t < t_len; ++t) {
            const float *xs = x.data() + (b * t_len + t) * d;
            float *ys = y.data() + (b * t_len + t) * d;
            for (int64_t i = 0; i < half; ++i) {
                const int64_t j0 = i * first_step, j1 = j0 + second_at;
                const double c = cos_t[static_cast<size_t>(t * half + i)], s = sin_t[static_cast<size_t>(t * half + i)];
                const double x0 = xs[j0], x1 = xs[j1];
                ys[j0] = static_cast<float>(x0 * c - x1 * s);
                ys[j1] = static_cast<float>(x0 * s + x1 * c);
            }
        }
    }
    y.finish();
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
