// Layout and shape ONNX ops: Reshape, Transpose, Slice, Gather, Concat, Split, Pad, Shape,
// ConstantOfShape, Range, Constant... Shape arguments (axes, pads, starts) are read to the host.
#include <algorithm>
#include <cmath>
#include <limits>

#include "internal.hpp"

namespace tinyfin::onnx::detail {

Tensor gather_along(const Tensor &x, const Tensor &idx, int64_t axis, const Device &device) {
    // The flat index of each element: its own coordinates, with idx's value on axis.
    Tensor flat = zeros(idx.shape(), DType::i64, device);
    int64_t stride = 1;
    for (int64_t d = x.rank() - 1; d >= 0; --d) {
        Tensor coord;
        if (d == axis) {
            coord = idx;
        } else {
            Shape s(static_cast<std::size_t>(x.rank()), 1);
            s[d] = idx.size(d);
            coord = arange(int64_t{0}, idx.size(d), int64_t{1}, DType::i64, device).reshape(s);
        }
        flat = add(flat, mul(coord, static_cast<double>(stride)));
        stride *= x.size(d);
    }
    const Tensor rows = x.contiguous().reshape({x.numel(), 1});
    return embedding(rows, flat).reshape(idx.shape());
}

Tensor take(const Tensor &x, const Tensor &indices, int64_t axis) {
    // x with axis first as rows [V, rest], embedding picks rows, then the axes go back in place.
    const Tensor moved = axis == 0 ? x : x.transpose(0, axis).contiguous();
    Shape rest(moved.shape().begin() + 1, moved.shape().end());
    int64_t rest_n = 1;
    for (int64_t d : rest) rest_n *= d;
    const Tensor rows = moved.reshape({moved.size(0), rest_n});
    Tensor picked = embedding(rows, indices);  // indices.shape + [rest_n]
    Shape picked_shape = indices.shape();
    picked_shape.insert(picked_shape.end(), rest.begin(), rest.end());
    picked = picked.reshape(picked_shape);
    if (axis == 0) return picked;
    // picked: idx..., then x's axes 1..axis-1, 0, axis+1... (moved's order); restore x's order.
    const int64_t k = indices.rank();
    std::vector<int64_t> perm;
    // Output order: x[:axis] then idx then x[axis+1:]. In picked, x's axis 0 sits where `axis`
    // was swapped to: position k + axis - 1; x's axes 1..axis-1 at k + (i - 1) ... except that
    // the transpose swapped 0 and axis: moved axes are [axis, 1, ..., axis-1, 0, axis+1, ...].
    // picked = idx + moved[1:] = idx + [1, ..., axis-1, 0, axis+1, ...].
    perm.push_back(k + axis - 1);  // x's axis 0
    for (int64_t i = 1; i < axis; ++i) perm.push_back(k + i - 1);
    for (int64_t i = 0; i < k; ++i) perm.push_back(i);
    for (int64_t i = axis + 1; i < x.rank(); ++i) perm.push_back(k + i - 1);
    return picked.permute(perm).contiguous();
}

namespace {

using Ctx = NodeContext;

std::vector<Value> like_input(const Ctx &ctx, Tensor t) { return {make(std::move(t), ctx.input(0).type)}; }

Tensor host_ints(const std::vector<int64_t> &values, const Ctx &ctx) {
    return from_vector(values, {static_cast<int64_t>(values.size())}, ctx.device);
}

std::vector<Value> reshape_op(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    std::vector<int64_t> shape = ctx.version >= 5 ? ctx.ints(1) : ctx.attr_ints("shape");
    const bool allow_zero = ctx.attr_int("allowzero", 0) != 0;
    int64_t known = 1, infer = -1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == 0 && !allow_zero) {
            if (static_cast<int64_t>(i) >= x.rank()) ctx.invalid("a 0 in shape copies an axis the input lacks");
            shape[i] = x.size(static_cast<int64_t>(i));
        }
        if (shape[i] == -1) {
            if (infer >= 0) ctx.invalid("more than one -1 in shape");
            infer = static_cast<int64_t>(i);
        } else if (shape[i] < 0) {
            ctx.invalid("negative dimension " + std::to_string(shape[i]) + " in shape");
        } else {
            known *= shape[i];
        }
    }
    if (infer >= 0) {
        if (known == 0 || x.numel() % known != 0) ctx.invalid("cannot infer the -1 of " + shape_str(shape));
        shape[static_cast<std::size_t>(infer)] = x.numel() / known;
    }
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (n != x.numel())
        ctx.invalid("cannot reshape " + shape_str(x.shape()) + " (" + std::to_string(x.numel()) + " elements) to " +
                    shape_str(shape));
    return like_input(ctx, x.reshape(shape));
}

