// GPU parity: every op the cuda plugin supports, on cuda against the cpu reference, with
// TINYFIN_FALLBACK=error so an op that silently ran on cpu fails; then a few training steps of
// the Fashion-MNIST CNN on cuda with zero fallbacks and no host round trips (stats()).
//
// Built always, run only by scripts/gpu-check (a plain `meson test` has no GPU to give it).
//
//   gpu-parity [--device NAME] [--allow-fallback] [--filter TEXT] [--skip-training] [--list]
//
// --device picks the backend under test (default cuda); with another backend and
// --allow-fallback the harness itself can be exercised on a machine without a GPU. Exit status:
// 0 all passed, 1 a case failed, 77 the device is not available (the reason is printed).
#include <tinyfin/nn.hpp>
#include <tinyfin/tinyfin.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace tinyfin;

namespace {

const Device cpu_device{"cpu", 0};

// ---- Inputs -----------------------------------------------------------------------------------------

// Deterministic values from seed in [lo, hi): the same bits on every device, because they are made
// on cpu (cast there too) and then copied.
Tensor input(const Device &device, const Shape &shape, uint64_t seed, DType dtype = DType::f32, double lo = -2,
             double hi = 2) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 1);
    std::uniform_real_distribution<double> uniform(lo, hi);
    Tensor t;
    if (dtype == DType::i32 || dtype == DType::i64 || dtype == DType::boolean) {
        std::vector<int64_t> v(static_cast<size_t>(n));
        for (auto &x : v) x = static_cast<int64_t>(std::floor(uniform(rng)));
        t = from_vector(v, shape, cpu_device);
    } else {
        std::vector<float> v(static_cast<size_t>(n));
        for (auto &x : v) x = static_cast<float>(uniform(rng));
        t = from_vector(v, shape, cpu_device);
    }
    if (t.dtype() != dtype) t = cast(t, dtype);
    return t.to(device).detach();
}

Tensor labels(const Device &device, const Shape &shape, int64_t classes, uint64_t seed, DType dtype = DType::i64) {
    return input(device, shape, seed, dtype, 0, static_cast<double>(classes));
}

// ---- Comparison ---------------------------------------------------------------------------------------

struct Host {
    bool is_float = false;
    std::vector<double> values;
};

Host to_host(const Tensor &t) {
    Tensor c = t.to(cpu_device);
    Host h;
    if (c.dtype() == DType::f32 || c.dtype() == DType::f16 || c.dtype() == DType::bf16) {
        h.is_float = true;
        for (float v : cast(c, DType::f32).to_vector<float>()) h.values.push_back(v);
    } else {
        for (int64_t v : cast(c, DType::i64).to_vector<int64_t>()) h.values.push_back(static_cast<double>(v));
    }
    return h;
}

// Empty when equal within tol (normalised mean squared error over finite elements; NaN and
// infinities must sit at the same places), else what differs.
std::string compare(const Tensor &got, const Tensor &want, double tol, double *nmse_out) {
    if (got.shape() != want.shape()) return "shape " + shape_str(got.shape()) + " vs " + shape_str(want.shape());
    if (got.dtype() != want.dtype())
        return std::string("dtype ") + dtype_name(got.dtype()) + " vs " + dtype_name(want.dtype());
    const Host g = to_host(got), w = to_host(want);
    double err = 0, ref = 0;
    for (size_t i = 0; i < w.values.size(); ++i) {
        const double a = g.values[i], b = w.values[i];
        if (!g.is_float) {
            if (a != b) return "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(b);
            continue;
        }
        if (std::isnan(a) != std::isnan(b) || (std::isinf(b) && a != b) || (std::isinf(a) && a != b))
            return "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(b);
        if (!std::isfinite(b)) continue;
        err += (a - b) * (a - b);
        ref += b * b;
    }
    const double nmse = ref > 0 ? err / ref : err;
    *nmse_out = std::max(*nmse_out, nmse);
    if (nmse > tol) return "nmse " + std::to_string(nmse) + " > " + std::to_string(tol);
    return "";
}

// ---- Cases ----------------------------------------------------------------------------------------------

// A case builds its inputs on the device it is given and returns the tensors to compare (outputs
// and, for differentiable ops, input gradients).
using Build = std::function<std::vector<Tensor>(const Device &)>;

struct Case {
    std::string name;
    Build build;
    double tol;
};

std::vector<Case> cases;

void add_case(std::string name, double tol, Build build) { cases.push_back({std::move(name), std::move(build), tol}); }

double tol_for(DType dtype) {
    switch (dtype) {
    case DType::f16: return 1e-5;
    case DType::bf16: return 1e-4;
    case DType::f32: return 1e-10;
    default: return 0;
    }
}

const char *short_name(DType d) { return dtype_name(d); }

