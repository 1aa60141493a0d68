// The fused backward ops. gelu_backward, the exact gelu's gradient: its values against a long
// double reference and against the composition of ordinary ops it replaces, in every float
// dtype; gelu's backward runs it as one op on cpu; argument errors. attention_backward: the
// gradients of scaled_dot_product_attention against autograd through matmul and softmax.
// layer_norm_backward: layer_norm's gradients against autograd through the ordinary ops
// (mean, var, rsqrt, ...) and against central differences of a double reference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <tuple>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;
using F = std::vector<float>;

namespace {

F spread(int64_t n, double lo, double hi, double phase) {
    F out(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const double t = 0.5 + 0.5 * std::sin(phase + 1.37 * static_cast<double>(i));
        out[static_cast<std::size_t>(i)] = static_cast<float>(lo + (hi - lo) * t);
    }
    return out;
}

double reference(double dy, double x) {
    const long double xl = x;
    const long double cdf = 0.5L * std::erfc(-xl / std::sqrt(2.0L));
    const long double pdf = std::exp(-0.5L * xl * xl) / std::sqrt(2.0L * 3.14159265358979323846264338327950288L);
    return static_cast<double>(static_cast<long double>(dy) * (cdf + xl * pdf));
}

// The formula gelu's backward composed from ordinary ops before the op existed.
Tensor composed(const Tensor &dy, const Tensor &x) {
    Tensor cdf = mul(0.5, add(1.0, erf(mul(x, M_SQRT1_2))));
    Tensor pdf = mul(1.0 / std::sqrt(2 * M_PI), exp(mul(-0.5, square(x))));
    return mul(dy, add(cdf, mul(x, pdf)));
}

uint64_t cpu_ops() {
    for (const Stats::Backend &b : stats().backends)
        if (b.name == "cpu") return b.ops;
    return 0;
}

}  // namespace

TEST_CASE("gelu_backward: f32 within an ulp or 2^-21 of the terms' size of long double, close to the composed ops") {
    const int64_t n = 4099;
    const F dyv = spread(n, -2, 2, 0.3), xv = spread(n, -9, 9, 1.1);
    const Tensor dy = from_vector(dyv, {n}), x = from_vector(xv, {n});
    const F got = gelu_backward(dy, x).to_vector<float>();
    const F old = composed(dy, x).to_vector<float>();
    int far_from_reference = 0, far_from_composed = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double want = reference(dyv[i], xv[i]);
        // The terms' size: the cpu kernel's f32 lanes are accurate relative to it, and where Phi
        // and x phi cancel (x near -0.75) only relative to it.
        const double size = std::fabs(dyv[i]) * (1 + std::fabs(xv[i]));
        far_from_reference += std::fabs(got[i] - want) > std::max(std::ldexp(std::fabs(want), -23), size * 0x1p-21);
        // The composition rounds to f32 after every op: a few ulp of the terms' size.
        far_from_composed += std::fabs(got[i] - old[i]) > 1e-6 * size;
    }
    CHECK(far_from_reference == 0);
    CHECK(far_from_composed == 0);
}

TEST_CASE("gelu_backward: broadcasting, views and the half dtypes") {
    const F dyv = {1, -2, 3, 0.5f, -1, 4};
    const F xv = {-1.5f, 0.25f, 2};
    const Tensor dy = from_vector(dyv, {2, 3}), x = from_vector(xv, {3});
    const F got = gelu_backward(dy, x).to_vector<float>();
    for (int i = 0; i < 6; ++i) CHECK(got[i] == doctest::Approx(reference(dyv[i], xv[i % 3])).epsilon(1e-6));
    // dy as a transposed view: the same values as from a contiguous copy.
    const Tensor dyt = from_vector(dyv, {3, 2}).transpose(0, 1);
    const F viewed = gelu_backward(dyt, x).to_vector<float>(),
            copied = gelu_backward(dyt.contiguous(), x).to_vector<float>();
    CHECK(viewed == copied);
    for (DType dt : {DType::f16, DType::bf16}) {
        INFO(static_cast<int>(dt));
        const Tensor h = gelu_backward(dy.to(dt), x.to(dt));
        CHECK(h.dtype() == dt);
        const F hv = h.to(DType::f32).to_vector<float>();
        const double eps = dt == DType::f16 ? 1e-3 : 8e-3;
        for (int i = 0; i < 6; ++i) CHECK(hv[i] == doctest::Approx(got[i]).epsilon(eps));
    }
}

