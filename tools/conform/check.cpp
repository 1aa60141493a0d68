#include "check.hpp"

#include <cmath>
#include <cstdio>

namespace conform {

namespace {

// Ops that sum many products or normalise: their rounding grows with the reduction length.
bool accumulates(tf_op op) {
    switch (op) {
    case TF_OP_SUM:
    case TF_OP_MEAN:
    case TF_OP_VAR:
    case TF_OP_MATMUL:
    case TF_OP_CONV2D:
    case TF_OP_CONV2D_GRAD_INPUT:
    case TF_OP_CONV2D_GRAD_WEIGHT:
    case TF_OP_AVG_POOL2D:
    case TF_OP_AVG_POOL2D_BACKWARD:
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX:
    case TF_OP_LAYER_NORM:
    case TF_OP_LAYER_NORM_BACKWARD:
    case TF_OP_RMS_NORM:
    case TF_OP_ATTENTION:
    case TF_OP_ATTENTION_BACKWARD:
    case TF_OP_EMBEDDING_BACKWARD:
    case TF_OP_CROSS_ENTROPY: return true;
    default: return false;
    }
}

std::string element_text(std::size_t i, double got, double want) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "element %zu: got %.9g, want %.9g", i, got, want);
    return buf;
}

}  // namespace

// The tolerances, the one place they are written (docs/numerics.md quotes this table): the
// largest normalised mean squared error per output dtype and op family. Elementwise ops round
// once from an f32 (or double) result, so a few units of the format's epsilon squared; ops that
// accumulate (accumulates() above) add the f32 summation error of the reference and the backend,
// which grows with the reduction length: ten times that.
struct Tolerance {
    int32_t dtype;
    double elementwise;  // NMSE; relative RMS error is its square root
    double accumulating;
};
constexpr Tolerance k_tolerances[] = {
    {TF_DTYPE_F32, 1e-7, 1e-6},  // relative RMS error ~3e-4 / 1e-3
    {TF_DTYPE_F16, 1e-5, 1e-4},  // a few units of f16's 2^-11 = 4.9e-4
    {TF_DTYPE_BF16, 2e-4, 2e-3},  // a few units of bf16's 2^-8 = 3.9e-3
};

double tolerance(const Case &c, int32_t dtype) {
    for (const Tolerance &t : k_tolerances)
        if (t.dtype == dtype) return accumulates(c.op) ? t.accumulating : t.elementwise;
    return 0;  // integer and bool outputs: exact
}

Verdict compare(const Case &c, std::size_t output, const std::vector<double> &got, const std::vector<double> &want) {
    Verdict v;
    v.tolerance = tolerance(c, c.outputs[output].dtype);
    if (got.size() != want.size()) {
        v.pass = false;
        v.detail = "element counts differ";
        return v;
    }
    double err = 0, norm = 0;
    std::size_t mismatches = 0, first = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], w = want[i];
        bool bad = false;
        if (v.tolerance == 0)
            bad = g != w;
        else if (std::isnan(w) || std::isnan(g))
            bad = std::isnan(w) != std::isnan(g);
        else if (std::isinf(w) || std::isinf(g))
            bad = g != w;
        else {
            err += (g - w) * (g - w);
            norm += w * w;
        }
        if (bad && mismatches++ == 0) first = i;
    }
    if (mismatches) {
        v.pass = false;
        v.detail = std::to_string(mismatches) + " element(s) differ exactly or in NaN/Inf; first " +
                   element_text(first, got[first], want[first]);
        return v;
    }
    v.nmse = norm > 0 ? err / norm : err;
    if (v.nmse <= v.tolerance) return v;
    v.pass = false;
    double worst = -1;
    for (std::size_t i = 0; i < got.size(); ++i)
        if (std::isfinite(want[i]) && std::abs(got[i] - want[i]) > worst) worst = std::abs(got[i] - want[i]), first = i;
    char buf[64];
    std::snprintf(buf, sizeof buf, "nmse %.3g > %.3g; worst ", v.nmse, v.tolerance);
    v.detail = buf + element_text(first, got[first], want[first]);
    return v;
}

}  // namespace conform
