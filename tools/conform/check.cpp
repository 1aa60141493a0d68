#include "check.hpp"

#include <cmath>
#include <cstdio>

#include "runner.hpp"

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

// matmul_q may round x to 8-bit blocks (ops.def): a relative error per product of up to half a
// step of amax / 127, about 0.4% RMS for the uniform inputs of the cases. Backends that multiply
// the f32 activations differ from the cpu plugin's kernel (which rounds them) by that much.
constexpr double k_matmul_q_tolerance = 1e-4;  // relative RMS error 1%

double tolerance(const Case &c, int32_t dtype) {
    if (c.op == TF_OP_MATMUL_Q && dtype != TF_DTYPE_BF16) return k_matmul_q_tolerance;
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

double unit_roundoff(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F32: return 0x1p-24;
    case TF_DTYPE_F16: return 0x1p-11;
    case TF_DTYPE_BF16: return 0x1p-8;
    default: return 0;
    }
}

double element_bound(int32_t dtype, double exact, double scale, double k) {
    // Below the smallest normal a backend may flush to zero (GPU f32, vdpbf16ps); f16 keeps its
    // subnormals (half its smallest one is the rounding there).
    const double floor = dtype == TF_DTYPE_F16 ? 0x1p-25 : 0x1p-126;
    return unit_roundoff(dtype) * std::abs(exact) + 0x1p-24 * k * std::abs(scale) + floor;
}

Verdict compare_reference(int32_t dtype, const std::vector<double> &got, const RefOutput &want) {
    Verdict v;
    v.tolerance = 1;
    if (got.size() != want.value.size()) {
        v.pass = false;
        v.detail = "element counts differ";
        return v;
    }
    const bool is_exact = unit_roundoff(dtype) == 0;
    std::size_t bad = 0, first = 0;
    double first_bound = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], w = want.value[i], rounded = round_to(w, dtype);
        bool ok;
        double bound = 0;
        if (is_exact)
            ok = g == rounded;
        else if (std::isnan(w) || std::isnan(g))
            ok = std::isnan(w) && std::isnan(g);
        else if (std::isinf(rounded) || std::isinf(g))
            ok = g == rounded;
        else {
            bound = element_bound(dtype, w, want.scale[i], want.k);
            const double ratio = std::abs(g - w) / bound;
            ok = ratio <= 1;
            v.nmse = std::max(v.nmse, ratio);
        }
        if (!ok && bad++ == 0) first = i, first_bound = bound;
    }
    if (!bad) return v;
    v.pass = false;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%zu of %zu element(s) off the float64 reference; first: element %zu: got %.9g, exact %.9g", bad,
                  got.size(), first, got[first], want.value[first]);
    v.detail = buf;
    if (first_bound > 0) {
        std::snprintf(buf, sizeof buf, ", error %.3g > bound %.3g (scale %.3g, k %g)",
                      std::abs(got[first] - want.value[first]), first_bound, want.scale[first], want.k);
        v.detail += buf;
    }
    return v;
}

}  // namespace conform
