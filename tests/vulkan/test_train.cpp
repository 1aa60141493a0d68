// Training steps of the Fashion-MNIST example's CNN on vulkan, built from tinyfin ops:
// conv(1->32, 3x3, pad 1) relu maxpool -> conv(32->64) relu maxpool -> flatten -> linear(3136->128)
// relu -> linear(128->10), cross_entropy, AdamW (lr 1e-3, betas .9/.999, eps 1e-8, wd 0.01).
// The same steps run on cpu first; on vulkan no op may fall back (TINYFIN_FALLBACK=error), the
// only bytes read back are the losses, and the losses match cpu's.
#include "device_parity.hpp"

#include <chrono>
#include <cmath>

using namespace vt;
namespace tf = tinyfin;

namespace {

constexpr int64_t batch = 32;
constexpr int steps = 3;

struct Model {
    std::vector<Tensor> params;  // conv1 w, b, conv2 w, b, fc1 w, b, fc2 w, b
    std::vector<Tensor> m, v;  // AdamW state
    int step = 0;
};

// Kaiming-uniform-like weights from fixed host values, on device.
Model make_model(const Device &device) {
    const Shape shapes[] = {{32, 1, 3, 3}, {32}, {64, 32, 3, 3}, {64}, {128, 3136}, {128}, {10, 128}, {10}};
    const double fan_in[] = {9, 9, 288, 288, 3136, 3136, 128, 128};
    Model m;
    for (int i = 0; i < 8; ++i) {
        const double bound = 1.0 / std::sqrt(fan_in[i]);
        Tensor p =
            tf::from_vector(values(numel(shapes[i]), 300 + static_cast<uint64_t>(i), -bound, bound), shapes[i], device);
        p.requires_grad_();
        m.params.push_back(p);
        m.m.push_back(tf::zeros(shapes[i], DType::f32, device));
        m.v.push_back(tf::zeros(shapes[i], DType::f32, device));
    }
    return m;
}

Tensor forward(const Model &m, const Tensor &x) {
    tf::Conv2dOptions pad1;
    pad1.pad_h = pad1.pad_w = 1;
    Tensor h = tf::max_pool2d(tf::relu(tf::conv2d(x, m.params[0], m.params[1], pad1)));
    h = tf::max_pool2d(tf::relu(tf::conv2d(h, m.params[2], m.params[3], pad1)));
    h = h.reshape({h.size(0), -1});
    h = tf::relu(tf::add(tf::matmul(h, m.params[4].transpose(0, 1)), m.params[5]));
    return tf::add(tf::matmul(h, m.params[6].transpose(0, 1)), m.params[7]);
}

// torch.optim.AdamW's update, from tinyfin ops, in place with assign_.
void adamw_step(Model &m, double lr = 1e-3, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8, double wd = 0.01) {
    tf::NoGradGuard no_grad;
    ++m.step;
    const double c1 = 1 - std::pow(b1, m.step), c2 = 1 - std::pow(b2, m.step);
    for (std::size_t i = 0; i < m.params.size(); ++i) {
        Tensor &p = m.params[i];
        Tensor g = p.grad();
        Tensor decayed = p * (1 - lr * wd);
        m.m[i].assign_(m.m[i] * b1 + g * (1 - b1));
        m.v[i].assign_(m.v[i] * b2 + tf::square(g) * (1 - b2));
        Tensor denom = tf::sqrt(m.v[i]) / std::sqrt(c2) + eps;
        p.assign_(decayed - (m.m[i] / denom) * (lr / c1));
        p.zero_grad();
    }
}

// Losses of `steps` steps on the same batch; seconds[i] is step i's wall time (loss read included).
std::vector<float> train(const Device &device, std::vector<double> *seconds) {
    Model m = make_model(device);
    std::vector<float> images = values(batch * 28 * 28, 401, -0.8, 2.0);
    std::vector<int64_t> labels(batch);
    for (int64_t i = 0; i < batch; ++i) labels[static_cast<std::size_t>(i)] = (i * 7 + 3) % 10;
    Tensor x = tf::from_vector(images, {batch, 1, 28, 28}, device);
    Tensor y = tf::from_vector(labels, {batch}, device);
    tf::synchronize();
    if (device == gpu_device) tf::reset_stats();
    std::vector<float> losses;
    for (int s = 0; s < steps; ++s) {
        const auto start = std::chrono::steady_clock::now();
        Tensor loss = tf::cross_entropy(forward(m, x), y);
        loss.backward();
        adamw_step(m);
        losses.push_back(loss.item<float>());
        seconds->push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return losses;
}

}  // namespace

TEST_CASE("train: CNN steps on the backend run there, read back only the losses, match cpu") {
    std::vector<double> cpu_seconds, vk_seconds;
    const std::vector<float> want = train(cpu_device, &cpu_seconds);
    const std::vector<float> got = train(gpu_device, &vk_seconds);
    const tf::Stats stats = tf::stats();

    CHECK(stats.total_fallbacks == 0);
    const tf::Stats::Backend *vk = stats.backend(TF_TEST_BACKEND);
    REQUIRE(vk != nullptr);
    CHECK(vk->ops > 0);
    // Every loss is one f32 read with item(); nothing else leaves the device.
    CHECK(vk->bytes_to_host == steps * sizeof(float));
    const tf::Stats::Backend *cpu = stats.backend("cpu");
    if (cpu) CHECK(cpu->ops == 0);

    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("step " << i << ": " TF_TEST_BACKEND " " << got[i] << ", cpu " << want[i]);
        CHECK(std::isfinite(got[i]));
        CHECK(std::abs(got[i] - want[i]) <= 1e-4 + 1e-4 * std::abs(want[i]));
    }
    // Training on one batch: the loss goes down.
    CHECK(got.back() < got.front());
    // The first step creates the pipelines (lavapipe compiles each on first use).
    MESSAGE("CNN, batch " << batch << ": " TF_TEST_BACKEND " step 1 " << vk_seconds[0] << " s, later steps "
                          << vk_seconds.back() << " s (" << vk->ops / steps << " ops a step); cpu "
                          << cpu_seconds.back() << " s a step; losses " << got[0] << " .. " << got.back());
}

