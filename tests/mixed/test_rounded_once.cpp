// f16/bf16 results that sum products are rounded once (issue 31): conv2d and linear with a bias,
// the gradients of broadcast matmul, linear under autocast with f32 master weights, conv2d's
// weight and bias gradients, rms_norm's weight gradient, embedding_backward and attention's
// gradients for broadcast keys and values. Each against a float64 evaluation of the definition
// on the same (bf16-rounded) inputs, in plain C++ here:
//   - every element within docs/numerics.md's bound for a once-rounded f32 sum of k terms,
//     |got - exact| <= 2^-8 |exact| + k 2^-23 sum|terms| (2^-11 for f16);
//   - at least 99% of the elements equal to the exact value rounded once (what a correctly
//     accumulated f32 sum gives but where it lies within f32 error of a rounding boundary).
// Rounded twice (a bf16 product, then a bf16 sum), the first fails by orders of magnitude where
// terms cancel and the second holds for about 72% of conv2d's elements.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

const Device cpu{"cpu", 0};

// Round to nearest even with `bits` significand bits (f16: 11, emin -14; bf16: 8, emin -126),
// by double arithmetic only.
double round_format(double x, int bits, int emin) {
    if (x == 0 || !std::isfinite(x)) return x;
    int e = 0;
    std::frexp(x, &e);
    const double quantum = std::ldexp(1.0, std::max(e - 1, emin) - (bits - 1));
    return std::nearbyint(x / quantum) * quantum;
}

struct Format {
    DType dtype;
    int bits, emin;
    double unit;  // the relative error of one correct rounding: 2^-(bits)
};
const Format k_bf16{DType::bf16, 8, -126, 0x1p-8};
const Format k_f16{DType::f16, 11, -14, 0x1p-11};

// Random values already in the format (so the inputs are what the op sees), as doubles.
std::vector<double> random_in(const Format &f, size_t n, uint32_t seed, double scale = 1.0) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> d(0.0, scale);
    std::vector<double> v(n);
    for (double &x : v) x = round_format(d(rng), f.bits, f.emin);
    return v;
}

Tensor tensor_of(const std::vector<double> &v, const Shape &shape, DType dtype) {
    std::vector<float> f(v.begin(), v.end());
    return from_vector(f, shape, cpu).to(dtype);  // exact: every value is in the format
}

std::vector<double> values_of(const Tensor &t) {
    std::vector<float> f = t.to(DType::f32).to_vector<float>();
    return {f.begin(), f.end()};
}

// exact[i] and the sum of |terms| behind it, for k terms each.
struct Exact {
    std::vector<double> value, magnitude;
    double terms = 0;
};

// Checks got against exact; returns the share of elements equal to the once-rounded value.
double check_rounded_once(const char *what, const Format &f, const std::vector<double> &got, const Exact &want) {
    REQUIRE(got.size() == want.value.size());
    size_t same = 0, worst = 0;
    double worst_ratio = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double exact = want.value[i];
        if (got[i] == round_format(exact, f.bits, f.emin)) ++same;
        const double bound = f.unit * std::fabs(exact) + want.terms * 0x1p-23 * want.magnitude[i] +
                             std::ldexp(1.0, f.emin - f.bits);  // half the format's smallest spacing
        const double ratio = std::fabs(got[i] - exact) / bound;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    }
    const double share = static_cast<double>(same) / static_cast<double>(got.size());
    char line[300];
    std::snprintf(line, sizeof line,
                  "%s: %zu elements, %.2f%% equal to the exact value rounded once; worst error %.3g of the bound "
                  "(element %zu: %.9g, exact %.9g)",
                  what, got.size(), 100 * share, worst_ratio, worst, got[worst], want.value[worst]);
    MESSAGE(line);
    CHECK(worst_ratio <= 1.0);
    CHECK(share >= 0.99);
    return share;
}