std::vector<Value> transpose_op(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    std::vector<int64_t> perm = ctx.attr_ints("perm");
    if (perm.empty())
        for (int64_t i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != x.rank()) ctx.invalid("perm does not match the input's rank");
    return like_input(ctx, x.permute(perm));
}

std::vector<Value> flatten_op(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    int64_t axis = ctx.attr_int("axis", 1);
    if (axis < 0) axis += x.rank();
    if (axis < 0 || axis > x.rank()) ctx.invalid("axis out of range");
    int64_t rows = 1;
    for (int64_t i = 0; i < axis; ++i) rows *= x.size(i);
    int64_t cols = 1;
    for (int64_t i = axis; i < x.rank(); ++i) cols *= x.size(i);
    return like_input(ctx, x.reshape({rows, cols}));
}

std::vector<Value> concat_op(Ctx &ctx) {
    std::vector<Tensor> parts;
    for (std::size_t i = 0; i < ctx.n_inputs(); ++i) parts.push_back(ctx.tensor(i));
    const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), parts.at(0).rank(), ctx);
    return like_input(ctx, concat(parts, axis));
}

std::vector<int64_t> axes_argument(const Ctx &ctx, int since_input_version) {
    if (ctx.version >= since_input_version) return ctx.has_input(1) ? ctx.ints(1) : std::vector<int64_t>{};
    return ctx.attr_ints("axes");
}

std::vector<Value> squeeze_op(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    std::vector<int64_t> axes = axes_argument(ctx, 13);
    std::vector<bool> drop(static_cast<std::size_t>(x.rank()), false);
    if (axes.empty()) {
        for (int64_t i = 0; i < x.rank(); ++i) drop[i] = x.size(i) == 1;
    } else {
        for (int64_t a : axes) {
            a = normalize_axis(a, x.rank(), ctx);
            if (x.size(a) != 1) ctx.invalid("axis " + std::to_string(a) + " has size " + std::to_string(x.size(a)));
            drop[a] = true;
        }
    }
    Shape shape;
    for (int64_t i = 0; i < x.rank(); ++i)
        if (!drop[i]) shape.push_back(x.size(i));
    return like_input(ctx, x.reshape(shape));
}

std::vector<Value> unsqueeze_op(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    std::vector<int64_t> axes = axes_argument(ctx, 13);
    const int64_t rank = x.rank() + static_cast<int64_t>(axes.size());
    std::vector<bool> inserted(static_cast<std::size_t>(rank), false);
    for (int64_t a : axes) {
        a = normalize_axis(a, rank, ctx);
        if (inserted[a]) ctx.invalid("axis " + std::to_string(a) + " given twice");
        inserted[a] = true;
    }
    Shape shape;
    int64_t j = 0;
    for (int64_t i = 0; i < rank; ++i) shape.push_back(inserted[i] ? 1 : x.size(j++));
    return like_input(ctx, x.reshape(shape));
}