TEST_CASE("gelu's gradient is one gelu_backward op on cpu, with the values of the op") {
    const int64_t n = 1024;
    Tensor x = from_vector(spread(n, -4, 4, 0.7), {8, n / 8});
    x.requires_grad_();
    const Tensor g = from_vector(spread(n, -1, 1, 2.9), {8, n / 8});
    Tensor y = gelu(x);
    const uint64_t before = cpu_ops();
    y.backward(g);
    const uint64_t ops = cpu_ops() - before;
    CHECK(ops >= 1);
    CHECK(ops <= 2);  // the op, and at most a copy into the leaf's grad (the composition took 11)
    CHECK(x.grad().to_vector<float>() == gelu_backward(g, x.detach()).to_vector<float>());
}

TEST_CASE("gelu_backward refuses integer and mixed dtypes with the op's name") {
    const Tensor i = from_vector(std::vector<int32_t>{1, 2}, {2});
    const Tensor f = from_vector(F{1, 2}, {2});
    CHECK_THROWS_AS(gelu_backward(i, i), DTypeError);
    CHECK_THROWS_WITH_AS(gelu_backward(f, f.to(DType::f16)), doctest::Contains("gelu_backward"), DTypeError);
    CHECK_THROWS_AS(gelu_backward(f, from_vector(F{1, 2, 3}, {3})), ShapeError);
}

// ---- attention_backward ---------------------------------------------------------------------

