// conv2d and its gradients, max_pool2d and avg_pool2d and their backwards, against direct
// evaluations of the definitions in double. TF_BENCH=1 adds a timing case.
// Through the plugin ABI with no core; the harness: cpu_kernel_harness.hpp.
#include "cpu_kernel_harness.hpp"

#include <chrono>
#include <ctime>
#include <functional>
#include <random>

using namespace cpu_kernel_test;

namespace {

// ---- References ---------------------------------------------------------------------------

struct ConvCase {
    int64_t n, c, h, w, o, kh, kw;
    tf_params_conv2d p;
    int64_t oh() const { return (h + 2 * p.padding[0] - p.dilation[0] * (kh - 1) - 1) / p.stride[0] + 1; }
    int64_t ow() const { return (w + 2 * p.padding[1] - p.dilation[1] * (kw - 1) - 1) / p.stride[1] + 1; }
    Dims x_shape() const { return {n, c, h, w}; }
    Dims w_shape() const { return {o, c / p.groups, kh, kw}; }
    Dims y_shape() const { return {n, o, oh(), ow()}; }
};

// Direct convolution and its two adjoints, in double, from the definition:
// y[n,o,i,j] = sum over c, a, b of x[n, g*C/G + c, i*s - p + a*d, j*s - p + b*d] * w[o, c, a, b].
void naive_conv(const ConvCase &k, const Values &x, const Values &w, const Values &dy, Values &y, Values &dx,
                Values &dw) {
    const int64_t oh = k.oh(), ow = k.ow(), cg = k.c / k.p.groups, og = k.o / k.p.groups;
    y.assign(static_cast<size_t>(k.n * k.o * oh * ow), 0);
    dx.assign(x.size(), 0);
    dw.assign(w.size(), 0);
    for (int64_t n = 0; n < k.n; ++n)
        for (int64_t o = 0; o < k.o; ++o)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    const size_t yi = static_cast<size_t>(((n * k.o + o) * oh + i) * ow + j);
                    for (int64_t c = 0; c < cg; ++c)
                        for (int64_t a = 0; a < k.kh; ++a)
                            for (int64_t b = 0; b < k.kw; ++b) {
                                const int64_t ih = i * k.p.stride[0] - k.p.padding[0] + a * k.p.dilation[0];
                                const int64_t iw = j * k.p.stride[1] - k.p.padding[1] + b * k.p.dilation[1];
                                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                                const int64_t ch = (o / og) * cg + c;
                                const size_t xi = static_cast<size_t>(((n * k.c + ch) * k.h + ih) * k.w + iw);
                                const size_t wi = static_cast<size_t>(((o * cg + c) * k.kh + a) * k.kw + b);
                                y[yi] += x[xi] * w[wi];
                                dx[xi] += dy[yi] * w[wi];
                                dw[wi] += dy[yi] * x[xi];
                            }
                }
}

double dot(const Values &a, const Values &b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// Runs conv2d and both gradients in f32 for one case and checks them against naive_conv and
// against each other (<conv(x), dy> = <x, grad_input(dy)> = <w, grad_weight(dy)>).
void check_conv_case(const ConvCase &k, uint32_t seed) {
    INFO("conv N", k.n, " C", k.c, " H", k.h, " W", k.w, " O", k.o, " K", k.kh, "x", k.kw, " stride ", k.p.stride[0],
         "x", k.p.stride[1], " pad ", k.p.padding[0], "x", k.p.padding[1], " dil ", k.p.dilation[0], "x",
         k.p.dilation[1], " groups ", k.p.groups);
    const Values xv = random_f32(static_cast<size_t>(count_of(k.x_shape())), seed);
    const Values wv = random_f32(static_cast<size_t>(count_of(k.w_shape())), seed + 1);
    const Values dyv = random_f32(static_cast<size_t>(count_of(k.y_shape())), seed + 2);
    Values y_ref, dx_ref, dw_ref;
    naive_conv(k, xv, wv, dyv, y_ref, dx_ref, dw_ref);

    const TensorDesc x = f32(k.x_shape(), xv), w = f32(k.w_shape(), wv), dy = f32(k.y_shape(), dyv);
    const TensorDesc y = make(TF_DTYPE_F32, k.y_shape()), dx = make(TF_DTYPE_F32, k.x_shape()),
                     dw = make(TF_DTYPE_F32, k.w_shape());
    run_ok(TF_OP_CONV2D, {&x, &w}, y, &k.p);
    run_ok(TF_OP_CONV2D_GRAD_INPUT, {&dy, &w}, dx, &k.p);
    run_ok(TF_OP_CONV2D_GRAD_WEIGHT, {&dy, &x}, dw, &k.p);
    // f32 sums of up to `terms` products against double. Beyond about 1000 terms the partial sums
    // grow (~sqrt(terms)) far past results that cancel to near 0, and the rounding error with
    // them: the 5184-tap case sums 7442 products per weight and is off by up to 1.2e-4 there.
    // An indexing error would be off by the size of a product (~0.1) or more.
    const double terms = static_cast<double>(std::max(k.c / k.p.groups * k.kh * k.kw, k.n * k.oh() * k.ow()));
    const double tol = terms <= 1000 ? 1e-5 : 1e-5 * std::sqrt(terms / 20.0);
    check_close(get(y), y_ref, tol);
    check_close(get(dx), dx_ref, tol);
    check_close(get(dw), dw_ref, tol);
    const double forward = dot(get(y), dyv);
    CHECK(dot(xv, get(dx)) == doctest::Approx(forward).epsilon(1e-5));
    CHECK(dot(wv, get(dw)) == doctest::Approx(forward).epsilon(1e-5));
}

}  // namespace

// ---- conv2d ---------------------------------------------------------------------------------