std::vector<Value> slice_op(Ctx &ctx) {
    Tensor x = ctx.tensor(0);
    std::vector<int64_t> starts, ends, axes, steps;
    if (ctx.version < 10) {
        starts = ctx.attr_ints("starts");
        ends = ctx.attr_ints("ends");
        axes = ctx.attr_ints("axes");
    } else {
        starts = ctx.ints(1);
        ends = ctx.ints(2);
        if (ctx.has_input(3)) axes = ctx.ints(3);
        if (ctx.has_input(4)) steps = ctx.ints(4);
    }
    if (axes.empty())
        for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
        ctx.invalid("starts, ends, axes and steps differ in length");
    for (std::size_t i = 0; i < starts.size(); ++i) {
        const int64_t axis = normalize_axis(axes[i], x.rank(), ctx);
        const int64_t dim = x.size(axis), step = steps[i];
        if (step == 0) ctx.invalid("step 0");
        int64_t start = starts[i], end = ends[i];
        if (start < 0) start += dim;
        if (end < 0) end += dim;
        if (step > 0) {
            start = std::clamp<int64_t>(start, 0, dim);
            end = std::clamp<int64_t>(end, 0, dim);
            if (end <= start) {
                x = narrow(x, axis, 0, 0);
                continue;
            }
            x = x.slice(axis, start, end, step);
        } else {
            start = std::clamp<int64_t>(start, -1, dim - 1);
            end = std::clamp<int64_t>(end, -1, dim - 1);
            std::vector<int64_t> picks;
            for (int64_t k = start; k > end; k += step) picks.push_back(k);
            if (picks.empty()) {
                x = narrow(x, axis, 0, 0);
                continue;
            }
            x = take(x, host_ints(picks, ctx), axis);
        }
    }
    return like_input(ctx, x);
}

std::vector<Value> gather_op(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    if (x.rank() == 0) ctx.invalid("data must have rank >= 1, got a 0-d tensor");
    const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), x.rank(), ctx);
    Tensor idx = ctx.tensor(1);
    if (idx.dtype() != DType::i32 && idx.dtype() != DType::i64) ctx.invalid("indices must be int32 or int64");
    const int64_t dim = x.size(axis);
    if (idx.numel() == 1) {
        // One index (a pooler's first token, a pick of the shape arithmetic): read on the host and
        // taken as a view (narrow), not three ops on the index and a copy of x with the axis
        // moved first (bert's pooler gather cost ~30 us).
        int64_t i = ctx.ints(1)[0];
        if (i < -dim || i >= dim)
            ctx.invalid("index " + std::to_string(i) + " is out of range [" + std::to_string(-dim) + ", " +
                        std::to_string(dim) + ")");
        if (i < 0) i += dim;
        Shape shape(x.shape().begin(), x.shape().begin() + axis);
        shape.insert(shape.end(), idx.shape().begin(), idx.shape().end());
        shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
        return like_input(ctx, narrow(x, axis, i, 1).reshape(shape));
    }
    // Indices in host memory (the cpu backend: reading them costs nothing) that hold no negative
    // index (token ids) need no normalising: three ops fewer per embedding lookup.
    if (idx.device().backend == "cpu") {
        const std::vector<int64_t> values = ctx.ints(1);
        if (std::none_of(values.begin(), values.end(), [](int64_t v) { return v < 0; }))
            return like_input(ctx, take(x, idx, axis));
    }
    idx = where(lt(idx, scalar_like(idx, 0)), add(idx, static_cast<double>(dim)), idx);
    return like_input(ctx, take(x, idx, axis));
}

std::vector<Value> expand_op(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const std::vector<int64_t> shape = ctx.ints(1);
    const Shape out = broadcast_shapes(x.shape(), shape, "Expand");
    ctx.check_size(out, dtype_size(x.dtype()));
    return like_input(ctx, x.expand(out));
}

std::vector<Value> tile_op(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const std::vector<int64_t> repeats = ctx.ints(1);
    if (static_cast<int64_t>(repeats.size()) != x.rank()) ctx.invalid("repeats must have one value per axis");
    Shape lifted, expanded, out;
    for (int64_t i = 0; i < x.rank(); ++i) {
        if (repeats[i] < 0) ctx.invalid("negative repeats");
        lifted.insert(lifted.end(), {1, x.size(i)});
        expanded.insert(expanded.end(), {repeats[i], x.size(i)});
        out.push_back(repeats[i] * x.size(i));
    }
    ctx.check_size(out, dtype_size(x.dtype()));
    return like_input(ctx, x.reshape(lifted).expand(expanded).contiguous().reshape(out));
}

