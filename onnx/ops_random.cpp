// Random ops: Bernoulli, RandomUniform(Like), RandomNormal(Like). The draws are tinyfin::rand /
// randn on the session's device (reproducible for a seed on every backend); the seed attribute's
// float bits seed them, a node without one draws a fresh seed per run.
#include <bit>
#include <random>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;

uint64_t seed_of(const Ctx &ctx) {
    if (!ctx.has_attr("seed")) return (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
    return std::bit_cast<uint32_t>(static_cast<float>(ctx.attr_float("seed", 0)));
}

// The dtype attribute's element type (fallback when absent), which must be a float type.
ElementType output_type(const Ctx &ctx, ElementType fallback, bool floats_only) {
    const auto type = ctx.has_attr("dtype") ? static_cast<ElementType>(ctx.attr_int("dtype", 0)) : fallback;
    const bool ok = floats_only ? is_float(type)
                                : type != ElementType::string && type != ElementType::undefined &&
                                      type != ElementType::complex64 && type != ElementType::complex128;
    if (!ok) ctx.invalid("dtype " + element_type_name(type) + " is not allowed here");
    return type;
}

Shape shape_attribute(const Ctx &ctx) {
    if (!ctx.has_attr("shape")) ctx.invalid("attribute shape is required");
    const auto shape = ctx.attr_ints("shape");
    ctx.check_size(shape, 4);
    return shape;
}

std::vector<Value> bernoulli(Ctx &ctx) {
    if (!is_float(ctx.input(0).type)) ctx.invalid("input must be a float tensor of probabilities");
    const Tensor &p = ctx.tensor(0);
    const ElementType type = output_type(ctx, ctx.input(0).type, false);
    const Tensor u = rand(p.shape(), seed_of(ctx), ctx.device);
    return {make(lt(u, p.to(DType::f32)).to(compute_dtype(type)), type)};
}

template <bool Normal, bool Like>
std::vector<Value> random_op(Ctx &ctx) {
    const Shape shape = Like ? ctx.tensor(0).shape() : shape_attribute(ctx);
    const ElementType type =
        output_type(ctx, Like && is_float(ctx.input(0).type) ? ctx.input(0).type : ElementType::float32, true);
    const uint64_t seed = seed_of(ctx);
    Tensor r;
    if (Normal) {
        r = add(mul(randn(shape, seed, ctx.device), ctx.attr_float("scale", 1.0)), ctx.attr_float("mean", 0.0));
    } else {
        const double low = ctx.attr_float("low", 0.0), high = ctx.attr_float("high", 1.0);
        r = add(mul(rand(shape, seed, ctx.device), high - low), low);
    }
    return {make(r.to(compute_dtype(type)), type)};
}

constexpr OpRow rows[] = {
    {"Bernoulli", 15, 15, bernoulli},
    {"RandomUniform", 1, 1, random_op<false, false>},
    {"RandomUniformLike", 1, 1, random_op<false, true>},
    {"RandomNormal", 1, 1, random_op<true, false>},
    {"RandomNormalLike", 1, 1, random_op<true, true>},
};

}  // namespace

std::span<const OpRow> random_ops() { return rows; }

}  // namespace tinyfin::onnx::detail