// Gradients of sum(y * r) for a fixed random r: exercises every backward rule with a non-trivial
// upstream gradient.
std::vector<Tensor> with_grads(const Tensor &y, std::vector<Tensor> leaves, uint64_t seed) {
    Tensor r = input(y.device(), y.shape(), seed, y.dtype());
    sum(mul(y, r)).backward();
    std::vector<Tensor> out{y.detach()};
    for (Tensor &leaf : leaves) out.push_back(leaf.grad());
    return out;
}

void elementwise_cases() {
    const DType floats[] = {DType::f32, DType::f16, DType::bf16};
    using Binary = Tensor (*)(const Tensor &, const Tensor &);
    const std::pair<const char *, Binary> binary[] = {{"add", add},        {"sub", sub}, {"mul", mul},
                                                      {"div", div},        {"pow", pow}, {"maximum", maximum},
                                                      {"minimum", minimum}};
    for (DType dt : floats)
        for (auto [name, fn] : binary) {
            const bool positive = std::string(name) == "pow";
            add_case(std::string(name) + " " + short_name(dt) + " [4,5,6] with [5,1] broadcast", tol_for(dt) * 10,
                     [=](const Device &d) -> std::vector<Tensor> {
                         Tensor a = input(d, {4, 5, 6}, 1, dt, positive ? 0.1 : -2, 2);
                         Tensor b = input(d, {5, 1}, 2, dt, positive ? -2 : 0.5, 2);
                         return {fn(a, b), fn(a.transpose(0, 2), b.view({1, 5, 1}).expand({6, 5, 4}))};
                     });
        }
    for (DType dt : {DType::i32, DType::i64})
        for (auto [name, fn] : binary) {
            const std::string n = name;
            if (n == "div" || n == "pow") continue;  // cpu only: bad operands are errors
            add_case(n + " " + short_name(dt) + " strided", 0, [=](const Device &d) -> std::vector<Tensor> {
                Tensor a = input(d, {6, 8}, 3, dt, -100, 100);
                Tensor b = input(d, {8, 6}, 4, dt, -100, 100);
                return {fn(a, b.transpose(0, 1)), fn(a.slice(1, 0, 8, 2), b.slice(0, 1, 8, 2).transpose(0, 1))};
            });
        }

    using Unary = Tensor (*)(const Tensor &);
    const std::pair<const char *, Unary> unary[] = {
        {"neg", neg},         {"exp", exp},     {"relu", relu},     {"abs", abs}, {"log", log},
        {"sqrt", sqrt},       {"rsqrt", rsqrt}, {"sin", sin},       {"cos", cos}, {"tanh", tanh},
        {"sigmoid", sigmoid}, {"silu", silu},   {"square", square}, {"erf", erf}};
    for (DType dt : floats) {
        for (auto [name, fn] : unary) {
            const std::string n = name;
            const bool positive = n == "log" || n == "sqrt" || n == "rsqrt";
            add_case(n + " " + short_name(dt), tol_for(dt) * 100, [=](const Device &d) -> std::vector<Tensor> {
                Tensor x = input(d, {7, 9}, 5, dt, positive ? 0.05 : -4, 4);
                x.requires_grad_();
                Tensor y = fn(x.transpose(0, 1));
                if (dt != DType::f32) return {y};
                return with_grads(y, {x}, 6);
            });
        }
        add_case(std::string("gelu ") + short_name(dt), tol_for(dt) * 100, [=](const Device &d) -> std::vector<Tensor> {
            Tensor x = input(d, {200}, 7, dt, -8, 8);
            x.requires_grad_();
            // gelu_backward is the gradient's op (the MLP's backward) and a public op of its own.
            std::vector<Tensor> out = {gelu(x), gelu(x, true),
                                       gelu_backward(input(d, {200}, 77, dt, -2, 2), x.detach())};
            if (dt != DType::f32) return out;
            for (const Tensor &g : with_grads(gelu(x), {x}, 78)) out.push_back(g);
            return out;
        });
        add_case(std::string("clamp ") + short_name(dt), tol_for(dt), [=](const Device &d) -> std::vector<Tensor> {
            Tensor x = input(d, {50}, 8, dt, -3, 3);
            return {clamp(x, -1, 2), clamp(x, -INFINITY, 0.5), clamp(x, 0.25, INFINITY)};
        });
    }
    for (DType dt : {DType::i32, DType::i64})
        add_case(std::string("int unary ") + short_name(dt), 0, [=](const Device &d) -> std::vector<Tensor> {
            Tensor x = input(d, {40}, 9, dt, -50, 50);
            return {neg(x), relu(x), abs(x), square(x), clamp(x, -10.5, 20.5), clamp(x, -INFINITY, 3)};
        });

    for (DType dt : {DType::f32, DType::f16, DType::i32, DType::i64, DType::boolean})
        add_case(std::string("compare and where ") + short_name(dt), 0, [=](const Device &d) -> std::vector<Tensor> {
            Tensor a = input(d, {5, 6}, 10, dt, -3, 3);
            Tensor b = input(d, {6}, 11, dt, -3, 3);
            Tensor c = gt(a, b);
            return {eq(a, b), ne(a, b), lt(a, b),       le(a, b),
                    c,        ge(a, b), where(c, a, b), where(c.transpose(0, 1), a.transpose(0, 1), b.view({6, 1}))};
        });
    add_case("compare f32 with NaN", 0, [](const Device &d) -> std::vector<Tensor> {
        Tensor a = from_vector(std::vector<float>{1, NAN, 3, -0.0f, INFINITY}, {5}, cpu_device).to(d);
        Tensor b = from_vector(std::vector<float>{1, 1, NAN, 0.0f, INFINITY}, {5}, cpu_device).to(d);
        return {eq(a, b), ne(a, b), lt(a, b), ge(a, b), maximum(a, b), minimum(a, b)};
    });

    const DType all[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean};
    for (DType dt : all) {
        add_case(std::string("fill ") + short_name(dt), 0, [=](const Device &d) -> std::vector<Tensor> {
            return {full({3, 5}, 2.5, dt, d), full({}, -7.75, dt, d), zeros({0, 4}, dt, d), full({4}, 1e20, dt, d)};
        });
        add_case(std::string("contiguous ") + short_name(dt), 0, [=](const Device &d) -> std::vector<Tensor> {
            Tensor x = input(d, {4, 6, 5}, 12, dt, -9, 9);
            return {x.transpose(0, 2).contiguous(), x.slice(1, 1, 6, 2).contiguous(),
                    x.slice(2, 0, 1).expand({4, 6, 3}).contiguous()};
        });
        for (DType to : all) {
            if (to == dt) continue;
            add_case(std::string("cast ") + short_name(dt) + " -> " + short_name(to), 0,
                     [=](const Device &d) -> std::vector<Tensor> {
                         Tensor x = input(d, {3, 7}, 13, dt, -300, 300);
                         return {cast(x, to), cast(x.transpose(0, 1), to)};
                     });
        }
    }
    add_case("assign_ into a strided view", 0, [](const Device &d) -> std::vector<Tensor> {
        Tensor x = zeros({6, 6}, DType::f32, d);
        Tensor v = x.slice(0, 0, 6, 2).slice(1, 1, 6, 2);
        v.assign_(input(d, {3, 3}, 14));
        return {x};
    });
}

