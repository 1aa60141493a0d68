// Reductions and ArgMax/ArgMin. Axes come from the attribute, or from input 1 where the op's
// version takes them as an input (ReduceSum from 13).
#include <algorithm>
#include <limits>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;

struct Reduction {
    std::vector<int64_t> axes;  // normalised; empty: none (noop) when noop is set, else all
    bool keepdims;
    bool noop;
};

Reduction reduction(const Ctx &ctx, bool axes_input) {
    const Tensor &x = ctx.tensor(0);
    Reduction r{{}, ctx.attr_int("keepdims", 1) != 0, false};
    std::vector<int64_t> axes =
        axes_input ? (ctx.has_input(1) ? ctx.ints(1) : std::vector<int64_t>{}) : ctx.attr_ints("axes");
    if (axes.empty()) {
        if (ctx.attr_int("noop_with_empty_axes", 0) != 0) r.noop = true;
        for (int64_t i = 0; i < x.rank(); ++i) r.axes.push_back(i);
        return r;
    }
    for (int64_t a : axes) r.axes.push_back(normalize_axis(a, x.rank(), ctx));
    return r;
}

// x reduced with f over the node's axes; float-only reductions of integer inputs run in f32.
template <int Kind>
std::vector<Value> reduce(Ctx &ctx) {
    const Value &in = ctx.input(0);
    const bool axes_input = ctx.version >= 13 && std::string(ctx.node.op_type()) == "ReduceSum";
    const Reduction r = reduction(ctx, axes_input);
    if (r.noop) return {in};
    Tensor x = in.tensor;
    const DType dtype = x.dtype();
    const bool float_only = Kind == 1 || Kind == 4 || Kind == 6 || Kind == 7;
    if (float_only && !is_float(in.type)) x = x.to(DType::f32);
    if (x.rank() == 0) return {make(x.contiguous(), in.type)};
    const Axes axes(r.axes);
    Tensor y;
    switch (Kind) {
    case 0: y = sum(x, axes, r.keepdims); break;  // ReduceSum
    case 1: y = mean(x, axes, r.keepdims); break;  // ReduceMean
    case 2: y = max(x, axes, r.keepdims); break;  // ReduceMax
    case 3: y = min(x, axes, r.keepdims); break;  // ReduceMin
    case 4: y = sqrt(sum(square(x), axes, r.keepdims)); break;  // ReduceL2
    case 5: y = sum(abs(x), axes, r.keepdims); break;  // ReduceL1
    case 6: y = log(sum(x, axes, r.keepdims)); break;  // ReduceLogSum
    case 7: {  // ReduceLogSumExp, shifted by the maximum (0 where it is infinite)
        Tensor m = max(x, axes, true);
        m = where(eq(abs(m), scalar_like(m, std::numeric_limits<double>::infinity())), scalar_like(m, 0), m);
        y = add(log(sum(exp(sub(x, m)), axes, true)), m);
        if (!r.keepdims) {
            Shape shape;
            for (int64_t i = 0; i < x.rank(); ++i)
                if (std::find(r.axes.begin(), r.axes.end(), i) == r.axes.end()) shape.push_back(x.size(i));
            y = y.reshape(shape);
        }
        break;
    }
    case 8: y = sum(square(x), axes, r.keepdims); break;  // ReduceSumSquare
    }
    if (y.dtype() != dtype) y = y.to(dtype);
    return {make(y, in.type)};
}

// The product over the node's axes: slices multiplied in order (no product op in tinyfin).
std::vector<Value> reduce_prod(Ctx &ctx) {
    const Value &in = ctx.input(0);
    const Reduction r = reduction(ctx, false);
    if (r.noop) return {in};
    Tensor x = in.tensor;
    std::vector<int64_t> axes = r.axes;
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    for (int64_t axis : axes) {
        const int64_t n = x.size(axis);
        Shape one = x.shape();
        one[axis] = 1;
        Tensor acc = n == 0 ? ones(one, x.dtype(), ctx.device) : narrow(x, axis, 0, 1);
        for (int64_t i = 1; i < n; ++i) acc = mul(acc, narrow(x, axis, i, 1));
        x = acc;
    }
    if (!r.keepdims) {
        Shape shape;
        for (int64_t i = 0; i < x.rank(); ++i)
            if (!std::binary_search(axes.begin(), axes.end(), i)) shape.push_back(x.size(i));
        x = x.reshape(shape);
    }
    return {make(x.contiguous(), in.type)};
}

