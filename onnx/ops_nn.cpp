// Neural-network ONNX ops: MatMul, Gemm, Conv, pools, Softmax family, normalizations.
#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <limits>
#include <map>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;

void require_float(const Ctx &ctx, std::size_t i) {
    if (!is_float(ctx.input(i).type))
        ctx.unsupported("input " + std::to_string(i) + " of element type " + element_type_name(ctx.input(i).type) +
                        " (this op takes float32, float16, bfloat16, float64)");
}

std::vector<Value> matmul_op(Ctx &ctx) {
    require_float(ctx, 0);
    return {make(matmul(ctx.tensor(0), ctx.tensor(1)), ctx.input(0).type)};
}

std::vector<Value> gemm(Ctx &ctx) {
    require_float(ctx, 0);
    Tensor a = ctx.tensor(0), b = ctx.tensor(1);
    if (a.rank() != 2 || b.rank() != 2) ctx.invalid("A and B must be matrices");
    if (ctx.attr_int("transA", 0)) a = a.transpose(0, 1);
    if (ctx.attr_int("transB", 0)) b = b.transpose(0, 1);
    const double alpha = ctx.attr_float("alpha", 1.0), beta = ctx.attr_float("beta", 1.0);
    // A linear layer (alpha = beta = 1, C a float32 vector of B's columns, [N] or [1, N]): one
    // linear, whose bias the backend may add as the product is stored; the bits of matmul then add.
    if (alpha == 1.0 && beta == 1.0 && ctx.has_input(2) && a.dtype() == DType::f32 && b.dtype() == DType::f32 &&
        ctx.input(1).type == ctx.input(0).type && ctx.input(2).type == ctx.input(0).type) {
        Tensor c = ctx.tensor(2);
        if (c.dtype() == DType::f32 && c.rank() == 2 && c.size(0) == 1) c = c.reshape({c.size(1)});
        if (c.dtype() == DType::f32 && c.rank() == 1 && c.size(0) == b.size(1) && a.size(1) == b.size(0))
            return {make(linear(a, b.transpose(0, 1), c), ctx.input(0).type)};
    }
    Tensor y = matmul(a, b);
    if (alpha != 1.0) y = mul(y, alpha);
    if (ctx.has_input(2) && beta != 0.0) y = add(y, beta == 1.0 ? ctx.tensor(2) : mul(ctx.tensor(2), beta));
    return {make(y, ctx.input(0).type)};
}

// Conv and ConvTranspose take the kernel's size from W; a kernel_shape attribute must agree.
void check_kernel_attribute(const Ctx &ctx, const std::vector<int64_t> &kernel) {
    if (ctx.has_attr("kernel_shape") && ctx.attr_ints("kernel_shape") != kernel)
        ctx.invalid("kernel_shape does not match W's spatial dimensions");
}

// Spatial geometry of Conv and the pools: kernel, strides, dilations and begin/end pads per axis.
struct Window {
    std::vector<int64_t> kernel, strides, dilations, begin, end;
};

