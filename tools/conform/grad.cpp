// grad mode: for each differentiable op, L = sum(f(x) * W) with fixed pseudo-random weights W;
// the gradient autograd computes on the backend is compared with central differences of L
// evaluated on the same backend, element by element (|analytic - numeric| <= atol + rtol |numeric|,
// h = 1e-3, atol = 1e-3, rtol = 1e-2: the procedure and tolerances of
// tests/autograd/gradcheck.hpp). Inputs are small, and spaced away from kinks and ties for the
// ops that have them. The op's forward and every op its backward uses must run on the backend:
// under TINYFIN_FALLBACK=error a fallback makes the case "unsupported" there.
#include "grad.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <sstream>

#include "tinyfin/tinyfin.hpp"

namespace conform {

namespace {

namespace tf = tinyfin;
using Fn = std::function<tf::Tensor(const std::vector<tf::Tensor> &)>;

enum class Values { uniform, positive, spaced };

struct GradInput {
    Shape shape;
    Values values = Values::uniform;
    bool constant = false;  // fed in, not differentiated (labels, indices)
    tf::DType dtype = tf::DType::f32;
    int64_t limit = 0;  // integer inputs: values in [0, limit)
};

struct GradCase {
    std::string op, name;
    std::vector<GradInput> inputs;
    Fn f;
};

std::vector<float> uniform(int64_t n, uint64_t seed, double lo, double hi) {
    std::vector<float> out(static_cast<std::size_t>(n));
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 777;
    for (float &v : out) {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        v = static_cast<float>(lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1.0p-53);
    }
    return out;
}

// n distinct values 0.05 apart, shuffled, none within 0.025 of 0: no ties, no kinks.
std::vector<float> spaced(int64_t n, uint64_t seed) {
    std::vector<float> keys = uniform(n, seed, 0, 1);
    std::vector<int64_t> order(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
    std::vector<float> out(static_cast<std::size_t>(n));
    for (int64_t rank = 0; rank < n; ++rank) out[order[rank]] = static_cast<float>((rank - n / 2 + 0.5) * 0.05);
    return out;
}

int64_t count(const Shape &s) {
    int64_t n = 1;
    for (int64_t v : s) n *= v;
    return n;
}

using Unary = std::function<tf::Tensor(const tf::Tensor &)>;

// The C++ function of a unary op, or an empty function for ops grad mode does not cover.
Unary unary_fn(tf_op op) {
    switch (op) {
    case TF_OP_NEG: return [](const tf::Tensor &x) { return tf::neg(x); };
    case TF_OP_EXP: return [](const tf::Tensor &x) { return tf::exp(x); };
    case TF_OP_RELU: return [](const tf::Tensor &x) { return tf::relu(x); };
    case TF_OP_ABS: return [](const tf::Tensor &x) { return tf::abs(x); };
    case TF_OP_LOG: return [](const tf::Tensor &x) { return tf::log(x); };
    case TF_OP_SQRT: return [](const tf::Tensor &x) { return tf::sqrt(x); };
    case TF_OP_RSQRT: return [](const tf::Tensor &x) { return tf::rsqrt(x); };
    case TF_OP_SIN: return [](const tf::Tensor &x) { return tf::sin(x); };
    case TF_OP_COS: return [](const tf::Tensor &x) { return tf::cos(x); };
    case TF_OP_TANH: return [](const tf::Tensor &x) { return tf::tanh(x); };
    case TF_OP_SIGMOID: return [](const tf::Tensor &x) { return tf::sigmoid(x); };
    case TF_OP_GELU: return [](const tf::Tensor &x) { return tf::gelu(x, false); };
    case TF_OP_GELU_TANH: return [](const tf::Tensor &x) { return tf::gelu(x, true); };
    case TF_OP_SILU: return [](const tf::Tensor &x) { return tf::silu(x); };
    case TF_OP_SQUARE: return [](const tf::Tensor &x) { return tf::square(x); };
    case TF_OP_CLAMP: return [](const tf::Tensor &x) { return tf::clamp(x, -0.3, 0.4); };
    case TF_OP_ERF: return [](const tf::Tensor &x) { return tf::erf(x); };
    default: return {};
    }
}

using Binary = tf::Tensor (*)(const tf::Tensor &, const tf::Tensor &);

Binary binary_fn(tf_op op) {
    switch (op) {
    case TF_OP_ADD: return tf::add;
    case TF_OP_SUB: return tf::sub;
    case TF_OP_MUL: return tf::mul;
    case TF_OP_DIV: return tf::div;
    case TF_OP_POW: return tf::pow;
    case TF_OP_MAXIMUM: return tf::maximum;
    case TF_OP_MINIMUM: return tf::minimum;
    case TF_OP_RELU_BACKWARD: return tf::relu_backward;
    case TF_OP_GELU_BACKWARD: return tf::gelu_backward;
    default: return nullptr;
    }
}

tf::Tensor reduce_fn(tf_op op, const tf::Tensor &x, const std::vector<int> &axes) {
    switch (op) {
    case TF_OP_SUM: return tf::sum(x, axes);
    case TF_OP_MEAN: return tf::mean(x, axes);
    case TF_OP_MAX: return tf::max(x, axes);
    case TF_OP_MIN: return tf::min(x, axes);
    case TF_OP_VAR: return tf::var(x, axes);
    default: return {};
    }
}

bool has_kink(tf_op op) {
    switch (op) {
    case TF_OP_RELU:
    case TF_OP_ABS:
    case TF_OP_CLAMP:
    case TF_OP_MAXIMUM:
    case TF_OP_MINIMUM:
    case TF_OP_RELU_BACKWARD:
    case TF_OP_MAX:
    case TF_OP_MIN:
    case TF_OP_MAX_POOL2D: return true;
    default: return false;
    }
}

// The grad cases, by kind; the OWN ops through their C++ functions.
std::vector<GradCase> grad_cases() {
    std::vector<GradCase> out;
    for (const OpRow &row : op_rows()) {
        const tf_op op = row.op;
        const Values v = has_kink(op)                                                 ? Values::spaced
                         : (op == TF_OP_LOG || op == TF_OP_SQRT || op == TF_OP_RSQRT) ? Values::positive
                                                                                      : Values::uniform;
        auto add = [&](std::string name, std::vector<GradInput> in, Fn f) {
            out.push_back({row.name, std::move(name), std::move(in), std::move(f)});
        };
        switch (row.kind) {
        case Kind::UNARY:
            if (Unary f = unary_fn(op)) {
                add("f32 [3,4]", {{{3, 4}, v}}, [f](const auto &x) { return f(x[0]); });
                add("f32 [4,3] transposed", {{{3, 4}, v}}, [f](const auto &x) { return f(x[0].transpose(0, 1)); });
            }
            break;
        case Kind::BINARY: {
            Binary f = binary_fn(op);
            if (!f) break;
            Values second = op == TF_OP_DIV ? Values::positive : v;
            add("f32 [3,4] x [4]", {{{3, 4}, op == TF_OP_POW ? Values::positive : v}, {{4}, second}},
                [f](const auto &x) { return f(x[0], x[1]); });
            add("f32 [2,3] x [2,3]", {{{2, 3}, op == TF_OP_POW ? Values::positive : v}, {{2, 3}, second}},
                [f](const auto &x) { return f(x[0], x[1]); });
            break;
        }
        case Kind::REDUCE:
            add("f32 [3,4] axes=1", {{{3, 4}, v}}, [op](const auto &x) { return reduce_fn(op, x[0], {1}); });
            add("f32 [2,3,4] axes=all", {{{2, 3, 4}, v}}, [op](const auto &x) { return reduce_fn(op, x[0], {}); });
            break;
        case Kind::MATMUL:
            add("f32 [2,3,4] x [4,5]", {{{2, 3, 4}}, {{4, 5}}}, [](const auto &x) { return tf::matmul(x[0], x[1]); });
            break;
        case Kind::COPY:
            if (op == TF_OP_CONTIGUOUS)
                add("f32 [3,4] transposed", {{{3, 4}}},
                    [](const auto &x) { return x[0].transpose(0, 1).contiguous(); });
            break;
        case Kind::WHERE:
            add("f32 [3,4]", {{{3, 4}}, {{3, 4}}},
                [](const auto &x) { return tf::where(tf::gt(x[0], tf::scalar_like(x[0], 0.0)).detach(), x[0], x[1]); });
            break;
        case Kind::OWN:
            switch (op) {
            case TF_OP_CONV2D: {
                tf::Conv2dOptions o;
                o.stride_h = 2, o.pad_h = o.pad_w = 1;
                add("f32 x[1,2,5,5] w[3,2,3,3] stride=2,1 pad=1", {{{1, 2, 5, 5}}, {{3, 2, 3, 3}}},
                    [o](const auto &x) { return tf::conv2d(x[0], x[1], tf::Tensor(), o); });
                tf::Conv2dOptions g;
                g.groups = 2;
                add("f32 x[1,4,4,4] w[2,2,2,2] groups=2", {{{1, 4, 4, 4}}, {{2, 2, 2, 2}}},
                    [g](const auto &x) { return tf::conv2d(x[0], x[1], tf::Tensor(), g); });
                break;
            }
            case TF_OP_MAX_POOL2D:
            case TF_OP_AVG_POOL2D: {
                tf::Pool2dOptions o;
                o.kernel_h = o.kernel_w = 3, o.stride_h = o.stride_w = 2, o.pad_h = o.pad_w = 1;
                const bool is_max = op == TF_OP_MAX_POOL2D;
                add("f32 [1,2,5,5] k=3 s=2 pad=1", {{{1, 2, 5, 5}, v}},
                    [o, is_max](const auto &x) { return is_max ? tf::max_pool2d(x[0], o) : tf::avg_pool2d(x[0], o); });
                break;
            }
            case TF_OP_SOFTMAX:
                add("f32 [3,4] axis=1", {{{3, 4}}}, [](const auto &x) { return tf::softmax(x[0], 1); });
                break;
            case TF_OP_LOG_SOFTMAX:
                add("f32 [3,4] axis=0", {{{3, 4}}}, [](const auto &x) { return tf::log_softmax(x[0], 0); });
                break;
            case TF_OP_LAYER_NORM:
                add("f32 [3,4] n_axes=1", {{{3, 4}}, {{4}}, {{4}}},
                    [](const auto &x) { return tf::layer_norm(x[0], 1, x[1], x[2]); });
                break;
            case TF_OP_RMS_NORM:
                add("f32 [3,4] n_axes=1", {{{3, 4}}, {{4}}}, [](const auto &x) { return tf::rms_norm(x[0], 1, x[1]); });
                break;
            case TF_OP_ROPE:
                add("f32 [2,3,4]", {{{2, 3, 4}}}, [](const auto &x) { return tf::rope(x[0], 100.0, false, 1); });
                break;
            case TF_OP_ATTENTION:
                add("f32 q[1,3,4] k[1,4,4] v[1,4,2] causal", {{{1, 3, 4}}, {{1, 4, 4}}, {{1, 4, 2}}},
                    [](const auto &x) {
                        return tf::scaled_dot_product_attention(x[0], x[1], x[2], tf::Tensor(), true);
                    });
                break;
            case TF_OP_EMBEDDING:
                add("f32 w[5,3] idx[4]", {{{5, 3}}, {{4}, Values::uniform, true, tf::DType::i64, 5}},
                    [](const auto &x) { return tf::embedding(x[0], x[1]); });
                break;
            case TF_OP_CROSS_ENTROPY:
                add("f32 [4,5] mean", {{{4, 5}}, {{4}, Values::uniform, true, tf::DType::i64, 5}},
                    [](const auto &x) { return tf::cross_entropy(x[0], x[1]); });
                break;
            default: break;
            }
            break;
        default: break;
        }
    }
    return out;
}

tf::Tensor make_input(const GradInput &in, const std::vector<float> &values, const tf::Device &device) {
    if (in.dtype == tf::DType::i64) {
        std::vector<int64_t> ints(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) ints[i] = static_cast<int64_t>(values[i]);
        return tf::from_vector(ints, in.shape, device);
    }
    return tf::from_vector(values, in.shape, device);
}

std::vector<float> input_values(const GradInput &in, uint64_t seed) {
    const int64_t n = count(in.shape);
    if (in.dtype == tf::DType::i64) return uniform(n, seed, 0, static_cast<double>(in.limit) - 1e-9);
    if (in.values == Values::spaced) return spaced(n, seed);
    if (in.values == Values::positive) return uniform(n, seed, 0.5, 2);
    return uniform(n, seed, -1, 1);
}

double host_loss(const tf::Tensor &out, const std::vector<float> &w) {
    std::vector<float> y = out.to_vector<float>();
    double total = 0;
    for (std::size_t i = 0; i < y.size(); ++i) total += static_cast<double>(y[i]) * w[i];
    return total;
}

// "" when every gradient agrees, else what differs.
std::string check_case(const GradCase &c, const tf::Device &device) {
    const double h = 1e-3, atol = 1e-3, rtol = 1e-2;
    std::vector<std::vector<float>> values;
    std::vector<tf::Tensor> leaves;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
        values.push_back(input_values(c.inputs[i], 17 + i));
        tf::Tensor t = make_input(c.inputs[i], values.back(), device);
        if (!c.inputs[i].constant) t.requires_grad_();
        leaves.push_back(t);
    }
    tf::Tensor out = c.f(leaves);
    std::vector<float> w = uniform(out.numel(), 99 + out.numel(), -1, 1);
    tf::sum(tf::mul(out, tf::from_vector(w, out.shape(), device))).backward();
    std::ostringstream bad;
    int mismatches = 0;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
        if (c.inputs[i].constant) continue;
        tf::Tensor g = leaves[i].grad();
        if (!g.defined()) return "input " + std::to_string(i) + " got no gradient";
        if (g.device() != device) return "input " + std::to_string(i) + "'s gradient is on " + g.device().str();
        std::vector<float> analytic = g.to_vector<float>();
        tf::NoGradGuard no_grad;
        for (std::size_t j = 0; j < values[i].size(); ++j) {
            auto loss_at = [&](float x) {
                std::vector<tf::Tensor> args;
                for (std::size_t k = 0; k < c.inputs.size(); ++k) {
                    if (k != i) {
                        args.push_back(leaves[k].detach());
                        continue;
                    }
                    std::vector<float> perturbed = values[i];
                    perturbed[j] = x;
                    args.push_back(make_input(c.inputs[i], perturbed, device));
                }
                return host_loss(c.f(args), w);
            };
            const float x = values[i][j], plus = static_cast<float>(x + h), minus = static_cast<float>(x - h);
            const double numeric = (loss_at(plus) - loss_at(minus)) / (static_cast<double>(plus) - minus);
            if (std::abs(analytic[j] - numeric) <= atol + rtol * std::abs(numeric)) continue;
            if (mismatches++ < 3)
                bad << " input " << i << "[" << j << "]: analytic " << analytic[j] << ", numeric " << numeric << ";";
        }
    }
    if (!mismatches) return "";
    return std::to_string(mismatches) + " gradient element(s) differ:" + bad.str();
}

}  // namespace

