// Neural-network ops: convolution, pooling, softmax, norms, rope, attention,
// embedding, cross-entropy, one-hot.
#include <array>
#include <cmath>

#include "autocast.hpp"
#include "attention_backward.hpp"
#include "layer_norm_backward.hpp"
#include "ops_common.hpp"

namespace tinyfin {

using namespace detail;

namespace {

void require_rank(const Tensor &t, int rank, const char *op, const char *what) {
    if (t.rank() != rank)
        raise<ShapeError>(std::string(op) + ": " + what + " must have rank " + std::to_string(rank) + ", got shape " +
                          shape_str(t.shape()));
}

void require_float(const Tensor &t, const char *op) {
    if (!is_float(t.dtype()))
        raise<DTypeError>(std::string(op) + ": needs a float tensor, got " + dtype_name(t.dtype()));
}

void require_integer(const Tensor &t, const char *op, const char *what) {
    if (!is_integer(t.dtype()))
        raise<DTypeError>(std::string(op) + ": " + what + " must be i32 or i64, got " + dtype_name(t.dtype()));
}

void require_same_dtype(const Tensor &a, const Tensor &b, const char *op) {
    if (a.dtype() != b.dtype())
        raise<DTypeError>(std::string(op) + ": dtypes " + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) +
                          " differ");
}

int64_t conv_out_size(int64_t in, int64_t kernel, int stride, int pad, int dilation) {
    int64_t span = static_cast<int64_t>(dilation) * (kernel - 1) + 1;
    int64_t padded = in + 2 * static_cast<int64_t>(pad);
    return padded < span ? 0 : (padded - span) / stride + 1;
}

// dy: gradient of a conv2d output; returns dx of shape x_shape.
Tensor conv2d_grad_input(const Tensor &dy, const Tensor &w, const Shape &x_shape, const tf_params_conv2d &p) {
    Tensor dx = empty_like_device(dy, x_shape, dy.dtype());
    dispatch(TF_OP_CONV2D_GRAD_INPUT, {dy, w}, {dx}, &p);
    return dx;
}

Tensor conv2d_grad_weight(const Tensor &dy, const Tensor &x, const Shape &w_shape, const tf_params_conv2d &p) {
    Tensor dw = empty_like_device(dy, w_shape, dy.dtype());
    dispatch(TF_OP_CONV2D_GRAD_WEIGHT, {dy, x}, {dw}, &p);
    return dw;
}

tf_params_pool2d pool_params(const Tensor &x, const Pool2dOptions &o, const char *op) {
    require_rank(x, 4, op, "input");
    tf_params_pool2d p{sizeof(tf_params_pool2d),
                       {o.kernel_h, o.kernel_w},
                       {o.stride_h ? o.stride_h : o.kernel_h, o.stride_w ? o.stride_w : o.kernel_w},
                       {o.pad_h, o.pad_w},
                       o.count_include_pad ? 1 : 0};
    if (p.kernel[0] < 1 || p.kernel[1] < 1 || p.stride[0] < 1 || p.stride[1] < 1 || p.padding[0] < 0 ||
        p.padding[1] < 0 || p.padding[0] > p.kernel[0] / 2 ||
        p.padding[1] > p.kernel[1] / 2)  // not padding * 2 > kernel: that overflows int
        raise<ValueError>(std::string(op) + ": invalid kernel " + std::to_string(p.kernel[0]) + "x" +
                          std::to_string(p.kernel[1]) + ", stride " + std::to_string(p.stride[0]) + "x" +
                          std::to_string(p.stride[1]) + ", padding " + std::to_string(p.padding[0]) + "x" +
                          std::to_string(p.padding[1]) + " (kernel and stride >= 1, 0 <= padding <= kernel/2)");
    return p;
}

Shape pool_out_shape(const Tensor &x, const tf_params_pool2d &p, const char *op) {
    int64_t oh = conv_out_size(x.size(2), p.kernel[0], p.stride[0], p.padding[0], 1);
    int64_t ow = conv_out_size(x.size(3), p.kernel[1], p.stride[1], p.padding[1], 1);
    if (oh <= 0 || ow <= 0)
        raise<ShapeError>(std::string(op) + ": input " + shape_str(x.shape()) + " is smaller than the " +
                          std::to_string(p.kernel[0]) + "x" + std::to_string(p.kernel[1]) + " window");
    return {x.size(0), x.size(1), oh, ow};
}

// One axis of a pooling window as torch sizes it, dilation and ceil_mode included.
struct PoolAxis {
    int64_t out;  // output size
    int64_t extra;  // positions past the right padding that the last window reaches (ceil_mode)
};

PoolAxis pool_axis(int64_t in, int kernel, int stride, int pad, int dilation, bool ceil_mode, const Tensor &x,
                   const char *op) {
    int64_t span = static_cast<int64_t>(dilation) * (kernel - 1) + 1;
    int64_t padded = in + 2 * static_cast<int64_t>(pad);
    if (padded < span)
        raise<ShapeError>(std::string(op) + ": input " + shape_str(x.shape()) + " with padding " + std::to_string(pad) +
                          " is smaller than the window of " + std::to_string(span) + " positions");
    int64_t out = (padded - span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
    // torch: the last window must start inside the input or the left padding.
    if (ceil_mode && (out - 1) * stride >= in + pad) --out;
    int64_t reach = (out - 1) * stride + span;
    return {out, reach > padded ? reach - padded : 0};
}

}  // namespace

namespace {

// max_pool2d with dilation or a ceil_mode overhang, from primitives: the input padded with -inf
// (padding never wins), then the maximum over the kernel's strided views. Ties share the
// gradient here, where the plugins' max_pool2d gives it all to the first maximum.
Tensor max_pool2d_composed(const Tensor &x, const Pool2dOptions &o, int sh, int sw, const PoolAxis &ah,
                           const PoolAxis &aw) {
    Tensor xp = pad(x, {0, 0, 0, 0, o.pad_h, o.pad_h + ah.extra, o.pad_w, o.pad_w + aw.extra}, -INFINITY);
    Tensor y;
    for (int a = 0; a < o.kernel_h; ++a)
        for (int b = 0; b < o.kernel_w; ++b) {
            int64_t h0 = static_cast<int64_t>(a) * o.dilation_h, w0 = static_cast<int64_t>(b) * o.dilation_w;
            Tensor tap = xp.slice(2, h0, h0 + (ah.out - 1) * sh + 1, sh).slice(3, w0, w0 + (aw.out - 1) * sw + 1, sw);
            y = y.defined() ? maximum(y, tap) : tap.contiguous();
        }
    return y;
}

// avg_pool2d with a ceil_mode overhang: window sums of the zero-padded input over a divisor map
// that counts what torch counts (the padding when count_include_pad, never the overhang).
Tensor avg_pool2d_composed(const Tensor &x, const Pool2dOptions &o, int sh, int sw, const PoolAxis &ah,
                           const PoolAxis &aw) {
    Pool2dOptions plain;
    plain.kernel_h = o.kernel_h;
    plain.kernel_w = o.kernel_w;
    plain.stride_h = sh;
    plain.stride_w = sw;
    Tensor xp = pad(x, {0, 0, 0, 0, o.pad_h, o.pad_h + ah.extra, o.pad_w, o.pad_w + aw.extra}, 0);
    Tensor counted;
    {
        NoGradGuard no_grad;
        Tensor ones_map = ones({1, 1, x.size(2), x.size(3)}, x.dtype(), x.device());
        counted = pad(ones_map, {0, 0, 0, 0, o.pad_h, o.pad_h, o.pad_w, o.pad_w}, o.count_include_pad ? 1.0 : 0.0);
        counted = pad(counted, {0, 0, 0, 0, 0, ah.extra, 0, aw.extra}, 0);
        counted = avg_pool2d(counted, plain);
    }
    return div(avg_pool2d(xp, plain), counted);
}

}  // namespace

namespace {

// conv2d without its bias, recorded for autograd: y [out_shape] of x's dtype.
Tensor conv2d_product(const Tensor &x, const Tensor &weight, const Shape &out_shape, const tf_params_conv2d &p) {
    Tensor xx = x, ww = weight;
    place_together({&xx, &ww}, "conv2d");
    Tensor y = empty_like_device(xx, out_shape, x.dtype());
    dispatch(TF_OP_CONV2D, {xx, ww}, {y}, &p);
    return record(y, {&x, &weight}, op_info(TF_OP_CONV2D).name, [&] {
        return [x = xx.detach(), w = ww.detach(), p](const Tensor &g) -> std::vector<Tensor> {
            // The first layer's input is data: no grad_input for it.
            return {input_needs_grad(0) ? conv2d_grad_input(g, w, x.shape(), p) : Tensor(),
                    input_needs_grad(1) ? conv2d_grad_weight(g, x, w.shape(), p) : Tensor()};
        };
    });
}

// The conv2d_act op on f32 operands that need no gradient, when the backend of the output
// claims it (dispatch_if_claimed: never a host round trip); undefined otherwise, and the caller
// composes conv2d, add and the activation (the same values).
Tensor conv2d_fused(const Tensor &x, const Tensor &weight, const Tensor &bias, const Shape &out_shape,
                    const tf_params_conv2d &c, int32_t activation, double min, double max,
                    const Tensor &residual = Tensor()) {
    if (x.dtype() != DType::f32 || any_needs_grad({&x, &weight, &bias, &residual})) return Tensor();
    Tensor xx = x, ww = weight, bb = bias, rr = residual;
    place_together({&xx, &ww, &bb, &rr}, "conv2d");  // skips the undefined bias or residual
    if (!may_claim(TF_OP_CONV2D_ACT, *xx.impl(), DType::f32)) return Tensor();
    Tensor y = empty_like_device(xx, out_shape, x.dtype());
    const TensorImpl no_bias = bb.defined() ? TensorImpl() : absent_input(x.dtype(), {out_shape[1]});
    const TensorImpl no_residual = rr.defined() ? TensorImpl() : absent_input(x.dtype(), out_shape);
    const TensorImpl *inputs[] = {xx.impl(), ww.impl(), bb.defined() ? bb.impl() : &no_bias,
                                  rr.defined() ? rr.impl() : &no_residual};
    const TensorImpl *outputs[] = {y.impl()};
    tf_params_conv2d_act p{sizeof(tf_params_conv2d_act),
                           {c.stride[0], c.stride[1]},
                           {c.padding[0], c.padding[1]},
                           {c.dilation[0], c.dilation[1]},
                           c.groups,
                           activation,
                           min,
                           max};
    if (!dispatch_if_claimed(TF_OP_CONV2D_ACT, inputs, outputs, &p)) return Tensor();
    return y;
}

}  // namespace

Tensor conv2d_activation(const Tensor &x, const Tensor &weight, const Tensor &bias, const Conv2dOptions &o,
                         Conv2dActivation activation, double min, double max, const Tensor &residual) {
    const char *op = op_info(TF_OP_CONV2D_ACT).name;
    if (activation == Conv2dActivation::clip && (std::isnan(min) || std::isnan(max)))
        raise<ValueError>(std::string(op) + ": clip bounds must not be NaN");
    const auto compose = [&] {
        Tensor y = conv2d(x, weight, bias, o);
        if (residual.defined()) y = add(y, residual);
        if (activation == Conv2dActivation::relu) return relu(y);
        if (activation == Conv2dActivation::clip) return minimum(maximum(y, min), max);
        return y;
    };
    if (autocast_scope >= 0 || !x.defined() || !weight.defined() || x.rank() != 4 || weight.rank() != 4 ||
        x.dtype() != DType::f32 || weight.dtype() != DType::f32 || (bias.defined() && bias.dtype() != DType::f32) ||
        (bias.defined() && (bias.rank() != 1 || bias.size(0) != weight.size(0))) || o.stride_h < 1 || o.stride_w < 1 ||
        o.dilation_h < 1 || o.dilation_w < 1 || o.pad_h < 0 || o.pad_w < 0 || o.groups < 1 || weight.size(2) < 1 ||
        weight.size(3) < 1 || x.size(1) != weight.size(1) * o.groups || weight.size(0) % o.groups != 0)
        return compose();  // conv2d's own checks and messages, autocast and autograd
    const int64_t oh = conv_out_size(x.size(2), weight.size(2), o.stride_h, o.pad_h, o.dilation_h);
    const int64_t ow = conv_out_size(x.size(3), weight.size(3), o.stride_w, o.pad_w, o.dilation_w);
    if (oh <= 0 || ow <= 0) return compose();
    if (residual.defined() &&
        (residual.dtype() != DType::f32 || residual.shape() != Shape{x.size(0), weight.size(0), oh, ow}))
        return compose();  // add's broadcasting and dtype rules
    const tf_params_conv2d p{
        sizeof(tf_params_conv2d), {o.stride_h, o.stride_w}, {o.pad_h, o.pad_w}, {o.dilation_h, o.dilation_w}, o.groups};
    const int32_t kind = activation == Conv2dActivation::relu   ? TF_CONV_ACT_RELU
                         : activation == Conv2dActivation::clip ? TF_CONV_ACT_CLIP
                                                                : TF_CONV_ACT_NONE;
    if (Tensor y = conv2d_fused(x, weight, bias, {x.size(0), weight.size(0), oh, ow}, p, kind, min, max, residual);
        y.defined())
        return y;
    return compose();
}

Tensor conv2d(const Tensor &x, const Tensor &weight, const Tensor &bias, const Conv2dOptions &o) {
    if (Autocast cast{"conv2d", {&x, &weight, &bias}}) return conv2d(cast[0], cast[1], cast[2], o);
    const char *op = op_info(TF_OP_CONV2D).name;
    impl_of(x, op);
    impl_of(weight, op);
    require_rank(x, 4, op, "input");
    require_rank(weight, 4, op, "weight");
    require_float(x, op);
    require_same_dtype(x, weight, op);
    if (o.stride_h < 1 || o.stride_w < 1 || o.dilation_h < 1 || o.dilation_w < 1 || o.pad_h < 0 || o.pad_w < 0 ||
        o.groups < 1)
        raise<ValueError>(std::string(op) +
                          ": stride and dilation must be >= 1, padding >= 0, groups >= 1 (got "
                          "stride " +
                          std::to_string(o.stride_h) + "x" + std::to_string(o.stride_w) + ", padding " +
                          std::to_string(o.pad_h) + "x" + std::to_string(o.pad_w) + ", dilation " +
                          std::to_string(o.dilation_h) + "x" + std::to_string(o.dilation_w) + ", groups " +
                          std::to_string(o.groups) + ")");
    // A 0-tap kernel has no output size (the extent formula would grow the input by the dilation).
    if (weight.size(2) < 1 || weight.size(3) < 1)
        raise<ShapeError>(std::string(op) + ": weight " + shape_str(weight.shape()) +
                          " has an empty kernel; kernel height and width must be >= 1");
    int64_t n = x.size(0), c = x.size(1), oc = weight.size(0), icg = weight.size(1);
    if (c % o.groups != 0 || oc % o.groups != 0 || icg * o.groups != c)
        raise<ShapeError>(std::string(op) + ": input " + shape_str(x.shape()) + " and weight " +
                          shape_str(weight.shape()) + " do not fit groups=" + std::to_string(o.groups) +
                          " (need C = weight[1] * groups and O divisible by groups)");
    int64_t oh = conv_out_size(x.size(2), weight.size(2), o.stride_h, o.pad_h, o.dilation_h);
    int64_t ow = conv_out_size(x.size(3), weight.size(3), o.stride_w, o.pad_w, o.dilation_w);
    if (oh <= 0 || ow <= 0)
        raise<ShapeError>(std::string(op) + ": input " + shape_str(x.shape()) + " with padding " +
                          std::to_string(o.pad_h) + "x" + std::to_string(o.pad_w) +
                          " is smaller than the dilated kernel of weight " + shape_str(weight.shape()));
    if (bias.defined()) {
        if (bias.rank() != 1 || bias.size(0) != oc)
            raise<ShapeError>(std::string(op) + ": bias must have shape [" + std::to_string(oc) + "], got " +
                              shape_str(bias.shape()));
        require_same_dtype(x, bias, op);
    }
    tf_params_conv2d p{
        sizeof(tf_params_conv2d), {o.stride_h, o.stride_w}, {o.pad_h, o.pad_w}, {o.dilation_h, o.dilation_w}, o.groups};
    if (!bias.defined()) return conv2d_product(x, weight, {n, oc, oh, ow}, p);
    if (x.dtype() == DType::f32) {
        // Without autograd the bias goes into the convolution's store where the backend fuses it.
        if (Tensor y = conv2d_fused(x, weight, bias, {n, oc, oh, ow}, p, TF_CONV_ACT_NONE, 0, 0); y.defined()) return y;
        return add(conv2d_product(x, weight, {n, oc, oh, ow}, p), bias.view({1, oc, 1, 1}));
    }
    // f16/bf16 with a bias: the convolution in f32 on the converted operands (what every backend
    // computes inside anyway), the bias added in f32 and the sum rounded once. A bf16 convolution
    // followed by a bf16 add rounds twice (issue 31). The gradients come back through the casts,
    // so they too are f32 sums rounded once.
    Tensor y = conv2d_product(cast(x, DType::f32), cast(weight, DType::f32), {n, oc, oh, ow}, p);
    return cast(add(y, cast(bias, DType::f32).view({1, oc, 1, 1})), x.dtype());
}

namespace {

// The matmul_bias op, x [..., M, K] w [K, N] + bias [N], on f32 operands that need no gradient,
// when the backend of the output claims it (dispatch_if_claimed: never a host round trip);
// undefined otherwise, and the caller composes matmul and add (the same values).
Tensor matmul_bias_fused(const Tensor &x, const Tensor &w, const Tensor &bias) {
    if (autocast_scope >= 0 || x.rank() < 2 || w.rank() != 2 || bias.rank() != 1 || x.dtype() != DType::f32 ||
        w.dtype() != DType::f32 || bias.dtype() != DType::f32 || x.size(-1) != w.size(0) || bias.size(0) != w.size(1) ||
        any_needs_grad({&x, &w, &bias}))
        return Tensor();
    Tensor xx = x, ww = w, bb = bias;
    place_together({&xx, &ww, &bb}, "linear");
    if (!may_claim(TF_OP_MATMUL_BIAS, *xx.impl(), DType::f32)) return Tensor();
    Shape shape = x.shape();
    shape.back() = w.size(1);
    Tensor y = empty_like_device(xx, shape, x.dtype());
    if (y.numel() == 0) return y;
    const TensorImpl *inputs[] = {xx.impl(), ww.impl(), bb.impl()};
    const TensorImpl *outputs[] = {y.impl()};
    if (!dispatch_if_claimed(TF_OP_MATMUL_BIAS, inputs, outputs, nullptr)) return Tensor();
    return y;
}

}  // namespace

Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias) {
    if (Autocast cast{"linear", {&x, &weight, &bias}}) return linear(cast[0], cast[1], cast[2]);
    impl_of(x, "linear");
    impl_of(weight, "linear");
    require_rank(weight, 2, "linear", "weight");
    int64_t in = weight.size(1), out_features = weight.size(0);
    if (x.rank() < 1 || x.size(-1) != in)
        raise<ShapeError>("linear: input of shape " + shape_str(x.shape()) + " does not end in " + std::to_string(in) +
                          " (weight " + shape_str(weight.shape()) + ")");
    if (bias.defined() && (bias.rank() != 1 || bias.size(0) != out_features))
        raise<ShapeError>("linear: bias must have shape [" + std::to_string(out_features) + "], got " +
                          shape_str(bias.shape()));
    if (bias.defined() && x.dtype() != DType::f32 && is_float(x.dtype())) {
        // f16/bf16: the bias as one more term of each dot product, [x, 1] [W, b]^T, so it is
        // summed in f32 with the products and the result rounded once (a product rounded to bf16
        // and then added to the bias rounds twice, issue 31); its gradient, the sum of the
        // output's gradient over the rows, is likewise one product rounded once.
        require_same_dtype(x, bias, "linear");
        Shape ones_shape = x.shape();
        ones_shape.back() = 1;
        Tensor with_one = concat({x, ones(ones_shape, x.dtype(), x.device())}, -1);
        return linear(with_one, concat({weight, bias.view({out_features, 1})}, 1), Tensor());
    }
    // Without autograd the bias goes into the product's store where the backend fuses it.
    if (bias.defined())
        if (Tensor y = matmul_bias_fused(x, weight.transpose(0, 1), bias); y.defined()) return y;
    Tensor y;
    if (x.rank() != 2) {
        y = matmul(x, weight.transpose(0, 1));
    } else {
        // y = x W^T recorded as one node rather than as a transpose and a matmul: the weight's
        // gradient is then g^T x, laid out like the weight, where the transpose's backward handed
        // the leaf a transposed view that had to be copied (400,000 floats a step in the example
        // CNN). The same products summed in the same order as (x^T g)^T, so the same values.
        {
            NoGradGuard no_grad;
            y = matmul(x, weight.transpose(0, 1));
        }
        y = record(y, {&x, &weight}, "linear", [&] {
            return [x = x.detach(), w = weight.detach()](const Tensor &g) -> std::vector<Tensor> {
                return {input_needs_grad(0) ? matmul(g, w) : Tensor(),
                        input_needs_grad(1) ? matmul(g.transpose(0, 1), x) : Tensor()};
            };
        });
    }
    return bias.defined() ? add(y, bias) : y;
}

