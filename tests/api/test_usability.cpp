// The C++ API as a new user drives it (issue 17): each case is one friction point removed, checked
// against hand-computed values or values PyTorch 1.13 printed for the same inputs (quoted with
// the call that made them).
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <thread>

#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;
using F = std::vector<float>;

namespace {

Tensor t(const F &values, const Shape &shape) { return from_vector(values, shape); }

void check_close(const Tensor &got, const F &want, double tol = 1e-5) {
    F g = got.to_vector<float>();
    REQUIRE(g.size() == want.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
        INFO("element " << i << ": got " << g[i] << ", want " << want[i]);
        CHECK(std::abs(g[i] - want[i]) <= tol * (1 + std::abs(want[i])));
    }
}

// The calls the var overloads must accept or refuse, as concepts so a refusal is a false
// rather than a compile error.
template <typename T>
concept VarTakesBoolAsCorrection = requires(T x, std::vector<int> axes) {
    var(x, axes, true, false);
};
template <typename T>
concept VarTakesNumberAsCorrection = requires(T x, std::vector<int> axes) {
    var(x, axes, 0, true);
};
template <typename T>
concept VarTakesKeepdimAfterAxes = requires(T x, std::vector<int> axes) {
    var(x, axes, true);
};

}  // namespace

TEST_CASE("var: a flag after the axes is keepdim, and a bool is never a correction") {
    static_assert(!VarTakesBoolAsCorrection<Tensor>, "var(x, axes, true, false) must not compile");
    static_assert(VarTakesNumberAsCorrection<Tensor>);
    static_assert(VarTakesKeepdimAfterAxes<Tensor>);
    Tensor x = t({1, 2, 3, 4, 6, 8}, {2, 3});
    // The old mistake: var(x, {-1}, true) meant correction 1, keepdim false. Now it keeps the axis.
    Tensor kept = var(x, {-1}, true);
    CHECK(kept.shape() == Shape{2, 1});
    check_close(kept, {1, 4});  // unbiased: (1+0+1)/2, (4+0+4)/2
    check_close(var(x, {-1}, 0), {2.f / 3, 8.f / 3});
    CHECK(var(x, {-1}, Correction(0), true).shape() == Shape{2, 1});
    check_close(var(x), {(1 + 4 + 9 + 16 + 36 + 64 - 6 * 4 * 4) / 5.f});
}

TEST_CASE("rope takes the sequence axis: [B, T, H, D] without permutes") {
    // D = 2: one pair (0, 1) rotated by angle t (theta^0 = 1) at position t.
    Tensor x = ones({1, 3, 2, 2});  // [B, T, H, D]
    F want;
    for (int pos = 0; pos < 3; ++pos)
        for (int h = 0; h < 2; ++h) {
            want.push_back(static_cast<float>(std::cos(pos) - std::sin(pos)));
            want.push_back(static_cast<float>(std::sin(pos) + std::cos(pos)));
        }
    check_close(rope(x, 10000.0, false, 0, 1), want);
    // Same values and gradients as the permuted call.
    Tensor a = randn({2, 4, 3, 6}, 7).requires_grad_();
    Tensor b = a.detach().transpose(1, 2).contiguous().requires_grad_();
    Tensor ya = rope(a, 500.0, true, 2, 1);
    Tensor yb = rope(b, 500.0, true, 2).transpose(1, 2);
    check_close(ya, yb.to_vector<float>());
    Tensor w = randn({2, 4, 3, 6}, 8);
    sum(mul(ya, w)).backward();
    sum(mul(yb, w)).backward();
    check_close(a.grad(), b.grad().transpose(1, 2).contiguous().to_vector<float>());
    CHECK_THROWS_AS(rope(x, 10000.0, false, 0, -1), ShapeError);
}

