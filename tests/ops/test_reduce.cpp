// Reductions (mean, max, min, var, argmax, argmin) over axes with and without
// keepdim, and cast, against host loops (matmul: test_gemm.cpp); then, on the backend under
// test, the reductions against cpu.
#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include "device_parity.hpp"
#include "reference_nn.hpp"

using namespace tinyfin;
using ref::D;
using ref::F;
using ref::matmul_ref;

namespace {

// Reduces `axes` (all when empty) of a row-major host tensor: f gets each group's values in
// row-major order. Returns the keepdim-shaped result.
D reduce_ref(const D &a, const Shape &shape, std::vector<int> axes, const std::function<double(const D &)> &f) {
    int rank = static_cast<int>(shape.size());
    std::set<int> reduced;
    if (axes.empty())
        for (int i = 0; i < rank; ++i) reduced.insert(i);
    for (int ax : axes) reduced.insert(ax < 0 ? ax + rank : ax);
    Shape keep = shape;
    for (int ax : reduced) keep[ax] = 1;
    std::vector<D> groups(static_cast<std::size_t>(ref::numel(keep)));
    for (int64_t i = 0; i < ref::numel(shape); ++i) {
        auto c = ref::unravel(i, shape);
        int64_t o = 0;
        for (int d = 0; d < rank; ++d) o = o * keep[d] + (reduced.count(d) ? 0 : c[d]);
        groups[o].push_back(a[i]);
    }
    D out;
    for (const D &g : groups) out.push_back(f(g));
    return out;
}

Shape reduced_shape(const Shape &shape, std::vector<int> axes, bool keepdim) {
    int rank = static_cast<int>(shape.size());
    std::set<int> reduced;
    if (axes.empty())
        for (int i = 0; i < rank; ++i) reduced.insert(i);
    for (int ax : axes) reduced.insert(ax < 0 ? ax + rank : ax);
    Shape out;
    for (int d = 0; d < rank; ++d) {
        if (!reduced.count(d))
            out.push_back(shape[d]);
        else if (keepdim)
            out.push_back(1);
    }
    return out;
}

double mean_of(const D &g) { return std::accumulate(g.begin(), g.end(), 0.0) / g.size(); }
double max_of(const D &g) { return *std::max_element(g.begin(), g.end()); }
double min_of(const D &g) { return *std::min_element(g.begin(), g.end()); }
std::function<double(const D &)> var_of(double correction) {
    return [correction](const D &g) {
        double m = mean_of(g), s = 0;
        for (double v : g) s += (v - m) * (v - m);
        return s / std::max(static_cast<double>(g.size()) - correction, 0.0);
    };
}

// Axis lists exercised on a rank-3 tensor.
const std::vector<std::vector<int>> axis_sets{{}, {0}, {1}, {2}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}};

struct ReduceCase {
    const char *name;
    std::function<Tensor(const Tensor &, const std::vector<int> &, bool)> op;
    std::function<double(const D &)> reference;
};

std::vector<ReduceCase> reduce_cases() {
    return {
        {"mean", [](const Tensor &x, const std::vector<int> &a, bool k) { return mean(x, a, k); }, mean_of},
        {"max", [](const Tensor &x, const std::vector<int> &a, bool k) { return max(x, a, k); }, max_of},
        {"min", [](const Tensor &x, const std::vector<int> &a, bool k) { return min(x, a, k); }, min_of},
        {"var0", [](const Tensor &x, const std::vector<int> &a, bool k) { return var(x, a, 0, k); }, var_of(0)},
        {"var1", [](const Tensor &x, const std::vector<int> &a, bool k) { return var(x, a, 1, k); }, var_of(1)},
    };
}

std::vector<int64_t> i64s(const Tensor &t) {
    REQUIRE(t.dtype() == DType::i64);
    return t.to_vector<int64_t>();
}

}  // namespace

TEST_CASE("mean, max, min and var over every axis set, with and without keepdim") {
    Shape shape{2, 3, 4};
    F v = ref::values(24, 31, -2, 2);
    D dv = ref::to_double(v);
    Tensor x = ref::tensor(v, shape);
    for (const ReduceCase &r : reduce_cases())
        for (const auto &axes : axis_sets)
            for (bool keepdim : {false, true}) {
                INFO(std::string(r.name) << " axes " << shape_str(Shape(axes.begin(), axes.end())) << " keepdim "
                                         << keepdim);
                ref::check_close(r.op(x, axes, keepdim), reduce_ref(dv, shape, axes, r.reference),
                                 reduced_shape(shape, axes, keepdim), 1e-6, 1e-5);
            }
}

