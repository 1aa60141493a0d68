// Neural-network ops against naive host loops: max/avg pooling, softmax,
// log_softmax, layer_norm, rms_norm, rope (both layouts), attention (mask,
// causal), embedding, cross_entropy (every reduction, ignore_index) and one_hot
// (conv2d: test_gemm.cpp); then, on the backend under test, each against cpu.
#include <algorithm>
#include <limits>

#include "device_parity.hpp"
#include "reference_nn.hpp"

using namespace tinyfin;
using ref::attention_ref;
using ref::conv2d_ref;
using ref::D;
using ref::F;
using ref::norm_ref;
using ref::permute_ref;
using ref::pool_ref;
using ref::rope_ref;
using ref::softmax_ref;

// ---- pooling --------------------------------------------------------------------------

TEST_CASE("max_pool2d and avg_pool2d against a naive loop") {
    struct Case {
        Shape sx;
        Pool2dOptions o;
    };
    std::vector<Case> cases{
        {{2, 3, 4, 4}, {}},  // 2x2, stride 2
        {{1, 2, 5, 5}, {3, 3, 2, 2, 1, 1, true}},  // 3x3, stride 2, padding 1
        {{1, 2, 5, 5}, {3, 3, 2, 2, 1, 1, false}},  // padding not counted
        {{1, 1, 6, 7}, {2, 3, 1, 2, 0, 1, true}},  // rectangular
        {{2, 1, 5, 4}, {2, 2, 3, 1, 1, 0, false}},
        {{1, 1, 3, 3}, {3, 3, 1, 1, 0, 0, true}},  // one window
    };
    uint64_t seed = 200;
    for (const Case &c : cases) {
        INFO("x " << shape_str(c.sx) << " kernel " << c.o.kernel_h << "x" << c.o.kernel_w << " stride " << c.o.stride_h
                  << "x" << c.o.stride_w << " pad " << c.o.pad_h << "x" << c.o.pad_w << " include_pad "
                  << c.o.count_include_pad);
        F x = ref::values(ref::numel(c.sx), seed++, -2, 2);
        Shape so;
        D want = pool_ref(ref::to_double(x), c.sx, c.o, true, so);
        ref::check_close(max_pool2d(ref::tensor(x, c.sx), c.o), want, so, 0, 0);
        want = pool_ref(ref::to_double(x), c.sx, c.o, false, so);
        ref::check_close(avg_pool2d(ref::tensor(x, c.sx), c.o), want, so, 1e-6, 1e-5);
    }
    // max pooling of all-negative values with padding: padding is -inf, never 0
    Pool2dOptions o{2, 2, 2, 2, 1, 1, true};
    ref::check_close(max_pool2d(full({1, 1, 2, 2}, -5), o), D(4, -5.0), {1, 1, 2, 2}, 0, 0);
}

TEST_CASE("pooling of a transposed input") {
    F v = ref::values(2 * 6 * 4, 210, -2, 2);
    Tensor x = ref::tensor(v, {1, 2, 6, 4}).transpose(2, 3);  // [1,2,4,6]
    Shape sx;
    D dx = permute_ref(ref::to_double(v), {1, 2, 6, 4}, {0, 1, 3, 2}, sx);
    Pool2dOptions o{2, 3, 0, 0, 0, 1, true};
    Shape so;
    ref::check_close(max_pool2d(x, o), pool_ref(dx, sx, o, true, so), so, 0, 0);
    ref::check_close(avg_pool2d(x, o), pool_ref(dx, sx, o, false, so), so, 1e-6, 1e-5);
}

// ---- softmax --------------------------------------------------------------------------

TEST_CASE("softmax and log_softmax along every axis, strided, and with large values") {
    Shape shape{2, 3, 4};
    F v = ref::values(24, 300, -3, 3);
    D dv = ref::to_double(v);
    Tensor x = ref::tensor(v, shape);
    for (int axis : {0, 1, 2, -1}) {
        INFO("axis " << axis);
        int ax = axis < 0 ? axis + 3 : axis;
        ref::check_close(softmax(x, axis), softmax_ref(dv, shape, ax, false), shape, 1e-6, 1e-5);
        ref::check_close(log_softmax(x, axis), softmax_ref(dv, shape, ax, true), shape, 1e-5, 1e-5);
    }
    // transposed: [4,3,2]
    Shape st;
    D dt = permute_ref(dv, shape, {2, 1, 0}, st);
    ref::check_close(softmax(x.permute({2, 1, 0}), 1), softmax_ref(dt, st, 1, false), st, 1e-6, 1e-5);
    ref::check_close(log_softmax(x.permute({2, 1, 0}), -1), softmax_ref(dt, st, 2, true), st, 1e-5, 1e-5);
    // step-sliced along the softmax axis
    D ds;
    for (int64_t i = 0; i < 24; i += 2) ds.push_back(dv[i]);
    ref::check_close(softmax(x.slice(2, 0, 4, 2), -1), softmax_ref(ds, {2, 3, 2}, 2, false), {2, 3, 2}, 1e-6, 1e-5);
    // large logits do not overflow; -inf gets probability 0
    ref::check_close(softmax(ref::tensor({1000, 1001, -INFINITY}, {3})),
                     softmax_ref(D{1000, 1001, -INFINITY}, {3}, 0, false), {3}, 1e-6, 1e-5);
    ref::check_close(log_softmax(ref::tensor({-1000, 0}, {2})), D{-1000, 0}, {2}, 1e-3, 1e-6);
    // rank-1 and one-element axes
    ref::check_close(softmax(ref::tensor({5}, {1})), D{1}, {1});
    ref::check_close(log_softmax(ones({3, 1}), 1), D(3, 0.0), {3, 1});
    CHECK(softmax(zeros({0, 4})).shape() == Shape{0, 4});
}

