// Case generation. The KIND column of ops.def picks the family of shapes and layouts; the params
// column picks the parameter sweep; the OWN ops, each with a shape rule of its own, have one
// generator each. Every case is offered to the cpu reference first: a case the cpu plugin does
// not support is not a case of that op (a dtype the op does not take) and is dropped there.
#include "cases.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace conform {

namespace {

constexpr int32_t F32 = TF_DTYPE_F32, F16 = TF_DTYPE_F16, BF16 = TF_DTYPE_BF16, I32 = TF_DTYPE_I32, I64 = TF_DTYPE_I64,
                  BOOL = TF_DTYPE_BOOL;
const std::vector<int32_t> k_floats = {F32, F16, BF16};
constexpr double inf = std::numeric_limits<double>::infinity();

Shape row_major(const Shape &shape) {
    Shape strides(shape.size());
    int64_t s = 1;
    for (std::size_t k = shape.size(); k-- > 0;) {
        strides[k] = s;
        s *= shape[k] > 0 ? shape[k] : 1;
    }
    return strides;
}

int64_t product(const Shape &shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

// Elements a view of shape/strides at offset reaches: 0 when it has none.
int64_t extent(const Shape &shape, const Shape &strides, int64_t offset) {
    if (product(shape) == 0) return offset;
    int64_t last = offset;
    for (std::size_t k = 0; k < shape.size(); ++k) last += (shape[k] - 1) * strides[k];
    return last + 1;
}

TensorSpec spec(const Shape &shape, const Shape &strides, int64_t offset, int32_t dtype, Domain domain,
                const char *layout) {
    TensorSpec t;
    t.dtype = dtype;
    t.shape = shape;
    t.strides = strides;
    t.offset = offset;
    t.storage_elems = extent(shape, strides, offset);
    t.domain = dtype == BOOL ? Domain::boolean : domain;
    t.layout = layout;
    return t;
}

template <typename P>
P sized() {
    P p;
    p.struct_size = sizeof p;
    return p;
}

// Which values an input of an op needs to stay in its domain and to exercise it.
Domain input_domain(tf_op op, int index, Kind kind) {
    switch (op) {
    case TF_OP_LOG:
    case TF_OP_SQRT:
    case TF_OP_RSQRT: return Domain::positive;
    case TF_OP_ASIN:
    case TF_OP_ACOS:
    case TF_OP_ATANH: return Domain::unit;
    case TF_OP_ACOSH: return Domain::above_one;
    case TF_OP_POW: return index == 0 ? Domain::positive : Domain::exponent;
    case TF_OP_DIV: return index == 1 ? Domain::nonzero : Domain::uniform;
    case TF_OP_CAST: return Domain::wide;
    default: break;
    }
    if (kind == Kind::COMPARE || kind == Kind::ARG) return Domain::ties;
    if (kind == Kind::WHERE && index == 0) return Domain::boolean;
    return Domain::uniform;
}

std::string layout_suffix(const std::vector<TensorSpec> &inputs, const std::vector<TensorSpec> &outputs) {
    std::string text;
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i].layout != "contiguous") text += " in" + std::to_string(i) + ":" + inputs[i].layout;
    for (std::size_t i = 0; i < outputs.size(); ++i)
        if (outputs[i].layout != "contiguous") text += " out:" + outputs[i].layout;
    return text;
}

class Generator {
public:
    Generator(std::vector<Case> &out, const OpRow &row) : out_(out), row_(row) {}

    void add(const std::string &label, std::vector<TensorSpec> inputs, std::vector<TensorSpec> outputs,
             const Params *params = nullptr, const std::string &params_label = "") {
        Case c;
        c.op = row_.op;
        c.op_name = row_.name;
        std::string shapes;
        for (std::size_t i = 0; i < inputs.size(); ++i) shapes += (i ? " x " : "") + shape_text(inputs[i].shape);
        if (inputs.empty()) shapes = shape_text(outputs[0].shape);
        c.name =
            label + " " + shapes + layout_suffix(inputs, outputs) + (params_label.empty() ? "" : " " + params_label);
        c.inputs = std::move(inputs);
        c.outputs = std::move(outputs);
        if (params) {
            c.params = *params;
            c.has_params = true;
        }
        c.seed = 1000003ull * static_cast<uint64_t>(row_.op) + out_.size();
        out_.push_back(std::move(c));
    }

    const OpRow &row() const { return row_; }

private:
    std::vector<Case> &out_;
    const OpRow &row_;
};

// ---- Params sweeps, by params struct ------------------------------------------------------

struct ParamsVariant {
    Params params;
    std::string label;
};

template <typename P>
ParamsVariant variant(const P &p, std::string label) {
    ParamsVariant v;
    v.params.set(p);
    v.label = std::move(label);
    return v;
}

// Params of the elementwise kinds: the first variant runs over the whole shape family, the
// others over one shape. Empty: the op takes no params.
std::vector<ParamsVariant> elementwise_params(tf_op op) {
    std::vector<ParamsVariant> out;
    if (op == TF_OP_CLAMP) {
        auto p = sized<tf_params_clamp>();
        p.min = -0.5, p.max = 0.5;
        out.push_back(variant(p, "min=-0.5 max=0.5"));
        p.min = -inf, p.max = 0.25;
        out.push_back(variant(p, "min=-inf max=0.25"));
        p.min = -0.25, p.max = inf;
        out.push_back(variant(p, "min=-0.25 max=inf"));
        p.min = 1, p.max = -1;
        out.push_back(variant(p, "min=1 max=-1"));
    }
    return out;
}

// ---- The elementwise kinds ------------------------------------------------------------------

const std::vector<Shape> k_unary_shapes = {{}, {1}, {7}, {0}, {3, 5}, {2, 0, 3}, {1, 1, 1, 1}, {2, 3, 5, 7}, {13, 17}};

void gen_unary(Generator &g) {
    const tf_op op = g.row().op;
    auto params = elementwise_params(op);
    const Params *primary = params.empty() ? nullptr : &params[0].params;
    const std::string plabel = params.empty() ? "" : params[0].label;
    const Domain dom = input_domain(op, 0, Kind::UNARY);
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        for (const Shape &s : k_unary_shapes) g.add(d, {contiguous(s, dt, dom)}, {contiguous(s, dt)}, primary, plabel);
        g.add(d, {transposed({13, 17}, dt, dom)}, {contiguous({13, 17}, dt)}, primary, plabel);
        g.add(d, {permuted({2, 3, 5, 7}, dt, dom)}, {contiguous({2, 3, 5, 7}, dt)}, primary, plabel);
        g.add(d, {sliced({13, 17}, dt, dom)}, {contiguous({13, 17}, dt)}, primary, plabel);
        g.add(d, {expanded({1, 17}, {13, 17}, dt, dom)}, {contiguous({13, 17}, dt)}, primary, plabel);
        g.add(d, {contiguous({13, 17}, dt, dom)}, {sliced({13, 17}, dt)}, primary, plabel);
        if (is_float(dt))
            g.add(d, {contiguous({3, 5}, dt, Domain::specials)}, {contiguous({3, 5}, dt)}, primary,
                  plabel + " specials");
        for (std::size_t i = 1; i < params.size(); ++i)
            g.add(d, {contiguous({3, 5}, dt, dom)}, {contiguous({3, 5}, dt)}, &params[i].params, params[i].label);
    }
    g.add("f32", {contiguous({4099}, F32, dom)}, {contiguous({4099}, F32)}, primary, plabel);
    g.add("f32", {contiguous({65, 257}, F32, dom)}, {contiguous({65, 257}, F32)}, primary, plabel);
}

Shape broadcast(const Shape &a, const Shape &b) {
    Shape out(std::max(a.size(), b.size()));
    for (std::size_t i = 0; i < out.size(); ++i) {
        int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
        int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
        out[i] = x == 1 ? y : x;
    }
    return out;
}

// An operand of shape `from` as the core hands it over for an output of shape `out`.
TensorSpec operand(const Shape &from, const Shape &out, int32_t dtype, Domain domain) {
    return from == out ? contiguous(out, dtype, domain) : expanded(from, out, dtype, domain);
}