void reduce_cases() {
    const std::vector<std::vector<int>> axes_list = {{}, {0}, {1}, {2}, {0, 2}, {1, 2}};
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64}) {
        const bool is_float = dt == DType::f32 || dt == DType::f16 || dt == DType::bf16;
        for (const auto &axes : axes_list) {
            std::string label;
            for (int a : axes) label += std::to_string(a);
            add_case(std::string("reduce ") + short_name(dt) + " axes {" + label + "}", is_float ? tol_for(dt) : 0,
                     [=](const Device &d) -> std::vector<Tensor> {
                         Tensor x = input(d, {6, 70, 5}, 15, dt, -20, 20);
                         Tensor xt = x.transpose(0, 2);  // [5, 70, 6]
                         std::vector<Tensor> out{sum(x, axes), max(x, axes, true), min(xt, axes)};
                         if (is_float) {
                             out.push_back(mean(x, axes));
                             out.push_back(var(xt, axes, 1, true));
                             out.push_back(var(x, axes, 0));
                         }
                         return out;
                     });
        }
        add_case(std::string("argmax argmin ") + short_name(dt), 0, [=](const Device &d) -> std::vector<Tensor> {
            Tensor x = input(d, {9, 300}, 16, dt, -5, 5);  // many ties
            return {argmax(x, 0), argmax(x, 1), argmin(x, 1, true), argmin(x.transpose(0, 1), 1)};
        });
    }
    add_case("sum of a large vector", 1e-10, [](const Device &d) -> std::vector<Tensor> {
        Tensor x = input(d, {3000000}, 17);
        return {sum(x), mean(x)};
    });
}