// ---- norms ------------------------------------------------------------------------------

TEST_CASE("layer_norm and rms_norm over one and two axes, with and without affine") {
    Shape shape{3, 2, 4};
    F v = ref::values(24, 400, -2, 3);
    D dv = ref::to_double(v);
    Tensor x = ref::tensor(v, shape);
    for (int n_axes : {1, 2}) {
        INFO("n_axes " << n_axes);
        int64_t group = n_axes == 1 ? 4 : 8;
        Shape s = n_axes == 1 ? Shape{4} : Shape{2, 4};
        F w = ref::values(group, 401 + n_axes, 0.5, 1.5), b = ref::values(group, 403 + n_axes);
        D ones_d(group, 1.0), zeros_d(group, 0.0);
        ref::check_close(layer_norm(x, n_axes), norm_ref(dv, group, ones_d, zeros_d, 1e-5, false), shape, 1e-5, 1e-4);
        ref::check_close(layer_norm(x, n_axes, ref::tensor(w, s), ref::tensor(b, s)),
                         norm_ref(dv, group, ref::to_double(w), ref::to_double(b), 1e-5, false), shape, 1e-5, 1e-4);
        ref::check_close(layer_norm(x, n_axes, ref::tensor(w, s), Tensor(), 0.1),
                         norm_ref(dv, group, ref::to_double(w), zeros_d, 0.1, false), shape, 1e-5, 1e-4);
        ref::check_close(rms_norm(x, n_axes), norm_ref(dv, group, ones_d, zeros_d, 1e-6, true), shape, 1e-5, 1e-4);
        ref::check_close(rms_norm(x, n_axes, ref::tensor(w, s), 0.5),
                         norm_ref(dv, group, ref::to_double(w), zeros_d, 0.5, true), shape, 1e-5, 1e-4);
    }
    // transposed input: [4,2,3] normalised over the last axis
    Shape st;
    D dt = permute_ref(dv, shape, {2, 1, 0}, st);
    ref::check_close(layer_norm(x.permute({2, 1, 0}), 1), norm_ref(dt, 3, D(3, 1.0), D(3, 0.0), 1e-5, false), st, 1e-5,
                     1e-4);
    ref::check_close(rms_norm(x.permute({2, 1, 0}), 1), norm_ref(dt, 3, D(3, 1.0), D(3, 0.0), 1e-6, true), st, 1e-5,
                     1e-4);
    // a constant row normalises to the bias (layer_norm) without NaN
    ref::check_close(layer_norm(full({2, 3}, 7), 1, ones({3}), full({3}, 0.25)), D(6, 0.25), {2, 3}, 1e-5, 0);
    // a large offset needs a centred variance
    F big = ref::values(8, 410, 999, 1001);
    ref::check_close(layer_norm(ref::tensor(big, {2, 4}), 1),
                     norm_ref(ref::to_double(big), 4, D(4, 1.0), D(4, 0.0), 1e-5, false), {2, 4}, 2e-3, 1e-3);
}

// ---- rope -------------------------------------------------------------------------------

TEST_CASE("rope in both layouts, with a position offset, theta, and strided input") {
    Shape shape{2, 3, 5, 6};  // [B, H, T, D]
    F v = ref::values(ref::numel(shape), 500);
    D dv = ref::to_double(v);
    Tensor x = ref::tensor(v, shape);
    for (bool interleaved : {false, true})
        for (int64_t offset : {int64_t(0), int64_t(7)}) {
            INFO("interleaved " << interleaved << " offset " << offset);
            ref::check_close(rope(x, 10000.0, interleaved, offset), rope_ref(dv, shape, 10000.0, interleaved, offset),
                             shape, 1e-5, 1e-5);
            ref::check_close(rope(x, 50.0, interleaved, offset), rope_ref(dv, shape, 50.0, interleaved, offset), shape,
                             1e-5, 1e-5);
        }
    // the two layouts differ
    CHECK(rope(x, 100, false).to_vector<float>() != rope(x, 100, true).to_vector<float>());
    // position 0 is the identity
    ref::check_close(rope(x.slice(2, 0, 1), 100), ref::host(x.slice(2, 0, 1).contiguous()), {2, 3, 1, 6}, 0, 0);
    // [B, T, H, D] transposed to [B, H, T, D]
    Shape bthd{2, 4, 3, 4};
    F u = ref::values(ref::numel(bthd), 501);
    Shape st;
    D dt = permute_ref(ref::to_double(u), bthd, {0, 2, 1, 3}, st);
    Tensor xt = ref::tensor(u, bthd).transpose(1, 2);
    REQUIRE_FALSE(xt.is_contiguous());
    for (bool interleaved : {false, true})
        ref::check_close(rope(xt, 1000.0, interleaved, 3), rope_ref(dt, st, 1000.0, interleaved, 3), st, 1e-5, 1e-5);
    // rank 2: [T, D]
    F r = ref::values(8, 502);
    ref::check_close(rope(ref::tensor(r, {4, 2}), 10.0), rope_ref(ref::to_double(r), {4, 2}, 10.0, false, 0), {4, 2},
                     1e-5, 1e-5);
}

// ---- attention --------------------------------------------------------------------------

