// Data-dependent indexing ONNX ops: ScatterElements, ScatterND (reduction none, add, mul), the
// deprecated Scatter, NonZero and Compress. The indices are read to the host (as every index argument is) and turned into, for
// each element of the output, which update lands there; the values never leave the device:
// gathers of the updates (embedding over rows of one element) merged into the data by where.
// Reductions apply the updates in the indices' order, one round per update a position receives,
// each rounded as the spec's loop `data[i] = f(data[i], update)` rounds it.
#include <algorithm>

#include "internal.hpp"

namespace tinyfin::onnx::detail {

namespace {

using Ctx = NodeContext;

enum class Reduction { none, add, mul };

Reduction reduction_of(const Ctx &ctx) {
    const std::string r = ctx.attr_string("reduction", "none");
    if (r == "none") return Reduction::none;
    if (r == "add") return Reduction::add;
    if (r == "mul") return Reduction::mul;
    ctx.invalid("reduction '" + r + "' (none, add or mul)");
}

int64_t numel_of(const Shape &shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

// data with updates[k] written (or reduced) at flat position targets[k], k in order.
Value scatter_flat(const Ctx &ctx, const std::vector<int64_t> &targets, Reduction reduction) {
    const Value &data = ctx.input(0);
    const Tensor &updates = ctx.tensor(2);
    if (updates.dtype() != data.tensor.dtype())
        ctx.invalid("updates are " + std::string(dtype_name(updates.dtype())) + ", data " +
                    dtype_name(data.tensor.dtype()));
    const int64_t n = data.tensor.numel();
    if (targets.empty() || n == 0) return make(data.tensor.contiguous(), data.type);
    // Round r holds, for each position receiving at least r + 1 updates, its (r + 1)-th update
    // (reduction none: only the last one).
    std::vector<std::vector<std::pair<int64_t, int64_t>>> rounds(1);  // (position, update index)
    if (reduction == Reduction::none) {
        std::vector<int64_t> last(static_cast<std::size_t>(n), -1);
        for (std::size_t k = 0; k < targets.size(); ++k)
            last[static_cast<std::size_t>(targets[k])] = static_cast<int64_t>(k);
        for (int64_t p = 0; p < n; ++p)
            if (last[static_cast<std::size_t>(p)] >= 0) rounds[0].emplace_back(p, last[static_cast<std::size_t>(p)]);
    } else {
        std::vector<int64_t> count(static_cast<std::size_t>(n), 0);
        for (std::size_t k = 0; k < targets.size(); ++k) {
            const auto r = static_cast<std::size_t>(count[static_cast<std::size_t>(targets[k])]++);
            if (r == rounds.size()) {
                // Each round costs a pass over the data: a position updated very many times over
                // large data would take hours.
                if (static_cast<double>(r + 1) * static_cast<double>(n) > double(int64_t{1} << 30))
                    ctx.unsupported("reduction with " + std::to_string(r + 1) + " updates of one element of " +
                                    std::to_string(n) + " (at most 2^30 element updates in all)");
                rounds.emplace_back();
            }
            rounds[r].emplace_back(targets[k], static_cast<int64_t>(k));
        }
    }
    const Tensor rows = updates.contiguous().reshape({updates.numel(), 1});
    Tensor out = data.tensor.contiguous().reshape({n, 1});
    for (const auto &round : rounds) {
        std::vector<int64_t> source(static_cast<std::size_t>(n), 0);
        std::vector<int64_t> hit(static_cast<std::size_t>(n), 0);
        for (const auto &[p, k] : round) {
            source[static_cast<std::size_t>(p)] = k;
            hit[static_cast<std::size_t>(p)] = 1;
        }
        const Tensor mask = ne(from_vector(hit, {n, 1}, ctx.device), 0.0);
        const Tensor picked = embedding(rows, from_vector(source, {n}, ctx.device));
        switch (reduction) {
        case Reduction::none: out = where(mask, picked, out); break;
        case Reduction::add: out = where(mask, add(out, picked), out); break;
        case Reduction::mul: out = where(mask, mul(out, picked), out); break;
        }
    }
    return make(out.reshape(data.tensor.shape()), data.type);
}

int64_t in_range(int64_t i, int64_t size, const Ctx &ctx) {
    if (i < -size || i >= size)
        ctx.invalid("index " + std::to_string(i) + " is outside [" + std::to_string(-size) + ", " +
                    std::to_string(size - 1) + "]");
    return i < 0 ? i + size : i;
}

// ScatterElements (and Scatter): updates[j] goes to data at j's coordinates with indices[j] on axis.
std::vector<Value> scatter_elements(Ctx &ctx) {
    const Shape data_shape = ctx.tensor(0).shape();
    const Tensor &indices = ctx.tensor(1);
    const int64_t rank = static_cast<int64_t>(data_shape.size());
    if (indices.rank() != rank) ctx.invalid("data and indices must have the same rank");
    if (ctx.tensor(2).shape() != indices.shape())
        ctx.invalid("updates have shape " + shape_str(ctx.tensor(2).shape()) + ", indices " +
                    shape_str(indices.shape()));
    if (rank == 0) ctx.invalid("data must have at least one axis");
    const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), rank, ctx);
    for (int64_t d = 0; d < rank; ++d)
        if (d != axis && indices.size(d) > data_shape[static_cast<std::size_t>(d)])
            ctx.invalid("indices have shape " + shape_str(indices.shape()) + ", longer than data's " +
                        shape_str(data_shape) + " on axis " + std::to_string(d));
    const Reduction reduction = ctx.node.op_type() == "Scatter" ? Reduction::none : reduction_of(ctx);
    const std::vector<int64_t> idx = ctx.ints(1);
    std::vector<int64_t> targets(idx.size());
    std::vector<int64_t> coord(static_cast<std::size_t>(rank), 0);
    for (std::size_t j = 0; j < idx.size(); ++j) {
        int64_t flat = 0;
        for (int64_t d = 0; d < rank; ++d) {
            const int64_t c = d == axis ? in_range(idx[j], data_shape[static_cast<std::size_t>(d)], ctx)
                                        : coord[static_cast<std::size_t>(d)];
            flat = flat * data_shape[static_cast<std::size_t>(d)] + c;
        }
        targets[j] = flat;
        for (int64_t d = rank - 1; d >= 0; --d) {  // next coordinate of indices, row-major
            if (++coord[static_cast<std::size_t>(d)] < indices.size(d)) break;
            coord[static_cast<std::size_t>(d)] = 0;
        }
    }
    return {scatter_flat(ctx, targets, reduction)};
}

// ScatterND: indices [..., k] name slices data[i0, ..., ik-1] (of data.shape[k:]), each replaced
// (or reduced) by the matching slice of updates [..., data.shape[k:]].
std::vector<Value> scatter_nd(Ctx &ctx) {
    const Shape data_shape = ctx.tensor(0).shape();
    const Tensor &indices = ctx.tensor(1);
    const int64_t r = static_cast<int64_t>(data_shape.size());
    if (indices.rank() < 1) ctx.invalid("indices must have at least one axis");
    const int64_t k = indices.size(-1);
    if (k < 1 || k > r) ctx.invalid("the indices' last axis (" + std::to_string(k) + ") must be 1 to data's rank");
    Shape want(indices.shape().begin(), indices.shape().end() - 1);
    want.insert(want.end(), data_shape.begin() + k, data_shape.end());
    if (ctx.tensor(2).shape() != want)
        ctx.invalid("updates have shape " + shape_str(ctx.tensor(2).shape()) + "; indices and data need " +
                    shape_str(want));
    const int64_t slice = numel_of(Shape(data_shape.begin() + k, data_shape.end()));
    const std::vector<int64_t> idx = ctx.ints(1);
    const std::size_t tuples = idx.size() / static_cast<std::size_t>(k);
    std::vector<int64_t> targets;
    targets.reserve(tuples * static_cast<std::size_t>(slice));
    for (std::size_t t = 0; t < tuples; ++t) {
        int64_t row = 0;
        for (int64_t j = 0; j < k; ++j) {
            const int64_t dim = data_shape[static_cast<std::size_t>(j)];
            row = row * dim + in_range(idx[t * static_cast<std::size_t>(k) + static_cast<std::size_t>(j)], dim, ctx);
        }
        for (int64_t e = 0; e < slice; ++e) targets.push_back(row * slice + e);
    }
    return {scatter_flat(ctx, targets, reduction_of(ctx))};
}

// NonZero: the coordinates of x's nonzero elements (NaN counts), [rank, count] int64, row-major.
std::vector<Value> nonzero(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const std::vector<int64_t> hit = ne(x, 0.0).contiguous().reshape({x.numel()}).to_vector<int64_t>();
    const int64_t rank = x.rank();
    std::vector<int64_t> flat;
    for (std::size_t i = 0; i < hit.size(); ++i)
        if (hit[i] != 0) flat.push_back(static_cast<int64_t>(i));
    const auto count = static_cast<int64_t>(flat.size());
    ctx.check_size({rank, count}, 8);
    std::vector<int64_t> coords(static_cast<std::size_t>(rank * count));
    for (int64_t j = 0; j < count; ++j) {
        int64_t rest = flat[static_cast<std::size_t>(j)];
        for (int64_t d = rank - 1; d >= 0; --d) {
            coords[static_cast<std::size_t>(d * count + j)] = rest % x.size(d);
            rest /= x.size(d);
        }
    }
    return {make(from_vector(coords, {rank, count}, ctx.device), ElementType::int64)};
}

// Compress: the slices of x along axis (of flattened x without one) where condition is true;
// a condition shorter than the axis leaves the rest out.
std::vector<Value> compress(Ctx &ctx) {
    Tensor x = ctx.tensor(0);
    const Tensor &condition = ctx.tensor(1);
    if (condition.rank() != 1) ctx.invalid("condition must be 1-D");
    int64_t axis = 0;
    if (ctx.has_attr("axis")) {
        axis = normalize_axis(ctx.attr_int("axis", 0), x.rank(), ctx);
    } else {
        x = x.contiguous().reshape({x.numel()});
    }
    const std::vector<int64_t> keep = ne(condition, 0.0).to_vector<int64_t>();
    std::vector<int64_t> picked;
    for (std::size_t i = 0; i < keep.size(); ++i) {
        if (keep[i] == 0) continue;
        if (static_cast<int64_t>(i) >= x.size(axis))
            ctx.invalid("condition selects element " + std::to_string(i) + " of an axis of " +
                        std::to_string(x.size(axis)));
        picked.push_back(static_cast<int64_t>(i));
    }
    Shape out = x.shape();
    out[static_cast<std::size_t>(axis)] = static_cast<int64_t>(picked.size());
    if (picked.empty()) return {make(zeros(out, x.dtype(), ctx.device), ctx.input(0).type)};
    const Tensor index = from_vector(picked, {static_cast<int64_t>(picked.size())}, ctx.device);
    return {make(take(x, index, axis), ctx.input(0).type)};
}

constexpr OpRow rows[] = {
    {"NonZero", 9, 13, nonzero},
    {"Compress", 9, 11, compress},
    {"ScatterElements", 11, 16, scatter_elements},
    {"ScatterND", 11, 16, scatter_nd},
    {"Scatter", 9, 9, scatter_elements},
};

}  // namespace

std::span<const OpRow> indexing_ops() { return rows; }

}  // namespace tinyfin::onnx::detail
