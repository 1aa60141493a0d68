// adamw_step_ and sgd_step_: the cpu plugin's one-pass kernels against the same update written
// as ordinary ops and against a hand-written f32 loop, bit for bit; one op per update; the
// ordinary-ops path where the kernel does not apply (views, f16); argument errors.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;
using F = std::vector<float>;

namespace {

// Mixed magnitudes and signs, zeros and a negative zero included.
F values(int64_t n, double phase, double scale) {
    F out(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        out[static_cast<std::size_t>(i)] =
            static_cast<float>(std::sin(phase + 0.71 * static_cast<double>(i)) * scale * (1 + i % 7));
    if (n > 3) out[1] = 0.0f, out[2] = -0.0f;
    return out;
}

void check_same_bits(const F &got, const F &want) {
    REQUIRE(got.size() == want.size());
    int differing = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i])) {
            if (differing++ < 5) {
                INFO("element " << i << ": " << got[i] << " vs " << want[i]);
                CHECK(false);
            }
        }
    CHECK(differing == 0);
}

uint64_t cpu_ops() {
    for (const Stats::Backend &b : stats().backends)
        if (b.name == "cpu") return b.ops;
    return 0;
}

// The hand-written f32 reference of ops.def's rule: every operation rounded to float.
struct AdamWHand {
    AdamWStep o;
    F m, v;
    void step(F &p, const F &g) {
        const bool first = m.empty();
        if (first) m.assign(p.size(), 0.0f), v.assign(p.size(), 0.0f);
        const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(o.step));
        const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(o.step));
        const auto keep = static_cast<float>(1.0 - o.lr * o.weight_decay);
        const auto b1 = static_cast<float>(o.beta1), omb1 = static_cast<float>(1.0 - o.beta1);
        const auto b2 = static_cast<float>(o.beta2), omb2 = static_cast<float>(1.0 - o.beta2);
        const auto root = static_cast<float>(std::sqrt(bc2)), eps = static_cast<float>(o.eps);
        const auto step_size = static_cast<float>(o.lr / bc1);
        for (std::size_t i = 0; i < p.size(); ++i) {
            const float decayed = o.weight_decay != 0 ? p[i] * keep : p[i];
            const float a = m[i] * b1, b = g[i] * omb1;
            m[i] = a + b;
            const float sq = g[i] * g[i], c = v[i] * b2, d = sq * omb2;
            v[i] = c + d;
            const float r = std::sqrt(v[i]), q = r / root, denom = q + eps;
            const float ratio = m[i] / denom, delta = ratio * step_size;
            p[i] = decayed - delta;
        }
    }
};

struct SgdHand {
    SGDStep o;
    F buf;
    void step(F &p, const F &g) {
        const bool first = buf.empty();
        if (first) buf.assign(p.size(), 0.0f);
        const auto lr = static_cast<float>(o.lr), mom = static_cast<float>(o.momentum),
                   wd = static_cast<float>(o.weight_decay);
        for (std::size_t i = 0; i < p.size(); ++i) {
            float d = g[i];
            if (o.weight_decay != 0) {
                const float t = p[i] * wd;
                d = d + t;
            }
            if (first)
                buf[i] = d;
            else {
                const float t = buf[i] * mom;
                buf[i] = t + d;
            }
            float s = buf[i];
            if (o.nesterov) {
                const float t = buf[i] * mom;
                s = d + t;
            }
            const float t = s * lr;
            p[i] = p[i] - t;
        }
    }
};

}  // namespace

TEST_CASE("adamw_step_ on cpu: the one-pass kernel has the bits of the ops and of a hand-written f32 loop") {
    // 1000 elements reach the 16-wide and 4-wide loops and the tail; 3 only the tail.
    for (int64_t n : {int64_t{1000}, int64_t{3}})
        for (double wd : {0.01, 0.0}) {
            CAPTURE(n);
            CAPTURE(wd);
            AdamWStep o{2e-3, 0.9, 0.999, 1e-8, wd, 1};
            F start = values(n, 0.3, 1.0);
            Tensor p = from_vector(start, {n});
            Tensor m, v;
            Tensor q = from_vector(start, {n}), qm = zeros({n}), qv = zeros({n});
            AdamWHand hand{o, {}, {}};
            F h = start;
            for (int step = 1; step <= 4; ++step) {
                o.step = step;
                hand.o = o;
                F gv = values(n, 1.7 * step, 0.5);
                Tensor g = from_vector(gv, {n});
                const uint64_t before = cpu_ops();
                adamw_step_(p, g, m, v, o);
                CHECK(cpu_ops() - before == 1);  // one op, the first step too (no zero fills)
                // The same update as ordinary ops.
                const double bc1 = 1.0 - std::pow(o.beta1, step), bc2 = 1.0 - std::pow(o.beta2, step);
                Tensor decayed = wd != 0 ? q * (1.0 - o.lr * wd) : q;
                qm = qm * o.beta1 + g * (1.0 - o.beta1);
                qv = qv * o.beta2 + (g * g) * (1.0 - o.beta2);
                q = decayed - (qm / (sqrt(qv) / std::sqrt(bc2) + o.eps)) * (o.lr / bc1);
                hand.step(h, gv);
            }
            check_same_bits(p.to_vector<float>(), q.to_vector<float>());
            check_same_bits(p.to_vector<float>(), h);
            check_same_bits(m.to_vector<float>(), hand.m);
            check_same_bits(v.to_vector<float>(), hand.v);
        }
}