TEST_CASE("rope along axis 1: hand-computed values and finite-difference gradients") {
    // [B=1, T=2, H=1, D=4], positions offset 3 and 4, theta 100: pair i = (i, i + 2) turns by
    // position * 100^(-2i/4), i.e. frequencies 1 and 0.1.
    const F xs = {1, 2, 3, 4, 5, 6, 7, 8};
    const double theta = 100, freq[2] = {1.0, 0.1};
    F want(8);
    for (int t = 0; t < 2; ++t)
        for (int i = 0; i < 2; ++i) {
            const double a = (3 + t) * freq[i], x0 = xs[t * 4 + i], x1 = xs[t * 4 + i + 2];
            want[t * 4 + i] = static_cast<float>(x0 * std::cos(a) - x1 * std::sin(a));
            want[t * 4 + i + 2] = static_cast<float>(x0 * std::sin(a) + x1 * std::cos(a));
        }
    Tensor x = t(xs, {1, 2, 1, 4}).requires_grad_();
    Tensor y = rope(x, theta, false, 3, 1);
    check_close(y, want);
    // f(x) = sum(rope(x) * w): its gradient against central differences of f.
    Tensor w = t({0.5f, -1, 2, 0.25f, -0.75f, 1.5f, -2, 1}, {1, 2, 1, 4});
    sum(mul(y, w)).backward();
    auto f = [&](const F &v) {
        NoGradGuard off;
        return static_cast<double>(sum(mul(rope(t(v, {1, 2, 1, 4}), theta, false, 3, 1), w)).item<float>());
    };
    F fd(8);
    const float h = 1e-2f;
    for (int i = 0; i < 8; ++i) {
        F up = xs, down = xs;
        up[i] += h;
        down[i] -= h;
        fd[i] = static_cast<float>((f(up) - f(down)) / (2 * h));
    }
    check_close(x.grad(), fd, 2e-3);
}

TEST_CASE("rope at a positions tensor: hand-computed values, finite differences, the offset form") {
    // [B=1, T=2, H=1, D=4] at positions 7 and 2 (out of order), theta 100: pair i = (i, i + 2)
    // turns by position * 100^(-2i/4), i.e. frequencies 1 and 0.1; interleaved pairs (2i, 2i+1).
    const F xs = {1, 2, 3, 4, 5, 6, 7, 8};
    const double pos[2] = {7, 2}, freq[2] = {1.0, 0.1};
    const Tensor positions = from_vector<int64_t>({7, 2}, {2});
    for (bool interleaved : {false, true}) {
        CAPTURE(interleaved);
        F want(8);
        for (int t = 0; t < 2; ++t)
            for (int i = 0; i < 2; ++i) {
                const int a_at = t * 4 + (interleaved ? 2 * i : i), b_at = t * 4 + (interleaved ? 2 * i + 1 : i + 2);
                const double a = pos[t] * freq[i], x0 = xs[a_at], x1 = xs[b_at];
                want[a_at] = static_cast<float>(x0 * std::cos(a) - x1 * std::sin(a));
                want[b_at] = static_cast<float>(x0 * std::sin(a) + x1 * std::cos(a));
            }
        Tensor x = t(xs, {1, 2, 1, 4}).requires_grad_();
        Tensor y = rope(x, positions, 100.0, interleaved, 1);
        CHECK(y.shape() == Shape{1, 2, 1, 4});
        check_close(y, want);
        Tensor w = t({0.5f, -1, 2, 0.25f, -0.75f, 1.5f, -2, 1}, {1, 2, 1, 4});
        sum(mul(y, w)).backward();
        auto f = [&](const F &v) {
            NoGradGuard off;
            return static_cast<double>(
                sum(mul(rope(t(v, {1, 2, 1, 4}), positions, 100.0, interleaved, 1), w)).item<float>());
        };
        F fd(8);
        const float h = 1e-2f;
        for (int i = 0; i < 8; ++i) {
            F up = xs, down = xs;
            up[i] += h;
            down[i] -= h;
            fd[i] = static_cast<float>((f(up) - f(down)) / (2 * h));
        }
        check_close(x.grad(), fd, 2e-3);
        // Consecutive positions from 3 are the offset form (the rope kernel).
        Tensor r = randn({2, 3, 2, 6}, 9);
        check_close(rope(r, from_vector<int64_t>({3, 4, 5}, {3}), 500.0, interleaved, 1),
                    rope(r, 500.0, interleaved, 3, 1).to_vector<float>());
    }
    CHECK_THROWS_AS(rope(t(xs, {1, 2, 1, 4}), from_vector<int64_t>({1, 2, 3}, {3}), 100.0, false, 1), ShapeError);
}

