// The GEMM family: matmul (batched with broadcast batch dims, 1-D operands, views, empty K, sizes
// that cross the cpu kernel's blocking) and conv2d (stride, padding, dilation, groups, bias, views,
// sizes that cross the GEMM blocking) against naive host loops in double; then, on the backend
// under test, both and conv2d's gradients against cpu.
#include "device_parity.hpp"
#include "reference_nn.hpp"

using namespace tinyfin;
using ref::conv2d_ref;
using ref::D;
using ref::F;
using ref::matmul_ref;
using ref::permute_ref;

// ---- matmul ---------------------------------------------------------------------------

TEST_CASE("matmul: batched with broadcast batch dims against a naive loop") {
    struct Case {
        Shape sa, sb;
    };
    std::vector<Case> cases{
        {{3, 4}, {4, 2}},          {{2, 3, 4}, {4, 5}},       {{3, 4}, {2, 4, 5}},
        {{2, 1, 3, 4}, {3, 4, 2}}, {{1, 2, 3}, {4, 1, 3, 2}}, {{2, 2, 1, 3}, {2, 1, 3, 1}},
    };
    uint64_t seed = 40;
    for (const Case &c : cases) {
        INFO(shape_str(c.sa) << " x " << shape_str(c.sb));
        F a = ref::values(ref::numel(c.sa), seed++), b = ref::values(ref::numel(c.sb), seed++);
        Shape so;
        D want = matmul_ref(ref::to_double(a), c.sa, ref::to_double(b), c.sb, so);
        ref::check_close(matmul(ref::tensor(a, c.sa), ref::tensor(b, c.sb)), want, so, 1e-5, 1e-5);
    }
}

TEST_CASE("matmul: 1-D operands against batches, transposed and sliced operands, empty K") {
    F v = ref::values(4, 50), m = ref::values(24, 51);
    D dv = ref::to_double(v), dm = ref::to_double(m);
    Shape so;
    // [4] x [2,4,3] -> [2,3]
    D want = matmul_ref(dv, {1, 4}, dm, {2, 4, 3}, so);
    ref::check_close(matmul(ref::tensor(v, {4}), ref::tensor(m, {2, 4, 3})), want, {2, 3}, 1e-5, 1e-5);
    // [2,3,4] x [4] -> [2,3]
    want = matmul_ref(dm, {2, 3, 4}, dv, {4, 1}, so);
    ref::check_close(matmul(ref::tensor(m, {2, 3, 4}), ref::tensor(v, {4})), want, {2, 3}, 1e-5, 1e-5);
    // a^T b with a transposed view: a [4,3] viewed as [3,4]; b is every other row of [8,2]
    F a = ref::values(12, 52), b = ref::values(16, 53);
    D da = ref::transpose2(ref::to_double(a), 4, 3), db;
    for (int r = 0; r < 8; r += 2) db.insert(db.end(), {b[r * 2], b[r * 2 + 1]});
    want = matmul_ref(da, {3, 4}, db, {4, 2}, so);
    ref::check_close(matmul(ref::tensor(a, {4, 3}).transpose(0, 1), ref::tensor(b, {8, 2}).slice(0, 0, 8, 2)), want,
                     {3, 2}, 1e-5, 1e-5);
    // batched with a permuted operand: [2,3,4] from permuting [4,2,3]
    F p = ref::values(24, 54);
    D dp(24);
    for (int64_t i = 0; i < 24; ++i) {
        auto c = ref::unravel(i, {2, 3, 4});  // element [b, i, k] of the view is p[k, b, i]
        dp[i] = p[(c[2] * 2 + c[0]) * 3 + c[1]];
    }
    want = matmul_ref(dp, {2, 3, 4}, dm, {2, 4, 3}, so);
    ref::check_close(matmul(ref::tensor(p, {4, 2, 3}).permute({1, 2, 0}), ref::tensor(m, {2, 4, 3})), want, {2, 3, 3},
                     1e-5, 1e-5);
    // K = 0 gives zeros; an empty batch gives an empty result
    ref::check_close(matmul(zeros({2, 3, 0}), zeros({0, 2})), D(12, 0.0), {2, 3, 2});
    CHECK(matmul(zeros({0, 3, 4}), zeros({4, 2})).shape() == Shape{0, 3, 2});
}

