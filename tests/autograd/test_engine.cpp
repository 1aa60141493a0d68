// Autograd engine behaviour: leaves and non-leaves, accumulation, explicit
// gradients, detach, NoGradGuard, freed and retained graphs, shared inputs, and
// the misuse errors.
#include <doctest/doctest.h>

#include <cmath>
#include <thread>

#include "tinyfin/extend.hpp"
#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;
using doctest::Contains;
using F = std::vector<float>;

static Tensor t(const F &values, const Shape &shape) { return from_vector(values, shape); }

TEST_CASE("requires_grad_, leaves and non-leaves") {
    Tensor x = t({1, 2, 3}, {3});
    CHECK_FALSE(x.requires_grad());
    CHECK(x.is_leaf());
    CHECK_FALSE(x.grad().defined());
    CHECK(&x.requires_grad_() == &x);  // chains
    CHECK(x.requires_grad());
    CHECK(x.is_leaf());
    Tensor y = x * 2.0;
    CHECK(y.requires_grad());
    CHECK_FALSE(y.is_leaf());
    // an op on tensors that need no gradient records nothing
    Tensor c = t({1, 1, 1}, {3});
    Tensor z = c * 2.0;
    CHECK_FALSE(z.requires_grad());
    CHECK(z.is_leaf());
    // only leaves can be marked
    CHECK_THROWS_WITH_AS(y.requires_grad_(), Contains("only leaf tensors"), AutogradError);
    // and unmarked again
    x.requires_grad_(false);
    CHECK_FALSE(x.requires_grad());
    CHECK_FALSE((x * 2.0).requires_grad());
}

TEST_CASE("backward fills leaf gradients; non-leaves and constants get none") {
    Tensor x = t({1, 2, 3}, {3}).requires_grad_();
    Tensor c = t({4, 5, 6}, {3});
    Tensor h = x * c;
    sum(h).backward();
    REQUIRE(x.grad().defined());
    CHECK(x.grad().to_vector<float>() == F{4, 5, 6});
    CHECK(x.grad().shape() == x.shape());
    CHECK_FALSE(x.grad().requires_grad());  // a gradient is plain data
    CHECK_FALSE(c.grad().defined());
    CHECK_FALSE(h.grad().defined());
}

TEST_CASE("gradients accumulate over two backward calls until zero_grad") {
    Tensor x = t({1, -2}, {2}).requires_grad_();
    sum(square(x)).backward();
    CHECK(x.grad().to_vector<float>() == F{2, -4});
    sum(x * 3.0).backward();
    CHECK(x.grad().to_vector<float>() == F{5, -1});
    x.zero_grad();
    CHECK_FALSE(x.grad().defined());
    sum(x).backward();
    CHECK(x.grad().to_vector<float>() == F{1, 1});
    x.set_grad(t({10, 10}, {2}));
    sum(x).backward();
    CHECK(x.grad().to_vector<float>() == F{11, 11});
    CHECK_THROWS_AS(x.set_grad(zeros({3})), ShapeError);
}