std::vector<Value> split_op(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), x.rank(), ctx);
    std::vector<int64_t> sizes =
        ctx.version >= 13 ? (ctx.has_input(1) ? ctx.ints(1) : std::vector<int64_t>{}) : ctx.attr_ints("split");
    const int64_t dim = x.size(axis), n = static_cast<int64_t>(ctx.n_outputs);
    if (sizes.empty()) {
        if (n == 0 || dim % n != 0) ctx.invalid("axis of size " + std::to_string(dim) + " does not split evenly");
        sizes.assign(static_cast<std::size_t>(n), dim / n);
    }
    std::vector<Value> out;
    for (const Tensor &part : split(x, sizes, axis)) out.push_back(make(part, ctx.input(0).type));
    return out;
}

std::vector<Value> shape_op(Ctx &ctx) {
    const Shape &shape = ctx.tensor(0).shape();
    const int64_t rank = static_cast<int64_t>(shape.size());
    int64_t start = ctx.attr_int("start", 0), end = ctx.attr_int("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    return {make(host_ints({shape.begin() + start, shape.begin() + end}, ctx), ElementType::int64)};
}

std::vector<Value> size_op(Ctx &ctx) {
    return {make(scalar(static_cast<double>(ctx.tensor(0).numel()), DType::i64, ctx.device), ElementType::int64)};
}

std::vector<Value> constant_of_shape(Ctx &ctx) {
    const std::vector<int64_t> shape = ctx.ints(0);
    ElementType type = ElementType::float32;
    double value = 0;
    if (const auto *a = ctx.attribute("value")) {
        if (a->type() != ::onnx::AttributeProto::TENSOR) ctx.invalid("value must be a tensor");
        const Value v = tensor_from_proto(a->t(), {}, Device{}, ctx.where() + " value");
        if (v.tensor.numel() != 1) ctx.invalid("value must have one element");
        type = v.type;
        value = v.tensor.item<float>();
        if (v.tensor.dtype() == DType::i64 || v.tensor.dtype() == DType::i32)
            value = static_cast<double>(v.tensor.item<int64_t>());
    }
    ctx.check_size(shape, element_size(type));
    return {make(full(shape, value, compute_dtype(type), ctx.device), type)};
}

std::vector<Value> range_op(Ctx &ctx) {
    const ElementType type = ctx.input(0).type;
    HostTensor host;
    host.type = type;
    if (is_float(type)) {
        const double start = ctx.doubles(0).at(0), limit = ctx.doubles(1).at(0), delta = ctx.doubles(2).at(0);
        if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
            ctx.invalid("Range needs a finite start, limit and a non-zero delta");
        const double count = std::max(std::ceil((limit - start) / delta), 0.0);
        ctx.check_size({static_cast<int64_t>(std::min(count, 9.2e18))}, 8);
        const int64_t n = static_cast<int64_t>(count);
        host.shape = {n};
        std::vector<float> values(static_cast<std::size_t>(n));
        // numpy.arange, the spec's reference: start + i * delta in double, then rounded.
        for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(start + static_cast<double>(i) * delta);
        return {make(from_vector(values, host.shape, ctx.device).to(compute_dtype(type)), type)};
    }
    const int64_t start = ctx.ints(0).at(0), limit = ctx.ints(1).at(0), delta = ctx.ints(2).at(0);
    if (delta == 0) ctx.invalid("Range needs a non-zero delta");
    const double count = std::max(std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / delta), 0.0);
    ctx.check_size({static_cast<int64_t>(std::min(count, 9.2e18))}, 8);
    std::vector<int64_t> values;
    for (int64_t i = 0, v = start; i < static_cast<int64_t>(count); ++i, v += delta) values.push_back(v);
    return {make(host_ints(values, ctx).to(compute_dtype(type)), type)};
}

