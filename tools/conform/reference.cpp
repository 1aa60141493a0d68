// The float64 reference: each op from its definition in ops.def and plugin.h, in double, with
// plain loops (no blocking, no tricks: the point is to be obviously right, not fast). Beside each
// value goes the size of the terms it is made of, which the error bound scales with
// (check.cpp, docs/numerics.md "The float64 reference").
#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

namespace conform {

namespace {

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

int64_t product(const Shape &s) {
    int64_t n = 1;
    for (int64_t v : s) n *= v;
    return n;
}

// The product of axes [from, to).
int64_t product(const Shape &s, std::size_t from, std::size_t to) {
    int64_t n = 1;
    for (std::size_t i = from; i < to && i < s.size(); ++i) n *= s[i];
    return n;
}

int64_t product(const Shape &s, std::size_t from) { return product(s, from, s.size()); }

bool is_int(int32_t dt) { return dt == TF_DTYPE_I32 || dt == TF_DTYPE_I64; }

Host abs_of(const Host &x) {
    Host out = x;
    for (double &v : out.v) v = std::abs(v);
    return out;
}

// Index of an element of `shape` at the coordinates of flat index i of `out`, broadcasting.
int64_t broadcast_index(const Shape &shape, const Shape &out, int64_t i) {
    int64_t at = 0, stride = 1;
    for (std::size_t k = out.size(); k-- > 0;) {
        const int64_t c = i % out[k];
        i /= out[k];
        const std::size_t lead = out.size() - shape.size();
        if (k >= lead) {
            const int64_t s = shape[k - lead];
            if (s != 1) at += c * stride;
            stride *= s;
        }
    }
    return at;
}

Shape broadcast_shape(const Shape &a, const Shape &b) {
    Shape out(std::max(a.size(), b.size()));
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
        const int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
        out[i] = x == 1 ? y : x;
    }
    return out;
}

double phi(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Integer results wrap like the dtype (two's complement).
double wrap(double v, int32_t dt) {
    if (dt == TF_DTYPE_I32) return static_cast<double>(static_cast<int32_t>(static_cast<int64_t>(v)));
    return v;
}

// A float converted to an integer dtype: truncation, saturating, NaN gives 0.
double to_integer(double v, int32_t dt) {
    if (std::isnan(v)) return 0;
    const double lo = dt == TF_DTYPE_I32 ? -2147483648.0 : -9223372036854775808.0;
    const double hi = dt == TF_DTYPE_I32 ? 2147483647.0 : 9223372036854775807.0;
    return std::clamp(std::trunc(v), lo, hi);
}

// Converts a value to what `dt` can hold exactly (integers, bool); floats are left exact.
double convert(double v, int32_t dt) {
    if (dt == TF_DTYPE_BOOL) return v != 0 || std::isnan(v) ? 1 : 0;
    if (is_int(dt)) return to_integer(v, dt);
    return v;
}

}  // namespace

Host::Host(Shape s, double fill) : shape(std::move(s)), v(static_cast<std::size_t>(product(shape)), fill) {}

namespace ref {

double unary_value(tf_op op, double x, const Params &p) {
    switch (op) {
    case TF_OP_NEG: return -x;
    case TF_OP_EXP: return std::exp(x);
    case TF_OP_RELU: return x < 0 ? 0 : x;
    case TF_OP_ABS: return std::abs(x);
    case TF_OP_LOG: return std::log(x);
    case TF_OP_SQRT: return std::sqrt(x);
    case TF_OP_RSQRT: return 1 / std::sqrt(x);
    case TF_OP_SIN: return std::sin(x);
    case TF_OP_COS: return std::cos(x);
    case TF_OP_TANH: return std::tanh(x);
    case TF_OP_SIGMOID: return 1 / (1 + std::exp(-x));
    // silu, gelu and gelu_tanh at -inf: their limit -0 (the formulas give -inf * 0).
    case TF_OP_GELU: return x == -inf_v ? -0.0 : x * Phi(x);
    case TF_OP_GELU_TANH:
        return x == -inf_v ? -0.0 : 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case TF_OP_SILU: return x == -inf_v ? -0.0 : x / (1 + std::exp(-x));
    case TF_OP_SQUARE: return x * x;
    case TF_OP_CLAMP:
        return std::isnan(x) ? x : std::min(std::max(x, p.as<tf_params_clamp>().min), p.as<tf_params_clamp>().max);
    case TF_OP_ERF: return std::erf(x);
    case TF_OP_ASIN: return std::asin(x);
    case TF_OP_ACOS: return std::acos(x);
    case TF_OP_ATAN: return std::atan(x);
    case TF_OP_ASINH: return std::asinh(x);
    case TF_OP_ACOSH: return std::acosh(x);
    case TF_OP_ATANH: return std::atanh(x);
    default: throw std::logic_error("ref::unary: not a unary op");
    }
}

Host unary(tf_op op, const Host &x, const Params &p) {
    Host out = x;
    for (double &v : out.v) v = unary_value(op, v, p);
    return out;
}

double binary_value(tf_op op, double a, double b) {
    switch (op) {
    case TF_OP_ADD: return a + b;
    case TF_OP_SUB: return a - b;
    case TF_OP_MUL: return a * b;
    case TF_OP_DIV: return a / b;
    case TF_OP_POW: return std::pow(a, b);
    case TF_OP_MAXIMUM: return std::isnan(a) || std::isnan(b) ? nan_v : std::max(a, b);
    case TF_OP_MINIMUM: return std::isnan(a) || std::isnan(b) ? nan_v : std::min(a, b);
    case TF_OP_EQ: return a == b;
    case TF_OP_NE: return a != b;
    case TF_OP_LT: return a < b;
    case TF_OP_LE: return a <= b;
    case TF_OP_GT: return a > b;
    case TF_OP_GE: return a >= b;
    case TF_OP_RELU_BACKWARD: return b <= 0 ? 0 : a;
    case TF_OP_GELU_BACKWARD: return a * (Phi(b) + b * phi(b));
    default: throw std::logic_error("ref::binary: not a binary op");
    }
}

Host binary(tf_op op, const Host &a, const Host &b) {
    Host out(broadcast_shape(a.shape, b.shape));
    for (int64_t i = 0; i < out.numel(); ++i)
        out.v[i] =
            binary_value(op, a.v[broadcast_index(a.shape, out.shape, i)], b.v[broadcast_index(b.shape, out.shape, i)]);
    return out;
}

Host transpose_last(const Host &x) {
    const std::size_t r = x.shape.size();
    Shape s = x.shape;
    std::swap(s[r - 1], s[r - 2]);
    Host out(s);
    const int64_t rows = x.shape[r - 2], cols = x.shape[r - 1], batch = product(x.shape, 0, r - 2);
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j) out.v[(b * cols + j) * rows + i] = x.v[(b * rows + i) * cols + j];
    return out;
}

// Calls f(out_index, in_index) for every input element, the output being x with the axes in mask
// reduced to size 1.
template <typename F>
void for_reduction(const Shape &shape, uint32_t mask, F f) {
    const int64_t n = product(shape);
    for (int64_t i = 0; i < n; ++i) {
        int64_t rest = i, at = 0, stride = 1;
        for (std::size_t k = shape.size(); k-- > 0;) {
            const int64_t c = rest % shape[k];
            rest /= shape[k];
            if (!(mask & (1u << k))) at += c * stride, stride *= shape[k];
        }
        f(at, i);
    }
}

Shape reduced_shape(Shape s, uint32_t mask) {
    for (std::size_t k = 0; k < s.size(); ++k)
        if (mask & (1u << k)) s[k] = 1;
    return s;
}

Host reduce(tf_op op, const Host &x, uint32_t mask, double correction) {
    Host out(reduced_shape(x.shape, mask));
    const int64_t count = out.numel() ? x.numel() / std::max<int64_t>(out.numel(), 1) : 0;
    if (op == TF_OP_MAX || op == TF_OP_MIN) {
        std::vector<bool> seen(out.v.size(), false);
        for_reduction(x.shape, mask, [&](int64_t o, int64_t i) {
            const double v = x.v[i];
            double &r = out.v[o];
            if (!seen[o])
                r = v, seen[o] = true;
            else if (std::isnan(v) || std::isnan(r))
                r = nan_v;
            else
                r = op == TF_OP_MAX ? std::max(r, v) : std::min(r, v);
        });
        return out;
    }
    for_reduction(x.shape, mask, [&](int64_t o, int64_t i) { out.v[o] += x.v[i]; });
    if (op == TF_OP_SUM) return out;
    if (op == TF_OP_MEAN) {
        for (double &v : out.v) v /= static_cast<double>(count);
        return out;
    }
    // var: sum((x - mean)^2) / (n - correction).
    Host mean = out;
    for (double &v : mean.v) v /= static_cast<double>(count);
    std::fill(out.v.begin(), out.v.end(), 0.0);
    for_reduction(x.shape, mask,
                  [&](int64_t o, int64_t i) { out.v[o] += (x.v[i] - mean.v[o]) * (x.v[i] - mean.v[o]); });
    for (double &v : out.v) v /= std::max(static_cast<double>(count) - correction, 0.0);  // as torch
    return out;
}

Host matmul(const Host &a, const Host &b) {
    const std::size_t ra = a.shape.size(), rb = b.shape.size();
    const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
    const Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
    Shape batch = broadcast_shape(ba, bb), os = batch;
    os.insert(os.end(), {m, n});
    Host out(os);
    const int64_t nb = product(batch);
    for (int64_t p = 0; p < nb; ++p) {
        const double *A = a.v.data() + broadcast_index(ba, batch, p) * m * k;
        const double *B = b.v.data() + broadcast_index(bb, batch, p) * k * n;
        double *C = out.v.data() + p * m * n;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (int64_t t = 0; t < k; ++t) s += A[i * k + t] * B[t * n + j];
                C[i * n + j] = s;
            }
    }
    return out;
}

// Calls f(n, o, c, oy, ox, iy, ix, ky, kx) for every product term of conv2d (input channel c,
// inside the input: padding contributes nothing).
template <typename F>
void for_conv_terms(const Shape &xs, const Shape &ws, const Shape &ys, const tf_params_conv2d &p, F f) {
    const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3];
    const int64_t OH = ys[2], OW = ys[3], Og = O / p.groups;
    (void)C;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o)
            for (int64_t oy = 0; oy < OH; ++oy)
                for (int64_t ox = 0; ox < OW; ++ox)
                    for (int64_t cg = 0; cg < Cg; ++cg)
                        for (int64_t ky = 0; ky < KH; ++ky)
                            for (int64_t kx = 0; kx < KW; ++kx) {
                                const int64_t iy = oy * p.stride[0] - p.padding[0] + ky * p.dilation[0];
                                const int64_t ix = ox * p.stride[1] - p.padding[1] + kx * p.dilation[1];
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                f(n, o, (o / Og) * Cg + cg, cg, oy, ox, iy, ix, ky, kx);
                            }
}