Window window(const Ctx &ctx, const Shape &x, std::vector<int64_t> kernel, bool ceil_mode = false) {
    const std::size_t n = kernel.size();
    Window w{kernel, ctx.attr_ints("strides"), ctx.attr_ints("dilations"), {}, {}};
    if (w.strides.empty()) w.strides.assign(n, 1);
    if (w.dilations.empty()) w.dilations.assign(n, 1);
    if (w.strides.size() != n || w.dilations.size() != n) ctx.invalid("strides or dilations do not match the kernel");
    for (std::size_t i = 0; i < n; ++i)
        if (w.strides[i] <= 0 || w.dilations[i] <= 0 || w.kernel[i] <= 0 || w.strides[i] > INT_MAX ||
            w.dilations[i] > INT_MAX || w.kernel[i] > INT_MAX)
            ctx.invalid("kernel, strides and dilations must be positive (and below 2^31)");
    const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
    std::vector<int64_t> pads = ctx.attr_ints("pads");
    w.begin.assign(n, 0);
    w.end.assign(n, 0);
    if (auto_pad == "NOTSET") {
        if (!pads.empty() && pads.size() != 2 * n) ctx.invalid("pads must have 2 values per spatial axis");
        for (std::size_t i = 0; i < n && !pads.empty(); ++i) {
            w.begin[i] = pads[i];
            w.end[i] = pads[i + n];
            if (w.begin[i] < 0 || w.end[i] < 0 || w.begin[i] > INT_MAX || w.end[i] > INT_MAX)
                ctx.invalid("pads must be in [0, 2^31)");
        }
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        for (std::size_t i = 0; i < n; ++i) {
            const int64_t in = x[2 + i], eff = (w.kernel[i] - 1) * w.dilations[i] + 1;
            const int64_t out = (in + w.strides[i] - 1) / w.strides[i];
            const int64_t total = std::max<int64_t>((out - 1) * w.strides[i] + eff - in, 0);
            const int64_t small = total / 2, large = total - small;
            w.begin[i] = auto_pad == "SAME_UPPER" ? small : large;
            w.end[i] = auto_pad == "SAME_UPPER" ? large : small;
        }
    } else if (auto_pad != "VALID") {
        ctx.invalid("auto_pad '" + auto_pad + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
    }
    (void)ceil_mode;
    return w;
}

// A 1-D op as 2-D: [N, C, L] -> [N, C, 1, L] and the window with a unit first axis.
bool lift_1d(const Ctx &ctx, Tensor &x, Window &w) {
    const std::size_t n = w.kernel.size();
    if (n == 2) return false;
    if (n != 1) ctx.unsupported(std::to_string(n) + "-D windows (1-D, 2-D and 3-D are implemented)");
    x = x.reshape({x.size(0), x.size(1), 1, x.size(2)});
    for (auto *v : {&w.kernel, &w.strides, &w.dilations}) v->insert(v->begin(), 1);
    w.begin.insert(w.begin.begin(), 0);
    w.end.insert(w.end.begin(), 0);
    return true;
}

bool symmetric(const Window &w) { return w.begin[0] == w.end[0] && w.begin[1] == w.end[1]; }

Tensor pad_spatial(const Tensor &x, const Window &w, double value) {
    return pad(x, {0, 0, 0, 0, w.begin[0], w.end[0], w.begin[1], w.end[1]}, value);
}

// A 2-D convolution of [N, C, H, W] with the window's pads (symmetric ones inside conv2d), then
// plus residual (when defined) and the activation.
Tensor conv2d_window(Tensor x, const Tensor &weight, const Tensor &bias, const Window &w, int64_t groups,
                     Conv2dActivation activation = Conv2dActivation::none, double min = 0, double max = 0,
                     const Tensor &residual = Tensor()) {
    Conv2dOptions options;
    options.stride_h = static_cast<int>(w.strides[0]);
    options.stride_w = static_cast<int>(w.strides[1]);
    options.dilation_h = static_cast<int>(w.dilations[0]);
    options.dilation_w = static_cast<int>(w.dilations[1]);
    options.groups = static_cast<int>(groups);
    if (symmetric(w)) {
        options.pad_h = static_cast<int>(w.begin[0]);
        options.pad_w = static_cast<int>(w.begin[1]);
    } else {
        x = pad_spatial(x, w, 0);
    }
    if (activation != Conv2dActivation::none || residual.defined())
        return conv2d_activation(x, weight, bias, options, activation, min, max, residual);
    return conv2d(x, weight, bias, options);
}

// The window without its first axis (a 3-D window's H and W part).
Window inner_window(const Window &w) {
    auto tail = [](const std::vector<int64_t> &v) { return std::vector<int64_t>(v.begin() + 1, v.end()); };
    return {tail(w.kernel), tail(w.strides), tail(w.dilations), tail(w.begin), tail(w.end)};
}

// X padded along D (axis 2) by the window's first pads; the number of window positions along D.
Tensor pad_depth(const Ctx &ctx, const Tensor &x, const Window &w, double value, int64_t &positions) {
    const Tensor xp = w.begin[0] || w.end[0] ? pad(x, {0, 0, 0, 0, w.begin[0], w.end[0], 0, 0, 0, 0}, value) : x;
    const int64_t eff = (w.kernel[0] - 1) * w.dilations[0] + 1;
    if (xp.size(2) < eff) ctx.invalid("the window is larger than the padded input along the first spatial axis");
    positions = (xp.size(2) - eff) / w.strides[0] + 1;
    return xp;
}

// The window's i-th tap along D at every output position: [N, C, positions, H, W] (a view).
Tensor depth_tap(const Tensor &xp, const Window &w, int64_t i, int64_t positions) {
    const int64_t start = i * w.dilations[0];
    return xp.slice(2, start, start + (positions - 1) * w.strides[0] + 1, w.strides[0]);
}

// A 3-D convolution as a sum over the kernel's depth taps of 2-D convolutions of the matching
// input planes ([N * D', C, H, W] each) with that tap's [O, C/g, kh, kw] slice of W: the same
// products as a direct 3-D convolution, summed tap by tap.
Tensor conv3d_by_taps(const Ctx &ctx, const Tensor &x, const Tensor &weight, const Tensor &bias, const Window &w,
                      int64_t groups) {
    int64_t positions = 0;
    const Tensor xp = pad_depth(ctx, x, w, 0, positions);
    const Window plane = inner_window(w);
    const int64_t n = x.size(0), c = x.size(1), o = weight.size(0);
    Tensor acc;
    for (int64_t i = 0; i < w.kernel[0]; ++i) {
        const Tensor tap = depth_tap(xp, w, i, positions)
                               .transpose(1, 2)
                               .contiguous()
                               .reshape({n * positions, c, xp.size(3), xp.size(4)});
        const Tensor wi = narrow(weight, 2, i, 1).reshape({o, weight.size(1), weight.size(3), weight.size(4)});
        const Tensor yi = conv2d_window(tap, wi.contiguous(), Tensor(), plane, groups);
        acc = i == 0 ? yi : add(acc, yi);
    }
    Tensor y = acc.reshape({n, positions, o, acc.size(2), acc.size(3)}).transpose(1, 2).contiguous();
    if (bias.defined()) y = add(y, bias.reshape({1, o, 1, 1, 1}));
    return y;
}

std::vector<Value> conv(Ctx &ctx) { return conv_with_activation(ctx, Conv2dActivation::none, 0, 0); }

}  // namespace

std::vector<Value> conv_with_activation(Ctx &ctx, Conv2dActivation activation, double min, double max, int residual) {
    require_float(ctx, 0);
    Tensor x = ctx.tensor(0), weight = ctx.tensor(1);
    if (x.rank() < 3 || weight.rank() != x.rank()) ctx.invalid("X and W must have the same rank, at least 3");
    const std::vector<int64_t> kernel(weight.shape().begin() + 2, weight.shape().end());
    check_kernel_attribute(ctx, kernel);
    const int64_t groups = ctx.attr_int("group", 1);
    if (groups < 1 || groups > INT_MAX) ctx.invalid("group must be positive");
    Window w = window(ctx, x.shape(), kernel);
    const Tensor bias = ctx.has_input(2) ? ctx.tensor(2) : Tensor();
    const bool has_residual = residual >= 0 && ctx.has_input(static_cast<std::size_t>(residual));
    const Tensor z = has_residual ? ctx.tensor(static_cast<std::size_t>(residual)) : Tensor();
    if (has_residual && ctx.input(static_cast<std::size_t>(residual)).type != ctx.input(0).type)
        ctx.invalid("the Add's operands must have one type");
    Tensor y;
    if (kernel.size() == 3) {
        y = conv3d_by_taps(ctx, x, weight, bias, w, groups);
        if (has_residual) y = add(y, z);
        if (activation == Conv2dActivation::relu) y = relu(y);
        if (activation == Conv2dActivation::clip) y = minimum(maximum(y, min), max);
        return {make(y, ctx.input(0).type)};
    }
    const bool lifted = lift_1d(ctx, x, w);
    if (lifted) weight = weight.reshape({weight.size(0), weight.size(1), 1, weight.size(2)});
    if (lifted && has_residual) {
        // The residual joins after the 1-D output's shape is restored (add's broadcasting).
        const Tensor y4 = conv2d_window(x, weight, bias, w, groups);
        y = add(y4.reshape({y4.size(0), y4.size(1), y4.size(3)}), z);
        if (activation == Conv2dActivation::relu) y = relu(y);
        if (activation == Conv2dActivation::clip) y = minimum(maximum(y, min), max);
        return {make(y, ctx.input(0).type)};
    }
    y = conv2d_window(x, weight, bias, w, groups, activation, min, max, z);
    if (lifted) y = y.reshape({y.size(0), y.size(1), y.size(3)});
    return {make(y, ctx.input(0).type)};
}