TEST_CASE("scaled_dot_product_attention: plain, scale, mask, causal, Tq != Tk") {
    struct Case {
        int64_t b, tq, tk, d, dv;
        bool mask, causal;
        double scale;
    };
    std::vector<Case> cases{
        {2, 3, 3, 4, 4, false, false, 0}, {2, 3, 5, 4, 2, false, false, 0.7}, {1, 4, 4, 3, 3, true, false, 0},
        {2, 4, 4, 4, 3, false, true, 0},  {1, 2, 5, 4, 4, false, true, 0},    {2, 3, 6, 2, 5, true, true, 0.25},
    };
    uint64_t seed = 600;
    for (const Case &c : cases) {
        INFO("b " << c.b << " tq " << c.tq << " tk " << c.tk << " d " << c.d << " dv " << c.dv << " mask " << c.mask
                  << " causal " << c.causal << " scale " << c.scale);
        F q = ref::values(c.b * c.tq * c.d, seed++), k = ref::values(c.b * c.tk * c.d, seed++);
        F v = ref::values(c.b * c.tk * c.dv, seed++);
        F m = ref::values(c.tq * c.tk, seed++, -2, 1);
        if (c.mask) m[1] = -INFINITY;  // a hidden position (row 0 keeps others)
        double s = c.scale > 0 ? c.scale : 1 / std::sqrt(static_cast<double>(c.d));
        D want = attention_ref(ref::to_double(q), ref::to_double(k), ref::to_double(v),
                               c.mask ? ref::to_double(m) : D{}, c.b, c.tq, c.tk, c.d, c.dv, c.causal, s);
        Tensor out = scaled_dot_product_attention(ref::tensor(q, {c.b, c.tq, c.d}), ref::tensor(k, {c.b, c.tk, c.d}),
                                                  ref::tensor(v, {c.b, c.tk, c.dv}),
                                                  c.mask ? ref::tensor(m, {c.tq, c.tk}) : Tensor(), c.causal, c.scale);
        ref::check_close(out, want, {c.b, c.tq, c.dv}, 1e-5, 1e-4);
    }
}

TEST_CASE("attention with heads, broadcast k/v batch and transposed q") {
    // q [B=2, H=2, T=3, D=4] from a [B, T, H, D] tensor; k and v shared across the batch.
    Shape bthd{2, 3, 2, 4};
    F qv = ref::values(ref::numel(bthd), 610), kv = ref::values(2 * 3 * 4, 611), vv = ref::values(2 * 3 * 4, 612);
    Shape sq;
    D dq = permute_ref(ref::to_double(qv), bthd, {0, 2, 1, 3}, sq);
    Tensor q = ref::tensor(qv, bthd).transpose(1, 2);
    Tensor k = ref::tensor(kv, {1, 2, 3, 4}), v = ref::tensor(vv, {1, 2, 3, 4});
    Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), true);
    D want;
    for (int b = 0; b < 2; ++b)
        for (int h = 0; h < 2; ++h) {
            D qh(dq.begin() + (b * 2 + h) * 12, dq.begin() + (b * 2 + h) * 12 + 12);
            D kh(kv.begin() + h * 12, kv.begin() + h * 12 + 12), vh(vv.begin() + h * 12, vv.begin() + h * 12 + 12);
            D o = attention_ref(qh, kh, vh, D{}, 1, 3, 3, 4, 4, true, 0.5);
            want.insert(want.end(), o.begin(), o.end());
        }
    ref::check_close(out, want, {2, 2, 3, 4}, 1e-5, 1e-4);
    // causal with one query attends to every key (Tk - Tq offset)
    F one = ref::values(4, 613);
    Tensor single = scaled_dot_product_attention(ref::tensor(one, {1, 1, 4}), k.view({2, 3, 4}).slice(0, 0, 1),
                                                 v.view({2, 3, 4}).slice(0, 0, 1), Tensor(), true);
    D kk(kv.begin(), kv.begin() + 12), vk(vv.begin(), vv.begin() + 12);
    ref::check_close(single, attention_ref(ref::to_double(one), kk, vk, D{}, 1, 1, 3, 4, 4, false, 0.5), {1, 1, 4},
                     1e-5, 1e-4);
}

TEST_CASE("attention large enough to cross the GEMM blocking") {
    int64_t b = 2, tq = 130, tk = 140, d = 40, dv = 24;
    F q = ref::values(b * tq * d, 620), k = ref::values(b * tk * d, 621), v = ref::values(b * tk * dv, 622);
    D want = attention_ref(ref::to_double(q), ref::to_double(k), ref::to_double(v), D{}, b, tq, tk, d, dv, true,
                           1 / std::sqrt(40.0));
    Tensor out = scaled_dot_product_attention(ref::tensor(q, {b, tq, d}), ref::tensor(k, {b, tk, d}),
                                              ref::tensor(v, {b, tk, dv}), Tensor(), true);
    ref::check_close(out, want, {b, tq, dv}, 1e-5, 1e-4);
}

// ---- embedding, cross_entropy, one_hot -----------------------------------------------