Shape conv_out_shape(const Shape &xs, const Shape &ws, const tf_params_conv2d &p) {
    const int64_t oh = (xs[2] + 2 * p.padding[0] - p.dilation[0] * (ws[2] - 1) - 1) / p.stride[0] + 1;
    const int64_t ow = (xs[3] + 2 * p.padding[1] - p.dilation[1] * (ws[3] - 1) - 1) / p.stride[1] + 1;
    return {xs[0], ws[0], oh, ow};
}

Host conv2d(const Host &x, const Host &w, const tf_params_conv2d &p) {
    Host y(conv_out_shape(x.shape, w.shape, p));
    const Shape &xs = x.shape, &ws = w.shape, &ys = y.shape;
    for_conv_terms(xs, ws, ys, p,
                   [&](int64_t n, int64_t o, int64_t c, int64_t cg, int64_t oy, int64_t ox, int64_t iy, int64_t ix,
                       int64_t ky, int64_t kx) {
                       y.v[((n * ys[1] + o) * ys[2] + oy) * ys[3] + ox] +=
                           x.v[((n * xs[1] + c) * xs[2] + iy) * xs[3] + ix] *
                           w.v[((o * ws[1] + cg) * ws[2] + ky) * ws[3] + kx];
                   });
    return y;
}

Host conv2d_grad_input(const Host &dy, const Host &w, const tf_params_conv2d &p, const Shape &x_shape) {
    Host dx(x_shape);
    const Shape &xs = x_shape, &ws = w.shape, &ys = dy.shape;
    for_conv_terms(xs, ws, ys, p,
                   [&](int64_t n, int64_t o, int64_t c, int64_t cg, int64_t oy, int64_t ox, int64_t iy, int64_t ix,
                       int64_t ky, int64_t kx) {
                       dx.v[((n * xs[1] + c) * xs[2] + iy) * xs[3] + ix] +=
                           dy.v[((n * ys[1] + o) * ys[2] + oy) * ys[3] + ox] *
                           w.v[((o * ws[1] + cg) * ws[2] + ky) * ws[3] + kx];
                   });
    return dx;
}

Host conv2d_grad_weight(const Host &dy, const Host &x, const tf_params_conv2d &p, const Shape &w_shape) {
    Host dw(w_shape);
    const Shape &xs = x.shape, &ws = w_shape, &ys = dy.shape;
    for_conv_terms(xs, ws, ys, p,
                   [&](int64_t n, int64_t o, int64_t c, int64_t cg, int64_t oy, int64_t ox, int64_t iy, int64_t ix,
                       int64_t ky, int64_t kx) {
                       dw.v[((o * ws[1] + cg) * ws[2] + ky) * ws[3] + kx] +=
                           dy.v[((n * ys[1] + o) * ys[2] + oy) * ys[3] + ox] *
                           x.v[((n * xs[1] + c) * xs[2] + iy) * xs[3] + ix];
                   });
    return dw;
}