namespace {

// ConvTranspose as a convolution: the input with stride - 1 zeros between elements, padded by
// the kernel's reach less the pads, convolved with the kernel flipped and its channel axes
// swapped per group.
std::vector<Value> conv_transpose(Ctx &ctx) {
    require_float(ctx, 0);
    Tensor x = ctx.tensor(0), weight = ctx.tensor(1);
    if (x.rank() < 3 || weight.rank() != x.rank()) ctx.invalid("X and W must have the same rank, at least 3");
    const int64_t groups = ctx.attr_int("group", 1);
    if (groups < 1 || groups > INT_MAX) ctx.invalid("group must be positive");
    std::vector<int64_t> kernel(weight.shape().begin() + 2, weight.shape().end());
    check_kernel_attribute(ctx, kernel);
    const std::size_t n = kernel.size();
    if (n > 3) ctx.unsupported(std::to_string(n) + "-D windows (1-D, 2-D and 3-D are implemented)");
    std::vector<int64_t> strides = ctx.attr_ints("strides"), dilations = ctx.attr_ints("dilations"),
                         out_pad = ctx.attr_ints("output_padding"), pads = ctx.attr_ints("pads"),
                         out_shape = ctx.attr_ints("output_shape");
    if (strides.empty()) strides.assign(n, 1);
    if (dilations.empty()) dilations.assign(n, 1);
    if (out_pad.empty()) out_pad.assign(n, 0);
    if (pads.empty()) pads.assign(2 * n, 0);
    if (strides.size() != n || dilations.size() != n || out_pad.size() != n || pads.size() != 2 * n ||
        (!out_shape.empty() && out_shape.size() != n && out_shape.size() != n + 2))
        ctx.invalid("strides, dilations, output_padding, output_shape or pads do not match the kernel");
    for (int64_t v : out_shape)
        if (v < 0 || v > INT_MAX) ctx.invalid("output_shape must be in [0, 2^31)");
    const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
    for (std::size_t i = 0; i < n; ++i) {
        if (strides[i] <= 0 || dilations[i] <= 0 || strides[i] > INT_MAX || dilations[i] > INT_MAX)
            ctx.invalid("strides and dilations must be positive (and below 2^31)");
        if (out_pad[i] < 0 || out_pad[i] >= std::max(strides[i], dilations[i]))
            ctx.invalid("output_padding must be in [0, max(stride, dilation))");
        if (pads[i] < -INT_MAX || pads[i] > INT_MAX || pads[i + n] < -INT_MAX || pads[i + n] > INT_MAX)
            ctx.invalid("pads must be below 2^31 in magnitude");
        const int64_t in = x.size(static_cast<int64_t>(2 + i)), eff = (kernel[i] - 1) * dilations[i] + 1;
        if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
            const int64_t out = !out_shape.empty() ? out_shape[out_shape.size() - n + i] : in * strides[i];
            // A negative total (an output_shape past the natural size) grows the end.
            const int64_t total = strides[i] * (in - 1) + out_pad[i] + eff - out;
            const bool upper = auto_pad != "SAME_LOWER";
            pads[i] = upper ? total / 2 : total - total / 2;
            pads[i + n] = total - pads[i];
        } else if (auto_pad == "VALID") {
            pads[i] = pads[i + n] = 0;
        }
    }
    // 1-D as 2-D with a unit first axis.
    const bool lifted = n == 1;
    if (lifted) {
        x = x.reshape({x.size(0), x.size(1), 1, x.size(2)});
        weight = weight.reshape({weight.size(0), weight.size(1), 1, weight.size(2)});
        kernel.insert(kernel.begin(), 1);
        for (auto *v : {&strides, &dilations}) v->insert(v->begin(), 1);
        out_pad.insert(out_pad.begin(), 0);
        pads = {0, pads[0], 0, pads[1]};
    }
    const std::size_t dims = kernel.size();  // 2 or 3
    const int64_t batch = x.size(0), cin = x.size(1);
    // Zeros between elements: [N, C, d1, 1, d2, 1, ...] padded to [N, C, d1, s1, d2, s2, ...], trimmed.
    Shape split{batch, cin}, spread_shape{batch, cin};
    std::vector<int64_t> zeros_after{0, 0, 0, 0};
    for (std::size_t i = 0; i < dims; ++i) {
        const int64_t d = x.size(static_cast<int64_t>(2 + i));
        split.insert(split.end(), {d, 1});
        spread_shape.push_back(d * strides[i]);
        zeros_after.insert(zeros_after.end(), {0, 0, 0, strides[i] - 1});
    }
    Tensor spread = pad(x.reshape(split), zeros_after, 0).reshape(spread_shape);
    for (std::size_t i = 0; i < dims; ++i) {
        const int64_t axis = static_cast<int64_t>(2 + i);
        spread = narrow(spread, axis, 0, (x.size(axis) - 1) * strides[i] + 1);
    }
    std::vector<int64_t> grow{0, 0, 0, 0};
    for (std::size_t i = 0; i < dims; ++i) {
        const int64_t eff = (kernel[i] - 1) * dilations[i] + 1;
        const int64_t before = eff - 1 - pads[i], after = eff - 1 - pads[i + dims] + out_pad[i];
        const int64_t axis = static_cast<int64_t>(2 + i);
        const int64_t crop_front = std::max<int64_t>(-before, 0), crop_back = std::max<int64_t>(-after, 0);
        if (crop_front + crop_back > spread.size(axis)) ctx.invalid("pads remove the whole output");
        if (crop_front || crop_back)
            spread = narrow(spread, axis, crop_front, spread.size(axis) - crop_front - crop_back);
        grow.push_back(std::max<int64_t>(before, 0));
        grow.push_back(std::max<int64_t>(after, 0));
    }
    spread = pad(spread, grow, 0);
    // W [Cin, Cout/g, k...] -> [Cout, Cin/g, k...], flipped in space.
    const int64_t cout_g = weight.size(1);
    if (cin % groups != 0) ctx.invalid("group does not divide the input channels");
    const Shape kshape(weight.shape().begin() + 2, weight.shape().end());
    Shape grouped{groups, cin / groups, cout_g}, swapped{groups * cout_g, cin / groups};
    grouped.insert(grouped.end(), kshape.begin(), kshape.end());
    swapped.insert(swapped.end(), kshape.begin(), kshape.end());
    Tensor wt = weight.reshape(grouped).transpose(1, 2).contiguous().reshape(swapped);
    for (std::size_t i = 0; i < dims; ++i) {
        std::vector<int64_t> reverse;
        for (int64_t k = kshape[i] - 1; k >= 0; --k) reverse.push_back(k);
        wt = take(wt, from_vector(reverse, {kshape[i]}, ctx.device), static_cast<int64_t>(2 + i));
    }
    Window unit{kernel, std::vector<int64_t>(dims, 1), dilations, std::vector<int64_t>(dims, 0),
                std::vector<int64_t>(dims, 0)};
    const Tensor bias = ctx.has_input(2) ? ctx.tensor(2) : Tensor();
    Tensor y =
        dims == 3 ? conv3d_by_taps(ctx, spread, wt, bias, unit, groups) : conv2d_window(spread, wt, bias, unit, groups);
    if (lifted) y = y.reshape({y.size(0), y.size(1), y.size(3)});
    return {make(y, ctx.input(0).type)};
}

