// Eight threads issuing independent ops and training steps at once, on every loaded backend
// (cpu, blas, vulkan, opengl, ... whichever are usable here) and on all of them mixed. Each
// thread's results must equal the same work done on one thread first. scripts/sanitize runs
// this suite under ThreadSanitizer (core + cpu plugin).
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tinyfin/nn.hpp"
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
    for (int t = 0; t < thread_count; ++t) expected.push_back(work(devices[t % devices.size()], 100 + t));
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
            INFO("round " << round << ", thread " << t << " on " << devices[t % devices.size()].str());
            REQUIRE(errors[t] == "");
            CHECK(close(got[t].ops, expected[t].ops));
            CHECK(close(got[t].weights, expected[t].weights));
            CHECK(got[t].last_loss == doctest::Approx(expected[t].last_loss).epsilon(1e-4));
            CHECK(got[t].last_loss < 0.05f);  // the model learnt
        }
    }
}

}  // namespace

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

// Backward passes on several threads through one shared model all add into the same leaves'
// gradients: the result must be the sum of every pass's gradient, as on one thread. The inputs
// are small integers, so every partial sum is exact and the order of the additions cannot
// change a bit: the reference is the sum done on the host.
TEST_CASE("concurrent backward through one shared model accumulates every pass") {
    constexpr int workers = 4, passes = 50;
    constexpr int64_t rows = 3, in = 5, out = 4;
    for (const std::string &name : available_backends()) {
        INFO("backend " << name);
        const Device device{name, 0};
        nn::Linear lin(in, out, true, 7);
        lin.to(device);
        std::vector<Tensor> inputs;
        std::vector<double> column_sums(in, 0.0);
        for (int t = 0; t < workers; ++t) {
            std::vector<float> x(rows * in);
            for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((t * 7 + i * 3) % 11) - 5;
            for (std::size_t i = 0; i < x.size(); ++i) column_sums[i % in] += x[i];
            inputs.push_back(from_vector(x, {rows, in}, device));
        }
        // d sum(x W^T + b) / dW[o][i] = sum over rows of x[r][i]; / db[o] = rows.
        std::vector<float> want_weight, want_bias(out, static_cast<float>(workers * passes * rows));
        for (int64_t o = 0; o < out; ++o)
            for (int64_t i = 0; i < in; ++i) want_weight.push_back(static_cast<float>(passes * column_sums[i]));

        for (int round = 0; round < 3; ++round) {
            INFO("round " << round);
            lin.zero_grad();
            std::vector<std::string> errors(workers);
            std::vector<std::thread> threads;
            for (int t = 0; t < workers; ++t)
                threads.emplace_back([&, t] {
                    try {
                        for (int p = 0; p < passes; ++p) sum(lin(inputs[t])).backward();
                    } catch (const std::exception &e) {
                        errors[t] = e.what();
                    }
                });
            for (std::thread &thread : threads) thread.join();
            for (const std::string &error : errors) REQUIRE(error == "");
            REQUIRE(lin.weight.grad().defined());
            REQUIRE(lin.bias.grad().defined());
            CHECK(lin.weight.grad().to_vector<float>() == want_weight);
            CHECK(lin.bias.grad().to_vector<float>() == want_bias);
        }
    }
}