Shape pool_out_shape(const Shape &xs, const tf_params_pool2d &p) {
    return {xs[0], xs[1], (xs[2] + 2 * p.padding[0] - p.kernel[0]) / p.stride[0] + 1,
            (xs[3] + 2 * p.padding[1] - p.kernel[1]) / p.stride[1] + 1};
}

// Calls f(plane, out index within plane, window element's index within plane or -1 for padding)
// for every window element, in window order (rows, then columns).
template <typename F>
void for_pool_terms(const Shape &xs, const tf_params_pool2d &p, F f) {
    const Shape ys = pool_out_shape(xs, p);
    const int64_t planes = xs[0] * xs[1], H = xs[2], W = xs[3];
    for (int64_t pl = 0; pl < planes; ++pl)
        for (int64_t oy = 0; oy < ys[2]; ++oy)
            for (int64_t ox = 0; ox < ys[3]; ++ox)
                for (int64_t ky = 0; ky < p.kernel[0]; ++ky)
                    for (int64_t kx = 0; kx < p.kernel[1]; ++kx) {
                        const int64_t iy = oy * p.stride[0] - p.padding[0] + ky,
                                      ix = ox * p.stride[1] - p.padding[1] + kx;
                        const bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
                        f(pl, oy * ys[3] + ox, inside ? iy * W + ix : -1);
                    }
}

// The index (within its plane) of each window's first maximum, -1 for an all-padding window.
std::vector<int64_t> pool_argmax(const Host &x, const tf_params_pool2d &p) {
    const Shape ys = pool_out_shape(x.shape, p);
    const int64_t plane_in = x.shape[2] * x.shape[3], plane_out = ys[2] * ys[3];
    std::vector<int64_t> arg(static_cast<std::size_t>(product(ys)), -1);
    std::vector<double> best(arg.size(), -inf_v);
    for_pool_terms(x.shape, p, [&](int64_t pl, int64_t o, int64_t i) {
        if (i < 0) return;
        const double v = x.v[pl * plane_in + i];
        const std::size_t at = static_cast<std::size_t>(pl * plane_out + o);
        if (arg[at] < 0 || v > best[at] || (std::isnan(v) && !std::isnan(best[at]))) best[at] = v, arg[at] = i;
    });
    return arg;
}

Host max_pool2d(const Host &x, const tf_params_pool2d &p) {
    Host y(pool_out_shape(x.shape, p), -inf_v);
    const int64_t plane_in = x.shape[2] * x.shape[3], plane_out = y.shape[2] * y.shape[3];
    const std::vector<int64_t> arg = pool_argmax(x, p);
    for (int64_t i = 0; i < y.numel(); ++i)
        if (arg[i] >= 0) y.v[i] = x.v[(i / plane_out) * plane_in + arg[i]];
    return y;
}

Host max_pool2d_backward(const Host &dy, const Host &x, const tf_params_pool2d &p) {
    Host dx(x.shape);
    const int64_t plane_in = x.shape[2] * x.shape[3], plane_out = dy.shape[2] * dy.shape[3];
    const std::vector<int64_t> arg = pool_argmax(x, p);
    for (int64_t i = 0; i < dy.numel(); ++i)
        if (arg[i] >= 0) dx.v[(i / plane_out) * plane_in + arg[i]] += dy.v[i];
    return dx;
}

// Each window's divisor: the full window when count_include_pad, else its elements inside.
std::vector<double> pool_divisors(const Shape &xs, const tf_params_pool2d &p) {
    const Shape ys = pool_out_shape(xs, p);
    std::vector<double> d(static_cast<std::size_t>(ys[2] * ys[3]), 0);
    Shape one = xs;
    one[0] = one[1] = 1;
    for_pool_terms(one, p, [&](int64_t, int64_t o, int64_t i) { d[o] += p.count_include_pad || i >= 0 ? 1 : 0; });
    return d;
}

Host avg_pool2d(const Host &x, const tf_params_pool2d &p) {
    Host y(pool_out_shape(x.shape, p));
    const int64_t plane_in = x.shape[2] * x.shape[3], plane_out = y.shape[2] * y.shape[3];
    const std::vector<double> d = pool_divisors(x.shape, p);
    for_pool_terms(x.shape, p, [&](int64_t pl, int64_t o, int64_t i) {
        if (i >= 0) y.v[pl * plane_out + o] += x.v[pl * plane_in + i] / d[o];
    });
    return y;
}

Host avg_pool2d_backward(const Host &dy, const tf_params_pool2d &p, const Shape &x_shape) {
    Host dx(x_shape);
    const int64_t plane_in = x_shape[2] * x_shape[3], plane_out = dy.shape[2] * dy.shape[3];
    const std::vector<double> d = pool_divisors(x_shape, p);
    for_pool_terms(x_shape, p, [&](int64_t pl, int64_t o, int64_t i) {
        if (i >= 0) dx.v[pl * plane_in + i] += dy.v[pl * plane_out + o] / d[o];
    });
    return dx;
}

// Calls f(base, stride, n) for every line along `axis`: elements base + j * stride, j < n.
template <typename F>
void for_lines(const Shape &s, int axis, F f) {
    const int64_t n = s[axis], inner = product(s, axis + 1), outer = product(s, 0, axis);
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) f(o * n * inner + i, inner, n);
}

Host cumsum(const Host &x, int axis, bool exclusive, bool reverse) {
    Host y = x;
    for_lines(x.shape, axis, [&](int64_t base, int64_t stride, int64_t n) {
        double acc = 0;
        for (int64_t k = 0; k < n; ++k) {
            const int64_t at = base + (reverse ? n - 1 - k : k) * stride;
            const double v = x.v[at];
            if (!exclusive) acc += v;
            y.v[at] = acc;
            if (exclusive) acc += v;
        }
    });
    return y;
}

Host softmax(const Host &x, int axis, bool log) {
    Host y = x;
    if (x.shape.empty()) {
        for (double &v : y.v) v = log ? v - v : 1;  // one element: softmax 1, log_softmax 0 (NaN, inf: NaN)
        for (std::size_t i = 0; i < y.v.size(); ++i)
            if (!std::isfinite(x.v[i])) y.v[i] = nan_v;
        return y;
    }
    for_lines(x.shape, axis, [&](int64_t base, int64_t stride, int64_t n) {
        double m = -inf_v;
        bool any_nan = false;
        for (int64_t j = 0; j < n; ++j) {
            m = std::max(m, x.v[base + j * stride]);
            any_nan |= std::isnan(x.v[base + j * stride]);
        }
        double s = 0;
        for (int64_t j = 0; j < n; ++j) s += std::exp(x.v[base + j * stride] - m);
        for (int64_t j = 0; j < n; ++j) {
            const double d = x.v[base + j * stride] - m;
            y.v[base + j * stride] = any_nan ? nan_v : log ? d - std::log(s) : std::exp(d) / s;
        }
    });
    return y;
}