TEST_CASE("backward with an explicit gradient for a non-scalar output") {
    Tensor x = t({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
    Tensor y = x * x;  // dy/dx = 2x
    y.backward(t({1, 0, -1, 2, 0.5f, 0}, {2, 3}));
    CHECK(x.grad().to_vector<float>() == F{2, 0, -6, 16, 5, 0});
    Tensor z = sum(x, {1});  // [2]
    x.zero_grad();
    z.backward(t({3, -1}, {2}));
    CHECK(x.grad().to_vector<float>() == F{3, 3, 3, -1, -1, -1});
    CHECK_THROWS_WITH_AS((x * 2.0).backward(zeros({3, 2})),
                         Contains("gradient shape [3,2] differs from the output's [2,3]"), ShapeError);
    // the gradient must have the output's dtype, for a leaf root too
    CHECK_THROWS_WITH_AS((x * 2.0).backward(ones({2, 3}, DType::i32)),
                         Contains("backward: gradient dtype i32 differs from the output's f32"), DTypeError);
    x.zero_grad();
    CHECK_THROWS_AS(x.backward(ones({2, 3}, DType::f16)), DTypeError);
    CHECK_FALSE(x.grad().defined());
}

TEST_CASE("an implied gradient needs a one-element output") {
    Tensor x = t({1, 2}, {2}).requires_grad_();
    CHECK_THROWS_WITH_AS((x * 2.0).backward(), Contains("one-element"), AutogradError);
    // a [1,1] output is fine
    (x.slice(0, 0, 1).reshape({1, 1}) * 5.0).backward();
    CHECK(x.grad().to_vector<float>() == F{5, 0});
    // backward of a tensor that needs no gradient
    CHECK_THROWS_WITH_AS(sum(t({1}, {1})).backward(), Contains("does not require grad"), AutogradError);
}

TEST_CASE("detach cuts the graph but shares storage") {
    Tensor x = t({1, 2, 3}, {3}).requires_grad_();
    Tensor y = x * 2.0;
    Tensor d = y.detach();
    CHECK_FALSE(d.requires_grad());
    CHECK(d.is_leaf());
    CHECK(d.shares_storage(y));
    CHECK(d.to_vector<float>() == F{2, 4, 6});
    // the detached branch contributes no gradient
    sum(x * d + y).backward();
    CHECK(x.grad().to_vector<float>() == F{2 + 2, 4 + 2, 6 + 2});
    CHECK_FALSE(x.detach().requires_grad());
}

TEST_CASE("NoGradGuard records no history and restores the mode") {
    Tensor x = t({1, 2}, {2}).requires_grad_();
    CHECK(grad_enabled());
    Tensor y;
    {
        NoGradGuard guard;
        CHECK_FALSE(grad_enabled());
        y = exp(x * 2.0);
        {
            NoGradGuard nested;
            CHECK_FALSE(grad_enabled());
        }
        CHECK_FALSE(grad_enabled());
        CHECK(x.requires_grad());  // the leaf keeps its flag
    }
    CHECK(grad_enabled());
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    CHECK_THROWS_AS(sum(y).backward(), AutogradError);
    CHECK((x * 2.0).requires_grad());
}

TEST_CASE("the graph is freed after backward unless retain_graph") {
    Tensor x = t({0.5f, -1}, {2}).requires_grad_();
    Tensor loss = sum(exp(x) * x);
    loss.backward();
    F first = x.grad().to_vector<float>();
    CHECK_THROWS_WITH_AS(loss.backward(), Contains("retain_graph"), AutogradError);
    // the failed call left the gradient alone and the process keeps working
    CHECK(x.grad().to_vector<float>() == first);

    Tensor y = t({0.5f, -1}, {2}).requires_grad_();
    Tensor kept = sum(exp(y) * y);
    kept.backward(Tensor(), /*retain_graph=*/true);
    kept.backward(Tensor(), true);
    F twice = y.grad().to_vector<float>();
    for (int i = 0; i < 2; ++i) CHECK(twice[i] == doctest::Approx(2 * first[i]));
    kept.backward();  // third run frees the graph
    CHECK_THROWS_AS(kept.backward(), AutogradError);
    // a new graph over the same leaf works
    sum(y).backward();
}

TEST_CASE("a tensor used twice gets the summed gradient") {
    Tensor x = t({1, 2, 3}, {3}).requires_grad_();
    sum(x * x).backward();  // one op, the same tensor on both sides
    CHECK(x.grad().to_vector<float>() == F{2, 4, 6});
    x.zero_grad();
    // diamond: a = 3x feeds b = a^2 and c = 2a; loss = sum(b + c)
    Tensor a = x * 3.0;
    Tensor loss = sum(square(a) + a * 2.0);
    loss.backward();  // d/dx = (2a + 2) * 3 = 18x + 6
    CHECK(x.grad().to_vector<float>() == F{24, 42, 60});
    x.zero_grad();
    // a leaf reached by two different paths through views
    Tensor m = t({1, 2, 3, 4}, {2, 2}).requires_grad_();
    sum(m.transpose(0, 1) * m).backward();  // d/dm[i][j] = 2 m[j][i]
    CHECK(m.grad().to_vector<float>() == F{2, 6, 4, 8});
}

TEST_CASE("split's pieces add into one gradient; a gradient another node also holds is left alone") {
    // The engine adds a slice's gradient into its input's gradient so far, in place, when nothing
    // else references that tensor (autograd.cpp).
    F values(24);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f - 2;
    Tensor x = t(values, {4, 6}).requires_grad_();
    Tensor h = x * 1.0;  // not a leaf: the pieces' gradients meet at h's node
    std::vector<Tensor> p = split(h, {2, 1, 3}, 1);
    (sum(p[0] * 2.0) + sum(p[1] * 3.0) + sum(square(p[2]))).backward();
    F want(24);
    for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < 6; ++c) {
            const auto i = static_cast<std::size_t>(r * 6 + c);
            want[i] = c < 2 ? 2.0f : c < 3 ? 3.0f : 2 * values[i];
        }
    CHECK(x.grad().to_vector<float>() == want);
    x.zero_grad();

    // add hands one tensor to both of its inputs: u's and w's pending gradients are the same
    // tensor, so the slice of u must not add into it in place (w's would change too).
    Tensor u = x * 1.0, w = x * 3.0;
    Tensor z = u + w;
    // The slice's term first: the engine then reaches the slice after add (reverse post-order).
    (sum(split(u, {2, 4}, 1)[1] * 7.0) + sum(z)).backward();
    for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < 6; ++c) want[static_cast<std::size_t>(r * 6 + c)] = c < 2 ? 4.0f : 11.0f;
    CHECK(x.grad().to_vector<float>() == want);
    x.zero_grad();

    // retain_graph: the same pieces twice accumulate twice.
    Tensor y = x * 1.0;
    std::vector<Tensor> q = split(y, {3, 3}, 1);
    Tensor loss = sum(q[0] * 2.0) + sum(q[1] * 5.0);
    loss.backward({}, true);
    loss.backward();
    for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < 6; ++c) want[static_cast<std::size_t>(r * 6 + c)] = c < 3 ? 4.0f : 10.0f;
    CHECK(x.grad().to_vector<float>() == want);
    CHECK_THROWS_WITH_AS(loss.backward(), Contains("already freed"), AutogradError);
}