TEST_CASE("reductions of transposed and step-sliced inputs") {
    F v = ref::values(24, 32, -2, 2);
    D dv = ref::to_double(v);
    Tensor x = ref::tensor(v, {4, 6});
    Tensor xt = x.transpose(0, 1);  // [6,4]
    Tensor xs = x.slice(1, 0, 6, 2);  // [4,3]: columns 0, 2, 4
    D dt = ref::transpose2(dv, 4, 6), ds;
    for (int r = 0; r < 4; ++r) ds.insert(ds.end(), {dv[r * 6], dv[r * 6 + 2], dv[r * 6 + 4]});
    for (const ReduceCase &r : reduce_cases())
        for (const std::vector<int> &axes : std::vector<std::vector<int>>{{}, {0}, {1}}) {
            INFO(std::string(r.name) << " axes " << shape_str(Shape(axes.begin(), axes.end())));
            ref::check_close(r.op(xt, axes, false), reduce_ref(dt, {6, 4}, axes, r.reference),
                             reduced_shape({6, 4}, axes, false), 1e-6, 1e-5);
            ref::check_close(r.op(xs, axes, true), reduce_ref(ds, {4, 3}, axes, r.reference),
                             reduced_shape({4, 3}, axes, true), 1e-6, 1e-5);
        }
}

TEST_CASE("reductions and matmul at the maximum rank (8)") {
    Shape shape{2, 1, 2, 1, 2, 1, 2, 3};
    F v = ref::values(48, 35, -2, 2);
    D dv = ref::to_double(v);
    Tensor x = ref::tensor(v, shape);
    for (const ReduceCase &r : reduce_cases())
        for (const std::vector<int> &axes : std::vector<std::vector<int>>{{0, 2, 4, 6}, {7}, {-1, 0}, {}}) {
            INFO(std::string(r.name) << " axes " << shape_str(Shape(axes.begin(), axes.end())));
            ref::check_close(r.op(x, axes, true), reduce_ref(dv, shape, axes, r.reference),
                             reduced_shape(shape, axes, true), 1e-6, 1e-5);
        }
    Shape so;
    F w = ref::values(3 * 2, 36);
    D want = matmul_ref(dv, shape, ref::to_double(w), {3, 2}, so);
    ref::check_close(matmul(x, ref::tensor(w, {3, 2})), want, so, 1e-5, 1e-5);
}

TEST_CASE("reductions of rank-0 and zero-size tensors") {
    CHECK(mean(scalar(3)).item<float>() == 3);
    CHECK(max(scalar(3)).rank() == 0);
    CHECK(min(scalar(-3)).item<float>() == -3);
    CHECK(var(scalar(3), {}, 0).item<float>() == 0);
    // Reducing a non-empty axis of an empty tensor gives an empty result.
    CHECK(mean(zeros({0, 3}), {1}).shape() == Shape{0});
    CHECK(max(zeros({0, 3}), {1}, true).shape() == Shape{0, 1});
    CHECK(var(zeros({3, 0}), {0}).shape() == Shape{0});
}

TEST_CASE("sums, means and variances of a million elements stay accurate") {
    // Sequential f32 accumulation of 2^20 copies of 0.1 is off by about 1%; pairwise, blocked or
    // double accumulation stays within 1e-4.
    int64_t n = int64_t(1) << 20;
    Tensor x = full({n}, 0.1);
    double tenth = static_cast<double>(0.1f);
    ref::check_close(sum(x), D{tenth * n}, {}, 0, 1e-4);
    ref::check_close(mean(x.reshape({1024, 1024}), {0}), D(1024, tenth), {1024}, 0, 1e-4);
    ref::check_close(var(x), D{0}, {}, 1e-9, 0);
}

