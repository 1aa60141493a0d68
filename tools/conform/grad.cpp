// grad mode: for each differentiable op, L = sum(f(x) * W) with fixed pseudo-random weights W
// (rounded to the case's dtype), in f32, f16 and bf16. On each backend, the forward value f(x)
// and the gradients autograd computes are compared with the float64 reference (reference.hpp)
// evaluated on the same (rounded) inputs: f in double, and its gradient in double, analytic for
// the products (matmul, linear, conv2d) and else central differences of the double f with
// Richardson extrapolation (error ~1e-12 for these smooth cases). Bounds, element by element
// (docs/numerics.md, "The float64 reference"): the forward and the gradients of ops whose
// backward is one fused op or product (rounded once, "once") within unit |exact| + 2^-24 k S;
// gradients composed of several ops in the dtype within 8 units of the dtype of S + the tensor's
// largest element more, S being the same quantity evaluated at |x| and |W| (the size of the terms). Inputs are small,
// and spaced away from kinks and ties for the ops that have them. The op's forward and every op
// its backward uses must run on the backend: under TINYFIN_FALLBACK=error a fallback makes the
// case "unsupported" there.
#include "grad.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

#include "check.hpp"
#include "reference.hpp"
#include "runner.hpp"
#include "tinyfin/tinyfin.hpp"