// MaxPool's Indices: for each output element the flat index in X (N, C, then the spatial axes
// row-major, or column-major with storage_order 1) of its window's first largest element. The
// window's input positions are tabulated on the host; the values are gathered (a padding
// position reads -inf) and argmax picks within each window. x: [N, C, H, W] (1-D lifted).
Tensor max_pool_indices(const Ctx &ctx, const Tensor &x, const Window &w, int64_t oh, int64_t ow, bool column_major) {
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3), k = w.kernel[0] * w.kernel[1];
    ctx.check_size({n * c, oh * ow, k}, 4);
    std::vector<int64_t> reads, stored;  // per (output position, window offset): where it reads, its index
    reads.reserve(static_cast<std::size_t>(oh * ow * k));
    stored.reserve(static_cast<std::size_t>(oh * ow * k));
    for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox)
            for (int64_t ky = 0; ky < w.kernel[0]; ++ky)
                for (int64_t kx = 0; kx < w.kernel[1]; ++kx) {
                    const int64_t iy = oy * w.strides[0] - w.begin[0] + ky * w.dilations[0];
                    const int64_t ix = ox * w.strides[1] - w.begin[1] + kx * w.dilations[1];
                    const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < wd;
                    reads.push_back(inside ? iy * wd + ix : h * wd);
                    stored.push_back(inside ? (column_major ? ix * h + iy : iy * wd + ix) : 0);
                }
    const Tensor rows =
        pad(x.contiguous().reshape({n * c, h * wd}), {0, 0, 0, 1}, -std::numeric_limits<double>::infinity());
    const Tensor windows = take(rows, from_vector(reads, {oh * ow * k}, ctx.device), 1).reshape({n * c, oh * ow, k});
    const Tensor best = argmax(windows, 2);  // [N*C, OH*OW]
    const Tensor at =
        add(best, mul(arange(int64_t{0}, oh * ow, int64_t{1}, DType::i64, ctx.device), static_cast<double>(k)));
    const Tensor spatial = embedding(from_vector(stored, {oh * ow * k, 1}, ctx.device), at.reshape({n * c * oh * ow}));
    const Tensor plane =
        mul(arange(int64_t{0}, n * c, int64_t{1}, DType::i64, ctx.device), static_cast<double>(h * wd));
    return add(spatial.reshape({n * c, oh * ow}), plane.reshape({n * c, 1}));
}