TEST_CASE("adamw_step_: a strided gradient takes the ordinary ops, with the same bits") {
    const int64_t n = 24;
    F start = values(n, 0.1, 2.0);
    Tensor p1 = from_vector(start, {4, 6}), p2 = from_vector(start, {4, 6});
    Tensor m1, v1, m2, v2;
    for (int step = 1; step <= 3; ++step) {
        AdamWStep o{1e-2, 0.8, 0.99, 1e-6, 0.05, step};
        Tensor gt = from_vector(values(n, 0.9 * step, 1.0), {6, 4}).transpose(0, 1);  // a view with strides
        REQUIRE(!gt.is_contiguous());
        adamw_step_(p1, gt, m1, v1, o);
        adamw_step_(p2, gt.contiguous(), m2, v2, o);
    }
    check_same_bits(p1.to_vector<float>(), p2.to_vector<float>());
    check_same_bits(m1.to_vector<float>(), m2.to_vector<float>());
    check_same_bits(v1.to_vector<float>(), v2.to_vector<float>());
}

TEST_CASE("sgd_step_ on cpu: every variant has the bits of a hand-written f32 loop and of the ops") {
    const int64_t n = 517;
    for (int variant = 0; variant < 4; ++variant) {
        const bool nesterov = variant & 1;
        const double wd = (variant & 2) ? 1e-2 : 0.0;
        CAPTURE(nesterov);
        CAPTURE(wd);
        SGDStep o{0.05, 0.9, wd, nesterov};
        F start = values(n, 0.4, 1.5);
        Tensor p = from_vector(start, {n}), buf;
        Tensor q = from_vector(start, {n}), qbuf;
        SgdHand hand{o, {}};
        F h = start;
        for (int step = 1; step <= 4; ++step) {
            F gv = values(n, 2.1 * step, 0.7);
            Tensor g = from_vector(gv, {n});
            const uint64_t before = cpu_ops();
            sgd_step_(p, g, buf, o);
            CHECK(cpu_ops() - before == 1);
            Tensor d = wd != 0 ? g + q * wd : g;
            qbuf = qbuf.defined() ? qbuf * o.momentum + d : d;
            q = q - (nesterov ? d + qbuf * o.momentum : qbuf) * o.lr;
            hand.step(h, gv);
        }
        check_same_bits(p.to_vector<float>(), h);
        check_same_bits(buf.to_vector<float>(), hand.buf);
        check_same_bits(p.to_vector<float>(), q.to_vector<float>());
    }
}

TEST_CASE("sgd_step_: the first step's buffer is a copy, not the gradient itself (ordinary-ops path too)") {
    for (bool strided : {false, true}) {
        CAPTURE(strided);
        Tensor g = strided ? from_vector(F{1, 2, 3, 4, 5, 6}, {3, 2}).transpose(0, 1)
                           : from_vector(F{1, 3, 5, 2, 4, 6}, {2, 3});
        Tensor p = zeros({2, 3}), buf;
        sgd_step_(p, g, buf, {0.5, 0.9});
        sgd_step_(p, g, buf, {0.5, 0.9});
        // buf = 1.9 g, param = -0.5 (g + 1.9 g); g untouched.
        CHECK(g.contiguous().to_vector<float>() == F{1, 3, 5, 2, 4, 6});
        const F b = buf.to_vector<float>(), q = p.to_vector<float>();
        const F gv{1, 3, 5, 2, 4, 6};
        for (std::size_t i = 0; i < 6; ++i) {
            CHECK(b[i] == doctest::Approx(1.9 * gv[i]));
            CHECK(q[i] == doctest::Approx(-0.5 * 2.9 * gv[i]));
        }
    }
}

TEST_CASE("adamw_step_ on f16 parameters runs as ordinary ops, close to the f32 update") {
    F start = values(16, 0.2, 1.0);
    Tensor p32 = from_vector(start, {16}), p16 = from_vector(start, {16}).to(DType::f16);
    Tensor m32, v32, m16, v16;
    for (int step = 1; step <= 3; ++step) {
        // eps 1e-3: f16 has no 1e-8, and a zero gradient would then give 0 / 0.
        AdamWStep o{1e-2, 0.9, 0.999, 1e-3, 0.01, step};
        Tensor g = from_vector(values(16, step * 0.5, 1.0), {16});
        adamw_step_(p32, g, m32, v32, o);
        adamw_step_(p16, g.to(DType::f16), m16, v16, o);
    }
    CHECK(m16.dtype() == DType::f16);
    const F a = p32.to_vector<float>(), b = p16.to_vector<float>();
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == doctest::Approx(a[i]).epsilon(3e-3).scale(1.0));
}

TEST_CASE("adamw_step_ and sgd_step_ reject mismatched operands and bad settings") {
    Tensor p = zeros({4}), g = zeros({4}), m, v;
    CHECK_THROWS_AS(adamw_step_(p, zeros({5}), m, v, {}), ShapeError);
    CHECK_THROWS_AS(adamw_step_(p, zeros({4}, DType::f16), m, v, {}), DTypeError);
    CHECK_THROWS_AS(adamw_step_(zeros({4}, DType::i32), zeros({4}, DType::i32), m, v, {}), DTypeError);
    AdamWStep zero_step;
    zero_step.step = 0;
    CHECK_THROWS_AS(adamw_step_(p, g, m, v, zero_step), ValueError);
    Tensor half = zeros({4});
    Tensor none;
    CHECK_THROWS_AS(adamw_step_(p, g, half, none, {}), ValueError);
    Tensor buf;
    CHECK_THROWS_AS(sgd_step_(p, g, buf, {0.1, 0.0}), ValueError);
    CHECK_THROWS_WITH_AS(sgd_step_(p, zeros({3}), buf, {}), doctest::Contains("sgd_step"), ShapeError);
    CHECK(!buf.defined());
    CHECK(p.to_vector<float>() == F{0, 0, 0, 0});
}