std::vector<Value> constant_op(Ctx &ctx) {
    for (const auto &a : ctx.node.attribute()) {
        if (a.name() == "value") return {tensor_from_proto(a.t(), {}, ctx.device, ctx.where() + " value")};
        if (a.name() == "value_float") return {make(scalar(a.f(), DType::f32, ctx.device), ElementType::float32)};
        if (a.name() == "value_int")
            return {make(scalar(static_cast<double>(a.i()), DType::i64, ctx.device), ElementType::int64)};
        if (a.name() == "value_floats") {
            std::vector<float> v(a.floats().begin(), a.floats().end());
            return {make(from_vector(v, {static_cast<int64_t>(v.size())}, ctx.device), ElementType::float32)};
        }
        if (a.name() == "value_ints")
            return {make(host_ints({a.ints().begin(), a.ints().end()}, ctx), ElementType::int64)};
        ctx.unsupported("attribute " + a.name() + " (value, value_float(s), value_int(s) are implemented)");
    }
    ctx.invalid("no value attribute");
}

std::vector<Value> pad_op(Ctx &ctx) {
    Tensor x = ctx.tensor(0);
    const std::string mode = ctx.attr_string("mode", "constant");
    if (mode != "constant" && mode != "edge" && mode != "reflect")
        ctx.unsupported("mode '" + mode + "' (constant, edge, reflect are implemented)");
    std::vector<int64_t> pads;
    double value = 0;
    if (ctx.version < 11) {
        pads = ctx.attr_ints("pads");
        value = ctx.attr_float("value", 0.0);
    } else {
        pads = ctx.ints(1);
        if (ctx.has_input(2)) value = ctx.doubles(2).at(0);
        if (ctx.has_input(3)) ctx.unsupported("the axes input");
    }
    const int64_t r = x.rank();
    if (static_cast<int64_t>(pads.size()) != 2 * r) ctx.invalid("pads must have 2 values per axis");
    // Negative pads crop first; then tinyfin's pad takes {before_0, after_0, ...}.
    std::vector<int64_t> grow;
    for (int64_t i = 0; i < r; ++i) {
        const int64_t before = pads[i], after = pads[i + r];
        const int64_t crop_front = std::max<int64_t>(-before, 0), crop_back = std::max<int64_t>(-after, 0);
        if (crop_front + crop_back > x.size(i)) ctx.invalid("negative pads remove more than the axis has");
        if (crop_front || crop_back) x = narrow(x, i, crop_front, x.size(i) - crop_front - crop_back);
        grow.push_back(std::max<int64_t>(before, 0));
        grow.push_back(std::max<int64_t>(after, 0));
    }
    Shape out = x.shape();
    for (int64_t i = 0; i < r; ++i) out[i] += grow[2 * i] + grow[2 * i + 1];
    ctx.check_size(out, dtype_size(x.dtype()));
    if (mode == "constant") return like_input(ctx, pad(x, grow, value));
    // edge and reflect: each padded axis gathers its source indices.
    for (int64_t i = 0; i < r; ++i) {
        const int64_t before = grow[2 * i], after = grow[2 * i + 1], dim = x.size(i);
        if (before == 0 && after == 0) continue;
        if (dim == 0 || (mode == "reflect" && (before >= dim || after >= dim)))
            ctx.invalid("mode '" + mode + "' pads axis " + std::to_string(i) + " of size " + std::to_string(dim) +
                        " by more than it has");
        std::vector<int64_t> picks;
        for (int64_t j = -before; j < dim + after; ++j) {
            int64_t k = j;
            if (mode == "edge")
                k = std::clamp<int64_t>(j, 0, dim - 1);
            else if (j < 0)
                k = -j;
            else if (j >= dim)
                k = 2 * (dim - 1) - j;
            picks.push_back(k);
        }
        x = take(x, host_ints(picks, ctx), i);
    }
    return like_input(ctx, x);
}