template <bool Max>
std::vector<Value> pool(Ctx &ctx) {
    const bool want_indices = ctx.n_outputs > 1 && !ctx.node.output(1).empty();
    if (want_indices && !Max) ctx.invalid("AveragePool has one output");
    Tensor x = ctx.tensor(0);
    const DType dtype = x.dtype();
    if (!is_float(ctx.input(0).type)) x = x.to(DType::f32);  // int8/uint8 pools: exact in f32
    if (x.rank() < 3) ctx.invalid("X must have rank 3 or more");
    Window w = window(ctx, x.shape(), ctx.attr_ints("kernel_shape"));
    if (w.kernel.size() + 2 != static_cast<std::size_t>(x.rank())) ctx.invalid("kernel_shape does not match X");
    // A 3-D pool: the window's taps along D combined first (maximum, or the mean over the taps
    // inside the input: the 3-D mean is the H-W mean of those means), then the 2-D pool of
    // [N, C * D', H, W].
    Shape depth_shape;
    if (w.kernel.size() == 3) {
        if (want_indices) ctx.unsupported("MaxPool's Indices output of a 3-D pool");
        if (ctx.attr_int("ceil_mode", 0) != 0) ctx.unsupported("ceil_mode in 3-D pools");
        if (!Max && w.dilations[0] != 1) ctx.unsupported("dilations in AveragePool");
        int64_t positions = 0;
        const Tensor xp = pad_depth(ctx, x, w, Max ? -std::numeric_limits<double>::infinity() : 0, positions);
        Tensor acc;
        for (int64_t i = 0; i < w.kernel[0]; ++i) {
            const Tensor tap = depth_tap(xp, w, i, positions);
            acc = i == 0 ? tap : Max ? maximum(acc, tap) : add(acc, tap);
        }
        if (!Max) {
            // Taps per output position inside the input (all kd when pads count).
            std::vector<float> counts(static_cast<std::size_t>(positions));
            for (int64_t d = 0; d < positions; ++d) {
                int64_t inside = 0;
                for (int64_t i = 0; i < w.kernel[0]; ++i) {
                    const int64_t at = d * w.strides[0] + i - w.begin[0];
                    inside += ctx.attr_int("count_include_pad", 0) != 0 || (at >= 0 && at < x.size(2));
                }
                counts[static_cast<std::size_t>(d)] = static_cast<float>(inside);
            }
            acc = div(acc, from_vector(counts, {1, 1, positions, 1, 1}, ctx.device).to(acc.dtype()));
        }
        depth_shape = {x.size(0), x.size(1), positions};
        x = acc.contiguous().reshape({x.size(0), x.size(1) * positions, x.size(3), x.size(4)});
        w = inner_window(w);
    }
    const bool lifted = lift_1d(ctx, x, w);
    const int64_t storage_order = ctx.attr_int("storage_order", 0);
    if (storage_order != 0 && storage_order != 1) ctx.invalid("storage_order must be 0 or 1");
    Pool2dOptions options;
    options.kernel_h = static_cast<int>(w.kernel[0]);
    options.kernel_w = static_cast<int>(w.kernel[1]);
    options.stride_h = static_cast<int>(w.strides[0]);
    options.stride_w = static_cast<int>(w.strides[1]);
    options.ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
    const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
    if (Max) {
        options.dilation_h = static_cast<int>(w.dilations[0]);
        options.dilation_w = static_cast<int>(w.dilations[1]);
    } else if (w.dilations[0] != 1 || w.dilations[1] != 1) {
        ctx.unsupported("dilations in AveragePool");
    }
    const bool direct = symmetric(w) && w.begin[0] <= w.kernel[0] / 2 && w.begin[1] <= w.kernel[1] / 2;
    Tensor y;
    if (direct) {
        options.pad_h = static_cast<int>(w.begin[0]);
        options.pad_w = static_cast<int>(w.begin[1]);
        options.count_include_pad = include_pad;
        y = Max ? max_pool2d(x, options) : avg_pool2d(x, options);
    } else if (Max) {
        y = max_pool2d(pad_spatial(x, w, -std::numeric_limits<double>::infinity()), options);
    } else {
        options.count_include_pad = true;
        y = avg_pool2d(pad_spatial(x, w, 0), options);
        if (!include_pad) {
            // The mean over the window's real elements: the same pool over a mask of ones.
            const Tensor ones_mask = pad_spatial(ones({1, 1, x.size(2), x.size(3)}, x.dtype(), ctx.device), w, 0);
            y = div(y, avg_pool2d(ones_mask, options));
        }
    }
    Tensor indices;
    if (want_indices)
        indices = max_pool_indices(ctx, x, w, y.size(2), y.size(3), storage_order == 1).reshape(y.shape());
    if (lifted) {
        y = y.reshape({y.size(0), y.size(1), y.size(3)});
        if (want_indices) indices = indices.reshape(y.shape());
    }
    if (!depth_shape.empty()) y = y.reshape({depth_shape[0], depth_shape[1], depth_shape[2], y.size(2), y.size(3)});
    if (y.dtype() != dtype) y = y.to(dtype);
    if (want_indices) return {make(y, ctx.input(0).type), make(indices, ElementType::int64)};
    return {make(y, ctx.input(0).type)};
}

template <bool Max>
std::vector<Value> global_pool(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    std::vector<int64_t> axes;
    for (int64_t i = 2; i < x.rank(); ++i) axes.push_back(i);
    return {make(Max ? max(x, axes, true) : mean(x, axes, true), ctx.input(0).type)};
}

// Softmax-like ops: before opset 13 the input is coerced to 2-D at axis and normalised along
// the second axis; from 13 along axis alone.
template <Tensor (*Op)(const Tensor &, int64_t)>
std::vector<Value> softmax_family(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    if (ctx.version >= 13) {
        const int64_t axis = normalize_axis(ctx.attr_int("axis", -1), x.rank(), ctx);
        return {make(Op(x, axis), ctx.input(0).type)};
    }
    const int64_t axis = normalize_axis(ctx.attr_int("axis", 1), x.rank(), ctx);
    int64_t rows = 1;
    for (int64_t i = 0; i < axis; ++i) rows *= x.size(i);
    const Tensor flat = x.reshape({rows, -1});
    return {make(Op(flat, 1).reshape(x.shape()), ctx.input(0).type)};
}

Tensor hardmax_of(const Tensor &x, int64_t axis) {
    const Tensor moved = x.transpose(axis, -1);
    Tensor hot = one_hot(argmax(moved, -1), static_cast<int>(moved.size(-1)), x.dtype());
    return hot.transpose(axis, -1).contiguous();
}