Tensor max_pool2d(const Tensor &x, const Pool2dOptions &options) {
    const char *op = op_info(TF_OP_MAX_POOL2D).name;
    impl_of(x, op);
    tf_params_pool2d p = pool_params(x, options, op);
    if (options.dilation_h < 1 || options.dilation_w < 1)
        raise<ValueError>(std::string(op) + ": dilation must be >= 1, got " + std::to_string(options.dilation_h) + "x" +
                          std::to_string(options.dilation_w));
    PoolAxis ah =
        pool_axis(x.size(2), p.kernel[0], p.stride[0], p.padding[0], options.dilation_h, options.ceil_mode, x, op);
    PoolAxis aw =
        pool_axis(x.size(3), p.kernel[1], p.stride[1], p.padding[1], options.dilation_w, options.ceil_mode, x, op);
    if (options.dilation_h != 1 || options.dilation_w != 1 || ah.extra || aw.extra)
        return max_pool2d_composed(x, options, p.stride[0], p.stride[1], ah, aw);
    Tensor y = empty_like_device(x, pool_out_shape(x, p, op), x.dtype());
    dispatch(TF_OP_MAX_POOL2D, {x}, {y}, &p);
    return record(y, {&x}, op, [&] {
        return [x = x.detach(), p](const Tensor &g) -> std::vector<Tensor> {
            Tensor dx = empty_like_device(g, x.shape(), g.dtype());
            dispatch(TF_OP_MAX_POOL2D_BACKWARD, {g, x}, {dx}, &p);
            return {dx};
        };
    });
}