TEST_CASE("attention without a mask dispatches no fill: the attention op alone") {
    Tensor q = randn({2, 3, 4}, 31), k = randn({2, 5, 4}, 32), v = randn({2, 5, 6}, 33);
    Tensor want = matmul(softmax(mul(matmul(q, k.transpose(-1, -2)), 0.5), -1), v);  // scale 1/sqrt(4)
    uint64_t ops = 0;
    Tensor got;
    // A fresh thread: the core's per-thread constants are empty, so a zero built by a fill would show.
    std::thread([&] {
        reset_stats();
        got = scaled_dot_product_attention(q, k, v);
        ops = stats().backend(q.device().backend)->ops;
    }).join();
    CHECK(ops == 1);  // the attention op alone
    check_close(got, want.to_vector<float>());
}

TEST_CASE("functional linear and flatten") {
    Tensor x = t({1, 2, 3, 4}, {2, 2});
    Tensor w = t({1, 0, 1, 1, 2, -1}, {3, 2});
    Tensor b = t({10, 20, 30}, {3});
    check_close(linear(x, w, b), {11, 23, 30, 13, 27, 32});
    check_close(linear(x, w), {1, 3, 0, 3, 7, 2});
    CHECK(linear(ones({2, 5, 2}), w, b).shape() == Shape{2, 5, 3});
    CHECK_THROWS_AS(linear(x, ones({3, 3})), ShapeError);
    CHECK(flatten(zeros({2, 3, 4, 5})).shape() == Shape{2, 60});
    CHECK(flatten(zeros({2, 3, 4, 5}), 0).shape() == Shape{120});
    CHECK(flatten(zeros({2, 3, 4, 5}), 1, 2).shape() == Shape{2, 12, 5});
    CHECK_THROWS_AS(flatten(zeros({2, 3}), 2), ShapeError);
}

TEST_CASE("state_dict and load_state_dict by parameter name") {
    auto make = [](uint64_t seed) {
        return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 4, true, seed),
                                                std::make_shared<nn::ReLU>(),
                                                std::make_shared<nn::Linear>(4, 2, true, seed + 1));
    };
    auto a = make(1), b = make(5);
    nn::NamedTensors dict = a->state_dict();
    REQUIRE(dict.size() == 4);
    CHECK(dict[0].first == "0.weight");
    CHECK(dict[3].first == "2.bias");
    CHECK_FALSE(dict[0].second.requires_grad());
    nn::LoadStateDictResult r = b->load_state_dict(dict);
    CHECK(r.missing_keys.empty());
    CHECK(r.unexpected_keys.empty());
    Tensor x = randn({5, 3}, 3);
    check_close((*b)(x), (*a)(x).to_vector<float>());
    CHECK(b->parameters()[0].requires_grad());  // still a parameter, same handle

    // Strict: every problem in one message, nothing loaded.
    nn::NamedTensors bad = {{"0.weight", zeros({4, 3})}, {"0.bias", zeros({5})}, {"9.weight", zeros({1})}};
    auto c = make(9);
    F before = c->parameters()[0].to_vector<float>();
    try {
        c->load_state_dict(bad);
        FAIL("load_state_dict accepted a dict that does not fit");
    } catch (const ValueError &e) {
        std::string m = e.what();
        CHECK(m.find("missing keys: '2.weight', '2.bias'") != std::string::npos);
        CHECK(m.find("unexpected keys: '9.weight'") != std::string::npos);
        CHECK(m.find("'0.bias' is f32[5] in the dict but f32[4] in the module") != std::string::npos);
    }
    CHECK(c->parameters()[0].to_vector<float>() == before);
    // Not strict: the matching keys load, the rest is reported.
    nn::NamedTensors partial = {{"0.weight", zeros({4, 3})}, {"extra", zeros({1})}};
    r = c->load_state_dict(partial, false);
    CHECK(r.missing_keys == std::vector<std::string>{"0.bias", "2.weight", "2.bias"});
    CHECK(r.unexpected_keys == std::vector<std::string>{"extra"});
    CHECK(c->parameters()[0].to_vector<float>() == F(12, 0.f));
    CHECK_THROWS_AS(c->load_state_dict(bad, false), ValueError);  // a shape mismatch still throws
}

