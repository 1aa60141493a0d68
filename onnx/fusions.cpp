// Load-time rewrites of the folded graph: patterns that exporters write as several ONNX nodes
// run as one tinyfin op (or fewer passes over memory). docs/onnx.md ("Fusions at load") lists
// them with their exact conditions. Every rewrite keeps the graph's semantics: a pattern matches
// only when its intermediate values have no other consumer and are not graph outputs, its
// weights and constants are constants a feed cannot override, and a condition that depends on
// the shapes fed at run time is checked by the fused kernel, which then computes the original
// nodes' ops in their order.
#include <cmath>
#include <initializer_list>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;
constexpr std::size_t none = static_cast<std::size_t>(-1);

// ---- Fused kernels ---------------------------------------------------------------------

// FusedGelu(x): the exact (erf) GELU, x * 0.5 * (1 + erf(x / sqrt(2))), or with attribute
// approximate 1 the tanh form, x * 0.5 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Attribute rank: the
// largest rank of the pattern's constants (the pattern's output has at least that rank).
std::vector<Value> fused_gelu(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    Tensor y = gelu(x, ctx.attr_int("approximate", 0) != 0);
    const int64_t rank = ctx.attr_int("rank", 0);
    if (y.rank() < rank) {
        Shape shape(static_cast<std::size_t>(rank - y.rank()), 1);
        shape.insert(shape.end(), y.shape().begin(), y.shape().end());
        y = y.reshape(shape);
    }
    return {make(y, ctx.input(0).type)};
}

// a's shape once broadcast against b is b's shape (b does not grow).
bool broadcasts_into(const Shape &a, const Shape &b) {
    if (a.size() > b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const int64_t da = a[a.size() - 1 - i], db = b[b.size() - 1 - i];
        if (da != 1 && da != db) return false;
    }
    return true;
}

// FusedAttention(q, kT, v, scale, mask, fill): MatMul(q, kT), then Div or Mul by the scalar
// `scale` (attribute scale_op: "Div", "Mul" or "" for none), then Add `mask` or Where(mask,
// fill, .) / Where(mask, ., fill) with fill = -inf (attribute mask_op: "Add", "WhereFill",
// "WhereKeep" or ""), Softmax on the last axis, MatMul by v. One scaled_dot_product_attention
// when the shapes fed allow it and there are enough query rows; otherwise the original ops in
// order.
constexpr int64_t min_query_rows = 16;

std::vector<Value> fused_attention(Ctx &ctx) {
    const Tensor &q = ctx.tensor(0), &kt = ctx.tensor(1), &v = ctx.tensor(2);
    const std::string scale_op = ctx.attr_string("scale_op", ""), mask_op = ctx.attr_string("mask_op", "");
    const ElementType type = ctx.input(0).type;
    const bool same = is_float(type) && ctx.input(1).type == type && ctx.input(2).type == type;
    const int64_t r = q.rank();
    // Under 16 query rows (a decode step) the separate ops are faster on cpu: matmul's
    // matrix-vector path beats the attention kernel's per-head GEMMs (docs/performance.md).
    bool fast = same && r >= 2 && kt.rank() == r && v.rank() == r && kt.size(-2) == q.size(-1) &&
                v.size(-2) == kt.size(-1) && q.size(-2) >= min_query_rows;
    Shape score;
    if (fast) {
        for (int64_t i = 0; i < r - 2 && fast; ++i) {
            const int64_t a = q.size(i), b = kt.size(i), c = v.size(i);
            const int64_t m = std::max({a, b, c});
            fast = (a == 1 || a == m) && (b == 1 || b == m) && (c == 1 || c == m);
            score.push_back(m);
        }
        score.push_back(q.size(-2));
        score.push_back(kt.size(-1));
    }
    double factor = 1.0;
    if (fast && !scale_op.empty()) {
        const Tensor &s = ctx.tensor(3);
        fast = s.numel() == 1 && ctx.input(3).type == type && s.rank() <= r;
        if (fast) {
            const double c = s.item<float>();
            factor = scale_op == "Div" ? 1.0 / c : c;
            fast = std::isfinite(factor) && factor > 0;
        }
    }
    Tensor mask;
    if (fast && !mask_op.empty()) {
        const Tensor &m = ctx.tensor(4);
        fast = broadcasts_into(m.shape(), score);
        if (fast && mask_op == "Add") {
            fast = ctx.input(4).type == type;
            mask = m;
        } else if (fast) {
            fast = ctx.input(4).type == ElementType::boolean && ctx.tensor(5).numel() == 1 &&
                   ctx.input(5).type == type && ctx.tensor(5).rank() <= r;
            if (fast) {
                const Tensor inf = scalar(-std::numeric_limits<double>::infinity(), q.dtype(), q.device());
                const Tensor zero = scalar(0, q.dtype(), q.device());
                mask = mask_op == "WhereFill" ? where(m, inf, zero) : where(m, zero, inf);
            }
        }
    }
    if (fast) return {make(scaled_dot_product_attention(q, kt.transpose(-1, -2), v, mask, false, factor), type)};
    // The original nodes' ops, in order (the ONNX kernels compute exactly these).
    Tensor s = matmul(q, kt);
    if (scale_op == "Div") s = div(s, ctx.tensor(3));
    if (scale_op == "Mul") s = mul(s, ctx.tensor(3));
    if (mask_op == "Add") s = add(s, ctx.tensor(4));
    if (mask_op == "WhereFill") s = where(ctx.tensor(4), ctx.tensor(5), s);
    if (mask_op == "WhereKeep") s = where(ctx.tensor(4), s, ctx.tensor(5));
    return {make(matmul(softmax(s, -1), v), type)};
}