Tensor avg_pool2d(const Tensor &x, const Pool2dOptions &options) {
    const char *op = op_info(TF_OP_AVG_POOL2D).name;
    impl_of(x, op);
    tf_params_pool2d p = pool_params(x, options, op);
    if (options.dilation_h != 1 || options.dilation_w != 1)
        raise<ValueError>(std::string(op) + ": has no dilation (like torch); got " +
                          std::to_string(options.dilation_h) + "x" + std::to_string(options.dilation_w));
    PoolAxis ah = pool_axis(x.size(2), p.kernel[0], p.stride[0], p.padding[0], 1, options.ceil_mode, x, op);
    PoolAxis aw = pool_axis(x.size(3), p.kernel[1], p.stride[1], p.padding[1], 1, options.ceil_mode, x, op);
    if (ah.extra || aw.extra) return avg_pool2d_composed(x, options, p.stride[0], p.stride[1], ah, aw);
    Tensor y = empty_like_device(x, pool_out_shape(x, p, op), x.dtype());
    dispatch(TF_OP_AVG_POOL2D, {x}, {y}, &p);
    return record(y, {&x}, op, [&] {
        return [shape = x.shape(), p](const Tensor &g) -> std::vector<Tensor> {
            Tensor dx = empty_like_device(g, shape, g.dtype());
            dispatch(TF_OP_AVG_POOL2D_BACKWARD, {g}, {dx}, &p);
            return {dx};
        };
    });
}

