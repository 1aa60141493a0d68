// Modules: shapes, parameter names and counts, forward values, train/eval, dropout.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tinyfin/nn.hpp"

using namespace tinyfin;
using F = std::vector<float>;

namespace {

std::vector<std::string> names_of(const nn::Module &m) {
    std::vector<std::string> names;
    for (const auto &[name, tensor] : m.named_parameters()) names.push_back(name);
    return names;
}

// The reference CNN of shared/peers/torch_fmnist.py.
std::shared_ptr<nn::Sequential> fmnist_cnn() {
    Conv2dOptions pad1;
    pad1.pad_h = pad1.pad_w = 1;
    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Conv2d>(1, 32, 3, pad1, true, 1));
    model->push_back(std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::MaxPool2d>(2));
    model->push_back(std::make_shared<nn::Conv2d>(32, 64, 3, pad1, true, 2));
    model->push_back(std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::MaxPool2d>(2));
    model->push_back(std::make_shared<nn::Flatten>());
    model->push_back(std::make_shared<nn::Linear>(64 * 7 * 7, 128, true, 3));
    model->push_back(std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::Linear>(128, 10, true, 4));
    return model;
}

}  // namespace

TEST_CASE("Linear: shapes, names, count and x W^T + b") {
    nn::Linear fc(4, 3, true, 7);
    CHECK(fc.weight.shape() == Shape{3, 4});
    CHECK(fc.bias.shape() == Shape{3});
    CHECK(fc.parameter_count() == 15);
    CHECK(names_of(fc) == std::vector<std::string>{"weight", "bias"});
    CHECK(fc.weight.requires_grad());
    CHECK(fc.bias.requires_grad());
    CHECK(fc.describe() == "Linear(4, 3, bias=true)");

    F x = {1, 2, 3, 4, -1, 0.5f, 0, 2};
    Tensor y = fc(from_vector(x, {2, 4}));
    REQUIRE(y.shape() == Shape{2, 3});
    F w = fc.weight.to_vector<float>(), b = fc.bias.to_vector<float>(), got = y.to_vector<float>();
    for (int n = 0; n < 2; ++n)
        for (int o = 0; o < 3; ++o) {
            double expect = b[o];
            for (int i = 0; i < 4; ++i) expect += double(x[n * 4 + i]) * w[o * 4 + i];
            CHECK(got[n * 3 + o] == doctest::Approx(expect).epsilon(1e-5));
        }

    nn::Linear no_bias(4, 3, false);
    CHECK_FALSE(no_bias.bias.defined());
    CHECK(no_bias.parameter_count() == 12);
    CHECK(names_of(no_bias) == std::vector<std::string>{"weight"});
    CHECK(no_bias(zeros({5, 4})).to_vector<float>() == F(15, 0.0f));

    // Leading batch axes pass through.
    CHECK(fc(zeros({2, 5, 4})).shape() == Shape{2, 5, 3});
    CHECK_THROWS_AS(fc(zeros({2, 5})), ShapeError);
    CHECK_THROWS_AS(nn::Linear(0, 3), ValueError);
}

TEST_CASE("Linear: gradients reach weight and bias") {
    nn::Linear fc(3, 2, true, 1);
    Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    sum(fc(x)).backward();
    REQUIRE(fc.weight.grad().defined());
    // d sum(x W^T + b) / dW[o, i] = sum_n x[n, i]; / db[o] = N.
    CHECK(fc.weight.grad().to_vector<float>() == F{5, 7, 9, 5, 7, 9});
    CHECK(fc.bias.grad().to_vector<float>() == F{2, 2});
    fc.zero_grad();
    CHECK_FALSE(fc.weight.grad().defined());
}

