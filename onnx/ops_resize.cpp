// Resize (and the older Upsample): separable per axis, each output coordinate mapped to the
// input on the host in double (the spec's coordinate transforms), then gathered and weighted:
// nearest picks one index, linear blends two, cubic four.
#include <algorithm>
#include <cmath>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;

struct ResizeMode {
    std::string mode = "nearest";
    std::string coordinates = "half_pixel";
    std::string nearest = "round_prefer_floor";
    double cubic_a = -0.75;
    bool exclude_outside = false;
    std::vector<double> roi;  // tf_crop_and_resize: starts of every axis, then ends
    double extrapolation = 0;
};

// out: the resized length as the spec's reference takes it, in * scale unrounded when scales
// are given.
double source_coordinate(const ResizeMode &m, double x, double scale, double out, int64_t in, int64_t axis) {
    if (m.coordinates == "tf_crop_and_resize") {
        const double start = m.roi[static_cast<std::size_t>(axis)],
                     end = m.roi[m.roi.size() / 2 + static_cast<std::size_t>(axis)];
        const double span = static_cast<double>(in - 1);
        return (out == 1 ? (end - start) * span / 2 : x * (end - start) * span / (out - 1)) + start * span;
    }
    if (m.coordinates == "half_pixel") return (x + 0.5) / scale - 0.5;
    if (m.coordinates == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
    if (m.coordinates == "align_corners") return out == 1 ? 0 : x * static_cast<double>(in - 1) / (out - 1);
    if (m.coordinates == "tf_half_pixel_for_nearest") return (x + 0.5) / scale;
    return x / scale;  // asymmetric
}

// floor(c) as an index, c finite: clamped first to a range int64 holds (a coordinate that far
// outside the input selects the same clamped index or weight either way).
int64_t floor_index(double c) { return static_cast<int64_t>(std::floor(std::clamp(c, -0x1p62, 0x1p62))); }

int64_t nearest_index(const ResizeMode &m, double x, int64_t in) {
    double i;
    if (m.nearest == "floor")
        i = std::floor(x);
    else if (m.nearest == "ceil")
        i = std::ceil(x);
    else if (m.nearest == "round_prefer_ceil")
        i = std::floor(x + 0.5);
    else
        i = (x - std::floor(x) == 0.5) ? std::floor(x) : std::round(x);  // round_prefer_floor
    return std::clamp<int64_t>(floor_index(i), 0, in - 1);
}

double cubic_weight(double t, double a) {
    t = std::fabs(t);
    if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 0;
}

// One axis of x resized from in to out elements at the given scale.
Tensor resize_axis(const Ctx &ctx, const Tensor &x, int64_t axis, int64_t out, double scale, bool from_scales,
                   const ResizeMode &m) {
    const int64_t in = x.size(axis);
    const double length = from_scales ? static_cast<double>(in) * scale : static_cast<double>(out);
    if (in == 0 || out == 0) ctx.invalid("cannot resize an empty axis");
    Shape weight_shape(static_cast<std::size_t>(x.rank()), 1);
    weight_shape[axis] = out;
    auto indices = [&](const std::vector<int64_t> &v) { return from_vector(v, {out}, ctx.device); };
    auto weights = [&](const std::vector<float> &v) { return from_vector(v, weight_shape, ctx.device).to(x.dtype()); };
    // Output o's source coordinate; roi and scales were checked finite, but their products may
    // still overflow.
    auto coordinate = [&](int64_t o) {
        const double c = source_coordinate(m, static_cast<double>(o), scale, length, in, axis);
        if (!std::isfinite(c)) ctx.invalid("roi or scales put an output's source coordinate out of range");
        return c;
    };
    // tf_crop_and_resize: an output whose source lies outside the input is the extrapolation value.
    std::vector<int64_t> outside(static_cast<std::size_t>(out), 0);
    bool any_outside = false;
    if (m.coordinates == "tf_crop_and_resize")
        for (int64_t o = 0; o < out; ++o) {
            const double c = coordinate(o);
            if (c < 0 || c > static_cast<double>(in - 1)) outside[static_cast<std::size_t>(o)] = any_outside = true;
        }
    auto extrapolated = [&](const Tensor &y) {
        if (!any_outside) return y;
        return where(ne(from_vector(outside, weight_shape, ctx.device), 0.0), m.extrapolation, y);
    };
    if (m.mode == "nearest") {
        std::vector<int64_t> idx;
        for (int64_t o = 0; o < out; ++o) idx.push_back(nearest_index(m, coordinate(o), in));
        return extrapolated(take(x, indices(idx), axis));
    }
    const int taps = m.mode == "linear" ? 2 : 4;
    std::vector<std::vector<int64_t>> idx(taps);
    std::vector<std::vector<float>> w(taps);
    for (int64_t o = 0; o < out; ++o) {
        double c = coordinate(o);
        if (taps == 2) {
            c = std::clamp(c, 0.0, static_cast<double>(in - 1));
            const int64_t i0 = floor_index(c);
            const int64_t i1 = std::min(i0 + 1, in - 1);
            const double f = c - static_cast<double>(i0);
            idx[0].push_back(i0);
            idx[1].push_back(i1);
            w[0].push_back(static_cast<float>(1 - f));
            w[1].push_back(static_cast<float>(f));
            continue;
        }
        const int64_t base = floor_index(c);
        const double f = c - static_cast<double>(base);
        double total = 0;
        double ws[4];
        for (int t = 0; t < 4; ++t) {
            const int64_t i = base - 1 + t;
            ws[t] = cubic_weight(f - (t - 1), m.cubic_a);
            if (m.exclude_outside && (i < 0 || i >= in)) ws[t] = 0;
            total += ws[t];
            idx[t].push_back(std::clamp<int64_t>(i, 0, in - 1));
        }
        for (int t = 0; t < 4; ++t) w[t].push_back(static_cast<float>(m.exclude_outside ? ws[t] / total : ws[t]));
    }
    Tensor y = mul(take(x, indices(idx[0]), axis), weights(w[0]));
    for (int t = 1; t < taps; ++t) y = add(y, mul(take(x, indices(idx[t]), axis), weights(w[t])));
    return extrapolated(y);
}

Tensor resize_all(const Ctx &ctx, Tensor x, const std::vector<double> &scales, const std::vector<int64_t> &sizes,
                  const ResizeMode &m) {
    if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic") ctx.unsupported("mode '" + m.mode + "'");
    const int64_t r = x.rank();
    const bool crop = m.coordinates == "tf_crop_and_resize";
    if (crop && static_cast<int64_t>(m.roi.size()) != 2 * r) ctx.invalid("roi must have two values per axis");
    if (!sizes.empty() && static_cast<int64_t>(sizes.size()) != r) ctx.invalid("sizes must have one value per axis");
    if (sizes.empty() && static_cast<int64_t>(scales.size()) != r) ctx.invalid("scales must have one value per axis");
    for (double v : scales)
        if (!(std::isfinite(v) && v > 0)) ctx.invalid("scales must be positive and finite");
    for (double v : m.roi)
        if (!std::isfinite(v)) ctx.invalid("roi must be finite");
    Shape out_shape;
    for (int64_t a = 0; a < r; ++a) {
        if (!sizes.empty()) {
            out_shape.push_back(sizes[a]);
            continue;
        }
        const double length = std::floor(static_cast<double>(x.size(a)) * scales[a]);
        if (!(length < 0x1p62)) ctx.invalid("scales give an output dimension too large");
        out_shape.push_back(static_cast<int64_t>(length));
    }
    ctx.check_size(out_shape, dtype_size(x.dtype()));
    for (int64_t a = 0; a < r; ++a) {
        const double scale = sizes.empty() ? scales[a] : static_cast<double>(sizes[a]) / static_cast<double>(x.size(a));
        if (!(scale > 0)) ctx.invalid("scales must be positive");
        if (scale == 1.0 && out_shape[a] == x.size(a) &&
            (!crop || m.roi[static_cast<std::size_t>(a)] == 0 || x.size(a) == 1) &&
            (!crop || m.roi[static_cast<std::size_t>(a + r)] == 1 || x.size(a) == 1))
            continue;
        x = resize_axis(ctx, x, a, out_shape[a], scale, sizes.empty(), m);
    }
    return x;
}

std::vector<Value> resize(Ctx &ctx) {
    ResizeMode m;
    m.mode = ctx.attr_string("mode", "nearest");
    if (ctx.version >= 11) {
        m.coordinates = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
        m.nearest = ctx.attr_string("nearest_mode", "round_prefer_floor");
        m.cubic_a = ctx.attr_float("cubic_coeff_a", -0.75);
        m.exclude_outside = ctx.attr_int("exclude_outside", 0) != 0;
        m.extrapolation = ctx.attr_float("extrapolation_value", 0.0);
        if (m.coordinates == "tf_crop_and_resize" && ctx.has_input(1)) m.roi = ctx.doubles(1);
    } else {
        m.coordinates = "asymmetric";
        m.nearest = "floor";
    }
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    const std::size_t scales_at = ctx.version >= 11 ? 2 : 1;
    if (ctx.has_input(scales_at) && ctx.tensor(scales_at).numel() > 0) scales = ctx.doubles(scales_at);
    if (ctx.version >= 11 && ctx.has_input(3) && ctx.tensor(3).numel() > 0) sizes = ctx.ints(3);
    if (scales.empty() == sizes.empty()) ctx.invalid("exactly one of scales and sizes must be given");
    const Tensor y = resize_all(ctx, ctx.tensor(0), scales, sizes, m);
    return {make(y.contiguous(), ctx.input(0).type)};
}

std::vector<Value> upsample(Ctx &ctx) {
    ResizeMode m;
    m.mode = ctx.attr_string("mode", "nearest");
    m.coordinates = "asymmetric";
    m.nearest = "floor";
    std::vector<double> scales;
    if (ctx.version >= 9) {
        scales = ctx.doubles(1);
    } else {
        for (float f : ctx.attr_floats("scales")) scales.push_back(f);
    }
    const Tensor y = resize_all(ctx, ctx.tensor(0), scales, {}, m);
    return {make(y.contiguous(), ctx.input(0).type)};
}

constexpr OpRow rows[] = {
    {"Resize", 10, 13, resize},
    {"Upsample", 7, 9, upsample},
};

}  // namespace

std::span<const OpRow> resize_ops() { return rows; }

}  // namespace tinyfin::onnx::detail
