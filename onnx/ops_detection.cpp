// Spatial ops of detection and segmentation exports: NonMaxSuppression (on the host: a greedy,
// data-dependent selection), RoiAlign and GridSample (sampling positions and weights computed on
// the host from the small rois/grid tensors, the image gathered and weighted on the session's
// device), MaxUnpool (the indices read to the host, the values gathered on the device).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;

void require_float_input(const Ctx &ctx, std::size_t i) {
    if (!is_float(ctx.input(i).type))
        ctx.unsupported("input " + std::to_string(i) + " of element type " + element_type_name(ctx.input(i).type) +
                        " (this op takes float32, float16, bfloat16, float64)");
}

// Weighted gathers: output point p, sample s, tap t reads row rows[(p S + s) T + t] of an image
// laid out as [positions, C] with weight weights[...] (0 for a tap outside the image).
struct Taps {
    int64_t points = 0, samples = 0, taps = 0;
    std::vector<int64_t> rows;
    std::vector<float> weights;
    void add(int64_t row, double weight) {
        rows.push_back(row);
        weights.push_back(static_cast<float>(weight));
    }
};

// [points, C]: the sum over samples and taps of weight * image row, or (max_of_taps) the largest
// weighted tap.
Tensor apply_taps(const Ctx &ctx, const Tensor &image_rows, const Taps &t, bool max_of_taps) {
    const int64_t c = image_rows.size(1);
    ctx.check_size({t.points, t.samples, t.taps, c}, 4);
    const Device dev = image_rows.device();
    const Tensor idx = from_vector(t.rows, {static_cast<int64_t>(t.rows.size())}, dev);
    const Tensor w = from_vector(t.weights, {t.points, t.samples * t.taps, 1}, dev).to(image_rows.dtype());
    const Tensor values = mul(take(image_rows, idx, 0).reshape({t.points, t.samples * t.taps, c}), w);
    if (t.points == 0) return zeros({0, c}, image_rows.dtype(), dev);
    return max_of_taps ? max(values, {1}) : sum(values, {1});
}

// The image [N, C, H, W] as rows [N H W, C].
Tensor image_rows(const Tensor &x) {
    return x.permute({0, 2, 3, 1}).contiguous().reshape({x.size(0) * x.size(2) * x.size(3), x.size(1)});
}

// A sampling coordinate as a pixel index: -1 (outside every image) for NaN, infinities and
// magnitudes no image reaches, so that no conversion overflows.
int64_t pixel_index(double v) { return std::fabs(v) < 4e18 ? static_cast<int64_t>(v) : -1; }

// ---- NonMaxSuppression ----

struct Box {
    float y1, x1, y2, x2;
};

