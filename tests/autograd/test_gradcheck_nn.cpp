// Finite-difference gradient checks of the neural-network ops: conv2d (stride,
// padding, dilation, groups, bias), pooling, softmax, log_softmax, layer_norm,
// rms_norm, rope, attention (q, k, v, mask; causal), embedding, cross_entropy.
#include "gradcheck.hpp"

using namespace tinyfin;
using gradcheck::Input;
using gradcheck::Layout;
using V = std::vector<Tensor>;

TEST_CASE("gradcheck conv2d: x, weight and bias under every option") {
    struct Case {
        const char *name;
        Shape sx, sw;
        Conv2dOptions o;
    };
    std::vector<Case> cases{
        {"plain", {1, 2, 5, 5}, {3, 2, 3, 3}, {}},
        {"stride 2, padding 1", {1, 2, 5, 5}, {2, 2, 3, 3}, {2, 2, 1, 1, 1, 1, 1}},
        {"dilation 2, asymmetric padding", {1, 2, 5, 6}, {2, 2, 2, 3}, {1, 1, 1, 2, 2, 2, 1}},
        {"groups 2", {1, 4, 3, 4}, {4, 2, 2, 2}, {1, 1, 0, 1, 1, 1, 2}},
        {"depthwise, stride 2x1", {2, 3, 3, 3}, {3, 1, 2, 2}, {2, 1, 1, 0, 1, 1, 3}},
        {"everything", {1, 4, 4, 5}, {2, 2, 2, 2}, {2, 1, 1, 1, 2, 1, 2}},
    };
    uint64_t seed = 600;
    for (const Case &c : cases) {
        Input x = gradcheck::random(c.sx, seed++), w = gradcheck::random(c.sw, seed++);
        Input b = gradcheck::random({c.sw[0]}, seed++);
        Conv2dOptions o = c.o;
        gradcheck::check(std::string("conv2d ") + c.name, [o](const V &v) { return conv2d(v[0], v[1], v[2], o); },
                         {x, w, b});
    }
    // non-contiguous input (NHWC permuted) and weight without bias
    gradcheck::check(
        "conv2d of a permuted input",
        [](const V &v) {
            return conv2d(v[0].permute({0, 3, 1, 2}), v[1]);
        },
        {gradcheck::random({1, 4, 4, 2}, 650), gradcheck::random({2, 2, 2, 2}, 651, -1, 1, Layout::transposed)});
}

TEST_CASE("gradcheck max_pool2d and avg_pool2d") {
    struct Case {
        const char *name;
        Shape sx;
        Pool2dOptions o;
    };
    std::vector<Case> cases{
        {"2x2", {1, 2, 4, 4}, {}},
        {"3x3 stride 1 padding 1 (overlapping)", {1, 1, 4, 5}, {3, 3, 1, 1, 1, 1, true}},
        {"3x2 stride 2x1 padding 1x0, pad not counted", {2, 1, 5, 4}, {3, 2, 2, 1, 1, 0, false}},
    };
    uint64_t seed = 700;
    for (const Case &c : cases) {
        Pool2dOptions o = c.o;
        gradcheck::check(std::string("max_pool2d ") + c.name, [o](const V &v) { return max_pool2d(v[0], o); },
                         {gradcheck::spaced(c.sx, seed++)});
        gradcheck::check(std::string("avg_pool2d ") + c.name, [o](const V &v) { return avg_pool2d(v[0], o); },
                         {gradcheck::random(c.sx, seed++)});
    }
    gradcheck::check("max_pool2d of a transposed leaf", [](const V &v) { return max_pool2d(v[0]); },
                     {gradcheck::spaced({1, 2, 4, 4}, 720, 0.05, Layout::transposed)});
    gradcheck::check("avg_pool2d of a strided leaf",
                     [](const V &v) {
                         return avg_pool2d(v[0], {2, 2, 1, 1});
                     },
                     {gradcheck::random({1, 2, 3, 4}, 721, -1, 1, Layout::strided)});
}

