// Finite-difference gradient checks of the elementwise ops, cast and the view
// ops, including gradients reduced over broadcast axes and non-contiguous inputs.
#include "gradcheck.hpp"

using namespace tinyfin;
using gradcheck::Input;
using gradcheck::Layout;
using V = std::vector<Tensor>;

namespace {

// Two inputs whose values are all distinct from each other (no ties between a and b).
std::pair<Input, Input> untied(const Shape &sa, const Shape &sb, uint64_t seed) {
    int64_t na = gradcheck::numel(sa), nb = gradcheck::numel(sb);
    gradcheck::F all = gradcheck::distinct(na + nb, seed);
    return {Input{gradcheck::F(all.begin(), all.begin() + na), sa},
            Input{gradcheck::F(all.begin() + na, all.end()), sb}};
}

Tensor bool_tensor(std::vector<uint8_t> v, const Shape &shape) { return from_host(v.data(), shape, DType::boolean); }

}  // namespace

TEST_CASE("gradcheck add, sub, mul, div with broadcasting") {
    gradcheck::check("add [2,3] + [3]", [](const V &x) { return add(x[0], x[1]); },
                     {gradcheck::random({2, 3}, 1), gradcheck::random({3}, 2)});
    gradcheck::check("add [2,3] transposed + [2,3] strided", [](const V &x) { return add(x[0], x[1]); },
                     {gradcheck::random({2, 3}, 3, -1, 1, Layout::transposed),
                      gradcheck::random({2, 3}, 4, -1, 1, Layout::strided)});
    gradcheck::check("sub [2,1] - [1,3]", [](const V &x) { return sub(x[0], x[1]); },
                     {gradcheck::random({2, 1}, 5), gradcheck::random({1, 3}, 6)});
    gradcheck::check("sub rank-0 - [4]", [](const V &x) { return sub(x[0], x[1]); },
                     {gradcheck::random({}, 7), gradcheck::random({4}, 8)});
    gradcheck::check("mul [4,1,3] * [2,1]", [](const V &x) { return mul(x[0], x[1]); },
                     {gradcheck::random({4, 1, 3}, 9), gradcheck::random({2, 1}, 10)});
    gradcheck::check("mul [3,4] transposed * [4]", [](const V &x) { return mul(x[0], x[1]); },
                     {gradcheck::random({3, 4}, 11, -1, 1, Layout::transposed), gradcheck::random({4}, 12)});
    gradcheck::check("div [2,3] / [3]", [](const V &x) { return div(x[0], x[1]); },
                     {gradcheck::random({2, 3}, 13), gradcheck::random({3}, 14, 0.5, 2)});
    gradcheck::check("div [3] / [2,1] (negative divisors)", [](const V &x) { return div(x[0], x[1]); },
                     {gradcheck::random({3}, 15), gradcheck::random({2, 1}, 16, -2, -0.5)});
    gradcheck::check("scalar operators",
                     [](const V &x) { return (x[0] * 2.0 + 1.0) / (3.0 - x[0] * 0.5) - 1.0 / x[1]; },
                     {gradcheck::random({2, 3}, 17), gradcheck::random({2, 3}, 18, 0.5, 2)});
}

TEST_CASE("gradcheck pow, maximum, minimum, where") {
    gradcheck::check("pow [2,3] ^ [3]", [](const V &x) { return pow(x[0], x[1]); },
                     {gradcheck::random({2, 3}, 20, 0.5, 2), gradcheck::random({3}, 21, -2, 2)});
    gradcheck::check("pow [3] ^ [2,3] strided", [](const V &x) { return pow(x[0], x[1]); },
                     {gradcheck::random({3}, 22, 0.5, 2), gradcheck::random({2, 3}, 23, -1, 2, Layout::strided)});
    // A negative base with integral exponents: only the base is differentiable there.
    Tensor exponents = from_vector(std::vector<float>{2, 3, -1}, {3});
    gradcheck::check("pow negative base, integral exponents", [&](const V &x) { return pow(x[0], exponents); },
                     {gradcheck::random({2, 3}, 24, -2, -0.5)});
    auto [a, b] = untied({4, 1, 3}, {2, 1}, 25);
    gradcheck::check("maximum [4,1,3] vs [2,1]", [](const V &x) { return maximum(x[0], x[1]); }, {a, b});
    gradcheck::check("minimum [4,1,3] vs [2,1]", [](const V &x) { return minimum(x[0], x[1]); }, {a, b});
    auto [c, d] = untied({3, 4}, {3, 4}, 26);
    gradcheck::check("maximum transposed vs strided", [](const V &x) { return maximum(x[0], x[1]); },
                     {gradcheck::with_layout(c, Layout::transposed), gradcheck::with_layout(d, Layout::strided)});
    Tensor cond = bool_tensor({1, 0}, {2, 1});
    gradcheck::check("where [2,1] ? [3] : [2,3]", [&](const V &x) { return where(cond, x[0], x[1]); },
                     {gradcheck::random({3}, 27), gradcheck::random({2, 3}, 28)});
    Tensor cond2 = bool_tensor({1, 0, 0, 1, 1, 0}, {3, 2}).transpose(0, 1);
    gradcheck::check("where transposed condition, rank-0 branch", [&](const V &x) { return where(cond2, x[0], x[1]); },
                     {gradcheck::random({2, 3}, 29, -1, 1, Layout::transposed), gradcheck::random({}, 30)});
    // Linear in dy; x is spaced away from 0, where its gradient (0 everywhere else) has a jump.
    gradcheck::check("relu_backward dy [2,3], transposed x", [](const V &x) { return relu_backward(x[0], x[1]); },
                     {gradcheck::random({2, 3}, 31), gradcheck::spaced({2, 3}, 32, 0.05, Layout::transposed)});
    gradcheck::check("relu_backward broadcast dy [3], x [2,3]", [](const V &x) { return relu_backward(x[0], x[1]); },
                     {gradcheck::random({3}, 33), gradcheck::spaced({2, 3}, 34, 0.05)});
}