TEST_CASE("gradients reduce over broadcast axes to the leaf's shape") {
    Tensor a = t({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
    Tensor b = t({10, 20, 30}, {3}).requires_grad_();
    Tensor s = scalar(2).requires_grad_();
    sum((a + b) * s).backward();
    CHECK(a.grad().to_vector<float>() == F(6, 2));
    CHECK(b.grad().to_vector<float>() == F{4, 4, 4});
    CHECK(s.grad().rank() == 0);
    CHECK(s.grad().item<float>() == 21 + 2 * 60);
}

TEST_CASE("integer tensors cannot require grad; casts to integers end the graph") {
    Tensor i = from_vector(std::vector<int32_t>{1, 2}, {2});
    CHECK_THROWS_WITH_AS(i.requires_grad_(), Contains("float dtype, got i32"), AutogradError);
    CHECK_THROWS_AS(zeros({2}, DType::boolean).requires_grad_(), AutogradError);
    CHECK_NOTHROW(i.requires_grad_(false));
    Tensor x = t({1.5f, 2.5f}, {2}).requires_grad_();
    Tensor k = cast(x, DType::i64);
    CHECK_FALSE(k.requires_grad());
    Tensor back = cast(k, DType::f32);
    CHECK_FALSE(back.requires_grad());
    // argmax and comparisons do not carry gradients either
    CHECK_FALSE(argmax(x, 0).requires_grad());
    CHECK_FALSE(gt(x, scalar(2)).requires_grad());
}

TEST_CASE("assign_ refuses a requires-grad leaf under grad mode, allows it under NoGradGuard") {
    Tensor w = t({1, 2}, {2}).requires_grad_();
    CHECK_THROWS_WITH_AS(w.assign_(zeros({2})),
                         Contains("assign_: a leaf tensor that requires grad is written in place while grad mode"),
                         AutogradError);
    CHECK(w.to_vector<float>() == F{1, 2});  // untouched
    sum(w * w).backward();
    {
        NoGradGuard guard;
        w.assign_(w - w.grad() * 0.25);  // an SGD step
    }
    CHECK(w.to_vector<float>() == F{0.5f, 1});
    CHECK(w.requires_grad());
    CHECK(w.is_leaf());
}

TEST_CASE("a long chain of ops runs backward and is freed without deep recursion") {
    Tensor x = scalar(1).requires_grad_();
    Tensor y = x;
    const int depth = 300000;  // recursive destruction overflowed an 8 MiB stack near 10^5 nodes
    for (int i = 0; i < depth; ++i) y = y + 1.0;
    y.backward();
    CHECK(x.grad().item<float>() == 1);
    y = Tensor();  // drops the whole chain
    CHECK(x.grad().item<float>() == 1);
}

TEST_CASE("gradients at kinks follow the documented conventions") {
    // max/min reductions split the gradient equally among tied extremes
    Tensor x = t({1, 3, 3, -2}, {4}).requires_grad_();
    max(x).backward();
    CHECK(x.grad().to_vector<float>() == F{0, 0.5f, 0.5f, 0});
    x.zero_grad();
    min(t({-2, 5}, {2}) * 1.0 + x.slice(0, 2, 4)).backward();  // [1, 3]: no tie
    CHECK(x.grad().to_vector<float>() == F{0, 0, 1, 0});
    // maximum/minimum give half to each side of a tie
    Tensor a = t({1, 2}, {2}).requires_grad_(), b = t({1, 5}, {2}).requires_grad_();
    sum(maximum(a, b)).backward();
    CHECK(a.grad().to_vector<float>() == F{0.5f, 0});
    CHECK(b.grad().to_vector<float>() == F{0.5f, 1});
    // relu and abs have gradient 0 at 0; clamp passes the gradient at its bounds
    Tensor z = t({0, -1, 2}, {3}).requires_grad_();
    sum(relu(z) + abs(z)).backward();
    CHECK(z.grad().to_vector<float>() == F{0, -1, 2});
    // relu passes the gradient where x is NaN, as torch's threshold_backward does
    Tensor w = t({NAN, -0.0f, 3}, {3}).requires_grad_();
    relu(w).backward(t({5, 6, 7}, {3}));
    CHECK(w.grad().to_vector<float>() == F{5, 0, 7});
    z.zero_grad();
    sum(clamp(z, -1, 1)).backward();
    CHECK(z.grad().to_vector<float>() == F{1, 1, 0});
    // pow: no gradient for the exponent where the base is <= 0
    Tensor base = t({0, -2, 2}, {3}).requires_grad_(), exponent = t({2, 2, 2}, {3}).requires_grad_();
    sum(pow(base, exponent)).backward();
    CHECK(base.grad().to_vector<float>() == F{0, -4, 4});
    F ge = exponent.grad().to_vector<float>();
    CHECK(ge[0] == 0);
    CHECK(ge[1] == 0);
    CHECK(ge[2] == doctest::Approx(4 * std::log(2.0)));
}

TEST_CASE("backward from a leaf, and through a graph whose leaf handle is gone") {
    Tensor x = scalar(3).requires_grad_();
    x.backward();
    CHECK(x.grad().item<float>() == 1);
    x.backward(scalar(2));
    CHECK(x.grad().item<float>() == 3);
    // the graph keeps no leaf alive: dropping the leaf's last handle just skips its gradient
    Tensor y;
    Tensor kept = t({1, 2}, {2}).requires_grad_();
    {
        Tensor gone = t({5, 6}, {2}).requires_grad_();
        y = sum(gone * kept);
    }
    y.backward();
    CHECK(kept.grad().to_vector<float>() == F{5, 6});
}

TEST_CASE("grad mode is per thread") {
    NoGradGuard guard;
    bool other_thread_enabled = false;
    std::thread other([&] { other_thread_enabled = grad_enabled(); });
    other.join();
    CHECK_FALSE(grad_enabled());
    CHECK(other_thread_enabled);
}

TEST_CASE("each leaf owns a contiguous gradient: no aliasing between leaves, seeds or broadcasts") {
    // sum's gradient is one value broadcast (stride 0); add hands the same tensor to both sides.
    Tensor a = t({1, 2}, {2}).requires_grad_(), b = t({3, 4}, {2}).requires_grad_();
    sum(a + b).backward();
    CHECK(a.grad().is_contiguous());
    CHECK(b.grad().is_contiguous());
    CHECK_FALSE(a.grad().shares_storage(b.grad()));
    {
        NoGradGuard guard;
        a.grad().assign_(t({5, 6}, {2}));  // an in-place update of one gradient, e.g. clipping
    }
    CHECK(a.grad().to_vector<float>() == F{5, 6});
    CHECK(b.grad().to_vector<float>() == F{1, 1});
    // an explicit gradient is copied into the leaf, not kept by reference
    Tensor x = t({1, 2}, {2}).requires_grad_();
    Tensor seed = t({7, 8}, {2});
    x.backward(seed);
    CHECK_FALSE(x.grad().shares_storage(seed));
    (x * 1.0).backward(seed);
    CHECK_FALSE(x.grad().shares_storage(seed));
    CHECK(x.grad().to_vector<float>() == F{14, 16});
    // a gradient that is a view of a larger buffer (pad's backward slices it) is compacted
    Tensor p = t({1, 2, 3}, {3}).requires_grad_();
    pad(p, {1, 1}).backward(t({9, 1, 2, 3, 9}, {5}));
    CHECK(p.grad().is_contiguous());
    CHECK(p.grad().to_vector<float>() == F{1, 2, 3});
}

TEST_CASE("post-accumulate grad hooks run once per backward with the final gradient") {
    Tensor w = from_vector<float>({1, 2}, {2});
    w.requires_grad_();
    std::vector<std::vector<float>> seen;
    uint64_t id = register_post_accumulate_grad_hook(
        w, [&seen](const Tensor &leaf) { seen.push_back(leaf.grad().to_vector<float>()); });
    // w is used twice: the hook sees the sum of both contributions, once.
    sum(w * w + w * 3.0).backward();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0] == std::vector<float>{5, 7});
    // A second backward accumulates: the hook sees the running total.
    sum(w).backward();
    REQUIRE(seen.size() == 2);
    CHECK(seen[1] == std::vector<float>{6, 8});
    remove_post_accumulate_grad_hook(w, id);
    remove_post_accumulate_grad_hook(w, id + 1000);  // unknown ids are ignored
    sum(w).backward();
    CHECK(seen.size() == 2);

    Tensor y = w * 2.0;
    CHECK_THROWS_AS(register_post_accumulate_grad_hook(y, [](const Tensor &) {}), AutogradError);
    CHECK_THROWS_AS(register_post_accumulate_grad_hook(w, nullptr), ValueError);
    // An exception in a hook leaves backward.
    register_post_accumulate_grad_hook(w, [](const Tensor &) { throw ValueError("from the hook"); });
    CHECK_THROWS_AS(sum(w).backward(), ValueError);
}

