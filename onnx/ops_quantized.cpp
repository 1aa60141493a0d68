// Quantized ONNX ops as onnxruntime's quantization tool emits them: MatMulInteger, ConvInteger,
// QLinearMatMul, QLinearConv. The integer products run as float32 MatMul/Conv on the session's
// device, exact because every partial sum is an integer below 2^24 (operands split into 4-bit
// digits when the reduction is too long for that); the int32 accumulators are combined in int32.
#include <algorithm>
#include <functional>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;

bool is_8bit(ElementType t) { return t == ElementType::uint8 || t == ElementType::int8; }
double type_min(ElementType t) { return t == ElementType::uint8 ? 0 : -128; }
double type_max(ElementType t) { return t == ElementType::uint8 ? 255 : 127; }

// The 8-bit integer operand at input i, with a check that it is one.
void require_8bit(const Ctx &ctx, std::size_t i, const char *name) {
    if (!is_8bit(ctx.input(i).type))
        ctx.invalid(std::string(name) + " must be uint8 or int8, got " + element_type_name(ctx.input(i).type));
}

// An operand less its zero point, in float32 (exact: both are 8-bit integers), and the largest
// magnitude that difference can have for the zero points given (the bound the exactness check
// uses). zp is already shaped to broadcast against x.
struct Shifted {
    Tensor value;
    int64_t bound = 0;
};

Shifted shifted(const Ctx &ctx, std::size_t x_input, const Tensor &zp, const std::vector<int64_t> &zp_values) {
    const ElementType t = ctx.input(x_input).type;
    int64_t bound = 0;
    for (int64_t z : zp_values)
        bound = std::max({bound, z - static_cast<int64_t>(type_min(t)), static_cast<int64_t>(type_max(t)) - z});
    if (zp_values.empty()) bound = std::max(-static_cast<int64_t>(type_min(t)), static_cast<int64_t>(type_max(t)));
    const Tensor x = ctx.tensor(x_input).to(DType::f32);
    return {zp.defined() ? sub(x, zp) : x, bound};
}

// The zero point at input i (absent: none), checked against the operand's element type.
std::vector<int64_t> zero_point_values(const Ctx &ctx, std::size_t zp_input, std::size_t x_input) {
    if (!ctx.has_input(zp_input)) return {};
    if (ctx.input(zp_input).type != ctx.input(x_input).type)
        ctx.invalid("input " + std::to_string(zp_input) + " (zero point) is " +
                    element_type_name(ctx.input(zp_input).type) + " but input " + std::to_string(x_input) + " is " +
                    element_type_name(ctx.input(x_input).type) + ": they must have one element type");
    return ctx.ints(zp_input);
}

using Product = std::function<Tensor(const Tensor &, const Tensor &)>;

// x = 16 hi + lo with lo in [0, 15], exactly in float32 (x integer, |x| <= bound).
std::pair<Tensor, Tensor> split_digits(const Tensor &x, int64_t bound) {
    const double offset = 16.0 * static_cast<double>((bound + 15) / 16);
    const Tensor u = add(x, offset);  // >= 0
    const Tensor h = mul(u, 0.0625).to(DType::i32).to(DType::f32);
    return {sub(h, offset / 16), sub(u, mul(h, 16.0))};
}

// product(a, b) of integer tensors (|a| <= bound_a, |b| <= bound_b, k terms per output) as int32,
// exact: float32 holds every integer up to 2^24, so a product whose terms' magnitudes sum below
// that is exact in any order of summation. Longer ones split an operand into 4-bit digits and
// combine the digit products in int32.
Tensor exact_product(const Ctx &ctx, const Tensor &a, int64_t bound_a, const Tensor &b, int64_t bound_b, int64_t k,
                     const Product &product) {
    constexpr int64_t limit = int64_t{1} << 24;
    const int64_t per_term = std::max<int64_t>(bound_a * bound_b, 1);
    if (k <= limit / per_term) return product(a, b).to(DType::i32);
    if (bound_a > 16 && bound_a >= bound_b) {
        const auto [hi, lo] = split_digits(a, bound_a);
        return add(mul(exact_product(ctx, hi, (bound_a + 15) / 16, b, bound_b, k, product), 16.0),
                   exact_product(ctx, lo, 15, b, bound_b, k, product));
    }
    if (bound_b > 16) {
        const auto [hi, lo] = split_digits(b, bound_b);
        return add(mul(exact_product(ctx, a, bound_a, hi, (bound_b + 15) / 16, k, product), 16.0),
                   exact_product(ctx, a, bound_a, lo, 15, k, product));
    }
    ctx.unsupported("a reduction over " + std::to_string(k) + " terms (at most 65536 for exact integer products)");
}