std::vector<Value> layer_normalization(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    const int64_t axis = normalize_axis(ctx.attr_int("axis", -1), x.rank(), ctx);
    const double eps = ctx.attr_float("epsilon", 1e-5);
    const Shape normalized(x.shape().begin() + axis, x.shape().end());
    Tensor scale = ctx.tensor(1).expand(normalized).contiguous();
    Tensor bias = ctx.has_input(2) ? ctx.tensor(2).expand(normalized).contiguous() : Tensor();
    std::vector<Value> out{make(layer_norm(x, static_cast<int>(x.rank() - axis), scale, bias, eps), ctx.input(0).type)};
    if (ctx.n_outputs > 1) {
        std::vector<int64_t> axes;
        for (int64_t i = axis; i < x.rank(); ++i) axes.push_back(i);
        const Tensor x32 = x.to(DType::f32);
        const Tensor m = mean(x32, axes, true);
        out.push_back(make(m, ElementType::float32));
        if (ctx.n_outputs > 2) out.push_back(make(rsqrt(add(var(x32, axes, 0, true), eps)), ElementType::float32));
    }
    return out;
}

// [C] -> [C, 1, ...] against x of rank r, channels on axis 1.
Tensor per_channel(const Tensor &t, int64_t rank) {
    Shape shape{t.numel()};
    for (int64_t i = 2; i < rank; ++i) shape.push_back(1);
    return t.reshape(shape);
}

std::vector<Value> batch_normalization(Ctx &ctx) {
    require_float(ctx, 0);
    const bool training = ctx.version >= 14 && ctx.attr_int("training_mode", 0) != 0;
    if (ctx.version < 14 && ctx.n_outputs > 1)
        ctx.unsupported("training outputs before version 14 (mean, var, saved_mean, saved_var)");
    if (ctx.version < 9 && ctx.attr_int("spatial", 1) != 1) ctx.unsupported("spatial = 0");
    const Tensor &x = ctx.tensor(0);
    const double eps = ctx.attr_float("epsilon", 1e-5);
    const int64_t r = x.rank();
    const DType dt = x.dtype();
    if (training) {
        // Batch statistics over every axis but the channels (population variance); the running
        // statistics move towards them by 1 - momentum.
        if (r < 2) ctx.invalid("X must have a channel axis");
        std::vector<int64_t> axes{0};
        for (int64_t i = 2; i < r; ++i) axes.push_back(i);
        const Tensor m = mean(x, axes, true), v = var(x, axes, 0, true);
        const Tensor scale = per_channel(ctx.tensor(1).to(dt), r), bias = per_channel(ctx.tensor(2).to(dt), r);
        const Tensor y = add(mul(mul(sub(x, m), rsqrt(add(v, eps))), scale), bias);
        const double momentum = ctx.attr_float("momentum", 0.9);
        const int64_t c = x.size(1);
        const Tensor &run_m = ctx.tensor(3), &run_v = ctx.tensor(4);
        auto moved = [&](const Tensor &running, const Tensor &batch) {
            return add(mul(running, momentum), mul(batch.reshape({c}).to(running.dtype()), 1 - momentum));
        };
        return {make(y, ctx.input(0).type), make(moved(run_m, m), ctx.input(3).type),
                make(moved(run_v, v), ctx.input(4).type)};
    }
    const Tensor scale = per_channel(ctx.tensor(1).to(dt), r), bias = per_channel(ctx.tensor(2).to(dt), r);
    const Tensor m = per_channel(ctx.tensor(3).to(dt), r), v = per_channel(ctx.tensor(4).to(dt), r);
    const Tensor y = add(mul(mul(sub(x, m), rsqrt(add(v, eps))), scale), bias);
    return {make(y, ctx.input(0).type)};
}

std::vector<Value> instance_normalization(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    const double eps = ctx.attr_float("epsilon", 1e-5);
    std::vector<int64_t> axes;
    for (int64_t i = 2; i < x.rank(); ++i) axes.push_back(i);
    const Tensor m = mean(x, axes, true);
    const Tensor v = var(x, axes, 0, true);
    const Tensor y = add(mul(mul(sub(x, m), rsqrt(add(v, eps))), per_channel(ctx.tensor(1), x.rank())),
                         per_channel(ctx.tensor(2), x.rank()));
    return {make(y, ctx.input(0).type)};
}

std::vector<Value> mean_variance_normalization(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    std::vector<int64_t> axes = ctx.attr_ints("axes");
    if (!ctx.has_attr("axes")) axes = {0, 2, 3};
    for (auto &a : axes) a = normalize_axis(a, x.rank(), ctx);
    const Tensor m = mean(x, axes, true);
    const Tensor sd = sqrt(sub(mean(square(x), axes, true), square(m)));
    return {make(div(sub(x, m), add(sd, 1e-9)), ctx.input(0).type)};
}

// Local response normalization across channels: a window of `size` channels of squares.
std::vector<Value> lrn(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    const int64_t size = ctx.attr_int("size", 0);
    if (size <= 0 || x.rank() < 3) ctx.invalid("size must be positive and X of rank 3 or more");
    const double alpha = ctx.attr_float("alpha", 1e-4), beta = ctx.attr_float("beta", 0.75),
                 bias = ctx.attr_float("bias", 1.0);
    std::vector<int64_t> pads(2 * static_cast<std::size_t>(x.rank()), 0);
    pads[2] = (size - 1) / 2;
    pads[3] = size - 1 - (size - 1) / 2;
    const Tensor sq = pad(square(x), pads, 0);
    Tensor window = narrow(sq, 1, 0, x.size(1));
    for (int64_t i = 1; i < size; ++i) window = add(window, narrow(sq, 1, i, x.size(1)));
    return {make(div(x, pow(add(mul(window, alpha / static_cast<double>(size)), bias), beta)), ctx.input(0).type)};
}