TEST_CASE("embedding picks rows for i32 and i64 indices of any shape") {
    F w = ref::values(5 * 3, 700);
    Tensor weight = ref::tensor(w, {5, 3});
    Tensor idx = from_vector(std::vector<int64_t>{4, 0, 2, 2, 1, 4}, {2, 3});
    Tensor out = embedding(weight, idx);
    D want;
    for (int64_t i : {4, 0, 2, 2, 1, 4}) want.insert(want.end(), w.begin() + i * 3, w.begin() + i * 3 + 3);
    ref::check_close(out, want, {2, 3, 3}, 0, 0);
    ref::check_close(embedding(weight, from_vector(std::vector<int32_t>{4, 0, 2, 2, 1, 4}, {6})), want, {6, 3}, 0, 0);
    // rank-0 index, empty index list
    ref::check_close(embedding(weight, from_vector(std::vector<int32_t>{3}, {})), D(w.begin() + 9, w.begin() + 12), {3},
                     0, 0);
    CHECK(embedding(weight, zeros({0}, DType::i64)).shape() == Shape{0, 3});
    // transposed weight [3,5]^T and step-sliced indices
    Tensor wt = ref::tensor(w, {3, 5}).transpose(0, 1);  // [5,3]: row r is column r of [3,5]
    Tensor sliced = from_vector(std::vector<int64_t>{1, 9, 3, 9, 0}, {5}).slice(0, 0, 5, 2);  // 1, 3, 0
    D want_t;
    for (int64_t r : {1, 3, 0})
        for (int c = 0; c < 3; ++c) want_t.push_back(w[c * 5 + r]);
    ref::check_close(embedding(wt, sliced), want_t, {3, 3}, 0, 0);
}

TEST_CASE("cross_entropy: every reduction, ignore_index, i32 and i64 labels, strided logits") {
    int64_t n = 5, c = 4;
    F logits = ref::values(n * c, 800, -3, 3);
    D dl = ref::to_double(logits);
    D lsm = softmax_ref(dl, {n, c}, 1, true);
    std::vector<int64_t> labels{3, 0, -100, 2, 1};
    D per(n);
    double total = 0;
    int counted = 0;
    for (int64_t i = 0; i < n; ++i) {
        per[i] = labels[i] == -100 ? 0.0 : -lsm[i * c + labels[i]];
        if (labels[i] != -100) total += per[i], ++counted;
    }
    Tensor x = ref::tensor(logits, {n, c});
    Tensor y = from_vector(labels, {n});
    ref::check_close(cross_entropy(x, y, Reduction::none), per, {n}, 1e-5, 1e-5);
    ref::check_close(cross_entropy(x, y, Reduction::sum), D{total}, {}, 1e-5, 1e-5);
    ref::check_close(cross_entropy(x, y), D{total / counted}, {}, 1e-5, 1e-5);
    std::vector<int32_t> labels32(labels.begin(), labels.end());
    ref::check_close(cross_entropy(x, from_vector(labels32, {n}), Reduction::mean), D{total / counted}, {}, 1e-5, 1e-5);
    // a custom ignore_index (1); -100 is then an ordinary, out-of-range label, so use valid ones
    std::vector<int64_t> l2{3, 1, 0, 1, 2};
    D per2(n);
    double total2 = 0;
    for (int64_t i = 0; i < n; ++i) {
        per2[i] = l2[i] == 1 ? 0.0 : -lsm[i * c + l2[i]];
        total2 += per2[i];
    }
    Tensor y2 = from_vector(l2, {n});
    ref::check_close(cross_entropy(x, y2, Reduction::none, 1), per2, {n}, 1e-5, 1e-5);
    ref::check_close(cross_entropy(x, y2, Reduction::mean, 1), D{total2 / 3}, {}, 1e-5, 1e-5);
    ref::check_close(cross_entropy(x, y2, Reduction::sum, 1), D{total2}, {}, 1e-5, 1e-5);
    // every label ignored: mean is 0/0 = NaN, sum is 0
    Tensor all_ignored = full({n}, -100, DType::i64);
    CHECK(std::isnan(cross_entropy(x, all_ignored).item<float>()));
    CHECK(cross_entropy(x, all_ignored, Reduction::sum).item<float>() == 0);
    // transposed logits: [C, N] viewed as [N, C]
    F tr(n * c);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < c; ++j) tr[j * n + i] = logits[i * c + j];
    Tensor xt = ref::tensor(tr, {c, n}).transpose(0, 1);
    REQUIRE_FALSE(xt.is_contiguous());
    ref::check_close(cross_entropy(xt, y, Reduction::none), per, {n}, 1e-5, 1e-5);
    // large logits stay finite
    Tensor big = ref::tensor({1000, 0, -1000, 1000}, {2, 2});
    ref::check_close(cross_entropy(big, from_vector(std::vector<int64_t>{0, 0}, {2}), Reduction::none), D{0, 2000}, {2},
                     1e-3, 1e-5);
}

TEST_CASE("one_hot for i32 and i64 labels into several dtypes") {
    Tensor labels = from_vector(std::vector<int64_t>{2, 0, 3, 3}, {2, 2});
    Tensor oh = one_hot(labels, 4);
    CHECK(oh.shape() == Shape{2, 2, 4});
    CHECK(oh.dtype() == DType::f32);
    CHECK(oh.to_vector<float>() == F{0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1});
    Tensor oi = one_hot(from_vector(std::vector<int32_t>{1, 0}, {2}), 2, DType::i64);
    CHECK(oi.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0});
    CHECK(one_hot(from_vector(std::vector<int32_t>{0}, {}), 3, DType::boolean).to_vector<bool>() ==
          std::vector<bool>{true, false, false});
    CHECK(one_hot(from_vector(std::vector<int64_t>{1, 5, 0}, {3}).slice(0, 0, 3, 2), 2).to_vector<float>() ==
          F{0, 1, 1, 0});
    CHECK(one_hot(zeros({0}, DType::i64), 3).shape() == Shape{0, 3});
}