// FusedRmsNorm(x, weight, two, eps, one): Pow(x, two) -> ReduceMean(last axis, keepdims) -> Add
// eps -> Sqrt -> then x * (one / s) (attribute form "DivOne"), x / s ("Div") or x *
// Reciprocal(s) ("Reciprocal"), then times weight when present. tinyfin's rms_norm when two is 2,
// the scalars are scalars of x's type and the weight a vector of x's last axis; otherwise the
// original ops in order.
std::vector<Value> fused_rms_norm(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const ElementType type = ctx.input(0).type;
    const std::string form = ctx.attr_string("form", "");
    const bool weighted = ctx.has_input(1);
    auto scalar_ok = [&](std::size_t i) {
        return ctx.has_input(i) && ctx.input(i).type == type && ctx.tensor(i).numel() == 1 &&
               ctx.tensor(i).rank() <= x.rank();
    };
    bool fast = is_float(type) && x.rank() >= 1 && scalar_ok(2) && scalar_ok(3) && (form != "DivOne" || scalar_ok(4));
    fast = fast && ctx.tensor(2).item<float>() == 2.0f && (form != "DivOne" || ctx.tensor(4).item<float>() == 1.0f);
    if (fast && weighted)
        fast = ctx.input(1).type == type && ctx.tensor(1).rank() == 1 && ctx.tensor(1).size(0) == x.size(-1);
    if (fast) {
        const double eps = ctx.tensor(3).item<float>();
        return {make(rms_norm(x, 1, weighted ? ctx.tensor(1) : Tensor(), eps), type)};
    }
    // The original nodes' ops, in order.
    Tensor squares = pow(x, ctx.tensor(2).to(x.dtype()));
    if (squares.rank() > 0) squares = mean(squares, {squares.rank() - 1}, true);
    const Tensor s = sqrt(add(squares, ctx.tensor(3)));
    Tensor y = form == "Div" ? div(x, s) : mul(x, form == "DivOne" ? div(ctx.tensor(4), s) : div(1.0, s));
    if (weighted) y = mul(ctx.tensor(1), y);
    return {make(y, type)};
}

// FusedLayerNorm(x, weight, bias, eps, two): ReduceMean(x, last axis) -> Sub from x -> its
// square (Pow by two, attribute square "Pow", or Mul by itself, "Mul") -> ReduceMean (last axis)
// -> Add eps -> Sqrt -> the difference Div by it -> [Mul by weight] -> [Add bias]. tinyfin's
// layer_norm when the scalars are scalars of x's type, two is 2 and weight and bias are vectors
// of x's last axis; otherwise the original ops in order.
std::vector<Value> fused_layer_norm(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const ElementType type = ctx.input(0).type;
    const bool pow_form = ctx.attr_string("square", "") == "Pow";
    auto scalar_ok = [&](std::size_t i) {
        return ctx.has_input(i) && ctx.input(i).type == type && ctx.tensor(i).numel() == 1 &&
               ctx.tensor(i).rank() <= x.rank();
    };
    auto vector_ok = [&](std::size_t i) {
        return !ctx.has_input(i) ||
               (ctx.input(i).type == type && ctx.tensor(i).rank() == 1 && ctx.tensor(i).size(0) == x.size(-1));
    };
    bool fast = is_float(type) && x.rank() >= 1 && scalar_ok(3) && (!pow_form || scalar_ok(4));
    fast = fast && (!pow_form || ctx.tensor(4).item<float>() == 2.0f) && vector_ok(1) && vector_ok(2);
    if (fast) {
        const double eps = ctx.tensor(3).item<float>();
        return {make(layer_norm(x, 1, ctx.has_input(1) ? ctx.tensor(1) : Tensor(),
                                ctx.has_input(2) ? ctx.tensor(2) : Tensor(), eps),
                     type)};
    }
    // The original nodes' ops, in order.
    const int64_t last = x.rank() - 1;
    const Tensor centred = sub(x, mean(x, {last}, true));
    const Tensor squares = pow_form ? pow(centred, ctx.tensor(4).to(x.dtype())) : mul(centred, centred);
    Tensor y = div(centred, sqrt(add(mean(squares, {last}, true), ctx.tensor(3))));
    if (ctx.has_input(1)) y = mul(y, ctx.tensor(1));
    if (ctx.has_input(2)) y = add(y, ctx.tensor(2));
    return {make(y, type)};
}

// FusedConvActivation(x, W, [B], [Z]) with Conv's attributes and attribute activation "Relu",
// "Clip" (attributes min, max) or "": Conv, then Add Z when given, then that activation, one
// conv2d_activation where the convolution is 2-D or 1-D (the cpu backend adds the bias and Z and
// applies the activation as it stores the products).
std::vector<Value> fused_conv_activation(Ctx &ctx) {
    const std::string kind = ctx.attr_string("activation", "");
    const Conv2dActivation act = kind == "Relu"   ? Conv2dActivation::relu
                                 : kind == "Clip" ? Conv2dActivation::clip
                                                  : Conv2dActivation::none;
    return conv_with_activation(ctx, act, ctx.attr_float("min", 0), ctx.attr_float("max", 0), 3);
}

// FusedMatMulBias(x, W, bias) with attribute bias_first (the Add's operand order): MatMul(x, W),
// then Add bias. One linear(x, W^T, bias) (the matmul_bias op where the backend has it: the bias
// added as the product's tiles are stored) when x is float32 of rank >= 2, W [K, N] and bias [N]
// float32; otherwise the original ops in order. Either way the bits of MatMul then Add.
std::vector<Value> fused_matmul_bias(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0), &w = ctx.tensor(1), &bias = ctx.tensor(2);
    const ElementType type = ctx.input(0).type;
    if (!is_float(type)) ctx.unsupported("MatMul of non-float operands");
    const bool fast = x.dtype() == DType::f32 && w.dtype() == DType::f32 && bias.dtype() == DType::f32 &&
                      ctx.input(1).type == type && ctx.input(2).type == type && x.rank() >= 2 && w.rank() == 2 &&
                      bias.rank() == 1 && x.size(-1) == w.size(0) && bias.size(0) == w.size(1);
    if (fast) return {make(linear(x, w.transpose(0, 1), bias), type)};
    const Tensor y = matmul(x, w);
    return {make(ctx.attr_int("bias_first", 0) != 0 ? add(bias, y) : add(y, bias), type)};
}

