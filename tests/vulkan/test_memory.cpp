// Buffers, errors and threads of the vulkan (or, built for it, the opengl) plugin through the C++ API: out-of-memory, tensors
// bigger than one storage-buffer binding, buffers freed while in use, data errors found by a
// kernel, concurrent callers; plus what tinyfin-info reports and the submission overhead.
#include "device_parity.hpp"

#include <atomic>
#include <cmath>
#include <chrono>
#include <thread>

using namespace vt;
namespace tf = tinyfin;

namespace {

const tf::DeviceReport &vulkan_device_report() {
    static const tf::Report report = tf::report();
    for (const tf::PluginReport &plugin : report.plugins)
        if (plugin.name == TF_TEST_BACKEND && !plugin.devices.empty()) return plugin.devices[0];
    FAIL("no " TF_TEST_BACKEND " device in tinyfin::report()");
    throw 0;
}

}  // namespace

TEST_CASE("memory: the device as tinyfin-info reports it") {
    const tf::DeviceReport &d = vulkan_device_report();
    MESSAGE(TF_TEST_BACKEND ":0 = " << d.name << " [" << d.kind << "], " << (d.memory_total >> 20) << " MiB total, "
                                    << (d.memory_free >> 20) << " MiB free, uuid " << d.uuid);
    CHECK(!d.name.empty());
    CHECK(d.memory_total > 0);
    CHECK(d.memory_free <= d.memory_total);
    CHECK(!d.host_addressable);
    // Vulkan always has deviceUUID; OpenGL only with GL_EXT_memory_object.
    if (std::string(TF_TEST_BACKEND) == "vulkan" || !d.uuid.empty()) {
        CHECK(d.uuid.size() == 32);
        CHECK(d.uuid.find_first_not_of("0123456789abcdef") == std::string::npos);
    }
    if (d.name.find("llvmpipe") != std::string::npos) CHECK(d.kind == "software-gpu");
}

TEST_CASE("memory: round trips at every offset and size") {
    for (int64_t n : {1, 2, 3, 5, 63, 64, 65, 1000, 70001}) {
        std::vector<float> v = values(n, static_cast<uint64_t>(n));
        Tensor t = tf::from_vector(v, {n}, gpu_device);
        CHECK(t.to_vector<float>() == v);
        // Views starting at odd element offsets read back through contiguous copies.
        if (n > 3) CHECK(t.slice(0, 1, n - 1).to_vector<float>() == std::vector<float>(v.begin() + 1, v.end() - 1));
    }
    std::vector<uint8_t> bits = {1, 0, 0, 1, 1, 1, 0, 1, 0};
    Tensor b = tf::from_host(bits.data(), {9}, DType::boolean, gpu_device);
    std::vector<bool> back = b.slice(0, 1, 9, 3).to_vector<bool>();
    CHECK(back == std::vector<bool>{false, true, true});
    std::vector<int64_t> big = {INT64_MIN, -1, 0, INT64_MAX};
    CHECK(tf::from_vector(big, {4}, gpu_device).to_vector<int64_t>() == big);
}

TEST_CASE("memory: a request larger than the heap is OutOfMemoryError, and the device goes on") {
    const tf::DeviceReport &d = vulkan_device_report();
    const int64_t elements = static_cast<int64_t>(d.memory_total / 4) + (1 << 20);
    try {
        Tensor huge = tf::empty({elements}, DType::f32, gpu_device);
        FAIL("allocating " << elements * 4 << " bytes on a " << d.memory_total << "-byte heap succeeded");
    } catch (const tf::OutOfMemoryError &e) {
        const std::string what = e.what();
        MESSAGE(what);
        CHECK(what.find(TF_TEST_BACKEND) != std::string::npos);
    }
    Pair a = random({100}, 1), b = random({100}, 2);
    check(tf::add(a.vk, b.vk), tf::add(a.cpu, b.cpu), 0, 0, "an op after the failed allocation");
}

TEST_CASE("memory: tensors beyond one binding's range fall back; views inside it run") {
    // 160 MiB: more than lavapipe's maxStorageBufferRange (128 MiB), so no kernel can bind all of
    // it: supports() says no, and under TINYFIN_FALLBACK=error that is a FallbackError.
    // (opencl binds whole buffers of up to 2 GiB: a tensor past that is too big for CI, so there
    // only the views are checked.)
    const int64_t n = 40 * 1024 * 1024;
    Tensor big = tf::empty({n}, DType::f32, gpu_device);
    if (std::string(TF_TEST_BACKEND) != "opencl") CHECK_THROWS_AS(tf::neg(big), tf::FallbackError);
    // Views near either end bind only their own range.
    for (int64_t start : {int64_t{0}, n / 2 + 3, n - 1000}) {
        INFO("view at " << start);
        Tensor view = big.slice(0, start, start + 1000);
        view.assign_(tf::full({1000}, 2.5, DType::f32, gpu_device));
        Tensor doubled = tf::mul(view, tf::scalar_like(view, 2));
        CHECK(doubled.to_vector<float>() == std::vector<float>(1000, 5.0f));
        CHECK(view.to_vector<float>() == std::vector<float>(1000, 2.5f));
    }
}