TEST_CASE("nn ops on zero-size batches") {
    CHECK(conv2d(zeros({0, 3, 5, 5}), ones({2, 3, 3, 3}), ones({2})).shape() == Shape{0, 2, 3, 3});
    CHECK(max_pool2d(zeros({0, 2, 4, 4})).shape() == Shape{0, 2, 2, 2});
    CHECK(avg_pool2d(zeros({2, 0, 4, 4})).shape() == Shape{2, 0, 2, 2});
    CHECK(layer_norm(zeros({0, 4}), 1, ones({4}), zeros({4})).shape() == Shape{0, 4});
    CHECK(rms_norm(zeros({0, 4}), 1).shape() == Shape{0, 4});
    CHECK(rope(zeros({0, 3, 4})).shape() == Shape{0, 3, 4});
    CHECK(rope(zeros({2, 0, 4})).shape() == Shape{2, 0, 4});
    CHECK(scaled_dot_product_attention(zeros({0, 3, 4}), zeros({0, 5, 4}), zeros({0, 5, 2})).shape() == Shape{0, 3, 2});
    CHECK(scaled_dot_product_attention(zeros({2, 0, 4}), zeros({2, 5, 4}), zeros({2, 5, 2}), Tensor(), true).shape() ==
          Shape{2, 0, 2});
    Tensor no_labels = zeros({0}, DType::i64);
    CHECK(cross_entropy(zeros({0, 3}), no_labels, Reduction::none).shape() == Shape{0});
    CHECK(cross_entropy(zeros({0, 3}), no_labels, Reduction::sum).item<float>() == 0);
    CHECK(std::isnan(cross_entropy(zeros({0, 3}), no_labels, Reduction::mean).item<float>()));
    CHECK(embedding(ones({4, 0}), from_vector(std::vector<int64_t>{1, 2}, {2})).shape() == Shape{2, 0});
}

TEST_CASE("nn ops on broadcast (stride-0) inputs") {
    // One [3,4] row block expanded over a batch of 2: every op sees stride 0 on the batch axis.
    F v = ref::values(12, 900, -2, 2);
    D dv = ref::to_double(v), twice = dv;
    twice.insert(twice.end(), dv.begin(), dv.end());
    Tensor e = ref::tensor(v, {1, 3, 4}).expand({2, 3, 4});
    ref::check_close(softmax(e, -1), softmax_ref(twice, {2, 3, 4}, 2, false), {2, 3, 4}, 1e-6, 1e-5);
    ref::check_close(log_softmax(e, 0), softmax_ref(twice, {2, 3, 4}, 0, true), {2, 3, 4}, 1e-5, 1e-5);
    ref::check_close(layer_norm(e, 1), norm_ref(twice, 4, D(4, 1.0), D(4, 0.0), 1e-5, false), {2, 3, 4}, 1e-5, 1e-4);
    ref::check_close(rms_norm(e, 2), norm_ref(twice, 12, D(12, 1.0), D(12, 0.0), 1e-6, true), {2, 3, 4}, 1e-5, 1e-4);
    ref::check_close(rope(e, 100.0, true), rope_ref(twice, {2, 3, 4}, 100.0, true, 0), {2, 3, 4}, 1e-5, 1e-5);
    // a column expanded along the last axis: every element of a row is the same
    Tensor col = ref::tensor({1, 2, 3}, {3, 1}).expand({3, 4});
    ref::check_close(softmax(col), D(12, 0.25), {3, 4}, 1e-6, 1e-5);
    Shape sx{2, 2, 3, 4};
    D x4 = twice;
    x4.insert(x4.end(), twice.begin(), twice.end());  // [2,2,3,4] from [1,1,3,4]
    Tensor e4 = ref::tensor(v, {1, 1, 3, 4}).expand(sx);
    F w = ref::values(3 * 2 * 2 * 2, 901);
    Shape so;
    ref::check_close(conv2d(e4, ref::tensor(w, {3, 2, 2, 2})),
                     conv2d_ref(x4, sx, ref::to_double(w), {3, 2, 2, 2}, nullptr, {}, so), so, 1e-5, 1e-5);
    ref::check_close(max_pool2d(e4, {2, 2, 1, 2}), pool_ref(x4, sx, {2, 2, 1, 2}, true, so), so, 0, 0);
    ref::check_close(avg_pool2d(e4, {3, 2, 1, 1, 1, 0, false}), pool_ref(x4, sx, {3, 2, 1, 1, 1, 0, false}, false, so),
                     so, 1e-6, 1e-5);
    // attention with one key/value set expanded over the batch and a stride-0 mask
    F k = ref::values(12, 902), q = ref::values(2 * 2 * 4, 903);
    Tensor kk = ref::tensor(k, {1, 3, 4}).expand({2, 3, 4});
    Tensor mask = ref::tensor({0, -1, 0.5f}, {1, 3}).expand({2, 3});
    D k2 = ref::to_double(k);
    k2.insert(k2.end(), k.begin(), k.end());
    D m2{0, -1, 0.5, 0, -1, 0.5};
    ref::check_close(scaled_dot_product_attention(ref::tensor(q, {2, 2, 4}), kk, kk, mask),
                     attention_ref(ref::to_double(q), k2, k2, m2, 2, 2, 3, 4, 4, false, 0.5), {2, 2, 4}, 1e-5, 1e-4);
    // cross_entropy of one row repeated, embedding of an expanded index
    Tensor rows = ref::tensor({0.5f, -1, 2}, {1, 3}).expand({4, 3});
    D lsm = softmax_ref(D{0.5, -1, 2}, {3}, 0, true);
    ref::check_close(cross_entropy(rows, from_vector(std::vector<int64_t>{0, 1, 2, 1}, {4}), Reduction::none),
                     D{-lsm[0], -lsm[1], -lsm[2], -lsm[1]}, {4}, 1e-5, 1e-5);
    Tensor idx = from_vector(std::vector<int64_t>{2}, {1}).expand({3});
    ref::check_close(embedding(ref::tensor(v, {4, 3}), idx),
                     D{dv[6], dv[7], dv[8], dv[6], dv[7], dv[8], dv[6], dv[7], dv[8]}, {3, 3}, 0, 0);
}