Host layer_norm(const Host &x, const Host &w, const Host &b, int n_axes, double eps) {
    Host y(x.shape);
    const int64_t n = product(x.shape, x.shape.size() - n_axes), rows = n ? x.numel() / n : 0;
    for (int64_t r = 0; r < rows; ++r) {
        const double *row = x.v.data() + r * n;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < n; ++j) mean += row[j];
        mean /= static_cast<double>(n);
        for (int64_t j = 0; j < n; ++j) var += (row[j] - mean) * (row[j] - mean);
        var /= static_cast<double>(n);
        const double rstd = 1 / std::sqrt(var + eps);
        for (int64_t j = 0; j < n; ++j) y.v[r * n + j] = (row[j] - mean) * rstd * w.v[j] + b.v[j];
    }
    return y;
}

Host rms_norm(const Host &x, const Host &w, int n_axes, double eps) {
    Host y(x.shape);
    const int64_t n = product(x.shape, x.shape.size() - n_axes), rows = n ? x.numel() / n : 0;
    for (int64_t r = 0; r < rows; ++r) {
        const double *row = x.v.data() + r * n;
        double ss = 0;
        for (int64_t j = 0; j < n; ++j) ss += row[j] * row[j];
        const double inv = 1 / std::sqrt(ss / static_cast<double>(n) + eps);
        for (int64_t j = 0; j < n; ++j) y.v[r * n + j] = row[j] * inv * w.v[j];
    }
    return y;
}

// Calls f(first, second, angle) for every rotated pair of rope.
template <typename F>
void for_rope_pairs(const Shape &s, const tf_params_rope &p, F f) {
    const std::size_t r = s.size();
    const int64_t T = s[r - 2], D = s[r - 1], half = D / 2, outer = T * D != 0 ? product(s) / (T * D) : 0;
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t i = 0; i < half; ++i) {
                const double angle = static_cast<double>(p.position_offset + t) *
                                     std::pow(p.theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
                const int64_t base = (o * T + t) * D;
                if (p.interleaved)
                    f(base + 2 * i, base + 2 * i + 1, angle);
                else
                    f(base + i, base + i + half, angle);
            }
}

Host rope(const Host &x, const tf_params_rope &p) {
    Host y(x.shape);
    for_rope_pairs(x.shape, p, [&](int64_t a, int64_t b, double angle) {
        const double c = std::cos(angle), s = p.inverse ? -std::sin(angle) : std::sin(angle);
        y.v[a] = x.v[a] * c - x.v[b] * s;
        y.v[b] = x.v[a] * s + x.v[b] * c;
    });
    return y;
}

// The attention probabilities of one batch element: P [tq, tk] (rows that see no key: NaN).
std::vector<double> attention_probabilities(const double *q, const double *k, const double *mask, int64_t tq,
                                            int64_t tk, int64_t d, const tf_params_attention &p) {
    std::vector<double> P(static_cast<std::size_t>(tq * tk));
    for (int64_t i = 0; i < tq; ++i) {
        const int64_t seen = p.causal ? std::clamp<int64_t>(i + tk - tq + 1, 0, tk) : tk;
        double m = -inf_v;
        for (int64_t j = 0; j < tk; ++j) {
            double s = -inf_v;
            if (j < seen) {
                s = 0;
                for (int64_t t = 0; t < d; ++t) s += q[i * d + t] * k[j * d + t];
                s = s * p.scale + (mask ? mask[i * tk + j] : 0);
            }
            P[i * tk + j] = s;
            m = std::max(m, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < tk; ++j) sum += P[i * tk + j] = m == -inf_v ? 0 : std::exp(P[i * tk + j] - m);
        for (int64_t j = 0; j < tk; ++j) P[i * tk + j] = m == -inf_v ? nan_v : P[i * tk + j] / sum;
    }
    return P;
}

Host attention(const Host &q, const Host &k, const Host &v, const Host *mask, const tf_params_attention &p) {
    const std::size_t r = q.shape.size();
    const int64_t tq = q.shape[r - 2], d = q.shape[r - 1], tk = k.shape[r - 2], dv = v.shape[r - 1];
    Shape os = q.shape;
    os[r - 1] = dv;
    Host out(os);
    const int64_t batch = product(q.shape, 0, r - 2);
    for (int64_t b = 0; b < batch; ++b) {
        const std::vector<double> P =
            attention_probabilities(q.v.data() + b * tq * d, k.v.data() + b * tk * d,
                                    mask ? mask->v.data() + b * tq * tk : nullptr, tq, tk, d, p);
        for (int64_t i = 0; i < tq; ++i)
            for (int64_t c = 0; c < dv; ++c) {
                double s = 0;
                for (int64_t j = 0; j < tk; ++j) s += P[i * tk + j] * v.v[(b * tk + j) * dv + c];
                out.v[(b * tq + i) * dv + c] = tk ? s : nan_v;
            }
    }
    return out;
}

Host embedding(const Host &w, const Host &idx) {
    const int64_t dim = w.shape[1];
    Shape s = idx.shape;
    s.push_back(dim);
    Host out(s);
    for (int64_t i = 0; i < idx.numel(); ++i)
        for (int64_t c = 0; c < dim; ++c) out.v[i * dim + c] = w.v[static_cast<int64_t>(idx.v[i]) * dim + c];
    return out;
}

Host cross_entropy(const Host &logits, const Host &labels, const tf_params_cross_entropy &p) {
    const int64_t n = logits.shape[0], c = logits.shape[1];
    Host none({n});
    double total = 0, count = 0;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t label = static_cast<int64_t>(labels.v[i]);
        if (label == p.ignore_index) continue;
        double m = -inf_v, s = 0;
        for (int64_t j = 0; j < c; ++j) m = std::max(m, logits.v[i * c + j]);
        for (int64_t j = 0; j < c; ++j) s += std::exp(logits.v[i * c + j] - m);
        none.v[i] = m + std::log(s) - logits.v[i * c + label];
        total += none.v[i], count += 1;
    }
    if (p.reduction == TF_REDUCTION_NONE) return none;
    Host out(Shape{});
    out.v[0] = p.reduction == TF_REDUCTION_SUM ? total : total / count;  // all ignored: 0 / 0 = NaN
    return out;
}

}  // namespace ref

