// Programs run with the cuda plugin on the search path (the build tree) whether or not CUDA can
// run: without a device the plugin is refused with its reason and every op runs on cpu; with one,
// the same ops run on cuda and agree with cpu.
#include <doctest/doctest.h>

#include <tinyfin/tinyfin.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace tinyfin;

namespace {

const PluginReport *cuda_record(const Report &report) {
    for (const PluginReport &p : report.plugins)
        if (p.name == "cuda") return &p;
    return nullptr;
}

bool cuda_usable() {
    const auto names = available_backends();
    return std::find(names.begin(), names.end(), "cuda") != names.end();
}

std::vector<float> values(int n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * 0.37f) * scale;
    return v;
}

// A small CNN-like forward and backward on device; returns (loss, grad of the conv weight).
std::pair<float, std::vector<float>> step_on(const Device &device) {
    Tensor x = from_vector(values(2 * 3 * 6 * 6, 1.0f), {2, 3, 6, 6}, device);
    Tensor w = from_vector(values(4 * 3 * 3 * 3, 0.2f), {4, 3, 3, 3}, device);
    w.requires_grad_();
    Conv2dOptions pad;
    pad.pad_h = pad.pad_w = 1;
    Tensor h = max_pool2d(relu(conv2d(x, w, Tensor(), pad)));
    Tensor logits = matmul(h.reshape({2, 4 * 3 * 3}), from_vector(values(36 * 5, 0.1f), {36, 5}, device));
    Tensor labels = from_vector(std::vector<int64_t>{1, 3}, {2}, device);
    Tensor loss = cross_entropy(logits, labels);
    loss.backward();
    return {loss.item<float>(), w.grad().to_vector<float>()};
}

}  // namespace

TEST_CASE("cuda: the plugin is on the search path with an outcome") {
    const Report report = tinyfin::report();
    const PluginReport *cuda = cuda_record(report);
    REQUIRE_MESSAGE(cuda, "no cuda plugin in the registry");
    MESSAGE("cuda: " << cuda->outcome << ": " << cuda->message);
    if (cuda->outcome == "loaded") {
        CHECK(cuda_usable());
        CHECK_FALSE(cuda->devices.empty());
    } else {
        CHECK(cuda->outcome == "probe-refused");
        CHECK_FALSE(cuda->message.empty());
        CHECK_FALSE(cuda_usable());
        CHECK(backend_name() != "cuda");
    }
}

TEST_CASE("cuda: asking for cuda without a device leaves cpu working") {
    if (cuda_usable()) return;
    CHECK_FALSE(set_backend("cuda"));
    CHECK(backend_name() != "cuda");
    Tensor a = from_vector(std::vector<float>{1, 2, 3}, {3});
    CHECK((a + a).to_vector<float>() == std::vector<float>{2, 4, 6});
    CHECK(set_backend("auto"));
}

TEST_CASE("cuda: a training step runs on whatever is available and agrees with cpu") {
    const Device cpu{"cpu", 0};
    const auto [cpu_loss, cpu_grad] = step_on(cpu);
    CHECK(std::isfinite(cpu_loss));
    if (!cuda_usable()) {
        // The same step on the default device: cpu (or blas, vulkan), never cuda.
        CHECK(default_device().backend != "cuda");
        const auto [loss, grad] = step_on(default_device());
        CHECK(loss == doctest::Approx(cpu_loss).epsilon(1e-4));
        return;
    }
    reset_stats();
    const auto [cuda_loss, cuda_grad] = step_on(Device{"cuda", 0});
    CHECK(cuda_loss == doctest::Approx(cpu_loss).epsilon(1e-4));
    REQUIRE(cuda_grad.size() == cpu_grad.size());
    for (size_t i = 0; i < cpu_grad.size(); ++i)
        CHECK(cuda_grad[i] == doctest::Approx(cpu_grad[i]).epsilon(1e-3).scale(1e-3));
    CHECK(stats().total_fallbacks == 0);
}