std::vector<Value> eye_like(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    if (x.rank() != 2) ctx.invalid("input must be 2-D");
    const ElementType type =
        ctx.has_attr("dtype") ? static_cast<ElementType>(ctx.attr_int("dtype", 1)) : ctx.input(0).type;
    const int64_t k = ctx.attr_int("k", 0), n = x.size(0), m = x.size(1);
    const Tensor rows = arange(int64_t{0}, n, int64_t{1}, DType::i64, ctx.device).reshape({n, 1});
    const Tensor cols = arange(int64_t{0}, m, int64_t{1}, DType::i64, ctx.device).reshape({1, m});
    const Tensor diff = sub(cols, rows);
    return {make(eq(diff, scalar_like(diff, static_cast<double>(k))).to(compute_dtype(type)), type)};
}

std::vector<Value> one_hot_op(Ctx &ctx) {
    Tensor idx = ctx.tensor(0);
    if (idx.dtype() != DType::i64) idx = idx.to(DType::i64);  // float indices truncate
    const double depth_value = ctx.doubles(1).at(0);
    if (!(depth_value >= 1) || depth_value > 2147483647.0) ctx.invalid("depth must be at least 1");
    const int64_t depth = static_cast<int64_t>(depth_value);
    const Value &values = ctx.input(2);
    Shape out = idx.shape();
    out.push_back(depth);
    ctx.check_size(out, 4);
    idx = where(lt(idx, scalar_like(idx, 0)), add(idx, static_cast<double>(depth)), idx);
    const Tensor valid = mul(ge(idx, scalar_like(idx, 0)).to(DType::i32),
                             lt(idx, scalar_like(idx, static_cast<double>(depth))).to(DType::i32));
    const Tensor safe = where(valid.to(DType::boolean), idx, scalar_like(idx, 0));
    Shape with_one = idx.shape();
    with_one.push_back(1);
    const Tensor hot = mul(one_hot(safe, static_cast<int>(depth), DType::i32), valid.reshape(with_one));
    const Tensor off = narrow(values.tensor.reshape({-1}), 0, 0, 1).reshape({}),
                 on = narrow(values.tensor.reshape({-1}), 0, 1, 1).reshape({});
    Tensor y = where(hot.to(DType::boolean), on, off);
    const int64_t rank = static_cast<int64_t>(out.size());
    const int64_t axis = normalize_axis(ctx.attr_int("axis", -1), rank, ctx);
    if (axis != rank - 1) {
        std::vector<int64_t> perm;
        for (int64_t i = 0; i < rank - 1; ++i) perm.push_back(i);
        perm.insert(perm.begin() + axis, rank - 1);
        y = y.permute(perm);
    }
    return {make(y.contiguous(), values.type)};
}

std::vector<Value> gather_elements(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    Tensor idx = ctx.tensor(1).to(DType::i64);
    if (idx.rank() != x.rank()) ctx.invalid("data and indices must have the same rank");
    const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), x.rank(), ctx);
    idx = where(lt(idx, scalar_like(idx, 0)), add(idx, static_cast<double>(x.size(axis))), idx);
    return like_input(ctx, gather_along(x, idx, axis, ctx.device));
}

// ReverseSequence: along time_axis, the first sequence_lens[b] elements of batch b reversed, the
// rest as they are; a gather along the time axis by indices tabulated on the host (exact).
std::vector<Value> reverse_sequence(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    if (x.rank() < 2) ctx.invalid("input must have rank 2 or more");
    const int64_t time_axis = ctx.attr_int("time_axis", 0), batch_axis = ctx.attr_int("batch_axis", 1);
    if (!((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0)))
        ctx.invalid("time_axis and batch_axis must be 0 and 1 in either order");
    const std::vector<int64_t> lens = ctx.ints(1);
    const int64_t steps = x.size(time_axis), batch = x.size(batch_axis);
    if (static_cast<int64_t>(lens.size()) != batch) ctx.invalid("sequence_lens must have one length per batch");
    std::vector<int64_t> idx(static_cast<std::size_t>(steps * batch));
    for (int64_t b = 0; b < batch; ++b) {
        const int64_t len = lens[static_cast<std::size_t>(b)];
        if (len < 0 || len > steps) ctx.invalid("sequence_lens must lie in [0, the time axis' size]");
        for (int64_t t = 0; t < steps; ++t) {
            const int64_t at = time_axis == 0 ? t * batch + b : b * steps + t;
            idx[static_cast<std::size_t>(at)] = t < len ? len - 1 - t : t;
        }
    }
    Shape small(static_cast<std::size_t>(x.rank()), 1);
    small[0] = x.size(0);
    small[1] = x.size(1);
    const Tensor table = from_vector(idx, small, ctx.device).expand(x.shape()).contiguous();
    return like_input(ctx, gather_along(x, table, time_axis, ctx.device));
}

