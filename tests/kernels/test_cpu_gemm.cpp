// The cpu plugin's packed GEMM through the plugin ABI (matmul and conv2d), with no core:
//   - against references in double over odd sizes (1, 7, 13, 63, 65, 257), transposed and
//     strided views, batch broadcast, on the portable path (TINYFIN_CPU_ISA=generic) and on the
//     best path this CPU has;
//   - a B in a buffer marked constant (get_proc "buffer_mark_constant") packed once: the bits of
//     the unmarked product, and every write the plugin sees (buffer_write, buffer_copy, an op's
//     output, free and reuse) reaches the next product;
//   - thread-count invariance: matmul (f32, f16, bf16), conv2d and its gradients, max pooling, elementwise ops, sums, means, softmax and norms give the same
//     bits with TINYFIN_THREADS = 1, 2 and 3.
// The plugin reads TINYFIN_CPU_ISA and TINYFIN_THREADS on first use after init; shutdown makes
// it read them again, which is how each case switches.
#include <doctest/doctest.h>

#include <tinyfin/plugin.h>

#include "cpu_plugin_table.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

const tf_plugin &P() { return cpu_plugin_table(); }

// Restarts the plugin with these variables (nullptr: unset).
void restart(const char *isa, const char *threads) {
    P().shutdown();
    if (isa)
        setenv("TINYFIN_CPU_ISA", isa, 1);
    else
        unsetenv("TINYFIN_CPU_ISA");
    if (threads)
        setenv("TINYFIN_THREADS", threads, 1);
    else
        unsetenv("TINYFIN_THREADS");
    tf_error err{};
    err.struct_size = sizeof err;
    REQUIRE(P().init(&err) == TF_STATUS_OK);
}

// f32 storage from the plugin's allocator, and views of it.
struct Block {
    tf_buffer *buffer = nullptr;
    float *data = nullptr;
    int64_t count = 0;
    explicit Block(int64_t n) : count(n) {
        tf_error err{};
        err.struct_size = sizeof err;
        REQUIRE(P().buffer_alloc(0, static_cast<uint64_t>(std::max<int64_t>(n, 1)) * 4, &buffer, &err) == TF_STATUS_OK);
        data = static_cast<float *>(P().buffer_host_ptr(buffer));
        for (int64_t i = 0; i < n; ++i) data[i] = NAN;
    }
    ~Block() { P().buffer_free(buffer); }
};

using Dims = std::vector<int64_t>;

struct TensorDesc {
    std::shared_ptr<Block> mem;
    tf_tensor_desc d{};
    float &at(const Dims &idx) const {
        int64_t off = 0;
        for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * d.strides[i];
        return mem->data[off];
    }
};

TensorDesc view(const std::shared_ptr<Block> &mem, const Dims &shape, const Dims &strides) {
    TensorDesc t;
    t.mem = mem;
    t.d.struct_size = sizeof t.d;
    t.d.dtype = TF_DTYPE_F32;
    t.d.rank = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
        t.d.shape[i] = shape[i];
        t.d.strides[i] = strides[i];
    }
    t.d.buffer = mem->buffer;
    t.d.data = mem->data;
    return t;
}

Dims dense_strides(const Dims &shape) {
    Dims s(shape.size());
    int64_t n = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        s[i] = n;
        n *= shape[i];
    }
    return s;
}

int64_t count_of(const Dims &shape) {
    int64_t n = 1;
    for (int64_t v : shape) n *= v;
    return n;
}

TensorDesc dense(const Dims &shape) {
    return view(std::make_shared<Block>(count_of(shape)), shape, dense_strides(shape));
}

void fill_random(const TensorDesc &t, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
    for (int64_t i = 0; i < t.mem->count; ++i) t.mem->data[i] = pick(rng);
}

void run_ok(uint32_t id, std::vector<tf_tensor_desc> ins, tf_tensor_desc out, const void *params = nullptr) {
    tf_op_desc op{};
    op.struct_size = sizeof op;
    op.op = id;
    op.n_inputs = static_cast<uint32_t>(ins.size());
    op.n_outputs = 1;
    op.inputs = ins.data();
    op.outputs = &out;
    op.params = params;
    REQUIRE(P().supports(0, &op) == 1);
    tf_error err{};
    err.struct_size = sizeof err;
    const tf_status status = P().run(0, &op, &err);
    INFO("message: ", err.message);
    REQUIRE(status == TF_STATUS_OK);
}

// out[b..., i, j] = sum_p a[b..., i, p] b[b..., p, j] in double, checked against out with an
// error bound of k f32 roundings of the absolute products.
void check_matmul(const TensorDesc &a, const TensorDesc &b, const TensorDesc &out) {
    const int r = out.d.rank;
    const int64_t m = out.d.shape[r - 2], n = out.d.shape[r - 1], k = a.d.shape[r - 1];
    const int nb = r - 2;
    int64_t batches = 1;
    for (int i = 0; i < nb; ++i) batches *= out.d.shape[i];
    int bad = 0;
    std::vector<double> arow(static_cast<size_t>(k));
    for (int64_t t = 0; t < batches; ++t) {
        // Element offsets of the batch's [0, 0] in each operand (size-1 axes broadcast).
        int64_t oa = 0, ob = 0, oo = 0;
        for (int64_t rest = t, i = nb - 1; i >= 0; --i) {
            const int64_t idx = rest % out.d.shape[i];
            rest /= out.d.shape[i];
            oa += (a.d.shape[i] == 1 ? 0 : idx) * a.d.strides[i];
            ob += (b.d.shape[i] == 1 ? 0 : idx) * b.d.strides[i];
            oo += idx * out.d.strides[i];
        }
        const float *pa = a.mem->data + oa, *pb = b.mem->data + ob, *po = out.mem->data + oo;
        const int64_t ar = a.d.strides[r - 2], ac = a.d.strides[r - 1], br = b.d.strides[r - 2],
                      bc = b.d.strides[r - 1];
        for (int64_t i = 0; i < m; ++i) {
            for (int64_t p = 0; p < k; ++p) arow[static_cast<size_t>(p)] = pa[i * ar + p * ac];
            for (int64_t j = 0; j < n; ++j) {
                double sum = 0, mag = 0;
                for (int64_t p = 0; p < k; ++p) {
                    const double prod = arow[static_cast<size_t>(p)] * pb[p * br + j * bc];
                    sum += prod;
                    mag += std::fabs(prod);
                }
                const double got = po[i * out.d.strides[r - 2] + j * out.d.strides[r - 1]];
                if (!(std::fabs(got - sum) <= 1.2e-7 * static_cast<double>(k + 2) * mag + 1e-30) && bad++ < 5)
                    FAIL_CHECK("batch ", t, " [", i, ", ", j, "]: got ", got, ", expected ", sum);
            }
        }
    }
    CHECK(bad == 0);
}

