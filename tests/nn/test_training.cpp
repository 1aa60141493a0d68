// Training helpers (clip_grad_norm, WarmupCosine, AdamW parameter groups) and the Embedding and
// LayerNorm modules against hand-computed values.
#include <doctest/doctest.h>

#include <cmath>

#include "tinyfin/nn.hpp"

using namespace tinyfin;
using F = std::vector<float>;

namespace {

Tensor param(const F &values, const Shape &shape) { return from_vector(values, shape).requires_grad_(); }

}  // namespace

TEST_CASE("clip_grad_norm: the global norm over all gradients, scaled when above max_norm") {
    Tensor a = param({1, 2}, {2}), b = param({0, 0, 0, 0}, {2, 2}), c = param({5}, {1});
    a.set_grad(from_vector(F{3, 0}, {2}));
    b.set_grad(from_vector(F{0, 4, 0, 0}, {2, 2}));
    // c has no gradient: skipped. Norm sqrt(9 + 16) = 5.
    Tensor norm = nn::clip_grad_norm({a, b, c}, 1.0);
    CHECK(norm.item<float>() == doctest::Approx(5.0));
    const double k = 1.0 / (5.0 + 1e-6);
    F ga = a.grad().to_vector<float>(), gb = b.grad().to_vector<float>();
    CHECK(ga[0] == doctest::Approx(3 * k));
    CHECK(ga[1] == 0);
    CHECK(gb[1] == doctest::Approx(4 * k));
    CHECK_FALSE(c.grad().defined());

    SUBCASE("below max_norm the gradients are left as they are") {
        Tensor n2 = nn::clip_grad_norm({a, b}, 10.0);
        CHECK(n2.item<float>() == doctest::Approx(1.0).epsilon(1e-5));
        CHECK(a.grad().to_vector<float>()[0] == doctest::Approx(3 * k));
    }
    SUBCASE("no gradients: norm 0; a negative max_norm is a ValueError") {
        CHECK(nn::clip_grad_norm({c}, 1.0).item<float>() == 0);
        CHECK_THROWS_AS(nn::clip_grad_norm({a}, -1.0), ValueError);
    }
}

TEST_CASE("WarmupCosine: linear warmup, half a cosine, then the floor") {
    nn::WarmupCosine s(1.0, 0.1, 4, 14);
    CHECK(s(0) == doctest::Approx(0.25));
    CHECK(s(3) == doctest::Approx(1.0));
    CHECK(s(4) == doctest::Approx(1.0));  // r = 0
    CHECK(s(9) == doctest::Approx(0.55));  // r = 1/2: 0.1 + 0.9 * 0.5
    CHECK(s(6) == doctest::Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.2))));
    CHECK(s(14) == doctest::Approx(0.1));
    CHECK(s(100) == doctest::Approx(0.1));
    nn::WarmupCosine no_warmup(2.0, 0.0, 0, 2);
    CHECK(no_warmup(0) == doctest::Approx(2.0));
    CHECK(no_warmup(1) == doctest::Approx(1.0));
    CHECK_THROWS_AS(nn::WarmupCosine(1, 0, 5, 4), ValueError);
    CHECK_THROWS_AS(nn::WarmupCosine(-1, 0, 0, 4), ValueError);
}

TEST_CASE("AdamW parameter groups: decay on matrices only") {
    // One step with gradient 0: Adam's update is 0, so only the decay moves a parameter:
    // p *= 1 - lr * wd.
    Tensor w = param({1, 2, 3, 4}, {2, 2}), bias = param({1, 1}, {2});
    auto groups = optim::decay_matrices_only({w, bias}, 0.5);
    REQUIRE(groups.size() == 2);
    CHECK(groups[0].params.size() == 1);
    CHECK(groups[1].params.size() == 1);
    optim::AdamW opt(groups, 0.1);
    CHECK(opt.weight_decay(0) == 0.5);
    CHECK(opt.weight_decay(1) == 0);
    w.set_grad(zeros({2, 2}));
    bias.set_grad(zeros({2}));
    opt.step();
    F wv = w.to_vector<float>(), bv = bias.to_vector<float>();
    CHECK(wv[0] == doctest::Approx(0.95));
    CHECK(wv[3] == doctest::Approx(3.8));
    CHECK(bv[0] == 1.0f);
    SUBCASE("a group without its own decay takes the optimizer's") {
        optim::AdamW opt2(std::vector<optim::ParamGroup>{{{w}, -1}}, 0.1, {0.9, 0.999}, 1e-8, 0.25);
        CHECK(opt2.weight_decay(0) == 0.25);
    }
}

TEST_CASE("Embedding: rows of an N(0, 1) weight, gradients summed per row") {
    nn::Embedding e(5, 3, 7);
    CHECK(e.weight.shape() == Shape{5, 3});
    CHECK(e.parameter_count() == 15);
    F w = e.weight.to_vector<float>();
    Tensor idx = from_vector(std::vector<int32_t>{4, 0, 4}, {3});
    Tensor y = e(idx);
    F yv = y.to_vector<float>();
    CHECK(yv[0] == w[12]);
    CHECK(yv[5] == w[2]);
    sum(y).backward();
    F g = e.weight.grad().to_vector<float>();
    CHECK(g[12] == 2.0f);
    CHECK(g[0] == 1.0f);
    CHECK(g[3] == 0.0f);
    // N(0, 1): 4000 draws have a mean within 0.1 and a std within 10% of 1.
    nn::Embedding big(1000, 4, 1);
    F v = big.weight.to_vector<float>();
    double m = 0, s = 0;
    for (float x : v) m += x;
    m /= v.size();
    for (float x : v) s += (x - m) * (x - m);
    CHECK(std::abs(m) < 0.1);
    CHECK(std::sqrt(s / v.size()) == doctest::Approx(1.0).epsilon(0.1));
}

TEST_CASE("LayerNorm: ones and zeros to start, biased variance") {
    nn::LayerNorm ln(2);
    CHECK(ln.named_parameters().size() == 2);
    // Row [1, 3]: mean 2, variance 1 -> [-1, 1] / sqrt(1 + eps).
    F y = ln(from_vector(F{1, 3}, {1, 2})).to_vector<float>();
    CHECK(y[0] == doctest::Approx(-1 / std::sqrt(1 + 1e-5)));
    CHECK(y[1] == doctest::Approx(1 / std::sqrt(1 + 1e-5)));
    nn::LayerNorm no_bias(2, 1e-5, false);
    CHECK(no_bias.named_parameters().size() == 1);
    CHECK_THROWS_AS(nn::LayerNorm(0), ValueError);
}
