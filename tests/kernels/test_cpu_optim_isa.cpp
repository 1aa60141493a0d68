// The cpu plugin's optimizer lanes (adamw_step, sgd_step) at every instruction-set level this
// CPU offers (TINYFIN_CPU_ISA = generic, avx2, avx512), through the plugin ABI, bit for bit
// against the f32 rule of ops.def written here as plain scalar code: each params constant
// rounded once from its double, every operation rounded, in ops.def's order, no multiply-add
// fused (this file is compiled with -ffp-contract=off, and the pragma below says so again).
//
// The lengths cover each loop of the kernel: 16-wide AVX-512 blocks, 4-wide SSE blocks and the
// scalar tail. A level the CPU lacks cannot run (the plugin caps TINYFIN_CPU_ISA at what cpuid
// reports, and tinyfin-info's `kernels` feature says what runs): the test prints which levels it
// ran and which this CPU does not have.
#include <doctest/doctest.h>

#include <tinyfin/plugin.h>

#include "cpu_plugin_table.hpp"

#include <dlfcn.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace {

const tf_plugin &P() { return cpu_plugin_table(); }

// Restarts the plugin under TINYFIN_CPU_ISA=level; true when that level is what now runs.
bool run_at(const char *level) {
    P().shutdown();
    setenv("TINYFIN_CPU_ISA", level, 1);
    tf_error err{};
    err.struct_size = sizeof err;
    REQUIRE(P().init(&err) == TF_STATUS_OK);
    const std::string runs = cpu_plugin_feature("kernels");
    if (runs == level) return true;
    const std::string want = level;
    MESSAGE("TINYFIN_CPU_ISA=" << want << ": this CPU does not have " << want << " (the plugin runs " << runs
                               << "), so the " << want << " lanes cannot run here; the lower levels were checked");
    return false;
}

const char *const k_levels[] = {"generic", "avx2", "avx512"};

// f32 storage from the plugin's allocator.
struct Block {
    tf_buffer *buffer = nullptr;
    float *data = nullptr;
    tf_tensor_desc d{};
    explicit Block(const std::vector<float> &values) {
        tf_error err{};
        err.struct_size = sizeof err;
        REQUIRE(P().buffer_alloc(0, values.size() * 4, &buffer, &err) == TF_STATUS_OK);
        data = static_cast<float *>(P().buffer_host_ptr(buffer));
        std::memcpy(data, values.data(), values.size() * 4);
        d.struct_size = sizeof d;
        d.dtype = TF_DTYPE_F32;
        d.rank = 1;
        d.shape[0] = static_cast<int64_t>(values.size());
        d.strides[0] = 1;
        d.buffer = buffer;
        d.data = data;
    }
    ~Block() { P().buffer_free(buffer); }
    Block(const Block &) = delete;
    Block &operator=(const Block &) = delete;
    std::vector<float> values() const { return {data, data + d.shape[0]}; }
};

void run(uint32_t op, const Block &grad, std::vector<const Block *> outs, const void *params) {
    std::vector<tf_tensor_desc> out;
    for (const Block *b : outs) out.push_back(b->d);
    tf_op_desc desc{sizeof desc, op, 1, static_cast<uint32_t>(out.size()), &grad.d, out.data(), params};
    REQUIRE(P().supports(0, &desc));
    tf_error err{};
    err.struct_size = sizeof err;
    REQUIRE(P().run(0, &desc, &err) == TF_STATUS_OK);
}

// Element i differing in its bits: the first one, with both values.
void require_same_bits(const std::vector<float> &got, const std::vector<float> &want, const char *what,
                       const char *level) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i])) continue;
        char line[200];
        std::snprintf(line, sizeof line, "%s at %s, element %zu of %zu: %.9g (bits %u), the rule gives %.9g (bits %u)",
                      what, level, i, got.size(), got[i], std::bit_cast<uint32_t>(got[i]), want[i],
                      std::bit_cast<uint32_t>(want[i]));
        FAIL(line);
    }
}

// Lengths that reach each loop: under 4 (scalar only), a partial SSE block, AVX-512 blocks
// followed by SSE blocks and a scalar tail.
const int64_t k_lengths[] = {3, 7, 16, 1000 + 16 + 8 + 3};

std::vector<float> random_values(std::mt19937 &rng, int64_t n, float lo, float hi) {
    std::vector<float> v(static_cast<size_t>(n));
    // Magnitudes over several octaves, so roundings land everywhere in the significand.
    std::uniform_real_distribution<float> u(lo, hi), e(-6.0f, 2.0f);
    for (float &x : v) x = u(rng) * std::exp2(std::floor(e(rng)));
    return v;
}

tf_params_adamw_step adamw_params(int has_state, int decays, int t) {
    const double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.01;
    tf_params_adamw_step p{};
    p.struct_size = sizeof p;
    p.has_state = has_state;
    p.decays = decays;
    p.decay = 1.0 - lr * wd;
    p.beta1 = beta1;
    p.one_minus_beta1 = 1.0 - beta1;
    p.beta2 = beta2;
    p.one_minus_beta2 = 1.0 - beta2;
    p.root_bias_correction2 = std::sqrt(1.0 - std::pow(beta2, t));
    p.eps = eps;
    p.step_size = lr / (1.0 - std::pow(beta1, t));
    return p;
}