// BINARY, COMPARE and WHERE: n operands broadcast to one output shape.
void gen_broadcasting(Generator &g, Kind kind) {
    const tf_op op = g.row().op;
    const int n = g.row().n_inputs;
    const std::vector<std::vector<Shape>> families = {
        {{}, {}, {}},
        {{7}, {7}, {7}},
        {{0}, {0}, {0}},
        {{3, 5}, {3, 5}, {3, 5}},
        {{3, 5}, {1, 5}, {3, 1}},
        {{3, 1}, {1, 5}, {}},
        {{}, {2, 3}, {2, 3}},
        {{4, 1, 3}, {5, 1}, {3}},
        {{2, 0, 3}, {1, 3}, {2, 1, 1}},
        {{2, 3, 5, 7}, {2, 3, 5, 7}, {5, 7}},
        {{1, 1, 1, 1}, {1, 1, 1, 1}, {1}},
    };
    auto out_dtype = [&](int32_t dt) { return kind == Kind::COMPARE ? BOOL : dt; };
    auto in_dtype = [&](int i, int32_t dt) { return kind == Kind::WHERE && i == 0 ? BOOL : dt; };
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        for (const auto &family : families) {
            Shape out;
            for (int i = 0; i < n; ++i) out = broadcast(out, family[i]);
            std::vector<TensorSpec> in;
            for (int i = 0; i < n; ++i)
                in.push_back(operand(family[i], out, in_dtype(i, dt), input_domain(op, i, kind)));
            g.add(d, in, {contiguous(out, out_dtype(dt))});
        }
        // Non-contiguous operands, a strided output, special values.
        const Shape m = {13, 17}, p = {2, 3, 5, 7};
        std::vector<TensorSpec> a, b, c, s;
        for (int i = 0; i < n; ++i) {
            Domain dom = input_domain(op, i, kind);
            a.push_back(i % 2 == 0 ? transposed(m, in_dtype(i, dt), dom) : sliced(m, in_dtype(i, dt), dom));
            b.push_back(i == 0 ? permuted(p, in_dtype(i, dt), dom) : contiguous(p, in_dtype(i, dt), dom));
            c.push_back(contiguous(m, in_dtype(i, dt), dom));
            s.push_back(contiguous({3, 5}, in_dtype(i, dt),
                                   in_dtype(i, dt) == BOOL || dom == Domain::nonzero ? dom : Domain::specials));
        }
        g.add(d, a, {contiguous(m, out_dtype(dt))});
        g.add(d, b, {contiguous(p, out_dtype(dt))});
        g.add(d, c, {sliced(m, out_dtype(dt))});
        if (is_float(dt)) g.add(d, s, {contiguous({3, 5}, out_dtype(dt))}, nullptr, "specials");
    }
    std::vector<TensorSpec> big, wide;
    for (int i = 0; i < n; ++i) {
        big.push_back(contiguous({4099}, in_dtype(i, F32), input_domain(op, i, kind)));
        wide.push_back(
            operand(i == 1 ? Shape{1, 257} : Shape{65, 257}, {65, 257}, in_dtype(i, F32), input_domain(op, i, kind)));
    }
    g.add("f32", big, {contiguous({4099}, out_dtype(F32))});
    g.add("f32", wide, {contiguous({65, 257}, out_dtype(F32))});
}

// ---- REDUCE and ARG -------------------------------------------------------------------------

Shape reduced(Shape shape, uint32_t mask) {
    for (std::size_t k = 0; k < shape.size(); ++k)
        if (mask & (1u << k)) shape[k] = 1;
    return shape;
}

void gen_reduce(Generator &g) {
    const tf_op op = g.row().op;
    const bool is_var = op == TF_OP_VAR;
    auto make_params = [&](uint32_t mask, double correction) {
        Params p;
        if (is_var) {
            p.set(sized<tf_params_var>());
            p.as<tf_params_var>().axes_mask = mask;
            p.as<tf_params_var>().correction = correction;
        } else {
            p.set(sized<tf_params_reduce>());
            p.as<tf_params_reduce>().axes_mask = mask;
        }
        return p;
    };
    auto label = [&](uint32_t mask, double correction) {
        return "mask=" + std::to_string(mask) +
               (is_var ? " correction=" + std::to_string(static_cast<int>(correction)) : "");
    };
    auto add = [&](const std::string &d, TensorSpec in, uint32_t mask, double correction = 1,
                   const std::string &extra = "") {
        Params p = make_params(mask, correction);
        Shape out = reduced(in.shape, mask);
        int32_t dt = in.dtype;
        g.add(d, {std::move(in)}, {contiguous(out, dt)}, &p, label(mask, correction) + extra);
    };
    const Domain dom = input_domain(op, 0, Kind::REDUCE);
    const std::vector<std::pair<Shape, std::vector<uint32_t>>> family = {
        {{}, {0}},
        {{7}, {1}},
        {{0}, {1}},
        {{1}, {1}},
        {{3, 5}, {0, 1, 2, 3}},
        {{2, 0, 3}, {1, 2, 5}},
        {{2, 3, 5, 7}, {1, 2, 4, 8, 5, 10, 15}},
        {{1, 1, 1, 1}, {15}},
    };
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        for (const auto &[shape, masks] : family)
            for (uint32_t mask : masks) add(d, contiguous(shape, dt, dom), mask);
        for (uint32_t mask : {1u, 2u, 3u}) add(d, transposed({13, 17}, dt, dom), mask);
        for (uint32_t mask : {6u, 9u}) add(d, permuted({2, 3, 5, 7}, dt, dom), mask);
        add(d, sliced({13, 17}, dt, dom), 2);
        for (uint32_t mask : {1u, 2u}) add(d, expanded({1, 17}, {13, 17}, dt, dom), mask);
        if (is_float(dt))
            for (uint32_t mask : {1u, 2u}) add(d, contiguous({3, 5}, dt, Domain::specials), mask, 1, " specials");
        if (is_var) {
            add(d, contiguous({3, 5}, dt, dom), 1, 0);
            add(d, contiguous({3, 5}, dt, dom), 3, 0);
            add(d, contiguous({1, 5}, dt, dom), 1, 1);  // n - correction = 0
        }
    }
    add("f32", contiguous({4099}, F32, dom), 1);
    add("f32", contiguous({67, 1031}, F32, dom), 1);
    add("f32", contiguous({67, 1031}, F32, dom), 2);
    add("f32", contiguous({1031, 67}, F32, dom), 1);
}

void gen_arg(Generator &g) {
    const tf_op op = g.row().op;
    const Domain dom = input_domain(op, 0, Kind::ARG);
    auto add = [&](const std::string &d, TensorSpec in, int axis, const std::string &extra = "") {
        auto p = sized<tf_params_axis>();
        p.axis = axis;
        Params params;
        params.set(p);
        Shape out = in.shape;
        out[static_cast<std::size_t>(axis)] = 1;
        g.add(d, {std::move(in)}, {contiguous(out, I64)}, &params, "axis=" + std::to_string(axis) + extra);
    };
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        add(d, contiguous({7}, dt, dom), 0);
        add(d, contiguous({1}, dt, dom), 0);
        add(d, contiguous({3, 5}, dt, dom), 0);
        add(d, contiguous({3, 5}, dt, dom), 1);
        add(d, contiguous({2, 0, 3}, dt, dom), 2);
        for (int axis = 0; axis < 4; ++axis) add(d, contiguous({2, 3, 5, 7}, dt, dom), axis);
        add(d, transposed({13, 17}, dt, dom), 0);
        add(d, transposed({13, 17}, dt, dom), 1);
        add(d, permuted({2, 3, 5, 7}, dt, dom), 2);
        add(d, sliced({13, 17}, dt, dom), 1);
        if (is_float(dt)) add(d, contiguous({3, 5}, dt, Domain::specials), 1, " specials");
    }
    add("f32", contiguous({67, 1031}, F32, dom), 1);
    add("f32", contiguous({1031, 67}, F32, dom), 0);
}

// ---- MATMUL ---------------------------------------------------------------------------------