// conv2d, stride 1, padding pad, groups 1: x [n, c, h, w], w [o, c, kh, kw] (+ bias [o]).
struct Conv {
    int64_t n, c, h, w, o, kh, kw, pad;
    int64_t oh() const { return h + 2 * pad - kh + 1; }
    int64_t ow() const { return w + 2 * pad - kw + 1; }
    // x's element feeding output (i, j) through tap (p, q), or nothing in the padding.
    const double *tap(const std::vector<double> &x, int64_t b, int64_t ch, int64_t i, int64_t j, int64_t p,
                      int64_t q) const {
        const int64_t r = i + p - pad, s = j + q - pad;
        if (r < 0 || r >= h || s < 0 || s >= w) return nullptr;
        return &x[((b * c + ch) * h + r) * w + s];
    }
    Exact forward(const std::vector<double> &x, const std::vector<double> &wt, const std::vector<double> &bias) const {
        Exact e;
        e.terms = static_cast<double>(c * kh * kw + 1);
        for (int64_t b = 0; b < n; ++b)
            for (int64_t oc = 0; oc < o; ++oc)
                for (int64_t i = 0; i < oh(); ++i)
                    for (int64_t j = 0; j < ow(); ++j) {
                        double sum = bias[oc], mag = std::fabs(bias[oc]);
                        for (int64_t ch = 0; ch < c; ++ch)
                            for (int64_t p = 0; p < kh; ++p)
                                for (int64_t q = 0; q < kw; ++q)
                                    if (const double *v = tap(x, b, ch, i, j, p, q)) {
                                        const double t = *v * wt[((oc * c + ch) * kh + p) * kw + q];
                                        sum += t, mag += std::fabs(t);
                                    }
                        e.value.push_back(sum);
                        e.magnitude.push_back(mag);
                    }
        return e;
    }
    Exact grad_weight(const std::vector<double> &x, const std::vector<double> &g) const {
        Exact e;
        e.terms = static_cast<double>(n * oh() * ow());
        for (int64_t oc = 0; oc < o; ++oc)
            for (int64_t ch = 0; ch < c; ++ch)
                for (int64_t p = 0; p < kh; ++p)
                    for (int64_t q = 0; q < kw; ++q) {
                        double sum = 0, mag = 0;
                        for (int64_t b = 0; b < n; ++b)
                            for (int64_t i = 0; i < oh(); ++i)
                                for (int64_t j = 0; j < ow(); ++j)
                                    if (const double *v = tap(x, b, ch, i, j, p, q)) {
                                        const double t = *v * g[((b * o + oc) * oh() + i) * ow() + j];
                                        sum += t, mag += std::fabs(t);
                                    }
                        e.value.push_back(sum);
                        e.magnitude.push_back(mag);
                    }
        return e;
    }
    Exact grad_bias(const std::vector<double> &g) const {
        Exact e;
        e.terms = static_cast<double>(n * oh() * ow());
        for (int64_t oc = 0; oc < o; ++oc) {
            double sum = 0, mag = 0;
            for (int64_t b = 0; b < n; ++b)
                for (int64_t i = 0; i < oh() * ow(); ++i) {
                    const double t = g[(b * o + oc) * oh() * ow() + i];
                    sum += t, mag += std::fabs(t);
                }
            e.value.push_back(sum);
            e.magnitude.push_back(mag);
        }
        return e;
    }
};

// sum over r of a[r, i] * b[r, j] (a [rows, p], b [rows, q]): a^T b, the shape of every
// gradient below once its batch axes are counted as rows.
Exact at_b(const std::vector<double> &a, const std::vector<double> &b, int64_t rows, int64_t p, int64_t q) {
    Exact e;
    e.terms = static_cast<double>(rows);
    for (int64_t i = 0; i < p; ++i)
        for (int64_t j = 0; j < q; ++j) {
            double sum = 0, mag = 0;
            for (int64_t r = 0; r < rows; ++r) {
                const double t = a[r * p + i] * b[r * q + j];
                sum += t, mag += std::fabs(t);
            }
            e.value.push_back(sum);
            e.magnitude.push_back(mag);
        }
    return e;
}

std::vector<double> transpose(const std::vector<double> &m, int64_t rows, int64_t cols) {
    std::vector<double> t(m.size());
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = m[i * cols + j];
    return t;
}

}  // namespace

TEST_CASE("conv2d with a bias in bf16 and f16: the convolution plus bias rounded once (issue 31's shape)") {
    const Conv cv{2, 3, 17, 19, 8, 3, 3, 1};
    for (const Format &f : {k_bf16, k_f16}) {
        CAPTURE(dtype_name(f.dtype));
        const auto x = random_in(f, 2 * 3 * 17 * 19, 1), w = random_in(f, 8 * 3 * 3 * 3, 2, 0.2),
                   b = random_in(f, 8, 3, 0.1);
        Conv2dOptions o;
        o.pad_h = o.pad_w = 1;
        Tensor y = conv2d(tensor_of(x, {2, 3, 17, 19}, f.dtype), tensor_of(w, {8, 3, 3, 3}, f.dtype),
                          tensor_of(b, {8}, f.dtype), o);
        CHECK(y.dtype() == f.dtype);
        const Exact want = cv.forward(x, w, b);
        const std::vector<double> got = values_of(y);
        check_rounded_once("conv2d + bias", f, got, want);
        // The element [1, 2, 5, 6], for the report.
        const size_t at = ((1 * 8 + 2) * 17 + 5) * 19 + 6;
        MESSAGE("element [1,2,5,6]: " << got[at] << ", exact " << want.value[at] << ", exact rounded once "
                                      << round_format(want.value[at], f.bits, f.emin));
    }
}

