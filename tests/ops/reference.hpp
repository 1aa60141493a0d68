// Host-side references for the op tests: deterministic inputs, row-major index
// helpers and comparison. Everything here is plain C++ on doubles; no tinyfin op
// computes a reference value.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tinyfin/tinyfin.hpp"

#include "../splitmix64.hpp"

namespace ref {

using tinyfin::Shape;
using tinyfin::Tensor;
using D = std::vector<double>;
using F = std::vector<float>;

inline int64_t numel(const Shape &shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

// Coordinates of a row-major flat index.
inline std::vector<int64_t> unravel(int64_t flat, const Shape &shape) {
    std::vector<int64_t> coord(shape.size());
    for (std::size_t i = shape.size(); i-- > 0;) {
        coord[i] = shape[i] ? flat % shape[i] : 0;
        flat = shape[i] ? flat / shape[i] : 0;
    }
    return coord;
}

// Flat index into a row-major tensor of shape `from` for output coordinates `coord`
// (numpy broadcasting: `from` aligns to the right, size-1 axes repeat).
inline int64_t broadcast_index(const std::vector<int64_t> &coord, const Shape &from) {
    std::size_t lead = coord.size() - from.size();
    int64_t flat = 0;
    for (std::size_t i = 0; i < from.size(); ++i) flat = flat * from[i] + (from[i] == 1 ? 0 : coord[lead + i]);
    return flat;
}

// splitmix64-driven values uniform in [lo, hi), rounded to f32; the same on every run.
inline F values(int64_t n, uint64_t seed, double lo = -1, double hi = 1) {
    F out(static_cast<std::size_t>(n));
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 12345;
    for (float &v : out) {
        v = static_cast<float>(lo + (hi - lo) * test_support::next_unit(state));
    }
    return out;
}

inline Tensor tensor(const F &v, const Shape &shape) { return tinyfin::from_vector(v, shape); }

inline D to_double(const F &v) { return D(v.begin(), v.end()); }

// An f32 tensor's elements, row-major, as doubles.
inline D host(const Tensor &t) { return to_double(t.to_vector<float>()); }

inline bool close(double got, double want, double atol, double rtol) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return got == want;
    return std::abs(got - want) <= atol + rtol * std::abs(want);
}

// Checks shape and every element; reports the first mismatch with its index.
inline void check_close(const Tensor &got, const D &want, const Shape &shape, double atol = 1e-5, double rtol = 1e-5) {
    REQUIRE(got.shape() == shape);
    REQUIRE(static_cast<int64_t>(want.size()) == numel(shape));
    D g = got.dtype() == tinyfin::DType::f32 ? host(got) : host(tinyfin::cast(got, tinyfin::DType::f32));
    for (std::size_t i = 0; i < want.size(); ++i) {
        if (close(g[i], want[i], atol, rtol)) continue;
        INFO("element " << i << " of shape " << tinyfin::shape_str(shape) << ": got " << g[i] << ", want " << want[i]);
        CHECK(close(g[i], want[i], atol, rtol));
        return;
    }
}

inline void check_close(const Tensor &got, const F &want, const Shape &shape, double atol = 1e-5, double rtol = 1e-5) {
    check_close(got, to_double(want), shape, atol, rtol);
}

// Elementwise binary reference with broadcasting.
inline D binary(const D &a, const Shape &sa, const D &b, const Shape &sb,
                const std::function<double(double, double)> &f) {
    Shape out = tinyfin::broadcast_shapes(sa, sb);
    D result(static_cast<std::size_t>(numel(out)));
    for (int64_t i = 0; i < numel(out); ++i) {
        auto c = unravel(i, out);
        result[i] = f(a[broadcast_index(c, sa)], b[broadcast_index(c, sb)]);
    }
    return result;
}

inline D unary(const D &a, const std::function<double(double)> &f) {
    D out(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(a[i]);
    return out;
}

// Row-major elements of a transposed 2-D host matrix [r, c] -> [c, r].
inline D transpose2(const D &a, int64_t r, int64_t c) {
    D out(a.size());
    for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) out[j * r + i] = a[i * c + j];
    return out;
}

// The half types with the tolerance their results are held to, as both atol and rtol: two units
// of their precision (f16 keeps 10 mantissa bits, bf16 7), for kernels that compute in f32 and
// round once.
struct Half {
    tinyfin::DType dtype;
    double tol;
};
inline const Half halves[] = {{tinyfin::DType::f16, 2 * 0x1p-10}, {tinyfin::DType::bf16, 2 * 0x1p-7}};

// v rounded to a half type, and the rounded values as doubles: the reference's input.
inline std::pair<Tensor, D> half_input(const F &v, const Shape &shape, tinyfin::DType dtype) {
    Tensor h = tinyfin::cast(tensor(v, shape), dtype);
    return {h, host(tinyfin::cast(h, tinyfin::DType::f32))};
}

// A half-typed result against its reference.
inline void check_half(const Tensor &got, const Half &half, const D &want, const Shape &shape) {
    REQUIRE(got.dtype() == half.dtype);
    check_close(got, want, shape, half.tol, half.tol);
}

inline double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
inline double gelu_tanh(double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
inline double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace ref