static Tensor softmax_like(tf_op op, const char *name, const Tensor &x, int64_t axis) {
    impl_of(x, name);
    require_float(x, name);
    if (x.rank() == 0) raise<ShapeError>(std::string(name) + ": needs rank >= 1");
    int ax = normalize_axis(axis, x.rank(), name);
    tf_params_axis p{sizeof(tf_params_axis), ax};
    Tensor y = empty_like_device(x, x.shape(), x.dtype());
    dispatch(op, {x}, {y}, &p);
    return y;
}

Tensor softmax(const Tensor &x, int64_t axis) {
    if (Autocast cast{"softmax", {&x}}) return softmax(cast[0], axis);
    Tensor y = softmax_like(TF_OP_SOFTMAX, "softmax", x, axis);
    int ax = normalize_axis(axis, x.rank(), "softmax");
    return record(y, {&x}, "softmax", [&] {
        return [y = y.detach(), ax](const Tensor &g) -> std::vector<Tensor> {
            return {mul(y, sub(g, sum(mul(g, y), {ax}, true)))};
        };
    });
}

Tensor log_softmax(const Tensor &x, int64_t axis) {
    if (Autocast cast{"log_softmax", {&x}}) return log_softmax(cast[0], axis);
    Tensor y = softmax_like(TF_OP_LOG_SOFTMAX, "log_softmax", x, axis);
    int ax = normalize_axis(axis, x.rank(), "log_softmax");
    return record(y, {&x}, "log_softmax", [&] {
        return [y = y.detach(), ax](const Tensor &g) -> std::vector<Tensor> {
            return {sub(g, mul(exp(y), sum(g, {ax}, true)))};
        };
    });
}