namespace {

using namespace ref;

RefOutput exact(const Host &h) {
    RefOutput r;
    r.value = h.v;
    r.scale.resize(h.v.size());
    for (std::size_t i = 0; i < h.v.size(); ++i) r.scale[i] = std::abs(h.v[i]);
    return r;
}

RefOutput with(const Host &value, const Host &scale, double k) {
    RefOutput r;
    r.value = value.v;
    r.scale = scale.v;
    for (double &s : r.scale) s = std::abs(s);
    r.k = k;
    return r;
}

RefOutput elementwise(const Host &value, double k) {
    RefOutput r = exact(value);
    r.k = k;
    return r;
}

bool transcendental(tf_op op) {
    switch (op) {
    case TF_OP_EXP:
    case TF_OP_LOG:
    case TF_OP_SQRT:
    case TF_OP_RSQRT:
    case TF_OP_SIN:
    case TF_OP_COS:
    case TF_OP_TANH:
    case TF_OP_SIGMOID:
    case TF_OP_GELU:
    case TF_OP_GELU_TANH:
    case TF_OP_SILU:
    case TF_OP_ERF:
    case TF_OP_ASIN:
    case TF_OP_ACOS:
    case TF_OP_ATAN:
    case TF_OP_ASINH:
    case TF_OP_ACOSH:
    case TF_OP_ATANH: return true;
    default: return false;
    }
}

// f32 operations allowed for a correctly rounded function in a few ulp (docs: transcendentals
// "a few ulp"; the cpu plugin's gelu is within 8).
constexpr double k_function_ulps = 16;

std::vector<RefOutput> unary_case(const Case &c, const Host &x) {
    const int32_t dt = c.outputs[0].dtype;
    Params p = c.params;
    if (c.op == TF_OP_CLAMP && is_int(dt)) {
        // Integer bounds are rounded inward first (ceil(min), floor(max): the cpu plugin's stated rule).
        p.as<tf_params_clamp>().min = std::ceil(p.as<tf_params_clamp>().min),
        p.as<tf_params_clamp>().max = std::floor(p.as<tf_params_clamp>().max);
    }
    Host y = unary(c.op, x, p);
    for (double &v : y.v) v = is_int(dt) ? wrap(v, dt) : v;
    if (!transcendental(c.op)) return {elementwise(y, 2)};
    RefOutput r = elementwise(y, k_function_ulps);
    // sin, cos and log are accurate to their argument's size, not their result's near a zero.
    if (c.op == TF_OP_SIN || c.op == TF_OP_COS || c.op == TF_OP_LOG)
        for (double &s : r.scale) s = std::max(s, 1.0);
    return {r};
}

// Results that are one of the operands (or a bool): exact.
bool selects(tf_op op) {
    const Kind k = op_row(op).kind;
    return k == Kind::COMPARE || op == TF_OP_MAXIMUM || op == TF_OP_MINIMUM || op == TF_OP_RELU_BACKWARD;
}

std::vector<RefOutput> binary_case(const Case &c, const Host &a, const Host &b) {
    const int32_t dt = c.outputs[0].dtype;
    if (is_int(dt) && c.op == TF_OP_DIV) {
        Host y = binary(c.op, a, b);
        for (double &v : y.v) v = std::trunc(v);
        return {exact(y)};
    }
    Host y = binary(c.op, a, b);
    if (is_int(dt)) {
        for (double &v : y.v) v = wrap(v, dt);
        return {exact(y)};
    }
    if (selects(c.op)) return {exact(y)};
    RefOutput r = elementwise(y, 2);
    for (int64_t i = 0; i < y.numel(); ++i) {
        const double x0 = a.v[i], x1 = b.v[i];
        switch (c.op) {
        case TF_OP_ADD:
        case TF_OP_SUB: r.scale[i] = std::abs(x0) + std::abs(x1); break;
        case TF_OP_POW: {
            // exp(b log a): the error of b log a, relative.
            const double t = std::abs(x1 * std::log(std::abs(x0)));
            r.scale[i] = std::abs(y.v[i]) * (std::isfinite(t) ? 1 + t : 1);
            r.k = k_function_ulps;
            break;
        }
        case TF_OP_GELU_BACKWARD:
            r.scale[i] = std::abs(x0) * (1 + std::abs(x1) * phi(x1));
            r.k = k_function_ulps;
            break;
        default: break;
        }
    }
    return {r};
}

}  // namespace