namespace conform {

namespace {

namespace tf = tinyfin;
using Fn = std::function<tf::Tensor(const std::vector<tf::Tensor> &)>;

enum class Values { uniform, positive, spaced, above_one, inner };

struct GradInput {
    Shape shape;
    Values values = Values::uniform;
    bool constant = false;  // fed in, not differentiated (labels, indices)
    tf::DType dtype = tf::DType::f32;
    int64_t limit = 0;  // integer inputs: values in [0, limit)
};

// The float64 forward of a case, and (optional) its analytic gradients: inputs, dL/dy -> one
// Host per input (empty for the constant ones).
using RefFn = std::function<Host(const std::vector<Host> &)>;
using RefGradFn = std::function<std::vector<Host>(const std::vector<Host> &, const Host &)>;

struct GradCase {
    std::string op, name;
    std::vector<GradInput> inputs;
    Fn f;
    RefFn ref;
    RefGradFn ref_grad;
    double k = 16;  // f32 operations behind an element (check.hpp's bound)
    bool once = false;  // the gradient is one fused op or product, rounded once
    std::vector<tf::DType> dtypes = {tf::DType::f32, tf::DType::f16, tf::DType::bf16};
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
    case TF_OP_ASIN: return [](const tf::Tensor &x) { return tf::asin(x); };
    case TF_OP_ACOS: return [](const tf::Tensor &x) { return tf::acos(x); };
    case TF_OP_ATAN: return [](const tf::Tensor &x) { return tf::atan(x); };
    case TF_OP_ASINH: return [](const tf::Tensor &x) { return tf::asinh(x); };
    case TF_OP_ACOSH: return [](const tf::Tensor &x) { return tf::acosh(x); };
    case TF_OP_ATANH: return [](const tf::Tensor &x) { return tf::atanh(x); };
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

Params clamp_params(double lo, double hi) {
    Params p;
    p.as<tf_params_clamp>().min = lo, p.as<tf_params_clamp>().max = hi;
    return p;
}

// Gradients of a single rounding: selections, sums and products, and the fused backward ops.
bool backward_once(tf_op op) {
    switch (op) {
    case TF_OP_ADD:
    case TF_OP_SUB:
    case TF_OP_NEG:
    case TF_OP_RELU:
    case TF_OP_ABS:
    case TF_OP_CLAMP:
    case TF_OP_MAXIMUM:
    case TF_OP_MINIMUM:
    case TF_OP_SUM:
    case TF_OP_MEAN:
    case TF_OP_MAX:
    case TF_OP_MIN:
    case TF_OP_MATMUL:
    case TF_OP_CONTIGUOUS:
    case TF_OP_WHERE:
    case TF_OP_CONV2D:
    case TF_OP_MAX_POOL2D:
    case TF_OP_AVG_POOL2D:
    case TF_OP_GELU:
    case TF_OP_ATTENTION:
    case TF_OP_LAYER_NORM:
    case TF_OP_EMBEDDING: return true;
    default: return false;
    }
}

Host ref_sum_to(const Host &g, const Shape &shape) {
    // Sums g over the leading and broadcast axes down to `shape` (aligned right).
    Host out(shape);
    const std::size_t lead = g.shape.size() - shape.size();
    for (int64_t i = 0; i < g.numel(); ++i) {
        int64_t rest = i, at = 0, stride = 1;
        for (std::size_t k = g.shape.size(); k-- > 0;) {
            const int64_t c = rest % g.shape[k];
            rest /= g.shape[k];
            if (k < lead) continue;
            const int64_t s = shape[k - lead];
            if (s != 1) at += c * stride;
            stride *= s;
        }
        out.v[at] += g.v[i];
    }
    return out;
}

// matmul's gradients from the definition: dA = G B^T, dB = A^T G, each summed over the batch
// axes its operand was broadcast along.
std::vector<Host> ref_matmul_grad(const Host &a, const Host &b, const Host &g) {
    Host da = ref::matmul(g, ref::transpose_last(b)), db = ref::matmul(ref::transpose_last(a), g);
    return {ref_sum_to(da, a.shape), ref_sum_to(db, b.shape)};
}

tf_params_conv2d conv_params(const tf::Conv2dOptions &o) {
    tf_params_conv2d p;
    p.struct_size = sizeof p;
    p.stride[0] = o.stride_h, p.stride[1] = o.stride_w, p.padding[0] = o.pad_h, p.padding[1] = o.pad_w;
    p.dilation[0] = o.dilation_h, p.dilation[1] = o.dilation_w, p.groups = o.groups;
    return p;
}

Host ref_conv_bias(const std::vector<Host> &x, const tf_params_conv2d &p) {
    Host y = ref::conv2d(x[0], x[1], p);
    if (x.size() > 2) {
        const int64_t plane = y.shape[2] * y.shape[3];
        for (int64_t i = 0; i < y.numel(); ++i) y.v[i] += x[2].v[(i / plane) % y.shape[1]];
    }
    return y;
}

std::vector<Host> ref_conv_grad(const std::vector<Host> &x, const Host &g, const tf_params_conv2d &p) {
    std::vector<Host> out = {ref::conv2d_grad_input(g, x[1], p, x[0].shape),
                             ref::conv2d_grad_weight(g, x[0], p, x[1].shape)};
    if (x.size() > 2) {
        Host db(x[2].shape);
        const int64_t plane = g.shape[2] * g.shape[3];
        for (int64_t i = 0; i < g.numel(); ++i) db.v[(i / plane) % g.shape[1]] += g.v[i];
        out.push_back(db);
    }
    return out;
}

// The grad cases, by kind; the OWN ops through their C++ functions. Names leave the dtype out
// (the run puts it first).
std::vector<GradCase> grad_cases() {
    std::vector<GradCase> out;
    for (const OpRow &row : op_rows()) {
        const tf_op op = row.op;
        const Values v = has_kink(op)                                                  ? Values::spaced
                         : (op == TF_OP_LOG || op == TF_OP_SQRT || op == TF_OP_RSQRT)  ? Values::positive
                         : op == TF_OP_ACOSH                                           ? Values::above_one
                         : (op == TF_OP_ASIN || op == TF_OP_ACOS || op == TF_OP_ATANH) ? Values::inner
                                                                                       : Values::uniform;
        auto add = [&](std::string name, std::vector<GradInput> in, Fn f, RefFn ref, double k = 16) {
            GradCase c;
            c.op = row.name, c.name = std::move(name), c.inputs = std::move(in), c.f = std::move(f);
            c.ref = std::move(ref), c.k = k, c.once = backward_once(op);
            out.push_back(std::move(c));
            return &out.back();
        };
        switch (row.kind) {
        case Kind::UNARY:
            if (Unary f = unary_fn(op)) {
                const Params p = clamp_params(-0.3, 0.4);
                add(
                    "[3,4]", {{{3, 4}, v}}, [f](const auto &x) { return f(x[0]); },
                    [op, p](const auto &x) { return ref::unary(op, x[0], p); });
                add(
                    "[4,3] transposed", {{{3, 4}, v}}, [f](const auto &x) { return f(x[0].transpose(0, 1)); },
                    [op, p](const auto &x) { return ref::unary(op, ref::transpose_last(x[0]), p); });
            }
            break;
        case Kind::BINARY: {
            Binary f = binary_fn(op);
            if (!f) break;
            Values second = op == TF_OP_DIV ? Values::positive : v;
            auto r = [op](const auto &x) { return ref::binary(op, x[0], x[1]); };
            add(
                "[3,4] x [4]", {{{3, 4}, op == TF_OP_POW ? Values::positive : v}, {{4}, second}},
                [f](const auto &x) { return f(x[0], x[1]); }, r);
            add(
                "[2,3] x [2,3]", {{{2, 3}, op == TF_OP_POW ? Values::positive : v}, {{2, 3}, second}},
                [f](const auto &x) { return f(x[0], x[1]); }, r);
            break;
        }
        case Kind::REDUCE:
            add(
                "[3,4] axes=1", {{{3, 4}, v}}, [op](const auto &x) { return reduce_fn(op, x[0], {1}); },
                [op](const auto &x) { return ref::reduce(op, x[0], 2u); }, 4 * 4 + 16);
            add(
                "[2,3,4] axes=all", {{{2, 3, 4}, v}}, [op](const auto &x) { return reduce_fn(op, x[0], {}); },
                [op](const auto &x) {
                    Host y = ref::reduce(op, x[0], 7u);
                    y.shape = {};
                    return y;
                },
                4 * 24 + 16);
            break;
        case Kind::MATMUL: {
            GradCase *c = add(
                "[2,3,4] x [4,5]", {{{2, 3, 4}}, {{4, 5}}}, [](const auto &x) { return tf::matmul(x[0], x[1]); },
                [](const auto &x) { return ref::matmul(x[0], x[1]); }, 2 * 4 + 16);
            c->ref_grad = [](const auto &x, const Host &g) { return ref_matmul_grad(x[0], x[1], g); };
            // Batched x unbatched in bf16: the gradient of b sums the batch (issue 31: rounded
            // once per batch, then summed, today; the bound is one rounding).
            c = add(
                "[3,33,65] x [65,17]", {{{3, 33, 65}}, {{65, 17}}},
                [](const auto &x) { return tf::matmul(x[0], x[1]); },
                [](const auto &x) { return ref::matmul(x[0], x[1]); }, 2 * 99 + 16);
            c->ref_grad = [](const auto &x, const Host &g) { return ref_matmul_grad(x[0], x[1], g); };
            c->dtypes = {tf::DType::f32, tf::DType::bf16};
            break;
        }
        case Kind::COPY:
            if (op == TF_OP_CONTIGUOUS)
                add(
                    "[3,4] transposed", {{{3, 4}}}, [](const auto &x) { return x[0].transpose(0, 1).contiguous(); },
                    [](const auto &x) { return ref::transpose_last(x[0]); });
            break;
        case Kind::WHERE:
            add(
                "[3,4]", {{{3, 4}}, {{3, 4}}},
                [](const auto &x) { return tf::where(tf::gt(x[0], tf::scalar_like(x[0], 0.0)).detach(), x[0], x[1]); },
                [](const auto &x) {
                    Host y = x[0];
                    for (std::size_t i = 0; i < y.v.size(); ++i) y.v[i] = x[0].v[i] > 0 ? x[0].v[i] : x[1].v[i];
                    return y;
                });
            break;
        case Kind::OWN:
            switch (op) {
            case TF_OP_CONV2D: {
                tf::Conv2dOptions o;
                o.stride_h = 2, o.pad_h = o.pad_w = 1;
                const tf_params_conv2d po = conv_params(o);
                GradCase *c = add(
                    "x[1,2,5,5] w[3,2,3,3] stride=2,1 pad=1", {{{1, 2, 5, 5}}, {{3, 2, 3, 3}}},
                    [o](const auto &x) { return tf::conv2d(x[0], x[1], tf::Tensor(), o); },
                    [po](const auto &x) { return ref_conv_bias(x, po); }, 2 * 18 + 16);
                c->ref_grad = [po](const auto &x, const Host &g) { return ref_conv_grad(x, g, po); };
                tf::Conv2dOptions g;
                g.groups = 2;
                const tf_params_conv2d pg = conv_params(g);
                c = add(
                    "x[1,4,4,4] w[2,2,2,2] groups=2", {{{1, 4, 4, 4}}, {{2, 2, 2, 2}}},
                    [g](const auto &x) { return tf::conv2d(x[0], x[1], tf::Tensor(), g); },
                    [pg](const auto &x) { return ref_conv_bias(x, pg); }, 2 * 9 + 16);
                c->ref_grad = [pg](const auto &x, const Host &g2) { return ref_conv_grad(x, g2, pg); };
                // With a bias, the issue 31 case: the bias is part of the one rounding.
                tf::Conv2dOptions b;
                b.pad_h = b.pad_w = 1;
                const tf_params_conv2d pb = conv_params(b);
                c = add(
                    "x[2,3,17,19] w[8,3,3,3] bias pad=1", {{{2, 3, 17, 19}}, {{8, 3, 3, 3}}, {{8}}},
                    [b](const auto &x) { return tf::conv2d(x[0], x[1], x[2], b); },
                    [pb](const auto &x) { return ref_conv_bias(x, pb); }, 2 * 2 * 17 * 19 + 16);
                c->ref_grad = [pb](const auto &x, const Host &g2) { return ref_conv_grad(x, g2, pb); };
                c->dtypes = {tf::DType::f32, tf::DType::bf16};
                break;
            }
            case TF_OP_MAX_POOL2D:
            case TF_OP_AVG_POOL2D: {
                tf::Pool2dOptions o;
                o.kernel_h = o.kernel_w = 3, o.stride_h = o.stride_w = 2, o.pad_h = o.pad_w = 1;
                tf_params_pool2d p;
                p.kernel[0] = p.kernel[1] = 3, p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 1;
                p.count_include_pad = o.count_include_pad;
                const bool is_max = op == TF_OP_MAX_POOL2D;
                add(
                    "[1,2,5,5] k=3 s=2 pad=1", {{{1, 2, 5, 5}, v}},
                    [o, is_max](const auto &x) { return is_max ? tf::max_pool2d(x[0], o) : tf::avg_pool2d(x[0], o); },
                    [p, is_max](const auto &x) { return is_max ? ref::max_pool2d(x[0], p) : ref::avg_pool2d(x[0], p); },
                    2 * 9 + 16);
                break;
            }
            case TF_OP_SOFTMAX:
                add(
                    "[3,4] axis=1", {{{3, 4}}}, [](const auto &x) { return tf::softmax(x[0], 1); },
                    [](const auto &x) { return ref::softmax(x[0], 1, false); }, 4 * 4 + 32);
                break;
            case TF_OP_LOG_SOFTMAX:
                add(
                    "[3,4] axis=0", {{{3, 4}}}, [](const auto &x) { return tf::log_softmax(x[0], 0); },
                    [](const auto &x) { return ref::softmax(x[0], 0, true); }, 4 * 3 + 32);
                break;
            case TF_OP_LAYER_NORM:
                add(
                    "[3,4] n_axes=1", {{{3, 4}}, {{4}}, {{4}}},
                    [](const auto &x) { return tf::layer_norm(x[0], 1, x[1], x[2]); },
                    [](const auto &x) { return ref::layer_norm(x[0], x[1], x[2], 1, 1e-5); }, 4 * 4 + 32);
                break;
            case TF_OP_RMS_NORM:
                add(
                    "[3,4] n_axes=1", {{{3, 4}}, {{4}}}, [](const auto &x) { return tf::rms_norm(x[0], 1, x[1]); },
                    [](const auto &x) { return ref::rms_norm(x[0], x[1], 1, 1e-6); }, 4 * 4 + 32);
                break;
            case TF_OP_ROPE: {
                tf_params_rope p;
                p.theta = 100.0, p.position_offset = 1;
                add(
                    "[2,3,4]", {{{2, 3, 4}}}, [](const auto &x) { return tf::rope(x[0], 100.0, false, 1); },
                    [p](const auto &x) { return ref::rope(x[0], p); }, 64);
                break;
            }
            case TF_OP_ATTENTION: {
                tf_params_attention p;
                p.causal = 1, p.scale = 0.5;
                add(
                    "q[1,3,4] k[1,4,4] v[1,4,2] causal", {{{1, 3, 4}}, {{1, 4, 4}}, {{1, 4, 2}}},
                    [](const auto &x) {
                        return tf::scaled_dot_product_attention(x[0], x[1], x[2], tf::Tensor(), true);
                    },
                    [p](const auto &x) { return ref::attention(x[0], x[1], x[2], nullptr, p); },
                    4 * (4 + 4 + 2 + 3) + 32);
                break;
            }
            case TF_OP_EMBEDDING:
                add(
                    "w[5,3] idx[4]", {{{5, 3}}, {{4}, Values::uniform, true, tf::DType::i64, 5}},
                    [](const auto &x) { return tf::embedding(x[0], x[1]); },
                    [](const auto &x) { return ref::embedding(x[0], x[1]); });
                break;
            case TF_OP_CROSS_ENTROPY: {
                tf_params_cross_entropy p;
                p.reduction = TF_REDUCTION_MEAN, p.ignore_index = -100;
                add(
                    "[4,5] mean", {{{4, 5}}, {{4}, Values::uniform, true, tf::DType::i64, 5}},
                    [](const auto &x) { return tf::cross_entropy(x[0], x[1]); },
                    [p](const auto &x) { return ref::cross_entropy(x[0], x[1], p); }, 4 * 9 + 32);
                break;
            }
            default: break;
            }
            break;
        default: break;
        }
    }
    // linear with a bias (issue 31): x [4,33,65] @ w^T + b, rounded once, and the gradient of w
    // summed over the batch once.
    GradCase lin;
    lin.op = "matmul", lin.name = "linear x[4,33,65] w[17,65] bias";
    lin.inputs = {{{4, 33, 65}}, {{17, 65}}, {{17}}};
    lin.f = [](const auto &x) { return tf::linear(x[0], x[1], x[2]); };
    lin.ref = [](const auto &x) {
        Host y = ref::matmul(x[0], ref::transpose_last(x[1]));
        for (int64_t i = 0; i < y.numel(); ++i) y.v[i] += x[2].v[i % 17];
        return y;
    };
    lin.ref_grad = [](const auto &x, const Host &g) {
        Host wt = ref::transpose_last(x[1]);
        std::vector<Host> d = ref_matmul_grad(x[0], wt, g);
        return std::vector<Host>{d[0], ref::transpose_last(d[1]), ref_sum_to(g, x[2].shape)};
    };
    lin.k = 2 * 4 * 33 + 16, lin.once = true, lin.dtypes = {tf::DType::f32, tf::DType::bf16};
    out.push_back(std::move(lin));
    return out;
}

int32_t abi_dtype(tf::DType d) {
    return d == tf::DType::f16 ? TF_DTYPE_F16 : d == tf::DType::bf16 ? TF_DTYPE_BF16 : TF_DTYPE_F32;
}

// The input values of a case in a dtype: drawn, then rounded to it (what the backend stores).
std::vector<float> input_values(const GradInput &in, uint64_t seed, tf::DType dtype) {
    const int64_t n = count(in.shape);
    std::vector<float> v;
    if (in.dtype == tf::DType::i64) return uniform(n, seed, 0, static_cast<double>(in.limit) - 1e-9);
    if (in.values == Values::spaced)
        v = spaced(n, seed);
    else if (in.values == Values::positive)
        v = uniform(n, seed, 0.5, 2);
    else if (in.values == Values::above_one)
        v = uniform(n, seed, 1.25, 3);
    else if (in.values == Values::inner)
        v = uniform(n, seed, -0.8, 0.8);
    else
        v = uniform(n, seed, -1, 1);
    for (float &x : v) x = static_cast<float>(round_to(x, abi_dtype(dtype)));
    return v;
}

tf::Tensor make_input(const GradInput &in, const std::vector<float> &values, const tf::Device &device,
                      tf::DType dtype) {
    if (in.dtype == tf::DType::i64) {
        std::vector<int64_t> ints(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) ints[i] = static_cast<int64_t>(values[i]);
        return tf::from_vector(ints, in.shape, device);
    }
    tf::Tensor t = tf::from_vector(values, in.shape, device);
    return dtype == tf::DType::f32 ? t : t.to(dtype);
}

// The reference of one case in one dtype: forward and gradients, each with its terms' size.
struct Expected {
    std::vector<std::vector<float>> values;  // the inputs (rounded)
    std::vector<float> w;  // dL/dy (rounded)
    Host forward, forward_scale;
    std::vector<Host> grads, grad_scales;  // empty Host for constant inputs
};

double weighted(const Host &y, const Host &w) {
    double s = 0;
    for (std::size_t i = 0; i < y.v.size(); ++i) s += y.v[i] * w.v[i];
    return s;
}

// dL/dx by central differences of the double forward, Richardson-extrapolated.
std::vector<Host> numeric_grads(const GradCase &c, std::vector<Host> x, const Host &w) {
    std::vector<Host> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (c.inputs[i].constant) continue;
        out[i] = Host(x[i].shape);
        for (int64_t j = 0; j < x[i].numel(); ++j) {
            const double x0 = x[i].v[j];
            auto diff = [&](double h) {
                x[i].v[j] = x0 + h;
                const double plus = weighted(c.ref(x), w);
                x[i].v[j] = x0 - h;
                const double minus = weighted(c.ref(x), w);
                x[i].v[j] = x0;
                return (plus - minus) / (2 * h);
            };
            const double h = 1e-3 * std::max(1.0, std::abs(x0));
            out[i].v[j] = (4 * diff(h / 2) - diff(h)) / 3;
        }
    }
    return out;
}

Expected expect(const GradCase &c, tf::DType dtype, int64_t out_numel) {
    Expected e;
    std::vector<Host> x, xa;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
        e.values.push_back(input_values(c.inputs[i], 17 + i, dtype));
        Host h(c.inputs[i].shape);
        for (std::size_t j = 0; j < h.v.size(); ++j) h.v[j] = e.values.back()[j];
        Host a = h;
        if (!c.inputs[i].constant)
            for (double &v : a.v) v = std::abs(v);
        x.push_back(std::move(h));
        xa.push_back(std::move(a));
    }
    e.w = uniform(out_numel, 99 + out_numel, -1, 1);
    for (float &v : e.w) v = static_cast<float>(round_to(v, abi_dtype(dtype)));
    e.forward = c.ref(x);
    e.forward_scale = c.ref(xa);
    Host w(e.forward.shape), wa(e.forward.shape);
    for (std::size_t i = 0; i < w.v.size(); ++i) w.v[i] = e.w[i], wa.v[i] = std::abs(e.w[i]);
    e.grads = c.ref_grad ? c.ref_grad(x, w) : numeric_grads(c, x, w);
    e.grad_scales = c.ref_grad ? c.ref_grad(xa, wa) : numeric_grads(c, xa, wa);
    return e;
}

// Elements of got off the reference: "" when none. composite: the gradient of several ops in
// the dtype (8 roundings of the terms' size allowed besides the bound).
std::string off_reference(const std::string &what, int32_t dtype, const std::vector<float> &got, const Host &want,
                          const Host &scale, double k, bool composite) {
    if (got.size() != want.v.size())
        return what + ": " + std::to_string(got.size()) + " elements, want " + std::to_string(want.v.size());
    std::size_t bad = 0, first = 0;
    double first_bound = 0, largest = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        largest = std::max({largest, std::abs(want.v[i]), std::abs(scale.v[i])});
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double s = std::max(std::abs(scale.v[i]), std::abs(want.v[i]));
        double bound = element_bound(dtype, want.v[i], s, k);
        // Several roundings in the dtype, each of an intermediate (y g, sum(g y), x mean(g x), ...)
        // that can be as large as the tensor's largest element where the result cancels.
        if (composite) bound += 8 * unit_roundoff(dtype) * (s + largest);
        if (std::abs(got[i] - want.v[i]) <= bound) continue;
        if (bad++ == 0) first = i, first_bound = bound;
    }
    if (!bad) return "";
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        "%s: %zu of %zu element(s) off the float64 reference; first: element %zu: got %.8g, exact %.8g, bound %.3g; ",
        what.c_str(), bad, got.size(), first, static_cast<double>(got[first]), want.v[first], first_bound);
    return buf;
}