void matmul_case(const Dims &as, const Dims &ast, const Dims &bs, const Dims &bst, const Dims &os, const Dims &ost,
                 uint32_t seed) {
    auto storage = [](const Dims &shape, const Dims &strides) {
        int64_t last = 0;
        for (size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * strides[i];
        return std::make_shared<Block>(last + 1);
    };
    TensorDesc a = view(storage(as, ast), as, ast), b = view(storage(bs, bst), bs, bst),
               o = view(storage(os, ost), os, ost);
    fill_random(a, seed);
    fill_random(b, seed + 1);
    run_ok(TF_OP_MATMUL, {a.d, b.d}, o.d);
    check_matmul(a, b, o);
}

void matmul_suite() {
    const int64_t sizes[] = {1, 7, 13, 63, 65, 257};
    uint32_t seed = 1;
    for (int64_t m : sizes)
        for (int64_t n : sizes)
            for (int64_t k : sizes) {
                CAPTURE(m);
                CAPTURE(n);
                CAPTURE(k);
                matmul_case({m, k}, {k, 1}, {k, n}, {n, 1}, {m, n}, {n, 1}, seed++);
            }
    // Transposed views (A^T, B^T, both), a strided slice and a transposed output.
    for (int64_t s : {13, 65, 257}) {
        CAPTURE(s);
        const int64_t m = s, n = s + 2, k = s - 1 > 0 ? s - 1 : 1;
        matmul_case({m, k}, {1, m}, {k, n}, {n, 1}, {m, n}, {n, 1}, 100);
        matmul_case({m, k}, {k, 1}, {k, n}, {1, k}, {m, n}, {n, 1}, 101);
        matmul_case({m, k}, {1, m}, {k, n}, {1, k}, {m, n}, {1, m}, 102);
        matmul_case({m, k}, {3 * k, 2}, {k, n}, {2 * n, 3}, {m, n}, {n + 5, 1}, 103);
    }
    // Batches (broadcast by the caller, as the core does: stride 0): a broadcast B (folded into
    // one GEMM), a broadcast A, both broadcast at rank 4, interleaved batch strides.
    matmul_case({5, 63, 65}, {63 * 65, 65, 1}, {5, 65, 13}, {0, 13, 1}, {5, 63, 13}, {63 * 13, 13, 1}, 200);
    matmul_case({4, 7, 257}, {0, 257, 1}, {4, 257, 65}, {257 * 65, 65, 1}, {4, 7, 65}, {7 * 65, 65, 1}, 201);
    matmul_case({3, 4, 13, 63}, {13 * 63, 0, 63, 1}, {3, 4, 63, 7}, {0, 63 * 7, 7, 1}, {3, 4, 13, 7},
                {4 * 13 * 7, 13 * 7, 7, 1}, 202);
    matmul_case({6, 1, 65}, {65, 65, 1}, {6, 65, 257}, {0, 257, 1}, {6, 1, 257}, {257, 257, 1}, 203);
    matmul_case({2, 3, 63, 65}, {1, 2, 2 * 3 * 65, 2 * 3}, {2, 3, 65, 13}, {3 * 65 * 13, 65 * 13, 13, 1},
                {2, 3, 63, 13}, {3 * 63 * 13, 63 * 13, 13, 1}, 204);
    // Big batches of small products (split over batches) and one product split inside the GEMM.
    matmul_case({64, 13, 63}, {13 * 63, 63, 1}, {64, 63, 7}, {63 * 7, 7, 1}, {64, 13, 7}, {13 * 7, 7, 1}, 205);
    matmul_case({300, 257}, {257, 1}, {257, 263}, {263, 1}, {300, 263}, {263, 1}, 206);
}

// conv2d as a direct loop in double.
struct ConvShape {
    int64_t n, c, h, w, o, kh, kw;
    int32_t stride, pad, dil, groups;
    int64_t oh() const { return (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1; }
    int64_t ow() const { return (w + 2 * pad - dil * (kw - 1) - 1) / stride + 1; }
    tf_params_conv2d params() const {
        tf_params_conv2d p{};
        p.struct_size = sizeof p;
        p.stride[0] = p.stride[1] = stride;
        p.padding[0] = p.padding[1] = pad;
        p.dilation[0] = p.dilation[1] = dil;
        p.groups = groups;
        return p;
    }
};

// y against the convolution of x and w in double: within f32 roundings of each output's sum
// of |products| (a sum of k products in any order and, for Winograd, its transforms).
void check_conv_values(const TensorDesc &x, const TensorDesc &w, const TensorDesc &y, const ConvShape &s) {
    const int64_t cg = s.c / s.groups, og = s.o / s.groups;
    int bad = 0;
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t o = 0; o < s.o; ++o)
            for (int64_t i = 0; i < s.oh(); ++i)
                for (int64_t j = 0; j < s.ow(); ++j) {
                    double sum = 0, mag = 0;
                    const int64_t g = o / og;
                    for (int64_t c = 0; c < cg; ++c)
                        for (int64_t a = 0; a < s.kh; ++a)
                            for (int64_t b = 0; b < s.kw; ++b) {
                                const int64_t iy = i * s.stride - s.pad + a * s.dil,
                                              ix = j * s.stride - s.pad + b * s.dil;
                                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                                const double prod =
                                    static_cast<double>(x.at({n, g * cg + c, iy, ix})) * w.at({o, c, a, b});
                                sum += prod;
                                mag += std::fabs(prod);
                            }
                    const double got = y.at({n, o, i, j});
                    if (!(std::fabs(got - sum) <= 1.2e-7 * (cg * s.kh * s.kw + 2) * mag + 1e-30) && bad++ < 5)
                        FAIL_CHECK("y[", n, ", ", o, ", ", i, ", ", j, "]: got ", got, ", expected ", sum);
                }
    CHECK(bad == 0);
}

void check_conv_forward(const ConvShape &s) {
    const tf_params_conv2d p = s.params();
    TensorDesc x = dense({s.n, s.c, s.h, s.w}), w = dense({s.o, s.c / s.groups, s.kh, s.kw}),
               y = dense({s.n, s.o, s.oh(), s.ow()});
    fill_random(x, 7);
    fill_random(w, 8);
    run_ok(TF_OP_CONV2D, {x.d, w.d}, y.d, &p);
    check_conv_values(x, w, y, s);
}

TEST_CASE("matmul through the packed GEMM: odd sizes, views, batches, on the portable and the native path") {
    restart("generic", nullptr);
    CHECK(cpu_plugin_feature("kernels") == "generic");
    SUBCASE("generic") { matmul_suite(); }
    restart(nullptr, nullptr);
    INFO("native kernels: ", cpu_plugin_feature("kernels"));
    SUBCASE("native") { matmul_suite(); }
    restart("generic", "3");
    SUBCASE("generic, 3 threads") { matmul_case({300, 257}, {257, 1}, {257, 263}, {263, 1}, {300, 263}, {263, 1}, 7); }
}

TEST_CASE("conv2d through the packed GEMM on the portable and the native path") {
    const ConvShape shapes[] = {
        {3, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1},
        {2, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1},
        {2, 6, 13, 7, 9, 3, 2, 2, 1, 2, 3},
        {1, 65, 7, 7, 13, 1, 1, 1, 0, 1, 1},
        {17, 3, 9, 9, 7, 3, 3, 1, 1, 1, 1},
        {1, 64, 7, 7, 160, 3, 3, 1, 1, 1, 1},  // the shifted forward's blocks of output channels and taps
        {2, 3, 29, 30, 16, 7, 7, 2, 3, 1, 1},  // stride 2: phase planes of the padded image
    };
    for (const char *isa : {"generic", "native"}) {
        CAPTURE(isa);
        restart(std::strcmp(isa, "native") == 0 ? nullptr : isa, nullptr);
        for (const ConvShape &s : shapes) {
            CAPTURE(s.n);
            CAPTURE(s.c);
            CAPTURE(s.o);
            check_conv_forward(s);
        }
    }
}

// The bytes of every op's output under 1, 2 and 3 threads.
std::vector<std::vector<float>> outputs_with_threads(const char *threads) {
    restart(nullptr, threads);
    CHECK(cpu_plugin_feature("threads") == threads);
    std::vector<std::vector<float>> results;
    auto keep = [&](const TensorDesc &t) { results.emplace_back(t.mem->data, t.mem->data + t.mem->count); };

    // One big product (split inside the GEMM), a batch of small ones (split over the batch).
    TensorDesc a = dense({300, 257}), b = dense({257, 263}), c = dense({300, 263});
    fill_random(a, 1);
    fill_random(b, 2);
    run_ok(TF_OP_MATMUL, {a.d, b.d}, c.d);
    keep(c);
    TensorDesc ba = dense({64, 13, 63}), bb = dense({64, 63, 65}), bc = dense({64, 13, 65});
    fill_random(ba, 3);
    fill_random(bb, 4);
    run_ok(TF_OP_MATMUL, {ba.d, bb.d}, bc.d);
    keep(bc);

    // conv2d and both gradients at the example's second layer (batch 20: 3 chunks of images).
    const ConvShape s{20, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1};
    const tf_params_conv2d p = s.params();
    TensorDesc x = dense({s.n, s.c, s.h, s.w}), w = dense({s.o, s.c, s.kh, s.kw}),
               y = dense({s.n, s.o, s.oh(), s.ow()});
    fill_random(x, 5);
    fill_random(w, 6);
    run_ok(TF_OP_CONV2D, {x.d, w.d}, y.d, &p);
    keep(y);
    TensorDesc dy = dense({s.n, s.o, s.oh(), s.ow()}), dx = dense({s.n, s.c, s.h, s.w}),
               dw = dense({s.o, s.c, s.kh, s.kw});
    fill_random(dy, 7);
    run_ok(TF_OP_CONV2D_GRAD_INPUT, {dy.d, w.d}, dx.d, &p);
    keep(dx);
    run_ok(TF_OP_CONV2D_GRAD_WEIGHT, {dy.d, x.d}, dw.d, &p);
    keep(dw);

    // One image with more output channels than a task's block: the shifted forward splits
    // them between tasks by the thread count.
    const ConvShape s1{1, 32, 7, 7, 200, 3, 3, 1, 1, 1, 1};
    const tf_params_conv2d p1 = s1.params();
    TensorDesc x1 = dense({s1.n, s1.c, s1.h, s1.w}), w1 = dense({s1.o, s1.c, s1.kh, s1.kw}),
               y1 = dense({s1.n, s1.o, s1.oh(), s1.ow()});
    fill_random(x1, 10);
    fill_random(w1, 11);
    run_ok(TF_OP_CONV2D, {x1.d, w1.d}, y1.d, &p1);
    keep(y1);
    // conv2d_act (bias and relu in the store) on both shapes.
    TensorDesc bias = dense({200}), ya = dense({s.n, s.o, s.oh(), s.ow()}), ya1 = dense({s1.n, s1.o, s1.oh(), s1.ow()});
    fill_random(bias, 12);
    tf_params_conv2d_act pa{};
    pa.struct_size = sizeof pa;
    pa.stride[0] = pa.stride[1] = pa.dilation[0] = pa.dilation[1] = pa.groups = 1;
    pa.padding[0] = p.padding[0];
    pa.padding[1] = p.padding[1];
    pa.activation = TF_CONV_ACT_RELU;
    TensorDesc bias64 = dense({64});
    fill_random(bias64, 13);
    tf_tensor_desc absent{};
    run_ok(TF_OP_CONV2D_ACT, {x.d, w.d, bias64.d, y.d}, ya.d, &pa);  // conv2d's output as the residual
    keep(ya);
    pa.padding[0] = p1.padding[0];
    pa.padding[1] = p1.padding[1];
    run_ok(TF_OP_CONV2D_ACT, {x1.d, w1.d, bias.d, absent}, ya1.d, &pa);
    keep(ya1);

    // max pooling (2x2 stride 2 fast path, and 3x3 stride 2 pad 1) forward and backward.
    for (int32_t k : {2, 3}) {
        tf_params_pool2d pp{sizeof(tf_params_pool2d), {k, k}, {2, 2}, {k - 2, k - 2}, 0};
        TensorDesc py = dense({s.n, s.o, 7, 7}), pdx = dense({s.n, s.o, 14, 14});
        run_ok(TF_OP_MAX_POOL2D, {y.d}, py.d, &pp);
        keep(py);
        TensorDesc pdy = dense({s.n, s.o, 7, 7});
        fill_random(pdy, 9);
        run_ok(TF_OP_MAX_POOL2D_BACKWARD, {pdy.d, y.d}, pdx.d, &pp);
        keep(pdx);
    }

    // Reductions (rows, columns, all, NCHW channels), softmax and norms over a million elements.
    TensorDesc big = dense({1024, 1024}), total = dense({1, 1}), rows = dense({1024, 1}), sm = dense({1024, 1024});
    fill_random(big, 8);
    tf_params_reduce all{sizeof(tf_params_reduce), 3}, last{sizeof(tf_params_reduce), 2};
    run_ok(TF_OP_SUM, {big.d}, total.d, &all);
    keep(total);
    run_ok(TF_OP_SUM, {big.d}, rows.d, &last);
    keep(rows);
    TensorDesc columns = dense({1, 1024}), channels = dense({1, 16, 1, 1});
    tf_params_reduce first{sizeof(tf_params_reduce), 1}, nhw{sizeof(tf_params_reduce), 0b1101};
    run_ok(TF_OP_SUM, {big.d}, columns.d, &first);
    keep(columns);
    TensorDesc nchw = view(big.mem, {64, 16, 32, 32}, dense_strides({64, 16, 32, 32}));  // a conv's bias gradient
    run_ok(TF_OP_MEAN, {nchw.d}, channels.d, &nhw);
    keep(channels);
    // Elementwise ops split over the first axis: add, exp, a comparison and where.
    TensorDesc other = dense({1024, 1024}), e1 = dense({1024, 1024}), e2 = dense({1024, 1024});
    fill_random(other, 10);
    run_ok(TF_OP_ADD, {big.d, other.d}, e1.d);
    keep(e1);
    run_ok(TF_OP_EXP, {big.d}, e2.d);
    keep(e2);
    auto mask = std::make_shared<Block>(1024 * 1024);  // 4 MiB: room for the 1 MiB of bools
    TensorDesc m = view(mask, {1024, 1024}, {1024, 1});
    m.d.dtype = TF_DTYPE_BOOL;
    run_ok(TF_OP_GT, {big.d, other.d}, m.d);
    results.emplace_back(reinterpret_cast<float *>(mask->data),
                         reinterpret_cast<float *>(mask->data) + 1024 * 1024 / 4);
    run_ok(TF_OP_WHERE, {m.d, big.d, other.d}, e1.d);
    keep(e1);
    tf_params_axis axis{sizeof(tf_params_axis), 1};
    run_ok(TF_OP_SOFTMAX, {big.d}, sm.d, &axis);
    keep(sm);
    run_ok(TF_OP_LOG_SOFTMAX, {big.d}, sm.d, &axis);
    keep(sm);
    TensorDesc gain = dense({1024}), shift = dense({1024});
    fill_random(gain, 12);
    fill_random(shift, 13);
    const tf_params_norm norm{sizeof(tf_params_norm), 1, 1e-5};
    run_ok(TF_OP_LAYER_NORM, {big.d, gain.d, shift.d}, sm.d, &norm);
    keep(sm);
    run_ok(TF_OP_RMS_NORM, {big.d, gain.d}, sm.d, &norm);
    keep(sm);

    // f16 and bf16 products, one big and a batch with a broadcast B (converted to f32 for the
    // same GEMM; bf16 with vdpbf16ps where the CPU has AVX512-BF16).
    for (int32_t dt : {TF_DTYPE_F16, TF_DTYPE_BF16}) {
        auto half = [&](const Dims &shape, uint32_t seed) {
            TensorDesc t = dense(shape);
            fill_random(t, seed);
            // Each float becomes the 16-bit value in the first half of the block (bf16: its top
            // half; f16: its top half reinterpreted, exponents kept small by the [-1, 1) range).
            auto *bits = reinterpret_cast<uint16_t *>(t.mem->data);
            for (int64_t i = 0; i < t.mem->count; ++i) {
                uint32_t u;
                std::memcpy(&u, &t.mem->data[i], 4);
                bits[i] = dt == TF_DTYPE_BF16 ? static_cast<uint16_t>(u >> 16)
                                              : static_cast<uint16_t>(((u >> 16) & 0x83ff) | 0x3800);
            }
            t.d.dtype = dt;
            return t;
        };
        TensorDesc ha = half({300, 257}, 14), hb = half({257, 263}, 15), hc = half({300, 263}, 0);
        run_ok(TF_OP_MATMUL, {ha.d, hb.d}, hc.d);
        keep(hc);
        TensorDesc qa = half({8, 33, 70}, 16), qb = half({70, 41}, 17), qc = half({8, 33, 41}, 0);
        qb = view(qb.mem, {8, 70, 41}, {0, 41, 1});
        qb.d.dtype = dt;
        run_ok(TF_OP_MATMUL, {qa.d, qb.d}, qc.d);
        keep(qc);
    }
    return results;
}

TEST_CASE("a row-major A read in place gives the bits of the same A packed") {
    // A with unit column stride is read in place by the register tiles; the same values stored
    // column-major (an A^T view) or with column stride 2 are packed first. The tiles see the same
    // A(i, p) in the same order, so every C element must have the same bits: full tiles, the
    // short last tile (m = 2048 + 5, 13: rows past m are never read), K over two blocks (600),
    // and rows padded past k (row stride k + 3), on every path and with 2 threads.
    for (const char *isa : {"generic", static_cast<const char *>(nullptr)}) {
        for (const char *threads : {"1", "2"}) {
            restart(isa, threads);
            CAPTURE(cpu_plugin_feature("kernels"));
            CAPTURE(threads);
            for (const Dims &mnk : {Dims{2053, 128, 128}, Dims{13, 65, 600}, Dims{77, 114, 512}}) {
                const int64_t m = mnk[0], n = mnk[1], k = mnk[2];
                CAPTURE(m);
                CAPTURE(k);
                auto padded = std::make_shared<Block>(m * (k + 3));
                TensorDesc rows = view(padded, {m, k}, {k + 3, 1});
                TensorDesc cols = view(std::make_shared<Block>(m * k), {m, k}, {1, m});
                TensorDesc strided = view(std::make_shared<Block>(2 * m * k), {m, k}, {2 * k, 2});
                TensorDesc b = dense({k, n});
                fill_random(rows, 21);
                fill_random(b, 22);
                for (int64_t i = 0; i < m; ++i)
                    for (int64_t p = 0; p < k; ++p) cols.at({i, p}) = strided.at({i, p}) = rows.at({i, p});
                TensorDesc c_rows = dense({m, n}), c_cols = dense({m, n}), c_strided = dense({m, n});
                run_ok(TF_OP_MATMUL, {rows.d, b.d}, c_rows.d);
                run_ok(TF_OP_MATMUL, {cols.d, b.d}, c_cols.d);
                run_ok(TF_OP_MATMUL, {strided.d, b.d}, c_strided.d);
                int bad = 0;
                for (int64_t i = 0; i < m; ++i)
                    for (int64_t j = 0; j < n; ++j)
                        bad += std::memcmp(&c_rows.at({i, j}), &c_cols.at({i, j}), sizeof(float)) != 0 ||
                               std::memcmp(&c_rows.at({i, j}), &c_strided.at({i, j}), sizeof(float)) != 0;
                CHECK(bad == 0);
                check_matmul(rows, b, c_rows);
            }
        }
    }
    restart(nullptr, nullptr);
}

TEST_CASE("a product computed transposed (a narrow B) has the bits of the same columns of a wide one") {
    // [32 x k] x [k x 9] fills a quarter of the native register tiles and runs as C^T = B^T A^T;
    // [32 x k] x [k x 32] does not. Their first 9 columns are the same sums, so the same bits;
    // also with accumulation through conv2d_grad_weight's chunks (k = 300 spans two K blocks).
    for (const char *isa : {"generic", static_cast<const char *>(nullptr)}) {
        restart(isa, nullptr);
        CAPTURE(cpu_plugin_feature("kernels"));
        for (int64_t k : {64, 300}) {
            CAPTURE(k);
            TensorDesc a = dense({32, k}), wide = dense({k, 32}), narrow = dense({k, 9});
            fill_random(a, 11);
            fill_random(wide, 12);
            for (int64_t p = 0; p < k; ++p)
                for (int64_t j = 0; j < 9; ++j) narrow.at({p, j}) = wide.at({p, j});
            TensorDesc c_wide = dense({32, 32}), c_narrow = dense({32, 9});
            run_ok(TF_OP_MATMUL, {a.d, wide.d}, c_wide.d);
            run_ok(TF_OP_MATMUL, {a.d, narrow.d}, c_narrow.d);
            int bad = 0;
            for (int64_t i = 0; i < 32; ++i)
                for (int64_t j = 0; j < 9; ++j)
                    if (std::memcmp(&c_wide.at({i, j}), &c_narrow.at({i, j}), sizeof(float)) != 0) ++bad;
            CHECK(bad == 0);
        }
    }
    restart(nullptr, nullptr);
}

TEST_CASE("conv2d computed as y^T = col^T w^T has the bits of w times the column matrix") {
    // 32 -> 64 channels, 3x3, padding 1, over 14x14 (and an odd 9x11): the forward runs
    // transposed; matmul of the weight [64 x 288] and a column matrix built here (the same
    // products in the same order) must give the same bits.
    for (const char *isa : {"generic", static_cast<const char *>(nullptr)}) {
        restart(isa, nullptr);
        CAPTURE(cpu_plugin_feature("kernels"));
        for (const Dims &hw : {Dims{14, 14}, Dims{9, 11}}) {
            const int64_t n = 2, c = 32, h = hw[0], w = hw[1], o = 64, taps = c * 9, positions = h * w;
            TensorDesc x = dense({n, c, h, w}), wt = dense({o, c, 3, 3}), y = dense({n, o, h, w});
            fill_random(x, 21);
            fill_random(wt, 22);
            tf_params_conv2d p{};
            p.struct_size = sizeof p;
            p.stride[0] = p.stride[1] = 1;
            p.padding[0] = p.padding[1] = 1;
            p.dilation[0] = p.dilation[1] = 1;
            p.groups = 1;
            run_ok(TF_OP_CONV2D, {x.d, wt.d}, y.d, &p);
            TensorDesc wm = view(wt.mem, {o, taps}, {taps, 1});
            for (int64_t img = 0; img < n; ++img) {
                TensorDesc col = dense({taps, positions}), prod = dense({o, positions});
                for (int64_t ci = 0; ci < c; ++ci)
                    for (int64_t i = 0; i < 3; ++i)
                        for (int64_t j = 0; j < 3; ++j)
                            for (int64_t oy = 0; oy < h; ++oy)
                                for (int64_t ox = 0; ox < w; ++ox) {
                                    const int64_t iy = oy + i - 1, ix = ox + j - 1;
                                    const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
                                    col.at({(ci * 3 + i) * 3 + j, oy * w + ox}) =
                                        inside ? x.at({img, ci, iy, ix}) : 0.0f;
                                }
                run_ok(TF_OP_MATMUL, {wm.d, col.d}, prod.d);
                int bad = 0;
                for (int64_t oc = 0; oc < o; ++oc)
                    for (int64_t q = 0; q < positions; ++q)
                        if (std::memcmp(&prod.at({oc, q}), &y.at({img, oc, q / w, q % w}), sizeof(float)) != 0) ++bad;
                CHECK(bad == 0);
            }
        }
    }
    restart(nullptr, nullptr);
}

TEST_CASE("results are bitwise identical for 1, 2 and 3 threads") {
    const auto one = outputs_with_threads("1");
    for (const char *threads : {"2", "3"}) {
        CAPTURE(threads);
        const auto other = outputs_with_threads(threads);
        REQUIRE(other.size() == one.size());
        for (size_t i = 0; i < one.size(); ++i) {
            CAPTURE(i);
            REQUIRE(other[i].size() == one[i].size());
            CHECK(std::memcmp(other[i].data(), one[i].data(), one[i].size() * sizeof(float)) == 0);
        }
    }
    restart(nullptr, nullptr);
}

// get_proc("buffer_mark_constant"): a B read from a marked buffer is packed once and kept; every
// write the plugin sees (buffer_write, buffer_copy, an op's output, a freed and reused buffer)
// must drop it, and the product must have the bits of the same B unmarked.
using MarkConstant = void (*)(tf_buffer *);

std::vector<float> matmul_values(const TensorDesc &a, const TensorDesc &b, const Dims &out_shape) {
    TensorDesc o = dense(out_shape);
    run_ok(TF_OP_MATMUL, {a.d, b.d}, o.d);
    return std::vector<float>(o.mem->data, o.mem->data + o.mem->count);
}

TEST_CASE("a B in a buffer marked constant is packed once, has the unmarked bits and follows every write") {
    auto mark = reinterpret_cast<MarkConstant>(P().get_proc("buffer_mark_constant"));
    REQUIRE(static_cast<bool>(mark));
    // K over one GEMM K block (512 on AVX2, 256 elsewhere), N not a multiple of any tile width;
    // two weights in one buffer: a row-major [k, n] at the start, a transposed [k, n2] after it.
    const int64_t k = 600, n = 70, n2 = 33, rows = 37, batch = 3;
    std::vector<std::vector<float>> firsts;
    for (const char *threads : {"1", "2", "3"}) {
        CAPTURE(threads);
        restart(nullptr, threads);
        auto wmem = std::make_shared<Block>(k * n + k * n2);
        TensorDesc a = dense({batch, rows, k});
        fill_random(a, 11);
        fill_random(view(wmem, {k * n + k * n2}, {1}), 12);
        TensorDesc w1 = view(wmem, {batch, k, n}, {0, n, 1});
        TensorDesc w2 = view(wmem, {k, n2}, {1, k});
        w2.d.offset = static_cast<uint64_t>(k * n) * sizeof(float);
        // The same values in unmarked buffers, at offset 0 (what check_matmul reads).
        auto unmarked = [&] {
            TensorDesc u1 = dense({k, n}), u2 = view(std::make_shared<Block>(k * n2), {k, n2}, {1, k});
            std::memcpy(u1.mem->data, wmem->data, static_cast<size_t>(k * n) * sizeof(float));
            std::memcpy(u2.mem->data, wmem->data + k * n, static_cast<size_t>(k * n2) * sizeof(float));
            TensorDesc u1b = view(u1.mem, {batch, k, n}, {0, n, 1});
            return std::make_pair(u1b, u2);
        };
        TensorDesc a2 = view(a.mem, {batch * rows, k}, {k, 1});
        auto check_both = [&](const char *when) {
            INFO("when: ", when);
            auto [u1, u2] = unmarked();
            const auto got1 = matmul_values(a, w1, {batch, rows, n}), want1 = matmul_values(a, u1, {batch, rows, n});
            const auto got2 = matmul_values(a2, w2, {batch * rows, n2}),
                       want2 = matmul_values(a2, u2, {batch * rows, n2});
            CHECK(std::memcmp(got1.data(), want1.data(), got1.size() * sizeof(float)) == 0);
            CHECK(std::memcmp(got2.data(), want2.data(), got2.size() * sizeof(float)) == 0);
            TensorDesc o1 = dense({batch, rows, n}), o2 = dense({batch * rows, n2});
            std::memcpy(o1.mem->data, got1.data(), got1.size() * sizeof(float));
            std::memcpy(o2.mem->data, got2.data(), got2.size() * sizeof(float));
            check_matmul(a, u1, o1);
            check_matmul(a2, u2, o2);
            return got1;
        };
        mark(wmem->buffer);
        CHECK(cpu_plugin_feature("packed_weight_bytes") == "0");
        firsts.push_back(check_both("first use: packed now"));
        // Both weights kept packed (at least their floats: slivers pad N to the tile width).
        CHECK(std::stoll(cpu_plugin_feature("packed_weight_bytes")) >= (k * n + k * n2) * 4);
        check_both("second use: the kept packing");

        tf_error err{};
        err.struct_size = sizeof err;
        std::vector<float> fresh(static_cast<size_t>(k * n));
        std::mt19937 rng(13);
        std::uniform_real_distribution<float> pick(-2.0f, 2.0f);
        for (float &v : fresh) v = pick(rng);
        REQUIRE(P().buffer_write(wmem->buffer, 0, fresh.data(), fresh.size() * sizeof(float), &err) == TF_STATUS_OK);
        check_both("after buffer_write");

        TensorDesc src = dense({k * n2});
        fill_random(src, 14);
        REQUIRE(P().buffer_copy(wmem->buffer, w2.d.offset, src.mem->buffer, 0,
                                static_cast<uint64_t>(k * n2) * sizeof(float), &err) == TF_STATUS_OK);
        check_both("after buffer_copy");

        TensorDesc w1_out = view(wmem, {k, n}, {n, 1}), neg_in = dense({k, n});
        fill_random(neg_in, 15);
        run_ok(TF_OP_NEG, {neg_in.d}, w1_out.d);
        check_both("after an op wrote it");

        // Freed, then the same block (the kit's cache) or another one under the same record,
        // with other values, marked again.
        const std::vector<float> before = check_both("before free");
        wmem.reset();
        wmem = std::make_shared<Block>(k * n + k * n2);
        fill_random(view(wmem, {k * n + k * n2}, {1}), 16);
        w1 = view(wmem, {batch, k, n}, {0, n, 1});
        w2 = view(wmem, {k, n2}, {1, k});
        w2.d.offset = static_cast<uint64_t>(k * n) * sizeof(float);
        mark(wmem->buffer);
        const std::vector<float> after = check_both("a new buffer");
        CHECK(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) != 0);
    }
    for (std::size_t i = 1; i < firsts.size(); ++i)
        CHECK(std::memcmp(firsts[i].data(), firsts[0].data(), firsts[0].size() * sizeof(float)) == 0);
    restart(nullptr, nullptr);
}