const OpRow conv_activation_row{"FusedConvActivation", 1, 1, fused_conv_activation};
const OpRow matmul_bias_row{"FusedMatMulBias", 1, 1, fused_matmul_bias};
const OpRow gelu_row{"FusedGelu", 1, 1, fused_gelu};
const OpRow rms_norm_row{"FusedRmsNorm", 1, 1, fused_rms_norm};
const OpRow attention_row{"FusedAttention", 1, 1, fused_attention};
const OpRow layer_norm_row{"FusedLayerNorm", 1, 1, fused_layer_norm};

// ---- The graph as the rewrites see it ---------------------------------------------------

class Graph {
public:
    explicit Graph(FusionGraph &g) : g_(g) { index(); }

    std::vector<Step> &steps() { return g_.steps; }
    const std::vector<Step> &steps_const() const { return g_.steps; }
    Step &step(std::size_t i) { return g_.steps[i]; }

    // The live step producing name with op_type (any op when op_type is empty), or none.
    std::size_t producer(const std::string &name, const char *op_type = "") const {
        auto p = producer_.find(name);
        if (p == producer_.end() || removed_[p->second]) return none;
        if (*op_type && g_.steps[p->second].node.op_type() != op_type) return none;
        return p->second;
    }
    // name feeds exactly one input of one node and is not a graph output.
    bool single_use(const std::string &name) const {
        auto c = consumers_.find(name);
        return c != consumers_.end() && c->second.size() == 1 && !g_.outputs.count(name);
    }
    // The steps reading name, one entry per input that reads it (a step reading it twice is
    // listed twice); empty when none.
    std::vector<std::size_t> consumers(const std::string &name) const {
        auto c = consumers_.find(name);
        return c == consumers_.end() ? std::vector<std::size_t>() : c->second;
    }
    bool is_output(const std::string &name) const { return g_.outputs.count(name) != 0; }
    std::size_t only_consumer(const std::string &name, const char *op_type) const {
        if (!single_use(name)) return none;
        const std::size_t i = consumers_.at(name)[0];
        return !removed_[i] && g_.steps[i].node.op_type() == op_type ? i : none;
    }
    // A constant no feed can override, or nullptr.
    const Value *constant(const std::string &name) const {
        if (name.empty() || g_.overridable.count(name)) return nullptr;
        auto c = g_.constants.find(name);
        return c == g_.constants.end() ? nullptr : &c->second;
    }
    // A float constant of one element, its value.
    std::optional<double> scalar_of(const std::string &name) const {
        const Value *c = constant(name);
        if (c == nullptr || !is_float(c->type) || c->tensor.numel() != 1) return std::nullopt;
        return c->tensor.item<float>();
    }
    int64_t rank_of(const std::string &name) const { return constant(name)->tensor.rank(); }
    void remove(std::size_t i) { removed_[i] = true; }
    bool live(std::size_t i) const { return !removed_[i]; }
    void add_constant(const std::string &name, Value v) { g_.constants[name] = std::move(v); }
    const Device &device() const { return g_.device; }

    // Drops removed steps and reindexes.
    void commit() {
        std::vector<Step> kept;
        for (std::size_t i = 0; i < g_.steps.size(); ++i)
            if (!removed_[i]) kept.push_back(std::move(g_.steps[i]));
        g_.steps = std::move(kept);
        index();
    }

private:
    void index() {
        producer_.clear();
        consumers_.clear();
        removed_.assign(g_.steps.size(), false);
        for (std::size_t i = 0; i < g_.steps.size(); ++i) {
            for (const auto &out : g_.steps[i].node.output())
                if (!out.empty()) producer_[out] = i;
            for (const auto &in : g_.steps[i].node.input())
                if (!in.empty()) consumers_[in].push_back(i);
        }
    }

    FusionGraph &g_;
    std::unordered_map<std::string, std::size_t> producer_;
    std::unordered_map<std::string, std::vector<std::size_t>> consumers_;
    std::vector<bool> removed_;
};

const ::onnx::AttributeProto *find_attr(const ::onnx::NodeProto &node, const char *name) {
    for (const auto &a : node.attribute())
        if (a.name() == name) return &a;
    return nullptr;
}

int64_t int_attr(const ::onnx::NodeProto &node, const char *name, int64_t fallback) {
    const auto *a = find_attr(node, name);
    return a != nullptr && a->type() == ::onnx::AttributeProto::INT ? a->i() : fallback;
}

void set_attr(::onnx::NodeProto &node, const char *name, const std::string &value) {
    auto *a = node.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(value);
}

void set_attr(::onnx::NodeProto &node, const char *name, int64_t value) {
    auto *a = node.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(value);
}

// The input of a two-input node that is not `name` (none when both or neither are).
int other_input(const ::onnx::NodeProto &node, const std::string &name) {
    if (node.input_size() != 2) return -1;
    if (node.input(0) == name && node.input(1) != name) return 1;
    if (node.input(1) == name && node.input(0) != name) return 0;
    return -1;
}

bool near(double value, double want) { return std::abs(value - want) <= 1e-6 * std::abs(want); }

// Puts a node of the fused `row` in the place of step `last` (its name, output and label taken
// over; `attributes` sets the row's attributes) and removes the other matched `nodes`.
template <class SetAttributes>
void replace_with_fused(Graph &g, std::size_t last, const std::vector<std::size_t> &nodes, const OpRow &row,
                        std::initializer_list<std::string> inputs, SetAttributes attributes) {
    Step &tail = g.step(last);
    ::onnx::NodeProto fused;
    fused.set_name(tail.node.name());
    fused.set_op_type(row.op_type);
    fused.set_domain("tinyfin");
    for (const std::string &in : inputs) fused.add_input(in);
    fused.add_output(tail.node.output(0));
    attributes(fused);
    for (std::size_t n : nodes) g.remove(n);
    tail = Step{std::move(fused), 1, &row, tail.label};
}

// An optional affine step after `last`: when its output's one consumer is `op_type` with a
// constant float vector as the other operand, that operand's name goes to `operand`, `last`
// joins `nodes` and the consumer becomes `last`.
void take_constant_vector(Graph &g, const char *op_type, std::size_t &last, std::string &operand,
                          std::vector<std::size_t> &nodes) {
    const std::string &out = g.step(last).node.output(0);
    const std::size_t n = g.only_consumer(out, op_type);
    if (n == none) return;
    const int k = other_input(g.step(n).node, out);
    const std::string w = k < 0 ? "" : g.step(n).node.input(k);
    if (const Value *c = g.constant(w); c != nullptr && is_float(c->type) && c->tensor.rank() == 1) {
        operand = w;
        nodes.push_back(last);
        last = n;
    }
}