TEST_CASE("nn ops on f16 and bf16 inputs") {
    for (const ref::Half &half : ref::halves) {
        INFO(std::string(dtype_name(half.dtype)));
        DType d = half.dtype;
        Shape sx{1, 2, 5, 5}, sw{3, 2, 3, 3};
        auto [x, dx] = ref::half_input(ref::values(50, 1500), sx, d);
        auto [w, dw] = ref::half_input(ref::values(54, 1501), sw, d);
        auto [b, db] = ref::half_input(ref::values(3, 1502), {3}, d);
        Conv2dOptions o{2, 1, 1, 0, 1, 2, 1};
        Shape so;
        ref::check_half(conv2d(x, w, b, o), half, conv2d_ref(dx, sx, dw, sw, &db, o, so), so);
        Pool2dOptions p{3, 3, 2, 2, 1, 1, false};
        ref::check_half(max_pool2d(x, p), half, pool_ref(dx, sx, p, true, so), so);
        ref::check_half(avg_pool2d(x, p), half, pool_ref(dx, sx, p, false, so), so);
        Shape s3{2, 3, 4};
        auto [y, dy] = ref::half_input(ref::values(24, 1503, -3, 3), s3, d);
        ref::check_half(softmax(y, 1), half, softmax_ref(dy, s3, 1, false), s3);
        ref::check_half(log_softmax(y), half, softmax_ref(dy, s3, 2, true), s3);
        auto [g, dg] = ref::half_input(ref::values(4, 1504, 0.5, 1.5), {4}, d);
        auto [h, dh] = ref::half_input(ref::values(4, 1505), {4}, d);
        ref::check_half(layer_norm(y, 1, g, h), half, norm_ref(dy, 4, dg, dh, 1e-5, false), s3);
        ref::check_half(rms_norm(y, 1, g), half, norm_ref(dy, 4, dg, D(4, 0.0), 1e-6, true), s3);
        ref::check_half(rope(y, 100.0, false, 3), half, rope_ref(dy, s3, 100.0, false, 3), s3);
        ref::check_half(rope(y, 100.0, true), half, rope_ref(dy, s3, 100.0, true, 0), s3);
        auto [k, dk] = ref::half_input(ref::values(2 * 5 * 4, 1506), {2, 5, 4}, d);
        auto [v, dv] = ref::half_input(ref::values(2 * 5 * 2, 1507), {2, 5, 2}, d);
        auto [m, dm] = ref::half_input(ref::values(15, 1508, -1, 0), {3, 5}, d);
        ref::check_half(scaled_dot_product_attention(y, k, v, m, true), half,
                        attention_ref(dy, dk, dv, dm, 2, 3, 5, 4, 2, true, 0.5), {2, 3, 2});
        Tensor labels = from_vector(std::vector<int64_t>{3, -100, 0, 1, 2, 2}, {6});
        Tensor logits = y.reshape({6, 4});
        D lsm = softmax_ref(dy, {6, 4}, 1, true), per;
        double total = 0;
        for (int64_t i = 0, label; i < 6; ++i) {
            label = labels.to_vector<int64_t>()[i];
            per.push_back(label < 0 ? 0.0 : -lsm[i * 4 + label]);
            total += per.back();
        }
        ref::check_half(cross_entropy(logits, labels, Reduction::none), half, per, {6});
        ref::check_half(cross_entropy(logits, labels), half, D{total / 5}, {});
        D rows;
        for (int64_t r : {2, 0, 2}) rows.insert(rows.end(), dy.begin() + r * 4, dy.begin() + r * 4 + 4);
        ref::check_half(embedding(logits, from_vector(std::vector<int32_t>{2, 0, 2}, {3})), half, rows, {3, 4});
        CHECK(one_hot(from_vector(std::vector<int64_t>{1}, {1}), 2, d).dtype() == d);
    }
}

// ---- On the backend under test (suite "device") ---------------------------------------------------
// ops-nn-<backend> runs these with TINYFIN_BACKEND=vulkan, opengl or opencl and no fallback: each
// op on the backend's tensors against the same op on cpu tensors (held to the host references by
// the cases above), with odd sizes, broadcasting, views, rank 0, empty tensors, every dtype the
// kernels take and special values. The cpu run leaves the suite out.