void gen_matmul(Generator &g) {
    struct Mm {
        Shape batch_a, batch_b;
        int64_t m, k, n;
        char layout_a = 'c', layout_b = 'c';  // c contiguous, t transposed, s sliced
    };
    auto build = [&](const std::string &d, int32_t dt, const Mm &mm) {
        Shape batch = broadcast(mm.batch_a, mm.batch_b);
        Shape sa = batch, sb = batch, so = batch;
        sa.insert(sa.end(), {mm.m, mm.k});
        sb.insert(sb.end(), {mm.k, mm.n});
        so.insert(so.end(), {mm.m, mm.n});
        auto side = [&](const Shape &own_batch, int64_t r, int64_t c, char layout, const Shape &full) {
            Shape own = own_batch;
            own.insert(own.end(), {r, c});
            if (own != full) return expanded(own, full, dt);
            if (layout == 't') return transposed(full, dt);
            if (layout == 's') return sliced(full, dt);
            return contiguous(full, dt);
        };
        g.add(d, {side(mm.batch_a, mm.m, mm.k, mm.layout_a, sa), side(mm.batch_b, mm.k, mm.n, mm.layout_b, sb)},
              {contiguous(so, dt)});
    };
    const std::vector<Mm> family = {
        {{}, {}, 1, 1, 1},
        {{}, {}, 3, 5, 7},
        {{}, {}, 1, 17, 1},
        {{}, {}, 17, 1, 13},
        {{}, {}, 1, 17, 13},
        {{}, {}, 0, 3, 4},
        {{}, {}, 3, 0, 4},
        {{}, {}, 3, 4, 0},
        {{2}, {2}, 4, 3, 5},
        {{2, 3}, {3}, 4, 5, 6},
        {{2, 1}, {1, 3}, 4, 5, 6},
        {{2}, {}, 4, 5, 6},
        {{}, {}, 7, 9, 11, 't', 'c'},
        {{}, {}, 7, 9, 11, 'c', 't'},
        {{}, {}, 7, 9, 11, 't', 't'},
        {{}, {}, 7, 9, 11, 's', 's'},
        {{2}, {2}, 5, 6, 7, 't', 't'},
    };
    for (int32_t dt : all_dtypes())
        for (const Mm &mm : family) build(dtype_name(dt), dt, mm);
    for (const Mm &mm : std::vector<Mm>{
             {{}, {}, 65, 33, 67}, {{}, {}, 130, 257, 129}, {{3}, {3}, 65, 129, 63}, {{}, {}, 129, 65, 67, 't', 't'}})
        build("f32", F32, mm);
}

// matmul_bias: x [..., M, K] w [K, N] + bias [N]: the matmul family's sizes and layouts (a few
// rows, k = 0, empty, batched, transposed and sliced operands, a strided bias), and f32 sizes
// past the register tile, one whose product runs as C^T = B^T A^T (96 x 70 x 4).
void gen_matmul_bias(Generator &g) {
    struct Mb {
        Shape batch;
        int64_t m, k, n;
        char layout_x = 'c', layout_w = 'c', layout_bias = 'c';
    };
    auto build = [&](int32_t dt, const Mb &mb) {
        Shape sx = mb.batch, sy = mb.batch;
        sx.insert(sx.end(), {mb.m, mb.k});
        sy.insert(sy.end(), {mb.m, mb.n});
        const Shape sw = {mb.k, mb.n}, sb = {mb.n};
        auto side = [&](const Shape &shape, char layout) {
            if (layout == 't') return transposed(shape, dt);
            if (layout == 's') return sliced(shape, dt);
            return contiguous(shape, dt);
        };
        g.add(dtype_name(dt), {side(sx, mb.layout_x), side(sw, mb.layout_w), side(sb, mb.layout_bias)},
              {contiguous(sy, dt)});
    };
    const std::vector<Mb> family = {
        {{}, 1, 1, 1},
        {{}, 3, 5, 7},
        {{}, 1, 17, 13},
        {{}, 17, 1, 13},
        {{}, 0, 3, 4},
        {{}, 3, 0, 4},
        {{}, 3, 4, 0},
        {{2}, 4, 3, 5},
        {{2, 3}, 4, 5, 6},
        {{}, 7, 9, 11, 't', 'c'},
        {{}, 7, 9, 11, 'c', 't'},
        {{}, 7, 9, 11, 's', 's', 's'},
        {{2}, 5, 6, 7, 't', 't'},
    };
    for (int32_t dt : all_dtypes())
        for (const Mb &mb : family) build(dt, mb);
    for (const Mb &mb : std::vector<Mb>{{{}, 65, 33, 67},
                                        {{}, 130, 257, 129},
                                        {{3}, 65, 129, 63},
                                        {{}, 129, 65, 67, 't', 't', 's'},
                                        {{}, 96, 70, 4},
                                        {{2}, 64, 600, 20}})
        build(F32, mb);
}

// ---- COPY and FILL --------------------------------------------------------------------------

void gen_copy(Generator &g) {
    const tf_op op = g.row().op;
    if (op == TF_OP_CAST) {
        for (int32_t from : all_dtypes())
            for (int32_t to : all_dtypes()) {
                if (from == to) continue;
                const std::string d = std::string(dtype_name(from)) + "->" + dtype_name(to);
                const Domain dom = input_domain(op, 0, Kind::COPY);
                for (const Shape &s : std::vector<Shape>{{}, {7}, {0}, {3, 5}})
                    g.add(d, {contiguous(s, from, dom)}, {contiguous(s, to)});
                g.add(d, {transposed({13, 17}, from, dom)}, {contiguous({13, 17}, to)});
                g.add(d, {contiguous({13, 17}, from, dom)}, {sliced({13, 17}, to)});
                if (is_float(from) && is_float(to))
                    g.add(d, {contiguous({3, 5}, from, Domain::specials)}, {contiguous({3, 5}, to)}, nullptr,
                          "specials");
            }
        g.add("f32->f16", {contiguous({4099}, F32, Domain::wide)}, {contiguous({4099}, F16)});
        g.add("f16->f32", {contiguous({4099}, F16, Domain::wide)}, {contiguous({4099}, F32)});
        return;
    }
    // contiguous (and any other same-dtype copy): the core sends only non-contiguous inputs.
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        g.add(d, {transposed({3, 5}, dt)}, {contiguous({3, 5}, dt)});
        g.add(d, {transposed({13, 17}, dt)}, {contiguous({13, 17}, dt)});
        g.add(d, {transposed({0, 3}, dt)}, {contiguous({0, 3}, dt)});
        g.add(d, {permuted({2, 3, 5, 7}, dt)}, {contiguous({2, 3, 5, 7}, dt)});
        g.add(d, {channels_last({2, 3, 5, 7}, dt)}, {contiguous({2, 3, 5, 7}, dt)});
        g.add(d, {sliced({7}, dt)}, {contiguous({7}, dt)});
        g.add(d, {sliced({13, 17}, dt)}, {contiguous({13, 17}, dt)});
        g.add(d, {expanded({1, 5}, {3, 5}, dt)}, {contiguous({3, 5}, dt)});
        g.add(d, {expanded({}, {2, 3}, dt)}, {contiguous({2, 3}, dt)});
        g.add(d, {contiguous({13, 17}, dt)}, {sliced({13, 17}, dt)});
        g.add(d, {transposed({13, 17}, dt)}, {sliced({13, 17}, dt)});
    }
    g.add("f32", {transposed({65, 257}, F32)}, {contiguous({65, 257}, F32)});
}

void gen_fill(Generator &g) {
    auto params = [](double value) {
        Params p;
        p.set(sized<tf_params_fill>());
        p.as<tf_params_fill>().value = value;
        return p;
    };
    auto label = [](double value) {
        char buf[48];
        std::snprintf(buf, sizeof buf, "value=%g", value);
        return std::string(buf);
    };
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        Params primary = params(1.5);
        for (const Shape &s : std::vector<Shape>{{}, {7}, {0}, {13, 17}, {2, 3, 5, 7}})
            g.add(d, {}, {contiguous(s, dt)}, &primary, label(1.5));
        g.add(d, {}, {sliced({13, 17}, dt)}, &primary, label(1.5));
        std::vector<double> others = {0, -3.25, 1e6};
        if (is_float(dt)) others.insert(others.end(), {inf, -inf, std::nan("")});
        for (double v : others) {
            Params p = params(v);
            g.add(d, {}, {contiguous({7}, dt)}, &p, label(v));
        }
    }
    Params p = params(-2.5);
    g.add("f32", {}, {contiguous({65, 257}, F32)}, &p, label(-2.5));
}

// ---- OWN ops: each has its own shape rule -----------------------------------------------------

struct ConvCfg {
    Shape x, w;
    int sh, sw, ph, pw, dh, dw, groups;
    const char *name;
    bool large = false;
};