Box corners(const float *b, bool center_point) {
    if (center_point) {
        const float xc = b[0], yc = b[1], w = b[2], h = b[3];
        return {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2};
    }
    return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// Whether b suppresses a: intersection over union above the threshold (boxes of no area never do).
bool suppresses(const Box &a, const Box &b, float iou_threshold) {
    const float iy1 = std::max(a.y1, b.y1), ix1 = std::max(a.x1, b.x1);
    const float iy2 = std::min(a.y2, b.y2), ix2 = std::min(a.x2, b.x2);
    if (ix2 <= ix1 || iy2 <= iy1) return false;
    const float inter = (ix2 - ix1) * (iy2 - iy1);
    const float area_a = (a.x2 - a.x1) * (a.y2 - a.y1), area_b = (b.x2 - b.x1) * (b.y2 - b.y1);
    const float uni = area_a + area_b - inter;
    if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
    return inter / uni > iou_threshold;
}

std::vector<Value> non_max_suppression(Ctx &ctx) {
    require_float_input(ctx, 0);
    require_float_input(ctx, 1);
    const Tensor &boxes_t = ctx.tensor(0), &scores_t = ctx.tensor(1);
    if (boxes_t.rank() != 3 || boxes_t.size(2) != 4) ctx.invalid("boxes must have shape [batches, boxes, 4]");
    if (scores_t.rank() != 3 || scores_t.size(0) != boxes_t.size(0) || scores_t.size(2) != boxes_t.size(1))
        ctx.invalid("scores of shape " + shape_str(scores_t.shape()) + " must be [batches, classes, boxes] for boxes " +
                    shape_str(boxes_t.shape()));
    const int64_t center = ctx.attr_int("center_point_box", 0);
    if (center != 0 && center != 1) ctx.invalid("center_point_box must be 0 or 1");
    const int64_t max_out = ctx.has_input(2) && ctx.tensor(2).numel() > 0 ? ctx.ints(2).at(0) : 0;
    const float iou = ctx.has_input(3) && ctx.tensor(3).numel() > 0 ? static_cast<float>(ctx.doubles(3).at(0)) : 0.0f;
    const bool has_score_threshold = ctx.has_input(4) && ctx.tensor(4).numel() > 0;
    const float score_threshold = has_score_threshold ? static_cast<float>(ctx.doubles(4).at(0)) : 0.0f;
    const int64_t batches = boxes_t.size(0), n = boxes_t.size(1), classes = scores_t.size(1);
    std::vector<int64_t> selected;
    if (max_out > 0 && n > 0) {
        count_host_fallback(ctx);
        const auto boxes = boxes_t.to(DType::f32).to_vector<float>();
        const auto scores = scores_t.to(DType::f32).to_vector<float>();
        std::vector<Box> corner(static_cast<std::size_t>(n));
        std::vector<int64_t> order;
        std::vector<int64_t> kept;
        for (int64_t b = 0; b < batches; ++b) {
            for (int64_t i = 0; i < n; ++i) corner[i] = corners(&boxes[(b * n + i) * 4], center == 1);
            for (int64_t c = 0; c < classes; ++c) {
                const float *s = &scores[(b * classes + c) * n];
                order.clear();
                for (int64_t i = 0; i < n; ++i)
                    if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
                // Highest score first; equal scores by box index.
                std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
                kept.clear();
                for (int64_t i : order) {
                    if (static_cast<int64_t>(kept.size()) >= max_out) break;
                    if (std::none_of(kept.begin(), kept.end(),
                                     [&](int64_t k) { return suppresses(corner[i], corner[k], iou); }))
                        kept.push_back(i);
                }
                for (int64_t k : kept) selected.insert(selected.end(), {b, c, k});
            }
        }
    }
    const int64_t count = static_cast<int64_t>(selected.size() / 3);
    return {make(from_vector(selected, {count, 3}, ctx.device), ElementType::int64)};
}

// ---- RoiAlign ----

// One sample's four bilinear taps as Caffe2/onnxruntime take them: a sample more than one pixel
// outside the image reads nothing, one within a pixel of the border is clamped onto it.
void roi_sample(Taps &t, double y, double x, int64_t h, int64_t w, int64_t base, double scale) {
    if (!(y >= -1.0 && y <= static_cast<double>(h) && x >= -1.0 && x <= static_cast<double>(w))) {  // NaN too
        for (int i = 0; i < 4; ++i) t.add(base, 0);
        return;
    }
    y = std::max(y, 0.0);
    x = std::max(x, 0.0);
    int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1 = y0 + 1, x1 = x0 + 1;
    if (y0 >= h - 1) y0 = y1 = h - 1, y = static_cast<double>(y0);
    if (x0 >= w - 1) x0 = x1 = w - 1, x = static_cast<double>(x0);
    const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0), hy = 1 - ly, hx = 1 - lx;
    t.add(base + y0 * w + x0, hy * hx * scale);
    t.add(base + y0 * w + x1, hy * lx * scale);
    t.add(base + y1 * w + x0, ly * hx * scale);
    t.add(base + y1 * w + x1, ly * lx * scale);
}

