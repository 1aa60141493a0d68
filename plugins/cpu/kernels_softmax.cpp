// softmax, log_softmax and cross_entropy: the max-shifted (stable) exponential sums.
//
//  - softmax(x)_i = exp(x_i - m) / sum_j exp(x_j - m) and log_softmax(x)_i = (x_i - m) - log(sum)
//    with m the line's maximum. A line whose maximum is -inf (all -inf) or +inf, or that holds a
//    NaN, gives NaN, as in torch. exp is taken in f32, sums run in double.
//  - Lines along a unit-stride last axis (the common case) take the vectorized path of
//    vector_math.hpp: its exp, double sums in fixed lanes, one reciprocal per line, rows split over
//    the thread pool. Other axes walk the lines side by side in index order.
//  - cross_entropy row loss = log(sum_j exp(x_j - m)) + m - x_label; rows whose label equals
//    ignore_index add 0 (and give 0 with reduction none) and are not counted by mean, so mean over
//    no counted row is 0 / 0 = NaN, as in torch. Row losses are summed in double in row order.
#include "kernels_nn.hpp"
#include "vector_math.hpp"

#include <cinttypes>

namespace tf_cpu {
namespace {

[[gnu::always_inline]] inline void softmax_rows_body(const float *x, float *y, int64_t len, int64_t rows, bool log) {
    for (int64_t row = 0; row < rows; ++row, x += len, y += len) {
        const float m = vec::max(x, len);
        // Separate passes over the row (in L1): each one a loop GCC vectorizes. log_softmax
        // writes its exponentials to y only to sum them.
        for (int64_t i = 0; i < len; ++i) y[i] = vec::exp_nonpositive(x[i] - m);
        const double sum = vec::sum(y, len);
        if (log) {
            const float lse = static_cast<float>(std::log(sum));
            for (int64_t k = 0; k < len; ++k) y[k] = (x[k] - m) - lse;
        } else {
            const float inv = static_cast<float>(1.0 / sum);
            for (int64_t k = 0; k < len; ++k) y[k] *= inv;
        }
    }
}

TF_CPU_ISA_DISPATCH(softmax_rows, (const float *x, float *y, int64_t len, int64_t rows, bool log),
                    (x, y, len, rows, log))

}  // namespace

tf_status run_softmax(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &xd = op.inputs[0], &yd = op.outputs[0];
    if (numel(yd) == 0) return TF_STATUS_OK;
    const int axis = static_cast<const tf_params_axis *>(op.params)->axis;
    const bool log = op.op == TF_OP_LOG_SOFTMAX;
    // The input as [outer, len, inner]: each (outer, inner) pair is one line along the axis, and
    // the inner lines of one outer index are processed side by side (unit stride).
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= xd.shape[i];
    for (int i = axis + 1; i < xd.rank; ++i) inner *= xd.shape[i];
    const int64_t len = xd.shape[axis];
    const F32Input x(xd);
    F32Output y(yd);
    if (inner == 1) {
        const int64_t tasks = split_count(outer * len, int64_t{1} << 15);
        parallel_for(tasks, [&](int64_t t) {
            const int64_t lo = outer * t / tasks, hi = outer * (t + 1) / tasks;
            softmax_rows(x.data() + lo * len, y.data() + lo * len, len, hi - lo, log);
        });
        y.finish();
        return TF_STATUS_OK;
    }
    std::vector<float> max(static_cast<size_t>(inner));
    std::vector<double> sum(static_cast<size_t>(inner));
    for (int64_t o = 0; o < outer; ++o) {
        const float *xs = x.data() + o * len * inner;
        float *ys = y.data() + o * len * inner;
        std::fill(max.begin(), max.end(), -INFINITY);
        std::fill(sum.begin(), sum.end(), 0.0);
        for (int64_t l = 0; l < len; ++l)
            for (int64_t i = 0; i < inner; ++i) max[i] = std::max(max[i], xs[l * inner + i]);
        for (int64_t l = 0; l < len; ++l)
            for (int64_t i = 0; i < inner; ++i) {
                const float e = std::exp(xs[l * inner + i] - max[i]);
                if (!log) ys[l * inner + i] = e;
                sum[i] += e;
            }
        if (log) {
            for (int64_t l = 0; l < len; ++l)
                for (int64_t i = 0; i < inner; ++i)
                    ys[l * inner + i] =
                        static_cast<float>(static_cast<double>(xs[l * inner + i] - max[i]) - std::log(sum[i]));
        } else {
            for (int64_t l = 0; l < len; ++l)
                for (int64_t i = 0; i < inner; ++i) ys[l * inner + i] = static_cast<float>(ys[l * inner + i] / sum[i]);
        }
    }
    y.finish();
    return TF_STATUS_OK;
}

tf_status run_cross_entropy(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &logits = op.inputs[0], &labels_d = op.inputs[1], &out = op.outputs[0];
    const auto &p = *static_cast<const tf_params_cross_entropy *>(op.params);
    const int64_t rows = logits.shape[0], classes = logits.shape[1];
    const std::vector<int64_t> labels = load_indices(labels_d);
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t label = labels[static_cast<size_t>(r)];
        if (label != p.ignore_index && (label < 0 || label >= classes))
            return fail(err, TF_STATUS_INVALID_ARGUMENT,
                        "cross_entropy: label %" PRId64 " of row %" PRId64 " is out of range [0, %" PRId64
                        ") (ignore_index %" PRId64 ")",
                        label, r, classes, p.ignore_index);
    }
    const F32Input x(logits);
    F32Output loss(out);
    double total = 0;
    int64_t counted = 0;
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t label = labels[static_cast<size_t>(r)];
        double row_loss = 0;
        if (label != p.ignore_index) {
            const float *xs = x.data() + r * classes;
            float max = -INFINITY;
            for (int64_t c = 0; c < classes; ++c) max = std::max(max, xs[c]);
            double sum = 0;
            for (int64_t c = 0; c < classes; ++c) sum += std::exp(xs[c] - max);
            row_loss = std::log(sum) + static_cast<double>(max) - static_cast<double>(xs[label]);
            total += row_loss;
            ++counted;
        }
        if (p.reduction == TF_REDUCTION_NONE) loss.data()[r] = static_cast<float>(row_loss);
    }
    if (p.reduction == TF_REDUCTION_SUM) loss.data()[0] = static_cast<float>(total);
    if (p.reduction == TF_REDUCTION_MEAN) loss.data()[0] = static_cast<float>(total / static_cast<double>(counted));
    loss.finish();
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