// conv2d's weight in a marked buffer: the tiled forward (AVX2) keeps w^T packed, also for
// shapes too small to pack it per call (one 7 x 7 image); the outputs must have the bits of the
// same weight unmarked, whatever the thread count, be a correct convolution, and follow a write.
std::vector<float> conv_values(const TensorDesc &x, const TensorDesc &w, const ConvShape &s) {
    const tf_params_conv2d p = s.params();
    TensorDesc y = dense({s.n, s.o, s.oh(), s.ow()});
    run_ok(TF_OP_CONV2D, {x.d, w.d}, y.d, &p);
    return std::vector<float>(y.mem->data, y.mem->data + y.mem->count);
}

TEST_CASE("a conv2d weight marked constant is packed once for the tiled forward, with the unmarked bits") {
    auto mark = reinterpret_cast<MarkConstant>(P().get_proc("buffer_mark_constant"));
    REQUIRE(static_cast<bool>(mark));
    // One 7 x 7 image (49 positions: 8 tiles of 5 or 6), 47 output channels (two slivers and a
    // half one), groups of 32 channels whose weights start inside the buffer (a second weight
    // after the first), the stem's 7 x 7 stride 2 over phase planes. (12 input channels and
    // groups: not Winograd's, which the next test checks.)
    const ConvShape shapes[] = {
        {1, 12, 7, 7, 47, 3, 3, 1, 1, 1, 1}, {2, 64, 8, 9, 64, 3, 3, 1, 1, 1, 2}, {1, 3, 30, 29, 32, 7, 7, 2, 3, 1, 1}};
    std::vector<std::vector<float>> firsts;
    for (const char *threads : {"1", "2", "3"}) {
        CAPTURE(threads);
        restart(nullptr, threads);
        const bool tiled = cpu_plugin_feature("kernels") == "avx2";
        std::vector<float> all;
        for (const ConvShape &s : shapes) {
            CAPTURE(s.c);
            CAPTURE(s.o);
            const int64_t wn = s.o * (s.c / s.groups) * s.kh * s.kw;
            // The weight after `lead` other floats of the same marked buffer.
            const int64_t lead = 100;
            auto wmem = std::make_shared<Block>(lead + wn);
            fill_random(view(wmem, {lead + wn}, {1}), static_cast<uint32_t>(31 + s.o));
            TensorDesc w =
                view(wmem, {s.o, s.c / s.groups, s.kh, s.kw}, dense_strides({s.o, s.c / s.groups, s.kh, s.kw}));
            w.d.offset = static_cast<uint64_t>(lead) * sizeof(float);
            TensorDesc u = dense({s.o, s.c / s.groups, s.kh, s.kw}), x = dense({s.n, s.c, s.h, s.w});
            std::memcpy(u.mem->data, wmem->data + lead, static_cast<size_t>(wn) * sizeof(float));
            fill_random(x, 41);
            mark(wmem->buffer);
            const std::string before = cpu_plugin_feature("packed_weight_bytes");
            for (int round = 0; round < 2; ++round) {
                const auto got = conv_values(x, w, s), want = conv_values(x, u, s);
                CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
                if (round == 0) all.insert(all.end(), got.begin(), got.end());
            }
            if (tiled) CHECK(std::stoll(cpu_plugin_feature("packed_weight_bytes")) >= std::stoll(before) + wn * 4);
            // A write drops the packed form: the new weight's outputs, not the old one's.
            tf_error err{};
            err.struct_size = sizeof err;
            std::vector<float> fresh(static_cast<size_t>(wn));
            std::mt19937 rng(static_cast<uint32_t>(51 + s.o));
            std::uniform_real_distribution<float> pick(-2.0f, 2.0f);
            for (float &v : fresh) v = pick(rng);
            REQUIRE(P().buffer_write(wmem->buffer, static_cast<uint64_t>(lead) * sizeof(float), fresh.data(),
                                     fresh.size() * sizeof(float), &err) == TF_STATUS_OK);
            std::memcpy(u.mem->data, fresh.data(), fresh.size() * sizeof(float));
            const auto got = conv_values(x, w, s), want = conv_values(x, u, s);
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
            check_conv_forward(s);
        }
        firsts.push_back(all);
    }
    for (std::size_t i = 1; i < firsts.size(); ++i)
        CHECK(std::memcmp(firsts[i].data(), firsts[0].data(), firsts[0].size() * sizeof(float)) == 0);
    restart(nullptr, nullptr);
}