TEST_CASE("Linear: its own backward matches transpose + matmul, weight gradient dense, input gradient too") {
    // Rank-2 inputs take Linear's single node (dW = g^T x); the same gradients as differentiating
    // x W^T through transpose and matmul, and the weight's gradient is a dense tensor of its own.
    nn::Linear fc(5, 3, true, 2);
    Tensor x =
        from_vector<float>({0.5f, -1, 2, 0.25f, 3, -2, 1, 0, 1.5f, -0.5f, 4, -3, 2, 1, 0.75f}, {3, 5}).requires_grad_();
    Tensor y = fc(x);
    Tensor seed = from_vector<float>({1, -2, 0.5f, 3, 0.25f, -1, 2, 1, -0.5f}, {3, 3});
    y.backward(seed);
    Tensor w = fc.weight.detach().requires_grad_(), xr = x.detach().requires_grad_();
    add(matmul(xr, w.transpose(0, 1)), fc.bias.detach()).backward(seed);
    CHECK(fc.weight.grad().is_contiguous());
    CHECK(fc.weight.grad().to_vector<float>() == w.grad().to_vector<float>());
    CHECK(x.grad().to_vector<float>() == xr.grad().to_vector<float>());
    CHECK(y.to_vector<float>() == add(matmul(xr, w.transpose(0, 1)), fc.bias.detach()).to_vector<float>());
}

TEST_CASE("Conv2d and MaxPool2d: shapes and parameter layout") {
    Conv2dOptions pad1;
    pad1.pad_h = pad1.pad_w = 1;
    nn::Conv2d conv(3, 8, 3, pad1, true, 5);
    CHECK(conv.weight.shape() == Shape{8, 3, 3, 3});
    CHECK(conv.bias.shape() == Shape{8});
    CHECK(conv.parameter_count() == 8 * 3 * 9 + 8);
    CHECK(conv(zeros({2, 3, 10, 12})).shape() == Shape{2, 8, 10, 12});

    Conv2dOptions strided;
    strided.stride_h = strided.stride_w = 2;
    nn::Conv2d conv2(3, 4, 3, strided, false);
    CHECK_FALSE(conv2.bias.defined());
    CHECK(conv2(zeros({1, 3, 9, 9})).shape() == Shape{1, 4, 4, 4});

    nn::MaxPool2d pool(2);
    CHECK(pool(zeros({2, 3, 8, 6})).shape() == Shape{2, 3, 4, 3});
    nn::MaxPool2d pool3(3, 1);
    CHECK(pool3(zeros({1, 1, 5, 5})).shape() == Shape{1, 1, 3, 3});
    CHECK_THROWS_AS(nn::Conv2d(3, 4, 3, Conv2dOptions{1, 1, 0, 0, 1, 1, 2}), ValueError);
}

TEST_CASE("Conv2d with a rectangular kernel: weight layout, PyTorch's init bound, output shape") {
    nn::Conv2d conv(3, 4, {2, 5}, {}, true, 7);
    CHECK(conv.weight.shape() == Shape{4, 3, 2, 5});
    // U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = 3 * 2 * 5 (torch.nn.Conv2d's default)
    const double bound = 1 / std::sqrt(30.0);
    double largest = 0;
    for (float v : conv.weight.to_vector<float>()) largest = std::max(largest, std::abs(static_cast<double>(v)));
    CHECK(largest <= bound);
    CHECK(largest > bound / 2);
    CHECK(conv(zeros({1, 3, 6, 9})).shape() == Shape{1, 4, 5, 5});
    CHECK(conv.describe().find("kernel=2x5") != std::string::npos);
    CHECK_THROWS_AS(nn::Conv2d(3, 4, {0, 3}), ValueError);
}

TEST_CASE("Conv2d with a 1x1 kernel and bias computes the channel mix") {
    nn::Conv2d conv(2, 1, 1, {}, true, 9);
    F w = conv.weight.to_vector<float>(), b = conv.bias.to_vector<float>();
    Tensor x = from_vector<float>({1, 2, 3, 4, 10, 20, 30, 40}, {1, 2, 2, 2});
    F y = conv(x).to_vector<float>();
    for (int i = 0; i < 4; ++i)
        CHECK(y[i] == doctest::Approx(w[0] * (i + 1) + w[1] * 10 * (i + 1) + b[0]).epsilon(1e-5));
}

TEST_CASE("the Fashion-MNIST CNN has torch_fmnist.py's 421,642 parameters and stable names") {
    auto model = fmnist_cnn();
    CHECK(model->parameter_count() == 421642);
    CHECK(names_of(*model) == std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias",
                                                       "9.weight", "9.bias"});
    CHECK(model->size() == 10);
    CHECK((*model)[7].describe() == "Linear(3136, 128, bias=true)");
    Tensor logits = (*model)(randn({3, 1, 28, 28}, 11));
    CHECK(logits.shape() == Shape{3, 10});
    // A whole backward: every parameter gets a gradient of its own shape.
    sum(logits).backward();
    for (const auto &[name, p] : model->named_parameters()) {
        INFO(name);
        REQUIRE(p.grad().defined());
        CHECK(p.grad().shape() == p.shape());
    }
}

