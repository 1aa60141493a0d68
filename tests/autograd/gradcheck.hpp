// Finite-difference gradient check through the C++ API.
//
// For f: inputs -> Tensor, the checked loss is L(x) = sum(f(x) * W), W fixed pseudo-random
// weights in [-1, 1) of f's output shape (so every output element matters, with its own weight).
//   analytic: L.backward() through tinyfin's autograd, read from each leaf's grad();
//   numeric:  central differences, one input element at a time:
//               (L(x + h e_i) - L(x - h e_i)) / (x_i+ - x_i-)
//             where x_i+ and x_i- are the f32 values actually fed in (so the rounding of x +- h
//             to f32 does not bias the quotient) and L is summed in double on the host from the
//             f32 outputs of f, evaluated under NoGradGuard.
// Agreement: |analytic - numeric| <= atol + rtol * |numeric| for every element, with the
// defaults h = 1e-3, atol = 1e-3, rtol = 1e-2. Why these fit f32: an O(1) output carries about
// 6e-8 relative rounding error; summed over <= 60 weighted outputs and divided by 2h that is
// about 3e-4 at worst, under atol; the central-difference truncation error is h^2/6 |f'''|,
// about 2e-7. Inputs stay small (<= 60 elements each) and away from kinks (relu, abs,
// maximum/minimum, clamp, max reductions and max pooling get inputs with no ties and no
// value within 10 h of a kink).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "tinyfin/tinyfin.hpp"

#include "../splitmix64.hpp"

