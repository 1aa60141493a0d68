// AutocastGuard: which ops run in which dtype inside a scope (output dtypes), nesting and
// turning it off, parameters and their gradients staying f32, gradients against an f32 run, the
// per-backend allow-list (cpu claims bf16 matmul; tests/abi/test_abi10_host.cpp has a backend
// that does not), and a short autocast training run reaching a loss threshold. On the cpu backend.
#include <doctest/doctest.h>

#include <cmath>

#include "../ops/reference.hpp"
#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

const Device cpu{"cpu", 0};

Tensor input(const Shape &shape, uint64_t seed, double lo = -1, double hi = 1) {
    return from_vector(ref::values(ref::numel(shape), seed, lo, hi), shape, cpu);
}

// The relative L2 distance of two f32 tensors.
double rel_error(const Tensor &got, const Tensor &want) {
    std::vector<float> g = got.to(DType::f32).to_vector<float>(), w = want.to(DType::f32).to_vector<float>();
    double num = 0, den = 0;
    for (size_t i = 0; i < g.size(); ++i) {
        num += (g[i] - w[i]) * double(g[i] - w[i]);
        den += double(w[i]) * w[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace

TEST_CASE("the autocast table: each listed op's output dtype inside a bf16 and an f16 scope") {
    set_backend("cpu");
    Tensor x = input({4, 6}, 1), w = input({5, 6}, 2), b = input({5}, 3);
    Tensor img = input({2, 3, 6, 6}, 4), k = input({4, 3, 3, 3}, 5), kb = input({4}, 6);
    Tensor q = input({2, 4, 8}, 7);
    Tensor labels = from_vector(std::vector<int64_t>{0, 4, 2, 1}, {4}, cpu);
    CHECK(!autocast_dtype().has_value());
    CHECK(matmul(x, w.transpose(0, 1)).dtype() == DType::f32);
    for (DType low : {DType::bf16, DType::f16}) {
        CAPTURE(dtype_name(low));
        AutocastGuard scope(low);
        REQUIRE(autocast_dtype() == low);
        // Low precision.
        Tensor y = linear(x, w, b);
        CHECK(y.dtype() == low);
        CHECK(matmul(x, w.transpose(0, 1)).dtype() == low);
        CHECK(conv2d(img, k, kb).dtype() == low);
        CHECK(scaled_dot_product_attention(q, q, q, Tensor(), true).dtype() == low);
        // f32.
        Tensor yl = y.to(low);
        CHECK(softmax(yl).dtype() == DType::f32);
        CHECK(log_softmax(yl).dtype() == DType::f32);
        CHECK(layer_norm(yl, 1, input({5}, 8), input({5}, 9)).dtype() == DType::f32);
        CHECK(rms_norm(yl, 1, input({5}, 10)).dtype() == DType::f32);
        CHECK(sum(yl).dtype() == DType::f32);
        CHECK(mean(yl).dtype() == DType::f32);
        CHECK(var(yl).dtype() == DType::f32);
        CHECK(exp(yl).dtype() == DType::f32);
        CHECK(log(exp(yl)).dtype() == DType::f32);
        CHECK(cross_entropy(yl, labels).dtype() == DType::f32);
        // Widest: a low-precision activation meets an f32 tensor.
        CHECK(add(yl, b).dtype() == DType::f32);
        CHECK(mul(yl, yl).dtype() == low);  // one dtype: left alone
        // Not listed: runs in its input's dtype.
        CHECK(relu(yl).dtype() == low);
        CHECK(tanh(x).dtype() == DType::f32);
    }
    CHECK(!autocast_dtype().has_value());
    CHECK(autocast_policy("matmul") == "lower");
    CHECK(autocast_policy("scaled_dot_product_attention") == "lower");
    CHECK(autocast_policy("softmax") == "f32");
    CHECK(autocast_policy("add") == "widest");
    CHECK(autocast_policy("relu") == "none");
}

TEST_CASE("autocast scopes nest; f32 or a disabled guard turns autocast off inside") {
    set_backend("cpu");
    Tensor x = input({3, 3}, 11);
    {
        AutocastGuard outer(DType::bf16);
        CHECK(matmul(x, x).dtype() == DType::bf16);
        {
            AutocastGuard off(DType::f32);
            CHECK(!autocast_dtype().has_value());
            CHECK(matmul(x, x).dtype() == DType::f32);
            {
                AutocastGuard inner(DType::f16);
                CHECK(matmul(x, x).dtype() == DType::f16);
            }
            CHECK(matmul(x, x).dtype() == DType::f32);
        }
        {
            AutocastGuard disabled(false);
            CHECK(matmul(x, x).dtype() == DType::f32);
        }
        CHECK(autocast_dtype() == DType::bf16);
    }
    CHECK(!autocast_dtype().has_value());
    CHECK_THROWS_AS(AutocastGuard(DType::i32), DTypeError);
}

TEST_CASE("under autocast parameters stay f32, their gradients come back f32 and close to an f32 run") {
    set_backend("cpu");
    nn::Linear l1(12, 16, true, 1), l2(16, 4, true, 2);
    Tensor x = input({8, 12}, 12);
    Tensor labels = from_vector(std::vector<int64_t>{0, 1, 2, 3, 3, 2, 1, 0}, {8}, cpu);
    auto run = [&](std::optional<DType> low) {
        for (Tensor p : {l1.weight, l1.bias, l2.weight, l2.bias}) p.zero_grad();
        Tensor loss;
        {
            std::optional<AutocastGuard> scope;
            if (low) scope.emplace(*low);
            loss = cross_entropy(l2.forward(relu(l1.forward(x))), labels);
            CHECK(loss.dtype() == DType::f32);
            loss.backward();  // inside the scope: backward runs with autocast off
        }
        std::vector<Tensor> grads;
        for (Tensor p : {l1.weight, l1.bias, l2.weight, l2.bias}) {
            CHECK(p.dtype() == DType::f32);
            REQUIRE(p.grad().defined());
            CHECK(p.grad().dtype() == DType::f32);
            grads.push_back(p.grad());
        }
        return std::make_pair(loss.item<float>(), grads);
    };
    const auto [loss32, grads32] = run(std::nullopt);
    for (auto [low, tol] : {std::pair{DType::bf16, 3e-2}, std::pair{DType::f16, 4e-3}}) {
        CAPTURE(dtype_name(low));
        const auto [loss, grads] = run(low);
        CHECK(std::fabs(loss - loss32) <= tol * std::fabs(loss32));
        for (size_t i = 0; i < grads.size(); ++i) {
            CAPTURE(i);
            CHECK(rel_error(grads[i], grads32[i]) <= tol);
        }
    }
}

TEST_CASE("a short bf16 autocast training run reaches the f32 run's loss threshold") {
    set_backend("cpu");
    // Four Gaussian blobs in 8 dimensions, a 2-layer MLP, SGD with momentum.
    const int64_t n = 128;
    std::vector<float> xs(static_cast<size_t>(n * 8));
    std::vector<int64_t> ys(static_cast<size_t>(n));
    const ref::F noise = ref::values(n * 8, 15, -0.6, 0.6);
    for (int64_t i = 0; i < n; ++i) {
        ys[i] = i % 4;
        for (int64_t d = 0; d < 8; ++d) xs[i * 8 + d] = (d % 4 == ys[i] ? 1.5f : 0.0f) + noise[i * 8 + d];
    }
    Tensor x = from_vector(xs, {n, 8}, cpu), y = from_vector(ys, {n}, cpu);
    for (DType low : {DType::bf16, DType::f16}) {
        CAPTURE(dtype_name(low));
        nn::Linear l1(8, 32, true, 3), l2(32, 4, true, 4);
        optim::SGD opt({l1.weight, l1.bias, l2.weight, l2.bias}, 0.1, 0.9);
        nn::GradScaler scaler(nn::GradScaler::Options{.enabled = low == DType::f16});
        float first = 0, last = 0;
        for (int step = 0; step < 60; ++step) {
            opt.zero_grad();
            Tensor loss;
            {
                AutocastGuard scope(low);
                loss = cross_entropy(l2.forward(relu(l1.forward(x))), y);
            }
            scaler.scale(loss).backward();
            scaler.step(opt);
            scaler.update();
            (step == 0 ? first : last) = loss.item<float>();
        }
        CHECK(first > 1.0f);
        CHECK(last < 0.1f);
    }
}