std::vector<Value> roi_align(Ctx &ctx) {
    require_float_input(ctx, 0);
    require_float_input(ctx, 1);
    const Tensor &x = ctx.tensor(0), &rois_t = ctx.tensor(1);
    if (x.rank() != 4) ctx.invalid("X must have shape [N, C, H, W]");
    if (rois_t.rank() != 2 || rois_t.size(1) != 4) ctx.invalid("rois must have shape [num_rois, 4]");
    const int64_t r = rois_t.size(0), n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const auto batch = ctx.ints(2);
    if (static_cast<int64_t>(batch.size()) != r) ctx.invalid("batch_indices must have one element per roi");
    const std::string mode = ctx.attr_string("mode", "avg");
    if (mode != "avg" && mode != "max") ctx.invalid("mode must be avg or max, got " + mode);
    const std::string transform =
        ctx.version >= 16 ? ctx.attr_string("coordinate_transformation_mode", "half_pixel") : "output_half_pixel";
    if (transform != "half_pixel" && transform != "output_half_pixel")
        ctx.invalid("coordinate_transformation_mode must be half_pixel or output_half_pixel, got " + transform);
    const int64_t oh = ctx.attr_int("output_height", 1), ow = ctx.attr_int("output_width", 1);
    const int64_t ratio = ctx.attr_int("sampling_ratio", 0);
    const double spatial_scale = ctx.attr_float("spatial_scale", 1.0);
    if (oh < 1 || ow < 1 || ratio < 0)
        ctx.invalid("output_height and output_width must be positive, sampling_ratio >= 0");
    ctx.check_size({r, c, oh, ow}, 4);
    const auto rois = rois_t.to(DType::f32).to_vector<float>();
    const double offset = transform == "half_pixel" ? 0.5 : 0.0;
    // Each roi's geometry, and the most samples any bin takes (bins with fewer are padded).
    struct Geometry {
        double y, x, bin_h, bin_w;
        int64_t grid_h, grid_w;
    };
    std::vector<Geometry> geo;
    int64_t most = 1;
    for (int64_t i = 0; i < r; ++i) {
        if (batch[i] < 0 || batch[i] >= n)
            ctx.invalid("batch index " + std::to_string(batch[i]) + " is outside [0, " + std::to_string(n) + ")");
        const float *roi = &rois[i * 4];
        const double x1 = roi[0] * spatial_scale - offset, y1 = roi[1] * spatial_scale - offset;
        double rw = roi[2] * spatial_scale - offset - x1, rh = roi[3] * spatial_scale - offset - y1;
        if (offset == 0) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
        const double bin_h = rh / static_cast<double>(oh), bin_w = rw / static_cast<double>(ow);
        const double gh = ratio > 0 ? static_cast<double>(ratio) : std::ceil(rh / static_cast<double>(oh));
        const double gw = ratio > 0 ? static_cast<double>(ratio) : std::ceil(rw / static_cast<double>(ow));
        if (!(gh >= 0 && gw >= 0 && gh * gw <= 1e9))
            ctx.invalid("roi " + std::to_string(i) + " needs too many samples");
        geo.push_back({y1, x1, bin_h, bin_w, static_cast<int64_t>(gh), static_cast<int64_t>(gw)});
        most = std::max(most, static_cast<int64_t>(gh * gw));
    }
    ctx.check_size({r * oh * ow, most, 4, c}, 4);
    ctx.check_size({r * oh * ow, most, 4}, sizeof(int64_t) + sizeof(float));  // the host's tap tables
    Taps t{r * oh * ow, most, 4, {}, {}};
    const bool avg = mode == "avg";
    for (int64_t i = 0; i < r; ++i) {
        const Geometry &g = geo[static_cast<std::size_t>(i)];
        const int64_t samples = g.grid_h * g.grid_w, base = batch[i] * h * w;
        const double scale = avg ? 1.0 / static_cast<double>(std::max<int64_t>(samples, 1)) : 1.0;
        for (int64_t ph = 0; ph < oh; ++ph)
            for (int64_t pw = 0; pw < ow; ++pw) {
                const std::size_t first = t.rows.size();
                for (int64_t iy = 0; iy < g.grid_h; ++iy)
                    for (int64_t ix = 0; ix < g.grid_w; ++ix) {
                        const double y = g.y + static_cast<double>(ph) * g.bin_h +
                                         (static_cast<double>(iy) + 0.5) * g.bin_h / static_cast<double>(g.grid_h);
                        const double xx = g.x + static_cast<double>(pw) * g.bin_w +
                                          (static_cast<double>(ix) + 0.5) * g.bin_w / static_cast<double>(g.grid_w);
                        roi_sample(t, y, xx, h, w, base, scale);
                    }
                // Pad to `most` samples: zero weights for a mean; for a max, the first sample again.
                for (int64_t s = samples; s < most; ++s)
                    for (int k = 0; k < 4; ++k) {
                        if (avg || samples == 0) {
                            t.add(base, 0);
                        } else {
                            t.rows.push_back(t.rows[first + k]);
                            t.weights.push_back(t.weights[first + k]);
                        }
                    }
            }
    }
    const Tensor y = apply_taps(ctx, image_rows(x), t, !avg);  // [r oh ow, c]
    return {make(y.reshape({r, oh, ow, c}).permute({0, 3, 1, 2}).contiguous(), ctx.input(0).type)};
}