TEST_CASE("gradcheck softmax and log_softmax") {
    for (int axis : {0, 1, -1}) {
        Input in = gradcheck::random({3, 4, 2}, 800 + axis, -2, 2);
        gradcheck::check("softmax axis " + std::to_string(axis), [axis](const V &v) { return softmax(v[0], axis); },
                         {in});
        gradcheck::check("log_softmax axis " + std::to_string(axis),
                         [axis](const V &v) { return log_softmax(v[0], axis); }, {in});
    }
    gradcheck::check("softmax of a transposed leaf", [](const V &v) { return softmax(v[0]); },
                     {gradcheck::random({3, 4}, 810, -2, 2, Layout::transposed)});
    gradcheck::check("log_softmax of a strided leaf", [](const V &v) { return log_softmax(v[0], 0); },
                     {gradcheck::random({3, 4}, 811, -2, 2, Layout::strided)});
}

TEST_CASE("gradcheck layer_norm and rms_norm: x, weight, bias") {
    gradcheck::check(
        "layer_norm x, weight, bias", [](const V &v) { return layer_norm(v[0], 1, v[1], v[2]); },
        {gradcheck::random({3, 5}, 900, -2, 2), gradcheck::random({5}, 901, 0.5, 1.5), gradcheck::random({5}, 902)});
    gradcheck::check("layer_norm over two axes", [](const V &v) { return layer_norm(v[0], 2, v[1], v[2]); },
                     {gradcheck::random({2, 3, 4}, 903, -2, 2), gradcheck::random({3, 4}, 904, 0.5, 1.5),
                      gradcheck::random({3, 4}, 905)});
    gradcheck::check("layer_norm without affine, transposed", [](const V &v) { return layer_norm(v[0], 1); },
                     {gradcheck::random({4, 5}, 906, -2, 2, Layout::transposed)});
    gradcheck::check("layer_norm weight only", [](const V &v) { return layer_norm(v[0], 1, v[1]); },
                     {gradcheck::random({3, 4}, 907, -2, 2), gradcheck::random({4}, 908)});
    gradcheck::check("rms_norm x, weight", [](const V &v) { return rms_norm(v[0], 1, v[1]); },
                     {gradcheck::random({3, 5}, 910, -2, 2), gradcheck::random({5}, 911, 0.5, 1.5)});
    gradcheck::check("rms_norm over two axes, strided", [](const V &v) { return rms_norm(v[0], 2, v[1], 1e-3); },
                     {gradcheck::random({2, 3, 4}, 912, -2, 2, Layout::strided), gradcheck::random({3, 4}, 913)});
    gradcheck::check("rms_norm without weight", [](const V &v) { return rms_norm(v[0], 1); },
                     {gradcheck::random({4, 3}, 914, -2, 2)});
}

TEST_CASE("gradcheck rope in both layouts") {
    for (bool interleaved : {false, true}) {
        std::string layout = interleaved ? " interleaved" : " half-split";
        gradcheck::check("rope" + layout, [interleaved](const V &v) { return rope(v[0], 10000.0, interleaved); },
                         {gradcheck::random({2, 3, 4}, 1000 + interleaved)});
        gradcheck::check("rope offset 5, theta 100" + layout,
                         [interleaved](const V &v) { return rope(v[0], 100.0, interleaved, 5); },
                         {gradcheck::random({2, 3, 6}, 1002 + interleaved, -1, 1, Layout::transposed)});
    }
}

TEST_CASE("gradcheck scaled_dot_product_attention: q, k, v, mask; causal") {
    Input q = gradcheck::random({2, 3, 4}, 1100), k = gradcheck::random({2, 4, 4}, 1101);
    Input v = gradcheck::random({2, 4, 3}, 1102), mask = gradcheck::random({3, 4}, 1103);
    gradcheck::check("attention q, k, v", [](const V &x) { return scaled_dot_product_attention(x[0], x[1], x[2]); },
                     {q, k, v});
    gradcheck::check("attention with a broadcast mask",
                     [](const V &x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); }, {q, k, v, mask});
    gradcheck::check("attention causal, Tq < Tk, scale 0.7",
                     [](const V &x) { return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), true, 0.7); },
                     {q, k, v});
    gradcheck::check("attention causal with mask",
                     [](const V &x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3], true); },
                     {q, k, v, mask});
    gradcheck::check(
        "attention with a per-batch mask and transposed q",
        [](const V &x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); },
        {gradcheck::random({2, 3, 4}, 1104, -1, 1, Layout::transposed), k, v, gradcheck::random({2, 1, 4}, 1105)});
    gradcheck::check("attention with k, v shared across the batch",
                     [](const V &x) { return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), true); },
                     {gradcheck::random({2, 3, 3, 2}, 1106), gradcheck::random({1, 3, 3, 2}, 1107),
                      gradcheck::random({1, 3, 3, 2}, 1108)});
}