TEST_SUITE_BEGIN("device");
namespace on_device {

using namespace vt;
namespace tf = tinyfin;

TEST_CASE("nn: pooling forward and backward") {
    struct PoolCase {
        const char *name;
        Shape x;
        tf::Pool2dOptions o;
    };
    const PoolCase cases[] = {
        {"2x2", {2, 3, 10, 11}, {}},
        {"3x3 stride 2 padding 1", {1, 2, 9, 12}, {3, 3, 2, 2, 1, 1, true}},
        {"3x2 stride 1 (overlapping)", {2, 2, 7, 6}, {3, 2, 1, 1, 1, 0, false}},
    };
    for (const PoolCase &c : cases) {
        // Few distinct values: windows with tied maxima.
        Pair xi = integers<int32_t>(c.x, 151, -3, 3);
        Pair x = {tf::cast(xi.cpu, DType::f32), tf::cast(xi.vk, DType::f32)};
        grad_parity(std::string("max_pool2d ") + c.name, {x}, [&](auto &t) { return tf::max_pool2d(t[0], c.o); });
        grad_parity(std::string("avg_pool2d ") + c.name, {random(c.x, 152)},
                    [&](auto &t) { return tf::avg_pool2d(t[0], c.o); });
        tf::Pool2dOptions exclude = c.o;
        exclude.count_include_pad = false;
        grad_parity(std::string("avg_pool2d without padding ") + c.name, {random(c.x, 153)},
                    [&](auto &t) { return tf::avg_pool2d(t[0].transpose(2, 3).transpose(2, 3), exclude); });
    }
    parity("max_pool2d with NaN and inf", {specials({1, 2, 8, 8})}, [](auto &t) { return tf::max_pool2d(t[0]); });
}

TEST_CASE("nn: softmax, log_softmax, layer_norm, rms_norm") {
    Pair x = random({4, 7, 10}, 161, -5, 5);
    for (int axis : {0, 1, 2}) {
        grad_parity("softmax axis " + std::to_string(axis), {x}, [&](auto &t) { return tf::softmax(t[0], axis); });
        grad_parity("log_softmax axis " + std::to_string(axis), {x},
                    [&](auto &t) { return tf::log_softmax(t[0], axis); });
    }
    parity("softmax of a view", {x}, [](auto &t) { return tf::softmax(t[0].transpose(0, 2), -1); });
    parity("log_softmax with -inf", {both(std::vector<float>{-inf, 0, 1, -inf, -inf, 2}, {2, 3})},
           [](auto &t) { return tf::log_softmax(t[0], 1); });
    Pair w = random({7, 10}, 162), b = random({7, 10}, 163), w1 = random({10}, 164);
    grad_parity("layer_norm over 2 axes", {x, w, b}, [](auto &t) { return tf::layer_norm(t[0], 2, t[1], t[2]); },
                {1e-5, 1e-4});
    grad_parity("layer_norm over 1 axis", {x, w1}, [](auto &t) { return tf::layer_norm(t[0], 1, t[1]); }, {1e-5, 1e-4});
    parity("layer_norm of a view", {x, w1}, [](auto &t) { return tf::layer_norm(t[0].transpose(0, 1), 1, t[1]); },
           {1e-5, 1e-4});
    grad_parity("rms_norm", {x, w1}, [](auto &t) { return tf::rms_norm(t[0], 1, t[1]); }, {1e-5, 1e-4});
    parity("rms_norm without weight, 3 axes", {x}, [](auto &t) { return tf::rms_norm(t[0], 3); }, {1e-5, 1e-4});
}

TEST_CASE("nn: cross_entropy, one_hot, embedding, rope, attention") {
    Pair logits = random({37, 10}, 171, -4, 4);
    Pair labels64 = integers<int64_t>({37}, 172, 0, 10), labels32 = integers<int32_t>({37}, 173, 0, 10);
    std::vector<int64_t> some_ignored(37);
    for (int i = 0; i < 37; ++i) some_ignored[static_cast<std::size_t>(i)] = i % 4 == 0 ? -100 : i % 10;
    for (auto reduction : {tf::Reduction::mean, tf::Reduction::sum, tf::Reduction::none}) {
        const std::string r = std::to_string(static_cast<int>(reduction));
        grad_parity("cross_entropy i64, reduction " + r, {logits, labels64},
                    [&](auto &t) { return tf::cross_entropy(t[0], t[1], reduction); }, {1e-5, 1e-5});
        grad_parity("cross_entropy i32 on a view, reduction " + r, {random({10, 37}, 174), labels32},
                    [&](auto &t) { return tf::cross_entropy(t[0].transpose(0, 1), t[1], reduction); }, {1e-5, 1e-5});
        grad_parity("cross_entropy with ignored labels, reduction " + r, {logits, both(some_ignored, {37})},
                    [&](auto &t) { return tf::cross_entropy(t[0], t[1], reduction); }, {1e-5, 1e-5});
    }
    for (DType d : {DType::f32, DType::i32, DType::i64, DType::boolean}) {
        parity(std::string("one_hot -> ") + tf::dtype_name(d), {integers<int64_t>({3, 5}, 175, 0, 7)},
               [&](auto &t) { return tf::one_hot(t[0], 7, d); });
        parity(std::string("one_hot i32 view -> ") + tf::dtype_name(d), {integers<int32_t>({5, 3}, 176, 0, 4)},
               [&](auto &t) { return tf::one_hot(t[0].transpose(0, 1), 4, d); });
    }
    Pair table = random({11, 6}, 177);
    grad_parity("embedding i64 with repeated rows", {table, integers<int64_t>({4, 5}, 178, 0, 11)},
                [](auto &t) { return tf::embedding(t[0], t[1]); });
    grad_parity("embedding i32 of a transposed table", {random({6, 11}, 179), integers<int32_t>({7}, 180, 0, 11)},
                [](auto &t) { return tf::embedding(t[0].transpose(0, 1), t[1]); });
    Pair seq = random({2, 3, 9, 8}, 181);
    for (bool interleaved : {false, true}) {
        const std::string name = interleaved ? "rope interleaved" : "rope halves";
        grad_parity(name, {seq}, [&](auto &t) { return tf::rope(t[0], 10000.0, interleaved); }, {2e-6, 1e-5});
        parity(name + " offset 17 on a view", {seq},
               [&](auto &t) { return tf::rope(t[0].transpose(0, 1), 500.0, interleaved, 17); }, {2e-6, 1e-5});
    }
    Pair q = random({2, 3, 5, 8}, 182), k = random({2, 3, 7, 8}, 183), v = random({2, 3, 7, 6}, 184);
    Pair mask = random({5, 7}, 185, -1, 0);
    grad_parity("attention", {q, k, v}, [](auto &t) { return tf::scaled_dot_product_attention(t[0], t[1], t[2]); },
                {1e-5, 1e-4});
    grad_parity("attention causal with a mask", {q, k, v, mask},
                [](auto &t) { return tf::scaled_dot_product_attention(t[0], t[1], t[2], t[3], true, 0.3); },
                {1e-5, 1e-4});
    parity("attention of views, broadcast batch",
           {random({1, 5, 8}, 186), random({3, 8, 7}, 187), random({7, 1, 6}, 188)},
           [](auto &t) {
               return tf::scaled_dot_product_attention(t[0], t[1].transpose(1, 2),
                                                       t[2].expand({7, 3, 6}).permute({1, 0, 2}), Tensor(), true);
           },
           {1e-5, 1e-4});
}

// Without a mask the op's mask operand is absent (plugin.h, TF_TENSOR_ABSENT): the kernel adds
// nothing and reads nothing, and no mask tensor is made on the device.
TEST_CASE("nn: attention without a mask equals a zero mask and makes no mask tensor") {
    Pair q = random({2, 3, 5, 8}, 201), k = random({2, 3, 7, 8}, 202), v = random({2, 3, 7, 6}, 203);
    Pair zero = both(std::vector<float>(5 * 7, 0.0f), {5, 7});
    for (bool causal : {false, true}) {
        const std::string name = std::string("attention without a mask") + (causal ? ", causal" : "");
        grad_parity(name, {q, k, v},
                    [&](auto &t) { return tf::scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), causal); },
                    {1e-5, 1e-4});
        // x * scale + 0 is x * scale: an explicit zero mask gives the same bits on the device.
        const Tensor none = tf::scaled_dot_product_attention(q.vk, k.vk, v.vk, Tensor(), causal);
        const Tensor zeros = tf::scaled_dot_product_attention(q.vk, k.vk, v.vk, zero.vk, causal);
        CHECK(host(none) == host(zeros));
    }
    // A fresh thread (the core's per-thread constants are empty): the output is the one buffer.
    uint64_t allocations = 0;
    Tensor out;
    std::thread([&] {
        tf::reset_stats();
        out = tf::scaled_dot_product_attention(q.vk, k.vk, v.vk);
        const tf::Stats st = tf::stats();
        allocations = st.backend(backend_under_test())->allocations;
    }).join();
    CHECK(allocations == 1);
    check(out, tf::scaled_dot_product_attention(q.cpu, k.cpu, v.cpu), 1e-5, 1e-4, "attention on a fresh thread");
}

