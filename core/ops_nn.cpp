// Neural-network ops: convolution, pooling, softmax, norms, rope, attention,
// embedding, cross-entropy, one-hot.
#include <cmath>

#include "ops_common.hpp"

namespace tinyfin {

using namespace detail;

namespace {

void require_rank(const Tensor &t, int rank, const char *op, const char *what) {
    if (t.rank() != rank)
        raise<ShapeError>(std::string(op) + ": " + what + " must have rank " + std::to_string(rank) +
                          ", got shape " + shape_str(t.shape()));
}

void require_float(const Tensor &t, const char *op) {
    if (!is_float(t.dtype()))
        raise<DTypeError>(std::string(op) + ": needs a float tensor, got " + dtype_name(t.dtype()));
}

void require_integer(const Tensor &t, const char *op, const char *what) {
    if (!is_integer(t.dtype()))
        raise<DTypeError>(std::string(op) + ": " + what + " must be i32 or i64, got " +
                          dtype_name(t.dtype()));
}

void require_same_dtype(const Tensor &a, const Tensor &b, const char *op) {
    if (a.dtype() != b.dtype())
        raise<DTypeError>(std::string(op) + ": dtypes " + dtype_name(a.dtype()) + " and " +
                          dtype_name(b.dtype()) + " differ");
}

int64_t conv_out_size(int64_t in, int64_t kernel, int stride, int pad, int dilation) {
    int64_t span = static_cast<int64_t>(dilation) * (kernel - 1) + 1;
    int64_t padded = in + 2 * static_cast<int64_t>(pad);
    return padded < span ? 0 : (padded - span) / stride + 1;
}

// dy: gradient of a conv2d output; returns dx of shape x_shape.
Tensor conv2d_grad_input(const Tensor &dy, const Tensor &w, const Shape &x_shape,
                         const tf_params_conv2d &p) {
    Tensor dx = empty_like_device(dy, x_shape, dy.dtype());
    dispatch(TF_OP_CONV2D_GRAD_INPUT, {dy, w}, {dx}, &p);
    return dx;
}

Tensor conv2d_grad_weight(const Tensor &dy, const Tensor &x, const Shape &w_shape,
                          const tf_params_conv2d &p) {
    Tensor dw = empty_like_device(dy, w_shape, dy.dtype());
    dispatch(TF_OP_CONV2D_GRAD_WEIGHT, {dy, x}, {dw}, &p);
    return dw;
}

tf_params_pool2d pool_params(const Tensor &x, const Pool2dOptions &o, const char *op) {
    require_rank(x, 4, op, "input");
    tf_params_pool2d p{sizeof(tf_params_pool2d), {o.kernel_h, o.kernel_w},
                       {o.stride_h ? o.stride_h : o.kernel_h, o.stride_w ? o.stride_w : o.kernel_w},
                       {o.pad_h, o.pad_w}, o.count_include_pad ? 1 : 0};
    if (p.kernel[0] < 1 || p.kernel[1] < 1 || p.stride[0] < 1 || p.stride[1] < 1 ||
        p.padding[0] < 0 || p.padding[1] < 0 || p.padding[0] > p.kernel[0] / 2 ||
        p.padding[1] > p.kernel[1] / 2) // not padding * 2 > kernel: that overflows int
        raise<ValueError>(std::string(op) + ": invalid kernel " + std::to_string(p.kernel[0]) + "x" +
                          std::to_string(p.kernel[1]) + ", stride " + std::to_string(p.stride[0]) +
                          "x" + std::to_string(p.stride[1]) + ", padding " +
                          std::to_string(p.padding[0]) + "x" + std::to_string(p.padding[1]) +
                          " (kernel and stride >= 1, 0 <= padding <= kernel/2)");
    return p;
}

Shape pool_out_shape(const Tensor &x, const tf_params_pool2d &p, const char *op) {
    int64_t oh = conv_out_size(x.size(2), p.kernel[0], p.stride[0], p.padding[0], 1);
    int64_t ow = conv_out_size(x.size(3), p.kernel[1], p.stride[1], p.padding[1], 1);
    if (oh <= 0 || ow <= 0)
        raise<ShapeError>(std::string(op) + ": input " + shape_str(x.shape()) +
                          " is smaller than the " + std::to_string(p.kernel[0]) + "x" +
                          std::to_string(p.kernel[1]) + " window");
    return {x.size(0), x.size(1), oh, ow};
}

} // namespace

Tensor conv2d(const Tensor &x, const Tensor &weight, const Tensor &bias, const Conv2dOptions &o) {
    impl_of(x, "conv2d");
    impl_of(weight, "conv2d");
    require_rank(x, 4, "conv2d", "input");
    require_rank(weight, 4, "conv2d", "weight");
    require_float(x, "conv2d");
    require_same_dtype(x, weight, "conv2d");
    if (o.stride_h < 1 || o.stride_w < 1 || o.dilation_h < 1 || o.dilation_w < 1 || o.pad_h < 0 ||
        o.pad_w < 0 || o.groups < 1)
        raise<ValueError>("conv2d: stride and dilation must be >= 1, padding >= 0, groups >= 1 (got "
                          "stride " + std::to_string(o.stride_h) + "x" + std::to_string(o.stride_w) +
                          ", padding " + std::to_string(o.pad_h) + "x" + std::to_string(o.pad_w) +
                          ", dilation " + std::to_string(o.dilation_h) + "x" +
                          std::to_string(o.dilation_w) + ", groups " + std::to_string(o.groups) + ")");
    // A 0-tap kernel has no output size (the extent formula would grow the input by the dilation).
    if (weight.size(2) < 1 || weight.size(3) < 1)
        raise<ShapeError>("conv2d: weight " + shape_str(weight.shape()) +
                          " has an empty kernel; kernel height and width must be >= 1");
    int64_t n = x.size(0), c = x.size(1), oc = weight.size(0), icg = weight.size(1);
    if (c % o.groups != 0 || oc % o.groups != 0 || icg * o.groups != c)
        raise<ShapeError>("conv2d: input " + shape_str(x.shape()) + " and weight " +
                          shape_str(weight.shape()) + " do not fit groups=" + std::to_string(o.groups) +
                          " (need C = weight[1] * groups and O divisible by groups)");
    int64_t oh = conv_out_size(x.size(2), weight.size(2), o.stride_h, o.pad_h, o.dilation_h);
    int64_t ow = conv_out_size(x.size(3), weight.size(3), o.stride_w, o.pad_w, o.dilation_w);
    if (oh <= 0 || ow <= 0)
        raise<ShapeError>("conv2d: input " + shape_str(x.shape()) + " with padding " +
                          std::to_string(o.pad_h) + "x" + std::to_string(o.pad_w) +
                          " is smaller than the dilated kernel of weight " + shape_str(weight.shape()));
    tf_params_conv2d p{sizeof(tf_params_conv2d), {o.stride_h, o.stride_w}, {o.pad_h, o.pad_w},
                       {o.dilation_h, o.dilation_w}, o.groups};
    Tensor xx = x, ww = weight;
    place_together({&xx, &ww});
    Tensor y = empty_like_device(xx, {n, oc, oh, ow}, x.dtype());
    dispatch(TF_OP_CONV2D, {xx, ww}, {y}, &p);
    y = record(y, {&x, &weight}, "conv2d", [x = xx.detach(), w = ww.detach(), p](const Tensor &g) -> std::vector<Tensor> {
        // The first layer's input is data: no grad_input for it.
        return {input_needs_grad(0) ? conv2d_grad_input(g, w, x.shape(), p) : Tensor(),
                input_needs_grad(1) ? conv2d_grad_weight(g, x, w.shape(), p) : Tensor()};
    });
    if (!bias.defined()) return y;
    if (bias.rank() != 1 || bias.size(0) != oc)
        raise<ShapeError>("conv2d: bias must have shape [" + std::to_string(oc) + "], got " +
                          shape_str(bias.shape()));
    return add(y, bias.view({1, oc, 1, 1}));
}

Tensor max_pool2d(const Tensor &x, const Pool2dOptions &options) {
    impl_of(x, "max_pool2d");
    tf_params_pool2d p = pool_params(x, options, "max_pool2d");
    Tensor y = empty_like_device(x, pool_out_shape(x, p, "max_pool2d"), x.dtype());
    dispatch(TF_OP_MAX_POOL2D, {x}, {y}, &p);
    return record(y, {&x}, "max_pool2d", [x = x.detach(), p](const Tensor &g) -> std::vector<Tensor> {
        Tensor dx = empty_like_device(g, x.shape(), g.dtype());
        dispatch(TF_OP_MAX_POOL2D_BACKWARD, {g, x}, {dx}, &p);
        return {dx};
    });
}

Tensor avg_pool2d(const Tensor &x, const Pool2dOptions &options) {
    impl_of(x, "avg_pool2d");
    tf_params_pool2d p = pool_params(x, options, "avg_pool2d");
    Tensor y = empty_like_device(x, pool_out_shape(x, p, "avg_pool2d"), x.dtype());
    dispatch(TF_OP_AVG_POOL2D, {x}, {y}, &p);
    return record(y, {&x}, "avg_pool2d", [shape = x.shape(), p](const Tensor &g) -> std::vector<Tensor> {
        Tensor dx = empty_like_device(g, shape, g.dtype());
        dispatch(TF_OP_AVG_POOL2D_BACKWARD, {g}, {dx}, &p);
        return {dx};
    });
}

static Tensor softmax_like(tf_op op, const char *name, const Tensor &x, int axis) {
    impl_of(x, name);
    require_float(x, name);
    if (x.rank() == 0) raise<ShapeError>(std::string(name) + ": needs rank >= 1");
    int ax = normalize_axis(axis, x.rank(), name);
    tf_params_axis p{sizeof(tf_params_axis), ax};
    Tensor y = empty_like_device(x, x.shape(), x.dtype());
    dispatch(op, {x}, {y}, &p);
    return y;
}

Tensor softmax(const Tensor &x, int axis) {
    Tensor y = softmax_like(TF_OP_SOFTMAX, "softmax", x, axis);
    int ax = normalize_axis(axis, x.rank(), "softmax");
    return record(y, {&x}, "softmax", [y = y.detach(), ax](const Tensor &g) -> std::vector<Tensor> {
        return {mul(y, sub(g, sum(mul(g, y), {ax}, true)))};
    });
}

Tensor log_softmax(const Tensor &x, int axis) {
    Tensor y = softmax_like(TF_OP_LOG_SOFTMAX, "log_softmax", x, axis);
    int ax = normalize_axis(axis, x.rank(), "log_softmax");
    return record(y, {&x}, "log_softmax", [y = y.detach(), ax](const Tensor &g) -> std::vector<Tensor> {
        return {sub(g, mul(exp(y), sum(g, {ax}, true)))};
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
        raise<ShapeError>(std::string(op) + ": " + what + " must have shape " + shape_str(shape) +
                          ", got " + shape_str(t.shape()));
    require_same_dtype(t, x, op);
    return t.to(x.device());
}

} // namespace

Tensor layer_norm(const Tensor &x, int n_axes, const Tensor &weight, const Tensor &bias, double eps) {
    impl_of(x, "layer_norm");
    require_float(x, "layer_norm");
    Shape s = norm_shape(x, n_axes, "layer_norm");
    Tensor w = affine_or_ones(weight, x, s, 1.0, "layer_norm", "weight");
    Tensor b = affine_or_ones(bias, x, s, 0.0, "layer_norm", "bias");
    tf_params_norm p{sizeof(tf_params_norm), n_axes, eps};
    Tensor y = empty_like_device(x, x.shape(), x.dtype());
    dispatch(TF_OP_LAYER_NORM, {x, w.detach(), b.detach()}, {y}, &p);
    return record(y, {&x, &weight, &bias}, "layer_norm",
                  [x = x.detach(), w = w.detach(), n_axes, eps](const Tensor &g) -> std::vector<Tensor> {
        std::vector<int> axes = last_axes(x.rank(), n_axes);
        Tensor mu = mean(x, axes, true);
        Tensor rstd = rsqrt(add(var(x, axes, 0, true), constant_like(x, eps)));
        Tensor xhat = mul(sub(x, mu), rstd);
        Tensor gxhat = mul(g, w);
        Tensor gx = mul(rstd, sub(sub(gxhat, mean(gxhat, axes, true)),
                                  mul(xhat, mean(mul(gxhat, xhat), axes, true))));
        return {gx, sum_to(mul(g, xhat), w.shape()), sum_to(g, w.shape())};
    });
}

Tensor rms_norm(const Tensor &x, int n_axes, const Tensor &weight, double eps) {
    impl_of(x, "rms_norm");
    require_float(x, "rms_norm");
    Shape s = norm_shape(x, n_axes, "rms_norm");
    Tensor w = affine_or_ones(weight, x, s, 1.0, "rms_norm", "weight");
    tf_params_norm p{sizeof(tf_params_norm), n_axes, eps};
    Tensor y = empty_like_device(x, x.shape(), x.dtype());
    dispatch(TF_OP_RMS_NORM, {x, w.detach()}, {y}, &p);
    return record(y, {&x, &weight}, "rms_norm",
                  [x = x.detach(), w = w.detach(), n_axes, eps](const Tensor &g) -> std::vector<Tensor> {
        std::vector<int> axes = last_axes(x.rank(), n_axes);
        Tensor r = rsqrt(add(mean(square(x), axes, true), constant_like(x, eps)));
        Tensor gxhat = mul(g, w);
        Tensor gx = mul(r, sub(gxhat, mul(mul(x, square(r)), mean(mul(gxhat, x), axes, true))));
        return {gx, sum_to(mul(g, mul(x, r)), w.shape())};
    });
}

static Tensor rope_raw(const Tensor &x, double theta, bool interleaved, int64_t offset, bool inverse) {
    tf_params_rope p{sizeof(tf_params_rope), interleaved ? 1 : 0, inverse ? 1 : 0, theta, offset};
    Tensor y = empty_like_device(x, x.shape(), x.dtype());
    dispatch(TF_OP_ROPE, {x}, {y}, &p);
    return y;
}

Tensor rope(const Tensor &x, double theta, bool interleaved, int64_t position_offset) {
    impl_of(x, "rope");
    require_float(x, "rope");
    if (x.rank() < 2 || x.size(-1) % 2 != 0)
        raise<ShapeError>("rope: input must be [..., T, D] with D even, got " + shape_str(x.shape()));
    if (!(theta > 0)) raise<ValueError>("rope: theta must be positive, got " + std::to_string(theta));
    Tensor y = rope_raw(x, theta, interleaved, position_offset, false);
    return record(y, {&x}, "rope", [theta, interleaved, position_offset](const Tensor &g) -> std::vector<Tensor> {
        // A rotation's gradient is the inverse rotation.
        return {rope_raw(g, theta, interleaved, position_offset, true)};
    });
}

Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k, const Tensor &v,
                                    const Tensor &mask, bool causal, double scale) {
    const char *op = "scaled_dot_product_attention";
    impl_of(q, op);
    impl_of(k, op);
    impl_of(v, op);
    require_float(q, op);
    require_same_dtype(q, k, op);
    require_same_dtype(q, v, op);
    if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank())
        raise<ShapeError>(std::string(op) + ": q, k, v must have one rank >= 2, got " +
                          shape_str(q.shape()) + ", " + shape_str(k.shape()) + ", " + shape_str(v.shape()));
    int64_t tq = q.size(-2), d = q.size(-1), tk = k.size(-2), dv = v.size(-1);
    if (k.size(-1) != d || v.size(-2) != tk)
        raise<ShapeError>(std::string(op) + ": shapes q " + shape_str(q.shape()) + ", k " +
                          shape_str(k.shape()) + ", v " + shape_str(v.shape()) + " do not fit "
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
    place_together({&qq, &kk, &vv, &mm});
    Tensor additive = mm.defined() ? mm : constant_like(qq, 0);
    if (additive.dtype() != q.dtype())
        raise<DTypeError>(std::string(op) + ": mask dtype " + dtype_name(additive.dtype()) +
                          " differs from q's " + dtype_name(q.dtype()));
    broadcast_shapes(additive.shape(), score_shape, op);
    tf_params_attention p{sizeof(tf_params_attention), causal ? 1 : 0, 0, s};
    Tensor out = empty_like_device(qq, out_shape, q.dtype());
    dispatch(TF_OP_ATTENTION, {raw_expand(qq, sq), raw_expand(kk, sk), raw_expand(vv, sv),
                               raw_expand(additive, score_shape)}, {out}, &p);
    return record(out, {&q, &k, &v, &mask}, "attention",
                  [q = qq.detach(), k = kk.detach(), v = vv.detach(),
                   m = additive.detach(), causal, s, tq, tk](const Tensor &g) -> std::vector<Tensor> {
        // Recompute the probabilities with primitive ops, then differentiate through them.
        Tensor scores = add(mul(matmul(q, k.transpose(-1, -2)), constant_like(q, s)), m);
        if (causal) {
            Tensor i = arange(0, static_cast<double>(tq), 1, DType::i64, q.device()).view({tq, 1});
            Tensor j = arange(0, static_cast<double>(tk), 1, DType::i64, q.device()).view({1, tk});
            Tensor hidden = gt(j.expand({tq, tk}), add(i, constant_like(i, static_cast<double>(tk - tq))).expand({tq, tk}));
            scores = where(hidden, constant_like(scores, -INFINITY), scores);
        }
        Tensor probs = softmax(scores, -1);
        // Only the gradients an input needs: the mask is usually a constant (no gradient), and
        // reducing the [.., Tq, Tk] score gradient to its shape is a pass over the largest tensor.
        Tensor gv = input_needs_grad(2) ? sum_to(matmul(probs.transpose(-1, -2), g), v.shape()) : Tensor();
        if (!input_needs_grad(0) && !input_needs_grad(1) && !input_needs_grad(3)) return {Tensor(), Tensor(), gv, Tensor()};
        Tensor gp = matmul(g, v.transpose(-1, -2));
        Tensor gs = mul(probs, sub(gp, sum(mul(gp, probs), {-1}, true)));
        Tensor gq = input_needs_grad(0) ? sum_to(mul(matmul(gs, k), constant_like(q, s)), q.shape()) : Tensor();
        Tensor gk = input_needs_grad(1) ? sum_to(mul(matmul(gs.transpose(-1, -2), q), constant_like(q, s)), k.shape()) : Tensor();
        return {gq, gk, gv, input_needs_grad(3) ? sum_to(gs, m.shape()) : Tensor()};
    });
}

Tensor embedding(const Tensor &weight, const Tensor &indices) {
    impl_of(weight, "embedding");
    impl_of(indices, "embedding");
    require_rank(weight, 2, "embedding", "weight");
    require_integer(indices, "embedding", "indices");
    Shape out_shape = indices.shape();
    out_shape.push_back(weight.size(1));
    Tensor w = weight, idx = indices;
    place_together({&w, &idx});
    Tensor out = empty_like_device(w, out_shape, weight.dtype());
    dispatch(TF_OP_EMBEDDING, {w, idx}, {out});
    return record(out, {&weight}, "embedding", [idx = idx.detach(), shape = weight.shape()](const Tensor &g) -> std::vector<Tensor> {
        Tensor dw = empty_like_device(g, shape, g.dtype());
        dispatch(TF_OP_EMBEDDING_BACKWARD, {g, idx}, {dw});
        return {dw};
    });
}

Tensor one_hot(const Tensor &labels, int num_classes, DType dtype) {
    impl_of(labels, "one_hot");
    require_integer(labels, "one_hot", "labels");
    if (num_classes < 1)
        raise<ValueError>("one_hot: num_classes must be >= 1, got " + std::to_string(num_classes));
    Shape shape = labels.shape();
    shape.push_back(num_classes);
    Tensor out = empty_like_device(labels, shape, dtype);
    tf_params_one_hot p{sizeof(tf_params_one_hot), num_classes};
    dispatch(TF_OP_ONE_HOT, {labels}, {out}, &p);
    return out;
}

Tensor cross_entropy(const Tensor &logits, const Tensor &labels, Reduction reduction,
                     int64_t ignore_index) {
    impl_of(logits, "cross_entropy");
    impl_of(labels, "cross_entropy");
    require_rank(logits, 2, "cross_entropy", "logits");
    require_float(logits, "cross_entropy");
    require_integer(labels, "cross_entropy", "labels");
    if (labels.rank() != 1 || labels.size(0) != logits.size(0))
        raise<ShapeError>("cross_entropy: labels must have shape [" + std::to_string(logits.size(0)) +
                          "] for logits " + shape_str(logits.shape()) + ", got " +
                          shape_str(labels.shape()));
    Tensor x = logits, y = labels;
    place_together({&x, &y});
    Shape out_shape = reduction == Reduction::none ? Shape{logits.size(0)} : Shape{};
    Tensor out = empty_like_device(x, out_shape, logits.dtype());
    tf_params_cross_entropy p{sizeof(tf_params_cross_entropy), static_cast<int32_t>(reduction), ignore_index};
    dispatch(TF_OP_CROSS_ENTROPY, {x, y}, {out}, &p);
    return record(out, {&logits}, "cross_entropy",
                  [x = x.detach(), y = y.detach(), reduction, ignore_index](const Tensor &g) -> std::vector<Tensor> {
        int64_t n = x.size(0), c = x.size(1);
        Tensor valid = ne(y, constant_like(y, static_cast<double>(ignore_index)));
        Tensor safe = where(valid, y, constant_like(y, 0));
        Tensor weight = cast(valid, x.dtype()).view({n, 1});
        Tensor grad = mul(sub(softmax(x, 1), one_hot(safe, static_cast<int>(c), x.dtype())), weight);
        if (reduction == Reduction::none) return {mul(grad, g.view({n, 1}))};
        if (reduction == Reduction::mean) grad = div(grad, sum(weight));
        return {mul(grad, g)};
    });
}

} // namespace tinyfin