// Runs another op's kernel (MatMul, Conv) on this node's attributes with float32 operands.
Tensor run_float_op(const Ctx &ctx, const char *op_type, int version, const Tensor &a, const Tensor &b) {
    const OpRow *row = find_op(op_type);
    const Value va = make(a, ElementType::float32), vb = make(b, ElementType::float32);
    Ctx sub_ctx = ctx;
    sub_ctx.version = version;
    sub_ctx.inputs = {&va, &vb};
    sub_ctx.n_outputs = 1;
    return row->run(sub_ctx).at(0).tensor;
}

// A per-row parameter (scalar, [M] or the operand's rank with 1 for K) shaped to broadcast
// against [..., M, K]; a per-column one (scalar, [N] or [..., 1, N]) against [..., K, N].
Tensor matmul_param(const Ctx &ctx, std::size_t i, int64_t operand_rank, int64_t length, bool per_row) {
    const Tensor p = ctx.tensor(i).to(DType::f32);
    if (p.numel() == 1) return p.reshape({});
    if (p.rank() == 1) {
        if (p.numel() != length || operand_rank < 2)
            ctx.invalid("input " + std::to_string(i) + " has " + std::to_string(p.numel()) + " elements; a per-" +
                        (per_row ? "row" : "column") + " parameter needs " + std::to_string(length) + " (or one)");
        return per_row ? p.reshape({length, 1}) : p;
    }
    if (p.rank() != operand_rank || p.size(per_row ? -1 : -2) != 1 || p.size(per_row ? -2 : -1) != length)
        ctx.invalid("input " + std::to_string(i) + " of shape " + shape_str(p.shape()) +
                    " is neither a scalar nor a per-" + (per_row ? "row" : "column") + " parameter");
    return p;
}

// A per-output-channel parameter (scalar or [M]) shaped [1, M, 1, ...] for a conv output of rank r.
Tensor channel_param(const Ctx &ctx, std::size_t i, int64_t channels, int64_t rank, DType dtype = DType::f32) {
    const Tensor p = ctx.tensor(i).to(dtype);
    if (p.numel() == 1) return p.reshape({});
    if (p.rank() != 1 || p.numel() != channels)
        ctx.invalid("input " + std::to_string(i) + " of shape " + shape_str(p.shape()) +
                    " must be a scalar or have one element per output channel (" + std::to_string(channels) + ")");
    Shape shape(static_cast<std::size_t>(rank), 1);
    shape[1] = channels;
    return p.reshape(shape);
}

void require_scalar(const Ctx &ctx, std::size_t i) {
    if (ctx.tensor(i).numel() != 1)
        ctx.invalid("input " + std::to_string(i) + " must be a scalar (per-tensor), got shape " +
                    shape_str(ctx.tensor(i).shape()));
}

void require_scale(const Ctx &ctx, std::size_t i) {
    if (ctx.input(i).type != ElementType::float32)
        ctx.invalid("input " + std::to_string(i) + " (a scale) must be float32, got " +
                    element_type_name(ctx.input(i).type));
}

// saturate(round_half_even(acc * multiplier) + zero point) in the zero point's type.
Value requantize(const Ctx &ctx, const Tensor &acc, const Tensor &multiplier, const Tensor &zp, ElementType type) {
    if (!is_8bit(type)) ctx.invalid("the output zero point must be uint8 or int8, got " + element_type_name(type));
    const Tensor y = add(round_half_even(mul(acc.to(DType::f32), multiplier)), zp);
    return make(clamp(y, type_min(type), type_max(type)).to(DType::i32), type);
}

// (A - a_zp)(B - b_zp) in int32: inputs A, a_zp, B, b_zp at the given positions.
Tensor integer_matmul(const Ctx &ctx, std::size_t ia, std::size_t iza, std::size_t ib, std::size_t izb) {
    require_8bit(ctx, ia, "A");
    require_8bit(ctx, ib, "B");
    const Tensor &a = ctx.tensor(ia), &b = ctx.tensor(ib);
    if (a.rank() < 1 || b.rank() < 1) ctx.invalid("A and B must have rank 1 or more");
    const int64_t m = a.rank() >= 2 ? a.size(-2) : 1, n = b.rank() >= 2 ? b.size(-1) : 1, k = a.size(-1);
    const auto za_values = zero_point_values(ctx, iza, ia), zb_values = zero_point_values(ctx, izb, ib);
    const Tensor za = ctx.has_input(iza) ? matmul_param(ctx, iza, a.rank(), m, true) : Tensor();
    const Tensor zb = ctx.has_input(izb) ? matmul_param(ctx, izb, b.rank(), n, false) : Tensor();
    const Shifted sa = shifted(ctx, ia, za, za_values), sb = shifted(ctx, ib, zb, zb_values);
    return exact_product(ctx, sa.value, sa.bound, sb.value, sb.bound, k,
                         [&](const Tensor &x, const Tensor &y) { return run_float_op(ctx, "MatMul", 13, x, y); });
}

std::vector<Value> matmul_integer(Ctx &ctx) { return {make(integer_matmul(ctx, 0, 2, 1, 3), ElementType::int32)}; }