void matmul_cases() {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
        const double tol = dt == DType::f32 ? 1e-10 : tol_for(dt) * 10;
        add_case(
            std::string("matmul ") + short_name(dt) + " plain and transposed", tol,
            [=](const Device &d) -> std::vector<Tensor> {
                Tensor a = input(d, {37, 50}, 20, dt), b = input(d, {50, 29}, 21, dt);
                Tensor at = input(d, {50, 37}, 22, dt).transpose(0, 1), bt = input(d, {29, 50}, 23, dt).transpose(0, 1);
                return {matmul(a, b), matmul(at, b), matmul(a, bt), matmul(at, bt)};
            });
        add_case(std::string("matmul ") + short_name(dt) + " batched and broadcast", tol,
                 [=](const Device &d) -> std::vector<Tensor> {
                     Tensor a = input(d, {2, 3, 16, 8}, 24, dt), b = input(d, {2, 3, 8, 12}, 25, dt);
                     Tensor w = input(d, {8, 12}, 26, dt);
                     return {matmul(a, b), matmul(a, w), matmul(input(d, {16, 8}, 27, dt), b),
                             matmul(a.transpose(2, 3).transpose(2, 3), b.transpose(-1, -2).transpose(-1, -2))};
                 });
    }
    add_case("matmul f32 vectors and empty", 1e-10, [](const Device &d) -> std::vector<Tensor> {
        Tensor v = input(d, {40}, 28), m = input(d, {40, 7}, 29);
        return {matmul(v, m), matmul(m.transpose(0, 1), v), matmul(v, v),
                matmul(input(d, {3, 0}, 30), input(d, {0, 4}, 31)), matmul(input(d, {0, 5}, 32), input(d, {5, 2}, 33))};
    });
    add_case("matmul f32 with grads (the Linear layer)", 1e-10, [](const Device &d) -> std::vector<Tensor> {
        Tensor x = input(d, {64, 300}, 34), w = input(d, {128, 300}, 35, DType::f32, -0.1, 0.1);
        x.requires_grad_();
        w.requires_grad_();
        return with_grads(matmul(x, w.transpose(0, 1)), {x, w}, 36);
    });
}

// A quantized weight [rows, k] of dtype, encoded on cpu (quantize has no cuda kernel) and moved to
// the device: the same blocks on both sides.
Tensor quantized(const Device &device, DType dtype, int64_t rows, int64_t k, uint64_t seed) {
    return quantize(input(cpu_device, {rows, k}, seed, DType::f32, -1, 1), dtype).to(device);
}

// The quantized ops (quant.cu): dequantize and embedding_q bit for bit (tolerance 0), matmul_q
// within 1e-4 NMSE of the cpu kernel, which rounds the activations to 8 bits (conform's bound);
// tests/ops/test_quant.cpp (ops-quant-cuda) holds the cuda results to float64 products.
void quant_cases() {
    const DType types[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                           DType::q4_k, DType::q5_k, DType::q6_k, DType::q8_k};
    for (DType qt : types) {
        const std::string q = short_name(qt);
        add_case("dequantize " + q + " to f32, f16, bf16, a row view", 0, [=](const Device &d) -> std::vector<Tensor> {
            Tensor w = quantized(d, qt, 6, 512, 40);
            return {dequantize(w), dequantize(w, DType::f16), dequantize(w, DType::bf16), dequantize(w.slice(0, 2, 5)),
                    dequantize(w.reshape({2, 3, 512}))};
        });
        add_case("embedding_q " + q + " i64 and i32 indices, f32 and f16", 0,
                 [=](const Device &d) -> std::vector<Tensor> {
                     Tensor w = quantized(d, qt, 9, 256, 41);
                     Tensor i64 = from_vector(std::vector<int64_t>{8, 0, 3, 3, 7, 1}, {2, 3}, cpu_device).to(d);
                     Tensor i32 = from_vector(std::vector<int32_t>{5, 2, 6}, {3}, cpu_device).to(d);
                     return {embedding_q(w, i64), embedding_q(w, i32, DType::f16), embedding(w, i32)};
                 });
        // M = 1 (one row of x per pass), 7 (eight per pass) and 80 (dequantized tiles and cuBLAS).
        add_case("matmul_q " + q + " x rows 1, 7, 80", 1e-4, [=](const Device &d) -> std::vector<Tensor> {
            Tensor w = quantized(d, qt, 45, 768, 42);
            return {matmul_q(input(d, {1, 768}, 43), w), matmul_q(input(d, {7, 768}, 44), w),
                    matmul_q(input(d, {2, 40, 768}, 45), w)};
        });
    }
    add_case("matmul_q q4_0 f16/bf16 x, out in x's dtype and f32, strided x", 1e-4,
             [](const Device &d) -> std::vector<Tensor> {
                 Tensor w = quantized(d, DType::q4_0, 33, 256, 46);
                 Tensor xh = input(d, {3, 256}, 47, DType::f16), xb = input(d, {70, 256}, 48, DType::bf16);
                 Tensor wide = input(d, {5, 512}, 49).slice(1, 0, 512, 2);
                 return {matmul_q(xh, w),   matmul_q(xh, w, DType::f32),
                         matmul_q(xb, w),   matmul_q(xb, w, DType::f32),
                         matmul_q(wide, w), matmul_q(input(d, {96, 512}, 50).slice(1, 0, 256), w)};
             });
    // A weight of 4100 x 4096: 64 MiB of f32 tile take 4096 rows, so the cuBLAS path runs two tiles.
    add_case("matmul_q q4_k 80 x 4096 by 4100 x 4096 (two cuBLAS tiles)", 1e-4,
             [](const Device &d) -> std::vector<Tensor> {
                 Tensor w = quantized(d, DType::q4_k, 4100, 4096, 51);
                 return {matmul_q(input(d, {80, 4096}, 52), w), matmul_q(input(d, {1, 4096}, 53), w)};
             });
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64})
        add_case(std::string("cumsum ") + short_name(dt) + " inclusive, exclusive, reverse, strided", 0,
                 [=](const Device &d) -> std::vector<Tensor> {
                     Tensor x = input(d, {4, 37, 5}, 54, dt, -9, 9);
                     return {cumsum(x, 1),
                             cumsum(x, 2, true),
                             cumsum(x, 0, false, true),
                             cumsum(x, 1, true, true),
                             cumsum(x.transpose(0, 2), 1),
                             cumsum(input(d, {3000}, 55, dt, -9, 9), 0)};
                 });
}