TEST_CASE("var: both corrections, a divisor of zero, and a large mean") {
    Tensor x = ref::tensor({1, 2, 3, 4}, {4});
    CHECK(var(x, {}, 0).item<float>() == doctest::Approx(1.25));
    CHECK(var(x).item<float>() == doctest::Approx(5.0 / 3));  // correction 1 by default
    CHECK(var(x, {}, 2).item<float>() == doctest::Approx(2.5));
    // one element, correction 1: 0 / 0
    CHECK(std::isnan(var(ref::tensor({7}, {1})).item<float>()));
    // A mean of 1000 and a spread of about 0.6 needs a two-pass (or Welford) variance in f32.
    F v = ref::values(50, 33, 999, 1001);
    D dv = ref::to_double(v);
    ref::check_close(var(ref::tensor(v, {50})), D{var_of(1)(dv)}, {}, 0, 1e-3);
    ref::check_close(var(ref::tensor(v, {5, 10}), {1}, 0), reduce_ref(dv, {5, 10}, {1}, var_of(0)), {5}, 0, 1e-3);
}

TEST_CASE("max and min of integers, and of values with infinities") {
    Tensor i = from_vector(std::vector<int32_t>{3, -7, 9, 2, 9, -8}, {2, 3});
    CHECK(max(i).item<int32_t>() == 9);
    CHECK(min(i, {1}).to_vector<int32_t>() == std::vector<int32_t>{-7, -8});
    CHECK(max(i, {0}, true).to_vector<int32_t>() == std::vector<int32_t>{3, 9, 9});
    Tensor f = ref::tensor({-INFINITY, -1, INFINITY, 2}, {2, 2});
    ref::check_close(max(f, {1}), D{-1, INFINITY}, {2});
    ref::check_close(min(f, {0}), D{-INFINITY, -1}, {2});
}

TEST_CASE("argmax and argmin: axes, keepdim, first of ties, NaN, strided inputs") {
    // [[1, 5, 5], [7, 0, 7]]
    Tensor x = ref::tensor({1, 5, 5, 7, 0, 7}, {2, 3});
    CHECK(i64s(argmax(x, 1)) == std::vector<int64_t>{1, 0});
    CHECK(argmax(x, 1).shape() == Shape{2});
    CHECK(i64s(argmin(x, 1)) == std::vector<int64_t>{0, 1});
    CHECK(i64s(argmax(x, 0)) == std::vector<int64_t>{1, 0, 1});
    CHECK(i64s(argmin(x, -2)) == std::vector<int64_t>{0, 1, 0});
    CHECK(argmax(x, 1, true).shape() == Shape{2, 1});
    CHECK(argmin(x, 0, true).shape() == Shape{1, 3});
    // NaN counts as the extreme for both (ops.def)
    Tensor n = ref::tensor({1, NAN, 3, NAN}, {4});
    CHECK(i64s(argmax(n, 0)) == std::vector<int64_t>{1});
    CHECK(i64s(argmin(n, 0)) == std::vector<int64_t>{1});
    // against a host loop on a random rank-3 tensor, every axis, transposed too
    Shape shape{3, 4, 5};
    F v = ref::values(60, 34);
    D dv = ref::to_double(v);
    Tensor r = ref::tensor(v, shape);
    for (int axis = 0; axis < 3; ++axis)
        for (bool is_max : {true, false}) {
            INFO("axis " << axis << (is_max ? " argmax" : " argmin"));
            D want = reduce_ref(dv, shape, {axis}, [is_max](const D &g) {
                auto it = is_max ? std::max_element(g.begin(), g.end()) : std::min_element(g.begin(), g.end());
                return static_cast<double>(it - g.begin());
            });
            Tensor got = is_max ? argmax(r, axis) : argmin(r, axis);
            std::vector<int64_t> g = i64s(got);
            CHECK(got.shape() == reduced_shape(shape, {axis}, false));
            CHECK(D(g.begin(), g.end()) == want);
        }
    Tensor t = r.permute({2, 0, 1});  // [5,3,4]
    D dt(60);
    for (int64_t i = 0; i < 60; ++i) {
        auto c = ref::unravel(i, {5, 3, 4});
        dt[i] = dv[(c[1] * 4 + c[2]) * 5 + c[0]];
    }
    std::vector<int64_t> g = i64s(argmax(t, 0));
    D want = reduce_ref(dt, {5, 3, 4}, {0}, [](const D &v) {
        return static_cast<double>(std::max_element(v.begin(), v.end()) - v.begin());
    });
    CHECK(D(g.begin(), g.end()) == want);
    // step-sliced: elements 0, 2, 4 of [4, 9, 1, 9, 8] -> [4, 1, 8]
    Tensor s = ref::tensor({4, 9, 1, 9, 8}, {5}).slice(0, 0, 5, 2);
    CHECK(i64s(argmax(s, 0)) == std::vector<int64_t>{2});
    CHECK(i64s(argmin(s, 0)) == std::vector<int64_t>{1});
    // integers
    Tensor i = from_vector(std::vector<int64_t>{4, -2, 9, 9}, {4});
    CHECK(i64s(argmax(i, 0)) == std::vector<int64_t>{2});
    CHECK(i64s(argmin(i, 0)) == std::vector<int64_t>{1});
}