TEST_CASE("gradcheck embedding (weight) and cross_entropy (logits)") {
    Tensor idx = from_vector(std::vector<int64_t>{4, 0, 2, 2, 1, 4}, {2, 3});
    gradcheck::check("embedding, repeated indices", [&](const V &v) { return embedding(v[0], idx); },
                     {gradcheck::random({6, 3}, 1200)});
    Tensor idx32 = from_vector(std::vector<int32_t>{3, 3, 0}, {3});
    gradcheck::check("embedding, i32 indices, transposed weight", [&](const V &v) { return embedding(v[0], idx32); },
                     {gradcheck::random({5, 3}, 1201, -1, 1, Layout::transposed)});
    Tensor labels = from_vector(std::vector<int64_t>{2, 0, 4, 1}, {4});
    Tensor ignored = from_vector(std::vector<int64_t>{2, -100, 4, -100}, {4});
    Tensor custom = from_vector(std::vector<int32_t>{2, 3, 3, 0}, {4});
    for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
        std::string name = " reduction " + std::to_string(static_cast<int>(r));
        Input logits = gradcheck::random({4, 5}, 1210 + static_cast<int>(r), -2, 2);
        gradcheck::check("cross_entropy" + name, [&](const V &v) { return cross_entropy(v[0], labels, r); }, {logits});
        gradcheck::check("cross_entropy ignore -100" + name,
                         [&](const V &v) { return cross_entropy(v[0], ignored, r); }, {logits});
        gradcheck::check("cross_entropy ignore 3, i32" + name,
                         [&](const V &v) { return cross_entropy(v[0], custom, r, 3); }, {logits});
    }
    gradcheck::check("cross_entropy of transposed logits", [&](const V &v) { return cross_entropy(v[0], labels); },
                     {gradcheck::random({4, 5}, 1220, -2, 2, Layout::transposed)});
}

// Too large for finite differences: the analytic gradients of L = sum(conv2d(x, w) * W) against
// the same host loop as the forward pass (dL/dx and dL/dw accumulate W * w and W * x).
TEST_CASE("conv2d gradients at a size that crosses the GEMM blocking, against a host loop") {
    Shape sx{2, 64, 6, 6}, sw{16, 32, 3, 3};
    Conv2dOptions o;
    o.stride_h = 2;
    o.pad_h = o.pad_w = 1;
    o.groups = 2;
    gradcheck::F xv = gradcheck::uniform(gradcheck::numel(sx), 1300),
                 wv = gradcheck::uniform(gradcheck::numel(sw), 1301);
    Tensor x = from_vector(xv, sx).requires_grad_(), w = from_vector(wv, sw).requires_grad_();
    Tensor y = conv2d(x, w, Tensor(), o);
    int64_t oh = 3, ow = 6;
    REQUIRE(y.shape() == Shape{2, 16, oh, ow});
    gradcheck::F wout = gradcheck::uniform(y.numel(), 1302);
    sum(y * from_vector(wout, y.shape())).backward();
    std::vector<double> dx(xv.size(), 0.0), dw(wv.size(), 0.0);
    for (int64_t n = 0; n < 2; ++n)
        for (int64_t f = 0; f < 16; ++f)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    double g = wout[((n * 16 + f) * oh + i) * ow + j];
                    for (int64_t ci = 0; ci < 32; ++ci)
                        for (int64_t p = 0; p < 3; ++p)
                            for (int64_t q = 0; q < 3; ++q) {
                                int64_t ih = i * 2 - 1 + p, iw = j - 1 + q;
                                if (ih < 0 || ih >= 6 || iw < 0 || iw >= 6) continue;
                                int64_t xi = ((n * 64 + (f / 8) * 32 + ci) * 6 + ih) * 6 + iw;
                                int64_t wi = ((f * 32 + ci) * 3 + p) * 3 + q;
                                dx[xi] += g * wv[wi];
                                dw[wi] += g * xv[xi];
                            }
                }
    auto compare = [](const Tensor &got, const std::vector<double> &want, const char *what) {
        gradcheck::F g = got.to_vector<float>();
        int bad = 0;
        for (std::size_t i = 0; i < want.size(); ++i)
            if (std::abs(g[i] - want[i]) > 1e-4 + 1e-4 * std::abs(want[i])) ++bad;
        INFO(std::string(what) << ": " << bad << " of " << want.size() << " elements differ");
        CHECK(bad == 0);
    };
    compare(x.grad(), dx, "dx");
    compare(w.grad(), dw, "dw");
}