// Running sums along an axis, slice by slice in order (exclusive: each excludes its own
// element; reverse: from the end).
std::vector<Value> cumsum(Ctx &ctx) {
    const Value &in = ctx.input(0);
    const Tensor &x = in.tensor;
    const int64_t axis = normalize_axis(ctx.ints(1).at(0), x.rank(), ctx);
    const bool exclusive = ctx.attr_int("exclusive", 0) != 0, reverse = ctx.attr_int("reverse", 0) != 0;
    const int64_t n = x.size(axis);
    if (n == 0) return {in};
    std::vector<Tensor> parts(static_cast<std::size_t>(n));
    Shape one = x.shape();
    one[axis] = 1;
    Tensor running = zeros(one, x.dtype(), ctx.device);
    for (int64_t k = 0; k < n; ++k) {
        const int64_t i = reverse ? n - 1 - k : k;
        const Tensor slice = narrow(x, axis, i, 1);
        if (exclusive) {
            parts[i] = running;
            running = add(running, slice);
        } else {
            running = add(running, slice);
            parts[i] = running;
        }
    }
    return {make(concat(parts, axis), in.type)};
}

// TopK by k rounds of argmax (argmin for the smallest): each round's first extreme is taken
// and masked out, so equal values come out lowest index first, as the spec orders them.
std::vector<Value> topk(Ctx &ctx) {
    const Value &in = ctx.input(0);
    const Tensor &x = in.tensor;
    const int64_t axis = normalize_axis(ctx.attr_int("axis", -1), x.rank(), ctx);
    const int64_t k = ctx.version >= 10 ? ctx.ints(1).at(0) : ctx.attr_int("k", 0);
    const bool largest = ctx.attr_int("largest", 1) != 0;
    if (k < 0 || k > x.size(axis))
        ctx.invalid("k = " + std::to_string(k) + " is outside [0, " + std::to_string(x.size(axis)) + "]");
    if (ctx.attr_int("sorted", 1) == 0) ctx.unsupported("sorted = 0");
    if (x.dtype() == DType::boolean) ctx.unsupported("bool input");
    const double hide = largest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    Tensor work = x.dtype() == DType::f32 || x.dtype() == DType::f16 || x.dtype() == DType::bf16 ? x : x.to(DType::f32);
    std::vector<Tensor> indices;
    const int64_t n = x.size(axis);
    for (int64_t r = 0; r < k; ++r) {
        const Tensor i = largest ? argmax(work, axis, true) : argmin(work, axis, true);
        indices.push_back(i);
        // Mask the chosen position: its one-hot along axis.
        Tensor hot = one_hot(i, static_cast<int>(n), DType::boolean);  // [..., 1 (axis), ..., n]
        std::vector<int64_t> perm;
        for (int64_t d = 0; d < x.rank(); ++d) perm.push_back(d == axis ? x.rank() : d);
        perm.push_back(axis);
        hot = hot.permute(perm).reshape(x.shape());
        work = where(hot, scalar_like(work, hide), work);
    }
    Shape out_shape = x.shape();
    out_shape[axis] = k;
    if (k == 0) {
        return {make(empty(out_shape, x.dtype(), ctx.device), in.type),
                make(empty(out_shape, DType::i64, ctx.device), ElementType::int64)};
    }
    const Tensor idx = concat(indices, axis);
    return {make(gather_along(x, idx, axis, ctx.device), in.type), make(idx, ElementType::int64)};
}

template <bool Max>
std::vector<Value> arg(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), x.rank(), ctx);
    const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
    Tensor src = x.dtype() == DType::boolean ? x.to(DType::i32) : x;
    if (ctx.attr_int("select_last_index", 0) != 0) {
        // The last extreme is the first one of the reversed axis.
        const int64_t n = src.size(axis);
        std::vector<int64_t> reversed;
        for (int64_t i = n - 1; i >= 0; --i) reversed.push_back(i);
        src = take(src, from_vector(reversed, {n}, ctx.device), axis);
        const Tensor first = Max ? argmax(src, axis, keepdims) : argmin(src, axis, keepdims);
        return {make(sub(static_cast<double>(n - 1), first), ElementType::int64)};
    }
    return {make(Max ? argmax(src, axis, keepdims) : argmin(src, axis, keepdims), ElementType::int64)};
}

constexpr OpRow rows[] = {
    {"ReduceSum", 1, 13, reduce<0>},
    {"ReduceMean", 1, 13, reduce<1>},
    {"ReduceMax", 1, 13, reduce<2>},
    {"ReduceMin", 1, 13, reduce<3>},
    {"ReduceL2", 1, 13, reduce<4>},
    {"ReduceL1", 1, 13, reduce<5>},
    {"ReduceLogSum", 1, 13, reduce<6>},
    {"ReduceLogSumExp", 1, 13, reduce<7>},
    {"ReduceSumSquare", 1, 13, reduce<8>},
    {"ReduceProd", 1, 13, reduce_prod},
    {"CumSum", 11, 14, cumsum},
    {"TopK", 1, 11, topk},
    {"ArgMax", 1, 13, arg<true>},
    {"ArgMin", 1, 13, arg<false>},
};

}  // namespace

std::span<const OpRow> reduce_ops() { return rows; }

}  // namespace tinyfin::onnx::detail