namespace {

struct AttentionCase {
    const char *name;
    Shape sq, sk, sv;
    bool causal;
    bool mask;
};

// softmax(q k^T * scale + mask [+ causal]) v written with matmul and softmax, so autograd
// differentiates it op by op: the reference for the fused backward.
Tensor attention_by_ops(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &mask, bool causal) {
    const int64_t tq = q.size(-2), tk = k.size(-2);
    Tensor scores = mul(matmul(q, k.transpose(-1, -2)), 1.0 / std::sqrt(static_cast<double>(q.size(-1))));
    if (mask.defined()) scores = add(scores, mask);
    if (causal) {
        F hidden(static_cast<std::size_t>(tq * tk));
        for (int64_t i = 0; i < tq; ++i)
            for (int64_t j = 0; j < tk; ++j)
                hidden[static_cast<std::size_t>(i * tk + j)] = j > i + (tk - tq) ? -INFINITY : 0.0f;
        scores = add(scores, from_vector(hidden, {tq, tk}));
    }
    return matmul(softmax(scores, -1), v);
}

F grad_of(const Tensor &t) { return t.grad().to_vector<float>(); }

void check_close(const F &got, const F &want, const char *what) {
    INFO(what);
    REQUIRE(got.size() == want.size());
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        bad += !(std::fabs(got[i] - want[i]) <= 2e-5 + 1e-4 * std::fabs(want[i]));
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("attention's gradients on cpu (one attention_backward op) match autograd through matmul and softmax") {
    const AttentionCase cases[] = {
        {"causal, self", {2, 3, 6, 4}, {2, 3, 6, 4}, {2, 3, 6, 5}, true, false},
        {"causal, fewer queries (bottom-right)", {2, 4, 3, 8}, {2, 4, 7, 8}, {2, 4, 7, 8}, true, false},
        {"additive mask", {3, 5, 4}, {3, 6, 4}, {3, 6, 2}, false, true},
        {"k and v broadcast over the batch", {3, 5, 4}, {1, 5, 4}, {1, 5, 3}, true, false},
    };
    uint64_t seed = 1;
    for (const AttentionCase &c : cases) {
        INFO(c.name);
        Tensor q = randn(c.sq, seed++), k = randn(c.sk, seed++), v = randn(c.sv, seed++);
        const Shape out_shape = [&] {
            Shape s = c.sq;
            s.back() = c.sv.back();
            return s;
        }();
        const Tensor w = randn(out_shape, seed++);
        const Tensor mask = c.mask ? mul(randn({c.sq[c.sq.size() - 2], c.sk[c.sk.size() - 2]}, seed++), 0.5) : Tensor();
        for (Tensor *t : {&q, &k, &v}) t->requires_grad_();

        Tensor out = scaled_dot_product_attention(q, k, v, mask, c.causal);
        Tensor loss = sum(mul(out, w));
        const uint64_t before = cpu_ops();
        loss.backward();
        const uint64_t backward_ops = cpu_ops() - before;
        const F gq = grad_of(q), gk = grad_of(k), gv = grad_of(v);
        const F out_values = out.to_vector<float>();
        for (Tensor *t : {&q, &k, &v}) t->zero_grad();

        Tensor ref = attention_by_ops(q, k, v, mask, c.causal);
        sum(mul(ref, w)).backward();
        check_close(out_values, ref.to_vector<float>(), "forward");
        check_close(gq, grad_of(q), "dq");
        check_close(gk, grad_of(k), "dk");
        check_close(gv, grad_of(v), "dv");
        // sum and mul's gradients, the fused op, and the batch reductions of a broadcast k, v:
        // the composition took about twenty ops.
        CHECK(backward_ops <= 8);
    }
}

TEST_CASE("causal attention over longer sequences matches the ops, Tq != Tk and rows that see no key too") {
    // Sequences longer than several register tiles, Tq < Tk,
    // and Tq > Tk (the first Tq - Tk queries see no key: NaN there, and in every gradient).
    struct C {
        const char *name;
        int64_t tq, tk;
        bool mask;
    };
    const C cases[] = {
        {"self, 45 tokens", 45, 45, false},
        {"37 queries, 50 keys", 37, 50, false},
        {"50 queries, 37 keys (13 blind rows)", 50, 37, false},
        {"self with an additive mask", 40, 40, true},
    };
    uint64_t seed = 81;
    for (const C &c : cases) {
        INFO(c.name);
        Tensor q = randn({2, 2, c.tq, 8}, seed++), k = randn({2, 2, c.tk, 8}, seed++),
               v = randn({2, 2, c.tk, 6}, seed++);
        const Tensor w = randn({2, 2, c.tq, 6}, seed++);
        const Tensor mask = c.mask ? mul(randn({c.tq, c.tk}, seed++), 0.5) : Tensor();
        for (Tensor *t : {&q, &k, &v}) t->requires_grad_();
        Tensor out = scaled_dot_product_attention(q, k, v, mask, true);
        sum(mul(out, w)).backward();
        const F values = out.to_vector<float>(), gq = grad_of(q), gk = grad_of(k), gv = grad_of(v);
        for (Tensor *t : {&q, &k, &v}) t->zero_grad();
        Tensor ref = attention_by_ops(q, k, v, mask, true);
        sum(mul(ref, w)).backward();
        const F ref_values = ref.to_vector<float>();
        for (auto [got, want, what] : {std::tuple{&values, &ref_values, "forward"},
                                       {&gq, nullptr, "dq"},
                                       {&gk, nullptr, "dk"},
                                       {&gv, nullptr, "dv"}}) {
            INFO(what);
            const F wanted = want ? *want : grad_of(what[1] == 'q' ? q : what[1] == 'k' ? k : v);
            REQUIRE(got->size() == wanted.size());
            int bad = 0, nans = 0;
            for (std::size_t i = 0; i < wanted.size(); ++i) {
                const float a = (*got)[i], b = wanted[i];
                nans += std::isnan(b);
                bad += std::isnan(b) ? !std::isnan(a) : !(std::fabs(a - b) <= 2e-5 + 1e-4 * std::fabs(b));
            }
            CHECK(bad == 0);
            CHECK((nans > 0) == (c.tq > c.tk));
        }
    }
}

TEST_CASE(
    "attention's gradients: a mask that needs a gradient takes the composition, with the same q, k, v gradients") {
    Tensor q = randn({2, 4, 4}, 41), k = randn({2, 5, 4}, 42), v = randn({2, 5, 3}, 43);
    Tensor mask = mul(randn({4, 5}, 44), 0.5);
    const Tensor w = randn({2, 4, 3}, 45);
    for (Tensor *t : {&q, &k, &v}) t->requires_grad_();
    sum(mul(scaled_dot_product_attention(q, k, v, mask, true), w)).backward();
    const F fused_q = grad_of(q), fused_k = grad_of(k), fused_v = grad_of(v);
    for (Tensor *t : {&q, &k, &v}) t->zero_grad();
    mask.requires_grad_();
    sum(mul(scaled_dot_product_attention(q, k, v, mask, true), w)).backward();
    check_close(fused_q, grad_of(q), "dq");
    check_close(fused_k, grad_of(k), "dk");
    check_close(fused_v, grad_of(v), "dv");
    CHECK(mask.grad().defined());
}

TEST_CASE("attention's gradients: a query row that sees no key gives NaN, as the forward does") {
    // Tq > Tk with bottom-right causal alignment: query 0 sees no key.
    Tensor q = randn({1, 3, 2}, 51), k = randn({1, 2, 2}, 52), v = randn({1, 2, 2}, 53);
    for (Tensor *t : {&q, &k, &v}) t->requires_grad_();
    Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), true);
    const F values = out.to_vector<float>();
    CHECK(std::isnan(values[0]));
    CHECK(!std::isnan(values[4]));
    sum(out).backward();
    const F gq = grad_of(q);
    CHECK(std::isnan(gq[0]));
}