TEST_CASE("Sequential through make_shared, square options at once") {
    auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::ReLU>());
    CHECK(seq->size() == 2);
    nn::Sequential braced{std::make_shared<nn::ReLU>(), std::make_shared<nn::GELU>()};
    CHECK(braced.size() == 2);
    Conv2dOptions c = Conv2dOptions{}.stride(2).padding(1).dilation(3);
    CHECK(
        (c.stride_h == 2 && c.stride_w == 2 && c.pad_h == 1 && c.pad_w == 1 && c.dilation_h == 3 && c.dilation_w == 3));
    Pool2dOptions p = Pool2dOptions{}.kernel(3).stride(2).padding(1);
    CHECK((p.kernel_h == 3 && p.kernel_w == 3 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 1 && p.pad_w == 1));
    CHECK(conv2d(ones({1, 1, 5, 5}), ones({1, 1, 3, 3}), Tensor(), Conv2dOptions{}.stride(2).padding(1)).shape() ==
          Shape{1, 1, 3, 3});
}

TEST_CASE("scalar overloads, bool vectors, converting reads, argmax over everything") {
    Tensor x = t({-2, -0.5, 0, 3}, {4});
    check_close(pow(x, 2.0), {4, 0.25, 0, 9});
    check_close(pow(2.0, x), {0.25, std::pow(2.f, -0.5f), 1, 8});
    check_close(maximum(x, 0.0), {0, 0, 0, 3});
    check_close(minimum(x, 0.0), {-2, -0.5, 0, 0});
    check_close(add(x, 1), {-1, 0.5, 1, 4});
    check_close(sub(1, x), {3, 1.5, 1, -2});
    check_close(mul(x, 2), {-4, -1, 0, 6});
    check_close(div(x, 2), {-1, -0.25, 0, 1.5});
    Tensor cond = from_vector<bool>({true, false, true, false}, {4});
    CHECK(cond.dtype() == DType::boolean);
    CHECK(cond.to_vector<bool>() == std::vector<bool>{true, false, true, false});
    check_close(where(cond, x, 0.0), {-2, 0, 0, 0});
    check_close(where(cond, 9.0, x), {9, -0.5, 9, 3});
    // Scalars take the tensor's dtype: an i64 tensor stays i64.
    Tensor i = from_vector<int64_t>({1, 2, 3}, {3});
    CHECK(add(i, 1).dtype() == DType::i64);
    CHECK(add(i, 1).to_vector<int64_t>() == std::vector<int64_t>{2, 3, 4});
    // to_vector converts from another dtype instead of throwing.
    CHECK(i.to_vector<float>() == F{1, 2, 3});
    CHECK(x.to_vector<int64_t>() == std::vector<int64_t>{-2, 0, 0, 3});
    CHECK(gt(x, scalar(0)).to_vector<float>() == F{0, 0, 0, 1});
    Tensor m = t({3, 9, 1, 9, -4, 2}, {2, 3});
    CHECK(argmax(m).rank() == 0);
    CHECK(argmax(m).item<int64_t>() == 1);  // the first maximum in row-major order
    CHECK(argmin(m).item<int64_t>() == 4);
}