TEST_CASE("matmul large enough to cross the cpu kernel's blocking, with strided operands") {
    // M = 130 and K = 300 exceed one packed block of A (mc <= 128, kc = 256) on every code path.
    int64_t m = 130, k = 300, n = 37;
    F a = ref::values(2 * m * k, 60), b = ref::values(n * k, 61);
    D da = ref::to_double(a), db = ref::transpose2(ref::to_double(b), n, k);  // b is stored [n, k]
    Shape so;
    D want = matmul_ref(da, {2, m, k}, db, {k, n}, so);
    ref::check_close(matmul(ref::tensor(a, {2, m, k}), ref::tensor(b, {n, k}).transpose(0, 1)), want, so, 1e-4, 1e-4);
}

// ---- conv2d ---------------------------------------------------------------------------

TEST_CASE("conv2d against a naive loop: stride, padding, dilation, groups, bias") {
    struct Case {
        Shape sx, sw;
        Conv2dOptions o;
        bool bias;
    };
    std::vector<Case> cases{
        {{2, 3, 5, 5}, {4, 3, 3, 3}, {}, false},
        {{2, 3, 5, 5}, {4, 3, 3, 3}, {}, true},
        {{1, 2, 7, 6}, {3, 2, 3, 3}, {2, 2, 1, 1, 1, 1, 1}, true},  // stride 2, padding 1
        {{1, 2, 7, 8}, {2, 2, 3, 2}, {1, 2, 2, 1, 2, 3, 1}, false},  // asymmetric, dilation
        {{2, 4, 5, 5}, {6, 2, 3, 3}, {1, 1, 1, 1, 1, 1, 2}, true},  // groups 2
        {{1, 3, 4, 4}, {3, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 3}, true},  // depthwise
        {{1, 4, 6, 6}, {4, 2, 2, 3}, {2, 1, 0, 2, 2, 1, 2}, false},  // everything at once
        {{1, 2, 3, 3}, {5, 2, 1, 1}, {}, true},  // 1x1
        {{1, 1, 2, 2}, {1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, false},  // kernel larger than input
    };
    uint64_t seed = 100;
    for (const Case &c : cases) {
        INFO("x " << shape_str(c.sx) << " w " << shape_str(c.sw) << " stride " << c.o.stride_h << "x" << c.o.stride_w
                  << " pad " << c.o.pad_h << "x" << c.o.pad_w << " dilation " << c.o.dilation_h << "x" << c.o.dilation_w
                  << " groups " << c.o.groups);
        F x = ref::values(ref::numel(c.sx), seed++), w = ref::values(ref::numel(c.sw), seed++);
        F b = ref::values(c.sw[0], seed++);
        D db = ref::to_double(b);
        Shape so;
        D want = conv2d_ref(ref::to_double(x), c.sx, ref::to_double(w), c.sw, c.bias ? &db : nullptr, c.o, so);
        Tensor y =
            conv2d(ref::tensor(x, c.sx), ref::tensor(w, c.sw), c.bias ? ref::tensor(b, {c.sw[0]}) : Tensor(), c.o);
        ref::check_close(y, want, so, 1e-5, 1e-5);
    }
}

TEST_CASE("conv2d_activation: bias, residual, relu or clip against a naive loop, the same bits as the separate ops") {
    struct Case {
        Shape sx, sw;
        Conv2dOptions o;
        bool bias;
    };
    const std::vector<Case> cases{
        {{2, 3, 5, 5}, {4, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, true},
        {{1, 2, 7, 6}, {3, 2, 3, 3}, {2, 2, 1, 1, 1, 1, 1}, false},  // stride 2, padding 1
        {{2, 4, 5, 5}, {6, 2, 3, 3}, {1, 1, 1, 1, 1, 1, 2}, true},  // groups 2
        {{1, 3, 4, 4}, {5, 3, 1, 1}, {}, true},  // 1x1
        {{2, 32, 9, 9}, {20, 32, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, true},  // 288 taps
    };
    struct Act {
        Conv2dActivation kind;
        double min, max;
    };
    const Act acts[] = {{Conv2dActivation::none, 0, 0},
                        {Conv2dActivation::relu, 0, 0},
                        {Conv2dActivation::clip, -0.5, 0.25},
                        {Conv2dActivation::clip, 0, 6}};
    uint64_t seed = 300;
    for (const Case &c : cases) {
        F x = ref::values(ref::numel(c.sx), seed++), w = ref::values(ref::numel(c.sw), seed++);
        F b = ref::values(c.sw[0], seed++);
        D db = ref::to_double(b);
        Shape so;
        const D conv = conv2d_ref(ref::to_double(x), c.sx, ref::to_double(w), c.sw, c.bias ? &db : nullptr, c.o, so);
        const Tensor tx = ref::tensor(x, c.sx), tw = ref::tensor(w, c.sw),
                     tb = c.bias ? ref::tensor(b, {c.sw[0]}) : Tensor();
        for (const Act &a : acts) {
            INFO("x " << shape_str(c.sx) << " w " << shape_str(c.sw) << " bias " << c.bias << " activation "
                      << static_cast<int>(a.kind) << " " << a.min << " " << a.max);
            D want = conv;
            for (double &v : want) {
                if (a.kind == Conv2dActivation::relu) v = v < 0 ? 0 : v;
                if (a.kind == Conv2dActivation::clip) v = std::min(std::max(v, a.min), a.max);
            }
            const Tensor y = conv2d_activation(tx, tw, tb, c.o, a.kind, a.min, a.max);
            ref::check_close(y, want, so, 1e-5, 1e-5);
            Tensor separate = conv2d(tx, tw, tb, c.o);
            if (a.kind == Conv2dActivation::relu) separate = relu(separate);
            if (a.kind == Conv2dActivation::clip) separate = minimum(maximum(separate, a.min), a.max);
            CHECK(y.to_vector<float>() == separate.to_vector<float>());
        }
        // A residual of the output's shape, added after the bias and before relu.
        const F r = ref::values(so[0] * so[1] * so[2] * so[3], seed++);
        D want = conv;
        for (std::size_t i = 0; i < want.size(); ++i) want[i] = std::max(want[i] + static_cast<double>(r[i]), 0.0);
        const Tensor tr = ref::tensor(r, so);
        const Tensor y = conv2d_activation(tx, tw, tb, c.o, Conv2dActivation::relu, 0, 0, tr);
        ref::check_close(y, want, so, 1e-5, 1e-5);
        CHECK(y.to_vector<float>() == relu(add(conv2d(tx, tw, tb, c.o), tr)).to_vector<float>());
    }
    CHECK_THROWS_AS(conv2d_activation(ref::tensor(ref::values(25, 1), {1, 1, 5, 5}),
                                      ref::tensor(ref::values(9, 2), {1, 1, 3, 3}), Tensor(), {},
                                      Conv2dActivation::clip, std::nan(""), 1),
                    ValueError);
    // With autograd the separate ops run: the gradient is relu's times conv2d's.
    Tensor x = ref::tensor(ref::values(2 * 3 * 6 * 6, 7), {2, 3, 6, 6}).requires_grad_(true);
    Tensor w = ref::tensor(ref::values(4 * 3 * 3 * 3, 8), {4, 3, 3, 3}).requires_grad_(true);
    Tensor b = ref::tensor(ref::values(4, 9), {4}).requires_grad_(true);
    const Conv2dOptions o = Conv2dOptions{}.padding(1);
    sum(conv2d_activation(x, w, b, o, Conv2dActivation::relu)).backward();
    const auto gx = x.grad().to_vector<float>(), gw = w.grad().to_vector<float>(), gb = b.grad().to_vector<float>();
    Tensor x2 = x.detach().requires_grad_(true), w2 = w.detach().requires_grad_(true),
           b2 = b.detach().requires_grad_(true);
    sum(relu(conv2d(x2, w2, b2, o))).backward();
    CHECK(gx == x2.grad().to_vector<float>());
    CHECK(gw == w2.grad().to_vector<float>());
    CHECK(gb == b2.grad().to_vector<float>());
}

TEST_CASE("linear with a bias (the matmul_bias op where the backend has it): float64, the bits of matmul then add") {
    struct Case {
        Shape sx;
        int64_t n;
    };
    const std::vector<Case> cases{
        {{3, 5}, 7},         {{2, 37, 65}, 67}, {{128, 64}, 64},  // bert's projections
        {{1, 600}, 33},      {{96, 70}, 4},  // one row; a product the cpu computes as C^T = B^T A^T
        {{2, 3, 20, 9}, 11},
    };
    uint64_t seed = 700;
    for (const Case &c : cases) {
        const int64_t k = c.sx.back(), n = c.n, rows = ref::numel(c.sx) / k;
        INFO("x " << shape_str(c.sx) << " n " << n);
        F x = ref::values(ref::numel(c.sx), seed++), w = ref::values(n * k, seed++), b = ref::values(n, seed++);
        D want(static_cast<std::size_t>(rows * n));
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double s = b[static_cast<std::size_t>(j)];
                for (int64_t p = 0; p < k; ++p)
                    s += static_cast<double>(x[static_cast<std::size_t>(i * k + p)]) *
                         w[static_cast<std::size_t>(j * k + p)];
                want[static_cast<std::size_t>(i * n + j)] = s;
            }
        Shape so = c.sx;
        so.back() = n;
        const Tensor tx = ref::tensor(x, c.sx), tw = ref::tensor(w, {n, k}), tb = ref::tensor(b, {n});
        const Tensor y = linear(tx, tw, tb);
        ref::check_close(y, want, so, 1e-5, 1e-5);
        CHECK(y.to_vector<float>() == add(matmul(tx, tw.transpose(0, 1)), tb).to_vector<float>());
        // Under autograd the separate ops run and the gradients are theirs.
        const Tensor gx = tx.detach().requires_grad_(true), gw = tw.detach().requires_grad_(true),
                     gb = tb.detach().requires_grad_(true);
        const Tensor yg = linear(gx, gw, gb);
        CHECK(yg.to_vector<float>() == y.to_vector<float>());
        sum(yg).backward();
        const Tensor cx = tx.detach().requires_grad_(true), cw = tw.detach().requires_grad_(true),
                     cb = tb.detach().requires_grad_(true);
        sum(add(matmul(cx, cw.transpose(0, 1)), cb)).backward();
        CHECK(gx.grad().to_vector<float>() == cx.grad().to_vector<float>());
        CHECK(gw.grad().to_vector<float>() == cw.grad().to_vector<float>());
        CHECK(gb.grad().to_vector<float>() == cb.grad().to_vector<float>());
    }
}

TEST_CASE("conv2d of non-contiguous input and weight") {
    // x as a permuted NHWC tensor, w as a transposed [O, C, KW, KH] tensor.
    Shape nhwc{2, 5, 4, 3};
    F xv = ref::values(ref::numel(nhwc), 120), wv = ref::values(4 * 3 * 3 * 2, 121);
    Shape sx, sw;
    D dx = permute_ref(ref::to_double(xv), nhwc, {0, 3, 1, 2}, sx);
    D dw = permute_ref(ref::to_double(wv), {4, 3, 3, 2}, {0, 1, 3, 2}, sw);
    Tensor x = ref::tensor(xv, nhwc).permute({0, 3, 1, 2});
    Tensor w = ref::tensor(wv, {4, 3, 3, 2}).transpose(2, 3);
    REQUIRE_FALSE(x.is_contiguous());
    Conv2dOptions o;
    o.pad_w = 1;
    Shape so;
    D want = conv2d_ref(dx, sx, dw, sw, nullptr, o, so);
    ref::check_close(conv2d(x, w, Tensor(), o), want, so, 1e-5, 1e-5);
    // every other input row (stride 2 along H)
    Tensor xs = ref::tensor(xv, {2, 3, 10, 2}).slice(2, 0, 10, 2);  // [2,3,5,2]
    D ds;
    for (int64_t i = 0; i < 2 * 3 * 10 * 2; ++i) {
        auto c = ref::unravel(i, {2, 3, 10, 2});
        if (c[2] % 2 == 0) ds.push_back(xv[i]);
    }
    Tensor w1 = ref::tensor(ref::values(3 * 3 * 2 * 1, 122), {3, 3, 2, 1});
    want = conv2d_ref(ds, {2, 3, 5, 2}, ref::host(w1), {3, 3, 2, 1}, nullptr, {}, so);
    ref::check_close(conv2d(xs, w1), want, so, 1e-5, 1e-5);
}

TEST_CASE("conv2d large enough to cross the GEMM blocking") {
    // C/groups * KH * KW = 288 > one packed K block (256); 100 output positions per image.
    Shape sx{2, 64, 10, 10}, sw{24, 32, 3, 3};
    Conv2dOptions o;
    o.pad_h = o.pad_w = 1;
    o.groups = 2;
    F x = ref::values(ref::numel(sx), 130), w = ref::values(ref::numel(sw), 131), b = ref::values(24, 132);
    D db = ref::to_double(b);
    Shape so;
    D want = conv2d_ref(ref::to_double(x), sx, ref::to_double(w), sw, &db, o, so);
    ref::check_close(conv2d(ref::tensor(x, sx), ref::tensor(w, sw), ref::tensor(b, {24}), o), want, so, 1e-4, 1e-4);
}

// ---- On the backend under test (suite "device") ---------------------------------------------------
// ops-gemm-<backend> runs these with TINYFIN_BACKEND=vulkan, opengl or opencl and no fallback: each
// op on the backend's tensors against the same op on cpu tensors (held to the host references by
// the cases above), with odd sizes, broadcasting, views, rank 0, empty tensors, every dtype the
// kernels take and special values. The cpu run leaves the suite out.

TEST_SUITE_BEGIN("device");
namespace on_device {

using namespace vt;
namespace tf = tinyfin;

TEST_CASE("gemm: matmul of odd sizes, views and batches") {
    const Tolerance tol{1e-5, 1e-5};
    parity(
        "matmul 67x45 @ 45x93", {random({67, 45}, 111), random({45, 93}, 112)},
        [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    parity(
        "matmul a^T b^T", {random({45, 67}, 113), random({93, 45}, 114)},
        [](auto &t) { return tf::matmul(t[0].transpose(0, 1), t[1].transpose(0, 1)); }, tol);
    parity(
        "matmul 1x1", {random({1, 1}, 115), random({1, 1}, 116)}, [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    parity(
        "matmul vector @ matrix", {random({17}, 117), random({17, 5}, 118)},
        [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    parity(
        "matmul matrix @ vector", {random({5, 17}, 119), random({17}, 120)},
        [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    parity(
        "batched, broadcast batch", {random({3, 1, 19, 23}, 121), random({4, 23, 7}, 122)},
        [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    parity(
        "batched, stepped views", {random({5, 40, 30}, 123), random({30, 5, 33}, 124)},
        [](auto &t) {
            return tf::matmul(t[0].slice(1, 0, 40, 2), t[1].permute({1, 0, 2}).slice(2, 1, 33, 3));
        },
        tol);
    parity("inner dimension 0", {random({4, 0}, 125), random({0, 6}, 126)},
           [](auto &t) { return tf::matmul(t[0], t[1]); });
    parity("long inner dimension", {random({9, 1500}, 127), random({1500, 11}, 128)},
           [](auto &t) { return tf::matmul(t[0], t[1]); }, {1e-4, 1e-4});
    // More 64-column tiles than a dispatch may have workgroups along x: the kernel loops.
    const int64_t wide = 65535 * 64 + 100;
    parity(
        "matmul wider than the grid", {random({2, 3}, 131), random({3, wide}, 132)},
        [](auto &t) { return tf::matmul(t[0], t[1]); }, tol);
    grad_parity(
        "matmul gradients", {random({6, 9}, 129), random({9, 4}, 130)}, [](auto &t) { return tf::matmul(t[0], t[1]); },
        tol);
}

TEST_CASE("gemm: conv2d forward and both gradients") {
    struct ConvCase {
        const char *name;
        Shape x, w;
        tf::Conv2dOptions o;
    };
    const ConvCase cases[] = {
        {"3x3", {2, 3, 11, 9}, {5, 3, 3, 3}, {}},
        {"stride 2, padding 1", {2, 4, 12, 13}, {6, 4, 3, 3}, {2, 2, 1, 1, 1, 1, 1}},
        {"stride (1,3), padding (2,0), dilation (2,1)", {1, 2, 10, 15}, {3, 2, 3, 2}, {1, 3, 2, 0, 2, 1, 1}},
        {"groups 2", {2, 6, 8, 8}, {4, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 2}},
        {"depthwise 5x5", {1, 4, 9, 9}, {4, 1, 5, 5}, {1, 1, 2, 2, 1, 1, 4}},
        {"1x1 on many channels", {3, 70, 5, 5}, {66, 70, 1, 1}, {}},
        {"the CNN's first layer", {8, 1, 28, 28}, {32, 1, 3, 3}, {}},
    };
    for (const ConvCase &c : cases) {
        Pair x = random(c.x, 141), w = random(c.w, 142);
        // Gradients add hundreds of products of O(1) values in f32: absolute error ~1e-5.
        grad_parity(std::string("conv2d ") + c.name, {x, w},
                    [&](auto &t) { return tf::conv2d(t[0], t[1], Tensor(), c.o); }, {1e-4, 1e-4});
    }
    Pair x = random({2, 3, 9, 9}, 143), w = random({4, 3, 3, 3}, 144), b = random({4}, 145);
    grad_parity("conv2d with bias on a permuted input", {x, w, b},
                [](auto &t) {
                    return tf::conv2d(t[0].permute({0, 1, 3, 2}), t[1], t[2]);
                },
                {1e-4, 1e-4});
}

}  // namespace on_device

TEST_SUITE_END();
