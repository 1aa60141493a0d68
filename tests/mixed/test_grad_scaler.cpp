// nn::GradScaler: the scaled loss, unscaled gradients, skipped steps on inf and NaN with the
// exact backoff and growth values, a disabled scaler passing through, and the state's round
// trip through an nn::save file next to the model (whose old-style files still load).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

const Device cpu{"cpu", 0};

// A parameter p = [1, 2] with a loss whose gradient is `g` times the scale.
struct Fixture {
    Tensor p = from_vector(std::vector<float>{1, 2}, {2}, cpu).requires_grad_();
    optim::SGD opt{{p}, 0.5};

    void backward(nn::GradScaler &scaler, float g0, float g1) {
        opt.zero_grad();
        Tensor gvec = from_vector(std::vector<float>{g0, g1}, {2}, cpu);
        scaler.scale(sum(mul(p, gvec))).backward();
    }
    std::vector<float> value() const { return p.to_vector<float>(); }
};

std::string temp_path(const char *name) {
    return std::string("/tmp/tinyfin-grad-scaler-") + std::to_string(getpid()) + "-" + name;
}

}  // namespace

TEST_CASE("scale, unscaled gradients and a step with finite gradients") {
    Fixture f;
    nn::GradScaler scaler(nn::GradScaler::Options{.init_scale = 1024.0, .growth_interval = 3});
    CHECK(scaler.get_scale() == 1024.0);
    CHECK(scaler.scale(scalar(0.5, DType::f32, cpu)).item<float>() == 512.0f);
    f.backward(scaler, 0.25f, -1.0f);
    CHECK(f.p.grad().to_vector<float>() == std::vector<float>{256.0f, -1024.0f});
    CHECK(scaler.step(f.opt));
    CHECK(!scaler.found_inf());
    CHECK(f.p.grad().to_vector<float>() == std::vector<float>{0.25f, -1.0f});  // unscaled in place
    CHECK(f.value() == std::vector<float>{1.0f - 0.5f * 0.25f, 2.0f + 0.5f});
    scaler.update();
    CHECK(scaler.get_scale() == 1024.0);
    CHECK(scaler.growth_tracker() == 1);
}

TEST_CASE("inf and NaN gradients skip the step and back off; growth after growth_interval clean steps") {
    Fixture f;
    nn::GradScaler scaler(nn::GradScaler::Options{
        .init_scale = 1024.0, .growth_factor = 2.0, .backoff_factor = 0.25, .growth_interval = 2});
    for (float bad : {INFINITY, -INFINITY, NAN}) {
        CAPTURE(bad);
        const std::vector<float> before = f.value();
        const double scale = scaler.get_scale();
        f.backward(scaler, bad, 1.0f);
        CHECK(!scaler.step(f.opt));
        CHECK(scaler.found_inf());
        CHECK(f.value() == before);
        scaler.update();
        CHECK(scaler.get_scale() == scale * 0.25);
        CHECK(scaler.growth_tracker() == 0);
    }
    const double low = scaler.get_scale();  // 1024 / 64 = 16
    CHECK(low == 16.0);
    for (int i = 0; i < 2; ++i) {
        f.backward(scaler, 1.0f, 1.0f);
        CHECK(scaler.step(f.opt));
        scaler.update();
    }
    CHECK(scaler.get_scale() == 32.0);
    CHECK(scaler.growth_tracker() == 0);
    // A finite gradient that overflows f32 once scaled is inf too: skipped.
    nn::GradScaler huge(nn::GradScaler::Options{.init_scale = 0x1p100});
    Fixture g;
    g.backward(huge, 0x1p100f, 0.0f);
    CHECK(!huge.step(g.opt));
    huge.update();
    CHECK(huge.get_scale() == 0x1p99);
}

TEST_CASE("unscale_ before step (for clipping), misuse, bad options and a disabled scaler") {
    Fixture f;
    nn::GradScaler scaler(nn::GradScaler::Options{.init_scale = 8.0});
    f.backward(scaler, 1.0f, 2.0f);
    scaler.unscale_(f.opt);
    CHECK(f.p.grad().to_vector<float>() == std::vector<float>{1.0f, 2.0f});
    CHECK_THROWS_AS(scaler.unscale_(f.opt), AutogradError);
    CHECK(scaler.step(f.opt));  // no second unscale
    scaler.update();
    CHECK_THROWS_AS(scaler.update(), AutogradError);
    CHECK_THROWS_AS(nn::GradScaler(nn::GradScaler::Options{.init_scale = 0}), ValueError);
    CHECK_THROWS_AS(nn::GradScaler(nn::GradScaler::Options{.growth_factor = 1}), ValueError);
    CHECK_THROWS_AS(nn::GradScaler(nn::GradScaler::Options{.backoff_factor = 1}), ValueError);
    CHECK_THROWS_AS(nn::GradScaler(nn::GradScaler::Options{.growth_interval = 0}), ValueError);

    nn::GradScaler off(nn::GradScaler::Options{.enabled = false});
    Fixture h;
    Tensor loss = sum(h.p);
    CHECK(off.scale(loss).impl() == loss.impl());
    h.backward(off, INFINITY, 1.0f);
    CHECK(off.step(h.opt));  // passes through: steps even on inf
    off.update();
    CHECK(off.get_scale() == 65536.0);
}

TEST_CASE("the scaler's state round-trips through an nn::save file beside the model; old files still load") {
    set_backend("cpu");
    nn::Linear model(3, 2, true, 1);
    nn::GradScaler scaler(nn::GradScaler::Options{.init_scale = 4096.0, .growth_interval = 10});
    Fixture f;
    for (int i = 0; i < 3; ++i) {
        f.backward(scaler, 1.0f, 1.0f);
        scaler.step(f.opt);
        scaler.update();
    }
    f.backward(scaler, NAN, 1.0f);
    scaler.step(f.opt);
    scaler.update();
    f.backward(scaler, 1.0f, 1.0f);
    scaler.step(f.opt);
    scaler.update();
    REQUIRE(scaler.get_scale() == 2048.0);
    REQUIRE(scaler.growth_tracker() == 1);

    const std::string path = temp_path("state.tfnn");
    nn::NamedTensors all = model.state_dict();
    for (auto &entry : scaler.state_dict()) all.push_back(entry);
    nn::save(path, all);
    nn::GradScaler restored;
    restored.load_state_dict(nn::load_all(path, cpu));
    CHECK(restored.get_scale() == 2048.0);
    CHECK(restored.growth_tracker() == 1);
    nn::Linear other(3, 2, true, 9);
    CHECK(other.load_state_dict(nn::load_all(path, cpu), false).unexpected_keys.size() == 2);
    CHECK(other.weight.to_vector<float>() == model.weight.to_vector<float>());

    // A model-only file (the format before GradScaler) loads as before; it has no scaler state.
    const std::string old_path = temp_path("model.tfnn");
    nn::save(old_path, model);
    nn::Linear again(3, 2, true, 5);
    nn::load(old_path, again);
    CHECK(again.bias.to_vector<float>() == model.bias.to_vector<float>());
    CHECK_THROWS_AS(restored.load_state_dict(nn::load_all(old_path, cpu)), ValueError);
    std::remove(path.c_str());
    std::remove(old_path.c_str());
}