// A 3 x 3 stride-1 conv2d whose weight is marked constant runs Winograd F(2 x 2, 3 x 3) (AVX2;
// kernels_conv_winograd.hpp). Its sums are not the direct paths', so it is checked against the
// convolution in double; for the same bits with 1, 2 and 3 threads; for conv2d_act's epilogue
// with the bits of the unfused f32 ops on its sums; for a write to the weight; and for the
// direct path's bits where an infinity in the input or the weight sends the conv there.
TEST_CASE("a 3x3 stride-1 conv2d with a constant weight (Winograd): correct, thread-invariant, fused epilogue, "
          "writes and infinities") {
    auto mark = reinterpret_cast<MarkConstant>(P().get_proc("buffer_mark_constant"));
    REQUIRE(static_cast<bool>(mark));
    // 7 x 7 (the last tile row and column half outside) to 47 channels (the GEMM's blocks of 6
    // rows and a short one), 3 images of 14 x 13 (tasks across images), padding 0 and 2, a row
    // of 18 tiles (three vectors of 8, the last short), 64 -> 64 channels over 20 x 20, and
    // 16 channels (the fewest it takes).
    const ConvShape shapes[] = {{1, 64, 7, 7, 47, 3, 3, 1, 1, 1, 1},
                                {3, 16, 14, 13, 32, 3, 3, 1, 1, 1, 1},
                                {2, 20, 9, 30, 16, 3, 3, 1, 0, 1, 1},
                                {1, 32, 6, 34, 24, 3, 3, 1, 2, 1, 1},
                                {1, 64, 20, 20, 64, 3, 3, 1, 1, 1, 1}};
    std::vector<std::vector<float>> firsts;
    for (const char *threads : {"1", "2", "3"}) {
        CAPTURE(threads);
        restart(nullptr, threads);
        const bool winograd = cpu_plugin_feature("kernels") == "avx2";
        std::vector<float> all;
        for (const ConvShape &s : shapes) {
            CAPTURE(s.c);
            CAPTURE(s.o);
            const tf_params_conv2d p = s.params();
            auto wmem = std::make_shared<Block>(s.o * s.c * 9);
            TensorDesc w = view(wmem, {s.o, s.c, 3, 3}, dense_strides({s.o, s.c, 3, 3}));
            TensorDesc u = dense({s.o, s.c, 3, 3}), x = dense({s.n, s.c, s.h, s.w});
            TensorDesc y = dense({s.n, s.o, s.oh(), s.ow()});
            fill_random(w, static_cast<uint32_t>(61 + s.o));
            fill_random(x, 71);
            std::memcpy(u.mem->data, wmem->data, static_cast<size_t>(wmem->count) * sizeof(float));
            mark(wmem->buffer);
            run_ok(TF_OP_CONV2D, {x.d, w.d}, y.d, &p);
            check_conv_values(x, w, y, s);
            const std::vector<float> got(y.mem->data, y.mem->data + y.mem->count), direct = conv_values(x, u, s);
            if (winograd) CHECK(got != direct);  // it ran: other sums than the direct path's
            CHECK(conv_values(x, w, s) == got);
            all.insert(all.end(), got.begin(), got.end());

            // conv2d_act: bias, residual and relu, then bias and clip, on the sums, as the unfused
            // f32 ops apply them.
            TensorDesc bias = dense({s.o}), residual = dense({s.n, s.o, s.oh(), s.ow()}),
                       ya = dense({s.n, s.o, s.oh(), s.ow()});
            fill_random(bias, 81);
            fill_random(residual, 82);
            tf_params_conv2d_act pa{};
            pa.struct_size = sizeof pa;
            pa.stride[0] = pa.stride[1] = pa.dilation[0] = pa.dilation[1] = pa.groups = 1;
            pa.padding[0] = pa.padding[1] = s.pad;
            pa.activation = TF_CONV_ACT_RELU;
            run_ok(TF_OP_CONV2D_ACT, {x.d, w.d, bias.d, residual.d}, ya.d, &pa);
            const int64_t plane = s.oh() * s.ow();
            size_t differ = 0;
            for (int64_t i = 0; i < ya.mem->count; ++i) {
                float v = got[static_cast<size_t>(i)] + bias.mem->data[i / plane % s.o];
                v += residual.mem->data[i];
                v = v < 0 ? 0.0f : v;
                differ += std::memcmp(&v, ya.mem->data + i, sizeof v) != 0;
            }
            CHECK(differ == 0);
            // Clip to [-0.25, 0.5] with the bias alone.
            pa.activation = TF_CONV_ACT_CLIP;
            pa.min = -0.25;
            pa.max = 0.5;
            TensorDesc absent;
            run_ok(TF_OP_CONV2D_ACT, {x.d, w.d, bias.d, absent.d}, ya.d, &pa);
            differ = 0;
            for (int64_t i = 0; i < ya.mem->count; ++i) {
                const float v =
                    std::min(std::max(got[static_cast<size_t>(i)] + bias.mem->data[i / plane % s.o], -0.25f), 0.5f);
                differ += std::memcmp(&v, ya.mem->data + i, sizeof v) != 0;
            }
            CHECK(differ == 0);

            // An infinity in the input: the direct path's bits (a transform would spread NaNs).
            const float keep = x.mem->data[3];
            x.mem->data[3] = std::numeric_limits<float>::infinity();
            {
                const auto a = conv_values(x, w, s), b = conv_values(x, u, s);
                CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
            }
            x.mem->data[3] = keep;

            // A write drops the transformed weight: the new weight's convolution.
            tf_error err{};
            err.struct_size = sizeof err;
            std::vector<float> fresh(static_cast<size_t>(wmem->count));
            std::mt19937 rng(static_cast<uint32_t>(91 + s.o));
            std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
            for (float &v : fresh) v = pick(rng);
            REQUIRE(P().buffer_write(wmem->buffer, 0, fresh.data(), fresh.size() * sizeof(float), &err) ==
                    TF_STATUS_OK);
            run_ok(TF_OP_CONV2D, {x.d, w.d}, y.d, &p);
            check_conv_values(x, w, y, s);

            // An infinite weight: the direct path's bits.
            fresh[7] = -std::numeric_limits<float>::infinity();
            REQUIRE(P().buffer_write(wmem->buffer, 0, fresh.data(), fresh.size() * sizeof(float), &err) ==
                    TF_STATUS_OK);
            std::memcpy(u.mem->data, fresh.data(), fresh.size() * sizeof(float));
            {
                const auto a = conv_values(x, w, s), b = conv_values(x, u, s);
                CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
            }
        }
        firsts.push_back(all);
    }
    for (std::size_t i = 1; i < firsts.size(); ++i)
        CHECK(std::memcmp(firsts[i].data(), firsts[0].data(), firsts[0].size() * sizeof(float)) == 0);
    restart(nullptr, nullptr);
}