void nn_cases() {
    struct ConvConfig {
        const char *name;
        Shape x, w;
        Conv2dOptions o;
    };
    Conv2dOptions p1;
    p1.pad_h = p1.pad_w = 1;
    Conv2dOptions s2;
    s2.stride_h = s2.stride_w = 2;
    s2.pad_h = 1;
    Conv2dOptions dil;
    dil.dilation_h = dil.dilation_w = 2;
    dil.pad_h = dil.pad_w = 2;
    Conv2dOptions grouped;
    grouped.groups = 4;
    grouped.pad_h = grouped.pad_w = 1;
    const ConvConfig configs[] = {
        {"fmnist conv1", {8, 1, 28, 28}, {32, 1, 3, 3}, p1}, {"fmnist conv2", {8, 32, 14, 14}, {64, 32, 3, 3}, p1},
        {"stride 2", {2, 6, 11, 9}, {5, 6, 3, 2}, s2},       {"dilation 2", {2, 3, 12, 12}, {4, 3, 3, 3}, dil},
        {"groups 4", {2, 8, 7, 7}, {12, 2, 3, 3}, grouped},
    };
    // bf16 convolutions need sm_80 (cuDNN); gpu-check runs on such GPUs.
    for (DType dt : {DType::f32, DType::f16, DType::bf16})
        for (const ConvConfig &c : configs) {
            const double tol = dt == DType::f32 ? 1e-9 : dt == DType::f16 ? 1e-5 : 1e-3;
            add_case(std::string("conv2d ") + short_name(dt) + " " + c.name + " forward and backward", tol,
                     [=](const Device &d) -> std::vector<Tensor> {
                         Tensor x = input(d, c.x, 40, dt), w = input(d, c.w, 41, dt, -0.3, 0.3);
                         Tensor b = input(d, {c.w[0]}, 42, dt);
                         x.requires_grad_();
                         w.requires_grad_();
                         b.requires_grad_();
                         return with_grads(conv2d(x, w, b, c.o), {x, w, b}, 43);
                     });
        }
    add_case("conv2d f32 strided input", 1e-9, [](const Device &d) -> std::vector<Tensor> {
        Tensor x = input(d, {3, 4, 9, 9}, 44).transpose(2, 3);
        Tensor w = input(d, {2, 4, 3, 3}, 45);
        return {conv2d(x, w)};
    });

    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
        Pool2dOptions plain, padded, overlapping;
        padded.pad_h = padded.pad_w = 1;
        padded.kernel_h = padded.kernel_w = 3;
        padded.stride_h = padded.stride_w = 2;
        padded.count_include_pad = false;
        overlapping.kernel_h = overlapping.kernel_w = 3;
        overlapping.stride_h = overlapping.stride_w = 1;
        for (auto [name, o] :
             {std::pair{"2x2", plain}, std::pair{"3x3 s2 p1", padded}, std::pair{"3x3 s1", overlapping}}) {
            add_case(std::string("pooling ") + short_name(dt) + " " + name, tol_for(dt),
                     [=](const Device &d) -> std::vector<Tensor> {
                         Tensor x = input(d, {2, 3, 9, 8}, 46, dt, -4, 4);
                         Tensor q = input(d, {2, 3, 9, 8}, 47, dt);
                         x.requires_grad_();
                         q.requires_grad_();
                         std::vector<Tensor> out = with_grads(max_pool2d(x, o), {x}, 48);
                         Pool2dOptions a = o;
                         a.count_include_pad = !o.count_include_pad;
                         for (Tensor &t : with_grads(add(avg_pool2d(q, o), avg_pool2d(q, a)), {q}, 49))
                             out.push_back(t);
                         return out;
                     });
        }
        add_case(std::string("softmax ") + short_name(dt), tol_for(dt) * 10,
                 [=](const Device &d) -> std::vector<Tensor> {
                     Tensor x = input(d, {4, 37, 5}, 50, dt, -6, 6);
                     x.requires_grad_();
                     std::vector<Tensor> out = with_grads(add(softmax(x, 1), log_softmax(x, -1)), {x}, 51);
                     out.push_back(softmax(x.detach().transpose(0, 2), 0));
                     return out;
                 });
        add_case(std::string("layer_norm rms_norm ") + short_name(dt), tol_for(dt) * 10,
                 [=](const Device &d) -> std::vector<Tensor> {
                     Tensor x = input(d, {6, 4, 33}, 52, dt);
                     Tensor w = input(d, {4, 33}, 53, dt), b = input(d, {4, 33}, 54, dt);
                     x.requires_grad_();
                     w.requires_grad_();
                     b.requires_grad_();
                     return with_grads(add(layer_norm(x, 2, w, b), rms_norm(x, 1, w.slice(0, 0, 1).view({33}))),
                                       {x, w, b}, 55);
                 });
        add_case(std::string("rope ") + short_name(dt), tol_for(dt) * 10, [=](const Device &d) -> std::vector<Tensor> {
            Tensor x = input(d, {2, 3, 17, 8}, 56, dt);
            x.requires_grad_();
            return with_grads(add(rope(x, 10000, false, 5), rope(x, 500, true)), {x}, 57);
        });
        add_case(std::string("embedding ") + short_name(dt), tol_for(dt), [=](const Device &d) -> std::vector<Tensor> {
            Tensor w = input(d, {11, 6}, 58, dt);
            w.requires_grad_();
            Tensor idx = labels(d, {4, 9}, 11, 59, DType::i32);
            std::vector<Tensor> out = {embedding(w.detach(), labels(d, {5}, 11, 60))};
            for (Tensor &t : with_grads(embedding(w, idx), {w}, 61)) out.push_back(t);
            return out;
        });
        add_case(std::string("cross_entropy ") + short_name(dt), tol_for(dt) * 10,
                 [=](const Device &d) -> std::vector<Tensor> {
                     Tensor logits = input(d, {64, 10}, 62, dt, -5, 5);
                     logits.requires_grad_();
                     Tensor y = labels(d, {64}, 10, 63);
                     Tensor y_ignored = where(lt(y, scalar_like(y, 2)), full({64}, -100, DType::i64, d), y);
                     std::vector<Tensor> out = with_grads(
                         add(cross_entropy(logits, y), cross_entropy(logits, y_ignored, Reduction::sum)), {logits}, 64);
                     out.push_back(
                         cross_entropy(logits.detach(), labels(d, {64}, 10, 65, DType::i32), Reduction::none));
                     return out;
                 });
    }
    for (DType dt : {DType::f32, DType::f16, DType::bf16})
        add_case(
            std::string("attention ") + short_name(dt), tol_for(dt) * 10, [=](const Device &d) -> std::vector<Tensor> {
                Tensor q = input(d, {2, 3, 5, 8}, 70, dt), k = input(d, {2, 3, 7, 8}, 71, dt);
                Tensor v = input(d, {2, 1, 7, 6}, 72, dt), mask = input(d, {5, 7}, 73, dt, -1, 0);
                q.requires_grad_();
                k.requires_grad_();
                v.requires_grad_();
                Tensor y =
                    add(scaled_dot_product_attention(q, k, v, mask),
                        scaled_dot_product_attention(q, k.slice(2, 0, 5), v.slice(2, 0, 5), Tensor(), true, 0.5));
                // KV-cached decoding: fewer queries than keys, the causal mask aligned
                // bottom-right (one new token, then three).
                const std::vector<Tensor> cached = {
                    scaled_dot_product_attention(q.detach().slice(2, 4, 5), k.detach(), v.detach(), Tensor(), true),
                    scaled_dot_product_attention(q.detach().slice(2, 2, 5), k.detach(), v.detach(), Tensor(), true)};
                std::vector<Tensor> out = dt != DType::f32 ? std::vector<Tensor>{y} : with_grads(y, {q, k, v}, 74);
                out.insert(out.end(), cached.begin(), cached.end());
                return out;
            });
    for (DType dt : {DType::i32, DType::i64, DType::boolean})
        add_case(std::string("embedding of ") + short_name(dt) + " rows", 0,
                 [=](const Device &d) -> std::vector<Tensor> {
                     return {embedding(input(d, {6, 3}, 75, dt, -50, 50), labels(d, {2, 4}, 6, 76))};
                 });
    for (DType dt : {DType::f32, DType::i64, DType::boolean})
        add_case(std::string("one_hot -> ") + short_name(dt), 0, [=](const Device &d) -> std::vector<Tensor> {
            return {one_hot(labels(d, {3, 5}, 7, 66), 7, dt), one_hot(labels(d, {4}, 3, 67, DType::i32), 3, dt)};
        });
}

