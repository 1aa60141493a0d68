// Initialisers: bounds and moments of each distribution, PyTorch's default layer init,
// gains and fans, seeding.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tinyfin/nn.hpp"

using namespace tinyfin;
namespace init = tinyfin::nn::init;
using F = std::vector<float>;

namespace {

struct Moments {
    double min, max, mean, var;
};

Moments moments_of(const Tensor &t) {
    F v = t.to_vector<float>();
    Moments m{1e30, -1e30, 0, 0};
    for (float x : v) {
        m.min = std::min<double>(m.min, x);
        m.max = std::max<double>(m.max, x);
        m.mean += x;
    }
    m.mean /= static_cast<double>(v.size());
    for (float x : v) m.var += (x - m.mean) * (x - m.mean);
    m.var /= static_cast<double>(v.size());
    return m;
}

// Checks U(-bound, bound): inside the bounds, reaching near them, mean 0, variance bound^2/3.
void check_symmetric_uniform(const Tensor &t, double bound) {
    Moments m = moments_of(t);
    double n = static_cast<double>(t.numel());
    CHECK(m.min >= -bound);
    CHECK(m.max <= bound);
    CHECK(m.min < -0.98 * bound);
    CHECK(m.max > 0.98 * bound);
    // Standard error of the mean is bound/sqrt(3n); allow 5 of them.
    CHECK(std::abs(m.mean) < 5 * bound / std::sqrt(3 * n));
    CHECK(m.var == doctest::Approx(bound * bound / 3).epsilon(0.03));
}

void check_normal(const Tensor &t, double mean, double std) {
    Moments m = moments_of(t);
    double n = static_cast<double>(t.numel());
    CHECK(std::abs(m.mean - mean) < 5 * std / std::sqrt(n));
    CHECK(std::sqrt(m.var) == doctest::Approx(std).epsilon(0.02));
    CHECK(m.max > mean + 3 * std);  // tails exist at n >= 10^4
    CHECK(m.min < mean - 3 * std);
}

}  // namespace

TEST_CASE("fans and gains follow torch.nn.init") {
    CHECK(init::fans({128, 784}) == std::pair<int64_t, int64_t>{784, 128});
    CHECK(init::fans({64, 32, 3, 3}) == std::pair<int64_t, int64_t>{288, 576});
    CHECK_THROWS_AS(init::fans({5}), ShapeError);
    CHECK(init::calculate_gain(init::Nonlinearity::linear) == 1.0);
    CHECK(init::calculate_gain(init::Nonlinearity::relu) == doctest::Approx(std::sqrt(2.0)));
    CHECK(init::calculate_gain(init::Nonlinearity::tanh) == doctest::Approx(5.0 / 3));
    CHECK(init::calculate_gain(init::Nonlinearity::leaky_relu, std::sqrt(5.0)) == doctest::Approx(std::sqrt(1.0 / 3)));
}

TEST_CASE("uniform_ and normal_: bounds and moments") {
    Tensor t = empty({200, 100});
    init::uniform_(t, -0.5, 1.5, 1);
    Moments m = moments_of(t);
    CHECK(m.min >= -0.5);
    CHECK(m.max < 1.5);
    CHECK(m.mean == doctest::Approx(0.5).epsilon(0.02));
    CHECK(m.var == doctest::Approx(4.0 / 12).epsilon(0.03));

    init::normal_(t, 2.0, 0.5, 2);
    check_normal(t, 2.0, 0.5);
    CHECK_THROWS_AS(init::uniform_(t, 1, 0, 1), ValueError);
    CHECK_THROWS_AS(init::normal_(t, 0, -1, 1), ValueError);
    CHECK_THROWS_AS(init::uniform_(zeros({3}, DType::i32), 0, 1, 1), DTypeError);
}