// "" when the forward value and every gradient agree with the reference, else what differs.
std::string check_case(const GradCase &c, tf::DType dtype, const Expected &e, const tf::Device &device) {
    const int32_t dt = abi_dtype(dtype);
    std::vector<tf::Tensor> leaves;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
        tf::Tensor t = make_input(c.inputs[i], e.values[i], device, dtype);
        if (!c.inputs[i].constant) t.requires_grad_();
        leaves.push_back(t);
    }
    tf::Tensor out = c.f(leaves);
    if (out.dtype() != dtype) return "the output's dtype is not the inputs'";
    std::string why = off_reference("forward", dt, out.to_vector<float>(), e.forward, e.forward_scale, c.k, false);
    tf::Tensor w = make_input(GradInput{out.shape()}, e.w, device, dtype);
    tf::sum(tf::mul(out, w)).backward();
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
        if (c.inputs[i].constant) continue;
        tf::Tensor g = leaves[i].grad();
        if (!g.defined()) return why + "input " + std::to_string(i) + " got no gradient";
        if (g.device() != device) return why + "input " + std::to_string(i) + "'s gradient is on " + g.device().str();
        why += off_reference("grad " + std::to_string(i), dt, g.to_vector<float>(), e.grads[i], e.grad_scales[i], c.k,
                             !c.once);
    }
    return why;
}