TEST_CASE("memory: buffers freed while the device still uses them") {
    // Inputs dropped right after the op that reads them: their memory must not be reused by the
    // next allocations before the op ran.
    std::vector<Tensor> results;
    std::vector<std::vector<float>> expected;
    for (int i = 0; i < 50; ++i) {
        std::vector<float> a = values(4099, 500 + static_cast<uint64_t>(i)),
                           b = values(4099, 600 + static_cast<uint64_t>(i));
        Tensor sum;
        {
            Tensor ta = tf::from_vector(a, {4099}, gpu_device), tb = tf::from_vector(b, {4099}, gpu_device);
            sum = tf::add(tf::mul(ta, tb), ta);
        }
        std::vector<float> want(a.size());
        for (std::size_t k = 0; k < a.size(); ++k) want[k] = a[k] * b[k] + a[k];
        results.push_back(sum);
        expected.push_back(want);
    }
    for (std::size_t i = 0; i < results.size(); ++i) CHECK(results[i].to_vector<float>() == expected[i]);
}

TEST_CASE("memory: a label outside its range is an error at the next read, and the device goes on") {
    Tensor logits = tf::from_vector(values(40, 700), {4, 10}, gpu_device);
    Tensor labels = tf::from_vector(std::vector<int64_t>{1, 12, 3, 4}, {4}, gpu_device);
    Tensor loss = tf::cross_entropy(logits, labels);
    try {
        (void)loss.item<float>();
        FAIL("a label of 12 for 10 classes passed");
    } catch (const tf::ValueError &e) {
        const std::string what = e.what();
        MESSAGE(what);
        CHECK(what.find("cross_entropy") != std::string::npos);
    }
    Tensor ok = tf::cross_entropy(logits, tf::from_vector(std::vector<int64_t>{1, 2, 3, 4}, {4}, gpu_device));
    CHECK(std::isfinite(ok.item<float>()));
    Tensor indices = tf::from_vector(std::vector<int32_t>{0, 5}, {2}, gpu_device);
    Tensor rows = tf::embedding(tf::from_vector(values(12, 701), {4, 3}, gpu_device), indices);
    CHECK_THROWS_AS(rows.to_vector<float>(), tf::ValueError);
    CHECK_NOTHROW(tf::synchronize());
}

TEST_CASE("memory: several threads at once") {
    constexpr int threads = 4, rounds = 150;
    std::atomic<int> failures{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([t, &failures] {
            try {
                std::vector<float> v = values(513, 800 + static_cast<uint64_t>(t));
                Tensor x = tf::from_vector(v, {513}, gpu_device);
                Tensor acc = tf::zeros({513}, DType::f32, gpu_device);
                for (int r = 0; r < rounds; ++r) acc = tf::add(acc, tf::mul(x, tf::scalar_like(x, 0.5)));
                std::vector<float> got = acc.to_vector<float>();
                for (std::size_t i = 0; i < v.size(); ++i) {
                    float want = 0;
                    for (int r = 0; r < rounds; ++r) want += v[i] * 0.5f;
                    if (got[i] != want) {
                        ++failures;
                        return;
                    }
                }
            } catch (...) {
                ++failures;
            }
        });
    }
    for (std::thread &th : pool) th.join();
    CHECK(failures.load() == 0);
}

TEST_CASE("memory: submission overhead of tiny ops") {
    Tensor a = tf::from_vector(values(4, 900), {4}, gpu_device), b = tf::from_vector(values(4, 901), {4}, gpu_device);
    Tensor warm = tf::add(a, b);
    tf::synchronize();
    constexpr int n = 1000;
    const auto start = std::chrono::steady_clock::now();
    std::vector<Tensor> keep;
    keep.reserve(n);
    for (int i = 0; i < n; ++i) keep.push_back(tf::add(a, b));
    const auto recorded = std::chrono::steady_clock::now();
    tf::synchronize();
    const auto done = std::chrono::steady_clock::now();
    const double record_us = std::chrono::duration<double, std::micro>(recorded - start).count() / n;
    const double total_us = std::chrono::duration<double, std::micro>(done - start).count() / n;
    MESSAGE(n << " tiny adds: " << record_us << " us/op to record, " << total_us << " us/op including execution");
    CHECK(keep.back().to_vector<float>() == warm.to_vector<float>());
}
