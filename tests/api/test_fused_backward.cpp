// The fused backward ops. gelu_backward, the exact gelu's gradient: its values against a long
// double reference and against the composition of ordinary ops it replaces, in every float
// dtype; gelu's backward runs it as one op on cpu; argument errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;
using F = std::vector<float>;

namespace {

F spread(int64_t n, double lo, double hi, double phase) {
    F out(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const double t = 0.5 + 0.5 * std::sin(phase + 1.37 * static_cast<double>(i));
        out[static_cast<std::size_t>(i)] = static_cast<float>(lo + (hi - lo) * t);
    }
    return out;
}

double reference(double dy, double x) {
    const long double xl = x;
    const long double cdf = 0.5L * std::erfc(-xl / std::sqrt(2.0L));
    const long double pdf = std::exp(-0.5L * xl * xl) / std::sqrt(2.0L * 3.14159265358979323846264338327950288L);
    return static_cast<double>(static_cast<long double>(dy) * (cdf + xl * pdf));
}

// The formula gelu's backward composed from ordinary ops before the op existed.
Tensor composed(const Tensor &dy, const Tensor &x) {
    Tensor cdf = mul(0.5, add(1.0, erf(mul(x, M_SQRT1_2))));
    Tensor pdf = mul(1.0 / std::sqrt(2 * M_PI), exp(mul(-0.5, square(x))));
    return mul(dy, add(cdf, mul(x, pdf)));
}

uint64_t cpu_ops() {
    for (const Stats::Backend &b : stats().backends)
        if (b.name == "cpu") return b.ops;
    return 0;
}

}  // namespace

TEST_CASE("gelu_backward: f32 within an ulp of long double, close to the composed ops") {
    const int64_t n = 4099;
    const F dyv = spread(n, -2, 2, 0.3), xv = spread(n, -9, 9, 1.1);
    const Tensor dy = from_vector(dyv, {n}), x = from_vector(xv, {n});
    const F got = gelu_backward(dy, x).to_vector<float>();
    const F old = composed(dy, x).to_vector<float>();
    int far_from_reference = 0, far_from_composed = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double want = reference(dyv[i], xv[i]);
        // The terms' size: where Phi and x phi cancel (x near -0.75) the error is relative to it.
        const double size = std::fabs(dyv[i]) * (1 + std::fabs(xv[i]));
        far_from_reference += std::fabs(got[i] - want) > std::max(std::ldexp(std::fabs(want), -23), size * 1e-10);
        // The composition rounds to f32 after every op: a few ulp of the terms' size.
        far_from_composed += std::fabs(got[i] - old[i]) > 1e-6 * size;
    }
    CHECK(far_from_reference == 0);
    CHECK(far_from_composed == 0);
}

TEST_CASE("gelu_backward: broadcasting, views and the half dtypes") {
    const F dyv = {1, -2, 3, 0.5f, -1, 4};
    const F xv = {-1.5f, 0.25f, 2};
    const Tensor dy = from_vector(dyv, {2, 3}), x = from_vector(xv, {3});
    const F got = gelu_backward(dy, x).to_vector<float>();
    for (int i = 0; i < 6; ++i) CHECK(got[i] == doctest::Approx(reference(dyv[i], xv[i % 3])).epsilon(1e-6));
    // dy as a transposed view: the same values as from a contiguous copy.
    const Tensor dyt = from_vector(dyv, {3, 2}).transpose(0, 1);
    const F viewed = gelu_backward(dyt, x).to_vector<float>(),
            copied = gelu_backward(dyt.contiguous(), x).to_vector<float>();
    CHECK(viewed == copied);
    for (DType dt : {DType::f16, DType::bf16}) {
        INFO(static_cast<int>(dt));
        const Tensor h = gelu_backward(dy.to(dt), x.to(dt));
        CHECK(h.dtype() == dt);
        const F hv = h.to(DType::f32).to_vector<float>();
        const double eps = dt == DType::f16 ? 1e-3 : 8e-3;
        for (int i = 0; i < 6; ++i) CHECK(hv[i] == doctest::Approx(got[i]).epsilon(eps));
    }
}

TEST_CASE("gelu's gradient is one gelu_backward op on cpu, with the values of the op") {
    const int64_t n = 1024;
    Tensor x = from_vector(spread(n, -4, 4, 0.7), {8, n / 8});
    x.requires_grad_();
    const Tensor g = from_vector(spread(n, -1, 1, 2.9), {8, n / 8});
    Tensor y = gelu(x);
    const uint64_t before = cpu_ops();
    y.backward(g);
    const uint64_t ops = cpu_ops() - before;
    CHECK(ops >= 1);
    CHECK(ops <= 2);  // the op, and at most a copy into the leaf's grad (the composition took 11)
    CHECK(x.grad().to_vector<float>() == gelu_backward(g, x.detach()).to_vector<float>());
}

TEST_CASE("gelu_backward refuses integer and mixed dtypes with the op's name") {
    const Tensor i = from_vector(std::vector<int32_t>{1, 2}, {2});
    const Tensor f = from_vector(F{1, 2}, {2});
    CHECK_THROWS_AS(gelu_backward(i, i), DTypeError);
    CHECK_THROWS_WITH_AS(gelu_backward(f, f.to(DType::f16)), doctest::Contains("gelu_backward"), DTypeError);
    CHECK_THROWS_AS(gelu_backward(f, from_vector(F{1, 2, 3}, {3})), ShapeError);
}