TEST_CASE("a marked B wider than one GEMM N block (4080 on AVX2) is packed block by block") {
    auto mark = reinterpret_cast<MarkConstant>(P().get_proc("buffer_mark_constant"));
    REQUIRE(static_cast<bool>(mark));
    for (const char *isa : {"generic", static_cast<const char *>(nullptr)}) {  // N blocks of 4096 / 4080
        CAPTURE(cpu_plugin_feature("kernels"));
        restart(isa, nullptr);
        const int64_t m = 37, k = 300, n = 4200;
        TensorDesc a = dense({m, k}), w = dense({k, n}), u = dense({k, n});
        fill_random(a, 21);
        fill_random(w, 22);
        std::memcpy(u.mem->data, w.mem->data, static_cast<size_t>(k * n) * sizeof(float));
        mark(w.mem->buffer);
        for (int round = 0; round < 2; ++round) {
            const auto got = matmul_values(a, w, {m, n}), want = matmul_values(a, u, {m, n});
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
            TensorDesc o = dense({m, n});
            std::memcpy(o.mem->data, got.data(), got.size() * sizeof(float));
            check_matmul(a, u, o);
        }
    }
    restart(nullptr, nullptr);
}

// One to three rows of A against a marked row-major B (a Linear at batch 1) stream the GEMM's
// packed copy of B (kernels_rows_prepacked.cpp, AVX2): the bits of the same B unmarked (read in
// place) and of the same rows inside a product of many rows (the packed GEMM), for any thread
// count, within the float64 bound; K over several K blocks, N over several N blocks and not a
// multiple of the tile width, and batch elements sharing the B.
TEST_CASE("a few rows against a marked row-major B: the unmarked bits, the GEMM's rows, any thread count") {
    auto mark = reinterpret_cast<MarkConstant>(P().get_proc("buffer_mark_constant"));
    REQUIRE(static_cast<bool>(mark));
    struct Case {
        int64_t batch, rows, k, n;
    };
    const Case cases[] = {{1, 1, 3136, 128}, {1, 2, 1100, 70}, {1, 3, 1100, 7},   {1, 1, 40, 4200},
                          {1, 1, 5, 33},     {3, 1, 600, 65},  {1, 2, 513, 4097}, {1, 3, 64, 48}};
    std::vector<std::vector<float>> firsts;
    for (const char *threads : {"1", "2", "3"}) {
        CAPTURE(threads);
        restart(nullptr, threads);
        std::vector<float> all;
        uint32_t seed = 700;
        for (const Case &c : cases) {
            CAPTURE(c.batch);
            CAPTURE(c.rows);
            CAPTURE(c.k);
            CAPTURE(c.n);
            const int64_t big = 20;  // rows of the GEMM product holding the same rows first
            TensorDesc a = dense({c.batch, c.rows, c.k}), w = dense({c.k, c.n}), u = dense({c.k, c.n});
            TensorDesc many = dense({big, c.k});
            fill_random(a, seed++);
            fill_random(w, seed++);
            fill_random(many, seed++);
            std::memcpy(u.mem->data, w.mem->data, static_cast<size_t>(c.k * c.n) * sizeof(float));
            std::memcpy(many.mem->data, a.mem->data, static_cast<size_t>(c.batch * c.rows * c.k) * sizeof(float));
            mark(w.mem->buffer);
            const Dims out_shape{c.batch, c.rows, c.n};
            const TensorDesc wb = view(w.mem, {c.batch, c.k, c.n}, {0, c.n, 1}),
                             ub = view(u.mem, {c.batch, c.k, c.n}, {0, c.n, 1});
            const auto got = matmul_values(a, wb, out_shape), want = matmul_values(a, ub, out_shape);
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
            if (cpu_plugin_feature("kernels").find("avx2") != std::string::npos)  // the packed copy was read
                CHECK(std::stoll(cpu_plugin_feature("packed_weight_bytes")) >= c.k * c.n * 4);
            const auto gemm = matmul_values(many, u, {big, c.n});
            CHECK(std::memcmp(got.data(), gemm.data(), got.size() * sizeof(float)) == 0);
            TensorDesc o = dense(out_shape);
            std::memcpy(o.mem->data, got.data(), got.size() * sizeof(float));
            check_matmul(a, ub, o);
            all.insert(all.end(), got.begin(), got.end());
        }
        firsts.push_back(all);
    }
    for (std::size_t i = 1; i < firsts.size(); ++i)
        CHECK(std::memcmp(firsts[i].data(), firsts[0].data(), firsts[0].size() * sizeof(float)) == 0);
    restart(nullptr, nullptr);
}