// ops.def's adamw_step in f32, one element at a time.
void adamw_rule(const tf_params_adamw_step &k, const std::vector<float> &g, std::vector<float> &p,
                std::vector<float> &m, std::vector<float> &v) {
    const float decay = static_cast<float>(k.decay), beta1 = static_cast<float>(k.beta1),
                omb1 = static_cast<float>(k.one_minus_beta1), beta2 = static_cast<float>(k.beta2),
                omb2 = static_cast<float>(k.one_minus_beta2), root = static_cast<float>(k.root_bias_correction2),
                eps = static_cast<float>(k.eps), step = static_cast<float>(k.step_size);
    for (size_t i = 0; i < g.size(); ++i) {
        const float m0 = k.has_state ? m[i] : 0.0f, v0 = k.has_state ? v[i] : 0.0f;
        const float m_old = m0 * beta1, m_new = g[i] * omb1;
        m[i] = m_old + m_new;
        const float square = g[i] * g[i];
        const float v_old = v0 * beta2, v_new = square * omb2;
        v[i] = v_old + v_new;
        const float root_v = std::sqrt(v[i]);
        const float denom = root_v / root + eps;
        const float ratio = m[i] / denom;
        const float update = ratio * step;
        const float decayed = k.decays ? p[i] * decay : p[i];
        p[i] = decayed - update;
    }
}

// ops.def's sgd_step in f32.
void sgd_rule(const tf_params_sgd_step &k, const std::vector<float> &g, std::vector<float> &p,
              std::vector<float> &buf) {
    const float lr = static_cast<float>(k.lr), mu = static_cast<float>(k.momentum),
                wd = static_cast<float>(k.weight_decay);
    for (size_t i = 0; i < g.size(); ++i) {
        float d = g[i];
        if (k.decays) {
            const float decay_term = p[i] * wd;
            d = g[i] + decay_term;
        }
        if (k.has_state) {
            const float kept = buf[i] * mu;
            buf[i] = kept + d;
        } else {
            buf[i] = d;
        }
        float step = buf[i];
        if (k.nesterov) {
            const float ahead = buf[i] * mu;
            step = d + ahead;
        }
        const float scaled = step * lr;
        p[i] = p[i] - scaled;
    }
}

}  // namespace

TEST_CASE("adamw_step: every ISA level gives the bits of ops.def's f32 rule") {
    int ran = 0;
    for (const char *level : k_levels) {
        if (!run_at(level)) continue;
        ++ran;
        std::mt19937 rng(31);
        for (int64_t n : k_lengths)
            for (int has_state = 0; has_state < 2; ++has_state)
                for (int decays = 0; decays < 2; ++decays) {
                    const std::vector<float> g0 = random_values(rng, n, -1.0f, 1.0f);
                    std::vector<float> p = random_values(rng, n, -1.0f, 1.0f), m = random_values(rng, n, -0.1f, 0.1f),
                                       v = random_values(rng, n, 0.0f, 0.01f);
                    Block grad(g0), param(p), exp_avg(m), exp_avg_sq(v);
                    // Three steps in a row: the state the kernel wrote is what the next reads.
                    for (int t = 1; t <= 3; ++t) {
                        const tf_params_adamw_step k = adamw_params(t == 1 ? has_state : 1, decays, t + 4);
                        run(TF_OP_ADAMW_STEP, grad, {&param, &exp_avg, &exp_avg_sq}, &k);
                        adamw_rule(k, g0, p, m, v);
                        CAPTURE(n);
                        CAPTURE(has_state);
                        CAPTURE(decays);
                        CAPTURE(t);
                        require_same_bits(exp_avg.values(), m, "exp_avg", level);
                        require_same_bits(exp_avg_sq.values(), v, "exp_avg_sq", level);
                        require_same_bits(param.values(), p, "param", level);
                    }
                }
    }
    MESSAGE("adamw_step checked bit for bit at " << ran << " of 3 levels");
    CHECK(ran >= 1);
    unsetenv("TINYFIN_CPU_ISA");
}

TEST_CASE("sgd_step: every ISA level gives the bits of ops.def's f32 rule") {
    int ran = 0;
    for (const char *level : k_levels) {
        if (!run_at(level)) continue;
        ++ran;
        std::mt19937 rng(17);
        for (int64_t n : k_lengths)
            for (int variant = 0; variant < 8; ++variant) {
                const std::vector<float> g0 = random_values(rng, n, -1.0f, 1.0f);
                std::vector<float> p = random_values(rng, n, -1.0f, 1.0f), buf = random_values(rng, n, -1.0f, 1.0f);
                Block grad(g0), param(p), momentum(buf);
                for (int t = 0; t < 3; ++t) {
                    tf_params_sgd_step k{};
                    k.struct_size = sizeof k;
                    k.has_state = t > 0 || (variant & 4) ? 1 : 0;
                    k.decays = variant & 2 ? 1 : 0;
                    k.nesterov = variant & 1;
                    k.lr = 0.1;
                    k.momentum = 0.9;
                    k.weight_decay = 0.01;
                    run(TF_OP_SGD_STEP, grad, {&param, &momentum}, &k);
                    sgd_rule(k, g0, p, buf);
                    CAPTURE(n);
                    CAPTURE(variant);
                    CAPTURE(t);
                    require_same_bits(momentum.values(), buf, "momentum_buffer", level);
                    require_same_bits(param.values(), p, "param", level);
                }
            }
    }
    MESSAGE("sgd_step checked bit for bit at " << ran << " of 3 levels");
    CHECK(ran >= 1);
    unsetenv("TINYFIN_CPU_ISA");
}
