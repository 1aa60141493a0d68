// The device half of the op tests (tests/ops/test_<family>.cpp, suite "device") and of the GPU
// backends' own tests (tests/vulkan, tests/opengl, tests/opencl): the same op on cpu tensors and on
// the backend under test's tensors, compared element by element. The cpu plugin's results are
// held to host references by the family's other cases; these hold every backend to the cpu's.
// The runs set TINYFIN_FALLBACK=error, so an op the backend does not run itself fails the test
// instead of passing on cpu.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "reference.hpp"
#include "tinyfin/tinyfin.hpp"

namespace vt {

using tinyfin::Device;
using tinyfin::DType;
using tinyfin::Shape;
using tinyfin::Tensor;

inline const Device cpu_device{"cpu", 0};

// The backend under test: TF_TEST_BACKEND where a backend's own tests are built for one, else
// TINYFIN_BACKEND (the ops-<family>-<backend> runs of tests/ops).
inline std::string backend_under_test() {
#ifdef TF_TEST_BACKEND
    return TF_TEST_BACKEND;
#else
    const char *name = std::getenv("TINYFIN_BACKEND");
    return name && *name ? name : "cpu";
#endif
}
inline const Device gpu_device{backend_under_test(), 0};

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float qnan = std::numeric_limits<float>::quiet_NaN();

// Element counts and the splitmix64-driven inputs are the host references' (reference.hpp).
using ref::numel;
using ref::values;

// One operand on both devices, with the same contents.
struct Pair {
    Tensor cpu, vk;
};

template <class T>
Pair both(const std::vector<T> &v, const Shape &shape) {
    return {tinyfin::from_vector(v, shape, cpu_device), tinyfin::from_vector(v, shape, gpu_device)};
}

inline Pair random(const Shape &shape, uint64_t seed, double lo = -1, double hi = 1) {
    return both(values(numel(shape), seed, lo, hi), shape);
}

// Integers in [lo, hi) of dtype T.
template <class T>
Pair integers(const Shape &shape, uint64_t seed, int64_t lo, int64_t hi) {
    std::vector<float> f = values(numel(shape), seed, 0, 1);
    std::vector<T> v(f.size());
    for (std::size_t i = 0; i < f.size(); ++i)
        v[i] = static_cast<T>(lo + static_cast<int64_t>(f[i] * static_cast<float>(hi - lo)));
    return both(v, shape);
}

inline Pair booleans(const Shape &shape, uint64_t seed) {
    std::vector<float> f = values(numel(shape), seed, 0, 1);
    std::vector<uint8_t> v(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) v[i] = f[i] < 0.5f;
    return {tinyfin::from_host(v.data(), shape, DType::boolean, cpu_device),
            tinyfin::from_host(v.data(), shape, DType::boolean, gpu_device)};
}

// Row-major elements of any dtype as doubles.
inline std::vector<double> host(const Tensor &t) {
    switch (t.dtype()) {
    case DType::f32: {
        auto v = t.to_vector<float>();
        return {v.begin(), v.end()};
    }
    case DType::i32: {
        auto v = t.to_vector<int32_t>();
        return {v.begin(), v.end()};
    }
    case DType::i64: {
        auto v = t.to_vector<int64_t>();
        return {v.begin(), v.end()};
    }
    case DType::boolean: {
        auto v = t.to_vector<bool>();
        return {v.begin(), v.end()};
    }
    default: FAIL("unexpected dtype " << tinyfin::dtype_name(t.dtype())); return {};
    }
}

inline bool close(double got, double want, double atol, double rtol) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return got == want;
    return std::abs(got - want) <= atol + rtol * std::abs(want);
}

// got (computed on the backend) against want (computed on cpu): device, dtype, shape, every element.
inline void check(const Tensor &got, const Tensor &want, double atol, double rtol, const std::string &what) {
    INFO(what);
    REQUIRE(got.defined());
    CHECK(got.device() == gpu_device);
    CHECK(want.device() == cpu_device);
    REQUIRE(got.dtype() == want.dtype());
    REQUIRE(got.shape() == want.shape());
    const std::vector<double> g = host(got), w = host(want);
    int64_t bad = 0, first = -1;
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (close(g[i], w[i], atol, rtol)) continue;
        if (first < 0) first = static_cast<int64_t>(i);
        ++bad;
    }
    if (bad > 0) {
        char text[256];
        std::snprintf(text, sizeof text, "%lld of %zu elements differ; first at %lld: %s %.9g, cpu %.9g",
                      static_cast<long long>(bad), g.size(), static_cast<long long>(first),
                      backend_under_test().c_str(), g[first], w[first]);
        FAIL_CHECK(text);
    }
}