// ---- GridSample ----

double unnormalize(double g, int64_t size, bool align_corners) {
    return align_corners ? (g + 1) / 2 * static_cast<double>(size - 1) : ((g + 1) * static_cast<double>(size) - 1) / 2;
}

// x reflected into [low/2, high/2] (the bounds given doubled, as PyTorch's grid sampler does).
// A NaN or infinite x gives NaN, which selects no pixel (PyTorch's sampler reads nothing there
// either); the parity of the flips is taken in double, where a huge x has one.
double reflect(double x, int64_t twice_low, int64_t twice_high) {
    if (!std::isfinite(x)) return std::numeric_limits<double>::quiet_NaN();
    if (twice_low == twice_high) return 0;
    const double lo = static_cast<double>(twice_low) / 2, span = static_cast<double>(twice_high - twice_low) / 2;
    x = std::fabs(x - lo);
    const double extra = std::fmod(x, span);
    const double flips = std::floor(x / span);
    return std::fmod(flips, 2.0) == 0 ? extra + lo : span - extra + lo;
}

double pad_coordinate(double x, int64_t size, const std::string &padding, bool align_corners) {
    const double last = static_cast<double>(size - 1);
    if (padding == "border") return std::clamp(x, 0.0, last);
    if (padding == "reflection") {
        x = align_corners ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
        return std::clamp(x, 0.0, last);
    }
    return x;
}

double cubic_near(double t, double a) { return ((a + 2) * t - (a + 3)) * t * t + 1; }
double cubic_far(double t, double a) { return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a; }