// GatherND: the last axis of indices indexes the first axes of data (after batch_dims).
std::vector<Value> gather_nd(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    Tensor idx = ctx.tensor(1).to(DType::i64);
    const int64_t b = ctx.attr_int("batch_dims", 0), q = idx.rank(), r = x.rank();
    if (q < 1 || b < 0 || b >= std::min(q, r)) ctx.invalid("batch_dims out of range");
    const int64_t m = idx.size(-1);
    if (m < 1 || b + m > r) ctx.invalid("the indices' last axis is longer than data has axes");
    // data as [B, rows, rest]; each index tuple becomes a row number within its batch.
    int64_t batch = 1, rows_n = 1, rest = 1;
    for (int64_t i = 0; i < b; ++i) batch *= x.size(i);
    for (int64_t i = b; i < b + m; ++i) rows_n *= x.size(i);
    Shape rest_shape;
    for (int64_t i = b + m; i < r; ++i) {
        rest *= x.size(i);
        rest_shape.push_back(x.size(i));
    }
    Tensor row = zeros(narrow(idx, -1, 0, 1).shape(), DType::i64, ctx.device);
    for (int64_t j = 0; j < m; ++j) {
        Tensor c = narrow(idx, -1, j, 1);
        const double dim = static_cast<double>(x.size(b + j));
        c = where(lt(c, scalar_like(c, 0)), add(c, dim), c);
        row = add(mul(row, dim), c);
    }
    // Offset each batch's rows: batch number * rows_n.
    Shape batch_shape(idx.shape().begin(), idx.shape().begin() + b);
    int64_t per_batch = 1;
    for (int64_t i = b; i < q - 1; ++i) per_batch *= idx.size(i);
    Tensor batch_ids = arange(int64_t{0}, batch, int64_t{1}, DType::i64, ctx.device).reshape({batch, 1});
    row = add(row.reshape({batch, per_batch}), mul(batch_ids, static_cast<double>(rows_n)));
    const Tensor table = x.contiguous().reshape({batch * rows_n, rest});
    Shape out(idx.shape().begin(), idx.shape().end() - 1);
    out.insert(out.end(), rest_shape.begin(), rest_shape.end());
    return like_input(ctx, embedding(table, row.reshape({-1})).reshape(out));
}

std::vector<Value> trilu(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    if (x.rank() < 2) ctx.invalid("input must have rank 2 or more");
    const int64_t k = ctx.has_input(1) ? ctx.ints(1).at(0) : 0;
    const bool upper = ctx.attr_int("upper", 1) != 0;
    const int64_t n = x.size(-2), m = x.size(-1);
    const Tensor rows = arange(int64_t{0}, n, int64_t{1}, DType::i64, ctx.device).reshape({n, 1});
    const Tensor cols = arange(int64_t{0}, m, int64_t{1}, DType::i64, ctx.device).reshape({1, m});
    const Tensor diff = sub(cols, rows);  // j - i
    const Tensor keep = upper ? ge(diff, scalar_like(diff, static_cast<double>(k)))
                              : le(diff, scalar_like(diff, static_cast<double>(k)));
    return like_input(ctx, where(keep, x, scalar_like(x, 0)));
}