// ---- Runs ---------------------------------------------------------------------------------------------

struct Options {
    std::string device = "cuda";
    bool allow_fallback = false;
    bool skip_training = false;
    bool list = false;
    std::string filter;
};

int run_cases(const Device &device, const Options &o) {
    int failed = 0, passed = 0;
    for (const Case &c : cases) {
        if (!o.filter.empty() && c.name.find(o.filter) == std::string::npos) continue;
        std::string problem;
        double nmse = 0;
        try {
            const std::vector<Tensor> want = c.build(cpu_device);
            const uint64_t fallbacks_before = stats().total_fallbacks;
            const std::vector<Tensor> got = c.build(device);
            synchronize();
            if (!o.allow_fallback && stats().total_fallbacks != fallbacks_before)
                problem = "fell back to cpu " + std::to_string(stats().total_fallbacks - fallbacks_before) + " times";
            for (size_t i = 0; problem.empty() && i < want.size(); ++i) {
                if (got[i].device() != device && want[i].numel() > 0 && !o.allow_fallback)
                    problem = "output " + std::to_string(i) + " is on " + got[i].device().str();
                else if (std::string why = compare(got[i], want[i], c.tol, &nmse); !why.empty())
                    problem = "output " + std::to_string(i) + ": " + why;
            }
        } catch (const std::exception &e) {
            problem = e.what();
        }
        if (problem.empty()) {
            ++passed;
            std::printf("ok    %-60s nmse %.2e\n", c.name.c_str(), nmse);
        } else {
            ++failed;
            std::printf("FAIL  %-60s %s\n", c.name.c_str(), problem.c_str());
        }
    }
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed;
}