std::vector<Value> grid_sample(Ctx &ctx) {
    require_float_input(ctx, 0);
    require_float_input(ctx, 1);
    const Tensor &x = ctx.tensor(0), &grid_t = ctx.tensor(1);
    if (x.rank() != 4) ctx.unsupported("X of rank " + std::to_string(x.rank()) + " (GridSample 16 takes [N, C, H, W])");
    if (grid_t.rank() != 4 || grid_t.size(0) != x.size(0) || grid_t.size(3) != 2)
        ctx.invalid("grid of shape " + shape_str(grid_t.shape()) + " must be [N, H_out, W_out, 2] for X " +
                    shape_str(x.shape()));
    const std::string mode = ctx.attr_string("mode", "bilinear"), padding = ctx.attr_string("padding_mode", "zeros");
    const bool ac = ctx.attr_int("align_corners", 0) != 0;
    if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
        ctx.invalid("mode must be bilinear, nearest or bicubic, got " + mode);
    if (padding != "zeros" && padding != "border" && padding != "reflection")
        ctx.invalid("padding_mode must be zeros, border or reflection, got " + padding);
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), ho = grid_t.size(1), wo = grid_t.size(2);
    const int64_t taps = mode == "bicubic" ? 16 : mode == "bilinear" ? 4 : 1;
    ctx.check_size({n * ho * wo, taps, c}, 4);
    ctx.check_size({n * ho * wo, taps}, sizeof(int64_t) + sizeof(float));  // the host's tap tables
    const auto grid = grid_t.to(DType::f32).to_vector<float>();
    Taps t{n * ho * wo, 1, taps, {}, {}};
    t.rows.reserve(static_cast<std::size_t>(t.points * taps));
    for (int64_t b = 0; b < n; ++b) {
        const int64_t base = b * h * w;
        auto tap = [&](int64_t yi, int64_t xi, double weight) {
            if (yi >= 0 && yi < h && xi >= 0 && xi < w) {
                t.add(base + yi * w + xi, weight);
            } else {
                t.add(base, 0);
            }
        };
        for (int64_t p = 0; p < ho * wo; ++p) {
            const double gx = grid[(b * ho * wo + p) * 2], gy = grid[(b * ho * wo + p) * 2 + 1];
            const double ux = unnormalize(gx, w, ac), uy = unnormalize(gy, h, ac);
            if (mode == "bicubic") {
                const double fx = std::floor(ux), fy = std::floor(uy), tx = ux - fx, ty = uy - fy;
                const double a = -0.75;
                const double cx[4] = {cubic_far(tx + 1, a), cubic_near(tx, a), cubic_near(1 - tx, a),
                                      cubic_far(2 - tx, a)};
                const double cy[4] = {cubic_far(ty + 1, a), cubic_near(ty, a), cubic_near(1 - ty, a),
                                      cubic_far(2 - ty, a)};
                for (int j = 0; j < 4; ++j)
                    for (int i = 0; i < 4; ++i) {
                        // Each tap's coordinate padded on its own (border/reflection), as PyTorch does.
                        const double px = pad_coordinate(fx - 1 + i, w, padding, ac);
                        const double py = pad_coordinate(fy - 1 + j, h, padding, ac);
                        tap(pixel_index(std::floor(py)), pixel_index(std::floor(px)), cx[i] * cy[j]);
                    }
                continue;
            }
            const double px = pad_coordinate(ux, w, padding, ac), py = pad_coordinate(uy, h, padding, ac);
            if (mode == "nearest") {
                tap(pixel_index(std::nearbyint(py)), pixel_index(std::nearbyint(px)), 1.0);
                continue;
            }
            if (!std::isfinite(px) || !std::isfinite(py)) {  // a NaN or infinite coordinate reads no pixel
                for (int k = 0; k < 4; ++k) tap(-1, -1, 0);
                continue;
            }
            const double fx = std::floor(px), fy = std::floor(py), lx = px - fx, ly = py - fy;
            const int64_t x0 = pixel_index(fx), y0 = pixel_index(fy);
            tap(y0, x0, (1 - ly) * (1 - lx));
            tap(y0, x0 + 1, (1 - ly) * lx);
            tap(y0 + 1, x0, ly * (1 - lx));
            tap(y0 + 1, x0 + 1, ly * lx);
        }
    }
    const Tensor y = apply_taps(ctx, image_rows(x), t, false);  // [n ho wo, c]
    return {make(y.reshape({n, ho, wo, c}).permute({0, 3, 1, 2}).contiguous(), ctx.input(0).type)};
}

// ---- MaxUnpool ----