TEST_CASE("arange with integer arguments gives i64") {
    CHECK(arange(5).dtype() == DType::i64);
    CHECK(arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
    CHECK(arange(2, 9, 3).to_vector<int64_t>() == std::vector<int64_t>{2, 5, 8});
    CHECK(arange(5, 0, -2).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
    CHECK(arange(3, 3).numel() == 0);
    CHECK(arange(0, 5.0).dtype() == DType::f32);
    CHECK(arange(0, 4, 1, DType::f32).to_vector<float>() == F{0, 1, 2, 3});
    CHECK_THROWS_AS(arange(0, 4, 0), ValueError);
}

namespace {

// softmax(q k^T / sqrt(D) + mask) v from primitives, mask additive [Tq, Tk].
Tensor reference_attention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &mask) {
    double s = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    return matmul(softmax(add(mul(matmul(q, k.transpose(-1, -2)), s), mask), -1), v);
}

// -inf above diagonal `offset` of a [tq, tk] mask (hidden: j > i + offset), 0 elsewhere.
Tensor causal_mask(int64_t tq, int64_t tk, int64_t offset) {
    F m;
    for (int64_t i = 0; i < tq; ++i)
        for (int64_t j = 0; j < tk; ++j) m.push_back(j > i + offset ? -INFINITY : 0.f);
    return t(m, {tq, tk});
}

}  // namespace

TEST_CASE("attention: both causal alignments when Tq != Tk") {
    Tensor q = randn({2, 2, 4}, 1), k = randn({2, 3, 4}, 2), v = randn({2, 3, 5}, 3);
    Tensor bottom = scaled_dot_product_attention(q, k, v, Tensor(), true);
    Tensor top = scaled_dot_product_attention(q, k, v, Tensor(), true, 0, CausalAlignment::top_left);
    check_close(bottom, reference_attention(q, k, v, causal_mask(2, 3, 1)).to_vector<float>());
    check_close(top, reference_attention(q, k, v, causal_mask(2, 3, 0)).to_vector<float>());
    // Gradients of the top-left form against the reference's.
    Tensor q1 = q.detach().requires_grad_(), k1 = k.detach().requires_grad_(), v1 = v.detach().requires_grad_();
    Tensor q2 = q.detach().requires_grad_(), k2 = k.detach().requires_grad_(), v2 = v.detach().requires_grad_();
    Tensor w = randn({2, 2, 5}, 4);
    sum(mul(scaled_dot_product_attention(q1, k1, v1, Tensor(), true, 0, CausalAlignment::top_left), w)).backward();
    sum(mul(reference_attention(q2, k2, v2, causal_mask(2, 3, 0)), w)).backward();
    check_close(q1.grad(), q2.grad().to_vector<float>(), 1e-4);
    check_close(k1.grad(), k2.grad().to_vector<float>(), 1e-4);
    check_close(v1.grad(), v2.grad().to_vector<float>(), 1e-4);
}

TEST_CASE("attention without a mask: no mask tensor at all, the same as a zero mask, forward and backward") {
    Tensor q = randn({2, 3, 4}, 21), k = randn({2, 5, 4}, 22), v = randn({2, 5, 6}, 23);
    // A fresh thread (the core's per-thread constants are empty): the output is the one buffer
    // the op allocates. The mask operand is absent (plugin.h, TF_TENSOR_ABSENT), not a zero.
    uint64_t allocations = 0, bytes = 0;
    Tensor got;
    std::thread([&] {
        reset_stats();
        got = scaled_dot_product_attention(q, k, v);
        const Stats st = stats();
        const Stats::Backend &b = *st.backend(q.device().backend);
        allocations = b.allocations;
        bytes = b.bytes_allocated;
    }).join();
    CHECK(allocations == 1);
    CHECK(bytes == got.nbytes());
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        Tensor q1 = q.detach().requires_grad_(), k1 = k.detach().requires_grad_(), v1 = v.detach().requires_grad_();
        Tensor q2 = q.detach().requires_grad_(), k2 = k.detach().requires_grad_(), v2 = v.detach().requires_grad_();
        Tensor q3 = q.detach().requires_grad_(), k3 = k.detach().requires_grad_(), v3 = v.detach().requires_grad_();
        Tensor none = scaled_dot_product_attention(q1, k1, v1, Tensor(), causal);
        Tensor zero = scaled_dot_product_attention(q2, k2, v2, zeros({3, 5}), causal);
        // The hand reference: primitives, with the causal rows as an explicit -inf mask.
        Tensor ref = reference_attention(q3, k3, v3, causal ? causal_mask(3, 5, 2) : zeros({3, 5}));
        // x * scale + 0 is x * scale: the absent mask gives the zero mask's bits.
        CHECK(none.to_vector<float>() == zero.to_vector<float>());
        check_close(none, ref.to_vector<float>());
        Tensor w = randn({2, 3, 6}, 24);
        sum(mul(none, w)).backward();
        sum(mul(zero, w)).backward();
        sum(mul(ref, w)).backward();
        CHECK(q1.grad().to_vector<float>() == q2.grad().to_vector<float>());
        CHECK(k1.grad().to_vector<float>() == k2.grad().to_vector<float>());
        CHECK(v1.grad().to_vector<float>() == v2.grad().to_vector<float>());
        check_close(q1.grad(), q3.grad().to_vector<float>(), 1e-4);
        check_close(k1.grad(), k3.grad().to_vector<float>(), 1e-4);
        check_close(v1.grad(), v3.grad().to_vector<float>(), 1e-4);
        // With a mask of the caller's as well (causal and mask together).
        Tensor mask = randn({3, 5}, 25);
        check_close(scaled_dot_product_attention(q, k, v, mask, causal),
                    reference_attention(q, k, v, causal ? add(mask, causal_mask(3, 5, 2)) : mask).to_vector<float>());
    }
}