TEST_CASE("linear with a bias in bf16 and f16 (rank 2 and 3 inputs): x W^T + b rounded once") {
    for (const Format &f : {k_bf16, k_f16}) {
        CAPTURE(dtype_name(f.dtype));
        const int64_t rows = 2 * 21, in = 40, out = 24;
        const auto x = random_in(f, rows * in, 4), w = random_in(f, out * in, 5, 0.2), b = random_in(f, out, 6);
        for (bool batched : {false, true}) {
            CAPTURE(batched);
            const Shape xs = batched ? Shape{2, 21, in} : Shape{rows, in};
            Tensor y =
                linear(tensor_of(x, xs, f.dtype), tensor_of(w, {out, in}, f.dtype), tensor_of(b, {out}, f.dtype));
            // y = x W^T + b: the terms of (x^T)^T (W^T) with one more row of ones times b.
            std::vector<double> xt = transpose(x, rows, in), wt = transpose(w, out, in);
            xt.insert(xt.end(), static_cast<size_t>(rows), 1.0);
            wt.insert(wt.end(), b.begin(), b.end());
            check_rounded_once("linear + bias", f, values_of(y), at_b(xt, wt, in + 1, rows, out));
        }
    }
}

TEST_CASE("broadcast matmul's gradients in bf16: one product over the batch, rounded once (issue 31's shape)") {
    const Format f = k_bf16;
    const int64_t batch = 3, m = 33, k = 65, n = 17;
    SUBCASE("a [3,33,65] @ b [65,17]: grad_b = sum over batches of a^T g") {
        const auto a = random_in(f, batch * m * k, 7), b = random_in(f, k * n, 8), g = random_in(f, batch * m * n, 9);
        Tensor ta = tensor_of(a, {batch, m, k}, f.dtype), tb = tensor_of(b, {k, n}, f.dtype);
        tb.requires_grad_();
        matmul(ta, tb).backward(tensor_of(g, {batch, m, n}, f.dtype));
        const Exact want = at_b(a, g, batch * m, k, n);  // rows: (batch, m)
        const std::vector<double> got = values_of(tb.grad());
        check_rounded_once("matmul grad_b", f, got, want);
        MESSAGE("grad_b[47,8] (flat " << 47 % k * n + 8 << "): " << got[47 % k * n + 8] << ", exact "
                                      << want.value[47 % k * n + 8]);
    }
    SUBCASE("a [33,65] @ b [3,65,17]: grad_a = sum over batches of g b^T") {
        const auto a = random_in(f, m * k, 10), b = random_in(f, batch * k * n, 11),
                   g = random_in(f, batch * m * n, 12);
        Tensor ta = tensor_of(a, {m, k}, f.dtype), tb = tensor_of(b, {batch, k, n}, f.dtype);
        ta.requires_grad_();
        matmul(ta, tb).backward(tensor_of(g, {batch, m, n}, f.dtype));
        // grad_a[i, j] = sum over (batch, c) of g[batch, i, c] b[batch, j, c]: rows (batch, c).
        std::vector<double> gt, bt;
        for (int64_t s = 0; s < batch; ++s) {
            const auto gs = transpose(std::vector<double>(g.begin() + s * m * n, g.begin() + (s + 1) * m * n), m, n);
            const auto bs = transpose(std::vector<double>(b.begin() + s * k * n, b.begin() + (s + 1) * k * n), k, n);
            gt.insert(gt.end(), gs.begin(), gs.end());
            bt.insert(bt.end(), bs.begin(), bs.end());
        }
        check_rounded_once("matmul grad_a", f, values_of(ta.grad()), at_b(gt, bt, batch * n, m, k));
    }
    SUBCASE("a [2,3,5,7] @ b [2,1,7,4]: grad_b sums over the middle axis only") {
        const auto a = random_in(f, 2 * 3 * 5 * 7, 13), b = random_in(f, 2 * 7 * 4, 14),
                   g = random_in(f, 2 * 3 * 5 * 4, 15);
        Tensor ta = tensor_of(a, {2, 3, 5, 7}, f.dtype), tb = tensor_of(b, {2, 1, 7, 4}, f.dtype);
        tb.requires_grad_();
        matmul(ta, tb).backward(tensor_of(g, {2, 3, 5, 4}, f.dtype));
        Exact want;
        for (int64_t s = 0; s < 2; ++s) {
            const Exact part = at_b(std::vector<double>(a.begin() + s * 105, a.begin() + (s + 1) * 105),
                                    std::vector<double>(g.begin() + s * 60, g.begin() + (s + 1) * 60), 15, 7, 4);
            want.value.insert(want.value.end(), part.value.begin(), part.value.end());
            want.magnitude.insert(want.magnitude.end(), part.magnitude.begin(), part.magnitude.end());
            want.terms = part.terms;
        }
        check_rounded_once("matmul grad_b, partly broadcast", f, values_of(tb.grad()), want);
    }
}