std::vector<Value> depth_to_space(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    if (x.rank() != 4) ctx.invalid("input must be [N, C, H, W]");
    const int64_t b = ctx.attr_int("blocksize", 0), n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    if (b <= 0 || c % (b * b) != 0) ctx.invalid("blocksize must divide the channels' square root");
    const bool crd = ctx.attr_string("mode", "DCR") == "CRD";
    const Tensor t = crd ? x.reshape({n, c / (b * b), b, b, h, w}).permute({0, 1, 4, 2, 5, 3})
                         : x.reshape({n, b, b, c / (b * b), h, w}).permute({0, 3, 4, 1, 5, 2});
    return like_input(ctx, t.reshape({n, c / (b * b), h * b, w * b}));
}

std::vector<Value> space_to_depth(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    if (x.rank() != 4) ctx.invalid("input must be [N, C, H, W]");
    const int64_t b = ctx.attr_int("blocksize", 0), n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    if (b <= 0 || h % b != 0 || w % b != 0) ctx.invalid("blocksize must divide H and W");
    const Tensor t = x.reshape({n, c, h / b, b, w / b, b}).permute({0, 3, 5, 1, 2, 4});
    return like_input(ctx, t.reshape({n, c * b * b, h / b, w / b}));
}

// Hann, Hamming and Blackman windows: sums of cosines evaluated on the host in double.
template <int Kind>
std::vector<Value> window(Ctx &ctx) {
    const int64_t size = ctx.ints(0).at(0);
    if (size < 0) ctx.invalid("negative size");
    ctx.check_size({size}, 8);
    const bool periodic = ctx.attr_int("periodic", 1) != 0;
    const auto type = static_cast<ElementType>(ctx.attr_int("output_datatype", 1));
    const double n = static_cast<double>(periodic ? size : size - 1);
    const double pi = 3.14159265358979323846;
    std::vector<float> values;
    for (int64_t i = 0; i < size; ++i) {
        const double t = 2 * pi * static_cast<double>(i) / n;
        double v = Kind == 0   ? 0.5 - 0.5 * std::cos(t)
                   : Kind == 1 ? 25.0 / 46.0 - (1 - 25.0 / 46.0) * std::cos(t)
                               : 0.42 - 0.5 * std::cos(t) + 0.08 * std::cos(2 * t);
        values.push_back(static_cast<float>(v));
    }
    return {make(from_vector(values, {size}, ctx.device).to(compute_dtype(type)), type)};
}

constexpr OpRow rows[] = {
    {"Reshape", 5, 14, reshape_op},
    {"Transpose", 1, 13, transpose_op},
    {"Flatten", 1, 13, flatten_op},
    {"Concat", 4, 13, concat_op},
    {"Squeeze", 1, 13, squeeze_op},
    {"Unsqueeze", 1, 13, unsqueeze_op},
    {"Slice", 1, 13, slice_op},
    {"Gather", 1, 13, gather_op},
    {"Expand", 8, 13, expand_op},
    {"Tile", 6, 13, tile_op},
    {"Split", 2, 13, split_op},
    {"Shape", 1, 15, shape_op},
    {"Size", 1, 13, size_op},
    {"ConstantOfShape", 9, 9, constant_of_shape},
    {"Range", 11, 11, range_op},
    {"Constant", 1, 13, constant_op},
    {"Pad", 2, 13, pad_op},
    {"Trilu", 14, 14, trilu},
    {"EyeLike", 9, 9, eye_like},
    {"HannWindow", 17, 17, window<0>},
    {"HammingWindow", 17, 17, window<1>},
    {"BlackmanWindow", 17, 17, window<2>},
    {"OneHot", 9, 11, one_hot_op},
    {"GatherElements", 11, 13, gather_elements},
    {"ReverseSequence", 10, 10, reverse_sequence},
    {"GatherND", 11, 13, gather_nd},
    {"DepthToSpace", 1, 13, depth_to_space},
    {"SpaceToDepth", 1, 13, space_to_depth},
};

}  // namespace

std::span<const OpRow> layout_ops() { return rows; }

}  // namespace tinyfin::onnx::detail