// gelu_backward's own backward: linear in dy, dy phi(x) (2 - x^2) in x (gelu's second derivative),
// so a double backward through gelu works whether or not the plugin has the fused kernel.
TEST_CASE("gradcheck gelu_backward: dy and x, broadcast and non-contiguous") {
    gradcheck::check("gelu_backward dy [2,3], transposed x", [](const V &x) { return gelu_backward(x[0], x[1]); },
                     {gradcheck::random({2, 3}, 35), gradcheck::random({2, 3}, 36, -3, 3, Layout::transposed)});
    gradcheck::check("gelu_backward broadcast dy [3], strided x [2,3]",
                     [](const V &x) { return gelu_backward(x[0], x[1]); },
                     {gradcheck::random({3}, 37), gradcheck::random({2, 3}, 38, -3, 3, Layout::strided)});
    gradcheck::check("gelu_backward dy [2,3], broadcast x [2,1]", [](const V &x) { return gelu_backward(x[0], x[1]); },
                     {gradcheck::random({2, 3}, 39), gradcheck::random({2, 1}, 40, -2, 2)});
}

TEST_CASE("gradcheck every unary op, contiguous and non-contiguous") {
    struct Case {
        const char *name;
        std::function<Tensor(const Tensor &)> op;
        double lo, hi;
        bool kink;  // needs inputs away from 0 and from each other
    };
    std::vector<Case> cases{
        {"neg", [](const Tensor &x) { return neg(x); }, -2, 2, false},
        {"abs", [](const Tensor &x) { return abs(x); }, 0, 0, true},
        {"exp", [](const Tensor &x) { return exp(x); }, -2, 2, false},
        {"log", [](const Tensor &x) { return log(x); }, 0.5, 2, false},
        {"sqrt", [](const Tensor &x) { return sqrt(x); }, 0.5, 2, false},
        {"rsqrt", [](const Tensor &x) { return rsqrt(x); }, 0.5, 2, false},
        {"sin", [](const Tensor &x) { return sin(x); }, -3, 3, false},
        {"cos", [](const Tensor &x) { return cos(x); }, -3, 3, false},
        {"tanh", [](const Tensor &x) { return tanh(x); }, -2, 2, false},
        {"erf", [](const Tensor &x) { return erf(x); }, -2, 2, false},
        {"sigmoid", [](const Tensor &x) { return sigmoid(x); }, -3, 3, false},
        {"relu", [](const Tensor &x) { return relu(x); }, 0, 0, true},
        {"gelu", [](const Tensor &x) { return gelu(x); }, -3, 3, false},
        {"gelu_tanh", [](const Tensor &x) { return gelu(x, true); }, -3, 3, false},
        {"silu", [](const Tensor &x) { return silu(x); }, -3, 3, false},
        {"square", [](const Tensor &x) { return square(x); }, -2, 2, false},
        {"asin", [](const Tensor &x) { return asin(x); }, -0.8, 0.8, false},
        {"acos", [](const Tensor &x) { return acos(x); }, -0.8, 0.8, false},
        {"atan", [](const Tensor &x) { return atan(x); }, -3, 3, false},
        {"asinh", [](const Tensor &x) { return asinh(x); }, -3, 3, false},
        {"acosh", [](const Tensor &x) { return acosh(x); }, 1.3, 3, false},
        {"atanh", [](const Tensor &x) { return atanh(x); }, -0.8, 0.8, false},
        // bounds are multiples of the spacing (0.05); inputs sit 0.025 off them
        {"clamp", [](const Tensor &x) { return clamp(x, -0.1, 0.15); }, 0, 0, true},
        {"clamp min only", [](const Tensor &x) { return clamp(x, -0.05, INFINITY); }, 0, 0, true},
        {"clamp max only", [](const Tensor &x) { return clamp(x, -INFINITY, 0.1); }, 0, 0, true},
    };
    uint64_t seed = 100;
    for (const Case &c : cases)
        for (Layout layout : {Layout::contiguous, Layout::transposed, Layout::strided}) {
            Input in = c.kink ? gradcheck::spaced({3, 4}, seed++, 0.05, layout)
                              : gradcheck::random({3, 4}, seed++, c.lo, c.hi, layout);
            gradcheck::check(std::string(c.name) + " layout " + std::to_string(static_cast<int>(layout)),
                             [&](const V &x) { return c.op(x[0]); }, {in});
        }
    // rank 0
    gradcheck::check("gelu rank 0", [](const V &x) { return gelu(x[0]); }, {gradcheck::random({}, 150)});
    gradcheck::check("tanh rank 0", [](const V &x) { return tanh(x[0]); }, {gradcheck::random({}, 151)});
}

