// Host references of the multi-step ops (matmul and the nn ops) as naive loops on doubles,
// shared by the op tests of every dtype. No tinyfin op computes a reference value.
#pragma once

#include <algorithm>

#include "reference.hpp"

namespace ref {

using tinyfin::Conv2dOptions;
using tinyfin::Pool2dOptions;

// Naive batched matmul of row-major host tensors with numpy broadcasting of batch dims.
inline D matmul_ref(const D &a, const Shape &sa, const D &b, const Shape &sb, Shape &out_shape) {
    int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
    Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    Shape batch = tinyfin::broadcast_shapes(ba, bb);
    out_shape = batch;
    out_shape.insert(out_shape.end(), {m, n});
    D out(static_cast<std::size_t>(numel(out_shape)), 0.0);
    for (int64_t bi = 0; bi < numel(batch); ++bi) {
        auto c = unravel(bi, batch);
        int64_t ia = broadcast_index(c, ba), ib = broadcast_index(c, bb);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (int64_t p = 0; p < k; ++p) s += a[(ia * m + i) * k + p] * b[(ib * k + p) * n + j];
                out[(bi * m + i) * n + j] = s;
            }
    }
    return out;
}

inline D conv2d_ref(const D &x, const Shape &sx, const D &w, const Shape &sw, const D *bias, const Conv2dOptions &o,
                    Shape &so) {
    int64_t n = sx[0], c = sx[1], h = sx[2], wd = sx[3];
    int64_t oc = sw[0], icg = sw[1], kh = sw[2], kw = sw[3];
    int64_t oh = (h + 2 * o.pad_h - o.dilation_h * (kh - 1) - 1) / o.stride_h + 1;
    int64_t ow = (wd + 2 * o.pad_w - o.dilation_w * (kw - 1) - 1) / o.stride_w + 1;
    so = {n, oc, oh, ow};
    D y(static_cast<std::size_t>(numel(so)));
    int64_t ocg = oc / o.groups;
    for (int64_t b = 0; b < n; ++b)
        for (int64_t f = 0; f < oc; ++f)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    double s = bias ? (*bias)[f] : 0.0;
                    int64_t g = f / ocg;
                    for (int64_t ci = 0; ci < icg; ++ci)
                        for (int64_t p = 0; p < kh; ++p)
                            for (int64_t q = 0; q < kw; ++q) {
                                int64_t ih = i * o.stride_h - o.pad_h + p * o.dilation_h;
                                int64_t iw = j * o.stride_w - o.pad_w + q * o.dilation_w;
                                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                                int64_t ch = g * icg + ci;
                                s += x[((b * c + ch) * h + ih) * wd + iw] * w[((f * icg + ci) * kh + p) * kw + q];
                            }
                    y[((b * oc + f) * oh + i) * ow + j] = s;
                }
    return y;
}

inline D pool_ref(const D &x, const Shape &sx, const Pool2dOptions &o, bool is_max, Shape &so) {
    int sh = o.stride_h ? o.stride_h : o.kernel_h, sw = o.stride_w ? o.stride_w : o.kernel_w;
    int64_t n = sx[0], c = sx[1], h = sx[2], w = sx[3];
    int64_t oh = (h + 2 * o.pad_h - o.kernel_h) / sh + 1, ow = (w + 2 * o.pad_w - o.kernel_w) / sw + 1;
    so = {n, c, oh, ow};
    D y;
    for (int64_t b = 0; b < n * c; ++b)
        for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j) {
                double best = -INFINITY, total = 0;
                int count = 0;
                for (int p = 0; p < o.kernel_h; ++p)
                    for (int q = 0; q < o.kernel_w; ++q) {
                        int64_t ih = i * sh - o.pad_h + p, iw = j * sw - o.pad_w + q;
                        if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                        double v = x[(b * h + ih) * w + iw];
                        best = std::max(best, v);
                        total += v;
                        ++count;
                    }
                double divisor = o.count_include_pad ? o.kernel_h * o.kernel_w : count;
                y.push_back(is_max ? best : total / divisor);
            }
    return y;
}

// Applies f to every 1-D line along `axis` of a row-major tensor, in place.
inline void along_axis(D &a, const Shape &shape, int axis, const std::function<void(std::vector<double *> &)> &f) {
    int64_t inner = 1, outer = 1, len = shape[axis];
    for (std::size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    for (int d = 0; d < axis; ++d) outer *= shape[d];
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
            std::vector<double *> line;
            for (int64_t k = 0; k < len; ++k) line.push_back(&a[(o * len + k) * inner + i]);
            f(line);
        }
}

