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

namespace {

// The cpu plugin's live scratch arenas and its pool size, from its tinyfin-info features.
struct CpuScratch {
    int64_t arenas = -1;
    int64_t threads = -1;
};

CpuScratch cpu_scratch() {
    CpuScratch out;
    for (const PluginReport &plugin : report().plugins) {
        if (plugin.name != "cpu" || !plugin.initialised) continue;
        for (const auto &[key, value] : plugin.features) {
            if (key == "scratch_arenas") out.arenas = std::stoll(value);
            if (key == "threads") out.threads = std::stoll(value);
        }
    }
    return out;
}

// A conv2d and a matmul big enough to pack: both take scratch from the running thread's arena.
float scratch_work(uint64_t seed) {
    const Device cpu{"cpu", 0};
    Tensor x = rand({1, 4, 12, 12}, seed, cpu);
    Tensor k = rand({8, 4, 3, 3}, seed + 1, cpu);
    Tensor a = rand({96, 96}, seed + 2, cpu);
    return sum(conv2d(x, k)).item<float>() + sum(matmul(a, a)).item<float>();
}

} // namespace

TEST_CASE("short-lived threads give their cpu scratch arena back when they end") {
    const float want = scratch_work(7);
    CpuScratch before = cpu_scratch();
    REQUIRE(before.arenas >= 1); // this thread's: the ops above did take scratch
    REQUIRE(before.threads >= 1);
    // More threads than the pool and this thread together could account for, one after another:
    // each leaves an arena behind unless its end frees it.
    const int64_t short_lived = before.threads + 40;
    for (int64_t i = 0; i < short_lived; ++i) {
        float got = 0;
        std::thread([&] { got = scratch_work(7); }).join();
        REQUIRE(got == want);
    }
    CpuScratch after = cpu_scratch();
    INFO("arenas before " << before.arenas << ", after " << after.arenas << ", pool threads "
                          << after.threads << ", short-lived threads " << short_lived);
    // This thread's arena and at most one per pool worker (a worker may first take scratch now).
    CHECK(after.arenas <= before.threads + 1);
    CHECK(after.arenas >= 1);
}