TEST_CASE("gradcheck cast f32 -> f32 and the view ops") {
    gradcheck::check("cast f32 -> f32", [](const V &x) { return cast(x[0], DType::f32); },
                     {gradcheck::random({2, 3}, 200)});
    gradcheck::check("to(f32)", [](const V &x) { return x[0].to(DType::f32) * x[0]; }, {gradcheck::random({5}, 201)});
    gradcheck::check("reshape",
                     [](const V &x) {
                         return x[0].reshape({2, 6}) * 3.0;
                     },
                     {gradcheck::random({3, 4}, 202)});
    gradcheck::check("reshape that copies", [](const V &x) { return x[0].transpose(0, 1).reshape({-1}); },
                     {gradcheck::random({3, 4}, 203)});
    gradcheck::check("reshape of a strided leaf",
                     [](const V &x) {
                         return x[0].reshape({4, 3});
                     },
                     {gradcheck::random({3, 4}, 204, -1, 1, Layout::strided)});
    gradcheck::check("view", [](const V &x) { return x[0].view({4, 3}); }, {gradcheck::random({2, 6}, 205)});
    gradcheck::check("view to rank 0", [](const V &x) { return x[0].view({}); }, {gradcheck::random({1, 1}, 206)});
    gradcheck::check("permute",
                     [](const V &x) {
                         return x[0].permute({2, 0, 1}) * x[1];
                     },
                     {gradcheck::random({2, 3, 4}, 207), gradcheck::random({4, 1, 3}, 208)});
    gradcheck::check("permute with negative axes",
                     [](const V &x) {
                         return x[0].permute({-1, 0, -2});
                     },
                     {gradcheck::random({2, 3, 4}, 222)});
    gradcheck::check("transpose with negative axes", [](const V &x) { return x[0].transpose(-1, 0) * x[1]; },
                     {gradcheck::random({2, 3, 4}, 223), gradcheck::random({3, 1}, 224)});
    gradcheck::check("transpose", [](const V &x) { return matmul(x[0].transpose(0, 1), x[1]); },
                     {gradcheck::random({3, 2}, 209), gradcheck::random({3, 4}, 210)});
    gradcheck::check("slice with step", [](const V &x) { return x[0].slice(1, 1, 6, 2); },
                     {gradcheck::random({4, 6}, 211)});
    gradcheck::check("slice with negative bounds and step 3",
                     [](const V &x) { return x[0].slice(0, -7, -1, 3) * x[0].slice(0, 0, 2); },
                     {gradcheck::random({8}, 212)});
    gradcheck::check("expand", [](const V &x) { return x[0].expand({2, 3, 4}); }, {gradcheck::random({3, 1}, 213)});
    gradcheck::check("expand of a rank-0 leaf", [](const V &x) { return x[0].expand({3}) * x[1]; },
                     {gradcheck::random({}, 214), gradcheck::random({3}, 215)});
    gradcheck::check("contiguous", [](const V &x) { return x[0].transpose(0, 1).contiguous(); },
                     {gradcheck::random({3, 4}, 216)});
    gradcheck::check("contiguous of a transposed leaf", [](const V &x) { return x[0].contiguous(); },
                     {gradcheck::random({3, 4}, 217, -1, 1, Layout::transposed)});
    gradcheck::check("a chain of views",
                     [](const V &x) {
                         return x[0].transpose(0, 1).slice(0, 0, 4, 2).reshape({-1}).expand({2, 6});
                     },
                     {gradcheck::random({3, 4}, 218)});
}
