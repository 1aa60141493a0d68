// RNN, GRU and LSTM (ONNX's recurrent layers) composed of tinyfin ops on the session's device: the
// input projection X W^T (+ both biases) for every time step of a direction is one matmul; each
// step then adds only the recurrent product H R^T and the gates' elementwise ops. Weights are read
// as the node's inputs (constants uploaded at load), transposed once per node run.
#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;

enum class Cell { rnn, gru, lstm };

// Gates per cell (rows of W and R per direction in units of hidden_size) and activations per direction.
int gates_of(Cell cell) { return cell == Cell::rnn ? 1 : cell == Cell::gru ? 3 : 4; }
int activations_of(Cell cell) { return cell == Cell::rnn ? 1 : cell == Cell::gru ? 2 : 3; }

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

// An activation of ONNX's recurrent ops: its name (lowercase) and alpha/beta.
struct Activation {
    std::string name;
    double alpha = 0, beta = 0;
};

// How many of alpha/beta an activation reads, and their defaults (those of the ONNX ops of the same
// names); nullopt for a name ONNX does not list.
struct ActivationSpec {
    const char *name;
    int n_params;  // 0: none, 1: alpha, 2: alpha and beta
    double alpha, beta;
};
constexpr ActivationSpec k_activations[] = {
    {"relu", 0, 0, 0},           {"tanh", 0, 0, 0},
    {"sigmoid", 0, 0, 0},        {"affine", 2, 1.0, 0.0},
    {"leakyrelu", 1, 0.01, 0},   {"thresholdedrelu", 1, 1.0, 0},
    {"scaledtanh", 2, 1.0, 1.0}, {"hardsigmoid", 2, 0.2, 0.5},
    {"elu", 1, 1.0, 0},          {"softsign", 0, 0, 0},
    {"softplus", 0, 0, 0},
};

const ActivationSpec *activation_spec(const std::string &name) {
    for (const auto &s : k_activations)
        if (lower(name) == s.name) return &s;
    return nullptr;
}

struct Config {
    Cell cell;
    int64_t hidden = 0;
    int directions = 1;
    bool reverse_only = false;  // direction == "reverse"
    int layout = 0;
    double clip = 0;  // 0: none
    bool linear_before_reset = false;
    bool input_forget = false;
    std::vector<Activation> activations;  // activations_of(cell) per direction
};