TEST_CASE("Sequential: nested names, initializer list, index errors") {
    auto inner = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::ReLU>()});
    nn::Sequential outer{std::make_shared<nn::Linear>(3, 2), inner, std::make_shared<nn::Linear>(2, 1)};
    CHECK(names_of(outer) ==
          std::vector<std::string>{"0.weight", "0.bias", "1.0.weight", "1.0.bias", "2.weight", "2.bias"});
    CHECK(outer.parameters().size() == 6);
    CHECK(outer(zeros({4, 3})).shape() == Shape{4, 1});
    CHECK_THROWS_AS(outer[3], ValueError);
    CHECK(outer.describe().find("(1): Sequential(") != std::string::npos);
}

TEST_CASE("Flatten, ReLU, GELU") {
    nn::Flatten flatten;
    CHECK(flatten(zeros({2, 3, 4, 5})).shape() == Shape{2, 60});
    nn::Flatten middle(1, 2);
    CHECK(middle(zeros({2, 3, 4, 5})).shape() == Shape{2, 12, 5});
    CHECK_THROWS_AS(nn::Flatten(2, 1)(zeros({2, 3, 4})), ShapeError);

    nn::ReLU relu_layer;
    CHECK(relu_layer(from_vector<float>({-1, 0, 2}, {3})).to_vector<float>() == F{0, 0, 2});

    F x = {-2, -0.5f, 0, 1, 3};
    F exact = nn::GELU()(from_vector(x, {5})).to_vector<float>();
    F approx = nn::GELU(true)(from_vector(x, {5})).to_vector<float>();
    for (std::size_t i = 0; i < x.size(); ++i) {
        double v = x[i];
        CHECK(exact[i] == doctest::Approx(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))).epsilon(1e-5));
        double inner = std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v);
        CHECK(approx[i] == doctest::Approx(0.5 * v * (1 + std::tanh(inner))).epsilon(1e-5));
    }
}

TEST_CASE("Dropout: identity in eval, scaled mask in train, deterministic per seed and call") {
    Tensor x = ones({100, 100});
    nn::Dropout drop(0.25, 42);
    F a = drop(x).to_vector<float>();
    F b = drop(x).to_vector<float>();
    int zeros_a = 0;
    for (float v : a) {
        bool ok = v == 0.0f || v == doctest::Approx(1 / 0.75);
        CHECK(ok);
        zeros_a += v == 0.0f;
    }
    CHECK(zeros_a > 2250);
    CHECK(zeros_a < 2750);
    CHECK(a != b);  // a new mask each call

    nn::Dropout again(0.25, 42);
    CHECK(again(x).to_vector<float>() == a);
    CHECK(again(x).to_vector<float>() == b);

    drop.eval();
    CHECK_FALSE(drop.is_training());
    CHECK(drop(x).shares_storage(x));
    drop.train();
    CHECK(drop.is_training());

    CHECK(nn::Dropout(0.0)(x).to_vector<float>() == x.to_vector<float>());
    CHECK(nn::Dropout(1.0)(x).to_vector<float>() == F(10000, 0.0f));
    CHECK_THROWS_AS(nn::Dropout(1.5), ValueError);

    // The gradient is the same mask, scaled.
    Tensor p = ones({1000}).requires_grad_();
    nn::Dropout grad_drop(0.5, 3);
    Tensor y = grad_drop(p);
    sum(y).backward();
    CHECK(p.grad().to_vector<float>() == y.detach().to_vector<float>());
}

TEST_CASE("train/eval reach every child; to() keeps parameters and requires_grad") {
    auto drop = std::make_shared<nn::Dropout>(0.5);
    nn::Sequential model{std::make_shared<nn::Linear>(2, 2), drop};
    model.eval();
    CHECK_FALSE(drop->is_training());
    model.train();
    CHECK(drop->is_training());

    Tensor before = model.parameters()[0];
    model.to(default_device());
    CHECK(model.parameters()[0].shares_storage(before));
    model.to(Device::parse("cpu"));
    for (const Tensor &p : model.parameters()) {
        CHECK(p.requires_grad());
        CHECK(p.device() == Device::parse("cpu"));
    }
}