TEST_CASE("conv2d and its gradients match a direct convolution") {
    const ConvCase cases[] = {
        {2, 3, 7, 6, 4, 3, 2, conv_params(1, 1, 0, 0, 1, 1, 1)},
        {2, 3, 8, 9, 5, 3, 3, conv_params(2, 2, 1, 1, 1, 1, 1)},  // stride 2, padding
        {1, 2, 9, 8, 3, 3, 3, conv_params(1, 1, 2, 1, 2, 2, 1)},  // dilation 2
        {2, 4, 6, 7, 6, 3, 2, conv_params(1, 2, 1, 0, 1, 1, 2)},  // groups 2
        {3, 2, 5, 9, 4, 5, 3, conv_params(3, 2, 2, 1, 1, 2, 1)},  // odd sizes everywhere
        {2, 5, 4, 6, 3, 1, 1, conv_params(1, 1, 0, 0, 1, 1, 1)},  // 1x1: no column matrix
        {2, 4, 5, 5, 8, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 4)},  // depthwise
        {2, 6, 9, 10, 4, 3, 2, conv_params(2, 1, 2, 1, 2, 3, 2)},  // groups, dilation and stride at once
        {2, 32, 9, 9, 20, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},  // Kg = 288: several GEMM blocks
        {1, 2, 3, 3, 2, 3, 3, conv_params(1, 1, 0, 0, 1, 1, 1)},  // 1x1 output
        {1, 1, 28, 28, 32, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},  // the Fashion-MNIST first layer
        // Kg = 64 * 9 * 9 = 5184 taps by OW = 61: the column matrix goes in bands of 13 output
        // rows (16 MiB), the last one short; stride 2 in W, 2 images for the gradient's sum.
        {2, 64, 61, 121, 3, 9, 9, conv_params(1, 2, 4, 4, 1, 1, 1)},
        // Stride 1 with at least 32 taps (4 images and more for the weight gradient): the path
        // that reads a padded image in place (kernels_conv.cpp), with several bands of output
        // rows, groups, dilation, uneven padding, a padding the flipped convolution of
        // grad_input cannot express (3 > (3 - 1) * 1: that gradient takes the column matrix).
        {8, 32, 9, 11, 20, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {4, 16, 10, 9, 16, 3, 3, conv_params(1, 1, 2, 1, 2, 1, 2)},
        {5, 8, 7, 12, 12, 5, 3, conv_params(1, 1, 0, 0, 1, 1, 1)},
        {4, 8, 6, 6, 8, 3, 3, conv_params(1, 1, 3, 3, 1, 1, 1)},
        {4, 64, 30, 30, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {8, 64, 12, 12, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},  // whole images per task, 3 bands each
        // The shifted forward's blocking: more output channels than one task's block (200: two
        // blocks, the last tile short), taps over several K blocks (288 = 256 + 32, 576, 360),
        // one image (the tasks split output channels), bands of unequal rows.
        {1, 32, 7, 7, 200, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {1, 64, 5, 6, 13, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {2, 40, 8, 8, 150, 3, 3, conv_params(1, 1, 0, 0, 1, 1, 1)},
        {1, 16, 23, 19, 20, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 2)},  // groups: 8 input channels each
        // Exact rows (stride 1, output as wide as the input): a copy of the band per kernel
        // column, zeros where a shift leaves the row): shifts of -2..2 over 3 columns, dilation 2
        // in W (shifts -2, 0, 2), 1 x 3 kernels over 2 columns, the example's second conv's
        // 14 x 14 (196 positions: 12 tiles and a half-width one), 5 x 5 over 4 columns with
        // padding 2; 1 column with padding 1 cannot take exact rows (the shift would reach a
        // neighbouring row's value).
        // Channels enough for take_exact_rows (the forward of all five, grad_input of the
        // first, third and fifth).
        {2, 16, 6, 3, 24, 3, 5, conv_params(1, 1, 1, 2, 1, 1, 1)},
        {4, 16, 7, 10, 24, 3, 3, conv_params(1, 1, 1, 2, 1, 2, 1)},
        {4, 40, 9, 2, 32, 1, 3, conv_params(1, 1, 0, 1, 1, 1, 1)},
        {4, 32, 14, 14, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {2, 16, 6, 4, 9, 5, 5, conv_params(1, 1, 2, 2, 1, 1, 1)},
        {4, 40, 6, 1, 8, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        // Strides above 1 with at least 32 taps: the forward reads phase planes of the padded
        // image (resnet's 7x7 stride-2 stem, its 3x3 and 1x1 stride-2 convs), uneven strides,
        // padding and dilation, stride 3, groups; the gradients take the column matrix.
        {1, 3, 23, 23, 16, 7, 7, conv_params(2, 2, 3, 3, 1, 1, 1)},
        {2, 8, 11, 13, 10, 3, 3, conv_params(2, 2, 1, 1, 1, 1, 1)},
        {2, 40, 9, 10, 12, 1, 1, conv_params(2, 2, 0, 0, 1, 1, 1)},
        {1, 16, 12, 11, 8, 3, 3, conv_params(2, 3, 1, 2, 2, 1, 1)},
        {1, 12, 14, 15, 7, 3, 3, conv_params(3, 3, 2, 2, 2, 2, 1)},
        {1, 64, 9, 9, 8, 3, 3, conv_params(2, 2, 1, 1, 1, 1, 2)},
        // The tiled forward (16 output channels x 6 positions, kernels_conv_tile.hpp; weights
        // packed per call from 512 positions on): output channels not a multiple of 16 (47: two
        // slivers and a half one, 20: a sliver and a half, 12), positions not a multiple of 6
        // (11 x 7 x 7 = 539, 5 x 11 x 10), several bands (30 x 30), taps over K blocks (64 x 9 =
        // 576 = 512 + 64), a stride-2 7 x 7 stem over phase planes, uneven strides with dilation,
        // groups of 24 channels each; and refused: 10 channels (under 3/4 of the vectors it would
        // fill), too few positions for packing the weights per call (the shifted path runs).
        {11, 32, 7, 7, 47, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {5, 16, 11, 10, 20, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {2, 64, 30, 30, 12, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {1, 3, 47, 49, 16, 7, 7, conv_params(2, 2, 3, 3, 1, 1, 1)},
        {2, 16, 21, 23, 32, 3, 3, conv_params(2, 1, 2, 1, 1, 2, 1)},
        {2, 32, 18, 19, 48, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 2)},
        {4, 16, 12, 12, 10, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {1, 32, 9, 9, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
    };
    uint32_t seed = 100;
    for (const ConvCase &k : cases) check_conv_case(k, seed += 10);
}

namespace {

// conv2d's forward as the cpu plugin computes each output where it has fused multiply-adds (AVX2,
// AVX-512): from +0, one f32 fused multiply-add per tap in (c, kh, kw) order, the padding's zeros
// included, whichever path (column matrix, shifted, tiled) and thread count runs it.
Values fma_conv(const ConvCase &k, const Values &x, const Values &w) {
    const int64_t oh = k.oh(), ow = k.ow(), cg = k.c / k.p.groups, og = k.o / k.p.groups;
    Values y(static_cast<size_t>(k.n * k.o * oh * ow));
    for (int64_t n = 0; n < k.n; ++n)
        for (int64_t o = 0; o < k.o; ++o)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    float v = 0.0f;
                    for (int64_t c = 0; c < cg; ++c)
                        for (int64_t a = 0; a < k.kh; ++a)
                            for (int64_t b = 0; b < k.kw; ++b) {
                                const int64_t ih = i * k.p.stride[0] - k.p.padding[0] + a * k.p.dilation[0];
                                const int64_t iw = j * k.p.stride[1] - k.p.padding[1] + b * k.p.dilation[1];
                                const bool inside = ih >= 0 && ih < k.h && iw >= 0 && iw < k.w;
                                const int64_t ch = (o / og) * cg + c;
                                const float xv =
                                    inside ? static_cast<float>(
                                                 x[static_cast<size_t>(((n * k.c + ch) * k.h + ih) * k.w + iw)])
                                           : 0.0f;
                                v = std::fma(
                                    static_cast<float>(w[static_cast<size_t>(((o * cg + c) * k.kh + a) * k.kw + b)]),
                                    xv, v);
                            }
                    y[static_cast<size_t>(((n * k.o + o) * oh + i) * ow + j)] = v;
                }
    return y;
}

}  // namespace

TEST_CASE("conv2d's forward is one fused multiply-add per tap in (c, kh, kw) order on every path") {
    if (cpu_plugin_feature("kernels") == "generic") return;  // rounded products and sums there
    // The tiled forward (channels 64, 47, 20; positions 539, 324; the stem's phase planes; groups),
    // its refusals (10 channels, 49 positions: the shifted path, with exact rows), the column
    // matrix (9 taps) and a 1x1 conv (no column matrix).
    const ConvCase cases[] = {
        {2, 32, 14, 14, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {11, 32, 7, 7, 47, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {4, 16, 9, 9, 20, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {1, 3, 47, 49, 16, 7, 7, conv_params(2, 2, 3, 3, 1, 1, 1)},
        {2, 32, 18, 19, 48, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 2)},
        {4, 16, 12, 12, 10, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {1, 32, 7, 7, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {2, 1, 28, 28, 32, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        // The one-input-channel 3 x 3 forward (kernels_conv_one_channel.hpp): channels in fours
        // and one at a time (7), rows of 8 + 3 positions; depthwise (groups 12, rows of 8 + 8 +
        // 1) and with 2 channels per group; padding 0 (a row of 7) and 2.
        {3, 1, 13, 11, 7, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {2, 12, 10, 17, 12, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 12)},
        {1, 6, 9, 9, 12, 3, 3, conv_params(1, 1, 0, 0, 1, 1, 6)},
        {1, 1, 5, 6, 5, 3, 3, conv_params(1, 1, 2, 2, 1, 1, 1)},
        {2, 40, 9, 10, 12, 1, 1, conv_params(1, 1, 0, 0, 1, 1, 1)},
        // The tiled forward's tasks span images: 11 images of 7 x 7 (539 positions in two ranges,
        // split inside the sixth image, by 4 blocks of a sliver), and 8 images of 100 x 100
        // padded in three batches (3 fit in its 1 Mi floats), 28 channels of 3 x 3 (252 taps).
        {11, 64, 7, 7, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {8, 28, 100, 100, 16, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
    };
    uint32_t seed = 700;
    for (const ConvCase &k : cases) {
        INFO("conv N", k.n, " C", k.c, " H", k.h, " W", k.w, " O", k.o, " K", k.kh, "x", k.kw, " groups ", k.p.groups);
        seed += 10;
        const Values xv = random_f32(static_cast<size_t>(count_of(k.x_shape())), seed);
        const Values wv = random_f32(static_cast<size_t>(count_of(k.w_shape())), seed + 1);
        const TensorDesc x = f32(k.x_shape(), xv), w = f32(k.w_shape(), wv);
        const TensorDesc y = make(TF_DTYPE_F32, k.y_shape());
        run_ok(TF_OP_CONV2D, {&x, &w}, y, &k.p);
        const Values got = get(y), want = fma_conv(k, xv, wv);
        size_t differ = 0;
        for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
        CHECK(differ == 0);
    }
}

// ---- conv2d_act --------------------------------------------------------------------------------

namespace {

tf_params_conv2d_act act_params(const tf_params_conv2d &c, int32_t activation, double min = 0, double max = 0) {
    tf_params_conv2d_act p{};
    p.struct_size = sizeof p;
    for (int i = 0; i < 2; ++i) {
        p.stride[i] = c.stride[i];
        p.padding[i] = c.padding[i];
        p.dilation[i] = c.dilation[i];
    }
    p.groups = c.groups;
    p.activation = activation;
    p.min = min;
    p.max = max;
    return p;
}

// conv2d_act against the definition in double (conv + bias + residual, then the activation),
// and bit for bit against conv2d followed by the bias and the residual added in f32 and the
// activation in f32: what the unfused ops compute.
void check_conv_act_case(const ConvCase &k, uint32_t seed) {
    INFO("conv_act N", k.n, " C", k.c, " H", k.h, " W", k.w, " O", k.o, " K", k.kh, "x", k.kw, " stride ",
         k.p.stride[0], "x", k.p.stride[1], " pad ", k.p.padding[0], "x", k.p.padding[1], " groups ", k.p.groups);
    const Values xv = random_f32(static_cast<size_t>(count_of(k.x_shape())), seed);
    const Values wv = random_f32(static_cast<size_t>(count_of(k.w_shape())), seed + 1);
    Values bv = random_f32(static_cast<size_t>(k.o), seed + 2);
    Values y_ref, dx_ref, dw_ref;
    naive_conv(k, xv, wv, Values(static_cast<size_t>(count_of(k.y_shape())), 0.0), y_ref, dx_ref, dw_ref);
    const TensorDesc x = f32(k.x_shape(), xv), w = f32(k.w_shape(), wv), b = f32({k.o}, bv);
    TensorDesc absent;
    const TensorDesc plain = make(TF_DTYPE_F32, k.y_shape());
    run_ok(TF_OP_CONV2D, {&x, &w}, plain, &k.p);
    const Values unfused_sum = get(plain);
    const int64_t plane = k.oh() * k.ow();
    // f32 sums of `terms` products against double: the rounding grows about as sqrt(terms) (576
    // taps: 1.3e-5 seen); an indexing error would be off by a product's size (~0.1).
    const double terms = static_cast<double>(k.c / k.p.groups * k.kh * k.kw);
    const double tol = 1e-5 * std::max(1.0, std::sqrt(terms / 100.0));
    const Values rv = random_f32(y_ref.size(), seed + 3);
    const TensorDesc residual = f32(k.y_shape(), rv);
    struct Act {
        int32_t kind;
        double min, max;
        bool bias, residual;
    };
    for (const Act a : {Act{TF_CONV_ACT_NONE, 0, 0, true, false}, Act{TF_CONV_ACT_RELU, 0, 0, true, false},
                        Act{TF_CONV_ACT_RELU, 0, 0, false, false}, Act{TF_CONV_ACT_CLIP, -0.25, 0.5, true, false},
                        Act{TF_CONV_ACT_CLIP, 0, 6, false, false}, Act{TF_CONV_ACT_RELU, 0, 0, true, true},
                        Act{TF_CONV_ACT_NONE, 0, 0, false, true}}) {
        INFO("activation ", a.kind, " bias ", a.bias, " residual ", a.residual, " bounds ", a.min, " ", a.max);
        const tf_params_conv2d_act p = act_params(k.p, a.kind, a.min, a.max);
        const TensorDesc y = make(TF_DTYPE_F32, k.y_shape());
        run_ok(TF_OP_CONV2D_ACT, {&x, &w, a.bias ? &b : &absent, a.residual ? &residual : &absent}, y, &p);
        Values want(y_ref.size()), same(y_ref.size());
        for (size_t i = 0; i < want.size(); ++i) {
            const size_t o = static_cast<size_t>(static_cast<int64_t>(i) / plane % k.o);
            double v = y_ref[i] + (a.bias ? bv[o] : 0.0) + (a.residual ? rv[i] : 0.0);
            float f = a.bias ? static_cast<float>(unfused_sum[i]) + static_cast<float>(bv[o])
                             : static_cast<float>(unfused_sum[i]);
            if (a.residual) f += static_cast<float>(rv[i]);
            if (a.kind == TF_CONV_ACT_RELU) {
                v = v < 0 ? 0 : v;
                f = f < 0 ? 0.0f : f;
            }
            if (a.kind == TF_CONV_ACT_CLIP) {
                v = std::min(std::max(v, a.min), a.max);
                f = std::min(std::max(f, static_cast<float>(a.min)), static_cast<float>(a.max));
            }
            want[i] = v;
            same[i] = f;
        }
        const Values got = get(y);
        check_close(got, want, tol);
        CHECK(got == same);
    }
}

}  // namespace

TEST_CASE("conv2d_act: bias, residual and activation in the store, against the definition and bit for bit against "
          "conv2d") {
    // Every forward path: the column matrix (plain and transposed), 1x1 without one, the shifted
    // path (plain and exact rows, several channel blocks and bands), phase planes (stride 2:
    // resnet's stem), groups, dilation.
    const ConvCase cases[] = {
        {2, 3, 7, 6, 4, 3, 2, conv_params(1, 1, 0, 0, 1, 1, 1)},
        {2, 5, 4, 6, 3, 1, 1, conv_params(1, 1, 0, 0, 1, 1, 1)},
        {2, 40, 9, 10, 12, 1, 1, conv_params(2, 2, 0, 0, 1, 1, 1)},
        {2, 6, 9, 10, 4, 3, 2, conv_params(2, 1, 2, 1, 2, 3, 2)},
        {1, 1, 28, 28, 32, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {3, 1, 13, 11, 7, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},  // one input channel: the
        {2, 12, 10, 17, 12, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 12)},  // tails of rows and channels
        {2, 32, 14, 14, 64, 3, 3, conv_params(1, 1, 0, 0, 1, 1, 1)},
        {4, 32, 14, 14, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {1, 32, 7, 7, 200, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {2, 64, 30, 30, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
        {1, 16, 23, 19, 20, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 2)},
        {1, 3, 23, 23, 16, 7, 7, conv_params(2, 2, 3, 3, 1, 1, 1)},
        {2, 8, 11, 13, 10, 3, 3, conv_params(2, 2, 1, 1, 1, 1, 1)},
        // The tiled forward's store: 22 channels (a sliver and 6: one 4 x 4 block and 2 rows
        // finished alone), 99 positions per image (the last 3 finished alone).
        {6, 16, 9, 11, 22, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)},
    };
    uint32_t seed = 900;
    for (const ConvCase &k : cases) check_conv_act_case(k, seed += 10);
}

TEST_CASE("conv2d_act: NaN passes relu and clip, the bounds hold; bad params are refused") {
    // One input channel, a 1x1 kernel of weight 1: y = x + bias exactly.
    const ConvCase k{1, 1, 1, 6, 1, 1, 1, conv_params(1, 1, 0, 0, 1, 1, 1)};
    const Values xv = {NAN, -0.0, 0.0, -3.0, 7.0, 0.25};
    const TensorDesc x = f32(k.x_shape(), xv), w = f32(k.w_shape(), {1.0});
    TensorDesc absent;
    const TensorDesc y = make(TF_DTYPE_F32, k.y_shape());
    const tf_params_conv2d_act relu = act_params(k.p, TF_CONV_ACT_RELU);
    run_ok(TF_OP_CONV2D_ACT, {&x, &w, &absent, &absent}, y, &relu);
    Values got = get(y);
    CHECK(std::isnan(got[0]));
    CHECK(got[1] == 0);
    CHECK(got[3] == 0);
    CHECK(got[4] == 7.0);
    const tf_params_conv2d_act clip = act_params(k.p, TF_CONV_ACT_CLIP, 0.0, 6.0);
    run_ok(TF_OP_CONV2D_ACT, {&x, &w, &absent, &absent}, y, &clip);
    got = get(y);
    CHECK(std::isnan(got[0]));
    CHECK((got[1] == 0 && !std::signbit(got[1])));  // maximum(+-0, 0) is +0
    CHECK(got[3] == 0);
    CHECK(got[4] == 6.0);
    CHECK(got[5] == 0.25);
    tf_params_conv2d_act bad = act_params(k.p, 7);
    CHECK(Call(TF_OP_CONV2D_ACT, {&x, &w, &absent, &absent}, y, &bad).supports() == 0);
    bad = act_params(k.p, TF_CONV_ACT_CLIP, NAN, 1.0);
    CHECK(Call(TF_OP_CONV2D_ACT, {&x, &w, &absent, &absent}, y, &bad).supports() == 0);
    const TensorDesc wrong_bias = f32({2}, {1.0, 2.0});
    CHECK(Call(TF_OP_CONV2D_ACT, {&x, &w, &wrong_bias, &absent}, y, &relu).supports() == 0);
    const TensorDesc wrong_residual = f32({1, 1, 1, 5}, {1.0, 2.0, 3.0, 4.0, 5.0});
    CHECK(Call(TF_OP_CONV2D_ACT, {&x, &w, &absent, &wrong_residual}, y, &relu).supports() == 0);
}

TEST_CASE("conv2d gradients keep infinities where the definition puts them") {
    // The padded-image path computes discarded positions (and, for grad_input, multiplies the
    // zeros around dy by the weights): an infinity there would turn into a NaN the definition
    // does not have. An infinite input in the last column (read only by discarded positions of
    // taps in the first column) and an infinite weight must give the reference's infinities and
    // NaNs, nothing more.
    const ConvCase k{4, 16, 6, 7, 8, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)};
    Values xv = random_f32(static_cast<size_t>(count_of(k.x_shape())), 31);
    Values wv = random_f32(static_cast<size_t>(count_of(k.w_shape())), 32);
    const Values dyv = random_f32(static_cast<size_t>(count_of(k.y_shape())), 33);
    xv[static_cast<size_t>(((1 * k.c + 3) * k.h + 2) * k.w + k.w - 1)] = INFINITY;
    wv[static_cast<size_t>(((2 * k.c + 5) * k.kh + 0) * k.kw + 0)] = -INFINITY;
    Values y_ref, dx_ref, dw_ref;
    naive_conv(k, xv, wv, dyv, y_ref, dx_ref, dw_ref);
    const TensorDesc x = f32(k.x_shape(), xv), w = f32(k.w_shape(), wv), dy = f32(k.y_shape(), dyv);
    const TensorDesc dx = make(TF_DTYPE_F32, k.x_shape()), dw = make(TF_DTYPE_F32, k.w_shape());
    run_ok(TF_OP_CONV2D_GRAD_INPUT, {&dy, &w}, dx, &k.p);
    run_ok(TF_OP_CONV2D_GRAD_WEIGHT, {&dy, &x}, dw, &k.p);
    check_close(get(dx), dx_ref, 1e-5);
    check_close(get(dw), dw_ref, 1e-5);
}

TEST_CASE("conv2d reads strided inputs, writes a strided output and is deterministic") {
    const ConvCase k{2, 3, 6, 5, 4, 3, 3, conv_params(2, 1, 1, 1, 1, 1, 1)};
    const Values xv = random_f32(static_cast<size_t>(count_of(k.x_shape())), 7);
    const Values wv = random_f32(static_cast<size_t>(count_of(k.w_shape())), 8);
    const Values dyv(static_cast<size_t>(count_of(k.y_shape())), 0.0);
    Values y_ref, dx_ref, dw_ref;
    naive_conv(k, xv, wv, dyv, y_ref, dx_ref, dw_ref);

    // x stored NHWC, viewed as NCHW; w at an offset with a gap between output channels.
    const TensorDesc x =
        strided(TF_DTYPE_F32, k.x_shape(), {k.h * k.w * k.c, 1, k.w * k.c, k.c}, 0, count_of(k.x_shape()));
    set(x, xv);
    const int64_t per_o = 3 * 3 * 3;
    const TensorDesc w = strided(TF_DTYPE_F32, k.w_shape(), {per_o + 2, 9, 3, 1}, 5, 5 + 4 * (per_o + 2));
    set(w, wv);
    // y: every other column of a wider buffer.
    const Dims ys = k.y_shape();
    const TensorDesc y = strided(TF_DTYPE_F32, ys, {ys[1] * ys[2] * ys[3] * 2, ys[2] * ys[3] * 2, ys[3] * 2, 2}, 1,
                                 count_of(ys) * 2 + 1);
    run_ok(TF_OP_CONV2D, {&x, &w}, y, &k.p);
    check_close(get(y), y_ref, 1e-5);
    CHECK(only_elements_written(y));

    const TensorDesc y2 = make(TF_DTYPE_F32, ys);
    run_ok(TF_OP_CONV2D, {&x, &w}, y2, &k.p);
    const Values first = get(y2);
    run_ok(TF_OP_CONV2D, {&x, &w}, y2, &k.p);
    CHECK(get(y2) == first);  // bit for bit
    CHECK(get(y) == first);  // the layouts do not change the arithmetic
}

TEST_CASE("conv2d in f16 and bf16 computes in f32 and rounds once") {
    const ConvCase k{2, 4, 5, 6, 4, 3, 3, conv_params(1, 2, 1, 1, 1, 1, 2)};
    const Values xv = random_values(static_cast<size_t>(count_of(k.x_shape())), 21);
    const Values wv = random_values(static_cast<size_t>(count_of(k.w_shape())), 22);
    const Values dyv = random_values(static_cast<size_t>(count_of(k.y_shape())), 23);
    Values y_ref, dx_ref, dw_ref;
    naive_conv(k, xv, wv, dyv, y_ref, dx_ref, dw_ref);
    for (int32_t dtype : {TF_DTYPE_F16, TF_DTYPE_BF16}) {
        INFO("dtype ", dtype);
        // Sums of products of multiples of 1/8 are multiples of 1/64, exact in f32; rounding the
        // result once to the narrow type is the only error.
        const double tol = dtype == TF_DTYPE_F16 ? 1.0 / 1024 : 1.0 / 128;
        const TensorDesc x = make(dtype, k.x_shape(), xv), w = make(dtype, k.w_shape(), wv),
                         dy = make(dtype, k.y_shape(), dyv);
        const TensorDesc y = make(dtype, k.y_shape()), dx = make(dtype, k.x_shape()), dw = make(dtype, k.w_shape());
        run_ok(TF_OP_CONV2D, {&x, &w}, y, &k.p);
        run_ok(TF_OP_CONV2D_GRAD_INPUT, {&dy, &w}, dx, &k.p);
        run_ok(TF_OP_CONV2D_GRAD_WEIGHT, {&dy, &x}, dw, &k.p);
        check_close(get(y), y_ref, tol);
        check_close(get(dx), dx_ref, tol);
        check_close(get(dw), dw_ref, tol);
    }
}

TEST_CASE("conv2d supports() checks shapes, params and dtypes without data") {
    const tf_params_conv2d p = conv_params(1, 1, 0, 0, 1, 1, 1);
    auto supports = [](uint32_t op, std::vector<tf_tensor_desc> in, tf_tensor_desc out, const void *params) {
        return Call(op, std::move(in), out, params).supports();
    };
    const auto x = no_data_desc(TF_DTYPE_F32, {1, 2, 5, 5}), w = no_data_desc(TF_DTYPE_F32, {3, 2, 3, 3}),
               y = no_data_desc(TF_DTYPE_F32, {1, 3, 3, 3});
    CHECK(supports(TF_OP_CONV2D, {x, w}, y, &p) == 1);
    CHECK(supports(TF_OP_CONV2D_GRAD_INPUT, {y, w}, x, &p) == 1);
    CHECK(supports(TF_OP_CONV2D_GRAD_WEIGHT, {y, x}, w, &p) == 1);
    for (int32_t dtype : {TF_DTYPE_F16, TF_DTYPE_BF16})
        CHECK(supports(TF_OP_CONV2D, {no_data_desc(dtype, {1, 2, 5, 5}), no_data_desc(dtype, {3, 2, 3, 3})},
                       no_data_desc(dtype, {1, 3, 3, 3}), &p) == 1);

    CHECK(supports(TF_OP_CONV2D, {x, w}, no_data_desc(TF_DTYPE_F32, {1, 3, 4, 3}), &p) == 0);  // wrong OH
    CHECK(supports(TF_OP_CONV2D, {x, w}, no_data_desc(TF_DTYPE_F32, {2, 3, 3, 3}), &p) == 0);  // wrong N
    CHECK(supports(TF_OP_CONV2D, {x, no_data_desc(TF_DTYPE_F32, {3, 1, 3, 3})}, y, &p) == 0);  // C != weight[1]
    CHECK(supports(TF_OP_CONV2D, {x, no_data_desc(TF_DTYPE_F32, {3, 2, 3})}, y, &p) == 0);  // rank 3
    CHECK(supports(TF_OP_CONV2D, {no_data_desc(TF_DTYPE_I32, {1, 2, 5, 5}), no_data_desc(TF_DTYPE_I32, {3, 2, 3, 3})},
                   no_data_desc(TF_DTYPE_I32, {1, 3, 3, 3}), &p) == 0);
    CHECK(supports(TF_OP_CONV2D, {x, no_data_desc(TF_DTYPE_F16, {3, 2, 3, 3})}, y, &p) == 0);  // mixed dtypes
    CHECK(supports(TF_OP_CONV2D, {x, w}, y, nullptr) == 0);
    tf_params_conv2d small = p;
    small.struct_size = sizeof small - 4;
    CHECK(supports(TF_OP_CONV2D, {x, w}, y, &small) == 0);
    for (tf_params_conv2d bad : {conv_params(0, 1, 0, 0, 1, 1, 1), conv_params(1, 1, -1, 0, 1, 1, 1),
                                 conv_params(1, 1, 0, 0, 1, 0, 1), conv_params(1, 1, 0, 0, 1, 1, 0)})
        CHECK(supports(TF_OP_CONV2D, {x, w}, y, &bad) == 0);
    CHECK(supports(TF_OP_CONV2D, {x}, y, &p) == 0);

    // Groups: C = 4 = weight[1] * 2 and O = 6 divisible by 2; O = 5 is not.
    const tf_params_conv2d g2 = conv_params(1, 1, 1, 1, 1, 1, 2);
    const auto x4 = no_data_desc(TF_DTYPE_F32, {1, 4, 5, 5});
    CHECK(supports(TF_OP_CONV2D, {x4, no_data_desc(TF_DTYPE_F32, {6, 2, 3, 3})},
                   no_data_desc(TF_DTYPE_F32, {1, 6, 5, 5}), &g2) == 1);
    CHECK(supports(TF_OP_CONV2D, {x4, no_data_desc(TF_DTYPE_F32, {5, 2, 3, 3})},
                   no_data_desc(TF_DTYPE_F32, {1, 5, 5, 5}), &g2) == 0);
    CHECK(supports(TF_OP_CONV2D, {x4, no_data_desc(TF_DTYPE_F32, {6, 4, 3, 3})},
                   no_data_desc(TF_DTYPE_F32, {1, 6, 5, 5}), &g2) == 0);
    // Stride 2 on H = 6 gives OH = 3 from several H: grad_input takes H from its output.
    const tf_params_conv2d s2 = conv_params(2, 2, 0, 0, 1, 1, 1);
    CHECK(supports(TF_OP_CONV2D_GRAD_INPUT, {no_data_desc(TF_DTYPE_F32, {1, 3, 2, 2}), w},
                   no_data_desc(TF_DTYPE_F32, {1, 2, 6, 6}), &s2) == 1);
    CHECK(supports(TF_OP_CONV2D_GRAD_INPUT, {no_data_desc(TF_DTYPE_F32, {1, 3, 2, 2}), w},
                   no_data_desc(TF_DTYPE_F32, {1, 2, 7, 7}), &s2) == 0);

    const TensorDesc xt = make(TF_DTYPE_F32, {1, 2, 5, 5}), wt = make(TF_DTYPE_F32, {3, 2, 3, 3}),
                     yt = make(TF_DTYPE_F32, {1, 3, 4, 3});
    const std::string message = run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_CONV2D, {&xt, &wt}, yt, &p);
    CHECK(contains(message, "conv2d"));
    CHECK(contains(message, "[1, 3, 4, 3]"));
    CHECK(contains(message, "[1, 3, 3, 3]"));
    CHECK(untouched(yt));
}

namespace {

// Best of `runs` calls of fn, in wall time and in this thread's CPU time (which other processes
// on a busy machine do not inflate).
std::pair<double, double> best_time(int runs, const std::function<void()> &fn) {
    fn();
    double wall = 1e30, cpu = 1e30;
    for (int i = 0; i < runs; ++i) {
        timespec c0{}, c1{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        const auto w0 = std::chrono::steady_clock::now();
        fn();
        wall = std::min(wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        cpu = std::min(cpu, static_cast<double>(c1.tv_sec - c0.tv_sec) +
                                static_cast<double>(c1.tv_nsec - c0.tv_nsec) * 1e-9);
    }
    return {wall, cpu};
}

}  // namespace

TEST_CASE("speed of the Fashion-MNIST CNN's conv and pool shapes" * doctest::skip(std::getenv("TF_BENCH") == nullptr)) {
    const ConvCase k{64, 32, 14, 14, 64, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)};
    const TensorDesc x = f32(k.x_shape(), random_f32(static_cast<size_t>(count_of(k.x_shape())), 1));
    const TensorDesc w = f32(k.w_shape(), random_f32(static_cast<size_t>(count_of(k.w_shape())), 2));
    const TensorDesc y = make(TF_DTYPE_F32, k.y_shape()), dx = make(TF_DTYPE_F32, k.x_shape()),
                     dw = make(TF_DTYPE_F32, k.w_shape());
    const double flops = 2.0 * 64 * 64 * 14 * 14 * 32 * 9;
    struct {
        const char *name;
        uint32_t op;
        const TensorDesc *a, *b, *out;
    } const convs[] = {{"conv2d", TF_OP_CONV2D, &x, &w, &y},
                       {"conv2d_grad_input", TF_OP_CONV2D_GRAD_INPUT, &y, &w, &dx},
                       {"conv2d_grad_weight", TF_OP_CONV2D_GRAD_WEIGHT, &y, &x, &dw}};
    for (const auto &c : convs) {
        const auto [wall, cpu] = best_time(10, [&] { run_ok(c.op, {c.a, c.b}, *c.out, &k.p); });
        MESSAGE(std::string(c.name), " [64,32,14,14] x [64,32,3,3] pad 1: ", wall * 1e3, " ms wall (",
                flops / wall / 1e9, " GFLOP/s), ", cpu * 1e3, " ms cpu (", flops / cpu / 1e9, " GFLOP/s)");
    }

    // The first layer: one input channel, [64, 1, 28, 28] x [32, 1, 3, 3].
    const ConvCase first{64, 1, 28, 28, 32, 3, 3, conv_params(1, 1, 1, 1, 1, 1, 1)};
    const TensorDesc x1 = f32(first.x_shape(), random_f32(static_cast<size_t>(count_of(first.x_shape())), 4));
    const TensorDesc w1 = f32(first.w_shape(), random_f32(static_cast<size_t>(count_of(first.w_shape())), 5));
    const TensorDesc y1 = make(TF_DTYPE_F32, first.y_shape());
    const auto [wall1, cpu1] = best_time(10, [&] { run_ok(TF_OP_CONV2D, {&x1, &w1}, y1, &first.p); });
    const double flops1 = 2.0 * 64 * 32 * 28 * 28 * 9;
    MESSAGE("conv2d [64,1,28,28] x [32,1,3,3] pad 1: ", wall1 * 1e3, " ms wall (", flops1 / wall1 / 1e9, " GFLOP/s), ",
            cpu1 * 1e3, " ms cpu");

    // The first layer's 2x2 max pool, [64, 32, 28, 28] -> [64, 32, 14, 14].
    const TensorDesc px = f32({64, 32, 28, 28}, random_f32(64 * 32 * 28 * 28, 3));
    const TensorDesc py = make(TF_DTYPE_F32, {64, 32, 14, 14}), pdx = make(TF_DTYPE_F32, {64, 32, 28, 28});
    const tf_params_pool2d pp = pool_params(2, 2, 2, 2, 0, 0);
    const auto fwd = best_time(10, [&] { run_ok(TF_OP_MAX_POOL2D, {&px}, py, &pp); });
    const auto bwd = best_time(10, [&] { run_ok(TF_OP_MAX_POOL2D_BACKWARD, {&py, &px}, pdx, &pp); });
    MESSAGE("max_pool2d [64,32,28,28] 2x2: ", fwd.first * 1e3, " ms wall, ", fwd.second * 1e3, " ms cpu; backward ",
            bwd.first * 1e3, " ms wall, ", bwd.second * 1e3, " ms cpu");
}

// ---- Pooling --------------------------------------------------------------------------------

TEST_CASE("max_pool2d: windows, ties, padding as -inf, gradient to the first maximum") {
    // 4x4, 2x2 windows, stride 2. The top-left window ties (5 twice): the first one wins.
    const TensorDesc x = f32({1, 1, 4, 4}, {5, 1, 2, 3, 0, 5, 9, 4, -1, -2, 7, 7, -3, -4, 7, 6});
    const tf_params_pool2d p = pool_params(2, 2, 2, 2, 0, 0);
    const TensorDesc y = make(TF_DTYPE_F32, {1, 1, 2, 2});
    run_ok(TF_OP_MAX_POOL2D, {&x}, y, &p);
    CHECK(get(y) == Values{5, 9, -1, 7});
    const TensorDesc dy = f32({1, 1, 2, 2}, {1, 2, 3, 4});
    const TensorDesc dx = make(TF_DTYPE_F32, {1, 1, 4, 4});
    run_ok(TF_OP_MAX_POOL2D_BACKWARD, {&dy, &x}, dx, &p);
    CHECK(get(dx) == Values{1, 0, 0, 0, 0, 0, 2, 0, 3, 0, 4, 0, 0, 0, 0, 0});

    // Negative inputs with padding 1: padding must never win. 3x3 windows, stride 2, on 3x3.
    const TensorDesc xn = f32({1, 1, 3, 3}, {-5, -4, -3, -6, -9, -2, -7, -8, -1});
    const tf_params_pool2d pp = pool_params(3, 3, 2, 2, 1, 1);
    const TensorDesc yn = make(TF_DTYPE_F32, {1, 1, 2, 2});
    run_ok(TF_OP_MAX_POOL2D, {&xn}, yn, &pp);
    CHECK(get(yn) == Values{-4, -2, -6, -1});
    const TensorDesc dyn = f32({1, 1, 2, 2}, {1, 1, 1, 1});
    const TensorDesc dxn = make(TF_DTYPE_F32, {1, 1, 3, 3});
    run_ok(TF_OP_MAX_POOL2D_BACKWARD, {&dyn, &xn}, dxn, &pp);
    CHECK(get(dxn) == Values{0, 1, 0, 1, 0, 1, 0, 0, 1});

    // Overlapping windows (stride 1) add their gradients; NaN is the maximum.
    const TensorDesc xo = f32({1, 1, 1, 4}, {1, 3, NAN, 2});
    const tf_params_pool2d po = pool_params(1, 2, 1, 1, 0, 0);
    const TensorDesc yo = make(TF_DTYPE_F32, {1, 1, 1, 3});
    run_ok(TF_OP_MAX_POOL2D, {&xo}, yo, &po);
    const Values got = get(yo);
    CHECK(got[0] == 3);
    CHECK(std::isnan(got[1]));
    CHECK(std::isnan(got[2]));
    const TensorDesc dyo = f32({1, 1, 1, 3}, {10, 20, 40});
    const TensorDesc dxo = make(TF_DTYPE_F32, {1, 1, 1, 4});
    run_ok(TF_OP_MAX_POOL2D_BACKWARD, {&dyo, &xo}, dxo, &po);
    CHECK(get(dxo) == Values{0, 10, 60, 0});
}

// Values match exactly (check_close with no tolerance), and so do the signs of the non-NaN
// ones (-0 and +0 compare equal).
void check_same_floats(const Values &got, const Values &expected) {
    check_close(got, expected, 0.0);
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("element ", i, ": got ", got[i], ", expected ", expected[i]);
        if (!std::isnan(expected[i])) CHECK(std::signbit(got[i]) == std::signbit(expected[i]));
    }
}

TEST_CASE(
    "max_pool2d 2x2 stride 2 (the vector path): odd sizes, ties, NaN and signed zeros against a naive reference") {
    // Widths below, at and past the four and eight windows per step (a last group overlapping the
    // one before), odd heights and widths (a last row and column no window reads), odd numbers of
    // output rows, the example CNN's 14- and 7-wide outputs; values from a small set so that
    // windows tie often. Three mixes: NaN often (every plane has one: the rule's path), no NaN
    // (the forward's max instructions, where -0 and +0 tie), and one NaN in a single plane.
    const std::vector<Dims> shapes = {{2, 3, 7, 9},  {1, 2, 6, 21},  {1, 1, 5, 4},   {3, 1, 2, 2},
                                      {1, 2, 4, 17}, {2, 3, 28, 28}, {1, 3, 15, 14}, {2, 1, 10, 11},
                                      {1, 2, 5, 33}, {1, 1, 3, 16},  {2, 2, 9, 15}};
    const double pool[] = {0.5, -0.5, 1.0, 0.0, -0.0, NAN, -1.0, 0.5, INFINITY, -INFINITY};
    const tf_params_pool2d p = pool_params(2, 2, 2, 2, 0, 0);
    uint32_t seed = 40;
    for (int mix = 0; mix < 3; ++mix)
        for (const Dims &s : shapes) {
            CAPTURE(mix);
            CAPTURE(s[2]);
            CAPTURE(s[3]);
            std::mt19937 rng(seed++);
            std::uniform_int_distribution<int> pick(0, 9);
            Values xv(static_cast<size_t>(count_of(s)));
            for (double &v : xv) {
                v = pool[pick(rng)];
                while (mix > 0 && std::isnan(v)) v = pool[pick(rng)];
            }
            if (mix == 2) xv[xv.size() / 2] = NAN;
            const int64_t planes = s[0] * s[1], h = s[2], w = s[3], oh = h / 2, ow = w / 2;
            Values dyv = random_f32(static_cast<size_t>(planes * oh * ow), seed++);
            dyv[0] = -0.0;  // dx gets 0 + dy, as in the general path: +0
            dyv[1] = NAN;
            Values want_y(dyv.size()), want_dx(xv.size(), 0.0);
            for (int64_t pl = 0; pl < planes; ++pl)
                for (int64_t oy = 0; oy < oh; ++oy)
                    for (int64_t ox = 0; ox < ow; ++ox) {
                        // The first maximum in window order; NaN beats numbers, the first NaN wins.
                        size_t at = static_cast<size_t>((pl * h + 2 * oy) * w + 2 * ox);
                        for (int64_t i = 0; i < 2; ++i)
                            for (int64_t j = 0; j < 2; ++j) {
                                const size_t e = static_cast<size_t>((pl * h + 2 * oy + i) * w + 2 * ox + j);
                                if (xv[e] > xv[at] || (std::isnan(xv[e]) && !std::isnan(xv[at]))) at = e;
                            }
                        const size_t o = static_cast<size_t>((pl * oh + oy) * ow + ox);
                        want_y[o] = xv[at];
                        want_dx[at] = static_cast<double>(0.0f + static_cast<float>(dyv[o]));
                    }
            const TensorDesc x = f32(s, xv), y = make(TF_DTYPE_F32, {s[0], s[1], oh, ow});
            run_ok(TF_OP_MAX_POOL2D, {&x}, y, &p);
            check_same_floats(get(y), want_y);
            const TensorDesc dy = f32({s[0], s[1], oh, ow}, dyv), dx = make(TF_DTYPE_F32, s);
            run_ok(TF_OP_MAX_POOL2D_BACKWARD, {&dy, &x}, dx, &p);
            check_same_floats(get(dx), want_dx);
        }
}

TEST_CASE("max_pool2d's general windows (the value-only forward): padding, strides 1 to 3, ties, NaN and signed "
          "zeros against a naive reference") {
    // resnet's 3x3 stride 2 padding 1 (the four-window vector steps and their scalar tails),
    // stride 1, a 2x3 window, stride 3 (scalar only), padding on one axis, a window larger than
    // the stride; values from a small set so that windows tie often.
    struct PoolCase {
        Dims shape;
        int kh, kw, sh, sw, ph, pw;
    };
    const PoolCase cases[] = {
        {{1, 2, 112, 112}, 3, 3, 2, 2, 1, 1}, {{2, 3, 9, 10}, 3, 3, 2, 2, 1, 1},  {{1, 2, 7, 13}, 3, 3, 1, 1, 1, 1},
        {{1, 1, 8, 11}, 2, 3, 2, 2, 1, 1},    {{2, 2, 10, 17}, 3, 3, 3, 3, 1, 1}, {{1, 3, 6, 21}, 3, 2, 1, 2, 0, 1},
        {{1, 1, 5, 4}, 4, 4, 1, 1, 2, 2},
    };
    const double values[] = {0.5, -0.5, 1.0, 0.0, -0.0, NAN, -1.0, 0.5, -INFINITY};
    uint32_t seed = 70;
    for (const PoolCase &k : cases) {
        CAPTURE(k.shape[2]);
        CAPTURE(k.shape[3]);
        CAPTURE(k.kh);
        CAPTURE(k.sh);
        std::mt19937 rng(seed++);
        std::uniform_int_distribution<int> pick(0, 8);
        Values xv(static_cast<size_t>(count_of(k.shape)));
        for (double &v : xv) v = values[pick(rng)];
        const int64_t planes = k.shape[0] * k.shape[1], h = k.shape[2], w = k.shape[3];
        const int64_t oh = (h + 2 * k.ph - k.kh) / k.sh + 1, ow = (w + 2 * k.pw - k.kw) / k.sw + 1;
        Values want(static_cast<size_t>(planes * oh * ow));
        for (int64_t pl = 0; pl < planes; ++pl)
            for (int64_t oy = 0; oy < oh; ++oy)
                for (int64_t ox = 0; ox < ow; ++ox) {
                    // The first maximum in window order over the input elements (padding never
                    // wins); NaN beats numbers, the first NaN wins; -inf for no element.
                    double best = -INFINITY;
                    bool any = false;
                    for (int64_t i = 0; i < k.kh; ++i)
                        for (int64_t j = 0; j < k.kw; ++j) {
                            const int64_t iy = oy * k.sh - k.ph + i, ix = ox * k.sw - k.pw + j;
                            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                            const double v = xv[static_cast<size_t>((pl * h + iy) * w + ix)];
                            if (!any || v > best || (std::isnan(v) && !std::isnan(best))) best = v;
                            any = true;
                        }
                    want[static_cast<size_t>((pl * oh + oy) * ow + ox)] = best;
                }
        const TensorDesc x = f32(k.shape, xv), y = make(TF_DTYPE_F32, {k.shape[0], k.shape[1], oh, ow});
        const tf_params_pool2d p = pool_params(k.kh, k.kw, k.sh, k.sw, k.ph, k.pw);
        run_ok(TF_OP_MAX_POOL2D, {&x}, y, &p);
        check_same_floats(get(y), want);
    }
}

TEST_CASE("avg_pool2d with and without count_include_pad, and its backward") {
    const TensorDesc x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    const TensorDesc y = make(TF_DTYPE_F32, {1, 1, 2, 2});
    // 2x2 windows, stride 2, padding 1: windows {1}, {2,3}, {4,7}, {5,6,8,9}.
    const tf_params_pool2d ex = pool_params(2, 2, 2, 2, 1, 1, false);
    run_ok(TF_OP_AVG_POOL2D, {&x}, y, &ex);
    CHECK(get(y) == Values{1, 2.5, 5.5, 7});
    const tf_params_pool2d in = pool_params(2, 2, 2, 2, 1, 1, true);
    run_ok(TF_OP_AVG_POOL2D, {&x}, y, &in);
    CHECK(get(y) == Values{0.25, 1.25, 2.75, 7});

    const TensorDesc dy = f32({1, 1, 2, 2}, {4, 8, 12, 16});
    const TensorDesc dx = make(TF_DTYPE_F32, {1, 1, 3, 3});
    run_ok(TF_OP_AVG_POOL2D_BACKWARD, {&dy}, dx, &ex);
    CHECK(get(dx) == Values{4, 4, 4, 6, 4, 4, 6, 4, 4});
    run_ok(TF_OP_AVG_POOL2D_BACKWARD, {&dy}, dx, &in);
    CHECK(get(dx) == Values{1, 2, 2, 3, 4, 4, 3, 4, 4});

    // Overlapping 3x3 windows, stride 1, padding 1: the backward is the forward's adjoint.
    const Values xv = random_f32(2 * 3 * 5 * 4, 5), dyv = random_f32(2 * 3 * 5 * 4, 6);
    const TensorDesc xr = f32({2, 3, 5, 4}, xv), yr = make(TF_DTYPE_F32, {2, 3, 5, 4});
    const TensorDesc dyr = f32({2, 3, 5, 4}, dyv), dxr = make(TF_DTYPE_F32, {2, 3, 5, 4});
    for (bool include : {false, true}) {
        const tf_params_pool2d p = pool_params(3, 3, 1, 1, 1, 1, include);
        run_ok(TF_OP_AVG_POOL2D, {&xr}, yr, &p);
        run_ok(TF_OP_AVG_POOL2D_BACKWARD, {&dyr}, dxr, &p);
        CHECK(dot(get(yr), dyv) == doctest::Approx(dot(xv, get(dxr))).epsilon(1e-6));
    }
}

TEST_CASE("pooling on strided f16 input, and supports() on pooling descriptors") {
    // x [1, 2, 2, 4] stored as [1, 2, 4, 2] transposed in the last two axes.
    const TensorDesc x = strided(TF_DTYPE_F16, {1, 2, 2, 4}, {16, 8, 1, 2}, 0, 16);
    set(x, {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8});
    const TensorDesc y = make(TF_DTYPE_F16, {1, 2, 1, 2});
    const tf_params_pool2d p = pool_params(2, 2, 2, 2, 0, 0);
    run_ok(TF_OP_MAX_POOL2D, {&x}, y, &p);
    CHECK(get(y) == Values{6, 8, -1, -3});
    run_ok(TF_OP_AVG_POOL2D, {&x}, y, &p);
    CHECK(get(y) == Values{3.5, 5.5, -3.5, -5.5});

    auto supports = [](uint32_t op, std::vector<tf_tensor_desc> in, tf_tensor_desc out, const void *params) {
        return Call(op, std::move(in), out, params).supports();
    };
    const auto xd = no_data_desc(TF_DTYPE_F32, {1, 2, 4, 4}), yd = no_data_desc(TF_DTYPE_F32, {1, 2, 2, 2});
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, yd, &p) == 1);
    CHECK(supports(TF_OP_AVG_POOL2D, {xd}, yd, &p) == 1);
    CHECK(supports(TF_OP_MAX_POOL2D_BACKWARD, {yd, xd}, xd, &p) == 1);
    CHECK(supports(TF_OP_AVG_POOL2D_BACKWARD, {yd}, xd, &p) == 1);
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, no_data_desc(TF_DTYPE_F32, {1, 2, 3, 2}), &p) == 0);
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, no_data_desc(TF_DTYPE_F32, {1, 3, 2, 2}), &p) == 0);
    CHECK(supports(TF_OP_MAX_POOL2D_BACKWARD, {yd, xd}, no_data_desc(TF_DTYPE_F32, {1, 2, 5, 4}), &p) == 0);
    CHECK(supports(TF_OP_MAX_POOL2D_BACKWARD, {yd, no_data_desc(TF_DTYPE_F32, {1, 2, 5, 4})}, xd, &p) == 0);
    CHECK(supports(TF_OP_MAX_POOL2D, {no_data_desc(TF_DTYPE_I64, {1, 2, 4, 4})},
                   no_data_desc(TF_DTYPE_I64, {1, 2, 2, 2}), &p) == 0);
    const tf_params_pool2d too_much_pad = pool_params(2, 2, 2, 2, 2, 0);
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, no_data_desc(TF_DTYPE_F32, {1, 2, 4, 2}), &too_much_pad) == 0);
    const tf_params_pool2d zero_stride = pool_params(2, 2, 0, 2, 0, 0);
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, yd, &zero_stride) == 0);
    CHECK(supports(TF_OP_MAX_POOL2D, {xd}, yd, nullptr) == 0);
}