TEST_CASE("linear on [4,33,65] under autocast(bf16) with f32 master weights: the f32 gradients rounded once") {
    const Format f = k_bf16;
    const int64_t rows = 4 * 33, in = 65, out = 17;
    const auto x = random_in(f, rows * in, 16), w = random_in(f, out * in, 17, 0.2), b = random_in(f, out, 18),
               g = random_in(f, rows * out, 19);
    Tensor tw = tensor_of(w, {out, in}, DType::f32), tb = tensor_of(b, {out}, DType::f32);
    tw.requires_grad_();
    tb.requires_grad_();
    {
        AutocastGuard guard(DType::bf16);
        Tensor y = linear(tensor_of(x, {4, 33, in}, DType::f32), tw, tb);
        REQUIRE(y.dtype() == DType::bf16);
        y.backward(tensor_of(g, {4, 33, out}, DType::bf16));
    }
    REQUIRE(tw.grad().dtype() == DType::f32);
    // grad_W[o, i] = sum over rows of g[r, o] x[r, i]; grad_b[o] = sum of g[r, o].
    check_rounded_once("autocast linear grad_W", f, values_of(tw.grad()), at_b(g, x, rows, out, in));
    check_rounded_once("autocast linear grad_b", f, values_of(tb.grad()),
                       at_b(g, std::vector<double>(static_cast<size_t>(rows), 1.0), rows, out, 1));
}

TEST_CASE("conv2d's weight and bias gradients in bf16: sums over the batch and positions rounded once") {
    const Format f = k_bf16;
    const Conv cv{3, 4, 9, 11, 5, 3, 3, 1};
    const auto x = random_in(f, 3 * 4 * 9 * 11, 20), w = random_in(f, 5 * 4 * 3 * 3, 21, 0.2), b = random_in(f, 5, 22),
               g = random_in(f, 3 * 5 * 9 * 11, 23);
    Tensor tw = tensor_of(w, {5, 4, 3, 3}, f.dtype), tb = tensor_of(b, {5}, f.dtype);
    tw.requires_grad_();
    tb.requires_grad_();
    Conv2dOptions o;
    o.pad_h = o.pad_w = 1;
    conv2d(tensor_of(x, {3, 4, 9, 11}, f.dtype), tw, tb, o).backward(tensor_of(g, {3, 5, 9, 11}, f.dtype));
    REQUIRE(tw.grad().dtype() == f.dtype);
    check_rounded_once("conv2d grad_weight", f, values_of(tw.grad()), cv.grad_weight(x, g));
    check_rounded_once("conv2d grad_bias", f, values_of(tb.grad()), cv.grad_bias(g));
}