const std::vector<ConvCfg> k_convs = {
    {{2, 3, 7, 7}, {4, 3, 3, 3}, 1, 1, 0, 0, 1, 1, 1, "basic"},
    {{1, 3, 8, 9}, {5, 3, 3, 3}, 2, 2, 1, 1, 1, 1, 1, "stride=2 pad=1"},
    {{1, 2, 9, 9}, {3, 2, 3, 3}, 1, 1, 2, 2, 2, 2, 1, "dilation=2 pad=2"},
    {{2, 4, 6, 5}, {6, 2, 3, 3}, 1, 1, 1, 1, 1, 1, 2, "groups=2 pad=1"},
    {{1, 4, 5, 5}, {4, 1, 3, 3}, 1, 1, 1, 1, 1, 1, 4, "depthwise pad=1"},
    {{2, 5, 4, 4}, {3, 5, 1, 1}, 1, 1, 0, 0, 1, 1, 1, "1x1"},
    {{1, 3, 7, 10}, {2, 3, 3, 2}, 2, 1, 1, 0, 1, 2, 1, "stride=2,1 pad=1,0 dilation=1,2"},
    {{0, 3, 5, 5}, {4, 3, 3, 3}, 1, 1, 0, 0, 1, 1, 1, "batch=0"},
    {{2, 8, 17, 19}, {16, 8, 3, 3}, 1, 1, 1, 1, 1, 1, 1, "large pad=1", true},
    // Strided: a case the blas plugin claims (it leaves stride-1 convs of 32+ taps to cpu).
    {{2, 8, 33, 35}, {16, 8, 3, 3}, 2, 2, 1, 1, 1, 1, 1, "large stride=2 pad=1", true},
};

void gen_conv(Generator &g) {
    const tf_op op = g.row().op;
    for (const ConvCfg &c : k_convs) {
        auto p = sized<tf_params_conv2d>();
        p.stride[0] = c.sh, p.stride[1] = c.sw, p.padding[0] = c.ph, p.padding[1] = c.pw;
        p.dilation[0] = c.dh, p.dilation[1] = c.dw, p.groups = c.groups;
        Params params;
        params.set(p);
        int64_t oh = (c.x[2] + 2 * c.ph - c.dh * (c.w[2] - 1) - 1) / c.sh + 1;
        int64_t ow = (c.x[3] + 2 * c.pw - c.dw * (c.w[3] - 1) - 1) / c.sw + 1;
        Shape y = {c.x[0], c.w[0], oh, ow};
        for (int32_t dt : c.large ? std::vector<int32_t>{F32} : all_dtypes()) {
            const std::string d = dtype_name(dt);
            for (bool nhwc : {false, true}) {
                if (nhwc && (c.large || dt != F32)) continue;
                auto act = [&](const Shape &s) { return nhwc ? channels_last(s, dt) : contiguous(s, dt); };
                switch (op) {
                case TF_OP_CONV2D:
                    g.add(d, {act(c.x), contiguous(c.w, dt)}, {contiguous(y, dt)}, &params, c.name);
                    break;
                case TF_OP_CONV2D_GRAD_INPUT:
                    g.add(d, {act(y), contiguous(c.w, dt)}, {contiguous(c.x, dt)}, &params, c.name);
                    break;
                default: g.add(d, {act(y), act(c.x)}, {contiguous(c.w, dt)}, &params, c.name); break;
                }
            }
        }
    }
}

// conv2d_act: conv2d's shapes, each activation with and without a bias and a residual (absent).
void gen_conv_act(Generator &g) {
    struct Act {
        int32_t kind;
        double min, max;
        bool bias, residual;
        const char *name;
    };
    const Act acts[] = {{TF_CONV_ACT_NONE, 0, 0, true, false, "bias"},
                        {TF_CONV_ACT_RELU, 0, 0, true, false, "bias relu"},
                        {TF_CONV_ACT_RELU, 0, 0, false, false, "relu"},
                        {TF_CONV_ACT_RELU, 0, 0, true, true, "bias residual relu"},
                        {TF_CONV_ACT_NONE, 0, 0, false, true, "residual"},
                        {TF_CONV_ACT_CLIP, -0.5, 0.75, true, false, "bias clip -0.5 0.75"},
                        {TF_CONV_ACT_CLIP, 0, 6, true, true, "bias residual clip 0 6"}};
    for (const ConvCfg &c : k_convs) {
        int64_t oh = (c.x[2] + 2 * c.ph - c.dh * (c.w[2] - 1) - 1) / c.sh + 1;
        int64_t ow = (c.x[3] + 2 * c.pw - c.dw * (c.w[3] - 1) - 1) / c.sw + 1;
        Shape y = {c.x[0], c.w[0], oh, ow};
        for (const Act &a : acts) {
            auto p = sized<tf_params_conv2d_act>();
            p.stride[0] = c.sh, p.stride[1] = c.sw, p.padding[0] = c.ph, p.padding[1] = c.pw;
            p.dilation[0] = c.dh, p.dilation[1] = c.dw, p.groups = c.groups;
            p.activation = a.kind, p.min = a.min, p.max = a.max;
            Params params;
            params.set(p);
            const std::string label = std::string(c.name) + " " + a.name;
            for (int32_t dt : c.large ? std::vector<int32_t>{F32} : all_dtypes()) {
                const TensorSpec bias = a.bias ? contiguous({c.w[0]}, dt) : absent_input({c.w[0]}, dt);
                const TensorSpec residual = a.residual ? contiguous(y, dt) : absent_input(y, dt);
                g.add(dtype_name(dt), {contiguous(c.x, dt), contiguous(c.w, dt), bias, residual}, {contiguous(y, dt)},
                      &params, label);
            }
        }
    }
}

struct PoolCfg {
    Shape x;
    int kh, kw, sh, sw, ph, pw;
    const char *name;
    bool large = false;
};

void gen_pool(Generator &g) {
    const tf_op op = g.row().op;
    const bool avg = op == TF_OP_AVG_POOL2D || op == TF_OP_AVG_POOL2D_BACKWARD;
    const bool backward = op == TF_OP_MAX_POOL2D_BACKWARD || op == TF_OP_AVG_POOL2D_BACKWARD;
    const std::vector<PoolCfg> cfgs = {
        {{2, 3, 8, 8}, 2, 2, 2, 2, 0, 0, "k=2 s=2"},
        {{1, 2, 7, 9}, 3, 3, 2, 2, 1, 1, "k=3 s=2 pad=1"},
        {{2, 2, 6, 7}, 3, 2, 1, 2, 1, 0, "k=3,2 s=1,2 pad=1,0"},
        {{1, 1, 5, 5}, 3, 3, 1, 1, 1, 1, "k=3 s=1 pad=1"},
        {{0, 2, 4, 4}, 2, 2, 2, 2, 0, 0, "batch=0"},
        {{2, 8, 33, 35}, 3, 3, 2, 2, 1, 1, "large k=3 s=2 pad=1", true},
    };
    for (const PoolCfg &c : cfgs)
        for (int include_pad : avg ? std::vector<int>{1, 0} : std::vector<int>{0}) {
            if (include_pad == 0 && avg && c.ph == 0 && c.pw == 0) continue;
            auto p = sized<tf_params_pool2d>();
            p.kernel[0] = c.kh, p.kernel[1] = c.kw, p.stride[0] = c.sh, p.stride[1] = c.sw;
            p.padding[0] = c.ph, p.padding[1] = c.pw, p.count_include_pad = include_pad;
            Params params;
            params.set(p);
            Shape y = {c.x[0], c.x[1], (c.x[2] + 2 * c.ph - c.kh) / c.sh + 1, (c.x[3] + 2 * c.pw - c.kw) / c.sw + 1};
            std::string label = std::string(c.name) + (avg ? (include_pad ? " include_pad" : " exclude_pad") : "");
            for (int32_t dt : c.large ? std::vector<int32_t>{F32} : all_dtypes()) {
                const std::string d = dtype_name(dt);
                for (int variant = 0; variant < (c.large || dt != F32 ? 1 : 3); ++variant) {
                    // variant 1: channels-last input; variant 2: ties in the windows (max: first wins).
                    Domain dom = variant == 2 ? Domain::ties : Domain::uniform;
                    if (variant == 2 && avg) continue;
                    auto act = [&](const Shape &s) {
                        return variant == 1 ? channels_last(s, dt, dom) : contiguous(s, dt, dom);
                    };
                    if (!backward)
                        g.add(d, {act(c.x)}, {contiguous(y, dt)}, &params, label);
                    else if (avg)
                        g.add(d, {act(y)}, {contiguous(c.x, dt)}, &params, label);
                    else
                        g.add(d, {act(y), act(c.x)}, {contiguous(c.x, dt)}, &params, label);
                }
            }
        }
}