TEST_CASE("freed buffers come back from the cache, and shutdown with buffers alive is safe") {
    restart(nullptr, nullptr);
    tf_error err{};
    err.struct_size = sizeof err;
    tf_buffer *first = nullptr, *second = nullptr;
    REQUIRE(P().buffer_alloc(0, 3 << 20, &first, &err) == TF_STATUS_OK);
    void *p = P().buffer_host_ptr(first);
    P().buffer_free(first);
    REQUIRE(P().buffer_alloc(0, 3 << 20, &second, &err) == TF_STATUS_OK);
    CHECK(P().buffer_host_ptr(second) == p);
    CHECK(reinterpret_cast<uintptr_t>(P().buffer_host_ptr(second)) % 64 == 0);
    static_cast<char *>(P().buffer_host_ptr(second))[(3 << 20) - 1] = 1;
    P().shutdown();
    static_cast<char *>(P().buffer_host_ptr(second))[0] = 1;
    P().buffer_free(second);
    REQUIRE(P().init(&err) == TF_STATUS_OK);
}

}  // namespace

// matmul_bias: x [..., M, K] w [K, N] + bias [N], the bias added to each GEMM tile as it is stored.
// Its bits must be matmul's followed by add's (both through this plugin), whatever the path (a
// few rows, the packed GEMM, a product computed as C^T = B^T A^T, several K blocks, k = 0), the
// layouts, the instruction set, the thread count or a weight packed once; and within k + 1 f32
// roundings of a float64 reference.
namespace {

struct BiasCase {
    Dims x_shape, x_strides;
    int64_t n;
    bool w_transposed, bias_strided, out_transposed;
};

// The rank-2 w [K, N] as matmul's rank-r operand (batch axes at stride 0).
TensorDesc broadcast_w(const TensorDesc &w, const Dims &out_shape) {
    Dims shape = out_shape, strides(out_shape.size(), 0);
    const size_t r = out_shape.size();
    shape[r - 2] = w.d.shape[0];
    shape[r - 1] = w.d.shape[1];
    strides[r - 2] = w.d.strides[0];
    strides[r - 1] = w.d.strides[1];
    TensorDesc b = view(w.mem, shape, strides);
    b.d.offset = w.d.offset;
    return b;
}

std::vector<float> values_of(const TensorDesc &t, const Dims &shape) {
    std::vector<float> v;
    const int64_t total = count_of(shape);
    Dims idx(shape.size(), 0);
    for (int64_t e = 0; e < total; ++e) {
        v.push_back(t.at(idx));
        for (size_t a = shape.size(); a-- > 0;) {
            if (++idx[a] < shape[a]) break;
            idx[a] = 0;
        }
    }
    return v;
}

void check_matmul_bias(const BiasCase &c, uint32_t seed, bool mark_w) {
    const size_t r = c.x_shape.size();
    const int64_t k = c.x_shape[r - 1], n = c.n, m = c.x_shape[r - 2];
    Dims out_shape = c.x_shape;
    out_shape[r - 1] = n;
    int64_t x_extent = 1;
    for (size_t i = 0; i < r; ++i) x_extent += (c.x_shape[i] - 1) * c.x_strides[i];
    TensorDesc x = view(std::make_shared<Block>(std::max<int64_t>(x_extent, 1)), c.x_shape, c.x_strides);
    auto wmem = std::make_shared<Block>(k * n);
    TensorDesc w = c.w_transposed ? view(wmem, {k, n}, {1, k}) : view(wmem, {k, n}, {n, 1});
    TensorDesc bias = c.bias_strided ? view(std::make_shared<Block>(3 * n + 1), {n}, {3}) : dense({n});
    fill_random(x, seed);
    fill_random(view(wmem, {k * n}, {1}), seed + 1);
    fill_random(bias, seed + 2);
    if (mark_w) reinterpret_cast<MarkConstant>(P().get_proc("buffer_mark_constant"))(wmem->buffer);
    auto output = [&] {
        if (!c.out_transposed) return dense(out_shape);
        Dims strides = dense_strides(out_shape);  // the last two axes swapped in memory
        strides[r - 1] = m;
        strides[r - 2] = 1;
        return view(std::make_shared<Block>(count_of(out_shape)), out_shape, strides);
    };
    TensorDesc fused = output(), product = output(), separate = output();
    run_ok(TF_OP_MATMUL_BIAS, {x.d, w.d, bias.d}, fused.d);
    run_ok(TF_OP_MATMUL, {x.d, broadcast_w(w, out_shape).d}, product.d);
    Dims b_strides(r, 0);
    b_strides[r - 1] = bias.d.strides[0];
    run_ok(TF_OP_ADD, {product.d, view(bias.mem, out_shape, b_strides).d}, separate.d);
    const std::vector<float> got = values_of(fused, out_shape), want = values_of(separate, out_shape);
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    // float64: sum_p x w + bias, within (k + 1) roundings of sum |x w| + |bias|.
    int bad = 0;
    const int64_t rows = count_of(out_shape) / std::max<int64_t>(n, 1);
    for (int64_t row = 0; row < rows; ++row) {
        Dims idx(r, 0);
        int64_t rest = row;
        for (size_t a = r - 1; a-- > 0;) {
            idx[a] = rest % c.x_shape[a];
            rest /= c.x_shape[a];
        }
        for (int64_t j = 0; j < n; ++j) {
            double s = bias.at({j}), scale = std::fabs(bias.at({j}));
            for (int64_t p = 0; p < k; ++p) {
                idx[r - 1] = p;
                const double prod = static_cast<double>(x.at(idx)) * w.at({p, j});
                s += prod;
                scale += std::fabs(prod);
            }
            const double bound = static_cast<double>(k + 1) * 0x1p-24 * scale + 1e-30;
            if (std::fabs(got[static_cast<size_t>(row * n + j)] - s) > bound && ++bad <= 3)
                FAIL_CHECK("element ", row, ",", j, ": got ", got[static_cast<size_t>(row * n + j)], " want ", s);
        }
    }
    CHECK(bad == 0);
}

void matmul_bias_suite(bool mark_w) {
    const BiasCase cases[] = {
        {{3, 5}, {5, 1}, 7, false, false, false},  // a few rows: the one-row path, bias after
        {{1, 3136}, {3136, 1}, 128, false, false, false},  // fashion_cnn's Linear at batch 1
        {{2, 600}, {600, 1}, 70, false, true, false},  // two rows, a strided bias
        {{3, 300}, {600, 2}, 40, false, false, false},  // three rows of a strided x
        {{1, 600}, {600, 1}, 33, true, false, false},  // one row, x W^T along W's rows
        {{37, 600}, {600, 1}, 70, false, false, false},  // two K blocks on AVX2
        {{3, 37, 65}, {37 * 65, 65, 1}, 67, false, false, false},  // batch folded into M
        {{2, 40, 65}, {1, 2 * 65, 2}, 33, true, true, true},  // strided x, w^T, strided bias, transposed y
        {{96, 70}, {70, 1}, 4, false, false, false},  // computed as C^T = B^T A^T: a row bias
        {{128, 64}, {64, 1}, 64, true, false, false},  // bert's projections
        {{300, 257}, {257, 1}, 263, false, false, false},  // split over threads inside the GEMM
        {{20, 0}, {1, 1}, 9, false, false, false},  // k = 0: the bias alone
    };
    uint32_t seed = 500;
    for (const BiasCase &c : cases) {
        CAPTURE(c.x_shape.size());
        CAPTURE(c.x_shape[c.x_shape.size() - 2]);
        CAPTURE(c.x_shape.back());
        CAPTURE(c.n);
        check_matmul_bias(c, seed, mark_w);
        seed += 3;
    }
}

}  // namespace

TEST_CASE("matmul_bias has the bits of matmul then add on every path, instruction set and thread count") {
    for (const char *isa : {"generic", static_cast<const char *>(nullptr)})
        for (const char *threads : {"1", "2", "3"}) {
            CAPTURE(isa ? isa : "native");
            CAPTURE(threads);
            restart(isa, threads);
            matmul_bias_suite(false);
            matmul_bias_suite(true);  // w packed once (a marked constant buffer)
        }
    restart(nullptr, nullptr);
}