namespace gradcheck {

using tinyfin::Shape;
using tinyfin::Tensor;
using F = std::vector<float>;

struct Tolerance {
    double h = 1e-3;
    double atol = 1e-3;
    double rtol = 1e-2;
};

// How an input leaf is laid out in memory; the values are always given row-major.
enum class Layout {
    contiguous,
    transposed,  // last two axes stored swapped: strides of a transpose
    strided,  // every other element of a twice-as-wide last axis
};

struct Input {
    F values;
    Shape shape;
    Layout layout = Layout::contiguous;
};

inline int64_t numel(const Shape &shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

// splitmix64-driven values uniform in [lo, hi), rounded to f32; the same on every run.
inline F uniform(int64_t n, uint64_t seed, double lo = -1, double hi = 1) {
    F out(static_cast<std::size_t>(n));
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 777;
    for (float &v : out) {
        v = static_cast<float>(lo + (hi - lo) * test_support::next_unit(state));
    }
    return out;
}

// n distinct values in shuffled order, pairwise at least `spacing` apart and at least
// spacing/2 away from 0: inputs for functions with kinks at ties or at 0.
inline F distinct(int64_t n, uint64_t seed, double spacing = 0.05) {
    F keys = uniform(n, seed);
    std::vector<int64_t> order(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
    F out(static_cast<std::size_t>(n));
    for (int64_t rank = 0; rank < n; ++rank)
        out[order[rank]] = static_cast<float>((static_cast<double>(rank) - n / 2 + 0.5) * spacing);
    return out;
}

inline Input random(const Shape &shape, uint64_t seed, double lo = -1, double hi = 1,
                    Layout layout = Layout::contiguous) {
    return {uniform(numel(shape), seed, lo, hi), shape, layout};
}

inline Input spaced(const Shape &shape, uint64_t seed, double spacing = 0.05, Layout layout = Layout::contiguous) {
    return {distinct(numel(shape), seed, spacing), shape, layout};
}

inline Input with_layout(Input in, Layout layout) {
    in.layout = layout;
    return in;
}

// A tensor with in.shape and these row-major values, laid out as in.layout.
inline Tensor make(const F &values, const Input &in) {
    const Shape &shape = in.shape;
    if (in.layout == Layout::contiguous || shape.empty()) return tinyfin::from_vector(values, shape);
    int r = static_cast<int>(shape.size());
    if (in.layout == Layout::transposed) {
        REQUIRE(r >= 2);
        Shape stored = shape;
        std::swap(stored[r - 1], stored[r - 2]);
        int64_t a = shape[r - 2], b = shape[r - 1], block = a * b;
        F data(values.size());
        for (std::size_t start = 0; start < values.size(); start += block)
            for (int64_t i = 0; i < a; ++i)
                for (int64_t j = 0; j < b; ++j) data[start + j * a + i] = values[start + i * b + j];
        return tinyfin::from_vector(data, stored).transpose(-1, -2).detach();
    }
    Shape stored = shape;
    stored[r - 1] *= 2;
    F data(values.size() * 2, 1000.0f);  // the skipped elements: must never contribute
    for (std::size_t i = 0; i < values.size(); ++i) data[2 * i] = values[i];
    return tinyfin::from_vector(data, stored).slice(-1, 0, stored[r - 1], 2).detach();
}

using Function = std::function<Tensor(const std::vector<Tensor> &)>;

// L = sum(f(inputs) * W) in double from f's f32 output.
inline double host_loss(const Tensor &out, const F &weights) {
    F y = out.to_vector<float>();
    double total = 0;
    for (std::size_t i = 0; i < y.size(); ++i) total += static_cast<double>(y[i]) * weights[i];
    return total;
}

// Checks the gradient of every input against central differences (see the top of the file).
// Inputs listed in `constant` are fed in but not checked and do not require grad.
inline void check(const std::string &name, const Function &f, const std::vector<Input> &inputs, Tolerance tol = {},
                  std::vector<std::size_t> constant = {}) {
    INFO("gradcheck " << name);
    auto is_constant = [&](std::size_t i) { return std::find(constant.begin(), constant.end(), i) != constant.end(); };
    std::vector<Tensor> leaves;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        REQUIRE(numel(inputs[i].shape) == static_cast<int64_t>(inputs[i].values.size()));
        Tensor leaf = make(inputs[i].values, inputs[i]);
        if (!is_constant(i)) leaf.requires_grad_();
        leaves.push_back(leaf);
    }
    Tensor out = f(leaves);
    REQUIRE(out.dtype() == tinyfin::DType::f32);
    REQUIRE(out.requires_grad());
    F weights = uniform(out.numel(), 99 + out.numel());
    Tensor w = tinyfin::from_vector(weights, out.shape());
    Tensor loss = tinyfin::sum(tinyfin::mul(out, w));
    loss.backward();

    for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (is_constant(i)) continue;
        INFO("input " << i << " of shape " << tinyfin::shape_str(inputs[i].shape));
        Tensor grad = leaves[i].grad();
        REQUIRE(grad.defined());
        REQUIRE(grad.shape() == inputs[i].shape);
        REQUIRE(grad.dtype() == tinyfin::DType::f32);
        F analytic = grad.to_vector<float>();
        std::ostringstream mismatches;
        int bad = 0;
        tinyfin::NoGradGuard no_grad;
        for (std::size_t j = 0; j < inputs[i].values.size(); ++j) {
            auto evaluate = [&](float value) {
                std::vector<Tensor> args;
                for (std::size_t k = 0; k < inputs.size(); ++k) {
                    if (k != i) {
                        args.push_back(leaves[k].detach());
                        continue;
                    }
                    F perturbed = inputs[i].values;
                    perturbed[j] = value;
                    args.push_back(make(perturbed, inputs[i]));
                }
                return host_loss(f(args), weights);
            };
            float x = inputs[i].values[j];
            float plus = static_cast<float>(x + tol.h), minus = static_cast<float>(x - tol.h);
            double numeric =
                (evaluate(plus) - evaluate(minus)) / (static_cast<double>(plus) - static_cast<double>(minus));
            double a = analytic[j];
            if (std::abs(a - numeric) <= tol.atol + tol.rtol * std::abs(numeric)) continue;
            if (bad++ < 5) mismatches << " [" << j << "] analytic " << a << " numeric " << numeric << ";";
        }
        INFO(bad << " of " << analytic.size() << " elements differ:" << mismatches.str());
        CHECK(bad == 0);
    }
}

}  // namespace gradcheck
