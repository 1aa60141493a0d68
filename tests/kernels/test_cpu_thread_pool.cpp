// The cpu runtime's thread pool (plugins/cpu/runtime.hpp), linked in directly: parallel_for runs
// every task exactly once for any task count and TINYFIN_THREADS (each thread's contiguous range
// and the steals from the others' ends), waits for all of them, rethrows a task's exception after
// the rest ran, runs nested calls and calls made while the pool is busy inline, and finishes a job
// whose worker is held up (a slow task) by stealing its range.
#include <doctest/doctest.h>

#include "runtime.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

void use_threads(int n) {
    tf_cpu::runtime_shutdown();
    setenv("TINYFIN_THREADS", std::to_string(n).c_str(), 1);
    REQUIRE(tf_cpu::thread_count() == n);
}

// Runs parallel_for(tasks) and checks each task ran once; returns the distinct threads that ran tasks.
int run_once_each(int64_t tasks) {
    std::vector<std::atomic<int>> ran(static_cast<size_t>(tasks));
    std::vector<std::thread::id> who(static_cast<size_t>(tasks));
    tf_cpu::parallel_for(tasks, [&](int64_t t) {
        ran[static_cast<size_t>(t)].fetch_add(1);
        who[static_cast<size_t>(t)] = std::this_thread::get_id();
    });
    int wrong = 0;
    for (int64_t t = 0; t < tasks; ++t)
        if (ran[static_cast<size_t>(t)].load() != 1 && wrong++ < 5)
            FAIL_CHECK("task ", t, " of ", tasks, " ran ", ran[static_cast<size_t>(t)].load(), " times");
    std::vector<std::thread::id> distinct;
    for (const auto &id : who) {
        bool seen = false;
        for (const auto &d : distinct) seen = seen || d == id;
        if (!seen) distinct.push_back(id);
    }
    return static_cast<int>(distinct.size());
}

}  // namespace

TEST_CASE("thread pool: every task exactly once, for any task and thread count") {
    for (int threads : {1, 2, 3, 4}) {
        CAPTURE(threads);
        use_threads(threads);
        for (int64_t tasks : {0, 1, 2, 3, 5, 7, 8, 16, 31, 100, 1000, 4099}) {
            CAPTURE(tasks);
            for (int round = 0; round < 20; ++round) run_once_each(tasks);
        }
    }
    tf_cpu::runtime_shutdown();
}

TEST_CASE("thread pool: a job whose tasks are slow is shared between the threads") {
    use_threads(2);
    // Each task sleeps, so the poster alone would take 64 ms: the worker must have joined.
    std::vector<std::atomic<int>> ran(64);
    std::atomic<bool> worker_ran{false};
    const auto poster = std::this_thread::get_id();
    tf_cpu::parallel_for(64, [&](int64_t t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ran[static_cast<size_t>(t)].fetch_add(1);
        if (std::this_thread::get_id() != poster) worker_ran = true;
    });
    for (auto &r : ran) CHECK(r.load() == 1);
    CHECK(worker_ran.load());
    tf_cpu::runtime_shutdown();
}

TEST_CASE("thread pool: a held-up thread's range is finished by the others") {
    use_threads(2);
    // Task 0 (the front of the poster's range) waits until the 99 others have run: the worker
    // must run its own range and then steal the rest of the poster's from its end. Then the last
    // task (the end of the worker's range) waits for the others: whoever takes it, the other
    // thread must run the rest. Either way every task runs once and the job ends.
    for (int64_t held : {int64_t{0}, int64_t{99}}) {
        CAPTURE(held);
        std::vector<std::atomic<int>> ran(100);
        std::atomic<int> done{0};
        tf_cpu::parallel_for(100, [&](int64_t t) {
            if (t == held) {
                const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                while (done.load() < 99 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
            }
            ran[static_cast<size_t>(t)].fetch_add(1);
            done.fetch_add(1);
        });
        CHECK(done.load() == 100);
        for (auto &r : ran) CHECK(r.load() == 1);
    }
    tf_cpu::runtime_shutdown();
}

TEST_CASE("thread pool: exceptions, nested calls and concurrent callers") {
    use_threads(3);
    SUBCASE("the first exception is rethrown after every task ran") {
        std::atomic<int> ran{0};
        CHECK_THROWS_AS(tf_cpu::parallel_for(50,
                                             [&](int64_t t) {
                                                 ran.fetch_add(1);
                                                 if (t % 7 == 3) throw std::runtime_error("task failed");
                                             }),
                        std::runtime_error);
        CHECK(ran.load() == 50);
        CHECK(run_once_each(100) >= 1);  // the pool still works
    }
    SUBCASE("a nested call runs inline, on the calling task's thread") {
        std::vector<std::atomic<int>> ran(20 * 30);
        std::atomic<int> elsewhere{0};
        tf_cpu::parallel_for(20, [&](int64_t outer) {
            const auto me = std::this_thread::get_id();
            tf_cpu::parallel_for(30, [&](int64_t inner) {
                ran[static_cast<size_t>(outer * 30 + inner)].fetch_add(1);
                if (std::this_thread::get_id() != me) elsewhere.fetch_add(1);
            });
        });
        for (auto &r : ran) CHECK(r.load() == 1);
        CHECK(elsewhere.load() == 0);
    }
    SUBCASE("callers from several threads at once") {
        std::vector<std::thread> callers;
        std::atomic<int> bad{0};
        for (int c = 0; c < 4; ++c)
            callers.emplace_back([&] {
                for (int round = 0; round < 200; ++round) {
                    std::vector<std::atomic<int>> ran(37);
                    tf_cpu::parallel_for(37, [&](int64_t t) { ran[static_cast<size_t>(t)].fetch_add(1); });
                    for (auto &r : ran)
                        if (r.load() != 1) bad.fetch_add(1);
                }
            });
        for (auto &t : callers) t.join();
        CHECK(bad.load() == 0);
    }
    tf_cpu::runtime_shutdown();
}