// Values with the edge cases of float math mixed in.
inline Pair specials(const Shape &shape) {
    std::vector<float> v = values(numel(shape), 5, -4, 4);
    const float edge[] = {0.0f, -0.0f, inf, -inf, qnan, 1.0f, -1.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 0.5f};
    for (std::size_t i = 0; i < v.size(); i += 3) v[i] = edge[(i / 3) % (sizeof edge / sizeof edge[0])];
    return both(v, shape);
}

struct Tolerance {
    double atol = 1e-6;
    double rtol = 1e-5;
};

// f on the cpu operands and on the backend's operands; results compared.
template <class F>
void parity(const std::string &what, const std::vector<Pair> &operands, F &&f, Tolerance tol = {}) {
    std::vector<Tensor> a, b;
    for (const Pair &p : operands) {
        a.push_back(p.cpu);
        b.push_back(p.vk);
    }
    Tensor want = f(a);
    Tensor got = f(b);
    check(got, want, tol.atol, tol.rtol, what);
}

// f through autograd on both devices: the output and every operand's gradient for the loss
// sum(f(x) * r), r fixed random weights of the output's shape.
template <class F>
void grad_parity(const std::string &what, const std::vector<Pair> &operands, F &&f, Tolerance tol = {}) {
    std::vector<Tensor> results[2];
    std::vector<Tensor> leaves[2];
    for (int side = 0; side < 2; ++side) {
        const Device &device = side == 0 ? cpu_device : gpu_device;
        for (const Pair &p : operands) {
            // Float operands are parameters; others (labels, indices) go in as they are.
            Tensor leaf = (side == 0 ? p.cpu : p.vk).detach();
            if (leaf.dtype() == DType::f32) leaf.requires_grad_();
            leaves[side].push_back(leaf);
        }
        Tensor out = f(leaves[side]);
        Tensor weights = tinyfin::from_vector(values(out.numel(), 977, -1, 1), out.shape(), device);
        tinyfin::sum(tinyfin::mul(out, weights)).backward();
        results[side].push_back(out.detach());
        for (const Tensor &leaf : leaves[side])
            if (leaf.requires_grad()) results[side].push_back(leaf.grad());
    }
    check(results[1][0], results[0][0], tol.atol, tol.rtol, what + ": forward");
    for (std::size_t i = 1; i < results[0].size(); ++i)
        check(results[1][i], results[0][i], tol.atol, tol.rtol, what + ": gradient " + std::to_string(i));
}

// A small network's worth of ops on one device: conv, pool, matmul, softmax.
inline Tensor chain(const Device &device, uint64_t seed) {
    Tensor x = tinyfin::from_vector(values(2 * 3 * 9 * 9, seed), {2, 3, 9, 9}, device);
    Tensor w = tinyfin::from_vector(values(4 * 3 * 3 * 3, seed + 1), {4, 3, 3, 3}, device);
    Tensor b = tinyfin::from_vector(values(4, seed + 2), {4}, device);
    tinyfin::Conv2dOptions pad1;
    pad1.pad_h = pad1.pad_w = 1;
    Tensor h = tinyfin::max_pool2d(tinyfin::relu(tinyfin::conv2d(x, w, b, pad1)));
    h = h.reshape({2, -1});
    Tensor fc = tinyfin::from_vector(values(h.size(1) * 7, seed + 3), {h.size(1), 7}, device);
    return tinyfin::softmax(tinyfin::matmul(h, fc), -1);
}

// Two threads each run chain() `rounds` times on the device under test at once: how many of them
// saw a result other than the cpu's, or an exception.
inline int threads_disagreeing_with_cpu(int rounds) {
    std::vector<std::vector<double>> want;
    for (int t = 0; t < 2; ++t) want.push_back(host(chain(cpu_device, 100 + static_cast<uint64_t>(t))));
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
        threads.emplace_back([t, rounds, &want, &failures] {
            try {
                for (int r = 0; r < rounds; ++r) {
                    const std::vector<double> got = host(chain(gpu_device, 100 + static_cast<uint64_t>(t)));
                    for (std::size_t i = 0; i < got.size(); ++i)
                        if (!close(got[i], want[static_cast<std::size_t>(t)][i], 1e-5, 1e-4)) {
                            ++failures;
                            return;
                        }
                }
            } catch (...) {
                ++failures;
            }
        });
    }
    for (std::thread &th : threads) th.join();
    return failures.load();
}

}  // namespace vt