namespace {

// Axes list of the last n axes of a rank-r tensor.
std::vector<int> last_axes(int rank, int n) {
    std::vector<int> axes;
    for (int i = rank - n; i < rank; ++i) axes.push_back(i);
    return axes;
}

Shape norm_shape(const Tensor &x, int n_axes, const char *op) {
    if (n_axes < 1 || n_axes > x.rank())
        raise<ShapeError>(std::string(op) + ": cannot normalise the last " + std::to_string(n_axes) +
                          " axes of shape " + shape_str(x.shape()));
    return Shape(x.shape().end() - n_axes, x.shape().end());
}

Tensor affine_or_ones(const Tensor &t, const Tensor &x, const Shape &shape, double fill, const char *op,
                      const char *what) {
    if (!t.defined()) return full(shape, fill, x.dtype(), x.device());
    if (t.shape() != shape)
        raise<ShapeError>(std::string(op) + ": " + what + " must have shape " + shape_str(shape) + ", got " +
                          shape_str(t.shape()));
    require_same_dtype(t, x, op);
    if (t.device() != x.device() && mixed_devices() == MixedDevices::strict)
        raise<DeviceError>(std::string(op) + ": " + what + " is on " + t.device().str() + ", the input on " +
                           x.device().str() + "; move one with .to(device)");
    return t.to(x.device());
}

}  // namespace

namespace {

// A composed backward of f16/bf16 operands (x, w, g) evaluated in f32, each gradient rounded once
// to its operand's dtype at the end: in the operands' dtype every product of the weight's
// gradient (g xhat) would be rounded before the sum over rows, and every intermediate of dx too.
template <class F>
std::vector<Tensor> in_f32(const std::array<Tensor, 3> &xwg, F formula) {
    const auto &[x, w, g] = xwg;
    if (x.dtype() == DType::f32) return formula(x, w, g);
    std::vector<Tensor> grads = formula(cast(x, DType::f32), cast(w, DType::f32), cast(g, DType::f32));
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = cast(grads[i], i == 0 ? x.dtype() : w.dtype());
    return grads;
}

}  // namespace

Tensor layer_norm(const Tensor &x, int n_axes, const Tensor &weight, const Tensor &bias, double eps) {
    if (Autocast cast{"layer_norm", {&x, &weight, &bias}}) return layer_norm(cast[0], n_axes, cast[1], cast[2], eps);
    const char *op = op_info(TF_OP_LAYER_NORM).name;
    impl_of(x, op);
    require_float(x, op);
    Shape s = norm_shape(x, n_axes, op);
    Tensor w = affine_or_ones(weight, x, s, 1.0, op, "weight");
    Tensor b = affine_or_ones(bias, x, s, 0.0, op, "bias");
    tf_params_norm p{sizeof(tf_params_norm), n_axes, eps};
    Tensor y = empty_like_device(x, x.shape(), x.dtype());
    dispatch(TF_OP_LAYER_NORM, {x, w.detach(), b.detach()}, {y}, &p);
    return record(y, {&x, &weight, &bias}, op, [&] {
        return [x = x.detach(), w = w.detach(), n_axes, eps](const Tensor &g) -> std::vector<Tensor> {
            // One op where the plugin has a kernel for it (about 14 ops over x's shape otherwise).
            if (auto fused = layer_norm_backward_fused(x, w, g, n_axes, eps)) return std::move(*fused);
            return in_f32({x, w, g}, [&](const Tensor &x, const Tensor &w, const Tensor &g) -> std::vector<Tensor> {
                std::vector<int> axes = last_axes(x.rank(), n_axes);
                Tensor mu = mean(x, axes, true);
                Tensor rstd = rsqrt(add(var(x, axes, 0, true), constant_like(x, eps)));
                Tensor xhat = mul(sub(x, mu), rstd);
                Tensor gxhat = mul(g, w);
                Tensor gx =
                    mul(rstd, sub(sub(gxhat, mean(gxhat, axes, true)), mul(xhat, mean(mul(gxhat, xhat), axes, true))));
                return {gx, sum_to(mul(g, xhat), w.shape()), sum_to(g, w.shape())};
            });
        };
    });
}

Tensor rms_norm(const Tensor &x, int n_axes, const Tensor &weight, double eps) {
    if (Autocast cast{"rms_norm", {&x, &weight}}) return rms_norm(cast[0], n_axes, cast[1], eps);
    const char *op = op_info(TF_OP_RMS_NORM).name;
    impl_of(x, op);
    require_float(x, op);
    Shape s = norm_shape(x, n_axes, op);
    Tensor w = affine_or_ones(weight, x, s, 1.0, op, "weight");
    tf_params_norm p{sizeof(tf_params_norm), n_axes, eps};
    Tensor y = empty_like_device(x, x.shape(), x.dtype());
    dispatch(TF_OP_RMS_NORM, {x, w.detach()}, {y}, &p);
    return record(y, {&x, &weight}, op, [&] {
        return [x = x.detach(), w = w.detach(), n_axes, eps](const Tensor &g) -> std::vector<Tensor> {
            return in_f32({x, w, g}, [&](const Tensor &x, const Tensor &w, const Tensor &g) -> std::vector<Tensor> {
                std::vector<int> axes = last_axes(x.rank(), n_axes);
                Tensor r = rsqrt(add(mean(square(x), axes, true), constant_like(x, eps)));
                Tensor gxhat = mul(g, w);
                Tensor gx = mul(r, sub(gxhat, mul(mul(x, square(r)), mean(mul(gxhat, x), axes, true))));
                return {gx, sum_to(mul(g, mul(x, r)), w.shape())};
            });
        };
    });
}