std::vector<Value> qlinear_matmul(Ctx &ctx) {
    for (std::size_t i : {1, 4, 6}) require_scale(ctx, i);
    const Tensor acc = integer_matmul(ctx, 0, 2, 3, 5);
    const Tensor &a = ctx.tensor(0), &b = ctx.tensor(3);
    const int64_t m = a.rank() >= 2 ? a.size(-2) : 1, n = b.rank() >= 2 ? b.size(-1) : 1;
    for (auto [scale, zp] : {std::pair{1, 2}, std::pair{4, 5}, std::pair{6, 7}})
        if (ctx.tensor(scale).numel() != ctx.tensor(zp).numel())
            ctx.invalid("input " + std::to_string(scale) + " (scale) and input " + std::to_string(zp) +
                        " (zero point) must have one shape");
    const Tensor multiplier =
        div(mul(matmul_param(ctx, 1, a.rank(), m, true), matmul_param(ctx, 4, b.rank(), n, false)),
            matmul_param(ctx, 6, acc.rank(), acc.rank() >= 2 ? acc.size(-2) : 1, true));
    const Tensor zy = matmul_param(ctx, 7, acc.rank(), acc.rank() >= 2 ? acc.size(-2) : 1, true);
    return {requantize(ctx, acc, multiplier, zy, ctx.input(7).type)};
}

// (x - x_zp) * (w - w_zp) convolved in int32 with the node's Conv attributes; x padded by its zero
// point (zeros after the shift).
Tensor integer_conv(const Ctx &ctx, std::size_t ix, std::size_t izx, std::size_t iw, std::size_t izw) {
    require_8bit(ctx, ix, "x");
    require_8bit(ctx, iw, "w");
    const Tensor &x = ctx.tensor(ix), &w = ctx.tensor(iw);
    if (x.rank() < 3 || w.rank() != x.rank()) ctx.invalid("x and w must have the same rank, at least 3");
    const auto zx_values = zero_point_values(ctx, izx, ix), zw_values = zero_point_values(ctx, izw, iw);
    if (ctx.has_input(izx)) require_scalar(ctx, izx);
    const Tensor zx = ctx.has_input(izx) ? ctx.tensor(izx).to(DType::f32).reshape({}) : Tensor();
    // w's zero point per output channel: [M] -> [M, 1, 1, ...] against w.
    Tensor zw;
    if (ctx.has_input(izw)) {
        zw = channel_param(ctx, izw, w.size(0), x.rank());
        if (zw.rank() != 0)
            zw = zw.reshape(Shape{w.size(0)}).reshape([&] {
                Shape s(static_cast<std::size_t>(w.rank()), 1);
                s[0] = w.size(0);
                return s;
            }());
    }
    const Shifted sx = shifted(ctx, ix, zx, zx_values), sw = shifted(ctx, iw, zw, zw_values);
    int64_t k = 1;
    for (int64_t d = 1; d < w.rank(); ++d) k *= w.size(d);
    return exact_product(ctx, sx.value, sx.bound, sw.value, sw.bound, k,
                         [&](const Tensor &a, const Tensor &b) { return run_float_op(ctx, "Conv", 11, a, b); });
}

std::vector<Value> conv_integer(Ctx &ctx) { return {make(integer_conv(ctx, 0, 2, 1, 3), ElementType::int32)}; }

std::vector<Value> qlinear_conv(Ctx &ctx) {
    for (std::size_t i : {1, 4, 6}) require_scale(ctx, i);
    require_scalar(ctx, 1);
    require_scalar(ctx, 6);
    require_scalar(ctx, 7);
    Tensor acc = integer_conv(ctx, 0, 2, 3, 5);
    const int64_t channels = ctx.tensor(3).size(0);
    if (ctx.tensor(4).numel() != ctx.tensor(5).numel()) ctx.invalid("w_scale and w_zero_point must have one shape");
    if (ctx.has_input(8)) {
        if (ctx.input(8).type != ElementType::int32) ctx.invalid("B must be int32");
        if (ctx.tensor(8).rank() != 1 || ctx.tensor(8).numel() != channels)
            ctx.invalid("B must have one element per output channel (" + std::to_string(channels) + ")");
        acc = add(acc, channel_param(ctx, 8, channels, acc.rank(), DType::i32));
    }
    const Tensor multiplier =
        div(mul(ctx.tensor(1).to(DType::f32).reshape({}), channel_param(ctx, 4, channels, acc.rank())),
            ctx.tensor(6).to(DType::f32).reshape({}));
    const Tensor zy = ctx.tensor(7).to(DType::f32).reshape({});
    return {requantize(ctx, acc, multiplier, zy, ctx.input(7).type)};
}

constexpr OpRow rows[] = {
    {"MatMulInteger", 10, 10, matmul_integer},
    {"ConvInteger", 10, 10, conv_integer},
    {"QLinearMatMul", 10, 10, qlinear_matmul},
    {"QLinearConv", 10, 10, qlinear_conv},
};

}  // namespace

std::span<const OpRow> quantized_ops() { return rows; }

}  // namespace tinyfin::onnx::detail