TEST_CASE("train: adamw_step_ and sgd_step_ are one dispatch each on the backend, close to cpu") {
    const int64_t n = 1000;  // four workgroups of the grid-stride loop
    const std::vector<float> start = values(n, 7);
    for (int which = 0; which < 3; ++which) {
        CAPTURE(which);
        Tensor p_cpu = tf::from_vector(start, {n}, cpu_device), p_gpu = tf::from_vector(start, {n}, gpu_device);
        Tensor a_cpu, b_cpu, a_gpu, b_gpu;  // the state: moments or the momentum buffer
        for (int step = 1; step <= 3; ++step) {
            const Pair g = both(values(n, 100 + static_cast<uint64_t>(step)), {n});
            tf::reset_stats();
            if (which == 0) {
                const tf::AdamWStep o{1e-2, 0.9, 0.999, 1e-8, 0.01, step};
                tf::adamw_step_(p_cpu, g.cpu, a_cpu, b_cpu, o);
                tf::adamw_step_(p_gpu, g.vk, a_gpu, b_gpu, o);
            } else {
                const tf::SGDStep o{0.05, 0.9, 1e-3, which == 2};
                tf::sgd_step_(p_cpu, g.cpu, a_cpu, o);
                tf::sgd_step_(p_gpu, g.vk, a_gpu, o);
            }
            const tf::Stats stats = tf::stats();
            CHECK(stats.total_fallbacks == 0);
            const tf::Stats::Backend *gpu = stats.backend(TF_TEST_BACKEND);
            REQUIRE(gpu != nullptr);
            CHECK(gpu->ops == 1);
        }
        CHECK(p_gpu.device() == gpu_device);
        // GLSL's and OpenCL's division and root may be 2.5 / 3 ulp off, not correctly rounded: close,
        // not equal, is the contract (lavapipe and pocl round them correctly: the message counts bits).
        const std::vector<float> want = p_cpu.to_vector<float>(), got = p_gpu.to_vector<float>();
        const std::vector<float> want_a = a_cpu.to_vector<float>(), got_a = a_gpu.to_vector<float>();
        std::size_t differ = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            INFO("element " << i);
            CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5).scale(1.0));
            CHECK(got_a[i] == doctest::Approx(want_a[i]).epsilon(1e-5).scale(1.0));
            differ += got[i] != want[i] || got_a[i] != want_a[i];
        }
        MESSAGE("update " << which << ": " << differ << " of " << want.size()
                          << " elements differ from cpu in their bits");
    }
}