static Tensor rope_raw(const Tensor &x, double theta, bool interleaved, int64_t offset, bool inverse) {
    tf_params_rope p{sizeof(tf_params_rope), interleaved ? 1 : 0, inverse ? 1 : 0, theta, offset};
    Tensor y = empty_like_device(x, x.shape(), x.dtype());
    dispatch(TF_OP_ROPE, {x}, {y}, &p);
    return y;
}

Tensor rope(const Tensor &x, double theta, bool interleaved, int64_t position_offset, int64_t seq_axis) {
    const char *op = op_info(TF_OP_ROPE).name;
    impl_of(x, op);
    require_float(x, op);
    if (x.rank() < 2 || x.size(-1) % 2 != 0)
        raise<ShapeError>(std::string(op) + ": input must be [..., T, D] with D even, got " + shape_str(x.shape()));
    if (!(theta > 0)) raise<ValueError>(std::string(op) + ": theta must be positive, got " + std::to_string(theta));
    int ax = normalize_axis(seq_axis, x.rank(), op);
    if (ax == x.rank() - 1)
        raise<ShapeError>(std::string(op) + ": seq_axis " + std::to_string(seq_axis) + " is the feature axis of " +
                          shape_str(x.shape()) + "; the sequence must be another axis");
    if (ax != x.rank() - 2) {
        // The rotation depends only on (position, feature): swapping the sequence axis with -2
        // makes every other axis a batch axis, and swapping back restores the layout.
        Tensor moved = x.transpose(ax, -2).contiguous();
        return rope(moved, theta, interleaved, position_offset, -2).transpose(ax, -2);
    }
    Tensor y = rope_raw(x, theta, interleaved, position_offset, false);
    return record(y, {&x}, op, [&] {
        return [theta, interleaved, position_offset](const Tensor &g) -> std::vector<Tensor> {
            // A rotation's gradient is the inverse rotation.
            return {rope_raw(g, theta, interleaved, position_offset, true)};
        };
    });
}

