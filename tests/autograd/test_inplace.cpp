// In-place writes under autograd (assign_ with grad mode on), as PyTorch records them: the
// written tensor's history (its base's, for a view) becomes the write; version counters make a
// rule whose saved tensor was overwritten refuse to run; leaves that require grad refuse
// in-place writes; set_data moves a parameter in place. Expected gradients are worked by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;
using doctest::Contains;
using F = std::vector<float>;

static Tensor t(const F &values, const Shape &shape) { return from_vector(values, shape); }

TEST_CASE("every in-place write bumps the storage's version, shared by its views") {
    Tensor x = zeros({4});
    Tensor v = x.slice(0, 1, 3);
    uint64_t start = x.version();
    x.assign_(ones({4}));
    CHECK(x.version() == start + 1);
    CHECK(v.version() == start + 1);
    add(v, v, v);
    CHECK(x.version() == start + 2);
    Tensor fresh = x * 2.0;
    CHECK(fresh.version() == 0);
}

TEST_CASE("y = w * 2; y += 1 (assign_ of y + 1) keeps the gradient through y") {
    Tensor w = t({1, 2, 3}, {3}).requires_grad_();
    Tensor y = w * 2.0;
    y.assign_(y + 1.0);
    CHECK(y.to_vector<float>() == F{3, 5, 7});
    CHECK_FALSE(y.is_leaf());
    sum(y * y).backward();
    // d/dw sum((2w + 1)^2) = 4 (2w + 1)
    CHECK(w.grad().to_vector<float>() == F{12, 20, 28});
}

TEST_CASE("a write through a view of a non-leaf updates the base's history (y[0] = 0)") {
    Tensor w = t({1, 2, 3}, {3}).requires_grad_();
    Tensor y = w * 2.0;
    y.slice(0, 0, 1).assign_(zeros({1}));
    CHECK(y.to_vector<float>() == F{0, 4, 6});
    sum(y * y).backward();
    // y = [0, 2 w1, 2 w2]: d/dw sum(y^2) = [0, 8 w1, 8 w2]
    CHECK(w.grad().to_vector<float>() == F{0, 16, 24});
}

TEST_CASE("a source that requires grad written into a constant tensor's view gets its gradient") {
    Tensor u = t({2}, {1}).requires_grad_();
    Tensor z = zeros({3});
    z.slice(0, 1, 2).assign_(u * 3.0);
    CHECK(z.requires_grad());
    CHECK(z.to_vector<float>() == F{0, 6, 0});
    sum(z * t({1, 10, 100}, {3})).backward();
    CHECK(u.grad().to_vector<float>() == F{30});
}

TEST_CASE("a view made before the write reads the base's new history") {
    Tensor w = t({1, 2, 3}, {3}).requires_grad_();
    Tensor u = t({7}, {1}).requires_grad_();
    Tensor y = w * 2.0;
    Tensor v = y.slice(0, 0, 2);  // made before the write below
    y.slice(0, 0, 1).assign_(u * 5.0);
    CHECK(v.to_vector<float>() == F{35, 4});
    sum(v).backward();
    // v = [5u, 2 w1]: the old history would have given w [2, 2, 0] and u nothing
    CHECK(w.grad().to_vector<float>() == F{0, 2, 0});
    CHECK(u.grad().to_vector<float>() == F{5});
}

TEST_CASE("backward refuses a rule whose saved tensor was overwritten, naming the rule") {
    Tensor w = t({0, 1}, {2}).requires_grad_();
    Tensor y = exp(w);  // exp's rule keeps its output
    y.assign_(y + 1.0);
    CHECK_THROWS_WITH_AS(sum(y).backward(), Contains("that exp saved for its gradient was modified in place"),
                         AutogradError);

    // mul keeps its operands: overwriting one of them after the product is refused too
    Tensor a = w * 1.0;
    Tensor p = a * w;
    a.assign_(zeros({2}));
    CHECK_THROWS_WITH_AS(sum(p).backward(), Contains("mul saved"), AutogradError);

    // add keeps neither: overwriting its operand afterwards is fine
    Tensor b = w * 3.0;
    Tensor s = b + w;
    b.assign_(zeros({2}));
    sum(s).backward();
    CHECK(w.grad().to_vector<float>() == F{4, 4});
}

TEST_CASE("in-place writes into a leaf that requires grad (or a view of it) are refused in grad mode") {
    Tensor w = t({1, 2}, {2}).requires_grad_();
    CHECK_THROWS_WITH_AS(w.assign_(zeros({2})), Contains("a leaf tensor that requires grad"), AutogradError);
    CHECK_THROWS_WITH_AS(w.slice(0, 0, 1).assign_(zeros({1})), Contains("a view of a leaf tensor"), AutogradError);
    CHECK(w.to_vector<float>() == F{1, 2});
    {
        NoGradGuard no_grad;
        w.assign_(t({3, 4}, {2}));
    }
    CHECK(w.to_vector<float>() == F{3, 4});
    CHECK(w.is_leaf());
}

TEST_CASE("set_data moves a parameter in place: an optimizer built before keeps training it") {
    Tensor w = t({1, 1}, {2}).requires_grad_();
    optim::SGD opt({w}, 0.25);
    Tensor handle = w;  // another handle, as a module keeps
    w.set_data(t({2, 3}, {2}));
    CHECK(handle.to_vector<float>() == F{2, 3});
    CHECK(handle.requires_grad());
    sum(w * w).backward();
    opt.step();
    // w -= 0.25 * 2 w
    CHECK(handle.to_vector<float>() == F{1, 1.5f});
    Tensor y = w * 2.0;
    CHECK_THROWS_AS(y.set_data(zeros({2})), AutogradError);
}

TEST_CASE("Module::to keeps the parameter tensors (set_data)") {
    nn::Linear lin(2, 2, true, 1);
    Tensor weight = lin.weight;
    optim::SGD opt(lin.parameters(), 0.5);
    lin.to(Device{});
    CHECK(weight.impl() == lin.weight.impl());
}

TEST_CASE("overwriting a non-leaf with constants keeps it in the graph with a zero gradient (CopyBackwards)") {
    Tensor w = t({1, 2}, {2}).requires_grad_();
    Tensor y = w * 3.0;
    y.assign_(t({5, 6}, {2}));
    CHECK(y.requires_grad());
    sum(y * y).backward();
    CHECK(w.grad().to_vector<float>() == F{0, 0});
}
