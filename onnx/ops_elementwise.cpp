// Elementwise ONNX ops: arithmetic, comparisons, logic, activations, Cast, Clip, Where.
// Each is one tinyfin op or an exact composition of them (docs/onnx.md lists which).
#include <cmath>
#include <limits>
#include <random>

#include "internal.hpp"

namespace tinyfin::onnx::detail {

// floor(x) for floats, exact: truncation toward zero through int64, one less where that rose
// above x; |x| >= 2^22 (already an integer in every float dtype), inf and NaN pass unchanged.
Tensor floor_of(const Tensor &x) {
    const Tensor t = x.to(DType::i64).to(x.dtype());
    const Tensor down = where(gt(t, x), sub(t, 1.0), t);
    const Tensor passes = ge(abs(x), scalar_like(x, 4194304.0));
    return where(passes, x, where(ne(x, x), x, down));
}

// The quantizer's rounding: half to even, as round_op.
Tensor round_half_even(const Tensor &x) {
    const Tensor r = floor_of(add(x, 0.5));
    const Tensor halfway = eq(sub(r, x), scalar_like(x, 0.5));
    const Tensor odd = ne(sub(r, mul(floor_of(div(r, 2.0)), 2.0)), scalar_like(x, 0));
    const Tensor both = mul(halfway.to(DType::i32), odd.to(DType::i32)).to(DType::boolean);
    return where(ge(abs(x), scalar_like(x, 4194304.0)), x, where(both, sub(r, 1.0), r));
}

namespace {

using Ctx = NodeContext;

// Output 0 of the input's element type.
std::vector<Value> like_input(const Ctx &ctx, Tensor t) { return {make(std::move(t), ctx.input(0).type)}; }

void require_float(const Ctx &ctx, std::size_t i) {
    if (!is_float(ctx.input(i).type))
        ctx.unsupported("input " + std::to_string(i) + " of element type " + element_type_name(ctx.input(i).type) +
                        " (this op takes float32, float16, bfloat16, float64)");
}

void require_same_type(const Ctx &ctx) {
    for (std::size_t i = 1; i < ctx.n_inputs(); ++i)
        if (ctx.has_input(i) && ctx.input(i).type != ctx.input(0).type)
            ctx.invalid("inputs of different element types " + element_type_name(ctx.input(0).type) + " and " +
                        element_type_name(ctx.input(i).type));
}

template <Tensor (*Op)(const Tensor &, const Tensor &)>
std::vector<Value> binary(Ctx &ctx) {
    require_same_type(ctx);
    return like_input(ctx, Op(ctx.tensor(0), ctx.tensor(1)));
}

template <Tensor (*Op)(const Tensor &, const Tensor &)>
std::vector<Value> compare(Ctx &ctx) {
    require_same_type(ctx);
    return {make(Op(ctx.tensor(0), ctx.tensor(1)), ElementType::boolean)};
}

// Integer division truncates toward zero (C, ONNX); tinyfin's div on integers does the same.
Tensor div_op(const Tensor &a, const Tensor &b) { return div(a, b); }

std::vector<Value> pow_op(Ctx &ctx) {
    const Tensor &base = ctx.tensor(0);
    Tensor exponent = ctx.tensor(1);
    if (!is_float(ctx.input(0).type) && is_float(ctx.input(1).type)) {
        // An integer base with a float exponent: computed in float, cast back like the spec's numpy.
        return like_input(ctx, pow(base.to(exponent.dtype()), exponent).to(base.dtype()));
    }
    if (exponent.dtype() != base.dtype()) exponent = exponent.to(base.dtype());
    return like_input(ctx, pow(base, exponent));
}

template <Tensor (*Op)(const Tensor &, const Tensor &)>
std::vector<Value> variadic(Ctx &ctx) {
    require_same_type(ctx);
    Tensor acc = ctx.tensor(0);
    for (std::size_t i = 1; i < ctx.n_inputs(); ++i) acc = Op(acc, ctx.tensor(i));
    // A single input still leaves as a new value (not a view of the input).
    if (ctx.n_inputs() == 1) acc = acc.contiguous();
    return like_input(ctx, acc);
}

std::vector<Value> mean_op(Ctx &ctx) {
    require_float(ctx, 0);
    std::vector<Value> sum = variadic<add>(ctx);
    return like_input(ctx, div(sum[0].tensor, static_cast<double>(ctx.n_inputs())));
}

template <Tensor (*Op)(const Tensor &)>
std::vector<Value> unary(Ctx &ctx) {
    return like_input(ctx, Op(ctx.tensor(0)));
}

template <Tensor (*Op)(const Tensor &)>
std::vector<Value> unary_float(Ctx &ctx) {
    require_float(ctx, 0);
    return like_input(ctx, Op(ctx.tensor(0)));
}

std::vector<Value> reciprocal(Ctx &ctx) {
    require_float(ctx, 0);
    return like_input(ctx, div(1.0, ctx.tensor(0)));
}

// Any value: a tensor, a sequence (version 14 on) or an optional (16 on).
std::vector<Value> identity(Ctx &ctx) { return {ctx.value(0)}; }

// Training-mode Dropout's mask: element i is kept when the i-th draw u of [0, 1) is >= ratio.
// The draws are those of numpy's legacy generator seeded with the seed attribute (MT19937 from
// init_genrand(seed), 53-bit doubles from two 32-bit words), which is what ONNX's reference
// implementation uses, so a seeded node reproduces its masks; without a seed, a fresh one per run.
std::vector<uint8_t> dropout_mask(const Ctx &ctx, int64_t n, double ratio) {
    const uint64_t seed =
        ctx.has_attr("seed") ? static_cast<uint64_t>(ctx.attr_int("seed", 0)) : std::random_device{}();
    std::mt19937 draw(static_cast<uint32_t>(seed));
    std::vector<uint8_t> keep(static_cast<std::size_t>(n));
    for (uint8_t &k : keep) {
        const uint32_t a = draw() >> 5, b = draw() >> 6;
        k = (a * 67108864.0 + b) / 9007199254740992.0 >= ratio;
    }
    return keep;
}

std::vector<Value> dropout(Ctx &ctx) {
    const double ratio =
        ctx.version >= 12 ? (ctx.has_input(1) ? ctx.doubles(1).at(0) : 0.5) : ctx.attr_float("ratio", 0.5);
    const bool training = ctx.version >= 12 && ctx.has_input(2) && ctx.tensor(2).item<bool>();
    const Tensor &x = ctx.tensor(0);
    if (training && ratio != 0) {
        require_float(ctx, 0);
        if (!(ratio > 0 && ratio < 1)) ctx.invalid("ratio must be in [0, 1) in training mode");
        if (x.numel() > (int64_t{1} << 31)) ctx.unsupported("a training-mode Dropout over 2^31 elements");
        const std::vector<uint8_t> keep = dropout_mask(ctx, x.numel(), ratio);
        const Tensor mask = from_host(keep.data(), x.shape(), DType::boolean, ctx.device);
        std::vector<Value> out{make(where(mask, mul(x, 1.0 / (1.0 - ratio)), 0.0), ctx.input(0).type)};
        if (ctx.n_outputs > 1) out.push_back(make(mask, ElementType::boolean));
        return out;
    }
    std::vector<Value> out{ctx.input(0)};
    if (ctx.n_outputs > 1) out.push_back(make(full(x.shape(), 1, DType::boolean, ctx.device), ElementType::boolean));
    return out;
}

// Mod: fmod = 0 (integers): the remainder with the divisor's sign (Python's %); fmod = 1: the
// remainder with the dividend's sign (C's fmod).
std::vector<Value> mod(Ctx &ctx) {
    require_same_type(ctx);
    const Tensor &a = ctx.tensor(0), &b = ctx.tensor(1);
    const bool fmod = ctx.attr_int("fmod", 0) != 0;
    if (is_float(ctx.input(0).type)) {
        if (!fmod) ctx.invalid("fmod must be 1 for floating-point inputs");
        // a - trunc(a / b) b, the quotient truncated through int64.
        const Tensor q = div(a, b);
        return like_input(ctx, sub(a, mul(q.to(DType::i64).to(a.dtype()), b)));
    }
    const Tensor q = div(a, b);  // truncates toward zero
    const Tensor r = sub(a, mul(q, b));
    if (fmod) return like_input(ctx, r);
    const Tensor zero = scalar_like(r, 0);
    // A non-zero remainder whose sign differs from the divisor's moves by one divisor.
    const Tensor differ = ne(lt(r, zero), lt(b, zero));
    return like_input(ctx, where(ne(r, zero), where(differ, add(r, b), r), r));
}

// BitShift on unsigned integers: multiplying or dividing by 2^y (wrapping to the type on the
// way out, value_to_host).
std::vector<Value> bit_shift(Ctx &ctx) {
    require_same_type(ctx);
    const Tensor &x = ctx.tensor(0), &y = ctx.tensor(1);
    const Tensor factor = pow(scalar_like(y, 2), y);
    const std::string direction = ctx.attr_string("direction", "");
    if (direction == "LEFT") return like_input(ctx, mul(x, factor));
    if (direction == "RIGHT") return like_input(ctx, div(x, factor));
    ctx.invalid("direction must be LEFT or RIGHT");
}

std::vector<Value> sinh_op(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    return like_input(ctx, mul(sub(exp(x), exp(neg(x))), 0.5));
}

std::vector<Value> cosh_op(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    return like_input(ctx, mul(add(exp(x), exp(neg(x))), 0.5));
}

std::vector<Value> tan_op(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    return like_input(ctx, div(sin(x), cos(x)));
}

std::vector<Value> leaky_relu(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    return like_input(ctx, where(ge(x, scalar_like(x, 0)), x, mul(x, ctx.attr_float("alpha", 0.01))));
}

std::vector<Value> prelu(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    return like_input(ctx, where(lt(x, scalar_like(x, 0)), mul(x, ctx.tensor(1)), x));
}

std::vector<Value> elu(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    const double alpha = ctx.attr_float("alpha", 1.0);
    return like_input(ctx, where(gt(x, scalar_like(x, 0)), x, mul(sub(exp(x), 1.0), alpha)));
}

std::vector<Value> selu(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    const double alpha = ctx.attr_float("alpha", 1.67326319217681884765625);
    const double gamma = ctx.attr_float("gamma", 1.05070102214813232421875);
    return like_input(ctx, mul(where(gt(x, scalar_like(x, 0)), x, sub(mul(exp(x), alpha), alpha)), gamma));
}

std::vector<Value> celu(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    const double alpha = ctx.attr_float("alpha", 1.0);
    return like_input(ctx, add(maximum(x, 0.0), minimum(mul(sub(exp(div(x, alpha)), 1.0), alpha), 0.0)));
}

std::vector<Value> thresholded_relu(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    return like_input(ctx, where(gt(x, scalar_like(x, ctx.attr_float("alpha", 1.0))), x, 0.0));
}

std::vector<Value> hard_sigmoid(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    return like_input(ctx, clamp(add(mul(x, ctx.attr_float("alpha", 0.2)), ctx.attr_float("beta", 0.5)), 0, 1));
}

std::vector<Value> hard_swish(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    return like_input(ctx, mul(x, clamp(add(mul(x, 1.0 / 6.0), 0.5), 0, 1)));
}

std::vector<Value> softplus(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    // log(1 + e^x) = max(x, 0) + log(1 + e^-|x|): no overflow for large x.
    return like_input(ctx, add(maximum(x, 0.0), log(add(exp(neg(abs(x))), 1.0))));
}

std::vector<Value> softsign(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    return like_input(ctx, div(x, add(abs(x), 1.0)));
}

std::vector<Value> shrink(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const double lambd = ctx.attr_float("lambd", 0.5), bias = ctx.attr_float("bias", 0.0);
    const Tensor zero = scalar_like(x, 0);
    Tensor out =
        where(lt(x, scalar_like(x, -lambd)), add(x, bias), where(gt(x, scalar_like(x, lambd)), sub(x, bias), zero));
    return like_input(ctx, out);
}

std::vector<Value> sign(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const Tensor zero = scalar_like(x, 0);
    return like_input(ctx, where(gt(x, zero), scalar_like(x, 1), where(lt(x, zero), scalar_like(x, -1), zero)));
}

std::vector<Value> floor_op(Ctx &ctx) {
    require_float(ctx, 0);
    return like_input(ctx, floor_of(ctx.tensor(0)));
}

std::vector<Value> ceil_op(Ctx &ctx) {
    require_float(ctx, 0);
    return like_input(ctx, neg(floor_of(neg(ctx.tensor(0)))));
}

std::vector<Value> round_op(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    // Half to even: floor(x + 0.5), one less where x was exactly halfway and that is odd.
    const Tensor r = floor_of(add(x, 0.5));
    const Tensor halfway = eq(sub(r, x), scalar_like(x, 0.5));
    const Tensor odd = ne(sub(r, mul(floor_of(div(r, 2.0)), 2.0)), scalar_like(x, 0));
    const Tensor rounded = where(mul(halfway.to(DType::i32), odd.to(DType::i32)).to(DType::boolean), sub(r, 1.0), r);
    return like_input(ctx, where(ge(abs(x), scalar_like(x, 4194304.0)), x, rounded));
}

// A per-axis parameter [C] shaped to broadcast along axis of a rank-r tensor (a scalar stays).
Tensor along_axis(const Tensor &p, int64_t axis, int64_t rank, const Ctx &ctx) {
    if (p.rank() == 0 || p.numel() == 1) return p.reshape({});
    axis = normalize_axis(axis, rank, ctx);
    Shape shape(static_cast<std::size_t>(rank), 1);
    shape[axis] = p.numel();
    return p.reshape(shape);
}

std::vector<Value> quantize_linear(Ctx &ctx) {
    const Tensor x = ctx.tensor(0).to(DType::f32);
    const int64_t axis = ctx.attr_int("axis", 1);
    const Tensor scale = along_axis(ctx.tensor(1).to(DType::f32), axis, x.rank(), ctx);
    const ElementType type = ctx.has_input(2) ? ctx.input(2).type : ElementType::uint8;
    const Tensor zp = ctx.has_input(2) ? along_axis(ctx.tensor(2).to(DType::f32), axis, x.rank(), ctx)
                                       : scalar(0, DType::f32, ctx.device);
    if (type != ElementType::uint8 && type != ElementType::int8)
        ctx.unsupported("output type " + element_type_name(type));
    const double lo = type == ElementType::uint8 ? 0 : -128, hi = type == ElementType::uint8 ? 255 : 127;
    const Tensor q = clamp(add(round_half_even(div(x, scale)), zp), lo, hi);
    return {make(q.to(DType::i32), type)};
}

std::vector<Value> dequantize_linear(Ctx &ctx) {
    const Tensor x = ctx.tensor(0).to(DType::f32);
    const int64_t axis = ctx.attr_int("axis", 1);
    const Tensor scale = along_axis(ctx.tensor(1).to(DType::f32), axis, x.rank(), ctx);
    const Tensor zp = ctx.has_input(2) ? along_axis(ctx.tensor(2).to(DType::f32), axis, x.rank(), ctx)
                                       : scalar(0, DType::f32, ctx.device);
    return {make(mul(sub(x, zp), scale), ElementType::float32)};
}

std::vector<Value> dynamic_quantize_linear(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const Tensor hi = maximum(max(x), 0.0), lo = minimum(min(x), 0.0);
    const Tensor scale = div(sub(hi, lo), 255.0);
    const Tensor zp = clamp(round_half_even(div(neg(lo), scale)), 0, 255);
    const Tensor y = clamp(add(round_half_even(div(x, scale)), zp), 0, 255);
    return {make(y.to(DType::i32), ElementType::uint8), make(scale, ElementType::float32),
            make(zp.to(DType::i32), ElementType::uint8)};
}

std::vector<Value> is_nan(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    return {make(ne(x, x), ElementType::boolean)};
}

std::vector<Value> is_inf(Ctx &ctx) {
    require_float(ctx, 0);
    const Tensor &x = ctx.tensor(0);
    const bool positive = ctx.attr_int("detect_positive", 1) != 0, negative = ctx.attr_int("detect_negative", 1) != 0;
    const double inf = std::numeric_limits<double>::infinity();
    Tensor out = full(x.shape(), 0, DType::boolean, ctx.device);
    if (positive) out = where(eq(x, scalar_like(x, inf)), 1.0, out);
    if (negative) out = where(eq(x, scalar_like(x, -inf)), 1.0, out);
    return {make(out, ElementType::boolean)};
}

void require_bool(const Ctx &ctx) {
    for (std::size_t i = 0; i < ctx.n_inputs(); ++i)
        if (ctx.input(i).type != ElementType::boolean) ctx.invalid("inputs must be bool");
}

std::vector<Value> and_op(Ctx &ctx) {
    require_bool(ctx);
    return {make(where(ctx.tensor(0), ctx.tensor(1), 0.0), ElementType::boolean)};
}
std::vector<Value> or_op(Ctx &ctx) {
    require_bool(ctx);
    return {make(where(ctx.tensor(0), 1.0, ctx.tensor(1)), ElementType::boolean)};
}
std::vector<Value> xor_op(Ctx &ctx) {
    require_bool(ctx);
    return {make(ne(ctx.tensor(0), ctx.tensor(1)), ElementType::boolean)};
}
std::vector<Value> not_op(Ctx &ctx) {
    require_bool(ctx);
    return {make(eq(ctx.tensor(0), scalar_like(ctx.tensor(0), 0)), ElementType::boolean)};
}

std::vector<Value> where_op(Ctx &ctx) {
    if (ctx.input(0).type != ElementType::boolean) ctx.invalid("the condition must be bool");
    if (ctx.input(1).type != ctx.input(2).type) ctx.invalid("X and Y have different element types");
    return {make(where(ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)), ctx.input(1).type)};
}

std::vector<Value> clip(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    if (ctx.version < 11) {
        lo = ctx.attr_float("min", lo);
        hi = ctx.attr_float("max", hi);
    } else {
        if (ctx.has_input(1)) lo = ctx.doubles(1).at(0);
        if (ctx.has_input(2)) hi = ctx.doubles(2).at(0);
    }
    // min > max gives max everywhere (the spec's numpy.clip).
    Tensor out = x;
    if (!std::isinf(lo) || lo > 0) out = maximum(out, lo);
    if (!std::isinf(hi) || hi < 0) out = minimum(out, hi);
    return like_input(ctx, out);
}

ElementType cast_target(const Ctx &ctx, int64_t to) {
    const auto type = static_cast<ElementType>(to);
    if (type == ElementType::string || element_size(type) == 0 || type == ElementType::complex64 ||
        type == ElementType::complex128)
        ctx.unsupported("cast to " + element_type_name(type));
    return type;
}

Value cast_to(const Ctx &ctx, ElementType type) {
    const Value &in = ctx.input(0);
    if (in.type == ElementType::string) ctx.unsupported("cast from string");
    // Values are never written after they are made, so a cast to the same dtype may share storage.
    // Narrow integer types (int8, uint8...) wrap only on the way out (value_to_host).
    return make(in.tensor.to(compute_dtype(type)), type);
}

std::vector<Value> cast_op(Ctx &ctx) { return {cast_to(ctx, cast_target(ctx, ctx.attr_int("to", 0)))}; }
std::vector<Value> cast_like(Ctx &ctx) { return {cast_to(ctx, ctx.input(1).type)}; }

constexpr OpRow rows[] = {
    {"Add", 7, 14, binary<add>},
    {"Sub", 7, 14, binary<sub>},
    {"Mul", 7, 14, binary<mul>},
    {"Div", 7, 14, binary<div_op>},
    {"Pow", 7, 15, pow_op},
    {"Max", 6, 13, variadic<maximum>},
    {"Min", 6, 13, variadic<minimum>},
    {"Sum", 6, 13, variadic<add>},
    {"Mean", 6, 13, mean_op},
    {"Equal", 7, 13, compare<eq>},
    {"Less", 7, 13, compare<lt>},
    {"LessOrEqual", 12, 16, compare<le>},
    {"Greater", 7, 13, compare<gt>},
    {"GreaterOrEqual", 12, 16, compare<ge>},
    {"And", 7, 7, and_op},
    {"Or", 7, 7, or_op},
    {"Xor", 7, 7, xor_op},
    {"Not", 1, 1, not_op},
    {"Where", 9, 16, where_op},
    {"Neg", 6, 13, unary<neg>},
    {"Abs", 6, 13, unary<abs>},
    {"Relu", 6, 14, unary<relu>},
    {"Exp", 6, 13, unary_float<exp>},
    {"Log", 6, 13, unary_float<log>},
    {"Sqrt", 6, 13, unary_float<sqrt>},
    {"Tanh", 6, 13, unary_float<tanh>},
    {"Sigmoid", 6, 13, unary_float<sigmoid>},
    {"Erf", 9, 13, unary_float<erf>},
    {"Sin", 7, 7, unary_float<sin>},
    {"Sinh", 9, 9, sinh_op},
    {"Cosh", 9, 9, cosh_op},
    {"Tan", 7, 7, tan_op},
    {"Mod", 10, 13, mod},
    {"BitShift", 11, 11, bit_shift},
    {"Cos", 7, 7, unary_float<cos>},
    {"Asin", 7, 7, unary_float<asin>},
    {"Acos", 7, 7, unary_float<acos>},
    {"Atan", 7, 7, unary_float<atan>},
    {"Asinh", 9, 9, unary_float<asinh>},
    {"Acosh", 9, 9, unary_float<acosh>},
    {"Atanh", 9, 9, unary_float<atanh>},
    {"Reciprocal", 6, 13, reciprocal},
    {"Floor", 6, 13, floor_op},
    {"Ceil", 6, 13, ceil_op},
    {"Round", 11, 11, round_op},
    {"Sign", 9, 13, sign},
    {"IsNaN", 9, 13, is_nan},
    {"QuantizeLinear", 10, 13, quantize_linear},
    {"DequantizeLinear", 10, 13, dequantize_linear},
    {"DynamicQuantizeLinear", 11, 11, dynamic_quantize_linear},
    {"IsInf", 10, 10, is_inf},
    {"LeakyRelu", 6, 16, leaky_relu},
    {"PRelu", 7, 16, prelu},
    {"Elu", 6, 6, elu},
    {"Selu", 6, 6, selu},
    {"Celu", 12, 12, celu},
    {"ThresholdedRelu", 10, 10, thresholded_relu},
    {"HardSigmoid", 6, 6, hard_sigmoid},
    {"HardSwish", 14, 14, hard_swish},
    {"Softplus", 1, 1, softplus},
    {"Softsign", 1, 1, softsign},
    {"Shrink", 9, 9, shrink},
    {"Identity", 1, 16, identity},
    {"Dropout", 7, 13, dropout},
    {"Clip", 6, 13, clip},
    {"Cast", 6, 13, cast_op},
    {"CastLike", 15, 15, cast_like},
};

}  // namespace

std::span<const OpRow> elementwise_ops() { return rows; }

}  // namespace tinyfin::onnx::detail