Tensor rope(const Tensor &x, const Tensor &positions, double theta, bool interleaved, int64_t seq_axis) {
    const char *op = op_info(TF_OP_ROPE).name;
    impl_of(x, op);
    impl_of(positions, op);
    require_float(x, op);
    if (x.rank() < 2 || x.size(-1) % 2 != 0)
        raise<ShapeError>(std::string(op) + ": input must be [..., T, D] with D even, got " + shape_str(x.shape()));
    if (!(theta > 0)) raise<ValueError>(std::string(op) + ": theta must be positive, got " + std::to_string(theta));
    const int ax = normalize_axis(seq_axis, x.rank(), op);
    if (ax == x.rank() - 1)
        raise<ShapeError>(std::string(op) + ": seq_axis " + std::to_string(seq_axis) + " is the feature axis of " +
                          shape_str(x.shape()) + "; the sequence must be another axis");
    const int64_t t_len = x.size(ax), d = x.size(-1), half = d / 2;
    if (positions.rank() != 1 || positions.size(0) != t_len)
        raise<ShapeError>(std::string(op) + ": positions must be [" + std::to_string(t_len) + "] (the size of axis " +
                          std::to_string(ax) + " of " + shape_str(x.shape()) + "), got " +
                          shape_str(positions.shape()));
    // cos and sin of position * theta^(-2i/D) in double, as the kernel computes them.
    std::vector<double> pos;
    if (is_float(positions.dtype()))
        for (float p : positions.to_vector<float>()) pos.push_back(p);
    else
        for (int64_t p : positions.to_vector<int64_t>()) pos.push_back(static_cast<double>(p));
    std::vector<float> cos_table(static_cast<std::size_t>(t_len * half)), sin_table(cos_table.size());
    for (int64_t t = 0; t < t_len; ++t)
        for (int64_t i = 0; i < half; ++i) {
            const double angle = pos[static_cast<std::size_t>(t)] *
                                 std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
            cos_table[static_cast<std::size_t>(t * half + i)] = static_cast<float>(std::cos(angle));
            sin_table[static_cast<std::size_t>(t * half + i)] = static_cast<float>(std::sin(angle));
        }
    // The tables broadcast over [..., T, D/2] (non-interleaved) or [..., T, D/2, 1] (interleaved).
    const Shape table_shape = interleaved ? Shape{t_len, half, 1} : Shape{t_len, half};
    const Tensor c = from_vector(cos_table, table_shape, x.device()).to(x.dtype());
    const Tensor s = from_vector(sin_table, table_shape, x.device()).to(x.dtype());
    const Tensor xm = ax == x.rank() - 2 ? x : x.transpose(ax, -2);
    Tensor y;
    if (interleaved) {
        Shape pairs = xm.shape();
        pairs.back() = half;
        pairs.push_back(2);
        const Tensor xp = xm.reshape(pairs);
        const Tensor x1 = narrow(xp, -1, 0, 1), x2 = narrow(xp, -1, 1, 1);
        y = concat({sub(mul(x1, c), mul(x2, s)), add(mul(x1, s), mul(x2, c))}, -1).reshape(xm.shape());
    } else {
        const Tensor x1 = narrow(xm, -1, 0, half), x2 = narrow(xm, -1, half, half);
        y = concat({sub(mul(x1, c), mul(x2, s)), add(mul(x1, s), mul(x2, c))}, -1);
    }
    return ax == x.rank() - 2 ? y : y.transpose(ax, -2);
}

Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &mask, bool causal,
                                    double scale, CausalAlignment alignment) {
    if (Autocast cast{"attention", {&q, &k, &v, &mask}})
        return scaled_dot_product_attention(cast[0], cast[1], cast[2], cast[3], causal, scale, alignment);
    const char *op = "scaled_dot_product_attention";
    impl_of(q, op);
    impl_of(k, op);
    impl_of(v, op);
    require_float(q, op);
    require_same_dtype(q, k, op);
    require_same_dtype(q, v, op);
    if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank())
        raise<ShapeError>(std::string(op) + ": q, k, v must have one rank >= 2, got " + shape_str(q.shape()) + ", " +
                          shape_str(k.shape()) + ", " + shape_str(v.shape()));
    int64_t tq = q.size(-2), d = q.size(-1), tk = k.size(-2), dv = v.size(-1);
    if (k.size(-1) != d || v.size(-2) != tk)
        raise<ShapeError>(std::string(op) + ": shapes q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) +
                          ", v " + shape_str(v.shape()) +
                          " do not fit "
                          "[..., Tq, D], [..., Tk, D], [..., Tk, Dv]");
    Shape batch = broadcast_shapes(broadcast_shapes(Shape(q.shape().begin(), q.shape().end() - 2),
                                                    Shape(k.shape().begin(), k.shape().end() - 2), op),
                                   Shape(v.shape().begin(), v.shape().end() - 2), op);
    Shape score_shape = batch, out_shape = batch, sq = batch, sk = batch, sv = batch;
    score_shape.insert(score_shape.end(), {tq, tk});
    out_shape.insert(out_shape.end(), {tq, dv});
    sq.insert(sq.end(), {tq, d});
    sk.insert(sk.end(), {tk, d});
    sv.insert(sv.end(), {tk, dv});
    double s = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(d));
    Tensor qq = q, kk = k, vv = v, mm = mask;
    place_together({&qq, &kk, &vv, &mm}, "scaled_dot_product_attention");
    if (alignment != CausalAlignment::bottom_right && alignment != CausalAlignment::top_left)
        raise<ValueError>(std::string(op) + ": unknown causal alignment " +
                          std::to_string(static_cast<int>(alignment)));
    if (mm.defined() && mm.dtype() == DType::boolean) {
        broadcast_shapes(mm.shape(), score_shape, op);
        mm = where(mm, constant_like(qq, 0), constant_like(qq, -INFINITY));
    }
    if (causal && alignment == CausalAlignment::top_left && tq != tk) {
        // The plugins' causal flag is bottom-right (plugin.h); top-left is its own additive mask.
        Tensor i = arange(int64_t{0}, tq, 1, DType::i64, qq.device()).view({tq, 1});
        Tensor j = arange(int64_t{0}, tk, 1, DType::i64, qq.device()).view({1, tk});
        Tensor hidden = where(gt(j, i), constant_like(qq, -INFINITY), constant_like(qq, 0));
        mm = mm.defined() ? add(mm, hidden) : hidden;
        causal = false;
    }
    if (mm.defined()) {
        if (mm.dtype() != q.dtype())
            raise<DTypeError>(std::string(op) + ": mask dtype " + dtype_name(mm.dtype()) + " differs from q's " +
                              dtype_name(q.dtype()));
        broadcast_shapes(mm.shape(), score_shape, op);
    }
    tf_params_attention p{sizeof(tf_params_attention), causal ? 1 : 0, 0, s};
    Tensor out = empty_like_device(qq, out_shape, q.dtype());
    {
        // Without a mask the mask operand is absent (ops.def marks it optional): no zero tensor,
        // unless a plugin older than ABI 1.1 runs the op (dispatch then writes one zero for it).
        const Tensor q_in = raw_expand(qq, sq), k_in = raw_expand(kk, sk), v_in = raw_expand(vv, sv);
        const Tensor mask_in = mm.defined() ? raw_expand(mm, score_shape) : Tensor();
        const TensorImpl absent = mm.defined() ? TensorImpl() : absent_input(q.dtype(), score_shape);
        const TensorImpl *inputs[4] = {q_in.impl(), k_in.impl(), v_in.impl(), mm.defined() ? mask_in.impl() : &absent};
        const TensorImpl *outputs[1] = {out.impl()};
        dispatch(TF_OP_ATTENTION, inputs, outputs, &p);
    }
    // The mask's gradient flows through mm (the user's mask, or where/add built from it).
    return record(out, {&q, &k, &v, &mm}, "attention", [&] {
        return [q = qq.detach(), k = kk.detach(), v = vv.detach(), m = mm.defined() ? mm.detach() : Tensor(), causal, s,
                tq, tk](const Tensor &g) -> std::vector<Tensor> {
            // One op where the plugin has a kernel for it and the mask needs no gradient.
            if (!input_needs_grad(3))
                if (auto fused = attention_backward_fused(q, k, v, m, g, causal, s)) {
                    std::vector<Tensor> &grads = *fused;
                    return {input_needs_grad(0) ? grads[0] : Tensor(), input_needs_grad(1) ? grads[1] : Tensor(),
                            input_needs_grad(2) ? grads[2] : Tensor(), Tensor()};
                }
            // Recompute the probabilities with primitive ops, then differentiate through them.
            Tensor scores = mul(matmul(q, k.transpose(-1, -2)), constant_like(q, s));
            if (m.defined()) scores = add(scores, m);
            if (causal) {
                Tensor i = arange(0, static_cast<double>(tq), 1, DType::i64, q.device()).view({tq, 1});
                Tensor j = arange(0, static_cast<double>(tk), 1, DType::i64, q.device()).view({1, tk});
                Tensor hidden =
                    gt(j.expand({tq, tk}), add(i, constant_like(i, static_cast<double>(tk - tq))).expand({tq, tk}));
                scores = where(hidden, constant_like(scores, -INFINITY), scores);
            }
            Tensor probs = softmax(scores, -1);
            // Only the gradients an input needs: the mask is usually a constant (no gradient), and
            // reducing the [.., Tq, Tk] score gradient to its shape is a pass over the largest tensor.
            Tensor gv = input_needs_grad(2) ? matmul_sum_to(probs.transpose(-1, -2), g, v.shape()) : Tensor();
            if (!input_needs_grad(0) && !input_needs_grad(1) && !input_needs_grad(3))
                return {Tensor(), Tensor(), gv, Tensor()};
            Tensor gp = matmul(g, v.transpose(-1, -2));
            Tensor gs = mul(probs, sub(gp, sum(mul(gp, probs), {-1}, true)));
            Tensor gq = input_needs_grad(0) ? mul(matmul_sum_to(gs, k, q.shape()), constant_like(q, s)) : Tensor();
            Tensor gk = input_needs_grad(1)
                            ? mul(matmul_sum_to(gs.transpose(-1, -2), q, k.shape()), constant_like(q, s))
                            : Tensor();
            return {gq, gk, gv, input_needs_grad(3) ? sum_to(gs, m.shape()) : Tensor()};
        };
    });
}

Tensor embedding(const Tensor &weight, const Tensor &indices) {
    const char *op = op_info(TF_OP_EMBEDDING).name;
    impl_of(weight, op);
    if (is_quantized(weight.dtype())) return embedding_q(weight, indices);
    impl_of(indices, op);
    require_rank(weight, 2, op, "weight");
    require_integer(indices, op, "indices");
    Shape out_shape = indices.shape();
    out_shape.push_back(weight.size(1));
    Tensor w = weight, idx = indices;
    place_together({&w, &idx}, "embedding");
    Tensor out = empty_like_device(w, out_shape, weight.dtype());
    dispatch(TF_OP_EMBEDDING, {w, idx}, {out});
    return record(out, {&weight}, op, [&] {
        return [idx = idx.detach(), shape = weight.shape()](const Tensor &g) -> std::vector<Tensor> {
            Tensor dw = empty_like_device(g, shape, g.dtype());
            dispatch(TF_OP_EMBEDDING_BACKWARD, {g, idx}, {dw});
            return {dw};
        };
    });
}