// The gradient reaching an op's backward rule is whatever the ops after it produce: a stride-0
// broadcast (after sum) or a transposed view (after transpose). Each rule and backward kernel
// must read it through its strides.
TEST_CASE("gradcheck nn ops fed broadcast and transposed upstream gradients") {
    Tensor idx = from_vector(std::vector<int64_t>{3, 0, 3, 1}, {2, 2});
    Tensor labels = from_vector(std::vector<int64_t>{1, 0, 2}, {3});
    struct Case {
        const char *name;
        std::function<Tensor(const V &)> op;
        std::vector<Input> inputs;
    };
    std::vector<Case> cases{
        {"conv2d",
         [](const V &v) {
             return conv2d(v[0], v[1], Tensor(), {1, 1, 1, 0, 1, 1, 1});
         },
         {gradcheck::random({1, 2, 3, 4}, 1400), gradcheck::random({3, 2, 2, 2}, 1401)}},
        {"max_pool2d",
         [](const V &v) {
             return max_pool2d(v[0], {2, 2, 1, 1});
         },
         {gradcheck::spaced({1, 2, 3, 4}, 1402)}},
        {"avg_pool2d",
         [](const V &v) {
             return avg_pool2d(v[0], {2, 3, 1, 1, 1, 1, false});
         },
         {gradcheck::random({1, 2, 3, 4}, 1403)}},
        {"embedding", [&](const V &v) { return embedding(v[0], idx); }, {gradcheck::random({4, 3}, 1404)}},
        {"rope", [](const V &v) { return rope(v[0], 100.0, true, 2); }, {gradcheck::random({3, 4}, 1405)}},
        {"softmax", [](const V &v) { return softmax(v[0], 0); }, {gradcheck::random({3, 4}, 1406)}},
        {"log_softmax", [](const V &v) { return log_softmax(v[0]); }, {gradcheck::random({3, 4}, 1407)}},
        {"layer_norm",
         [](const V &v) { return layer_norm(v[0], 1, v[1], v[2]); },
         {gradcheck::random({3, 4}, 1408), gradcheck::random({4}, 1409), gradcheck::random({4}, 1410)}},
        {"rms_norm",
         [](const V &v) { return rms_norm(v[0], 1, v[1]); },
         {gradcheck::random({3, 4}, 1411), gradcheck::random({4}, 1412)}},
        {"attention",
         [](const V &v) { return scaled_dot_product_attention(v[0], v[1], v[2], v[3], true); },
         {gradcheck::random({3, 2}, 1413), gradcheck::random({4, 2}, 1414), gradcheck::random({4, 3}, 1415),
          gradcheck::random({3, 4}, 1416)}},
        {"cross_entropy none",
         [&](const V &v) {
             return cross_entropy(v[0], labels, Reduction::none).reshape({3, 1});
         },
         {gradcheck::random({3, 4}, 1417)}},
    };
    for (const Case &c : cases) {
        gradcheck::check(
            std::string(c.name) + " under sum", [&](const V &v) { return sum(c.op(v)); }, c.inputs);
        gradcheck::check(
            std::string(c.name) + " under transpose", [&](const V &v) { return c.op(v).transpose(-1, -2); }, c.inputs);
    }
}