// ---- Conv + BatchNormalization ----------------------------------------------------------
// BN(Conv(x, W, b)) = Conv(x, W s, (b - mean) s + beta) with s = gamma / sqrt(var + eps) per
// output channel, computed once in float64 on the cpu and stored in W's dtype.
int64_t fold_batch_norm(Graph &g) {
    int64_t fired = 0;
    for (std::size_t i = 0; i < g.steps().size(); ++i) {
        const auto &bn = g.step(i).node;
        if (bn.op_type() != "BatchNormalization" || bn.input_size() != 5) continue;
        if (int_attr(bn, "training_mode", 0) != 0 || int_attr(bn, "spatial", 1) != 1) continue;
        int outputs = 0;
        for (const auto &o : bn.output()) outputs += o.empty() ? 0 : 1;
        if (outputs != 1 || bn.output(0).empty()) continue;
        const std::size_t c = g.producer(bn.input(0), "Conv");
        if (c == none || !g.single_use(bn.input(0))) continue;
        auto &conv = g.step(c).node;
        if (conv.input_size() < 2 || conv.output_size() != 1) continue;
        const Value *w = g.constant(conv.input(1));
        const Value *b = conv.input_size() > 2 && !conv.input(2).empty() ? g.constant(conv.input(2)) : nullptr;
        if (w == nullptr || !is_float(w->type) || w->tensor.rank() < 3) continue;
        if (conv.input_size() > 2 && !conv.input(2).empty() && b == nullptr) continue;
        const int64_t channels = w->tensor.size(0);
        const Value *p[4];
        bool ok = true;
        for (int k = 0; k < 4; ++k) {
            p[k] = g.constant(bn.input(k + 1));
            ok = ok && p[k] != nullptr && is_float(p[k]->type) && p[k]->tensor.rank() == 1 &&
                 p[k]->tensor.size(0) == channels;
        }
        if (!ok || (b != nullptr && (b->tensor.rank() != 1 || b->tensor.size(0) != channels))) continue;
        const auto *eps_attr = find_attr(bn, "epsilon");
        const double eps = eps_attr != nullptr ? eps_attr->f() : 1e-5;
        // In double on the host, stored as float (then W's dtype).
        auto host = [](const Value *v) { return v->tensor.to_vector<float>(); };
        const auto gamma = host(p[0]), beta = host(p[1]), mean = host(p[2]), var = host(p[3]);
        const auto wv = host(w);
        const auto bv = b != nullptr ? host(b) : std::vector<float>(static_cast<std::size_t>(channels), 0.0f);
        const std::size_t per = wv.size() / static_cast<std::size_t>(channels);
        std::vector<float> w_folded(wv.size()), b_folded(static_cast<std::size_t>(channels));
        for (std::size_t o = 0; o < b_folded.size(); ++o) {
            const double s = static_cast<double>(gamma[o]) / std::sqrt(static_cast<double>(var[o]) + eps);
            for (std::size_t k = 0; k < per; ++k)
                w_folded[o * per + k] = static_cast<float>(static_cast<double>(wv[o * per + k]) * s);
            b_folded[o] = static_cast<float>((static_cast<double>(bv[o]) - mean[o]) * s + beta[o]);
        }
        const DType dt = w->tensor.dtype();
        const Tensor w2 = from_vector(w_folded, w->tensor.shape(), g.device()).to(dt);
        const Tensor b2 = from_vector(b_folded, {channels}, g.device()).to(dt);
        const std::string tag = "\x1f(" + bn.output(0) + " folded)";
        g.add_constant(conv.input(1) + tag, Value{w2, w->type});
        g.add_constant(bn.input(1) + tag, Value{b2, w->type});
        conv.set_input(1, conv.input(1) + tag);
        if (conv.input_size() > 2)
            conv.set_input(2, bn.input(1) + tag);
        else
            conv.add_input(bn.input(1) + tag);
        conv.set_output(0, bn.output(0));
        g.remove(i);
        ++fired;
    }
    g.commit();
    return fired;
}

// ---- Conv [+ Add] [+ Relu / Clip] --------------------------------------------------------
// Conv(x, W, [B]) whose output feeds only an Add (of another value z, either operand order),
// a Relu, or a Clip with constant scalar bounds (not NaN; inputs from version 11, attributes
// before; either may be absent), or an Add whose output feeds only a Relu or such a Clip: one
// node that adds z and runs the activation in the convolution's store (resnet's residual
// blocks: Conv, BatchNormalization, Add, Relu). Runs after conv_batchnorm, so the folded Conv
// matches.

// The Relu or Clip at step a as an activation: "Relu" or "Clip" with its bounds; nullopt when the
// step is neither or its bounds are not constant scalars.
struct Activation {
    std::string kind;
    double lo, hi;
};
std::optional<Activation> activation_of(const Graph &g, std::size_t a) {
    const double inf = std::numeric_limits<double>::infinity();
    const Step &act = g.steps_const()[a];
    const auto &an = act.node;
    if (an.output_size() != 1 || an.input_size() < 1) return std::nullopt;
    if (an.op_type() == "Relu" && an.input_size() == 1) return Activation{"Relu", 0, 0};
    if (an.op_type() != "Clip") return std::nullopt;
    double lo = -inf, hi = inf;
    if (act.version < 11) {
        if (an.input_size() != 1) return std::nullopt;
        if (const auto *mn = find_attr(an, "min")) lo = mn->f();
        if (const auto *mx = find_attr(an, "max")) hi = mx->f();
    } else {
        // A bound is absent when its input is missing or named "".
        for (int k = 1; k < an.input_size(); ++k) {
            if (an.input(k).empty()) continue;
            const auto v = g.scalar_of(an.input(k));
            if (!v) return std::nullopt;
            (k == 1 ? lo : hi) = *v;
        }
    }
    if (std::isnan(lo) || std::isnan(hi)) return std::nullopt;
    return Activation{"Clip", lo, hi};
}