// The attributes, checked (a ModelError naming the node and the attribute for a bad one).
Config read_config(const Ctx &ctx, Cell cell) {
    Config c;
    c.cell = cell;
    c.hidden = ctx.attr_int("hidden_size", 0);
    if (!ctx.has_attr("hidden_size") || c.hidden <= 0) ctx.invalid("attribute hidden_size must be a positive int");
    const std::string direction = ctx.attr_string("direction", "forward");
    if (direction == "bidirectional") {
        c.directions = 2;
    } else if (direction == "reverse") {
        c.reverse_only = true;
    } else if (direction != "forward") {
        ctx.invalid("attribute direction is '" + direction + "'; it must be forward, reverse or bidirectional");
    }
    c.layout = static_cast<int>(ctx.attr_int("layout", 0));
    if (c.layout != 0 && c.layout != 1) ctx.invalid("attribute layout must be 0 or 1");
    if (c.layout != 0 && ctx.version < 14) ctx.invalid("attribute layout exists from version 14 on");
    c.clip = ctx.attr_float("clip", 0);
    if (ctx.has_attr("clip") && !(c.clip > 0)) ctx.invalid("attribute clip must be positive");
    c.linear_before_reset = ctx.attr_int("linear_before_reset", 0) != 0;
    c.input_forget = ctx.attr_int("input_forget", 0) != 0;
    if (cell != Cell::lstm && ctx.has_attr("input_forget")) ctx.invalid("attribute input_forget is LSTM's only");
    if (cell != Cell::gru && ctx.has_attr("linear_before_reset")) ctx.invalid("attribute linear_before_reset is GRU's");

    const int per = activations_of(cell);
    std::vector<std::string> names;
    if (const auto *a = ctx.attribute("activations")) {
        if (a->type() != ::onnx::AttributeProto::STRINGS)
            ctx.invalid("attribute activations must be a list of strings");
        names.assign(a->strings().begin(), a->strings().end());
        // One direction's list serves both directions of a bidirectional node (ONNX Runtime's rule).
        if (c.directions == 2 && static_cast<int>(names.size()) == per)
            names.insert(names.end(), names.begin(), names.end());
        if (static_cast<int>(names.size()) != per * c.directions)
            ctx.invalid("attribute activations has " + std::to_string(names.size()) + " names; " +
                        std::to_string(per * c.directions) + " expected (" + std::to_string(per) + " per direction)");
    } else {
        const std::vector<std::string> defaults = cell == Cell::rnn ? std::vector<std::string>{"Tanh"}
                                                  : cell == Cell::gru
                                                      ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                      : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
        for (int d = 0; d < c.directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
    }
    // alpha and beta are consumed in order by the activations that take them (ONNX Runtime's rule).
    const std::vector<float> alphas = ctx.attr_floats("activation_alpha"), betas = ctx.attr_floats("activation_beta");
    std::size_t ai = 0, bi = 0;
    for (const auto &name : names) {
        const ActivationSpec *spec = activation_spec(name);
        if (spec == nullptr)
            ctx.invalid("attribute activations names '" + name +
                        "', which is not one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
                        "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus");
        Activation act{spec->name, spec->alpha, spec->beta};
        if (spec->n_params >= 1 && ai < alphas.size()) act.alpha = alphas[ai++];
        if (spec->n_params >= 2 && bi < betas.size()) act.beta = betas[bi++];
        c.activations.push_back(act);
    }
    if (ai < alphas.size() || bi < betas.size())
        ctx.invalid("attributes activation_alpha/activation_beta have more values than the activations take");
    return c;
}

Tensor apply(const Activation &a, const Tensor &x) {
    const std::string &n = a.name;
    if (n == "sigmoid") return sigmoid(x);
    if (n == "tanh") return tanh(x);
    if (n == "relu") return relu(x);
    if (n == "affine") return add(mul(x, a.alpha), a.beta);
    if (n == "leakyrelu") return where(ge(x, 0.0), x, mul(x, a.alpha));
    if (n == "thresholdedrelu") return where(gt(x, a.alpha), x, 0.0);
    if (n == "scaledtanh") return mul(tanh(mul(x, a.beta)), a.alpha);
    if (n == "hardsigmoid") return clamp(add(mul(x, a.alpha), a.beta), 0.0, 1.0);
    if (n == "elu") return where(gt(x, 0.0), x, mul(sub(exp(minimum(x, 0.0)), 1.0), a.alpha));
    if (n == "softsign") return div(x, add(abs(x), 1.0));
    // softplus: log(1 + e^x) without overflow.
    return add(relu(x), log(add(exp(neg(abs(x))), 1.0)));
}

// The shape an input must have, checked; names the input.
void expect_shape(const Ctx &ctx, const Shape &got, const Shape &want, const char *what) {
    if (got != want)
        ctx.invalid(std::string("input ") + what + " has shape " + shape_str(got) + "; " + shape_str(want) +
                    " expected (from X, hidden_size and direction)");
}

// One direction over the time steps: xw [T, B, G*H] (the input projection with both biases), rt
// [H, G*H] (R^T), per-gate extras; h0/c0 [B, H]. Steps run in `order`; mask[t] (bool [B, 1]) says
// which batch entries are still inside their sequence at step t (undefined: all).
struct DirectionResult {
    std::vector<Tensor> y;  // per time index, [B, H]; empty when Y is not asked for
    Tensor h, c;
};

Tensor clipped(const Config &cfg, const Tensor &x) { return cfg.clip > 0 ? clamp(x, -cfg.clip, cfg.clip) : x; }

DirectionResult run_direction(const Config &cfg, const Activation *act, const Tensor &xw, const Tensor &rt,
                              const Tensor &rbh, const Tensor &p, Tensor h, Tensor c, const std::vector<int64_t> &order,
                              const std::vector<Tensor> &mask, bool want_y) {
    const int64_t H = cfg.hidden;
    DirectionResult r;
    if (want_y) r.y.resize(static_cast<std::size_t>(xw.size(0)));
    // GRU's R^T in its two parts, dense once per direction: the z/r gates' columns and the h gate's.
    Tensor rt_zr, rt_h;
    if (cfg.cell == Cell::gru) {
        rt_zr = rt.slice(1, 0, 2 * H).contiguous();
        rt_h = rt.slice(1, 2 * H, 3 * H).contiguous();
    }
    for (int64_t t : order) {
        const Tensor x_t = xw.slice(0, t, t + 1).reshape({xw.size(1), xw.size(2)});
        Tensor h_new, c_new;
        if (cfg.cell == Cell::rnn) {
            h_new = apply(act[0], clipped(cfg, add(x_t, matmul(h, rt))));
        } else if (cfg.cell == Cell::gru) {
            // Gates z, r, h. rt's last H columns multiply either H_{t-1} (linear_before_reset) or r * H_{t-1}.
            const Tensor zr = apply(act[0], clipped(cfg, add(x_t.slice(1, 0, 2 * H), matmul(h, rt_zr))));
            const Tensor z = zr.slice(1, 0, H), rg = zr.slice(1, H, 2 * H);
            const Tensor xh = x_t.slice(1, 2 * H, 3 * H);
            Tensor pre;
            if (cfg.linear_before_reset) {
                Tensor rh = matmul(h, rt_h);
                if (rbh.defined()) rh = add(rh, rbh);
                pre = add(xh, mul(rg, rh));
            } else {
                pre = add(xh, matmul(mul(rg, h), rt_h));
                if (rbh.defined()) pre = add(pre, rbh);
            }
            const Tensor hh = apply(act[1], clipped(cfg, pre));
            h_new = add(hh, mul(z, sub(h, hh)));  // (1 - z) hh + z h
        } else {
            // Gates i, o, f, c; peepholes P = [Pi, Po, Pf]. Without peepholes i, o and f are one
            // activation over their adjacent columns.
            const Tensor g = add(x_t, matmul(h, rt));
            const Tensor cc = apply(act[1], clipped(cfg, g.slice(1, 3 * H, 4 * H)));
            Tensor i, o, f;
            if (p.defined()) {
                i = apply(act[0], clipped(cfg, add(g.slice(1, 0, H), mul(p.slice(0, 0, H), c))));
                f = apply(act[0], clipped(cfg, add(g.slice(1, 2 * H, 3 * H), mul(p.slice(0, 2 * H, 3 * H), c))));
            } else {
                const Tensor iof = apply(act[0], clipped(cfg, g.slice(1, 0, 3 * H)));
                i = iof.slice(1, 0, H);
                o = iof.slice(1, H, 2 * H);
                f = iof.slice(1, 2 * H, 3 * H);
            }
            // input_forget couples the gates: f = 1 - i (ONNX Runtime's reading; the spec names the
            // attribute only), in place of the forget gate computed above.
            if (cfg.input_forget) f = sub(1.0, i);
            c_new = add(mul(f, c), mul(i, cc));
            if (p.defined())
                o = apply(act[0], clipped(cfg, add(g.slice(1, H, 2 * H), mul(p.slice(0, H, 2 * H), c_new))));
            h_new = mul(o, apply(act[2], c_new));
        }
        const Tensor &m = mask[static_cast<std::size_t>(t)];
        if (m.defined()) {
            if (want_y) r.y[static_cast<std::size_t>(t)] = where(m, h_new, 0.0);
            h = where(m, h_new, h);
            if (c_new.defined()) c = where(m, c_new, c);
        } else {
            if (want_y) r.y[static_cast<std::size_t>(t)] = h_new;
            h = h_new;
            if (c_new.defined()) c = c_new;
        }
    }
    r.h = h;
    r.c = c;
    return r;
}

std::vector<Value> recurrent(Ctx &ctx, Cell cell) {
    const Config cfg = read_config(ctx, cell);
    const int64_t H = cfg.hidden, G = gates_of(cell), D = cfg.directions;
    Tensor x = ctx.tensor(0);
    if (x.rank() != 3) ctx.invalid("input X must have rank 3, got " + shape_str(x.shape()));
    if (cfg.layout == 1) x = x.transpose(0, 1);  // [B, T, I] -> [T, B, I]
    const int64_t T = x.size(0), B = x.size(1), I = x.size(2);
    const DType dt = x.dtype();
    const Tensor &w = ctx.tensor(1), &rw = ctx.tensor(2);
    expect_shape(ctx, w.shape(), {D, G * H, I}, "W");
    expect_shape(ctx, rw.shape(), {D, G * H, H}, "R");
    Tensor bias;
    if (ctx.has_input(3)) {
        bias = ctx.tensor(3);
        expect_shape(ctx, bias.shape(), {D, 2 * G * H}, "B");
    }
    std::vector<Tensor> mask(static_cast<std::size_t>(T));
    std::vector<int64_t> lens(static_cast<std::size_t>(B), T);
    bool ragged = false;
    if (ctx.has_input(4)) {
        const std::vector<int64_t> l = ctx.ints(4);
        if (static_cast<int64_t>(l.size()) != B)
            ctx.invalid("input sequence_lens has " + std::to_string(l.size()) + " entries; batch size " +
                        std::to_string(B) + " expected");
        for (int64_t b = 0; b < B; ++b) {
            if (l[static_cast<std::size_t>(b)] < 0 || l[static_cast<std::size_t>(b)] > T)
                ctx.invalid("input sequence_lens has " + std::to_string(l[static_cast<std::size_t>(b)]) +
                            ", outside [0, sequence length " + std::to_string(T) + "]");
            lens[static_cast<std::size_t>(b)] = l[static_cast<std::size_t>(b)];
            ragged = ragged || lens[static_cast<std::size_t>(b)] != T;
        }
    }
    if (ragged) {
        const Tensor len = from_vector(lens, {B, 1}, ctx.device);
        for (int64_t t = 0; t < T; ++t) mask[static_cast<std::size_t>(t)] = gt(len, static_cast<double>(t));
    }
    // Initial states arrive as [D, B, H] (layout 0) or [B, D, H] (layout 1).
    auto initial = [&](std::size_t index, const char *what) -> Tensor {
        if (!ctx.has_input(index)) return zeros({D, B, H}, dt, ctx.device);
        Tensor s = ctx.tensor(index);
        expect_shape(ctx, s.shape(), cfg.layout == 0 ? Shape{D, B, H} : Shape{B, D, H}, what);
        return cfg.layout == 0 ? s : s.transpose(0, 1);
    };
    const Tensor h0 = initial(5, "initial_h");
    const Tensor c0 = cell == Cell::lstm ? initial(6, "initial_c") : Tensor();
    Tensor peep;
    if (cell == Cell::lstm && ctx.has_input(7)) {
        peep = ctx.tensor(7);
        expect_shape(ctx, peep.shape(), {D, 3 * H}, "P");
    }
    ctx.check_size({T, D, B, H}, 4);
    ctx.check_size({T, B, G * H}, 4);

    // A reversed direction runs t = T-1 .. 0: with ragged lengths the masked steps t >= lens[b]
    // leave entry b's state as it was, so each sequence is read from its own last element.
    const bool want_y = ctx.node.output_size() > 0 && !ctx.node.output(0).empty();
    const Tensor x2 = x.reshape({T * B, I});
    std::vector<Tensor> ys, hs, cs;
    for (int64_t d = 0; d < D; ++d) {
        const bool backwards = cfg.reverse_only || d == 1;
        const Tensor wd = w.slice(0, d, d + 1).reshape({G * H, I});
        const Tensor rd = rw.slice(0, d, d + 1).reshape({G * H, H});
        // Both biases join the input projection, except GRU's Rbh under linear_before_reset = 0 and
        // = 1 alike: it belongs inside (r * (...)) or after the product with r * H.
        Tensor bw, rbh;
        if (bias.defined()) {
            const Tensor bd = bias.slice(0, d, d + 1).reshape({2 * G * H});
            const Tensor wb = bd.slice(0, 0, G * H), rb = bd.slice(0, G * H, 2 * G * H);
            if (cell == Cell::gru) {
                bw = add(wb, concat({rb.slice(0, 0, 2 * H), zeros({H}, dt, ctx.device)}, 0));
                rbh = rb.slice(0, 2 * H, 3 * H);
            } else {
                bw = add(wb, rb);
            }
        }
        const Tensor xw = linear(x2, wd, bw).reshape({T, B, G * H});
        const Tensor rt = rd.transpose(0, 1).contiguous();
        std::vector<int64_t> order(static_cast<std::size_t>(T));
        for (int64_t t = 0; t < T; ++t) order[static_cast<std::size_t>(t)] = backwards ? T - 1 - t : t;
        const Tensor h = h0.slice(0, d, d + 1).reshape({B, H});
        const Tensor c = c0.defined() ? c0.slice(0, d, d + 1).reshape({B, H}) : Tensor();
        const Tensor p = peep.defined() ? peep.slice(0, d, d + 1).reshape({3 * H}) : Tensor();
        DirectionResult res = run_direction(cfg, &cfg.activations[static_cast<std::size_t>(d * activations_of(cell))],
                                            xw, rt, rbh, p, h, c, order, mask, want_y);
        if (want_y) ys.push_back(T > 0 ? stack(res.y, 0) : zeros({0, B, H}, dt, ctx.device));  // [T, B, H]
        hs.push_back(res.h);
        cs.push_back(res.c);
    }
    Tensor y = want_y ? stack(ys, 1) : Tensor();  // [T, D, B, H]
    Tensor yh = stack(hs, 0);  // [D, B, H]
    Tensor yc = cell == Cell::lstm ? stack(cs, 0) : Tensor();
    if (cfg.layout == 1) {
        if (y.defined()) y = y.permute({2, 0, 1, 3});  // [B, T, D, H]
        yh = yh.transpose(0, 1);
        if (yc.defined()) yc = yc.transpose(0, 1);
    }
    const ElementType type = ctx.input(0).type;
    // An output the node does not name stays undefined (the session skips unnamed outputs).
    std::vector<Value> out{make(want_y ? y.contiguous() : Tensor(), type), make(yh.contiguous(), type)};
    if (cell == Cell::lstm) out.push_back(make(yc.contiguous(), type));
    return out;
}

std::vector<Value> rnn_op(Ctx &ctx) { return recurrent(ctx, Cell::rnn); }
std::vector<Value> gru_op(Ctx &ctx) { return recurrent(ctx, Cell::gru); }
std::vector<Value> lstm_op(Ctx &ctx) { return recurrent(ctx, Cell::lstm); }

constexpr OpRow k_rows[] = {
    {"RNN", 1, 14, rnn_op},
    {"GRU", 1, 14, gru_op},
    {"LSTM", 1, 14, lstm_op},
};

}  // namespace