TEST_CASE("cast: same dtype is a no-op, strided sources, integers and bools to f32") {
    Tensor x = ref::tensor({1.5f, -2.25f, 3}, {3});
    Tensor same = cast(x, DType::f32);
    CHECK(same.impl() == x.impl());
    Tensor t = ref::tensor({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
    CHECK(cast(t, DType::i64).to_vector<int64_t>() == std::vector<int64_t>{1, 4, 2, 5, 3, 6});
    CHECK(cast(cast(t, DType::f16), DType::f32).to_vector<float>() == F{1, 4, 2, 5, 3, 6});
    Tensor i = from_vector(std::vector<int64_t>{-(int64_t(1) << 24), 0, 5}, {3});
    CHECK(cast(i, DType::f32).to_vector<float>() == F{-16777216.f, 0, 5});
    CHECK(cast(gt(x, scalar(0)), DType::f32).to_vector<float>() == F{1, 0, 1});
    CHECK(cast(scalar(2.9), DType::i32).item<int32_t>() == 2);
    CHECK(cast(zeros({0, 2}), DType::i64).shape() == Shape{0, 2});
}

TEST_CASE("reductions, arg-reductions and matmul on f16 and bf16 inputs") {
    for (const ref::Half &half : ref::halves) {
        INFO(std::string(dtype_name(half.dtype)));
        Shape shape{2, 3, 4};
        auto [x, dx] = ref::half_input(ref::values(24, 37, -2, 2), shape, half.dtype);
        for (const ReduceCase &r : reduce_cases())
            for (const std::vector<int> &axes : std::vector<std::vector<int>>{{}, {1}, {0, 2}}) {
                INFO(std::string(r.name) << " axes " << shape_str(Shape(axes.begin(), axes.end())));
                ref::check_half(r.op(x, axes, false), half, reduce_ref(dx, shape, axes, r.reference),
                                reduced_shape(shape, axes, false));
            }
        D sums = reduce_ref(dx, shape, {1}, [](const D &g) { return std::accumulate(g.begin(), g.end(), 0.0); });
        ref::check_half(sum(x.transpose(0, 2), {1}), half, ref::transpose2(sums, 2, 4), {4, 2});
        std::vector<int64_t> got = i64s(argmax(x, 2));
        D want = reduce_ref(dx, shape, {2}, [](const D &g) {
            return static_cast<double>(std::max_element(g.begin(), g.end()) - g.begin());
        });
        CHECK(D(got.begin(), got.end()) == want);
        auto [b, db] = ref::half_input(ref::values(20, 38), {4, 5}, half.dtype);
        Shape so;
        ref::check_half(matmul(x, b), half, matmul_ref(dx, shape, db, {4, 5}, so), so);
    }
}

// ---- On the backend under test (suite "device") ---------------------------------------------------
// ops-reduce-<backend> runs these with TINYFIN_BACKEND=vulkan, opengl or opencl and no fallback: each
// op on the backend's tensors against the same op on cpu tensors (held to the host references by
// the cases above), with odd sizes, broadcasting, views, rank 0, empty tensors, every dtype the
// kernels take and special values. The cpu run leaves the suite out.

TEST_SUITE_BEGIN("device");
namespace on_device {

using namespace vt;
namespace tf = tinyfin;

TEST_CASE("reduce: sum, mean, max, min, var over axes, in both kernel modes") {
    struct ShapeCase {
        Shape shape;
        std::vector<std::vector<int>> axes;
    };
    const ShapeCase cases[] = {
        {{13, 7}, {{0}, {1}, {}}},  {{3, 5, 7, 2}, {{1, 3}, {0, 2}, {0, 1, 2, 3}, {2}}},
        {{600, 3}, {{0}, {1}}},  // long reductions: a workgroup per output
        {{4, 1000}, {{1}, {0, 1}}}, {{1}, {{0}}},
    };
    using ReduceFn = Tensor (*)(const Tensor &, const tf::Axes &, bool);
    const std::pair<const char *, ReduceFn> ops[] = {
        {"sum", tf::sum}, {"mean", tf::mean}, {"max", tf::max}, {"min", tf::min}};
    for (const ShapeCase &c : cases) {
        Pair x = random(c.shape, 91, -2, 2);
        for (const auto &axes : c.axes) {
            std::string where = tf::shape_str(c.shape) + " axes " + std::to_string(axes.size());
            for (auto [name, fn] : ops) {
                parity(std::string(name) + " " + where, {x}, [&](auto &t) { return fn(t[0], axes, false); },
                       {1e-5, 1e-5});
                parity(std::string(name) + " keepdim " + where, {x}, [&](auto &t) { return fn(t[0], axes, true); },
                       {1e-5, 1e-5});
            }
            parity("var " + where, {x}, [&](auto &t) { return tf::var(t[0], axes, 1, false); }, {1e-5, 1e-4});
            parity("var population " + where, {x}, [&](auto &t) { return tf::var(t[0], axes, 0, true); }, {1e-5, 1e-4});
        }
    }
    Pair y = random({6, 40, 11}, 92);
    parity("sum of a permuted view", {y},
           [](auto &t) {
               return tf::sum(t[0].permute({2, 0, 1}), {1, 2});
           },
           {1e-5, 1e-5});
    parity("max of a stepped view", {y}, [](auto &t) { return tf::max(t[0].slice(1, 3, 40, 5), {0, 1}); });
    parity("sum of a broadcast view", {random({1, 9}, 93)},
           [](auto &t) {
               return tf::sum(t[0].expand({300, 9}), {0});
           },
           {1e-4, 1e-5});
    parity("sum over nothing (rank 0)", {random({}, 94)}, [](auto &t) { return tf::sum(t[0]); });
    parity("sum of an empty axis", {random({0, 4}, 95)}, [](auto &t) { return tf::sum(t[0], {0}); });
    parity("mean of an empty axis is NaN", {random({0, 4}, 95)}, [](auto &t) { return tf::mean(t[0], {0}); });
    parity("max with NaN and -0", {specials({12, 30})}, [](auto &t) { return tf::max(t[0], {1}); });
    parity("min with NaN, long rows", {specials({3, 900})}, [](auto &t) { return tf::min(t[0], {1}); });
}

TEST_CASE("reduce: argmax and argmin pick the first extreme; NaN wins") {
    // Few distinct values: ties everywhere.
    Pair x = integers<int32_t>({9, 31}, 101, -2, 2);
    Pair f = {tf::cast(x.cpu, DType::f32), tf::cast(x.vk, DType::f32)};
    for (int axis : {0, 1, -1}) {
        parity("argmax axis " + std::to_string(axis), {f}, [&](auto &t) { return tf::argmax(t[0], axis); });
        parity("argmin axis " + std::to_string(axis), {f}, [&](auto &t) { return tf::argmin(t[0], axis, true); });
    }
    Pair li = integers<int32_t>({3, 700}, 102, -3, 3);
    Pair longer = {tf::cast(li.cpu, DType::f32), tf::cast(li.vk, DType::f32)};
    parity("argmax of long rows", {longer}, [](auto &t) { return tf::argmax(t[0], 1); });
    parity("argmin of long rows", {longer}, [](auto &t) { return tf::argmin(t[0], 1); });
    parity("argmax with NaN", {specials({8, 600})}, [](auto &t) { return tf::argmax(t[0], 1); });
    parity("argmin with NaN", {specials({40, 7})}, [](auto &t) { return tf::argmin(t[0].transpose(0, 1), 1); });
}

}  // namespace on_device

TEST_SUITE_END();