int64_t fuse_conv_activation(Graph &g) {
    int64_t fired = 0;
    for (std::size_t c = 0; c < g.steps().size(); ++c) {
        const auto &conv = g.step(c).node;
        if (conv.op_type() != "Conv" || conv.output_size() != 1 || conv.input_size() < 2) continue;
        const std::string &out = conv.output(0);
        std::size_t tail = none;
        std::vector<std::size_t> nodes{c};
        std::string residual;
        std::optional<Activation> act;
        if (std::size_t a = g.only_consumer(out, "Add"); a != none) {
            const int k = other_input(g.step(a).node, out);
            // Before version 7 Add broadcasts by its attributes, not numpy's rule.
            if (k < 0 || g.step(a).node.output_size() != 1 || g.step(a).version < 7) continue;
            residual = g.step(a).node.input(k);
            tail = a;
            const std::string &sum = g.step(a).node.output(0);
            if (g.single_use(sum) && g.live(g.consumers(sum)[0])) {
                const std::size_t next = g.consumers(sum)[0];
                if (act = activation_of(g, next); act) {
                    nodes.push_back(a);
                    tail = next;
                }
            }
        } else if (g.single_use(out) && g.live(g.consumers(out)[0])) {
            tail = g.consumers(out)[0];
            act = activation_of(g, tail);
            if (!act) continue;
        } else {
            continue;
        }
        std::vector<std::string> inputs(conv.input().begin(), conv.input().end());
        const std::string x = inputs[0], w = inputs[1], b = inputs.size() > 2 ? inputs[2] : "";
        replace_with_fused(g, tail, nodes, conv_activation_row, {x, w, b, residual}, [&](::onnx::NodeProto &fused) {
            for (const auto &attr : conv.attribute()) *fused.add_attribute() = attr;
            set_attr(fused, "activation", act ? act->kind : std::string());
            auto *mn = fused.add_attribute();
            mn->set_name("min");
            mn->set_type(::onnx::AttributeProto::FLOAT);
            mn->set_f(static_cast<float>(act ? act->lo : 0));
            auto *mx = fused.add_attribute();
            mx->set_name("max");
            mx->set_type(::onnx::AttributeProto::FLOAT);
            mx->set_f(static_cast<float>(act ? act->hi : 0));
        });
        ++fired;
    }
    g.commit();
    return fired;
}

// ---- GELU (erf and tanh forms) -----------------------------------------------------------
// x -> Div(x, sqrt 2) | Mul(x, 1/sqrt 2) -> Erf, or [Pow(x, 3) | Mul(Mul(x, x), x)] -> Mul
// 0.044715 -> Add x -> Mul sqrt(2/pi) -> Tanh; then Add 1, then either Mul(x, .) -> Mul 0.5 (torch's export) or
// Mul(Mul(x, 0.5), .) (HF's).
int64_t fuse_gelu(Graph &g) {
    int64_t fired = 0;
    for (std::size_t e = 0; e < g.steps().size(); ++e) {
        const auto &erf_node = g.step(e).node;
        const bool approximate = erf_node.op_type() == "Tanh";
        if ((erf_node.op_type() != "Erf" && !approximate) || erf_node.input_size() != 1) continue;
        std::vector<std::size_t> nodes{e};
        std::vector<std::string> consts;
        std::string x;
        // The scalar operand of a two-input node of op_type producing `value` when it is near
        // `want` (its index), and the other operand.
        auto scaled_by = [&](const std::string &value, const char *op_type, double want, std::size_t &at,
                             std::string &other) {
            at = g.producer(value, op_type);
            if (at == none || !g.single_use(value) || g.step(at).node.input_size() != 2) return false;
            const auto &n = g.step(at).node;
            for (int k = 0; k < 2; ++k)
                if (auto c = g.scalar_of(n.input(k));
                    c && near(*c, want) && (k == 1 || std::string(op_type) == "Mul")) {
                    other = n.input(1 - k);
                    consts.push_back(n.input(k));
                    return !other.empty();
                }
            return false;
        };
        if (approximate) {
            // tanh(sqrt(2/pi) (x + 0.044715 x^3))
            const double pi = 3.14159265358979323846;
            std::size_t m = none, add = none, cube_mul = none, pw = none;
            std::vector<std::size_t> cube_nodes;
            std::string inner, cubes, cube;
            if (!scaled_by(erf_node.input(0), "Mul", std::sqrt(2.0 / pi), m, inner)) continue;
            add = g.producer(inner, "Add");
            if (add == none || !g.single_use(inner) || g.step(add).node.input_size() != 2) continue;
            bool matched = false;
            for (int k = 0; k < 2 && !matched; ++k) {
                const std::string &candidate = g.step(add).node.input(k);
                const std::size_t before = consts.size();
                const std::string &other = g.step(add).node.input(1 - k);
                if (scaled_by(candidate, "Mul", 0.044715, cube_mul, cube) && g.single_use(cube)) {
                    if ((pw = g.producer(cube, "Pow")) != none && g.step(pw).node.input_size() == 2 &&
                        g.scalar_of(g.step(pw).node.input(1)) == 3.0 && g.step(pw).node.input(0) == other) {
                        // Pow(x, 3)
                        consts.push_back(g.step(pw).node.input(1));
                        cube_nodes = {pw};
                        matched = true;
                    } else if (const std::size_t m3 = g.producer(cube, "Mul");
                               m3 != none && g.step(m3).node.input_size() == 2) {
                        // Mul(Mul(x, x), x), either operand order of the outer Mul
                        const auto &n = g.step(m3).node;
                        for (int j = 0; j < 2 && !matched; ++j) {
                            const std::string &square = n.input(1 - j);
                            const std::size_t sq = n.input(j) == other ? g.producer(square, "Mul") : none;
                            if (sq != none && g.single_use(square) && g.step(sq).node.input_size() == 2 &&
                                g.step(sq).node.input(0) == other && g.step(sq).node.input(1) == other) {
                                cube_nodes = {m3, sq};
                                matched = true;
                            }
                        }
                    }
                }
                if (matched)
                    x = other;
                else
                    consts.resize(before);
            }
            if (!matched) continue;
            nodes.insert(nodes.end(), {m, add, cube_mul});
            nodes.insert(nodes.end(), cube_nodes.begin(), cube_nodes.end());
        } else {
            // erf(x / sqrt 2) or erf(x * (1 / sqrt 2))
            std::size_t d = none;
            if (!scaled_by(erf_node.input(0), "Div", std::sqrt(2.0), d, x) &&
                !scaled_by(erf_node.input(0), "Mul", std::sqrt(0.5), d, x))
                continue;
            nodes.push_back(d);
        }
        // + 1
        const std::size_t a = g.only_consumer(erf_node.output(0), "Add");
        if (a == none) continue;
        const int one = other_input(g.step(a).node, erf_node.output(0));
        if (one < 0 || g.scalar_of(g.step(a).node.input(one)) != 1.0) continue;
        consts.push_back(g.step(a).node.input(one));
        nodes.push_back(a);
        const std::string &sum = g.step(a).node.output(0);
        const std::size_t m1 = g.only_consumer(sum, "Mul");
        if (m1 == none) continue;
        const int other = other_input(g.step(m1).node, sum);
        if (other < 0) continue;
        const std::string &factor = g.step(m1).node.input(other);
        std::size_t last = none;
        if (factor == x) {
            // torch: Mul(x, 1 + erf) -> Mul(., 0.5)
            const std::string &prod = g.step(m1).node.output(0);
            const std::size_t m2 = g.only_consumer(prod, "Mul");
            if (m2 == none) continue;
            const int half = other_input(g.step(m2).node, prod);
            if (half < 0 || g.scalar_of(g.step(m2).node.input(half)) != 0.5) continue;
            consts.push_back(g.step(m2).node.input(half));
            nodes.push_back(m1);
            last = m2;
        } else {
            // HF: Mul(Mul(x, 0.5), 1 + erf)
            const std::size_t h = g.producer(factor, "Mul");
            if (h == none || !g.single_use(factor)) continue;
            const int half = other_input(g.step(h).node, x);
            if (half < 0 || g.scalar_of(g.step(h).node.input(half)) != 0.5) continue;
            consts.push_back(g.step(h).node.input(half));
            nodes.push_back(h);
            last = m1;
        }
        int64_t rank = 0;
        for (const auto &c : consts) rank = std::max(rank, g.rank_of(c));
        replace_with_fused(g, last, nodes, gelu_row, {x}, [&](::onnx::NodeProto &fused) {
            set_attr(fused, "rank", rank);
            set_attr(fused, "approximate", int64_t{approximate ? 1 : 0});
        });
        ++fired;
    }
    g.commit();
    return fired;
}