// NegativeLogLikelihoodLoss over log-probabilities x [N, C, d...] and targets [N, d...]: each
// picked by a flat index (no 0 * -inf from a one-hot product), weighted, reduced.
Value nll_loss(const Ctx &ctx, const Tensor &x, const Tensor &target_in, const Tensor &weight, ElementType type) {
    if (x.rank() < 2 || target_in.rank() != x.rank() - 1) ctx.invalid("input must be [N, C, ...] and target [N, ...]");
    const int64_t c = x.size(1);
    const Tensor target = target_in.to(DType::i64);
    const bool has_ignore = ctx.has_attr("ignore_index");
    const int64_t ignore = ctx.attr_int("ignore_index", 0);
    const Tensor valid = has_ignore ? ne(target, scalar_like(target, static_cast<double>(ignore)))
                                    : full(target.shape(), 1, DType::boolean, ctx.device);
    const Tensor safe = where(valid, target, scalar_like(target, 0));
    // Classes last ([N, d..., C]), so element (n, d..., class) sits at flat (n, d...) * C + class.
    std::vector<int64_t> perm{0};
    for (int64_t i = 2; i < x.rank(); ++i) perm.push_back(i);
    perm.push_back(1);
    const Tensor rows = x.permute(perm).contiguous().reshape({-1, 1});
    const Tensor positions =
        arange(int64_t{0}, target.numel(), int64_t{1}, DType::i64, ctx.device).reshape(target.shape());
    const Tensor picked = embedding(rows, add(mul(positions, static_cast<double>(c)), safe)).reshape(target.shape());
    Tensor w = weight.defined() ? embedding(weight.reshape({-1, 1}), safe).reshape(target.shape())
                                : ones(target.shape(), x.dtype(), ctx.device);
    w = where(valid, w, scalar_like(w, 0));
    const Tensor loss = neg(mul(picked, w));
    const std::string reduction = ctx.attr_string("reduction", "mean");
    if (reduction == "none") return make(loss, type);
    if (reduction == "sum") return make(sum(loss), type);
    if (reduction != "mean") ctx.invalid("reduction '" + reduction + "' is not none, sum or mean");
    return make(div(sum(loss), sum(w)), type);
}

std::vector<Value> negative_log_likelihood_loss(Ctx &ctx) {
    require_float(ctx, 0);
    return {
        nll_loss(ctx, ctx.tensor(0), ctx.tensor(1), ctx.has_input(2) ? ctx.tensor(2) : Tensor(), ctx.input(0).type)};
}

std::vector<Value> softmax_cross_entropy_loss(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor log_prob = log_softmax(ctx.tensor(0), 1);
    std::vector<Value> out{
        nll_loss(ctx, log_prob, ctx.tensor(1), ctx.has_input(2) ? ctx.tensor(2) : Tensor(), ctx.input(0).type)};
    if (ctx.n_outputs > 1) out.push_back(make(log_prob, ctx.input(0).type));
    return out;
}