const char *dtype_text(tf::DType d) { return d == tf::DType::f16 ? "f16" : d == tf::DType::bf16 ? "bf16" : "f32"; }

}  // namespace

int run_grad(const Options &o, const std::vector<Backend> &backends, Results &results) {
    std::vector<KnownFailure> known =
        o.known_failures.empty() ? std::vector<KnownFailure>{} : read_known_failures(o.known_failures);
    for (const GradCase &c : grad_cases())
        for (tf::DType dtype : c.dtypes) {
            const std::string id = c.op + " " + dtype_text(dtype) + " " + c.name;
            if (!o.ops.empty() && std::find(o.ops.begin(), o.ops.end(), c.op) == o.ops.end()) continue;
            if (!o.dtypes.empty() && std::find(o.dtypes.begin(), o.dtypes.end(), dtype_text(dtype)) == o.dtypes.end())
                continue;
            if (!o.case_filters.empty()) {
                bool any = false;
                for (const std::string &f : o.case_filters) any |= id.find(f) != std::string::npos;
                if (!any) continue;
            }
            int64_t out_numel = 0;
            {
                // The output's size, from the reference on zeros.
                std::vector<Host> zeros;
                for (const GradInput &in : c.inputs) zeros.emplace_back(in.shape, 0.0);
                out_numel = c.ref(zeros).numel();
            }
            const Expected e = expect(c, dtype, out_numel);
            int64_t elements = out_numel;
            for (const GradInput &in : c.inputs) elements += count(in.shape);
            for (const Backend &b : backends) {
                Result r;
                r.backend = b.target.name;
                r.op = c.op;
                r.case_id = id;
                r.dtype = abi_dtype(dtype);
                const auto t0 = std::chrono::steady_clock::now();
                if (b.software && o.software_max_elements >= 0 && elements > o.software_max_elements) {
                    r.status = Status::skipped;
                    r.detail = "over --software-max-elements";
                    report_result(o, r);
                    results.push_back(std::move(r));
                    continue;
                }
                try {
                    std::string why = check_case(c, dtype, e, tf::Device{b.target.name, 0});
                    r.status = why.empty() ? Status::pass : Status::fail;
                    r.detail = why;
                } catch (const tf::FallbackError &err) {
                    r.status = Status::unsupported;  // part of forward or backward is not on this backend
                    r.detail = err.what();
                } catch (const std::exception &err) {
                    r.status = Status::fail;
                    r.detail = err.what();
                }
                r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                apply_known_failures(known, r);
                report_result(o, r);
                results.push_back(std::move(r));
            }
        }
    int stale = 0;
    for (const KnownFailure &k : known)
        if (k.failed == 0 && k.passed > 0) {
            std::printf("FAIL  known failure now passes (%d case(s)); remove it from %s: %s\n", k.passed,
                        o.known_failures.c_str(), k.line.c_str());
            ++stale;
        }
    return stale;
}

}  // namespace conform