// ---- RMSNorm ------------------------------------------------------------------------------
// Pow(x, 2) -> ReduceMean(axes [-1], keepdims 1) -> Add eps -> Sqrt -> [Div(1, .) -> Mul(x, .) |
// Div(x, .) | Reciprocal -> Mul(x, .)] -> [Mul by a constant vector], either operand order.
int64_t fuse_rms_norm(Graph &g) {
    int64_t fired = 0;
    for (std::size_t r = 0; r < g.steps().size(); ++r) {
        const Step &reduce = g.step(r);
        const auto &rn = reduce.node;
        if (rn.op_type() != "ReduceMean" || rn.input_size() != 1 || reduce.version >= 18) continue;
        const auto *axes = find_attr(rn, "axes");
        if (axes == nullptr || axes->ints_size() != 1 || axes->ints(0) != -1 || int_attr(rn, "keepdims", 1) != 1)
            continue;
        std::vector<std::size_t> nodes{r};
        const std::size_t p = g.producer(rn.input(0), "Pow");
        if (p == none || !g.single_use(rn.input(0)) || g.step(p).node.input_size() != 2) continue;
        const std::string x = g.step(p).node.input(0), two = g.step(p).node.input(1);
        if (g.scalar_of(two) != 2.0) continue;
        nodes.push_back(p);
        const std::size_t a = g.only_consumer(rn.output(0), "Add");
        if (a == none) continue;
        const int ei = other_input(g.step(a).node, rn.output(0));
        if (ei < 0 || !g.scalar_of(g.step(a).node.input(ei))) continue;
        const std::string eps = g.step(a).node.input(ei);
        nodes.push_back(a);
        const std::size_t sq = g.only_consumer(g.step(a).node.output(0), "Sqrt");
        if (sq == none) continue;
        nodes.push_back(sq);
        const std::string &root = g.step(sq).node.output(0);
        std::string form, one;
        std::size_t normed = none;  // the node whose output is x normalised
        if (std::size_t d = g.only_consumer(root, "Div"); d != none) {
            const auto &n = g.step(d).node;
            if (n.input_size() != 2 || n.input(1) != root) continue;
            if (n.input(0) == x) {
                form = "Div";
                normed = d;
            } else if (g.scalar_of(n.input(0)) == 1.0) {
                form = "DivOne";
                one = n.input(0);
                nodes.push_back(d);
                normed = g.only_consumer(n.output(0), "Mul");
                if (normed == none || other_input(g.step(normed).node, n.output(0)) < 0 ||
                    g.step(normed).node.input(other_input(g.step(normed).node, n.output(0))) != x)
                    continue;
            } else {
                continue;
            }
        } else if (std::size_t rc = g.only_consumer(root, "Reciprocal"); rc != none) {
            form = "Reciprocal";
            nodes.push_back(rc);
            const std::string &inv = g.step(rc).node.output(0);
            normed = g.only_consumer(inv, "Mul");
            if (normed == none || other_input(g.step(normed).node, inv) < 0 ||
                g.step(normed).node.input(other_input(g.step(normed).node, inv)) != x)
                continue;
        } else {
            continue;
        }
        // An optional weight: Mul by a constant vector.
        std::size_t last = normed;
        std::string weight;
        take_constant_vector(g, "Mul", last, weight, nodes);
        replace_with_fused(g, last, nodes, rms_norm_row, {x, weight, two, eps, one},
                           [&](::onnx::NodeProto &fused) { set_attr(fused, "form", form); });
        ++fired;
    }
    g.commit();
    return fired;
}