void gen_softmax(Generator &g) {
    auto add = [&](const std::string &d, TensorSpec in, int axis, const std::string &extra = "") {
        Params params;
        params.set(sized<tf_params_axis>());
        params.as<tf_params_axis>().axis = axis;
        Shape s = in.shape;
        int32_t dt = in.dtype;
        g.add(d, {std::move(in)}, {contiguous(s, dt)}, &params, "axis=" + std::to_string(axis) + extra);
    };
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        add(d, contiguous({7}, dt), 0);
        add(d, contiguous({3, 5}, dt), 0);
        add(d, contiguous({3, 5}, dt), 1);
        add(d, contiguous({2, 3, 5, 7}, dt), 1);
        add(d, contiguous({2, 3, 5, 7}, dt), 3);
        add(d, contiguous({1, 1}, dt), 1);
        add(d, contiguous({2, 0, 3}, dt), 2);
        add(d, transposed({13, 17}, dt), 1);
        add(d, sliced({13, 17}, dt), 0);
        if (is_float(dt)) add(d, contiguous({3, 5}, dt, Domain::specials), 1, " specials");
    }
    add("f32", contiguous({8, 1031}, F32), 1);
    add("f32", contiguous({1031, 8}, F32), 0);
}

void gen_cumsum(Generator &g) {
    auto add = [&](const std::string &d, TensorSpec in, int axis, bool exclusive, bool reverse,
                   const std::string &extra = "") {
        Params params;
        params.set(sized<tf_params_cumsum>());
        params.as<tf_params_cumsum>().axis = axis;
        params.as<tf_params_cumsum>().exclusive = exclusive;
        params.as<tf_params_cumsum>().reverse = reverse;
        Shape s = in.shape;
        int32_t dt = in.dtype;
        std::string label =
            "axis=" + std::to_string(axis) + (exclusive ? " exclusive" : "") + (reverse ? " reverse" : "");
        g.add(d, {std::move(in)}, {contiguous(s, dt)}, &params, label + extra);
    };
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        for (int flags = 0; flags < 4; ++flags) {
            const bool exclusive = flags & 1, reverse = flags & 2;
            add(d, contiguous({7}, dt), 0, exclusive, reverse);
            add(d, contiguous({2, 3, 5, 7}, dt), 2, exclusive, reverse);
        }
        add(d, contiguous({3, 5}, dt), 0, false, false);
        add(d, contiguous({3, 5}, dt), 1, false, false);
        add(d, contiguous({2, 3, 5, 7}, dt), 3, true, false);
        add(d, contiguous({1, 1}, dt), 1, false, true);
        add(d, contiguous({2, 0, 3}, dt), 2, false, false);
        add(d, contiguous({2, 0, 3}, dt), 1, true, true);
        add(d, transposed({13, 17}, dt), 1, false, false);
        add(d, sliced({13, 17}, dt), 0, true, true);
        if (is_float(dt)) add(d, contiguous({3, 5}, dt, Domain::specials), 1, false, false, " specials");
    }
    add("f32", contiguous({8, 1031}, F32), 1, false, false);
    add("f32", contiguous({1031, 8}, F32), 0, true, true);
}

void gen_norm(Generator &g) {
    const bool layer = g.row().op == TF_OP_LAYER_NORM;
    auto add = [&](const std::string &d, TensorSpec x, int n_axes, double eps) {
        Params params;
        params.set(sized<tf_params_norm>());
        params.as<tf_params_norm>().n_axes = n_axes;
        params.as<tf_params_norm>().eps = eps;
        Shape ws(x.shape.end() - n_axes, x.shape.end()), s = x.shape;
        int32_t dt = x.dtype;
        std::vector<TensorSpec> in = {std::move(x), contiguous(ws, dt)};
        if (layer) in.push_back(contiguous(ws, dt));
        char label[64];
        std::snprintf(label, sizeof label, "n_axes=%d eps=%g", n_axes, eps);
        g.add(d, in, {contiguous(s, dt)}, &params, label);
    };
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        add(d, contiguous({3, 5}, dt), 1, 1e-5);
        add(d, contiguous({7}, dt), 1, 1e-5);
        add(d, contiguous({2, 3, 4}, dt), 2, 1e-5);
        add(d, contiguous({2, 0, 5}, dt), 1, 1e-5);
        add(d, contiguous({1, 1}, dt), 1, 1e-3);
        add(d, transposed({13, 17}, dt), 1, 1e-5);
        add(d, permuted({2, 3, 5, 7}, dt), 2, 1e-6);
    }
    add("f32", contiguous({4, 1031}, F32), 1, 1e-5);
}

// layer_norm_backward: layer_norm's shapes and layouts, with dy of x's shape (a broadcast one too).
void gen_layer_norm_backward(Generator &g) {
    auto add = [&](const std::string &d, TensorSpec x, TensorSpec dy, int n_axes, double eps) {
        Params params;
        params.set(sized<tf_params_norm>());
        params.as<tf_params_norm>().n_axes = n_axes;
        params.as<tf_params_norm>().eps = eps;
        Shape ws(x.shape.end() - n_axes, x.shape.end()), s = x.shape;
        int32_t dt = x.dtype;
        char label[64];
        std::snprintf(label, sizeof label, "n_axes=%d eps=%g", n_axes, eps);
        g.add(d, {std::move(x), contiguous(ws, dt), std::move(dy)},
              {contiguous(s, dt), contiguous(ws, dt), contiguous(ws, dt)}, &params, label);
    };
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        add(d, contiguous({3, 5}, dt), contiguous({3, 5}, dt), 1, 1e-5);
        add(d, contiguous({7}, dt), contiguous({7}, dt), 1, 1e-5);
        add(d, contiguous({2, 3, 4}, dt), contiguous({2, 3, 4}, dt), 2, 1e-5);
        add(d, contiguous({2, 0, 5}, dt), contiguous({2, 0, 5}, dt), 1, 1e-5);
        add(d, contiguous({1, 1}, dt), contiguous({1, 1}, dt), 1, 1e-3);
        add(d, transposed({13, 17}, dt), contiguous({13, 17}, dt), 1, 1e-5);
        add(d, permuted({2, 3, 5, 7}, dt), transposed({2, 3, 5, 7}, dt), 2, 1e-6);
        add(d, contiguous({6, 9}, dt), expanded({9}, {6, 9}, dt), 1, 1e-5);
    }
    add("f32", contiguous({300, 64}, F32), contiguous({300, 64}, F32), 1, 1e-5);
    add("f32", contiguous({4, 1031}, F32), contiguous({4, 1031}, F32), 1, 1e-5);
}

void gen_rope(Generator &g) {
    struct R {
        int interleaved, inverse;
        double theta;
        int64_t offset;
    };
    auto add = [&](const std::string &d, TensorSpec x, const R &r) {
        Params params;
        params.set(sized<tf_params_rope>());
        params.as<tf_params_rope>().interleaved = r.interleaved, params.as<tf_params_rope>().inverse = r.inverse;
        params.as<tf_params_rope>().theta = r.theta, params.as<tf_params_rope>().position_offset = r.offset;
        char label[96];
        std::snprintf(label, sizeof label, "interleaved=%d inverse=%d theta=%g offset=%lld", r.interleaved, r.inverse,
                      r.theta, static_cast<long long>(r.offset));
        Shape s = x.shape;
        int32_t dt = x.dtype;
        g.add(d, {std::move(x)}, {contiguous(s, dt)}, &params, label);
    };
    const std::vector<R> variants = {{0, 0, 10000, 0}, {1, 0, 10000, 0}, {0, 1, 10000, 0}, {1, 1, 500, 5}};
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        for (const R &r : variants) add(d, contiguous({2, 3, 4, 8}, dt), r);
        add(d, contiguous({1, 7, 6}, dt), variants[0]);
        add(d, contiguous({5, 2}, dt), variants[3]);
        add(d, contiguous({2, 0, 8}, dt), variants[0]);
        add(d, transposed({3, 8, 6}, dt), variants[1]);
    }
    add("f32", contiguous({4, 64, 64}, F32), {0, 0, 10000, 3});
}