TEST_CASE("constant_, zeros_, ones_ write in place, also into parameters") {
    Tensor p = randn({3, 2}, 5).requires_grad_();
    Tensor alias = p;
    init::zeros_(p);
    CHECK(alias.to_vector<float>() == F(6, 0.0f));
    init::ones_(p);
    CHECK(alias.to_vector<float>() == F(6, 1.0f));
    init::constant_(p, -2.5);
    CHECK(alias.to_vector<float>() == F(6, -2.5f));
    CHECK(p.requires_grad());
    CHECK(grad_enabled());  // the guard inside restored grad mode
}

TEST_CASE("kaiming_uniform_ and kaiming_normal_") {
    Tensor w = empty({256, 400});
    init::kaiming_uniform_(w, 3);  // leaky_relu a = 0: gain sqrt(2), bound sqrt(6 / fan_in)
    check_symmetric_uniform(w, std::sqrt(6.0 / 400));
    init::kaiming_uniform_(w, 3, 0, init::FanMode::fan_out, init::Nonlinearity::relu);
    check_symmetric_uniform(w, std::sqrt(6.0 / 256));
    init::kaiming_normal_(w, 4, 0, init::FanMode::fan_in, init::Nonlinearity::relu);
    check_normal(w, 0, std::sqrt(2.0 / 400));
    Tensor conv = empty({64, 32, 3, 3});
    init::kaiming_normal_(conv, 4, 0, init::FanMode::fan_out, init::Nonlinearity::relu);
    check_normal(conv, 0, std::sqrt(2.0 / 576));
    CHECK_THROWS_AS(init::kaiming_uniform_(empty({10}), 1), ShapeError);
}

TEST_CASE("xavier_uniform_ and xavier_normal_") {
    Tensor w = empty({300, 200});
    init::xavier_uniform_(w, 8);
    check_symmetric_uniform(w, std::sqrt(6.0 / 500));
    init::xavier_uniform_(w, 8, 2.0);
    check_symmetric_uniform(w, 2.0 * std::sqrt(6.0 / 500));
    init::xavier_normal_(w, 9);
    check_normal(w, 0, std::sqrt(2.0 / 500));
}

TEST_CASE("Linear and Conv2d defaults are PyTorch's U(-1/sqrt(fan_in), 1/sqrt(fan_in))") {
    nn::Linear fc(784, 128, true, 1);
    check_symmetric_uniform(fc.weight, 1 / std::sqrt(784.0));
    Moments b = moments_of(fc.bias);
    CHECK(b.min >= -1 / std::sqrt(784.0));
    CHECK(b.max <= 1 / std::sqrt(784.0));

    nn::Conv2d conv(32, 64, 3, {}, true, 2);
    check_symmetric_uniform(conv.weight, 1 / std::sqrt(288.0));
    Moments cb = moments_of(conv.bias);
    CHECK(cb.min >= -1 / std::sqrt(288.0));
    CHECK(cb.max <= 1 / std::sqrt(288.0));
}

TEST_CASE("initialisation is reproducible per seed and differs across seeds and tensors") {
    nn::Linear a(20, 30, true, 5), b(20, 30, true, 5), c(20, 30, true, 6);
    CHECK(a.weight.to_vector<float>() == b.weight.to_vector<float>());
    CHECK(a.bias.to_vector<float>() == b.bias.to_vector<float>());
    CHECK(a.weight.to_vector<float>() != c.weight.to_vector<float>());
    // Weight and bias draw from different streams of one seed.
    F w = a.weight.to_vector<float>(), bias = a.bias.to_vector<float>();
    double scale = 1 / std::sqrt(20.0);
    CHECK_FALSE(std::equal(bias.begin(), bias.end(), w.begin(),
                           [&](float x, float y) { return std::abs(x - y) < 1e-7 * scale; }));
    CHECK(nn::mix_seed(1, 0) != nn::mix_seed(1, 1));
    CHECK(nn::mix_seed(1, 0) != nn::mix_seed(2, 0));
}