// Long contexts: the angle position * theta^(-2i/D) reaches 10^6 radians and more, where an f32
// angle (or an f32 frequency times the position) is off by whole radians. The kernel reduces the
// angle to turns from exact partial products; the result must follow cpu's double angles.
TEST_CASE("nn: rope at large position offsets follows cpu") {
    Pair seq = random({2, 4, 16}, 191);
    for (int64_t offset :
         {int64_t{100000}, int64_t{1000000}, int64_t{1} << 24, (int64_t{1} << 31) + 12345, int64_t{-3000017}}) {
        for (bool interleaved : {false, true}) {
            const std::string name =
                "rope offset " + std::to_string(offset) + (interleaved ? " interleaved" : " halves");
            parity(name, {seq}, [&](auto &t) { return tf::rope(t[0], 10000.0, interleaved, offset); }, {2e-5, 1e-5});
        }
    }
    // The backward rule is the inverse rotation.
    grad_parity("rope offset 10^6, gradient", {seq}, [](auto &t) { return tf::rope(t[0], 10000.0, false, 1000000); },
                {2e-5, 1e-5});
    parity("rope theta 500 offset 2^24 + 3", {seq},
           [](auto &t) { return tf::rope(t[0], 500.0, false, (int64_t{1} << 24) + 3); }, {2e-5, 1e-5});
}

// Squares of |x| > ~1.8e19 overflow f32: the kernels scale the row before squaring, as the cpu
// plugin's double statistics need not.
TEST_CASE("nn: layer_norm and rms_norm of huge and tiny magnitudes follow cpu") {
    for (double magnitude : {1e19, 1e25, 3e37, 1e-20}) {
        std::vector<float> v = values(3 * 40, 192, -1, 1);
        for (float &x : v) x = static_cast<float>(x * magnitude);
        Pair x = both(v, {3, 40});
        Pair w = random({40}, 193), b = random({40}, 194);
        const std::string m = std::to_string(magnitude);
        parity("layer_norm at " + m, {x, w, b}, [](auto &t) { return tf::layer_norm(t[0], 1, t[1], t[2]); },
               {1e-5, 1e-4});
        parity("rms_norm at " + m, {x, w}, [](auto &t) { return tf::rms_norm(t[0], 1, t[1]); }, {1e-5, 1e-4});
    }
}

}  // namespace on_device

TEST_SUITE_END();