inline D softmax_ref(D a, const Shape &shape, int axis, bool log_form) {
    along_axis(a, shape, axis, [log_form](std::vector<double *> &line) {
        double m = -INFINITY, s = 0;
        for (double *v : line) m = std::max(m, *v);
        for (double *v : line) s += std::exp(*v - m);
        for (double *v : line) *v = log_form ? *v - m - std::log(s) : std::exp(*v - m) / s;
    });
    return a;
}

// Normalises groups of `group` consecutive elements.
inline D norm_ref(const D &x, int64_t group, const D &w, const D &b, double eps, bool rms) {
    D y(x.size());
    for (std::size_t start = 0; start < x.size(); start += group) {
        double mu = 0, sq = 0;
        for (int64_t i = 0; i < group; ++i) mu += x[start + i];
        mu /= group;
        for (int64_t i = 0; i < group; ++i) {
            double d = rms ? x[start + i] : x[start + i] - mu;
            sq += d * d;
        }
        double r = 1 / std::sqrt(sq / group + eps);
        for (int64_t i = 0; i < group; ++i) {
            double centred = rms ? x[start + i] : x[start + i] - mu;
            y[start + i] = centred * r * w[i] + (rms ? 0 : b[i]);
        }
    }
    return y;
}

// x [..., T, D]: pairs (i, i + D/2) or (2i, 2i+1) rotated by (offset + t) theta^(-2i/D).
inline D rope_ref(const D &x, const Shape &shape, double theta, bool interleaved, int64_t offset) {
    int64_t t_len = shape[shape.size() - 2], d = shape.back();
    D y(x.size());
    for (std::size_t row = 0; row < x.size() / d; ++row) {
        int64_t t = static_cast<int64_t>(row) % t_len;
        for (int64_t i = 0; i < d / 2; ++i) {
            double angle = static_cast<double>(offset + t) * std::pow(theta, -2.0 * i / d);
            int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + d / 2;
            double x0 = x[row * d + a], x1 = x[row * d + b];
            y[row * d + a] = x0 * std::cos(angle) - x1 * std::sin(angle);
            y[row * d + b] = x0 * std::sin(angle) + x1 * std::cos(angle);
        }
    }
    return y;
}

// q [B, Tq, D], k [B, Tk, D], v [B, Tk, Dv], mask [Tq, Tk] or empty.
inline D attention_ref(const D &q, const D &k, const D &v, const D &mask, int64_t b, int64_t tq, int64_t tk, int64_t d,
                       int64_t dv, bool causal, double scale) {
    D out(static_cast<std::size_t>(b * tq * dv), 0.0);
    for (int64_t n = 0; n < b; ++n)
        for (int64_t i = 0; i < tq; ++i) {
            D s(tk);
            double m = -INFINITY;
            for (int64_t j = 0; j < tk; ++j) {
                double dot = 0;
                for (int64_t c = 0; c < d; ++c) dot += q[(n * tq + i) * d + c] * k[(n * tk + j) * d + c];
                s[j] = dot * scale + (mask.empty() ? 0 : mask[i * tk + j]);
                if (causal && j > i + (tk - tq)) s[j] = -INFINITY;
                m = std::max(m, s[j]);
            }
            double total = 0;
            for (double &e : s) total += (e = std::exp(e - m));
            for (int64_t j = 0; j < tk; ++j)
                for (int64_t c = 0; c < dv; ++c) out[(n * tq + i) * dv + c] += s[j] / total * v[(n * tk + j) * dv + c];
        }
    return out;
}

// Row-major copy of a host tensor permuted by axes (the view t.permute(axes)).
inline D permute_ref(const D &a, const Shape &shape, const std::vector<int> &axes, Shape &out_shape) {
    out_shape.clear();
    for (int ax : axes) out_shape.push_back(shape[ax]);
    D out(a.size());
    for (int64_t i = 0; i < numel(out_shape); ++i) {
        auto c = unravel(i, out_shape);
        std::vector<int64_t> src(shape.size());
        for (std::size_t k = 0; k < axes.size(); ++k) src[axes[k]] = c[k];
        int64_t flat = 0;
        for (std::size_t k = 0; k < shape.size(); ++k) flat = flat * shape[k] + src[k];
        out[i] = a[flat];
    }
    return out;
}

}  // namespace ref