void run_grad(const Options &o, const std::vector<Backend> &backends, Results &results) {
    for (const GradCase &c : grad_cases()) {
        const std::string id = c.op + " " + c.name;
        if (!o.ops.empty() && std::find(o.ops.begin(), o.ops.end(), c.op) == o.ops.end()) continue;
        if (!o.dtypes.empty() && std::find(o.dtypes.begin(), o.dtypes.end(), "f32") == o.dtypes.end()) continue;
        if (!o.case_filters.empty()) {
            bool any = false;
            for (const std::string &f : o.case_filters) any |= id.find(f) != std::string::npos;
            if (!any) continue;
        }
        for (const Backend &b : backends) {
            Result r;
            r.backend = b.target.name;
            r.op = c.op;
            r.case_id = id;
            r.dtype = TF_DTYPE_F32;
            const auto t0 = std::chrono::steady_clock::now();
            try {
                std::string why = check_case(c, tf::Device{b.target.name, 0});
                r.status = why.empty() ? Status::pass : Status::fail;
                r.detail = why;
            } catch (const tf::FallbackError &e) {
                r.status = Status::unsupported;  // part of forward or backward is not on this backend
                r.detail = e.what();
            } catch (const std::exception &e) {
                r.status = Status::fail;
                r.detail = e.what();
            }
            r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            report_result(o, r);
            results.push_back(std::move(r));
        }
    }
}

}  // namespace conform