TEST_CASE("attention's gradients: q, k, v as head views of one projection (char_gpt's layout), in place") {
    // [B, T, 3 E] -> three [B, H, T, D] views with strides, as examples/char_gpt does: the
    // kernel reads them through their strides; their gradients land in the projection's.
    const int64_t b = 2, t = 5, h = 2, d = 4, e = h * d;
    Tensor qkv = randn({b * t, 3 * e}, 61);
    qkv.requires_grad_();
    const Tensor w = randn({b, h, t, d}, 62);
    auto heads = [&](const Tensor &x) { return x.view({b, t, h, d}).transpose(1, 2); };
    auto loss_of = [&](bool fused) {
        std::vector<Tensor> parts = split(qkv, {e, e, e}, 1);
        const Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
        const Tensor out =
            fused ? scaled_dot_product_attention(q, k, v, Tensor(), true) : attention_by_ops(q, k, v, Tensor(), true);
        return sum(mul(out, w));
    };
    loss_of(true).backward();
    const F fused = grad_of(qkv);
    qkv.zero_grad();
    loss_of(false).backward();
    check_close(fused, grad_of(qkv), "dqkv");
}

TEST_CASE("attention's gradients in f16 and bf16 match the f32 ones within the format's rounding") {
    const Tensor q32 = randn({2, 6, 8}, 71), k32 = randn({2, 6, 8}, 72), v32 = randn({2, 6, 4}, 73);
    const Tensor w32 = randn({2, 6, 4}, 74);
    for (DType dt : {DType::f16, DType::bf16}) {
        INFO(dtype_name(dt));
        // The same values in both runs: the f32 reference starts from the rounded operands.
        Tensor q = q32.to(dt), k = k32.to(dt), v = v32.to(dt);
        const Tensor w = w32.to(dt);
        Tensor rq = q.to(DType::f32), rk = k.to(DType::f32), rv = v.to(DType::f32);
        for (Tensor *x : {&q, &k, &v, &rq, &rk, &rv}) x->requires_grad_();
        sum(mul(scaled_dot_product_attention(q, k, v, Tensor(), true), w)).backward();
        sum(mul(scaled_dot_product_attention(rq, rk, rv, Tensor(), true), w.to(DType::f32))).backward();
        const double eps = dt == DType::f16 ? 1.0 / 1024 : 1.0 / 128;
        for (auto [got, want] : {std::pair{&q, &rq}, {&k, &rk}, {&v, &rv}}) {
            const F g = got->grad().to(DType::f32).to_vector<float>(), r = want->grad().to_vector<float>();
            REQUIRE(g.size() == r.size());
            double err = 0, norm = 0;
            for (std::size_t i = 0; i < g.size(); ++i) {
                err += (g[i] - r[i]) * (g[i] - r[i]);
                norm += r[i] * r[i];
            }
            CHECK(std::sqrt(err / norm) < 8 * eps);
        }
    }
}