Tensor one_hot(const Tensor &labels, int num_classes, DType dtype) {
    const char *op = op_info(TF_OP_ONE_HOT).name;
    impl_of(labels, op);
    require_integer(labels, op, "labels");
    if (num_classes < 1)
        raise<ValueError>(std::string(op) + ": num_classes must be >= 1, got " + std::to_string(num_classes));
    Shape shape = labels.shape();
    shape.push_back(num_classes);
    Tensor out = empty_like_device(labels, shape, dtype);
    tf_params_one_hot p{sizeof(tf_params_one_hot), num_classes};
    dispatch(TF_OP_ONE_HOT, {labels}, {out}, &p);
    return out;
}

namespace {

// cross_entropy's operands, both forms: float logits [N, C] and integer labels [N] (the kit's
// rule_cross_entropy for the descriptor, in the API's terms and errors).
void require_cross_entropy_args(const Tensor &logits, const Tensor &labels, const char *op) {
    impl_of(logits, op);
    impl_of(labels, op);
    require_rank(logits, 2, op, "logits");
    require_float(logits, op);
    require_integer(labels, op, "labels");
    if (labels.rank() != 1 || labels.size(0) != logits.size(0))
        raise<ShapeError>(std::string(op) + ": labels must have shape [" + std::to_string(logits.size(0)) +
                          "] for logits " + shape_str(logits.shape()) + ", got " + shape_str(labels.shape()));
}

}  // namespace

Tensor cross_entropy(const Tensor &logits, const Tensor &labels, Reduction reduction, int64_t ignore_index) {
    if (Autocast cast{"cross_entropy", {&logits}}) return cross_entropy(cast[0], labels, reduction, ignore_index);
    const char *op = op_info(TF_OP_CROSS_ENTROPY).name;
    require_cross_entropy_args(logits, labels, op);
    Tensor x = logits, y = labels;
    place_together({&x, &y}, "cross_entropy");
    Shape out_shape = reduction == Reduction::none ? Shape{logits.size(0)} : Shape{};
    Tensor out = empty_like_device(x, out_shape, logits.dtype());
    tf_params_cross_entropy p{sizeof(tf_params_cross_entropy), static_cast<int32_t>(reduction), ignore_index};
    dispatch(TF_OP_CROSS_ENTROPY, {x, y}, {out}, &p);
    return record(out, {&logits}, op, [&] {
        return [x = x.detach(), y = y.detach(), reduction, ignore_index](const Tensor &g) -> std::vector<Tensor> {
            int64_t n = x.size(0), c = x.size(1);
            Tensor valid = ne(y, constant_like(y, static_cast<double>(ignore_index)));
            Tensor safe = where(valid, y, constant_like(y, 0));
            Tensor weight = cast(valid, x.dtype()).view({n, 1});
            Tensor grad = mul(sub(softmax(x, 1), one_hot(safe, static_cast<int>(c), x.dtype())), weight);
            if (reduction == Reduction::none) return {mul(grad, g.view({n, 1}))};
            if (reduction == Reduction::mean) grad = div(grad, sum(weight));
            return {mul(grad, g)};
        };
    });
}

}  // namespace tinyfin

namespace tinyfin {

using namespace detail;

// weight or label smoothing, from log_softmax and one_hot (torch's
// cross_entropy_loss_label_smoothing and nll_loss with weights); autograd differentiates it.
Tensor cross_entropy(const Tensor &logits, const Tensor &labels, const CrossEntropyOptions &o) {
    if (Autocast cast{"cross_entropy", {&logits, &o.weight}}) {
        CrossEntropyOptions f32 = o;
        f32.weight = cast[1];
        return cross_entropy(cast[0], labels, f32);
    }
    if (!o.weight.defined() && o.label_smoothing == 0)
        return cross_entropy(logits, labels, o.reduction, o.ignore_index);
    const char *op = op_info(TF_OP_CROSS_ENTROPY).name;
    require_cross_entropy_args(logits, labels, op);
    if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1))
        raise<ValueError>(std::string(op) + ": label_smoothing must be in [0, 1], got " +
                          std::to_string(o.label_smoothing));
    if (o.reduction != Reduction::none && o.reduction != Reduction::mean && o.reduction != Reduction::sum)
        raise<ValueError>(std::string(op) + ": unknown reduction " + std::to_string(static_cast<int>(o.reduction)));
    int64_t c = logits.size(1);
    Tensor x = logits, y = labels, w = o.weight;
    place_together({&x, &y, &w}, "cross_entropy");
    if (w.defined()) {
        if (w.rank() != 1 || w.size(0) != c)
            raise<ShapeError>(std::string(op) + ": weight must have shape [" + std::to_string(c) + "], got " +
                              shape_str(w.shape()));
        require_same_dtype(w, x, op);
    }
    Tensor logp = log_softmax(x, 1);
    Tensor valid = ne(y, constant_like(y, static_cast<double>(o.ignore_index)));
    Tensor target = one_hot(where(valid, y, constant_like(y, 0)), static_cast<int>(c), x.dtype());
    Tensor counted = cast(valid, x.dtype());
    // The weight of each counted label: w[y_i], or 1; 0 for ignored labels.
    Tensor label_weight = w.defined() ? mul(sum(mul(target, w.view({1, c})), {1}), counted) : counted;
    Tensor nll = neg(mul(sum(mul(target, logp), {1}), label_weight));
    Tensor loss = nll;
    if (o.label_smoothing > 0) {
        Tensor weighted = w.defined() ? mul(logp, w.view({1, c})) : logp;
        Tensor smooth = neg(mul(sum(weighted, {1}), counted));
        loss = add(mul(nll, 1 - o.label_smoothing), mul(smooth, o.label_smoothing / static_cast<double>(c)));
    }
    if (o.reduction == Reduction::none) return loss;
    if (o.reduction == Reduction::sum) return sum(loss);
    return div(sum(loss), sum(label_weight));
}

}  // namespace tinyfin