std::optional<std::vector<RefOutput>> reference(const Case &c, const std::vector<Host> &in,
                                                const std::vector<Host> &before) {
    const OpRow &row = op_row(c.op);
    const int32_t out_dt = c.outputs.empty() ? 0 : c.outputs[0].dtype;
    switch (row.kind) {
    case Kind::UNARY: return unary_case(c, in[0]);
    case Kind::BINARY:
    case Kind::COMPARE: return binary_case(c, in[0], in[1]);
    case Kind::WHERE: {
        Host y(in[1].shape);
        for (int64_t i = 0; i < y.numel(); ++i) y.v[i] = in[0].v[i] != 0 ? in[1].v[i] : in[2].v[i];
        return std::vector<RefOutput>{exact(y)};
    }
    case Kind::REDUCE: {
        const uint32_t mask =
            c.op == TF_OP_VAR ? c.params.as<tf_params_var>().axes_mask : c.params.as<tf_params_reduce>().axes_mask;
        const double correction = c.op == TF_OP_VAR ? c.params.as<tf_params_var>().correction : 1;
        Host y = reduce(c.op, in[0], mask, correction);
        const double n = y.numel() ? static_cast<double>(in[0].numel() / y.numel()) : 0;
        if (is_int(out_dt)) {
            for (double &v : y.v) v = wrap(v, out_dt);
            return std::vector<RefOutput>{exact(y)};
        }
        switch (c.op) {
        case TF_OP_MAX:
        case TF_OP_MIN: return std::vector<RefOutput>{exact(y)};
        case TF_OP_VAR: {
            // A one-pass or two-pass f32 evaluation errs relative to sum(x^2) / (n - correction).
            Host sq = binary(TF_OP_MUL, in[0], in[0]);
            Host s = reduce(TF_OP_SUM, sq, mask);
            for (double &v : s.v) v /= std::max(n - correction, 1.0);
            return std::vector<RefOutput>{with(y, s, 2 * n + 8)};
        }
        default: return std::vector<RefOutput>{with(y, reduce(c.op, abs_of(in[0]), mask), n + 2)};
        }
    }
    case Kind::ARG: {
        const int axis = c.params.as<tf_params_axis>().axis;
        Shape s = in[0].shape;
        s[axis] = 1;
        Host y(s);
        for_lines(in[0].shape, axis, [&](int64_t base, int64_t stride, int64_t n) {
            if (n == 0) return;
            int64_t best = 0;
            for (int64_t j = 1; j < n; ++j) {
                const double v = in[0].v[base + j * stride], b = in[0].v[base + best * stride];
                if (std::isnan(b)) break;
                if (std::isnan(v) || (c.op == TF_OP_ARGMAX ? v > b : v < b)) best = j;
            }
            const int64_t inner = stride, outer_index = base / (n * inner), inner_index = base % inner;
            y.v[outer_index * inner + inner_index] = static_cast<double>(best);
        });
        return std::vector<RefOutput>{exact(y)};
    }
    case Kind::MATMUL: {
        const double k = static_cast<double>(in[0].shape.back());
        return std::vector<RefOutput>{with(matmul(in[0], in[1]), matmul(abs_of(in[0]), abs_of(in[1])), k + 2)};
    }
    case Kind::COPY: {
        Host y = in[0];
        for (double &v : y.v) v = convert(v, out_dt);
        return std::vector<RefOutput>{exact(y)};
    }
    case Kind::FILL: {
        Host y(c.outputs[0].shape, convert(c.params.as<tf_params_fill>().value, out_dt));
        return std::vector<RefOutput>{exact(y)};
    }
    case Kind::OWN: break;
    }
    switch (c.op) {
    case TF_OP_CONV2D: {
        const tf_params_conv2d &p = c.params.as<tf_params_conv2d>();
        const double k = static_cast<double>(product(in[1].shape, 1));
        return std::vector<RefOutput>{with(conv2d(in[0], in[1], p), conv2d(abs_of(in[0]), abs_of(in[1]), p), k + 2)};
    }
    case TF_OP_CONV2D_ACT: {
        // act(conv2d + bias + residual) in float64; |conv2d| of |x|, |w| plus |bias| and |residual|
        // bounds the error (each
        // activation moves two values apart by at most their distance).
        const tf_params_conv2d_act &pa = c.params.as<tf_params_conv2d_act>();
        const tf_params_conv2d p{sizeof(tf_params_conv2d),
                                 {pa.stride[0], pa.stride[1]},
                                 {pa.padding[0], pa.padding[1]},
                                 {pa.dilation[0], pa.dilation[1]},
                                 pa.groups};
        const double k = static_cast<double>(product(in[1].shape, 1));
        Host y = conv2d(in[0], in[1], p), scale = conv2d(abs_of(in[0]), abs_of(in[1]), p);
        const int64_t channels = y.shape[1], plane = y.shape[2] * y.shape[3];
        for (std::size_t i = 0; i < y.v.size(); ++i) {
            const int64_t o = static_cast<int64_t>(i) / plane % channels;
            double v = y.v[i];
            if (!c.inputs[2].absent) {
                v += in[2].v[static_cast<std::size_t>(o)];
                scale.v[i] += std::abs(in[2].v[static_cast<std::size_t>(o)]);
            }
            if (!c.inputs[3].absent) {
                v += in[3].v[i];
                scale.v[i] += std::abs(in[3].v[i]);
            }
            if (pa.activation == TF_CONV_ACT_RELU) v = v < 0 ? 0 : v;
            if (pa.activation == TF_CONV_ACT_CLIP) v = std::min(std::max(v, pa.min), pa.max);
            y.v[i] = v;
        }
        return std::vector<RefOutput>{with(y, scale, k + 4)};
    }
    case TF_OP_MATMUL_BIAS: {
        // x w + bias in float64; |x| |w| + |bias| bounds the error (the product's rounding, then
        // the addition's). In f16/bf16 the product is rounded to y's dtype before the addition
        // (matmul then add): half an ulp of |x w| in y's dtype more, expressed in the bound's
        // f32 units.
        const double k = static_cast<double>(in[0].shape.back()) + 4;
        Host y = matmul(in[0], in[1]), scale = matmul(abs_of(in[0]), abs_of(in[1]));
        const double narrow = out_dt == TF_DTYPE_F16 ? 0x1p-11 : out_dt == TF_DTYPE_BF16 ? 0x1p-8 : 0;
        const auto n = static_cast<std::size_t>(in[1].shape[1]);
        for (std::size_t i = 0; i < y.v.size(); ++i) {
            scale.v[i] += std::abs(in[2].v[i % n]) + std::abs(y.v[i]) * narrow / 0x1p-24 / k;
            y.v[i] += in[2].v[i % n];
        }
        return std::vector<RefOutput>{with(y, scale, k)};
    }
    case TF_OP_CONV2D_GRAD_INPUT: {
        const tf_params_conv2d &p = c.params.as<tf_params_conv2d>();
        const double k = static_cast<double>(in[1].shape[0] / p.groups * in[1].shape[2] * in[1].shape[3]);
        const Shape &xs = c.outputs[0].shape;
        return std::vector<RefOutput>{with(conv2d_grad_input(in[0], in[1], p, xs),
                                           conv2d_grad_input(abs_of(in[0]), abs_of(in[1]), p, xs), k + 2)};
    }
    case TF_OP_CONV2D_GRAD_WEIGHT: {
        const tf_params_conv2d &p = c.params.as<tf_params_conv2d>();
        const double k = static_cast<double>(in[0].shape[0] * in[0].shape[2] * in[0].shape[3]);
        const Shape &ws = c.outputs[0].shape;
        return std::vector<RefOutput>{with(conv2d_grad_weight(in[0], in[1], p, ws),
                                           conv2d_grad_weight(abs_of(in[0]), abs_of(in[1]), p, ws), k + 2)};
    }
    case TF_OP_MAX_POOL2D: return std::vector<RefOutput>{exact(max_pool2d(in[0], c.params.as<tf_params_pool2d>()))};
    case TF_OP_MAX_POOL2D_BACKWARD: {
        const tf_params_pool2d &p = c.params.as<tf_params_pool2d>();
        return std::vector<RefOutput>{with(max_pool2d_backward(in[0], in[1], p),
                                           max_pool2d_backward(abs_of(in[0]), in[1], p),
                                           static_cast<double>(p.kernel[0] * p.kernel[1]))};
    }
    case TF_OP_AVG_POOL2D: {
        const tf_params_pool2d &p = c.params.as<tf_params_pool2d>();
        return std::vector<RefOutput>{with(avg_pool2d(in[0], p), avg_pool2d(abs_of(in[0]), p),
                                           static_cast<double>(p.kernel[0] * p.kernel[1] + 2))};
    }
    case TF_OP_AVG_POOL2D_BACKWARD: {
        const tf_params_pool2d &p = c.params.as<tf_params_pool2d>();
        const Shape &xs = c.outputs[0].shape;
        return std::vector<RefOutput>{with(avg_pool2d_backward(in[0], p, xs), avg_pool2d_backward(abs_of(in[0]), p, xs),
                                           static_cast<double>(p.kernel[0] * p.kernel[1] + 2))};
    }
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX: {
        const bool log = c.op == TF_OP_LOG_SOFTMAX;
        const int axis = c.params.as<tf_params_axis>().axis;
        Host y = softmax(in[0], axis, log);
        const double n = in[0].shape.empty() ? 1 : static_cast<double>(in[0].shape[axis]);
        RefOutput r = elementwise(y, 2 * n + 16);
        if (log)
            for (double &s : r.scale) s += 1;  // x - max - log(sum): absolute error of the log's size
        return std::vector<RefOutput>{r};
    }
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM: {
        const tf_params_norm &p = c.params.as<tf_params_norm>();
        const bool layer = c.op == TF_OP_LAYER_NORM;
        Host y = layer ? layer_norm(in[0], in[1], in[2], p.n_axes, p.eps) : rms_norm(in[0], in[1], p.n_axes, p.eps);
        // The terms: |xhat w| + |b|, with the row statistics' error relative to |w|.
        Host zero_bias(in[1].shape);
        Host xw = layer ? layer_norm(in[0], in[1], zero_bias, p.n_axes, p.eps) : y;
        RefOutput r = with(y, xw, 0);
        const int64_t n = in[1].numel();
        for (int64_t i = 0; i < y.numel(); ++i)
            r.scale[i] = std::abs(xw.v[i]) + std::abs(in[1].v[i % n]) + (layer ? std::abs(in[2].v[i % n]) : 0);
        r.k = 2 * static_cast<double>(n) + 16;
        return std::vector<RefOutput>{r};
    }
    case TF_OP_ROPE: {
        const tf_params_rope &p = c.params.as<tf_params_rope>();
        Host y = rope(in[0], p);
        RefOutput r = elementwise(y, k_function_ulps);
        // The angle (position * frequency) is rounded in f32 on some backends: an error of its size.
        for_rope_pairs(in[0].shape, p, [&](int64_t a, int64_t b, double angle) {
            const double s = (std::abs(in[0].v[a]) + std::abs(in[0].v[b])) * (1 + std::abs(angle));
            r.scale[a] = r.scale[b] = s;
        });
        return std::vector<RefOutput>{r};
    }
    case TF_OP_ATTENTION: {
        const tf_params_attention &p = c.params.as<tf_params_attention>();
        const Host *mask = c.inputs[3].absent ? nullptr : &in[3];
        Host y = attention(in[0], in[1], in[2], mask, p);
        Host ya = attention(in[0], in[1], abs_of(in[2]), mask, p);
        const double k = 4 * static_cast<double>(in[0].shape.back() + in[1].shape[in[1].shape.size() - 2]) + 32;
        return std::vector<RefOutput>{with(y, ya, k)};
    }
    case TF_OP_ATTENTION_BACKWARD: {
        const tf_params_attention &p = c.params.as<tf_params_attention>();
        const Host &q = in[0], &k = in[1], &v = in[2], &dy = in[4];
        const bool has_mask = !c.inputs[3].absent;
        const std::size_t r = q.shape.size();
        const int64_t tq = q.shape[r - 2], d = q.shape[r - 1], tk = k.shape[r - 2], dv = v.shape[r - 1];
        const int64_t batch = product(q.shape, 0, r - 2);
        Host dq(q.shape), dk(k.shape), dvv(v.shape), dqa(q.shape), dka(k.shape), dva(v.shape);
        for (int64_t b = 0; b < batch; ++b) {
            const std::vector<double> P =
                attention_probabilities(q.v.data() + b * tq * d, k.v.data() + b * tk * d,
                                        has_mask ? in[3].v.data() + b * tq * tk : nullptr, tq, tk, d, p);
            const double *Q = q.v.data() + b * tq * d, *K = k.v.data() + b * tk * d, *V = v.v.data() + b * tk * dv,
                         *G = dy.v.data() + b * tq * dv;
            std::vector<double> dS(P.size()), dSa(P.size());
            for (int64_t i = 0; i < tq; ++i) {
                std::vector<double> dP(tk), dPa(tk);
                double rs = 0, rsa = 0;
                for (int64_t j = 0; j < tk; ++j) {
                    for (int64_t c2 = 0; c2 < dv; ++c2) {
                        dP[j] += G[i * dv + c2] * V[j * dv + c2];
                        dPa[j] += std::abs(G[i * dv + c2] * V[j * dv + c2]);
                    }
                    rs += P[i * tk + j] * dP[j];
                    rsa += P[i * tk + j] * dPa[j];
                }
                for (int64_t j = 0; j < tk; ++j) {
                    dS[i * tk + j] = P[i * tk + j] * (dP[j] - rs);
                    dSa[i * tk + j] = P[i * tk + j] * (dPa[j] + rsa);
                }
            }
            for (int64_t i = 0; i < tq; ++i)
                for (int64_t j = 0; j < tk; ++j) {
                    const double s = dS[i * tk + j] * p.scale, sa = std::abs(dSa[i * tk + j] * p.scale);
                    for (int64_t t = 0; t < d; ++t) {
                        dq.v[(b * tq + i) * d + t] += s * K[j * d + t];
                        dqa.v[(b * tq + i) * d + t] += sa * std::abs(K[j * d + t]);
                        dk.v[(b * tk + j) * d + t] += s * Q[i * d + t];
                        dka.v[(b * tk + j) * d + t] += sa * std::abs(Q[i * d + t]);
                    }
                    for (int64_t c2 = 0; c2 < dv; ++c2) {
                        dvv.v[(b * tk + j) * dv + c2] += P[i * tk + j] * G[i * dv + c2];
                        dva.v[(b * tk + j) * dv + c2] += P[i * tk + j] * std::abs(G[i * dv + c2]);
                    }
                }
        }
        const double kk = 4 * static_cast<double>(d + dv + tq + tk) + 32;
        return std::vector<RefOutput>{with(dq, dqa, kk), with(dk, dka, kk), with(dvv, dva, kk)};
    }
    case TF_OP_LAYER_NORM_BACKWARD: {
        const tf_params_norm &p = c.params.as<tf_params_norm>();
        const Host &x = in[0], &w = in[1], &dy = in[2];
        const int64_t n = w.numel(), rows = n ? x.numel() / n : 0;
        Host dx(x.shape), dw(w.shape), db(w.shape), dxa(x.shape), dwa(w.shape), dba(w.shape);
        for (int64_t r = 0; r < rows; ++r) {
            const double *row = x.v.data() + r * n, *g0 = dy.v.data() + r * n;
            double mean = 0, var = 0;
            for (int64_t j = 0; j < n; ++j) mean += row[j];
            mean /= static_cast<double>(n);
            for (int64_t j = 0; j < n; ++j) var += (row[j] - mean) * (row[j] - mean);
            const double rstd = 1 / std::sqrt(var / static_cast<double>(n) + p.eps);
            double mg = 0, mgx = 0, mga = 0, mgxa = 0;
            for (int64_t j = 0; j < n; ++j) {
                const double xh = (row[j] - mean) * rstd, g = g0[j] * w.v[j];
                mg += g, mgx += g * xh, mga += std::abs(g), mgxa += std::abs(g * xh);
                dw.v[j] += g0[j] * xh, dwa.v[j] += std::abs(g0[j] * xh) + std::abs(g0[j]);
                db.v[j] += g0[j], dba.v[j] += std::abs(g0[j]);
            }
            mg /= static_cast<double>(n), mgx /= static_cast<double>(n);
            mga /= static_cast<double>(n), mgxa /= static_cast<double>(n);
            for (int64_t j = 0; j < n; ++j) {
                const double xh = (row[j] - mean) * rstd, g = g0[j] * w.v[j];
                dx.v[r * n + j] = rstd * (g - mg - xh * mgx);
                dxa.v[r * n + j] = rstd * (std::abs(g) + mga + std::abs(xh) * mgxa + mga + mgxa);
            }
        }
        const double k = 2 * static_cast<double>(n + rows) + 16;
        return std::vector<RefOutput>{with(dx, dxa, k), with(dw, dwa, k), with(db, dba, static_cast<double>(rows) + 2)};
    }
    case TF_OP_EMBEDDING: return std::vector<RefOutput>{exact(embedding(in[0], in[1]))};
    case TF_OP_EMBEDDING_BACKWARD: {
        const Host &dy = in[0], &idx = in[1];
        const Shape &ws = c.outputs[0].shape;
        Host dw(ws), dwa(ws);
        const int64_t dim = ws[1];
        for (int64_t i = 0; i < idx.numel(); ++i)
            for (int64_t k = 0; k < dim; ++k) {
                dw.v[static_cast<int64_t>(idx.v[i]) * dim + k] += dy.v[i * dim + k];
                dwa.v[static_cast<int64_t>(idx.v[i]) * dim + k] += std::abs(dy.v[i * dim + k]);
            }
        return std::vector<RefOutput>{with(dw, dwa, static_cast<double>(idx.numel()) + 2)};
    }
    case TF_OP_CROSS_ENTROPY: {
        const tf_params_cross_entropy &p = c.params.as<tf_params_cross_entropy>();
        Host y = cross_entropy(in[0], in[1], p);
        // Terms: |logsumexp| + |logit of the label| per row, averaged or summed as the loss.
        const int64_t n = in[0].shape[0], classes = in[0].shape[1];
        tf_params_cross_entropy none = p;
        none.reduction = TF_REDUCTION_NONE;
        Host rows = cross_entropy(in[0], in[1], none);
        Host sizes({n});
        for (int64_t i = 0; i < n; ++i) {
            const int64_t label = static_cast<int64_t>(in[1].v[i]);
            if (label == p.ignore_index) continue;
            sizes.v[i] = std::abs(rows.v[i]) + 2 * std::abs(in[0].v[i * classes + label]) + 1;
        }
        Host scale = y;
        if (p.reduction == TF_REDUCTION_NONE)
            scale = sizes;
        else {
            double total = 0, count = 0;
            for (int64_t i = 0; i < n; ++i)
                if (static_cast<int64_t>(in[1].v[i]) != p.ignore_index) total += sizes.v[i], count += 1;
            scale.v[0] = p.reduction == TF_REDUCTION_SUM ? total : total / std::max(count, 1.0);
        }
        return std::vector<RefOutput>{with(y, scale, 2 * static_cast<double>(classes + n) + 16)};
    }
    case TF_OP_CUMSUM: {
        const tf_params_cumsum &p = c.params.as<tf_params_cumsum>();
        Host y = cumsum(in[0], p.axis, p.exclusive != 0, p.reverse != 0);
        if (is_int(out_dt)) {
            for (double &v : y.v) v = wrap(v, out_dt);
            return std::vector<RefOutput>{exact(y)};
        }
        // A backend may add in the dtype, one rounding per term: of the size of the terms so far.
        const double n = static_cast<double>(in[0].shape[p.axis]);
        return std::vector<RefOutput>{with(y, cumsum(abs_of(in[0]), p.axis, p.exclusive != 0, p.reverse != 0), n + 2)};
    }
    case TF_OP_ONE_HOT: {
        const int64_t classes = c.params.as<tf_params_one_hot>().num_classes;
        Shape s = in[0].shape;
        s.push_back(classes);
        Host y(s);
        for (int64_t i = 0; i < in[0].numel(); ++i) y.v[i * classes + static_cast<int64_t>(in[0].v[i])] = 1;
        return std::vector<RefOutput>{exact(y)};
    }
    case TF_OP_ADAMW_STEP: {
        const tf_params_adamw_step &p = c.params.as<tf_params_adamw_step>();
        const Host &g = in[0];
        Host param = before[0], m(g.shape), v(g.shape), sp(g.shape), sm(g.shape), sv(g.shape);
        for (int64_t i = 0; i < g.numel(); ++i) {
            const double m0 = p.has_state ? before[1].v[i] : 0, v0 = p.has_state ? before[2].v[i] : 0;
            m.v[i] = m0 * p.beta1 + g.v[i] * p.one_minus_beta1;
            sm.v[i] = std::abs(m0 * p.beta1) + std::abs(g.v[i] * p.one_minus_beta1);
            v.v[i] = v0 * p.beta2 + g.v[i] * g.v[i] * p.one_minus_beta2;
            sv.v[i] = std::abs(v0 * p.beta2) + g.v[i] * g.v[i] * p.one_minus_beta2;
            const double denom = std::sqrt(v.v[i]) / p.root_bias_correction2 + p.eps;
            const double step = m.v[i] / denom * p.step_size,
                         decayed = p.decays ? before[0].v[i] * p.decay : before[0].v[i];
            param.v[i] = decayed - step;
            sp.v[i] = std::abs(decayed) + (std::abs(step) + sm.v[i] / denom * p.step_size);
        }
        return std::vector<RefOutput>{with(param, sp, k_function_ulps), with(m, sm, k_function_ulps),
                                      with(v, sv, k_function_ulps)};
    }
    case TF_OP_SGD_STEP: {
        const tf_params_sgd_step &p = c.params.as<tf_params_sgd_step>();
        const Host &g = in[0];
        Host param = before[0], buf(g.shape), sp(g.shape), sb(g.shape);
        for (int64_t i = 0; i < g.numel(); ++i) {
            const double p0 = before[0].v[i];
            const double d = p.decays ? g.v[i] + p0 * p.weight_decay : g.v[i];
            const double sd = std::abs(g.v[i]) + (p.decays ? std::abs(p0 * p.weight_decay) : 0);
            const double b0 = p.has_state ? before[1].v[i] : 0;
            buf.v[i] = p.has_state ? b0 * p.momentum + d : d;
            sb.v[i] = std::abs(b0 * p.momentum) + sd;
            const double upd = p.nesterov ? d + buf.v[i] * p.momentum : buf.v[i];
            param.v[i] = p0 - upd * p.lr;
            sp.v[i] = std::abs(p0) + (sd + sb.v[i]) * p.lr;
        }
        return std::vector<RefOutput>{with(param, sp, k_function_ulps), with(buf, sb, k_function_ulps)};
    }
    default: return std::nullopt;
    }
}

}  // namespace conform