void check_recurrent_at_load(const ::onnx::NodeProto &node, int version, const std::string &label, const Device &device,
                             const std::function<std::optional<Shape>(const std::string &)> &shape_of) {
    Cell cell;
    if (node.op_type() == "RNN") {
        cell = Cell::rnn;
    } else if (node.op_type() == "GRU") {
        cell = Cell::gru;
    } else if (node.op_type() == "LSTM") {
        cell = Cell::lstm;
    } else {
        return;
    }
    // The attributes through the kernel's own reader; the weights' shapes where load knows them.
    NodeContext ctx{node, version, device, 0, {}, static_cast<std::size_t>(node.output_size()), label};
    const Config cfg = read_config(ctx, cell);
    const int64_t H = cfg.hidden, G = gates_of(cell), D = cfg.directions;
    auto input_shape = [&](int i) -> std::optional<Shape> {
        if (i >= node.input_size() || node.input(i).empty()) return std::nullopt;
        return shape_of(node.input(i));
    };
    if (node.input_size() < 3) ctx.invalid("needs the inputs X, W and R");
    const auto w = input_shape(1), r = input_shape(2), b = input_shape(3), x = input_shape(0);
    if (w && (w->size() != 3 || (*w)[0] != D || (*w)[1] != G * H))
        ctx.invalid("input W has shape " + shape_str(*w) + "; [" + std::to_string(D) + "," + std::to_string(G * H) +
                    ",input_size] expected from attributes hidden_size = " + std::to_string(H) + " and direction");
    if (x && w && x->size() == 3 && (*x)[2] >= 0 && (*w)[2] != (*x)[2])
        ctx.invalid("input W has shape " + shape_str(*w) + "; its last dim must be X's input size " +
                    std::to_string((*x)[2]));
    if (r && *r != Shape{D, G * H, H})
        ctx.invalid("input R has shape " + shape_str(*r) + "; " + shape_str({D, G * H, H}) +
                    " expected from attributes hidden_size = " + std::to_string(H) + " and direction");
    if (b && *b != Shape{D, 2 * G * H})
        ctx.invalid("input B has shape " + shape_str(*b) + "; " + shape_str({D, 2 * G * H}) +
                    " expected from attribute hidden_size = " + std::to_string(H));
    if (const auto p = input_shape(7); cell == Cell::lstm && p && *p != Shape{D, 3 * H})
        ctx.invalid("input P has shape " + shape_str(*p) + "; " + shape_str({D, 3 * H}) +
                    " expected from attribute hidden_size = " + std::to_string(H));
}

std::span<const OpRow> recurrent_ops() { return k_rows; }

}  // namespace tinyfin::onnx::detail