// ---- layer_norm_backward --------------------------------------------------------------------

namespace {

// (x - mean) / sqrt(var + eps) * w + b with ordinary ops over the last n_axes axes, so autograd
// differentiates it op by op: the reference for the fused backward.
Tensor layer_norm_by_ops(const Tensor &x, int n_axes, const Tensor &w, const Tensor &b, double eps) {
    std::vector<int> axes;
    for (int i = x.rank() - n_axes; i < x.rank(); ++i) axes.push_back(i);
    const Tensor mu = mean(x, axes, true);
    const Tensor rstd = rsqrt(add(var(x, axes, Correction(0), true), eps));
    Tensor y = mul(sub(x, mu), rstd);
    if (w.defined()) y = mul(y, w);
    if (b.defined()) y = add(y, b);
    return y;
}

// sum(layer_norm(x) * c) in double, rows of length len: the loss the finite differences take.
double layer_norm_loss(const std::vector<double> &x, const std::vector<double> &w, const std::vector<double> &b,
                       const std::vector<double> &c, int64_t len, double eps) {
    double loss = 0;
    for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(len); ++r) {
        const double *row = x.data() + r * static_cast<std::size_t>(len);
        double mean = 0, var = 0;
        for (int64_t i = 0; i < len; ++i) mean += row[i];
        mean /= static_cast<double>(len);
        for (int64_t i = 0; i < len; ++i) var += (row[i] - mean) * (row[i] - mean);
        const double rstd = 1 / std::sqrt(var / static_cast<double>(len) + eps);
        for (int64_t i = 0; i < len; ++i) {
            const std::size_t at = r * static_cast<std::size_t>(len) + static_cast<std::size_t>(i);
            loss += ((row[i] - mean) * rstd * w[static_cast<std::size_t>(i)] + b[static_cast<std::size_t>(i)]) * c[at];
        }
    }
    return loss;
}