TEST_CASE("attention: a bool mask means 'may attend', forward and backward") {
    Tensor q = randn({1, 3, 4}, 11), k = randn({1, 4, 4}, 12), v = randn({1, 4, 2}, 13);
    std::vector<bool> allowed = {true, false, true, true, false, true, true, false, true, true, true, true};
    Tensor bool_mask = from_vector(allowed, {3, 4});
    F additive;
    for (bool a : allowed) additive.push_back(a ? 0.f : -INFINITY);
    Tensor q1 = q.detach().requires_grad_(), k1 = k.detach().requires_grad_(), v1 = v.detach().requires_grad_();
    Tensor q2 = q.detach().requires_grad_(), k2 = k.detach().requires_grad_(), v2 = v.detach().requires_grad_();
    Tensor y1 = scaled_dot_product_attention(q1, k1, v1, bool_mask);
    Tensor y2 = reference_attention(q2, k2, v2, t(additive, {3, 4}));
    check_close(y1, y2.to_vector<float>());
    Tensor w = randn({1, 3, 2}, 14);
    sum(mul(y1, w)).backward();
    sum(mul(y2, w)).backward();
    check_close(q1.grad(), q2.grad().to_vector<float>(), 1e-4);
    check_close(k1.grad(), k2.grad().to_vector<float>(), 1e-4);
    check_close(v1.grad(), v2.grad().to_vector<float>(), 1e-4);
    CHECK_THROWS_AS(scaled_dot_product_attention(q, k, v, from_vector<bool>({true, false}, {2})), ShapeError);
}

TEST_CASE("cross_entropy with class weights and label smoothing (PyTorch 1.13 values)") {
    // x, y = [[1,2,.5],[.1,-1,3],[2,2,-2],[.3,.2,.1]], [2,0,-100,1]; w = [.5,2,1.5]
    Tensor y = from_vector<int64_t>({2, 0, -100, 1}, {4});
    Tensor w = t({0.5, 2.0, 1.5}, {3});
    auto logits = [] {
        return t({1.0, 2.0, 0.5, 0.1, -1.0, 3.0, 2.0, 2.0, -2.0, 0.3, 0.2, 0.1}, {4, 3}).requires_grad_();
    };
    auto options = [](Reduction reduction, const Tensor &weight, double smoothing) {
        CrossEntropyOptions o;
        o.reduction = reduction;
        o.weight = weight;
        o.label_smoothing = smoothing;
        return o;
    };
    struct Case {
        const char *name;
        CrossEntropyOptions options;
        F loss, grad;  // grad of loss.sum()
    };
    std::vector<Case> cases = {
        {"weight, smoothing 0.2, mean",
         options(Reduction::mean, w, 0.2),
         {1.6413042545318604f},
         {0.07644876f, 0.19712830f, -0.27357706f, -0.09978940f, -0.03048931f, 0.13027871f, 0, 0, 0, 0.16301054f,
          -0.27829498f, 0.11528449f}},
        {"weight, smoothing 0.2, sum",
         options(Reduction::sum, w, 0.2),
         {6.565217018127441f},
         {0.30579504f, 0.78851318f, -1.09430826f, -0.39915761f, -0.12195722f, 0.52111483f, 0, 0, 0, 0.65204215f,
          -1.11317992f, 0.46113795f}},
        {"weight, smoothing 0.2, none",
         options(Reduction::none, w, 0.2),
         {2.664407730102539f, 1.837182879447937f, 0, 2.063626527786255f},
         {0.30579504f, 0.78851318f, -1.09430826f, -0.39915761f, -0.12195722f, 0.52111483f, 0, 0, 0, 0.65204215f,
          -1.11317992f, 0.46113795f}},
        {"smoothing 0.1 only",
         options(Reduction::mean, Tensor(), 0.1),
         {1.970139741897583f},
         {0.06596351f, 0.19839944f, -0.26436296f, -0.29402322f, -0.00542305f, 0.29944628f, 0, 0, 0, 0.11127736f,
          -0.20036942f, 0.08909209f}},
        {"weight only",
         options(Reduction::mean, w, 0),
         {1.658956527709961f},
         {0.08670896f, 0.23569939f, -0.32240835f, -0.11859205f, 0.00213302f, 0.11645903f, 0, 0, 0, 0.18358272f,
          -0.33388749f, 0.15030481f}},
    };
    for (const Case &c : cases) {
        INFO(c.name);
        Tensor x = logits();
        Tensor loss = cross_entropy(x, y, c.options);
        check_close(loss, c.loss);
        sum(loss).backward();
        check_close(x.grad(), c.grad, 1e-4);
    }
    CHECK_THROWS_AS(cross_entropy(logits(), y, {.weight = t({1, 2}, {2})}), ShapeError);
    CHECK_THROWS_AS(cross_entropy(logits(), y, {.label_smoothing = 1.5}), ValueError);
}

