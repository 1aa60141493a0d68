// The float64 reference: every op of ops.def evaluated on the host in double, from the op's
// definition (ops.def and plugin.h), independent of every plugin. Inputs are the values the
// tensors store (f16/bf16 converted exactly), so the reference is the exact result of the op on
// the backend's own inputs, up to double's rounding. docs/numerics.md, "The float64 reference".
#pragma once

#include <optional>
#include <vector>

#include "cases.hpp"

namespace conform {

// A dense row-major tensor of doubles.
struct Host {
    Shape shape;
    std::vector<double> v;

    Host() = default;
    explicit Host(Shape s, double fill = 0);
    int64_t numel() const { return static_cast<int64_t>(v.size()); }
};

// What an output's error is measured against, element by element (check.hpp's bound):
// |got - exact| <= unit(dtype) |exact| + 2^-24 * k * scale.
struct RefOutput {
    std::vector<double> value;  // the exact result (double)
    std::vector<double> scale;  // the size of the terms behind each element (sum |a b| for a dot product)
    double k = 0;  // f32 operations behind each element (reduction length + a few for the function)
};

namespace ref {

// The ops, one function each (the shapes are the op's, already broadcast where the op's KIND
// broadcasts unless stated).
Host unary(tf_op op, const Host &x, const Params &p);
// Broadcasts a and b (numpy rules) to one shape.
Host binary(tf_op op, const Host &a, const Host &b);
Host transpose_last(const Host &x);  // swaps the last two axes
// sum, mean, max, min, var over the axes in mask (bit k = axis k), kept with size 1.
Host reduce(tf_op op, const Host &x, uint32_t mask, double correction = 1);
// [..., M, K] x [..., K, N], batch dims broadcast.
Host matmul(const Host &a, const Host &b);
Host conv2d(const Host &x, const Host &w, const tf_params_conv2d &p);
Host conv2d_grad_input(const Host &dy, const Host &w, const tf_params_conv2d &p, const Shape &x_shape);
Host conv2d_grad_weight(const Host &dy, const Host &x, const tf_params_conv2d &p, const Shape &w_shape);
Host max_pool2d(const Host &x, const tf_params_pool2d &p);
Host max_pool2d_backward(const Host &dy, const Host &x, const tf_params_pool2d &p);
Host avg_pool2d(const Host &x, const tf_params_pool2d &p);
Host avg_pool2d_backward(const Host &dy, const tf_params_pool2d &p, const Shape &x_shape);
Host softmax(const Host &x, int axis, bool log);
// cumsum along axis (ONNX CumSum: exclusive starts from 0, reverse runs from the end), in double.
Host cumsum(const Host &x, int axis, bool exclusive, bool reverse);
Host layer_norm(const Host &x, const Host &w, const Host &b, int n_axes, double eps);
Host rms_norm(const Host &x, const Host &w, int n_axes, double eps);
Host rope(const Host &x, const tf_params_rope &p);
// mask: nullptr for none.
Host attention(const Host &q, const Host &k, const Host &v, const Host *mask, const tf_params_attention &p);
Host embedding(const Host &w, const Host &idx);
Host cross_entropy(const Host &logits, const Host &labels, const tf_params_cross_entropy &p);

}  // namespace ref

// The reference outputs of a case, or nothing when the op has none (the case is then compared
// with the cpu plugin only). inputs: the inputs' logical values; before: the outputs' values
// before the call (the in-out operands of the optimizer ops).
std::optional<std::vector<RefOutput>> reference(const Case &c, const std::vector<Host> &inputs,
                                                const std::vector<Host> &before);

}  // namespace conform