TEST_CASE("host_data and copy_from_host") {
    Tensor t = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    auto *p = static_cast<float *>(t.host_data());  // cpu: host-addressable
    REQUIRE(p != nullptr);
    CHECK(p[4] == 5);
    CHECK(static_cast<float *>(t.slice(0, 1, 2).host_data()) == p + 3);
    float src[3] = {7, 8, 9};
    copy_from_host(t.slice(0, 1, 2), src, sizeof src);
    CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 7, 8, 9});
    CHECK_THROWS_AS(copy_from_host(t.transpose(0, 1), src, 6 * sizeof(float)), ValueError);
    CHECK_THROWS_AS(copy_from_host(t, src, sizeof src), ValueError);
    Tensor w = zeros({3});
    w.requires_grad_();
    CHECK_THROWS_AS(copy_from_host(w, src, sizeof src), AutogradError);
    NoGradGuard no_grad;
    copy_from_host(w, src, sizeof src);
    CHECK(w.to_vector<float>() == std::vector<float>{7, 8, 9});
}

TEST_CASE("grad_fn names the recording op and its edges; leaves have none") {
    Tensor w = t({1, 2}, {2});
    w.requires_grad_();
    CHECK_FALSE(grad_fn(w).defined());
    Tensor y = mul(w, 3.0);
    GradFn f = grad_fn(y);
    REQUIRE(f.defined());
    CHECK(f.name() == "mul");
    std::vector<GradFn> next = f.next();
    REQUIRE_FALSE(next.empty());
    CHECK(next[0].name() == "accumulate_grad");
    CHECK(grad_fn(mul(w, 2.0)).next()[0].id() == next[0].id());  // one accumulator per leaf
    CHECK_FALSE(grad_fn(y.detach()).defined());
}

TEST_CASE("retain_grad keeps a non-leaf's gradient, uses before the call included") {
    Tensor x = t({1, -2, 3}, {3});
    x.requires_grad_();
    Tensor y = mul(x, 3.0);
    Tensor u = mul(y, 2.0);  // used before retain_grad
    retain_grad(y);
    sum(add(mul(y, y), u)).backward();
    // d/dy (y^2 + 2y) = 2y + 2, y = 3x
    CHECK(y.grad().to_vector<float>() == F{8, -10, 20});
    CHECK(x.grad().to_vector<float>() == F{24, -30, 60});
    Tensor other = mul(x, 5.0);
    sum(mul(other, other)).backward();
    CHECK_FALSE(other.grad().defined());
    CHECK_THROWS_WITH_AS(retain_grad(t({1}, {1})), Contains("does not require grad"), AutogradError);
}