TEST_CASE("pooling ceil_mode and dilation (PyTorch 1.13 values)") {
    Tensor a = arange(1, 26, 1, DType::f32).reshape({1, 1, 5, 5});
    // F.max_pool2d(a, 2, 2, ceil_mode=True), F.avg_pool2d(a, 2, 2, ceil_mode=True)
    Pool2dOptions two = Pool2dOptions{}.kernel(2).ceil();
    check_close(max_pool2d(a, two), {7, 9, 10, 17, 19, 20, 22, 24, 25});
    Tensor leaf = a.detach().requires_grad_();
    Tensor avg = avg_pool2d(leaf, two);
    check_close(avg, {4, 6, 7.5, 14, 16, 17.5, 21.5, 23.5, 25});
    sum(avg).backward();
    check_close(leaf.grad(), {0.25, 0.25, 0.25, 0.25, 0.5,  0.25, 0.25, 0.25, 0.25, 0.5, 0.25, 0.25, 0.25,
                              0.25, 0.5,  0.25, 0.25, 0.25, 0.25, 0.5,  0.5,  0.5,  0.5, 0.5,  1.0});
    // F.avg_pool2d(a, 3, 2, padding=1, ceil_mode=True) with and without count_include_pad: the
    // overhang's shape is [3, 3] without ceil too, so this one takes the plugins' path.
    Pool2dOptions three = Pool2dOptions{}.kernel(3).stride(2).padding(1).ceil();
    check_close(avg_pool2d(a, three),
                {1.7777778f, 3.6666667f, 3.1111112f, 7.6666665f, 13, 9.666667f, 8.444445f, 13.666667f, 9.777778f});
    Pool2dOptions uncounted = three;
    uncounted.count_include_pad = false;
    check_close(avg_pool2d(a, uncounted), {4, 5.5, 7, 11.5, 13, 14.5, 19, 20.5, 22});
    // 6x6: F.avg_pool2d(b, 3, 2, padding=1, ceil_mode=True) -> [4, 4] (the floor gives [3, 3]).
    Tensor b = arange(1, 37, 1, DType::f32).reshape({1, 1, 6, 6});
    Tensor b_avg = avg_pool2d(b, three);
    CHECK(b_avg.shape() == Shape{1, 1, 4, 4});
    check_close(b_avg, {2, 4, 5.3333335f, 3, 9, 15, 17, 9, 17, 27, 29, 15, 10.5, 16.5, 17.5, 9});
    // F.max_pool2d(b, 3, 2, padding=1, ceil_mode=True, dilation=2)
    check_close(max_pool2d(b, Pool2dOptions{three}.dilation(2)), {22, 24, 24, 34, 36, 36, 34, 36, 36});
    // Dilation 2, kernel 2, stride 1 on 4x4: each window's maximum is its bottom-right tap.
    Tensor c = arange(1, 17, 1, DType::f32).reshape({1, 1, 4, 4}).requires_grad_();
    Tensor cm = max_pool2d(c, Pool2dOptions{}.kernel(2).stride(1).dilation(2));
    check_close(cm, {11, 12, 15, 16});
    sum(cm).backward();
    check_close(c.grad(), {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1});
    CHECK_THROWS_AS(avg_pool2d(a, Pool2dOptions{}.dilation(2)), ValueError);
}