// ---- LayerNorm written out --------------------------------------------------------------
// ReduceMean(x, axes [-1], keepdims 1) = mu -> Sub(x, mu) = d -> Pow(d, 2) | Mul(d, d) ->
// ReduceMean(axes [-1], keepdims 1) -> Add eps -> Sqrt -> Div(d, .) -> [Mul by a constant vector]
// -> [Add a constant vector], either operand order of Add eps, the Mul and the Add: what
// exporters write for a LayerNorm before opset 17 (HF's and TF's). d feeds exactly the square
// and the Div; every other intermediate has one consumer.
bool mean_over_last_axis(const Step &s) {
    const auto &n = s.node;
    if (n.op_type() != "ReduceMean" || n.input_size() != 1 || n.output_size() != 1 || s.version >= 18) return false;
    const auto *axes = find_attr(n, "axes");
    return axes != nullptr && axes->ints_size() == 1 && axes->ints(0) == -1 && int_attr(n, "keepdims", 1) == 1;
}

int64_t fuse_layer_norm(Graph &g) {
    int64_t fired = 0;
    for (std::size_t si = 0; si < g.steps().size(); ++si) {
        const auto &sub = g.step(si).node;
        if (sub.op_type() != "Sub" || sub.input_size() != 2 || sub.output_size() != 1) continue;
        const std::string x = sub.input(0), mu = sub.input(1), d = sub.output(0);
        const std::size_t m1 = g.producer(mu, "ReduceMean");
        if (m1 == none || !g.single_use(mu) || !mean_over_last_axis(g.step(m1)) || g.step(m1).node.input(0) != x ||
            x == mu)
            continue;
        std::vector<std::size_t> nodes{m1, si};
        // d's readers: the square (once as Pow's base or twice as Mul's operands) and the Div.
        if (g.is_output(d)) continue;
        std::size_t square = none, divide = none;
        std::string two, square_form;
        bool ok = true;
        for (std::size_t c : g.consumers(d)) {
            const auto &n = g.step(c).node;
            if (n.op_type() == "Pow" && square == none && n.input_size() == 2 && n.input(0) == d &&
                g.scalar_of(n.input(1)) == 2.0) {
                square = c;
                two = n.input(1);
                square_form = "Pow";
            } else if (n.op_type() == "Mul" && (square == none || square == c) && n.input_size() == 2 &&
                       n.input(0) == d && n.input(1) == d) {
                square = c;
                square_form = "Mul";
            } else if (n.op_type() == "Div" && divide == none && n.input_size() == 2 && n.input(0) == d &&
                       n.input(1) != d) {
                divide = c;
            } else {
                ok = false;
            }
        }
        if (!ok || square == none || divide == none) continue;
        nodes.push_back(square);
        const std::size_t m2 = g.only_consumer(g.step(square).node.output(0), "ReduceMean");
        if (m2 == none || !mean_over_last_axis(g.step(m2))) continue;
        nodes.push_back(m2);
        const std::size_t a = g.only_consumer(g.step(m2).node.output(0), "Add");
        if (a == none) continue;
        const int ei = other_input(g.step(a).node, g.step(m2).node.output(0));
        if (ei < 0 || !g.scalar_of(g.step(a).node.input(ei))) continue;
        const std::string eps = g.step(a).node.input(ei);
        nodes.push_back(a);
        const std::size_t sq = g.only_consumer(g.step(a).node.output(0), "Sqrt");
        if (sq == none || g.step(divide).node.input(1) != g.step(sq).node.output(0) ||
            !g.single_use(g.step(sq).node.output(0)))
            continue;
        nodes.push_back(sq);
        // Optional Mul by the weight, then optional Add of the bias: constant vectors.
        std::size_t last = divide;
        std::string weight, bias;
        take_constant_vector(g, "Mul", last, weight, nodes);
        take_constant_vector(g, "Add", last, bias, nodes);
        replace_with_fused(g, last, nodes, layer_norm_row, {x, weight, bias, eps, two},
                           [&](::onnx::NodeProto &fused) { set_attr(fused, "square", square_form); });
        ++fired;
    }
    g.commit();
    return fired;
}