// A bad index is an error reported at the next synchronisation, not garbage.
int check_data_errors(const Device &device) {
    int failed = 0;
    auto expect_error = [&](const char *name, const std::function<void()> &fn) {
        try {
            fn();
            std::printf("FAIL  %-60s no error\n", name);
            ++failed;
        } catch (const ValueError &e) {
            std::printf("ok    %-60s %s\n", name, e.what());
            // The error was consumed: the device is usable again.
            Tensor t = full({2}, 1.0, DType::f32, device);
            if (sum(t).item<float>() != 2.0f) {
                std::printf("FAIL  %-60s device unusable after the error\n", name);
                ++failed;
            }
        } catch (const std::exception &e) {
            std::printf("FAIL  %-60s wrong error: %s\n", name, e.what());
            ++failed;
        }
    };
    expect_error("embedding index out of range", [&] {
        Tensor w = full({4, 3}, 1.0, DType::f32, device);
        Tensor idx = from_vector(std::vector<int64_t>{0, 7}, {2}, cpu_device).to(device);
        (void)sum(embedding(w, idx)).item<float>();
    });
    expect_error("cross_entropy label out of range", [&] {
        Tensor x = full({2, 3}, 0.5, DType::f32, device);
        Tensor y = from_vector(std::vector<int64_t>{1, 3}, {2}, cpu_device).to(device);
        (void)cross_entropy(x, y).item<float>();
    });
    expect_error("embedding_q index out of range", [&] {
        Tensor w = quantize(full({4, 32}, 0.5, DType::f32, cpu_device), DType::q8_0).to(device);
        Tensor idx = from_vector(std::vector<int32_t>{3, 4}, {2}, cpu_device).to(device);
        (void)sum(embedding_q(w, idx)).item<float>();
    });
    expect_error("one_hot label out of range", [&] {
        Tensor y = from_vector(std::vector<int64_t>{-1}, {1}, cpu_device).to(device);
        (void)sum(one_hot(y, 4)).item<float>();
    });
    return failed;
}

std::shared_ptr<nn::Sequential> make_model(uint64_t seed) {
    Conv2dOptions pad1;
    pad1.pad_h = pad1.pad_w = 1;
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Conv2d>(1, 32, 3, pad1, true, nn::mix_seed(seed, 1)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Conv2d>(32, 64, 3, pad1, true, nn::mix_seed(seed, 2)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(64 * 7 * 7, 128, true, nn::mix_seed(seed, 3)),
        std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(128, 10, true, nn::mix_seed(seed, 4)),
    });
}

// steps AdamW steps of the example CNN on device; returns the loss of each step, read back only
// at the end (one read per step, after all steps were queued).
std::vector<float> train(const Device &device, int steps, double *seconds, Stats *after) {
    auto model = make_model(7);
    model->to(device);
    optim::AdamW optimizer(model->parameters(), 1e-3);
    std::vector<Tensor> losses;
    // Every step's batch is uploaded up front: the loop itself moves nothing to the host.
    std::vector<Tensor> xs, ys;
    for (int s = 0; s < steps; ++s) {
        xs.push_back(input(device, {64, 1, 28, 28}, 100 + s, DType::f32, 0, 1));
        ys.push_back(labels(device, {64}, 10, 200 + s));
    }
    synchronize();
    reset_stats();
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) {
        Tensor loss = cross_entropy((*model)(xs[static_cast<size_t>(s)]), ys[static_cast<size_t>(s)]);
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        losses.push_back(loss.detach());
    }
    synchronize();
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    *after = stats();
    std::vector<float> out;
    for (const Tensor &l : losses) out.push_back(l.item<float>());
    return out;
}