void gen_attention(Generator &g) {
    struct A {
        Shape batch_q, batch_kv;
        int64_t tq, tk, d, dv;
        int causal;
        bool mask;
        bool large = false;
    };
    const std::vector<A> family = {
        {{2}, {2}, 3, 5, 4, 6, 0, false}, {{2}, {2}, 3, 5, 4, 6, 0, true},
        {{2}, {2}, 3, 5, 4, 6, 1, false}, {{2, 2}, {2, 2}, 4, 4, 8, 8, 1, true},
        {{1}, {1}, 1, 9, 8, 8, 1, false}, {{2}, {1}, 3, 5, 4, 6, 0, false},
        {{}, {}, 5, 3, 4, 2, 1, false},   {{1}, {1}, 64, 67, 32, 16, 1, true, true},
    };
    for (const A &a : family)
        for (int32_t dt : a.large ? std::vector<int32_t>{F32} : all_dtypes()) {
            Shape batch = broadcast(a.batch_q, a.batch_kv);
            auto full = [&](int64_t r, int64_t c) {
                Shape s = batch;
                s.insert(s.end(), {r, c});
                return s;
            };
            auto side = [&](const Shape &own_batch, int64_t r, int64_t c) {
                Shape own = own_batch;
                own.insert(own.end(), {r, c});
                return operand(own, full(r, c), dt, Domain::uniform);
            };
            Params params;
            params.set(sized<tf_params_attention>());
            params.as<tf_params_attention>().causal = a.causal;
            params.as<tf_params_attention>().scale = 1.0 / std::sqrt(static_cast<double>(a.d));
            // Without a mask the core leaves the optional mask out (absent); one case per dtype
            // passes the explicit zero mask an ABI 1.0 plugin gets instead.
            const bool zero_mask = &a == &family.front();
            TensorSpec mask =
                a.mask ? expanded({a.tq, a.tk}, full(a.tq, a.tk), dt) : absent_input(full(a.tq, a.tk), dt);
            if (zero_mask) mask.absent = false;
            g.add(dtype_name(dt),
                  {side(a.batch_q, a.tq, a.d), side(a.batch_kv, a.tk, a.d), side(a.batch_kv, a.tk, a.dv), mask},
                  {contiguous(full(a.tq, a.dv), dt)}, &params,
                  std::string(a.causal ? "causal" : "") + (a.mask      ? " mask"
                                                           : zero_mask ? " zero mask"
                                                                       : " no mask"));
        }
}

// attention_backward: attention's cases (batch broadcast, causal, a mask or the core's zero
// scalar) with dy, each gradient of the broadcast batch shape.
void gen_attention_backward(Generator &g) {
    struct A {
        Shape batch_q, batch_kv;
        int64_t tq, tk, d, dv;
        int causal;
        bool mask;
    };
    const std::vector<A> family = {
        {{2}, {2}, 3, 5, 4, 6, 0, false}, {{2}, {2}, 3, 5, 4, 6, 1, true}, {{2, 2}, {2, 2}, 4, 4, 8, 8, 1, false},
        {{2}, {1}, 3, 5, 4, 6, 0, true},  {{}, {}, 5, 3, 4, 2, 1, false},  {{1}, {1}, 64, 64, 32, 32, 1, false},
    };
    for (const A &a : family)
        for (int32_t dt : all_dtypes()) {
            Shape batch = broadcast(a.batch_q, a.batch_kv);
            auto full = [&](int64_t r, int64_t c) {
                Shape s = batch;
                s.insert(s.end(), {r, c});
                return s;
            };
            auto side = [&](const Shape &own_batch, int64_t r, int64_t c) {
                Shape own = own_batch;
                own.insert(own.end(), {r, c});
                return operand(own, full(r, c), dt, Domain::uniform);
            };
            Params params;
            params.set(sized<tf_params_attention>());
            params.as<tf_params_attention>().causal = a.causal;
            params.as<tf_params_attention>().scale = 1.0 / std::sqrt(static_cast<double>(a.d));
            // As attention's: no mask is an absent operand, and one case per dtype passes the
            // explicit zero mask an ABI 1.0 plugin gets instead.
            const bool zero_mask = &a == &family.front();
            TensorSpec mask =
                a.mask ? expanded({a.tq, a.tk}, full(a.tq, a.tk), dt) : absent_input(full(a.tq, a.tk), dt);
            if (zero_mask) mask.absent = false;
            g.add(dtype_name(dt),
                  {side(a.batch_q, a.tq, a.d), side(a.batch_kv, a.tk, a.d), side(a.batch_kv, a.tk, a.dv), mask,
                   contiguous(full(a.tq, a.dv), dt)},
                  {contiguous(full(a.tq, a.d), dt), contiguous(full(a.tk, a.d), dt), contiguous(full(a.tk, a.dv), dt)},
                  &params,
                  std::string(a.causal ? "causal" : "") + (a.mask      ? " mask"
                                                           : zero_mask ? " zero mask"
                                                                       : " no mask"));
        }
}

void gen_embedding(Generator &g) {
    const bool backward = g.row().op == TF_OP_EMBEDDING_BACKWARD;
    auto add = [&](const std::string &d, TensorSpec table, TensorSpec idx, const std::string &extra = "") {
        int64_t v = table.shape[0], dim = table.shape[1];
        idx.domain = Domain::index, idx.limit = v;
        Shape rows = idx.shape;
        rows.push_back(dim);
        int32_t dt = table.dtype;
        if (backward)
            g.add(d, {contiguous(rows, dt), std::move(idx)}, {contiguous(table.shape, dt)}, nullptr, extra);
        else
            g.add(d, {std::move(table), std::move(idx)}, {contiguous(rows, dt)}, nullptr, extra);
    };
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        for (int32_t it : {I64, I32}) {
            const std::string di = d + " idx:" + dtype_name(it);
            add(di, contiguous({10, 4}, dt), contiguous({3}, it));
            add(di, contiguous({10, 4}, dt), contiguous({2, 3}, it));
            add(di, contiguous({3, 5}, dt), contiguous({17}, it), "duplicates");
            add(di, contiguous({10, 4}, dt), contiguous({}, it));
            add(di, contiguous({10, 4}, dt), contiguous({0}, it));
            add(di, transposed({10, 4}, dt), sliced({5}, it));
        }
    }
    add("f32 idx:i64", contiguous({1000, 33}, F32), contiguous({67}, I64));
}

// The quantized ops (issue 34): each of the nine block formats. A quantized spec counts elements
// (its last axis whole blocks); the runner fills its blocks with random quants and sane scales.
int64_t block_of(int32_t dtype) { return dtype >= TF_DTYPE_Q4_K ? 256 : 32; }

// Every other row of a [2 rows, k] quantized matrix: a row stride of two rows, starting one row
// in (whole blocks, so a view the core can make).
TensorSpec quant_rows_view(const Shape &shape, int32_t dtype) {
    const int64_t k = shape.back();
    return spec(shape, {2 * k, 1}, k, dtype, Domain::uniform, "row-view");
}

void gen_dequantize(Generator &g) {
    for (int32_t qt : quant_dtypes()) {
        const int64_t b = block_of(qt);
        const std::string d = dtype_name(qt);
        for (int32_t out : k_floats)
            g.add(d + " -> " + dtype_name(out), {contiguous({3, 2 * b}, qt)}, {contiguous({3, 2 * b}, out)});
        g.add(d + " -> f32", {contiguous({b}, qt)}, {contiguous({b}, F32)});
        g.add(d + " -> f32", {contiguous({2, 2, b}, qt)}, {contiguous({2, 2, b}, F32)});
        g.add(d + " -> f32", {quant_rows_view({3, b}, qt)}, {contiguous({3, b}, F32)});
    }
}

// quantize: f32/f16/bf16 -> each format. Domain::blocks puts zero blocks, tiny and large ones,
// one-signed, constant and outlier blocks (and a zero super-block) before the encoders.
void gen_quantize(Generator &g) {
    for (int32_t qt : quant_dtypes()) {
        const int64_t b = block_of(qt);
        const std::string d = dtype_name(qt);
        for (int32_t in : k_floats)
            g.add(std::string(dtype_name(in)) + " -> " + d + " blocks", {contiguous({4, 2 * b}, in, Domain::blocks)},
                  {contiguous({4, 2 * b}, qt)});
        g.add("f32 -> " + d, {contiguous({b}, F32)}, {contiguous({b}, qt)});
        g.add("f32 -> " + d + " wide", {contiguous({2, 2, b}, F32, Domain::wide)}, {contiguous({2, 2, b}, qt)});
        g.add("f32 -> " + d, {sliced({3, b}, F32)}, {contiguous({3, b}, qt)});
        g.add("f16 -> " + d, {contiguous({3, b}, F16)}, {quant_rows_view({3, b}, qt)});
    }
}

