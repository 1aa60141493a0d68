// Short training runs on small synthetic problems; each must reach a stated loss.
#include <doctest/doctest.h>

#include <cmath>

#include "tinyfin/nn.hpp"

using namespace tinyfin;
using F = std::vector<float>;

TEST_CASE("an MLP learns XOR with cross_entropy and AdamW (loss < 0.05, all correct)") {
    Tensor x = from_vector<float>({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2});
    Tensor y = from_vector<int64_t>({0, 1, 1, 0}, {4});
    nn::Sequential mlp{std::make_shared<nn::Linear>(2, 16, true, 1), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(16, 2, true, 2)};
    optim::AdamW opt(mlp.parameters(), 0.05);
    float first = 0, last = 0;
    for (int step = 0; step < 300; ++step) {
        opt.zero_grad();
        Tensor loss = cross_entropy(mlp(x), y);
        loss.backward();
        opt.step();
        last = loss.item<float>();
        if (step == 0) first = last;
    }
    MESSAGE("XOR cross-entropy: " << first << " -> " << last);
    CHECK(last < 0.05f);
    NoGradGuard no_grad;
    CHECK(argmax(mlp(x), 1).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0});
}

TEST_CASE("two separable blobs: SGD with momentum on an MLP (loss < 0.02)") {
    // 64 points per class around (-1, -1) and (1, 1) with spread 0.3.
    const int n = 128;
    Tensor noise = randn({n, 2}, 17) * 0.3;
    F centres(2 * n), labels(n);
    for (int i = 0; i < n; ++i) {
        float c = i < n / 2 ? -1.0f : 1.0f;
        centres[2 * i] = centres[2 * i + 1] = c;
        labels[i] = i < n / 2 ? 0.0f : 1.0f;
    }
    Tensor x = from_vector(centres, {n, 2}) + noise;
    Tensor y = from_vector(labels, {n, 1});
    nn::Sequential mlp{std::make_shared<nn::Linear>(2, 8, true, 3), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(8, 1, true, 4)};
    optim::SGD opt(mlp.parameters(), 0.1, 0.9);
    float last = 0;
    for (int step = 0; step < 200; ++step) {
        opt.zero_grad();
        // Mean squared error against the 0/1 label: only basic ops.
        Tensor d = mlp(x) - y;
        Tensor loss = mean(d * d);
        loss.backward();
        opt.step();
        last = loss.item<float>();
    }
    MESSAGE("blobs MSE after 200 steps: " << last);
    CHECK(last < 0.02f);
}

TEST_CASE("a tiny CNN fits a batch of random images (cross_entropy falls by 90%)") {
    Tensor x = randn({16, 1, 8, 8}, 21);
    std::vector<int64_t> y_values(16);
    for (int i = 0; i < 16; ++i) y_values[i] = i % 4;
    Tensor y = from_vector(y_values, {16});
    Conv2dOptions pad1;
    pad1.pad_h = pad1.pad_w = 1;
    nn::Sequential cnn{std::make_shared<nn::Conv2d>(1, 4, 3, pad1, true, 5), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
                       std::make_shared<nn::Linear>(4 * 4 * 4, 4, true, 6)};
    optim::AdamW opt(cnn.parameters(), 0.01);
    float first = 0, last = 0;
    for (int step = 0; step < 150; ++step) {
        opt.zero_grad();
        Tensor loss = cross_entropy(cnn(x), y);
        loss.backward();
        opt.step();
        last = loss.item<float>();
        if (step == 0) first = last;
    }
    MESSAGE("CNN memorisation: " << first << " -> " << last);
    CHECK(last < 0.1f * first);
}
