// SGD and AdamW against hand-computed updates and a host transcription of torch.optim's rules.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "tinyfin/nn.hpp"

using namespace tinyfin;
using F = std::vector<float>;

namespace {

Tensor param(const F &values) { return from_vector(values, {static_cast<int64_t>(values.size())}).requires_grad_(); }

void check_close(const F &got, const std::vector<double> &expect, double eps = 1e-6) {
    REQUIRE(got.size() == expect.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i);
        CHECK(got[i] == doctest::Approx(expect[i]).epsilon(eps).scale(1.0));
    }
}

// torch.optim.SGD (dampening 0) for one tensor, in double.
struct SgdReference {
    double lr, momentum, weight_decay;
    bool nesterov;
    std::vector<double> buf;
    void step(std::vector<double> &p, const std::vector<double> &grad) {
        if (buf.empty() && momentum != 0) buf.assign(p.size(), 0);
        bool first = !started;
        started = true;
        for (std::size_t i = 0; i < p.size(); ++i) {
            double g = grad[i] + weight_decay * p[i];
            if (momentum != 0) {
                buf[i] = first ? g : momentum * buf[i] + g;
                g = nesterov ? g + momentum * buf[i] : buf[i];
            }
            p[i] -= lr * g;
        }
    }
    bool started = false;
};

// torch.optim.AdamW for one tensor, in double.
struct AdamWReference {
    double lr, b1, b2, eps, wd;
    std::vector<double> m, v;
    int t = 0;
    void step(std::vector<double> &p, const std::vector<double> &grad) {
        if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0);
        ++t;
        for (std::size_t i = 0; i < p.size(); ++i) {
            p[i] *= 1 - lr * wd;
            m[i] = b1 * m[i] + (1 - b1) * grad[i];
            v[i] = b2 * v[i] + (1 - b2) * grad[i] * grad[i];
            double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
            double denom = std::sqrt(v[i]) / std::sqrt(bc2) + eps;
            p[i] -= lr / bc1 * m[i] / denom;
        }
    }
};

// A gradient that changes from step to step (and across signs).
std::vector<double> grad_at(int step, std::size_t n) {
    std::vector<double> g(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = std::sin(1.3 * step + 0.7 * static_cast<double>(i)) * (i + 1);
    return g;
}

F as_float(const std::vector<double> &v) { return F(v.begin(), v.end()); }

}  // namespace

TEST_CASE("SGD: plain, momentum and nesterov steps by hand") {
    // p = 1, constant gradient 2, lr 0.1.
    Tensor p = param({1});
    optim::SGD plain({p}, 0.1);
    for (float expect : {0.8f, 0.6f, 0.4f}) {
        p.set_grad(full({1}, 2));
        plain.step();
        CHECK(p.item<float>() == doctest::Approx(expect));
    }

    // momentum 0.9: buf = 2, 3.8, 5.42 -> p = 0.8, 0.42, -0.122.
    Tensor q = param({1});
    optim::SGD momentum({q}, 0.1, 0.9);
    for (float expect : {0.8f, 0.42f, -0.122f}) {
        q.set_grad(full({1}, 2));
        momentum.step();
        CHECK(q.item<float>() == doctest::Approx(expect));
    }

    // nesterov: step 1 d = 2 + 0.9 * 2 = 3.8 -> 0.62; step 2 buf = 3.8, d = 2 + 3.42 -> 0.078.
    Tensor r = param({1});
    optim::SGD nesterov({r}, 0.1, 0.9, 0, true);
    for (float expect : {0.62f, 0.078f}) {
        r.set_grad(full({1}, 2));
        nesterov.step();
        CHECK(r.item<float>() == doctest::Approx(expect));
    }

    // weight decay 0.5: g = 2 + 0.5 * 1 = 2.5 -> 0.75; then g = 2 + 0.375 -> 0.5125.
    Tensor s = param({1});
    optim::SGD decay({s}, 0.1, 0, 0.5);
    for (float expect : {0.75f, 0.5125f}) {
        s.set_grad(full({1}, 2));
        decay.step();
        CHECK(s.item<float>() == doctest::Approx(expect));
    }
    CHECK_THROWS_AS(optim::SGD({s}, 0.1, 0, 0, true), ValueError);
    CHECK_THROWS_AS(optim::SGD({s}, -1), ValueError);
}

TEST_CASE("SGD: several steps on vectors match torch's rule with every option") {
    struct Case {
        double momentum, wd;
        bool nesterov;
    };
    for (Case c :
         {Case{0, 0, false}, Case{0.9, 0, false}, Case{0.9, 0.01, false}, Case{0.8, 0.1, true}, Case{0, 0.2, false}}) {
        CAPTURE(c.momentum);
        CAPTURE(c.wd);
        CAPTURE(c.nesterov);
        std::vector<double> ref = {0.5, -1.0, 2.0};
        Tensor p = param(as_float(ref));
        optim::SGD opt({p}, 0.05, c.momentum, c.wd, c.nesterov);
        SgdReference host{0.05, c.momentum, c.wd, c.nesterov, {}};
        for (int step = 0; step < 5; ++step) {
            std::vector<double> g = grad_at(step, 3);
            p.set_grad(from_vector(as_float(g), {3}));
            opt.step();
            host.step(ref, g);
        }
        check_close(p.to_vector<float>(), ref, 1e-5);
    }
}