void gen_matmul_q(Generator &g) {
    for (int32_t qt : quant_dtypes()) {
        const int64_t k = 2 * block_of(qt) > 256 ? 512 : 256;
        const std::string d = dtype_name(qt);
        auto add = [&](const std::string &label, TensorSpec x, TensorSpec w, int32_t out_dt) {
            Shape out = x.shape;
            out.back() = w.shape[0];
            g.add(label, {std::move(x), std::move(w)}, {contiguous(out, out_dt)});
        };
        add("f32 w:" + d, contiguous({1, k}, F32), contiguous({37, k}, qt), F32);  // generation
        add("f32 w:" + d, contiguous({9, k}, F32), contiguous({24, k}, qt), F32);  // prefill
        add("f32 w:" + d, contiguous({2, 3, k}, F32), contiguous({5, k}, qt), F32);
        add("f32 w:" + d, sliced({4, k}, F32), quant_rows_view({6, k}, qt), F32);
        add("f16 w:" + d, contiguous({3, k}, F16), contiguous({7, k}, qt), F16);
        add("bf16 w:" + d + " out:f32", contiguous({3, k}, BF16), contiguous({7, k}, qt), F32);
    }
}

void gen_embedding_q(Generator &g) {
    for (int32_t qt : quant_dtypes()) {
        const int64_t b = block_of(qt);
        const std::string d = dtype_name(qt);
        for (int32_t it : {I64, I32}) {
            TensorSpec idx = contiguous({2, 3}, it);
            idx.domain = Domain::index, idx.limit = 10;
            g.add(d + " idx:" + dtype_name(it), {contiguous({10, 2 * b}, qt), idx}, {contiguous({2, 3, 2 * b}, F32)});
        }
        TensorSpec idx = sliced({4}, I32);
        idx.domain = Domain::index, idx.limit = 5;
        g.add(d + " idx:i32 -> f16", {quant_rows_view({5, b}, qt), idx}, {contiguous({4, b}, F16)});
    }
}

void gen_cross_entropy(Generator &g) {
    auto add = [&](const std::string &d, TensorSpec logits, TensorSpec labels, int reduction, int64_t ignore,
                   int64_t limit) {
        Params params;
        params.set(sized<tf_params_cross_entropy>());
        params.as<tf_params_cross_entropy>().reduction = reduction;
        params.as<tf_params_cross_entropy>().ignore_index = ignore;
        labels.domain = Domain::labels, labels.limit = limit, labels.ignore = ignore;
        Shape out = reduction == TF_REDUCTION_NONE ? Shape{logits.shape[0]} : Shape{};
        int32_t dt = logits.dtype;
        const char *names[] = {"none", "mean", "sum"};
        g.add(d, {std::move(logits), std::move(labels)}, {contiguous(out, dt)}, &params,
              std::string("reduction=") + names[reduction] + " ignore=" + std::to_string(ignore) +
                  (limit == 0 ? " all-ignored" : ""));
    };
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        for (int r : {TF_REDUCTION_NONE, TF_REDUCTION_MEAN, TF_REDUCTION_SUM})
            for (int32_t it : {I64, I32})
                add(d + " labels:" + dtype_name(it), contiguous({4, 5}, dt), contiguous({4}, it), r, -100, 5);
        add(d + " labels:i64", contiguous({4, 5}, dt), contiguous({4}, I64), TF_REDUCTION_MEAN, 2, 5);
        add(d + " labels:i64", contiguous({4, 5}, dt), contiguous({4}, I64), TF_REDUCTION_MEAN, -100, 0);
        add(d + " labels:i64", contiguous({0, 5}, dt), contiguous({0}, I64), TF_REDUCTION_SUM, -100, 5);
        add(d + " labels:i64", transposed({7, 3}, dt), sliced({7}, I64), TF_REDUCTION_NONE, -100, 3);
    }
    add("f32 labels:i64", contiguous({67, 1031}, F32), contiguous({67}, I64), TF_REDUCTION_MEAN, -100, 1031);
}

void gen_one_hot(Generator &g) {
    auto add = [&](const std::string &d, TensorSpec labels, int classes, int32_t out_dtype) {
        Params params;
        params.set(sized<tf_params_one_hot>());
        params.as<tf_params_one_hot>().num_classes = classes;
        labels.domain = Domain::index, labels.limit = classes;
        Shape out = labels.shape;
        out.push_back(classes);
        g.add(d, {std::move(labels)}, {contiguous(out, out_dtype)}, &params, "classes=" + std::to_string(classes));
    };
    for (int32_t out : all_dtypes())
        for (int32_t it : {I64, I32}) {
            const std::string d = std::string(dtype_name(it)) + "->" + dtype_name(out);
            add(d, contiguous({5}, it), 4, out);
            add(d, contiguous({2, 3}, it), 7, out);
            add(d, contiguous({}, it), 3, out);
            add(d, contiguous({0}, it), 3, out);
            add(d, sliced({6}, it), 5, out);
        }
    add("i64->f32", contiguous({1031}, I64), 67, F32);
}
// adamw_step: grad -> param, exp_avg, exp_avg_sq; sgd_step: grad -> param, momentum_buffer.
// The outputs are in-out: they start with values (exp_avg_sq non-negative, as a real state is).
void gen_optim(Generator &g) {
    const bool adamw = g.row().op == TF_OP_ADAMW_STEP;
    auto state = [](const Shape &s, int32_t dt, Domain dom = Domain::uniform) {
        TensorSpec t = contiguous(s, dt, dom);
        t.in_out = true;
        return t;
    };
    auto add = [&](const std::string &d, TensorSpec grad, const Params &params, const std::string &label) {
        const Shape s = grad.shape;
        const int32_t dt = grad.dtype;
        std::vector<TensorSpec> out = {state(s, dt), state(s, dt)};
        if (adamw) out.push_back(state(s, dt, Domain::positive));
        g.add(d, {std::move(grad)}, std::move(out), &params, label);
    };
    std::vector<ParamsVariant> variants;
    if (adamw) {
        for (int has_state : {0, 1})
            for (int decays : {0, 1}) {
                auto p = sized<tf_params_adamw_step>();
                p.has_state = has_state, p.decays = decays, p.decay = 1 - 1e-3 * 0.01;
                p.beta1 = 0.9, p.one_minus_beta1 = 0.1, p.beta2 = 0.999, p.one_minus_beta2 = 0.001;
                // Step 3: sqrt(1 - 0.999^3), lr 1e-3 / (1 - 0.9^3).
                p.root_bias_correction2 = std::sqrt(1 - std::pow(0.999, 3)), p.eps = 1e-8;
                p.step_size = 1e-3 / (1 - std::pow(0.9, 3));
                variants.push_back(
                    variant(p, "has_state=" + std::to_string(has_state) + " decays=" + std::to_string(decays)));
            }
    } else {
        for (int has_state : {0, 1})
            for (int decays : {0, 1})
                for (int nesterov : {0, 1}) {
                    auto p = sized<tf_params_sgd_step>();
                    p.has_state = has_state, p.decays = decays, p.nesterov = nesterov;
                    p.lr = 0.05, p.momentum = 0.9, p.weight_decay = decays ? 0.01 : 0;
                    variants.push_back(variant(p, "has_state=" + std::to_string(has_state) +
                                                      " decays=" + std::to_string(decays) +
                                                      " nesterov=" + std::to_string(nesterov)));
                }
    }
    for (int32_t dt : all_dtypes()) {
        const std::string d = dtype_name(dt);
        for (const ParamsVariant &v : variants) add(d, contiguous({13, 17}, dt), v.params, v.label);
        add(d, contiguous({}, dt), variants.back().params, variants.back().label);
        add(d, contiguous({0}, dt), variants.back().params, variants.back().label);
        add(d, sliced({13, 17}, dt), variants.back().params, variants.back().label);
    }
    add("f32", contiguous({4099}, F32), variants.back().params, variants.back().label);
}