// ---- Attention ---------------------------------------------------------------------------
// MatMul(q, kT) -> [Div | Mul by a scalar] -> [Add mask | Where(cond, -inf, .) | Where(cond, .,
// -inf)] -> Softmax(last axis) -> MatMul(., v).
int64_t fuse_attention(Graph &g) {
    int64_t fired = 0;
    const double neg_inf = -std::numeric_limits<double>::infinity();
    for (std::size_t sm = 0; sm < g.steps().size(); ++sm) {
        const Step &soft = g.step(sm);
        if (soft.node.op_type() != "Softmax" || soft.node.input_size() != 1 || soft.node.output_size() != 1) continue;
        if (int_attr(soft.node, "axis", soft.version >= 13 ? -1 : 1) != -1) continue;
        std::vector<std::size_t> nodes{sm};
        const std::string &scores = soft.node.input(0);
        std::string mask, fill, mask_op;
        if (!g.single_use(scores)) continue;
        // The scaled products: [Div | Mul by a scalar] over MatMul(q, kT), each used once.
        struct Products {
            std::string scale, scale_op;
            std::vector<std::size_t> nodes;  // the scale's (when any), then the MatMul
        };
        auto products = [&](const std::string &value) -> std::optional<Products> {
            Products p;
            std::string at = value;
            if (std::size_t d = g.producer(at, "Div"); d != none) {
                const auto &n = g.step(d).node;
                if (n.input_size() != 2 || !g.scalar_of(n.input(1))) return std::nullopt;
                p = {n.input(1), "Div", {d}};
                at = n.input(0);
            } else if (std::size_t m = g.producer(at, "Mul"); m != none) {
                const auto &n = g.step(m).node;
                int ci = -1;
                for (int k = 0; k < 2 && n.input_size() == 2; ++k)
                    if (g.scalar_of(n.input(k)) && g.producer(n.input(1 - k), "MatMul") != none) ci = k;
                if (ci < 0) return std::nullopt;
                p = {n.input(ci), "Mul", {m}};
                at = n.input(1 - ci);
            }
            if (!p.nodes.empty() && !g.single_use(at)) return std::nullopt;
            const std::size_t qk = g.producer(at, "MatMul");
            if (qk == none || g.step(qk).node.input_size() != 2) return std::nullopt;
            p.nodes.push_back(qk);
            return p;
        };
        std::optional<Products> found;
        if (std::size_t a = g.producer(scores, "Add"); a != none) {
            // The operand that is the scaled products; the other is the mask (exactly one must be).
            const auto &n = g.step(a).node;
            if (n.input_size() != 2 || n.input(0) == n.input(1)) continue;
            auto first = products(n.input(0)), second = products(n.input(1));
            if (first.has_value() == second.has_value()) continue;
            const int si = first ? 0 : 1;
            found = first ? first : second;
            if (!g.single_use(n.input(si))) continue;
            mask = n.input(1 - si);
            mask_op = "Add";
            nodes.push_back(a);
        } else if (std::size_t w = g.producer(scores, "Where"); w != none) {
            const auto &n = g.step(w).node;
            if (n.input_size() != 3) continue;
            int si = -1;
            if (g.scalar_of(n.input(1)) == neg_inf) {
                mask_op = "WhereFill";
                si = 2;
            } else if (g.scalar_of(n.input(2)) == neg_inf) {
                mask_op = "WhereKeep";
                si = 1;
            } else {
                continue;
            }
            fill = n.input(3 - si);
            mask = n.input(0);
            if (mask == n.input(si) || !g.single_use(n.input(si))) continue;
            found = products(n.input(si));
            nodes.push_back(w);
        } else {
            found = products(scores);
        }
        if (!found) continue;
        const std::string scale = found->scale, scale_op = found->scale_op;
        const std::size_t qk = found->nodes.back();
        nodes.insert(nodes.end(), found->nodes.begin(), found->nodes.end());
        const std::size_t pv = g.only_consumer(soft.node.output(0), "MatMul");
        if (pv == none || g.step(pv).node.input(0) != soft.node.output(0)) continue;
        const std::string v = g.step(pv).node.input(1);
        if (v == soft.node.output(0)) continue;
        replace_with_fused(g, pv, nodes, attention_row,
                           {g.step(qk).node.input(0), g.step(qk).node.input(1), v, scale, mask, fill},
                           [&](::onnx::NodeProto &fused) {
                               set_attr(fused, "scale_op", scale_op);
                               set_attr(fused, "mask_op", mask_op);
                           });
        ++fired;
    }
    g.commit();
    return fired;
}

// ---- MatMul + Add(bias) -----------------------------------------------------------------
// MatMul(x, W) with W a float constant matrix [K, N], whose output feeds only an Add (version 7
// on: numpy broadcasting) whose other operand is a float constant vector [N] of W's type: one
// node that adds the bias as the product is stored (a linear layer as torch exports it at rank 3;
// Gemm's C is added the same way by the Gemm kernel, ops_nn.cpp).
int64_t fuse_matmul_bias(Graph &g) {
    int64_t fired = 0;
    for (std::size_t m = 0; m < g.steps().size(); ++m) {
        const auto &mm = g.step(m).node;
        if (mm.op_type() != "MatMul" || mm.input_size() != 2 || mm.output_size() != 1) continue;
        const Value *w = g.constant(mm.input(1));
        if (w == nullptr || !is_float(w->type) || w->tensor.rank() != 2) continue;
        const std::string &out = mm.output(0);
        const std::size_t a = g.only_consumer(out, "Add");
        if (a == none || g.step(a).version < 7 || g.step(a).node.output_size() != 1) continue;
        const int k = other_input(g.step(a).node, out);
        if (k < 0) continue;
        const std::string bias = g.step(a).node.input(k);
        const Value *b = g.constant(bias);
        if (b == nullptr || b->type != w->type || b->tensor.rank() != 1 || b->tensor.size(0) != w->tensor.size(1))
            continue;
        const std::string x = mm.input(0), weight = mm.input(1);
        replace_with_fused(g, a, {m}, matmul_bias_row, {x, weight, bias},
                           [&](::onnx::NodeProto &fused) { set_attr(fused, "bias_first", int64_t{k == 0}); });
        ++fired;
    }
    g.commit();
    return fired;
}

}  // namespace

std::vector<std::pair<std::string, int64_t>> fuse(FusionGraph graph) {
    std::vector<std::pair<std::string, int64_t>> fired;
    // TINYFIN_ONNX_FUSE: unset or 1, every fusion; 0, none; else a comma-separated list of the
    // fusions to run (benchmarks of one fusion at a time).
    const char *env = std::getenv("TINYFIN_ONNX_FUSE");
    const std::string chosen = env != nullptr && std::strcmp(env, "1") != 0 ? "," + std::string(env) + "," : "";
    if (chosen == ",0,") return fired;
    NoGradGuard no_grad;
    Graph g(graph);
    const std::pair<const char *, int64_t (*)(Graph &)> passes[] = {
        {"conv_batchnorm", fold_batch_norm},
        // After conv_batchnorm: Conv -> BatchNormalization -> Relu is then Conv -> Relu.
        {"conv_activation", fuse_conv_activation},
        {"gelu", fuse_gelu},
        // Before rms_norm: a LayerNorm's tail, the RMS of x - mean(x), is also an RMSNorm's pattern.
        {"layer_norm", fuse_layer_norm},
        {"rms_norm", fuse_rms_norm},
        {"attention", fuse_attention},
        // Last: attention's pattern starts at a MatMul of two computed values, never this one's.
        {"matmul_bias", fuse_matmul_bias},
    };
    for (const auto &[name, pass] : passes) {
        if (!chosen.empty() && chosen.find("," + std::string(name) + ",") == std::string::npos) continue;
        if (const int64_t n = pass(g); n > 0) fired.emplace_back(name, n);
    }
    return fired;
}

}  // namespace tinyfin::onnx::detail