int check_training(const Device &device, const Options &o) {
    constexpr int steps = 5;
    double cpu_seconds = 0, dev_seconds = 0;
    Stats cpu_stats, dev_stats;
    const std::vector<float> want = train(cpu_device, steps, &cpu_seconds, &cpu_stats);
    train(device, 2, &dev_seconds, &dev_stats);  // warm-up: algorithms, caches, allocator
    const std::vector<float> got = train(device, steps, &dev_seconds, &dev_stats);
    int failed = 0;
    for (int s = 0; s < steps; ++s) {
        const double rel = std::fabs(got[static_cast<size_t>(s)] - want[static_cast<size_t>(s)]) /
                           std::max(1e-6, std::fabs(static_cast<double>(want[static_cast<size_t>(s)])));
        std::printf("train step %d: loss %.6f on %s, %.6f on cpu (rel. diff %.1e)\n", s, got[static_cast<size_t>(s)],
                    device.str().c_str(), want[static_cast<size_t>(s)], rel);
        if (!(rel < 1e-3)) ++failed;
    }
    const Stats::Backend *dev = dev_stats.backend(device.backend);
    const Stats::Backend *host = dev_stats.backend("cpu");
    std::printf("training: %d steps in %.3f s on %s (%.3f s on cpu); %llu ops there, %llu on cpu, %llu fallbacks, "
                "%llu bytes to host, %llu to device\n",
                steps, dev_seconds, device.str().c_str(), cpu_seconds,
                static_cast<unsigned long long>(dev ? dev->ops : 0),
                static_cast<unsigned long long>(host ? host->ops : 0),
                static_cast<unsigned long long>(dev_stats.total_fallbacks),
                static_cast<unsigned long long>(dev ? dev->bytes_to_host : 0),
                static_cast<unsigned long long>(dev ? dev->bytes_to_device : 0));
    if (!o.allow_fallback) {
        if (dev_stats.total_fallbacks != 0) ++failed;
        // Nothing may come back to the host while the steps run (the losses are read afterwards).
        if (!dev || dev->bytes_to_host != 0 || dev->bytes_to_device != 0) ++failed;
        if (host && host->ops != 0) ++failed;
    }
    if (failed)
        std::printf("FAIL  training on %s\n", device.str().c_str());
    else if (o.allow_fallback)
        std::printf("ok    training on %s (fallbacks allowed)\n", device.str().c_str());
    else
        std::printf("ok    training on %s: zero fallbacks, no host round trips\n", device.str().c_str());
    return failed;
}

Options parse(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--device" && i + 1 < argc)
            o.device = argv[++i];
        else if (a == "--allow-fallback")
            o.allow_fallback = true;
        else if (a == "--skip-training")
            o.skip_training = true;
        else if (a == "--list")
            o.list = true;
        else if (a == "--filter" && i + 1 < argc)
            o.filter = argv[++i];
        else {
            std::fprintf(stderr,
                         "usage: %s [--device NAME] [--allow-fallback] [--filter TEXT] [--skip-training] [--list]\n",
                         argv[0]);
            std::exit(2);
        }
    }
    return o;
}

}  // namespace

int main(int argc, char **argv) {
    const Options o = parse(argc, argv);
    // Before tinyfin reads its environment: an op the backend does not run is a failure.
    if (!o.allow_fallback) setenv("TINYFIN_FALLBACK", "error", 1);
    elementwise_cases();
    reduce_cases();
    matmul_cases();
    quant_cases();
    nn_cases();
    if (o.list) {
        for (const Case &c : cases) std::printf("%s\n", c.name.c_str());
        return 0;
    }
    const auto names = available_backends();
    if (std::find(names.begin(), names.end(), o.device) == names.end()) {
        for (const PluginReport &p : report().plugins)
            if (p.name == o.device)
                std::printf("%s is not available: %s: %s\n", o.device.c_str(), p.outcome.c_str(), p.message.c_str());
        std::printf("%s is not available here\n", o.device.c_str());
        return 77;
    }
    const Device device{o.device, 0};
    for (const PluginReport &p : report().plugins)
        if (p.name == o.device && !p.devices.empty())
            std::printf("device %s: %s\n", device.str().c_str(), p.devices[0].name.c_str());
    int failed = run_cases(device, o);
    failed += check_data_errors(device);
    if (!o.skip_training) failed += check_training(device, o);
    std::printf(failed ? "gpu-parity: %d FAILED\n" : "gpu-parity: all passed\n", failed);
    return failed ? 1 : 0;
}