std::vector<Value> max_unpool(Ctx &ctx) {
    require_float_input(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    if (x.rank() < 3) ctx.invalid("X must have rank 3 or more ([N, C, D1, ...])");
    if (ctx.tensor(1).shape() != x.shape()) ctx.invalid("I must have X's shape " + shape_str(x.shape()));
    const auto kernel = ctx.attr_ints("kernel_shape");
    const std::size_t spatial = static_cast<std::size_t>(x.rank() - 2);
    if (kernel.size() != spatial) ctx.invalid("kernel_shape must have one entry per spatial axis");
    auto strides = ctx.attr_ints("strides"), pads = ctx.attr_ints("pads");
    if (strides.empty()) strides.assign(spatial, 1);
    if (pads.empty()) pads.assign(2 * spatial, 0);
    if (strides.size() != spatial || pads.size() != 2 * spatial)
        ctx.invalid("strides and pads must match kernel_shape");
    // The indices are flat positions in the shape the pooling inverts (MaxPool's Indices); an
    // output_shape (larger by the rows and columns an odd input lost) keeps each at its coordinates.
    Shape inferred{x.size(0), x.size(1)};
    for (std::size_t d = 0; d < spatial; ++d)
        inferred.push_back((x.size(static_cast<int64_t>(d + 2)) - 1) * strides[d] + kernel[d] - pads[d] -
                           pads[d + spatial]);
    Shape out = inferred;
    if (ctx.has_input(2)) {
        const auto given = ctx.ints(2);
        if (given.size() != static_cast<std::size_t>(x.rank()))
            ctx.invalid("output_shape must have X's rank " + std::to_string(x.rank()));
        out.assign(given.begin(), given.end());
    }
    for (std::size_t d = 0; d < out.size(); ++d)
        if (inferred[d] < 0 || out[d] < inferred[d] || (d < 2 && out[d] != inferred[d]))
            ctx.invalid("output shape " + shape_str(out) + " cannot hold the unpooled shape " + shape_str(inferred));
    ctx.check_size(out, sizeof(int64_t) + sizeof(int32_t));  // the host's tables per output element
    int64_t total = 1, inferred_total = 1;
    for (std::size_t d = 0; d < out.size(); ++d) total *= out[d], inferred_total *= inferred[d];
    // Per output element, the X element whose index lands there (the last one when several do).
    const auto index = ctx.ints(1);
    std::vector<int64_t> source(static_cast<std::size_t>(total), 0);
    std::vector<int32_t> written(static_cast<std::size_t>(total), 0);
    for (std::size_t j = 0; j < index.size(); ++j) {
        if (index[j] < 0 || index[j] >= inferred_total)
            ctx.invalid("index " + std::to_string(index[j]) + " is outside the unpooled shape " + shape_str(inferred));
        int64_t rest = index[j], target = 0, stride = 1;
        for (std::size_t d = out.size(); d-- > 0;) {
            target += rest % inferred[d] * stride;
            rest /= inferred[d];
            stride *= out[d];
        }
        source[static_cast<std::size_t>(target)] = static_cast<int64_t>(j);
        written[static_cast<std::size_t>(target)] = 1;
    }
    const Tensor rows = x.contiguous().reshape({x.numel(), 1});
    const Tensor picked = take(rows, from_vector(source, {total}, ctx.device), 0).reshape(out);
    const Tensor mask = gt(from_vector(written, {total}, ctx.device), 0.0).reshape(out);
    return {make(where(mask, picked, zeros({}, x.dtype(), ctx.device)), ctx.input(0).type)};
}

constexpr OpRow rows[] = {
    {"NonMaxSuppression", 10, 11, non_max_suppression},
    {"RoiAlign", 10, 16, roi_align},
    {"GridSample", 16, 16, grid_sample},
    {"MaxUnpool", 9, 11, max_unpool},
};

}  // namespace

std::span<const OpRow> detection_ops() { return rows; }

}  // namespace tinyfin::onnx::detail