// A label or index outside its range is an error of the thread that passed it: on cpu the op
// raises; on vulkan and opengl the kernel finds it and that thread's next read on the device
// raises, the loss reading NaN and the picked rows 0 afterwards. Another thread working on the
// same device meanwhile sees only its own, right results.
TEST_CASE("a bad label is reported to the thread that passed it, not to another") {
    constexpr int rounds = 30;
    for (const std::string &name : available_backends()) {
        INFO("backend " << name);
        const Device device{name, 0};
        std::vector<float> logit_values(4 * 10);
        for (std::size_t i = 0; i < logit_values.size(); ++i) logit_values[i] = static_cast<float>(i % 7) * 0.25f;
        const Tensor logits = from_vector(logit_values, {4, 10}, device);
        const Tensor good = from_vector(std::vector<int64_t>{1, 2, 3, 4}, {4}, device);
        const Tensor bad = from_vector(std::vector<int64_t>{1, 12, 3, 4}, {4}, device);
        const Tensor table = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}, device);
        const Tensor good_index = from_vector(std::vector<int32_t>{2, 0}, {2}, device);
        const Tensor bad_index = from_vector(std::vector<int32_t>{2, 5}, {2}, device);
        const float want_loss = cross_entropy(logits.to(Device{"cpu", 0}), good.to(Device{"cpu", 0})).item<float>();

        std::atomic<int> ready{0};
        const auto start_together = [&] {
            ++ready;
            while (ready.load() < 2) std::this_thread::yield();
        };
        std::vector<std::string> passer_problems, bystander_problems;
        std::thread passer([&] {
            start_together();
            for (int r = 0; r < rounds; ++r) {
                // What each bad call gives when its error is consumed (GPUs), checked after.
                const std::vector<std::pair<const char *, std::function<Tensor()>>> calls = {
                    {"cross_entropy", [&] { return cross_entropy(logits, bad); }},
                    {"embedding", [&] { return embedding(table, bad_index); }},
                    {"one_hot", [&] { return one_hot(bad_index, 3); }},
                };
                for (const auto &[what, call] : calls) {
                    Tensor result;
                    try {
                        result = call();
                        (void)result.to_vector<float>();
                        passer_problems.push_back(std::string(what) + ": no error for a bad label");
                        continue;
                    } catch (const ValueError &) {
                    } catch (const std::exception &e) {
                        passer_problems.push_back(std::string(what) + ": " + e.what());
                        continue;
                    }
                    if (!result.defined()) continue;  // raised by the op itself (cpu)
                    try {
                        std::vector<float> v = result.to_vector<float>();
                        const std::string op = what;
                        if (op == "cross_entropy" && !std::isnan(v[0]))
                            passer_problems.push_back("cross_entropy: loss " + std::to_string(v[0]) + ", not NaN");
                        if (op == "embedding" && (v != std::vector<float>{5, 6, 0, 0}))
                            passer_problems.push_back("embedding: the bad index's row is not 0");
                        if (op == "one_hot" && (v != std::vector<float>{0, 0, 1, 0, 0, 0}))
                            passer_problems.push_back("one_hot: the bad label's row is not 0");
                    } catch (const std::exception &e) {
                        passer_problems.push_back(std::string(what) + ": second read raised " + e.what());
                    }
                }
            }
        });
        std::thread bystander([&] {
            start_together();
            for (int r = 0; r < rounds * 3; ++r) {
                try {
                    const float loss = cross_entropy(logits, good).item<float>();
                    if (std::fabs(loss - want_loss) > 1e-5f)
                        bystander_problems.push_back("loss " + std::to_string(loss));
                    if (embedding(table, good_index).to_vector<float>() != std::vector<float>{5, 6, 1, 2})
                        bystander_problems.push_back("embedding rows differ");
                    if (one_hot(good_index, 3).to_vector<float>() != std::vector<float>{0, 0, 1, 1, 0, 0})
                        bystander_problems.push_back("one_hot rows differ");
                } catch (const std::exception &e) {
                    bystander_problems.push_back(e.what());
                }
            }
        });
        passer.join();
        bystander.join();
        CHECK(passer_problems.empty());
        for (std::size_t i = 0; i < passer_problems.size() && i < 5; ++i) MESSAGE("passer: " << passer_problems[i]);
        CHECK(bystander_problems.empty());
        for (std::size_t i = 0; i < bystander_problems.size() && i < 5; ++i)
            MESSAGE("bystander: " << bystander_problems[i]);
        CHECK_NOTHROW(synchronize());
    }
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

}  // namespace

TEST_CASE("short-lived threads give their cpu scratch arena back when they end") {
    const float want = scratch_work(7);
    CpuScratch before = cpu_scratch();
    REQUIRE(before.arenas >= 1);  // this thread's: the ops above did take scratch
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
    INFO("arenas before " << before.arenas << ", after " << after.arenas << ", pool threads " << after.threads
                          << ", short-lived threads " << short_lived);
    // This thread's arena and at most one per pool worker (a worker may first take scratch now).
    CHECK(after.arenas <= before.threads + 1);
    CHECK(after.arenas >= 1);
}