TEST_CASE("rms_norm's weight gradient and embedding_backward in bf16: sums over rows rounded once") {
    const Format f = k_bf16;
    SUBCASE("rms_norm: grad_w[j] = sum over rows of g x r (r = 1/sqrt(mean(x^2) + eps))") {
        const int64_t rows = 96, d = 24;
        const auto x = random_in(f, rows * d, 24), w = random_in(f, d, 25), g = random_in(f, rows * d, 26);
        Tensor tw = tensor_of(w, {d}, f.dtype);
        tw.requires_grad_();
        rms_norm(tensor_of(x, {rows, d}, f.dtype), 1, tw, 1e-6).backward(tensor_of(g, {rows, d}, f.dtype));
        std::vector<double> xr(x.size());
        for (int64_t r = 0; r < rows; ++r) {
            double ms = 0;
            for (int64_t j = 0; j < d; ++j) ms += x[r * d + j] * x[r * d + j];
            const double inv = 1.0 / std::sqrt(ms / static_cast<double>(d) + 1e-6);
            for (int64_t j = 0; j < d; ++j) xr[r * d + j] = x[r * d + j] * inv;
        }
        Exact want;
        for (int64_t j = 0; j < d; ++j) {
            double sum = 0, mag = 0;
            for (int64_t r = 0; r < rows; ++r)
                sum += g[r * d + j] * xr[r * d + j], mag += std::fabs(g[r * d + j] * xr[r * d + j]);
            want.value.push_back(sum);
            want.magnitude.push_back(mag);
        }
        want.terms = 4.0 * static_cast<double>(rows);  // each term itself a few f32 operations
        check_rounded_once("rms_norm grad_weight", f, values_of(tw.grad()), want);
    }
    SUBCASE("embedding_backward: rows indexed many times") {
        const int64_t vocab = 7, d = 16, count = 300;
        std::vector<int64_t> idx(count);
        for (int64_t i = 0; i < count; ++i) idx[i] = (i * 5 + i / 7) % vocab;
        const auto w = random_in(f, vocab * d, 27), g = random_in(f, count * d, 28);
        Tensor tw = tensor_of(w, {vocab, d}, f.dtype);
        tw.requires_grad_();
        embedding(tw, from_vector(idx, {count}, cpu)).backward(tensor_of(g, {count, d}, f.dtype));
        std::vector<double> onehot(static_cast<size_t>(count * vocab), 0.0);
        for (int64_t i = 0; i < count; ++i) onehot[i * vocab + idx[i]] = 1.0;
        check_rounded_once("embedding_backward", f, values_of(tw.grad()), at_b(onehot, g, count, vocab, d));
    }
}

TEST_CASE("attention's gradients for keys and values broadcast over the batch, in bf16: rounded once") {
    const Format f = k_bf16;
    const int64_t batch = 4, tq = 6, tk = 7, d = 8;
    const auto q = random_in(f, batch * tq * d, 29), k = random_in(f, tk * d, 30), v = random_in(f, tk * d, 31),
               g = random_in(f, batch * tq * d, 32);
    Tensor tk_ = tensor_of(k, {1, tk, d}, f.dtype), tv = tensor_of(v, {1, tk, d}, f.dtype);
    tk_.requires_grad_();
    tv.requires_grad_();
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    scaled_dot_product_attention(tensor_of(q, {batch, tq, d}, f.dtype), tk_, tv)
        .backward(tensor_of(g, {batch, tq, d}, f.dtype));
    // Probabilities in double; dv[j, c] = sum over (batch, i) of p[b, i, j] g[b, i, c];
    // dk[j, c] = sum over (batch, i) of ds[b, i, j] q[b, i, c] scale, ds = p (gp - sum(gp p)).
    std::vector<double> p(batch * tq * tk), ds(batch * tq * tk);
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < tq; ++i) {
            double s[16], mx = -INFINITY, z = 0, dot = 0, gp[16];
            for (int64_t j = 0; j < tk; ++j) {
                s[j] = 0;
                for (int64_t c = 0; c < d; ++c) s[j] += q[(b * tq + i) * d + c] * k[j * d + c];
                s[j] *= scale;
                mx = std::max(mx, s[j]);
            }
            for (int64_t j = 0; j < tk; ++j) z += std::exp(s[j] - mx);
            for (int64_t j = 0; j < tk; ++j) {
                p[(b * tq + i) * tk + j] = std::exp(s[j] - mx) / z;
                gp[j] = 0;
                for (int64_t c = 0; c < d; ++c) gp[j] += g[(b * tq + i) * d + c] * v[j * d + c];
                dot += gp[j] * p[(b * tq + i) * tk + j];
            }
            for (int64_t j = 0; j < tk; ++j)
                ds[(b * tq + i) * tk + j] = p[(b * tq + i) * tk + j] * (gp[j] - dot) * scale;
        }
    // The probabilities and score gradients are f32 intermediates, not inputs: count each term as a
    // few f32 operations deep.
    Exact dv = at_b(p, g, batch * tq, tk, d), dk = at_b(ds, q, batch * tq, tk, d);
    dv.terms *= 8;
    dk.terms *= 8 * d;
    check_rounded_once("attention grad_v", f, values_of(tv.grad()), dv);
    check_rounded_once("attention grad_k", f, values_of(tk_.grad()), dk);
}