TEST_CASE("AdamW: first step by hand") {
    // Step 1: m_hat = g, v_hat = g^2, so p = p (1 - lr wd) - lr g / (|g| + eps).
    Tensor p = param({1, -2});
    optim::AdamW opt({p}, 0.1, {0.9, 0.999}, 1e-8, 0.01);
    p.set_grad(from_vector<float>({2, -0.5f}, {2}));
    opt.step();
    // 1 * 0.999 - 0.1 = 0.899; -2 * 0.999 + 0.1 = -1.898.
    check_close(p.to_vector<float>(), {0.899, -1.898});
}

TEST_CASE("AdamW: several steps on vectors match torch's rule (defaults and variants)") {
    struct Case {
        double lr, b1, b2, eps, wd;
    };
    for (Case c :
         {Case{1e-3, 0.9, 0.999, 1e-8, 0.01}, Case{0.05, 0.8, 0.99, 1e-6, 0.1}, Case{0.01, 0.9, 0.999, 1e-8, 0}}) {
        CAPTURE(c.lr);
        CAPTURE(c.wd);
        std::vector<double> ref = {0.5, -1.0, 2.0, 0.0};
        Tensor p = param(as_float(ref));
        optim::AdamW opt({p}, c.lr, {c.b1, c.b2}, c.eps, c.wd);
        AdamWReference host{c.lr, c.b1, c.b2, c.eps, c.wd, {}, {}};
        for (int step = 0; step < 6; ++step) {
            std::vector<double> g = grad_at(step, 4);
            p.set_grad(from_vector(as_float(g), {4}));
            opt.step();
            host.step(ref, g);
        }
        check_close(p.to_vector<float>(), ref, 1e-5);
    }
    Tensor p = param({1});
    CHECK_THROWS_AS(optim::AdamW({p}, 1e-3, {1.0, 0.999}), ValueError);
    CHECK_THROWS_AS(optim::AdamW({p}, 1e-3, {0.9, 0.999}, -1), ValueError);
}

TEST_CASE("AdamW: the one-pass update of f32 parameters in cpu memory has the op-by-op rule's bits") {
    // The op path written out with tensor ops (the optimizer takes its one-pass loop here);
    // 37 elements of mixed magnitudes, with and without weight decay.
    for (double wd : {0.01, 0.0}) {
        CAPTURE(wd);
        const double lr = 2e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8;
        F start(37);
        for (std::size_t i = 0; i < start.size(); ++i) start[i] = static_cast<float>(std::cos(0.37 * i) * (1 + i % 5));
        Tensor p = param(start);
        optim::AdamW opt({p}, lr, {b1, b2}, eps, wd);
        Tensor q = from_vector(start, {37});
        Tensor m = zeros({37}), v = zeros({37});
        for (int step = 1; step <= 5; ++step) {
            Tensor g = from_vector(as_float(grad_at(step, 37)), {37});
            p.set_grad(g);
            opt.step();
            Tensor decayed = wd != 0 ? q * (1.0 - lr * wd) : q;
            m = m * b1 + g * (1.0 - b1);
            v = v * b2 + (g * g) * (1.0 - b2);
            const double bc1 = 1.0 - std::pow(b1, step), bc2 = 1.0 - std::pow(b2, step);
            Tensor denom = sqrt(v) / std::sqrt(bc2) + eps;
            q = decayed - (m / denom) * (lr / bc1);
        }
        const F got = p.to_vector<float>(), want = q.to_vector<float>();
        for (std::size_t i = 0; i < got.size(); ++i) {
            INFO("element " << i);
            CHECK(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]));
        }
    }
}

TEST_CASE("AdamW defaults are torch's: lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0.01") {
    std::vector<double> ref = {0.3, -0.7};
    Tensor p = param(as_float(ref));
    optim::AdamW opt({p});
    CHECK(opt.lr() == 1e-3);
    AdamWReference host{1e-3, 0.9, 0.999, 1e-8, 0.01, {}, {}};
    for (int step = 0; step < 3; ++step) {
        std::vector<double> g = grad_at(step + 10, 2);
        p.set_grad(from_vector(as_float(g), {2}));
        opt.step();
        host.step(ref, g);
    }
    check_close(p.to_vector<float>(), ref);
}

TEST_CASE("optimizers: zero_grad, skipped parameters, in-place updates, real backward") {
    Tensor a = param({1, 2}), b = param({3});
    Tensor alias = a;  // another handle (like a module's member) sees the update
    optim::SGD opt({a, b}, 0.5);
    sum(mul(a, a)).backward();  // grad 2a; b gets none
    REQUIRE(a.grad().defined());
    CHECK_FALSE(b.grad().defined());
    opt.step();
    CHECK(alias.to_vector<float>() == F{0, 0});
    CHECK(b.to_vector<float>() == F{3});
    CHECK(a.requires_grad());
    CHECK(a.is_leaf());
    opt.zero_grad();
    CHECK_FALSE(a.grad().defined());

    // Minimising (p - 3)^2 with AdamW lr 0.1 gets close to 3.
    Tensor p = param({0});
    optim::AdamW adam({p}, 0.1, {0.9, 0.999}, 1e-8, 0);
    for (int i = 0; i < 300; ++i) {
        adam.zero_grad();
        Tensor d = p - 3.0;
        sum(d * d).backward();
        adam.step();
    }
    CHECK(p.item<float>() == doctest::Approx(3).epsilon(0.01));

    opt.set_lr(0.25);
    CHECK(opt.lr() == 0.25);
    CHECK_THROWS_AS(opt.set_lr(-1), ValueError);
    CHECK_THROWS_AS(optim::SGD({zeros({2}, DType::i32)}, 0.1), DTypeError);
}
