// Every op of ops.def as a function of tinyfin._C with PyTorch's argument names; the Python
// layer (tinyfin/__init__.py, tinyfin/nn/functional.py) re-exports them and adds the few
// conveniences that are pure argument juggling. The GIL is released while an op runs.
#include <algorithm>
#include <cmath>

#include "bindings.hpp"
#include "tinyfin/extend.hpp"

namespace tinyfin::python {

namespace {

using Release = py::gil_scoped_release;
using Unary = Tensor (*)(const Tensor &);
using Binary = Tensor (*)(const Tensor &, const Tensor &);
using BinaryOut = void (*)(const Tensor &, const Tensor &, const Tensor &);

// The first tensor among a and b gives the dtype and device of a number on the other side.
std::pair<Tensor, Tensor> operands(py::handle a, py::handle b, const char *op) {
    bool ta = py::isinstance<Tensor>(a), tb = py::isinstance<Tensor>(b);
    if (!ta && !tb) raise_python("DTypeError", std::string(op) + ": at least one operand must be a tinyfin.Tensor");
    if (ta) {
        Tensor x = a.cast<Tensor>();
        return {x, operand(b, x, op)};
    }
    Tensor y = b.cast<Tensor>();
    return {operand(a, y, op), y};
}

void def_binary(py::module_ &m, const char *name, Binary fn, BinaryOut out_fn, const char *doc) {
    m.def(
        name,
        [fn, out_fn, name](py::handle a, py::handle b, py::object out) -> py::object {
            auto [x, y] = operands(a, b, name);
            if (!out.is_none()) {
                Tensor o = out.cast<Tensor>();
                {
                    ReleaseFor r(o.numel());
                    out_fn(x, y, o);
                }
                return out;
            }
            Tensor result;
            {
                ReleaseFor r(std::max(x.numel(), y.numel()));
                result = fn(x, y);
            }
            return py::cast(std::move(result));
        },
        py::arg("input"), py::arg("other"), py::kw_only(), py::arg("out") = py::none(), doc);
}

void def_unary(py::module_ &m, const char *name, Unary fn) {
    m.def(
        name,
        [fn](const Tensor &x) {
            ReleaseFor r(x.numel());
            return fn(x);
        },
        py::arg("input"));
}

Pool2dOptions pool_options(py::handle kernel_size, py::handle stride, py::handle padding, const char *op) {
    auto pair = [op](py::handle h, const char *what) -> std::pair<int, int> {
        if (PyLong_Check(h.ptr())) {
            int v = h.cast<int>();
            return {v, v};
        }
        auto v = h.cast<std::vector<int>>();
        if (v.size() != 2)
            raise_python("ValueError", std::string(op) + ": " + what + " must be an int or a pair of ints");
        return {v[0], v[1]};
    };
    Pool2dOptions o;
    std::tie(o.kernel_h, o.kernel_w) = pair(kernel_size, "kernel_size");
    if (stride.is_none()) {
        o.stride_h = o.kernel_h;
        o.stride_w = o.kernel_w;
    } else {
        std::tie(o.stride_h, o.stride_w) = pair(stride, "stride");
    }
    std::tie(o.pad_h, o.pad_w) = pair(padding, "padding");
    return o;
}

// conv2d's stride, padding, dilation (ints or pairs) and groups as Conv2dOptions.
Conv2dOptions conv_options(py::handle stride, py::handle padding, py::handle dilation, int groups, const char *op) {
    const Pool2dOptions s = pool_options(stride, stride, padding, op);
    const Pool2dOptions d = pool_options(dilation, dilation, py::int_(0), op);
    Conv2dOptions o;
    o.stride_h = s.kernel_h;
    o.stride_w = s.kernel_w;
    o.pad_h = s.pad_h;
    o.pad_w = s.pad_w;
    o.dilation_h = d.kernel_h;
    o.dilation_w = d.kernel_w;
    o.groups = groups;
    return o;
}

Conv2dActivation conv_activation_arg(const std::string &activation) {
    if (activation == "none") return Conv2dActivation::none;
    if (activation == "relu") return Conv2dActivation::relu;
    if (activation == "clip") return Conv2dActivation::clip;
    raise_python("ValueError",
                 "conv2d_activation: activation must be 'none', 'relu' or 'clip', got '" + activation + "'");
}

Reduction reduction_arg(const std::string &reduction) {
    if (reduction == "mean") return Reduction::mean;
    if (reduction == "sum") return Reduction::sum;
    if (reduction == "none") return Reduction::none;
    raise_python("ValueError", "reduction must be 'mean', 'sum' or 'none', got '" + reduction + "'");
}

Tensor optional_tensor(py::handle obj) { return obj.is_none() ? Tensor() : obj.cast<Tensor>(); }

}  // namespace

void bind_ops(py::module_ &m) {
#define TF_BINARY(fn, SYM)                                                                                             \
    def_binary(m, #fn, &tinyfin::fn, &tinyfin::fn,                                                                     \
               "Elementwise " #fn " with broadcasting; out= writes into an existing tensor.");
    TINYFIN_BINARY_OUT_OPS(TF_BINARY)
#undef TF_BINARY

    for (auto [name, fn] : std::initializer_list<std::pair<const char *, Unary>>{
             {"neg", &neg},   {"exp", &exp},         {"relu", &relu},   {"abs", &abs},       {"log", &log},
             {"sqrt", &sqrt}, {"rsqrt", &rsqrt},     {"sin", &sin},     {"cos", &cos},       {"tanh", &tanh},
             {"erf", &erf},   {"sigmoid", &sigmoid}, {"silu", &silu},   {"square", &square}, {"asin", &asin},
             {"acos", &acos}, {"atan", &atan},       {"asinh", &asinh}, {"acosh", &acosh},   {"atanh", &atanh}})
        def_unary(m, name, fn);

    m.def(
        "gelu",
        [](const Tensor &x, const std::string &approximate) {
            if (approximate != "none" && approximate != "tanh")
                raise_python("ValueError", "gelu: approximate must be 'none' or 'tanh', got '" + approximate + "'");
            Release r;
            return gelu(x, approximate == "tanh");
        },
        py::arg("input"), py::arg("approximate") = "none");
    m.def(
        "clamp",
        [](const Tensor &x, std::optional<double> min, std::optional<double> max) {
            Release r;
            return clamp(x, min.value_or(-INFINITY), max.value_or(INFINITY));
        },
        py::arg("input"), py::arg("min") = py::none(), py::arg("max") = py::none());
    m.def(
        "where",
        [](const Tensor &cond, py::handle a, py::handle b) {
            auto [x, y] = operands(a, b, "where");
            Release r;
            return where(cond, x, y);
        },
        py::arg("condition"), py::arg("input"), py::arg("other"));
    m.def("matmul", &matmul, py::arg("input"), py::arg("other"), py::call_guard<Release>());
    // Block-quantized weights (docs/quantization.md).
    m.def(
        "quantize", [](const Tensor &x, py::handle dtype) { return quantize(x, dtype_arg(dtype, DType::q8_0)); },
        py::arg("input"), py::arg("dtype"));
    m.def(
        "dequantize", [](const Tensor &q, py::handle dtype) { return dequantize(q, dtype_arg(dtype, DType::f32)); },
        py::arg("input"), py::arg("dtype") = py::none());
    m.def(
        "matmul_q",
        [](const Tensor &x, const Tensor &w, py::handle dtype) {
            std::optional<DType> out;
            if (!dtype.is_none()) out = dtype_arg(dtype, DType::f32);
            Release r;
            return matmul_q(x, w, out);
        },
        py::arg("input"), py::arg("weight"), py::arg("dtype") = py::none());
    // The backend's private layout of a weight matmul_q reads (tinyfin.hpp prepack_weight).
    m.def("prepack_weight", &prepack_weight, py::arg("weight"));
    // A hint that t changes from now on only through tinyfin (extend.hpp mark_constant).
    m.def("mark_constant", &mark_constant, py::arg("tensor"));
    m.def(
        "embedding_q",
        [](const Tensor &w, const Tensor &idx, py::handle dtype) {
            return embedding_q(w, idx, dtype_arg(dtype, DType::f32));
        },
        py::arg("weight"), py::arg("indices"), py::arg("dtype") = py::none());

    using Reduce = Tensor (*)(const Tensor &, const Axes &, bool);
    for (auto [name, fn] : std::initializer_list<std::pair<const char *, Reduce>>{
             {"sum", &sum}, {"mean", &mean}, {"amax", &max}, {"amin", &min}})
        m.def(
            name,
            [fn = fn](const Tensor &x, py::object dim, bool keepdim) {  // clang 14 cannot capture a binding
                std::vector<int> axes = axes_arg(dim);
                Release r;
                return fn(x, axes, keepdim);
            },
            py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
    m.def(
        "var",
        [](const Tensor &x, py::object dim, double correction, bool keepdim) {
            std::vector<int> axes = axes_arg(dim);
            Release r;
            return var(x, axes, Correction(correction), keepdim);
        },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("correction") = 1.0, py::arg("keepdim") = false);
    m.def(
        "argmax",
        [](const Tensor &x, std::optional<int> dim, bool keepdim) {
            Release r;
            if (!dim) return argmax(x.reshape({-1}), 0, false);
            return argmax(x, *dim, keepdim);
        },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
    m.def(
        "argmin",
        [](const Tensor &x, std::optional<int> dim, bool keepdim) {
            Release r;
            if (!dim) return argmin(x.reshape({-1}), 0, false);
            return argmin(x, *dim, keepdim);
        },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
    m.def("cast", &cast, py::arg("input"), py::arg("dtype"), py::call_guard<Release>());

    // nn ops (tinyfin.nn.functional).
    m.def(
        "conv2d",
        [](const Tensor &x, const Tensor &w, py::object bias, py::object stride, py::object padding,
           py::object dilation, int groups) {
            const Conv2dOptions o = conv_options(stride, padding, dilation, groups, "conv2d");
            Tensor b = optional_tensor(bias);
            Release r;
            return conv2d(x, w, b, o);
        },
        py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
        py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1);
    // conv2d (+ residual), then an activation, fused where the backend has conv2d_act (tinyfin.hpp).
    m.def(
        "conv2d_activation",
        [](const Tensor &x, const Tensor &w, py::object bias, py::object stride, py::object padding,
           py::object dilation, int groups, const std::string &activation, double min, double max,
           py::object residual) {
            const Conv2dOptions o = conv_options(stride, padding, dilation, groups, "conv2d_activation");
            const Conv2dActivation a = conv_activation_arg(activation);
            Tensor b = optional_tensor(bias), res = optional_tensor(residual);
            Release r;
            return conv2d_activation(x, w, b, o, a, min, max, res);
        },
        py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
        py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("activation") = "relu",
        py::arg("min") = 0.0, py::arg("max") = 0.0, py::arg("residual") = py::none());
    m.def(
        "max_pool2d",
        [](const Tensor &x, py::object kernel_size, py::object stride, py::object padding) {
            Pool2dOptions o = pool_options(kernel_size, stride, padding, "max_pool2d");
            Release r;
            return max_pool2d(x, o);
        },
        py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
    m.def(
        "avg_pool2d",
        [](const Tensor &x, py::object kernel_size, py::object stride, py::object padding, bool count_include_pad) {
            Pool2dOptions o = pool_options(kernel_size, stride, padding, "avg_pool2d");
            o.count_include_pad = count_include_pad;
            Release r;
            return avg_pool2d(x, o);
        },
        py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0,
        py::arg("count_include_pad") = true);
    m.def(
        "cumsum",
        [](const Tensor &x, int64_t dim, py::handle dtype, bool exclusive, bool reverse) {
            std::optional<DType> to;
            if (!dtype.is_none()) to = dtype_arg(dtype, x.dtype());
            Release r;
            return cumsum(to ? cast(x, *to) : x, dim, exclusive, reverse);
        },
        py::arg("input"), py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("exclusive") = false,
        py::arg("reverse") = false);
    m.def("softmax", &softmax, py::arg("input"), py::arg("dim") = -1, py::call_guard<Release>());
    m.def("log_softmax", &log_softmax, py::arg("input"), py::arg("dim") = -1, py::call_guard<Release>());
    m.def(
        "layer_norm",
        [](const Tensor &x, std::vector<int64_t> normalized_shape, py::object weight, py::object bias, double eps) {
            Tensor w = optional_tensor(weight), b = optional_tensor(bias);
            int n = static_cast<int>(normalized_shape.size());
            if (n > x.rank() || !std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - n))
                raise_python("ShapeError", "layer_norm: normalized_shape " + shape_str(normalized_shape) +
                                               " is not the end of the input's shape " + shape_str(x.shape()));
            Release r;
            return layer_norm(x, n, w, b, eps);
        },
        py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
        py::arg("eps") = 1e-5);
    m.def(
        "rms_norm",
        [](const Tensor &x, std::vector<int64_t> normalized_shape, py::object weight, std::optional<double> eps) {
            Tensor w = optional_tensor(weight);
            int n = static_cast<int>(normalized_shape.size());
            if (n > x.rank() || !std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - n))
                raise_python("ShapeError", "rms_norm: normalized_shape " + shape_str(normalized_shape) +
                                               " is not the end of the input's shape " + shape_str(x.shape()));
            Release r;
            return rms_norm(x, n, w, eps.value_or(1e-6));
        },
        py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("eps") = py::none());
    m.def("rope", py::overload_cast<const Tensor &, double, bool, int64_t, int64_t>(&rope), py::arg("input"),
          py::arg("theta") = 10000.0, py::arg("interleaved") = false, py::arg("position_offset") = 0,
          py::arg("seq_axis") = -2, py::call_guard<Release>());
    // At explicit positions ([T] tensor): rope(x, positions, theta=..., interleaved=..., seq_axis=...).
    m.def("rope", py::overload_cast<const Tensor &, const Tensor &, double, bool, int64_t>(&rope), py::arg("input"),
          py::arg("positions"), py::arg("theta") = 10000.0, py::arg("interleaved") = false, py::arg("seq_axis") = -2,
          py::call_guard<Release>());
    m.def(
        "scaled_dot_product_attention",
        [](const Tensor &q, const Tensor &k, const Tensor &v, py::object attn_mask, double dropout_p, bool is_causal,
           std::optional<double> scale, const std::string &causal_alignment) {
            if (dropout_p != 0.0)
                raise_python("ValueError", "scaled_dot_product_attention: dropout_p must be 0 (no attention dropout)");
            if (causal_alignment != "top_left" && causal_alignment != "bottom_right")
                raise_python("ValueError", "scaled_dot_product_attention: causal_alignment must be 'top_left' or "
                                           "'bottom_right', got '" +
                                               causal_alignment + "'");
            const CausalAlignment alignment =
                causal_alignment == "top_left" ? CausalAlignment::top_left : CausalAlignment::bottom_right;
            Tensor mask = optional_tensor(attn_mask);
            Release r;
            return scaled_dot_product_attention(q, k, v, mask, is_causal, scale.value_or(0.0), alignment);
        },
        py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(),
        py::arg("dropout_p") = 0.0, py::arg("is_causal") = false, py::arg("scale") = py::none(),
        py::arg("causal_alignment") = "top_left");
    // One node like the C++ op (and one row of autocast's table: the bias follows the product's dtype).
    m.def(
        "linear",
        [](const Tensor &x, const Tensor &w, py::object bias) {
            Tensor b = bias.is_none() ? Tensor() : bias.cast<Tensor>();
            Release r;
            return linear(x, w, b);
        },
        py::arg("input"), py::arg("weight"), py::arg("bias") = py::none());
    m.def(
        "embedding",
        [](const Tensor &indices, const Tensor &weight) {
            Release r;
            return embedding(weight, indices);
        },
        py::arg("input"), py::arg("weight"));
    m.def(
        "cross_entropy",
        [](const Tensor &logits, const Tensor &labels, py::object weight, const std::string &reduction,
           int64_t ignore_index, double label_smoothing) {
            CrossEntropyOptions o;
            o.reduction = reduction_arg(reduction);
            o.ignore_index = ignore_index;
            o.weight = optional_tensor(weight);
            if (!(label_smoothing >= 0 && label_smoothing <= 1))
                raise_python("ValueError", "cross_entropy: label_smoothing must be in [0, 1], got " +
                                               std::to_string(label_smoothing));
            o.label_smoothing = label_smoothing;
            Release r;
            return cross_entropy(logits, labels, o);
        },
        py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("reduction") = "mean",
        py::arg("ignore_index") = -100, py::arg("label_smoothing") = 0.0);
    m.def(
        "one_hot",
        [](const Tensor &labels, int num_classes, py::object dtype) {
            DType d = dtype_arg(dtype, DType::i64);
            Release r;
            return one_hot(labels, num_classes, d);
        },
        py::arg("input"), py::arg("num_classes"), py::arg("dtype") = py::none());

    // Layout.
    m.def("cat", &concat, py::arg("tensors"), py::arg("dim") = 0, py::call_guard<Release>());
    m.def("stack", &stack, py::arg("tensors"), py::arg("dim") = 0, py::call_guard<Release>());
    m.def("_split", &split, py::arg("tensor"), py::arg("sizes"), py::arg("dim") = 0, py::call_guard<Release>());
    m.def("_pad", &pad, py::arg("input"), py::arg("pads"), py::arg("value") = 0.0, py::call_guard<Release>());
    m.def("narrow", &narrow, py::arg("input"), py::arg("dim"), py::arg("start"), py::arg("length"),
          py::call_guard<Release>());
}

}  // namespace tinyfin::python