// Einsum of one or two operands: an ellipsis becomes labels of its own (right-aligned across
// operands, equal sizes), a label repeated within an operand takes the diagonal (a gather of
// flat indices i * n + i); labels only one side has are summed first; then batch, kept and contracted labels become one batched
// matmul [B, L, C] x [B, C, R], reshaped and permuted to the output's labels.
std::vector<Value> einsum(Ctx &ctx) {
    std::string eq = ctx.attr_string("equation", "");
    eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
    for (char c : eq)
        if (!std::isalpha(static_cast<unsigned char>(c)) && c != ',' && c != '-' && c != '>' && c != '.')
            ctx.invalid("equation '" + eq + "': labels are letters");
    std::size_t arrow = eq.find("->");
    const bool explicit_output = arrow != std::string::npos;
    // Ellipses: each operand's stands for its rank less its labels, the last of the labels
    // "0".."9" (digits are no ONNX label), so that they align on the right.
    if (eq.find("...") != std::string::npos) {
        std::vector<std::string> parts;
        const std::string lhs = eq.substr(0, explicit_output ? arrow : eq.size());
        for (std::size_t start = 0;;) {
            const std::size_t comma = lhs.find(',', start);
            parts.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
        if (parts.size() != ctx.n_inputs())
            ctx.invalid("the equation names " + std::to_string(parts.size()) + " operands");
        int64_t most = 0;
        std::vector<int64_t> counts;
        for (std::size_t i = 0; i < parts.size(); ++i) {
            const std::size_t dots = parts[i].find("...");
            const int64_t n =
                dots == std::string::npos ? 0 : ctx.tensor(i).rank() - static_cast<int64_t>(parts[i].size() - 3);
            if (n < 0 || n > 10 || (dots != std::string::npos && parts[i].find("...", dots + 1) != std::string::npos))
                ctx.invalid("operand " + std::to_string(i) + "'s ellipsis does not fit its rank");
            counts.push_back(n);
            most = std::max(most, n);
        }
        auto labels = [](int64_t n, int64_t most) {
            std::string out;
            for (int64_t k = most - n; k < most; ++k) out += static_cast<char>('0' + k);
            return out;
        };
        std::string rebuilt;
        for (std::size_t i = 0; i < parts.size(); ++i) {
            std::string part = parts[i];
            if (const std::size_t dots = part.find("..."); dots != std::string::npos)
                part.replace(dots, 3, labels(counts[i], most));
            rebuilt += (i ? "," : "") + part;
        }
        if (explicit_output) {
            std::string out = eq.substr(arrow + 2);
            if (const std::size_t dots = out.find("..."); dots != std::string::npos)
                out.replace(dots, 3, labels(most, most));
            eq = rebuilt + "->" + out;
        } else {
            eq = rebuilt;
        }
        arrow = eq.find("->");
    }
    if (arrow == std::string::npos) {
        // Implicit output: the ellipsis's labels, then the labels that appear once, in
        // alphabetical order.
        std::map<char, int> seen;
        for (char c : eq)
            if (c != ',') ++seen[c];
        std::string implicit;
        for (const auto &[c, n] : seen)
            if (n == 1 || (c >= '0' && c <= '9')) implicit += c;
        arrow = eq.size();
        eq += "->" + implicit;
    }
    const std::string out_labels = eq.substr(arrow + 2);
    std::vector<std::string> in_labels;
    for (std::size_t start = 0;;) {
        const std::size_t comma = eq.find(',', start);
        in_labels.push_back(eq.substr(start, std::min(comma, arrow) - start));
        if (comma == std::string::npos || comma > arrow) break;
        start = comma + 1;
    }
    if (in_labels.size() != ctx.n_inputs() || in_labels.size() > 2) ctx.unsupported("more than two operands");
    std::map<char, int64_t> sizes;
    std::vector<Tensor> ops;
    for (std::size_t i = 0; i < in_labels.size(); ++i) {
        require_float(ctx, i);
        Tensor t = ctx.tensor(i);
        std::string &l = in_labels[i];
        if (static_cast<int64_t>(l.size()) != t.rank())
            ctx.invalid("operand " + std::to_string(i) + " has rank " + std::to_string(t.rank()));
        for (std::size_t a = 0; a < l.size(); ++a) {
            const int64_t size = t.size(static_cast<int64_t>(a));
            if (auto known = sizes.find(l[a]); known != sizes.end() && known->second != size)
                ctx.invalid(std::string("label '") + l[a] + "' has sizes " + std::to_string(known->second) + " and " +
                            std::to_string(size));
            sizes[l[a]] = size;
        }
        // A repeated label: its two axes moved last, flattened, and the diagonal gathered.
        for (std::size_t a = 0; a < l.size(); ++a) {
            const std::size_t b = l.find(l[a], a + 1);
            if (b == std::string::npos) continue;
            std::vector<int64_t> perm;
            for (std::size_t k = 0; k < l.size(); ++k)
                if (k != a && k != b) perm.push_back(static_cast<int64_t>(k));
            perm.push_back(static_cast<int64_t>(a));
            perm.push_back(static_cast<int64_t>(b));
            const int64_t n = sizes[l[a]];
            Shape flat(t.shape().begin(), t.shape().end());
            Shape rest;
            for (std::size_t k = 0; k + 2 < perm.size(); ++k) rest.push_back(flat[static_cast<std::size_t>(perm[k])]);
            rest.push_back(n * n);
            std::vector<int64_t> diagonal;
            for (int64_t k = 0; k < n; ++k) diagonal.push_back(k * n + k);
            t = take(t.permute(perm).contiguous().reshape(rest), from_vector(diagonal, {n}, ctx.device),
                     static_cast<int64_t>(rest.size()) - 1);
            std::string kept;
            for (std::size_t k = 0; k + 2 < perm.size(); ++k) kept += l[static_cast<std::size_t>(perm[k])];
            l = kept + l[a];
            a = static_cast<std::size_t>(-1);  // again from the start: the axes moved
        }
        ops.push_back(t);
    }
    auto has = [](const std::string &s, char c) { return s.find(c) != std::string::npos; };
    // Sum labels that neither the output nor the other operand has.
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const std::string other = ops.size() == 2 ? in_labels[1 - i] : "";
        std::vector<int64_t> axes;
        std::string kept;
        for (std::size_t a = 0; a < in_labels[i].size(); ++a) {
            const char c = in_labels[i][a];
            if (!has(out_labels, c) && !has(other, c))
                axes.push_back(static_cast<int64_t>(a));
            else
                kept += c;
        }
        if (!axes.empty()) ops[i] = sum(ops[i], axes, false);
        in_labels[i] = kept;
    }
    auto permuted = [&](const Tensor &t, const std::string &from, const std::string &to) {
        std::vector<int64_t> perm;
        for (char c : to) perm.push_back(static_cast<int64_t>(from.find(c)));
        return t.permute(perm);
    };
    Tensor y;
    std::string y_labels;
    if (ops.size() == 1) {
        y = ops[0];
        y_labels = in_labels[0];
    } else {
        const std::string &a = in_labels[0], &b = in_labels[1];
        std::string batch, left, contracted, right;
        for (char c : a) {
            if (has(b, c))
                (has(out_labels, c) ? batch : contracted) += c;
            else
                left += c;
        }
        for (char c : b)
            if (!has(a, c)) right += c;
        auto count = [&](const std::string &ls) {
            int64_t n = 1;
            for (char c : ls) n *= sizes[c];
            return n;
        };
        const Tensor lhs =
            permuted(ops[0], a, batch + left + contracted).reshape({count(batch), count(left), count(contracted)});
        const Tensor rhs =
            permuted(ops[1], b, batch + contracted + right).reshape({count(batch), count(contracted), count(right)});
        Shape shape;
        for (char c : batch + left + right) shape.push_back(sizes[c]);
        y = matmul(lhs, rhs).reshape(shape);
        y_labels = batch + left + right;
    }
    for (char c : out_labels)
        if (!has(y_labels, c)) ctx.invalid(std::string("output label '") + c + "' is in no operand");
    return {make(permuted(y, y_labels, out_labels).contiguous(), ctx.input(0).type)};
}

constexpr OpRow rows[] = {
    {"MatMul", 1, 13, matmul_op},
    {"Einsum", 12, 12, einsum},
    {"Gemm", 7, 13, gemm},
    {"Conv", 1, 11, conv},
    {"ConvTranspose", 1, 11, conv_transpose},
    {"MaxPool", 1, 12, pool<true>},
    {"AveragePool", 7, 11, pool<false>},
    {"GlobalAveragePool", 1, 1, global_pool<false>},
    {"GlobalMaxPool", 1, 1, global_pool<true>},
    {"Softmax", 1, 13, softmax_family<softmax>},
    {"LogSoftmax", 1, 13, softmax_family<log_softmax>},
    {"Hardmax", 1, 13, softmax_family<hardmax_of>},
    {"LayerNormalization", 17, 17, layer_normalization},
    {"BatchNormalization", 7, 15, batch_normalization},
    {"InstanceNormalization", 6, 6, instance_normalization},
    {"MeanVarianceNormalization", 9, 13, mean_variance_normalization},
    {"LRN", 1, 13, lrn},
    {"NegativeLogLikelihoodLoss", 12, 13, negative_log_likelihood_loss},
    {"SoftmaxCrossEntropyLoss", 12, 13, softmax_cross_entropy_loss},
};

}  // namespace

std::span<const OpRow> nn_ops() { return rows; }

}  // namespace tinyfin::onnx::detail