std::vector<double> widen(const F &v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace

TEST_CASE("layer_norm's gradients on cpu (one layer_norm_backward op) match autograd through the ordinary ops") {
    struct C {
        const char *name;
        Shape shape;
        int n_axes;
        bool affine;
        bool transposed;
    };
    const C cases[] = {
        {"rows of 16", {3, 5, 16}, 1, true, false},
        {"two axes", {4, 3, 6}, 2, true, false},
        {"no weight or bias", {6, 9}, 1, false, false},
        {"a transposed input", {7, 12}, 1, true, true},
        {"many rows (several blocks)", {600, 40}, 1, true, false},
    };
    uint64_t seed = 101;
    for (const C &c : cases) {
        INFO(c.name);
        // Rows with a mean and a spread away from 0 and 1; a transposed view read in place.
        Tensor x = add(mul(randn(c.transposed ? Shape{c.shape[1], c.shape[0]} : c.shape, seed++), 2.0), 0.5);
        if (c.transposed) x = x.transpose(0, 1);
        const Shape ws(c.shape.end() - c.n_axes, c.shape.end());
        Tensor w = c.affine ? randn(ws, seed++) : Tensor(), b = c.affine ? randn(ws, seed++) : Tensor();
        const Tensor g = randn(c.shape, seed++);
        for (Tensor *t : {&x, &w, &b})
            if (t->defined()) t->requires_grad_();
        Tensor y = layer_norm(x, c.n_axes, w, b, 1e-5);
        Tensor loss = sum(mul(y, g));
        const uint64_t before = cpu_ops();
        loss.backward();
        const uint64_t backward_ops = cpu_ops() - before;
        const F gx = grad_of(x), gw = c.affine ? grad_of(w) : F(), gb = c.affine ? grad_of(b) : F();
        const F y_values = y.to_vector<float>();
        for (Tensor *t : {&x, &w, &b})
            if (t->defined()) t->zero_grad();

        Tensor ref = layer_norm_by_ops(x, c.n_axes, w, b, 1e-5);
        sum(mul(ref, g)).backward();
        check_close(y_values, ref.to_vector<float>(), "forward");
        check_close(gx, grad_of(x), "dx");
        if (c.affine) {
            check_close(gw, grad_of(w), "dweight");
            check_close(gb, grad_of(b), "dbias");
        }
        // sum and mul's gradients, the fused op and the leaves' copies: the composition took
        // about 14 ops for dx and 4 more for the weight and bias.
        CHECK(backward_ops <= 7);
    }
}

TEST_CASE("layer_norm's gradients match central differences of a double reference") {
    const int64_t rows = 5, len = 7;
    const double eps = 1e-3;
    const Tensor xt = add(mul(randn({rows, len}, 121), 1.5), -0.25), wt = randn({len}, 122), bt = randn({len}, 123),
                 ct = randn({rows, len}, 124);
    Tensor x = xt, w = wt, b = bt;
    for (Tensor *t : {&x, &w, &b}) t->requires_grad_();
    sum(mul(layer_norm(x, 1, w, b, eps), ct)).backward();
    std::vector<double> xv = widen(xt.to_vector<float>()), wv = widen(wt.to_vector<float>()),
                        bv = widen(bt.to_vector<float>());
    const std::vector<double> cv = widen(ct.to_vector<float>());
    const double h = 1e-5;
    auto check = [&](std::vector<double> &values, const F &analytic, const char *what) {
        INFO(what);
        REQUIRE(analytic.size() == values.size());
        int bad = 0;
        for (std::size_t i = 0; i < values.size(); ++i) {
            const double keep = values[i];
            values[i] = keep + h;
            const double up = layer_norm_loss(xv, wv, bv, cv, len, eps);
            values[i] = keep - h;
            const double down = layer_norm_loss(xv, wv, bv, cv, len, eps);
            values[i] = keep;
            const double numeric = (up - down) / (2 * h);
            bad += !(std::fabs(analytic[i] - numeric) <= 1e-5 + 1e-5 * std::fabs(numeric));
        }
        CHECK(bad == 0);
    };
    check(xv, grad_of(x), "dx");
    check(wv, grad_of(w), "dweight");
    check(bv, grad_of(b), "dbias");
}

TEST_CASE("layer_norm's gradients in f16 and bf16 match the f32 ones within the format's rounding") {
    const Tensor x32 = randn({12, 24}, 131), w32 = randn({24}, 132), b32 = randn({24}, 133), g32 = randn({12, 24}, 134);
    for (DType dt : {DType::f16, DType::bf16}) {
        INFO(dtype_name(dt));
        Tensor x = x32.to(dt), w = w32.to(dt), b = b32.to(dt);
        const Tensor g = g32.to(dt);
        Tensor rx = x.to(DType::f32), rw = w.to(DType::f32), rb = b.to(DType::f32);
        for (Tensor *t : {&x, &w, &b, &rx, &rw, &rb}) t->requires_grad_();
        sum(mul(layer_norm(x, 1, w, b), g)).backward();
        sum(mul(layer_norm(rx, 1, rw, rb), g.to(DType::f32))).backward();
        const double eps = dt == DType::f16 ? 1.0 / 1024 : 1.0 / 128;
        for (auto [got, want] : {std::pair{&x, &rx}, {&w, &rw}, {&b, &rb}}) {
            CHECK(got->grad().dtype() == dt);
            const F gv = got->grad().to(DType::f32).to_vector<float>(), r = want->grad().to_vector<float>();
            REQUIRE(gv.size() == r.size());
            double err = 0, norm = 0;
            for (std::size_t i = 0; i < gv.size(); ++i) {
                err += (gv[i] - r[i]) * (gv[i] - r[i]);
                norm += r[i] * r[i];
            }
            CHECK(std::sqrt(err / norm) < 4 * eps);
        }
    }
}

TEST_CASE("layer_norm's gradients: no rows give zero weight and bias gradients") {
    Tensor x = zeros({0, 4}), w = ones({4}), b = zeros({4});
    for (Tensor *t : {&x, &w, &b}) t->requires_grad_();
    sum(layer_norm(x, 1, w, b)).backward();
    CHECK(x.grad().shape() == Shape{0, 4});
    CHECK(w.grad().to_vector<float>() == F{0, 0, 0, 0});
    CHECK(b.grad().to_vector<float>() == F{0, 0, 0, 0});
}