void gen_own(Generator &g) {
    switch (g.row().op) {
    case TF_OP_CONV2D:
    case TF_OP_CONV2D_GRAD_INPUT:
    case TF_OP_CONV2D_GRAD_WEIGHT: gen_conv(g); return;
    case TF_OP_CONV2D_ACT: gen_conv_act(g); return;
    case TF_OP_MAX_POOL2D:
    case TF_OP_MAX_POOL2D_BACKWARD:
    case TF_OP_AVG_POOL2D:
    case TF_OP_AVG_POOL2D_BACKWARD: gen_pool(g); return;
    case TF_OP_SOFTMAX:
    case TF_OP_LOG_SOFTMAX: gen_softmax(g); return;
    case TF_OP_LAYER_NORM:
    case TF_OP_RMS_NORM: gen_norm(g); return;
    case TF_OP_LAYER_NORM_BACKWARD: gen_layer_norm_backward(g); return;
    case TF_OP_ROPE: gen_rope(g); return;
    case TF_OP_ATTENTION: gen_attention(g); return;
    case TF_OP_ATTENTION_BACKWARD: gen_attention_backward(g); return;
    case TF_OP_EMBEDDING:
    case TF_OP_EMBEDDING_BACKWARD: gen_embedding(g); return;
    case TF_OP_DEQUANTIZE: gen_dequantize(g); return;
    case TF_OP_QUANTIZE: gen_quantize(g); return;
    case TF_OP_MATMUL_Q: gen_matmul_q(g); return;
    case TF_OP_MATMUL_BIAS: gen_matmul_bias(g); return;
    case TF_OP_EMBEDDING_Q: gen_embedding_q(g); return;
    case TF_OP_CROSS_ENTROPY: gen_cross_entropy(g); return;
    case TF_OP_ONE_HOT: gen_one_hot(g); return;
    case TF_OP_CUMSUM: gen_cumsum(g); return;
    case TF_OP_ADAMW_STEP:
    case TF_OP_SGD_STEP: gen_optim(g); return;
    default: return;  // an OWN op without a generator has no cases: reported as "no cases"
    }
}

}  // namespace

const std::vector<OpRow> &op_rows() {
    static const std::vector<OpRow> rows = {
#define TF_OP(id, sym, name, kind, n_in, n_out, params, dtypes) {TF_OP_##sym, name, Kind::kind, n_in, n_out, dtypes},
#include "tinyfin/ops.def"
#undef TF_OP
    };
    return rows;
}

const OpRow &op_row(tf_op op) { return op_rows().at(static_cast<std::size_t>(op)); }

std::string dtypes_text(const OpRow &row) {
    auto word = [](char letter) -> std::string {
        switch (letter) {
        case 'A': return "any";
        case 'N': return "numeric";
        case 'F': return "float";
        case 'I': return "index";
        case 'B': return "bool";
        case 'Q': return "quantized";
        default: return "?";
        }
    };
    std::string text;
    bool first = true;
    for (const char *c = row.dtypes; *c; ++c) {
        if (*c == '>') {
            text += text.empty() ? "-> " : " -> ";
            first = true;
            continue;
        }
        if (*c == '?') {
            text += " (optional)";
            continue;
        }
        if (!first) text += ", ";
        text += word(*c);
        first = false;
    }
    return text;
}

const char *kind_name(Kind kind) {
    switch (kind) {
    case Kind::UNARY: return "unary";
    case Kind::BINARY: return "binary";
    case Kind::REDUCE: return "reduce";
    case Kind::MATMUL: return "matmul";
    case Kind::COPY: return "copy";
    case Kind::FILL: return "fill";
    case Kind::COMPARE: return "compare";
    case Kind::WHERE: return "where";
    case Kind::ARG: return "arg";
    case Kind::OWN: return "own";
    }
    return "?";
}

const std::vector<int32_t> &all_dtypes() {
    static const std::vector<int32_t> dtypes = {F32, F16, BF16, I32, I64, BOOL};
    return dtypes;
}

const std::vector<int32_t> &quant_dtypes() {
    static const std::vector<int32_t> dtypes = {TF_DTYPE_Q8_0, TF_DTYPE_Q4_0, TF_DTYPE_Q4_1,
                                                TF_DTYPE_Q5_0, TF_DTYPE_Q5_1, TF_DTYPE_Q4_K,
                                                TF_DTYPE_Q5_K, TF_DTYPE_Q6_K, TF_DTYPE_Q8_K};
    return dtypes;
}

std::size_t block_bytes(int32_t dtype) { return is_quantized(dtype) ? tf_kit::dtype_block_bytes(dtype) : 0; }

int64_t TensorSpec::numel() const { return product(shape); }

int64_t Case::elements() const {
    int64_t n = 0;
    for (const auto &t : inputs) n += t.storage_elems;
    for (const auto &t : outputs) n += t.storage_elems;
    return n;
}

bool Case::in_column() const {
    const OpRow &row = op_row(op);
    uint32_t at = 0;
    for (const std::vector<TensorSpec> *list : {&inputs, &outputs})
        for (const TensorSpec &t : *list)
            if (!class_admits(operand_class(row.op, at++), t.dtype)) return false;
    return true;
}

int32_t Case::dtype() const {
    // A quantized op is listed under its quantized operand's format.
    for (const std::vector<TensorSpec> *list : {&inputs, &outputs})
        for (const TensorSpec &t : *list)
            if (is_quantized(t.dtype)) return t.dtype;
    for (const auto &t : inputs)
        if (is_float(t.dtype)) return t.dtype;
    for (const auto &t : outputs)
        if (is_float(t.dtype)) return t.dtype;
    return inputs.empty() ? outputs[0].dtype : inputs[0].dtype;
}

TensorSpec contiguous(const Shape &shape, int32_t dtype, Domain domain) {
    return spec(shape, row_major(shape), 0, dtype, domain, "contiguous");
}

TensorSpec transposed(const Shape &shape, int32_t dtype, Domain domain) {
    const std::size_t r = shape.size();
    if (r < 2) throw std::logic_error("transposed: rank < 2");
    Shape stored = shape;
    std::swap(stored[r - 1], stored[r - 2]);
    Shape strides = row_major(stored);
    std::swap(strides[r - 1], strides[r - 2]);
    return spec(shape, strides, 0, dtype, domain, "transposed");
}

TensorSpec permuted(const Shape &shape, int32_t dtype, Domain domain) {
    Shape stored(shape.rbegin(), shape.rend());
    Shape rs = row_major(stored);
    Shape strides(rs.rbegin(), rs.rend());
    return spec(shape, strides, 0, dtype, domain, "permuted");
}

TensorSpec sliced(const Shape &shape, int32_t dtype, Domain domain) {
    Shape stored = shape;
    stored.back() = 2 * shape.back() + 1;
    Shape strides = row_major(stored);
    strides.back() = 2;
    return spec(shape, strides, 1, dtype, domain, "sliced");
}

TensorSpec absent_input(const Shape &shape, int32_t dtype) {
    TensorSpec t = expanded({}, shape, dtype, Domain::index);
    t.limit = 1;  // draws only 0
    t.absent = true;
    t.layout = "absent";
    return t;
}

TensorSpec expanded(const Shape &from, const Shape &shape, int32_t dtype, Domain domain) {
    Shape fs = row_major(from);
    Shape strides(shape.size(), 0);
    const std::size_t lead = shape.size() - from.size();
    for (std::size_t i = 0; i < from.size(); ++i) strides[lead + i] = from[i] == 1 && shape[lead + i] != 1 ? 0 : fs[i];
    TensorSpec t = spec(shape, strides, 0, dtype, domain, "broadcast");
    t.storage_elems = std::max<int64_t>(t.storage_elems, product(from) == 0 ? 0 : 1);
    return t;
}

TensorSpec channels_last(const Shape &shape, int32_t dtype, Domain domain) {
    Shape stored = {shape[0], shape[2], shape[3], shape[1]};
    Shape s = row_major(stored);
    return spec(shape, {s[0], s[3], s[1], s[2]}, 0, dtype, domain, "channels-last");
}

std::string shape_text(const Shape &shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
    return text + "]";
}

std::vector<Case> all_cases() {
    std::vector<Case> cases;
    for (const OpRow &row : op_rows()) {
        Generator g(cases, row);
        switch (row.kind) {
        case Kind::UNARY: gen_unary(g); break;
        case Kind::BINARY:
        case Kind::COMPARE:
        case Kind::WHERE: gen_broadcasting(g, row.kind); break;
        case Kind::REDUCE: gen_reduce(g); break;
        case Kind::ARG: gen_arg(g); break;
        case Kind::MATMUL: gen_matmul(g); break;
        case Kind::COPY: gen_copy(g); break;
        case Kind::FILL: gen_fill(g); break;
        case Kind::OWN: gen_own(g); break;
        }
    }
    return cases;
}

}  // namespace conform
