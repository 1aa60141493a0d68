// Eight threads issuing independent ops and training steps at once, on every loaded backend
// (cpu, blas, vulkan, opengl, ... whichever are usable here) and on all of them mixed. Each
// thread's results must equal the same work done on one thread first. scripts/sanitize runs
// this suite under ThreadSanitizer (core + cpu plugin).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

constexpr int thread_count = 8;
constexpr int rounds = 3;

// What one thread computes: a few independent ops, then training steps of a small linear model.
struct Result {
    std::vector<float> ops;
    std::vector<float> weights;
    float last_loss = 0;
};

Result work(const Device &device, uint64_t seed) {
    Result out;
    Tensor a = rand({8, 16}, seed, device);
    Tensor b = rand({16, 4}, seed + 1, device);
    Tensor c = relu(matmul(a, b) - 2.0) + sum(exp(neg(a)), {1}, true).expand({8, 4});
    Tensor x = rand({2, 3, 6, 6}, seed + 2, device);
    Tensor k = rand({4, 3, 3, 3}, seed + 3, device);
    Tensor pooled = max_pool2d(conv2d(x, k));
    for (const Tensor &t : {softmax(c, -1), pooled.reshape({-1}), sum(c, {0})}) {
        std::vector<float> values = t.to_vector<float>();
        out.ops.insert(out.ops.end(), values.begin(), values.end());
    }

    Tensor inputs = rand({32, 4}, seed + 4, device);
    Tensor truth = from_vector(std::vector<float>{0.5f, -1.0f, 2.0f, 0.25f}, {4, 1}, device);
    Tensor targets = matmul(inputs, truth);
    Tensor w = zeros({4, 1}, DType::f32, device).requires_grad_();
    for (int step = 0; step < 20; ++step) {
        Tensor loss = mean(square(matmul(inputs, w) - targets));
        loss.backward();
        {
            NoGradGuard no_grad;
            w.assign_(w - w.grad() * 0.5);
        }
        w.zero_grad();
        out.last_loss = loss.item<float>();
    }
    out.weights = w.detach().to_vector<float>();
    return out;
}

bool close(const std::vector<float> &got, const std::vector<float> &want) {
    if (got.size() != want.size()) return false;
    for (std::size_t i = 0; i < got.size(); ++i)
        if (!(std::fabs(got[i] - want[i]) <= 1e-5f * (1 + std::fabs(want[i])))) return false;
    return true;
}

// Runs work() on `devices[i % n]` from 8 threads at once, `rounds` times, against references
// computed on this thread first.
void run_concurrently(const std::vector<Device> &devices) {
    std::vector<Result> expected;
    for (int t = 0; t < thread_count; ++t)
        expected.push_back(work(devices[t % devices.size()], 100 + t));
    for (int round = 0; round < rounds; ++round) {
        std::vector<Result> got(thread_count);
        std::vector<std::string> errors(thread_count);
        std::vector<std::thread> threads;
        for (int t = 0; t < thread_count; ++t) {
            threads.emplace_back([&, t] {
                try {
                    got[t] = work(devices[t % devices.size()], 100 + t);
                } catch (const std::exception &e) {
                    errors[t] = e.what();
                }
            });
        }
        for (std::thread &thread : threads) thread.join();
        for (int t = 0; t < thread_count; ++t) {
            INFO("round " << round << ", thread " << t << " on "
                          << devices[t % devices.size()].str());
            REQUIRE(errors[t] == "");
            CHECK(close(got[t].ops, expected[t].ops));
            CHECK(close(got[t].weights, expected[t].weights));
            CHECK(got[t].last_loss == doctest::Approx(expected[t].last_loss).epsilon(1e-4));
            CHECK(got[t].last_loss < 0.05f); // the model learnt
        }
    }
}

} // namespace

TEST_CASE("8 threads on each loaded backend") {
    for (const std::string &name : available_backends()) {
        INFO("backend " << name);
        run_concurrently({Device{name, 0}});
    }
}

TEST_CASE("8 threads over all loaded backends at once") {
    std::vector<Device> devices;
    for (const std::string &name : available_backends()) devices.push_back(Device{name, 0});
    MESSAGE("backends: " << devices.size());
    run_concurrently(devices);
}
