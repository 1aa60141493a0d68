// Sequences of tensors and optionals (opsets 11 and 15): construction, indexing, splitting into
// and concatenating from sequences, and the optional wrappers. A sequence's tensors share one
// element type; positions may be negative (counted from the end), as the spec defines.
#include <numeric>
#include <string>
#include <vector>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;

const Value &sequence_input(const Ctx &ctx, std::size_t i) {
    const Value &v = ctx.value(i);
    if (v.kind != ValueKind::sequence)
        ctx.invalid("input " + std::to_string(i) + " is a " + value_kind_name(v.kind) + "; it must be a sequence");
    return v;
}

// A position input (a scalar integer tensor) in [-n, n - 1], or [-n, n] when `end_ok` (insert
// at the end); as an index from the front.
int64_t position(const Ctx &ctx, std::size_t i, int64_t n, bool end_ok) {
    const std::vector<int64_t> p = ctx.ints(i);
    if (p.size() != 1 || ctx.tensor(i).rank() > 1) ctx.invalid("position must be a scalar");
    const int64_t hi = end_ok ? n : n - 1;
    if (p[0] < -n || p[0] > hi)
        ctx.invalid("position " + std::to_string(p[0]) + " is out of range for a sequence of " + std::to_string(n) +
                    " tensors (allowed: " + std::to_string(-n) + " to " + std::to_string(hi) + ")");
    return p[0] < 0 ? p[0] + n : p[0];
}

std::vector<Value> sequence_empty(Ctx &ctx) {
    const auto type = static_cast<ElementType>(ctx.attr_int("dtype", static_cast<int64_t>(ElementType::float32)));
    compute_dtype(type);  // UnsupportedError for string and complex
    return {sequence_value(type, {})};
}

std::vector<Value> sequence_construct(Ctx &ctx) {
    if (ctx.n_inputs() == 0) ctx.invalid("needs at least one tensor");
    const ElementType type = ctx.input(0).type;
    std::vector<Tensor> elements;
    for (std::size_t i = 0; i < ctx.n_inputs(); ++i) {
        const Value &v = ctx.input(i);
        if (v.type != type)
            ctx.invalid("input " + std::to_string(i) + " is " + element_type_name(v.type) + ", input 0 " +
                        element_type_name(type) + ": a sequence's tensors share one element type");
        elements.push_back(v.tensor);
    }
    return {sequence_value(type, std::move(elements))};
}

std::vector<Value> sequence_at(Ctx &ctx) {
    const Value &seq = sequence_input(ctx, 0);
    const auto n = static_cast<int64_t>(seq.elements.size());
    return {Value{seq.elements[static_cast<std::size_t>(position(ctx, 1, n, false))], seq.type}};
}

std::vector<Value> sequence_insert(Ctx &ctx) {
    const Value &seq = sequence_input(ctx, 0);
    const Value &t = ctx.input(1);
    if (t.type != seq.type)
        ctx.invalid("inserting a " + element_type_name(t.type) + " tensor into a sequence of " +
                    element_type_name(seq.type));
    const auto n = static_cast<int64_t>(seq.elements.size());
    const int64_t at = ctx.has_input(2) ? position(ctx, 2, n, true) : n;
    Value out = seq;
    out.elements.insert(out.elements.begin() + at, t.tensor);
    return {std::move(out)};
}

std::vector<Value> sequence_erase(Ctx &ctx) {
    const Value &seq = sequence_input(ctx, 0);
    const auto n = static_cast<int64_t>(seq.elements.size());
    if (n == 0) ctx.invalid("cannot erase from an empty sequence");
    const int64_t at = ctx.has_input(1) ? position(ctx, 1, n, false) : n - 1;
    Value out = seq;
    out.elements.erase(out.elements.begin() + at);
    return {std::move(out)};
}

std::vector<Value> sequence_length(Ctx &ctx) {
    const Value &seq = sequence_input(ctx, 0);
    return {make(scalar(static_cast<double>(seq.elements.size()), DType::i64, ctx.device), ElementType::int64)};
}

// SplitToSequence: without `split`, pieces of 1 along axis (the axis dropped when keepdims is 0);
// a scalar split: pieces of that length (the last may be shorter); a 1-D split: those lengths.
std::vector<Value> split_to_sequence(Ctx &ctx) {
    const Value &x = ctx.input(0);
    const int64_t rank = x.tensor.rank();
    if (rank == 0) ctx.invalid("input must have at least one axis");
    const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), rank, ctx);
    const int64_t dim = x.tensor.size(axis);
    std::vector<int64_t> lengths;
    bool squeeze = false;
    if (!ctx.has_input(1)) {
        lengths.assign(static_cast<std::size_t>(dim), 1);
        squeeze = ctx.attr_int("keepdims", 1) == 0;
    } else if (ctx.tensor(1).rank() == 0) {
        const int64_t piece = ctx.ints(1)[0];
        if (piece <= 0) ctx.invalid("split must be positive, got " + std::to_string(piece));
        for (int64_t at = 0; at < dim; at += piece) lengths.push_back(std::min(piece, dim - at));
    } else {
        lengths = ctx.ints(1);
        if (ctx.tensor(1).rank() != 1) ctx.invalid("split must be a scalar or a 1-D tensor");
        int64_t total = 0;
        for (int64_t l : lengths) {
            if (l < 0) ctx.invalid("split lengths must not be negative");
            total += l;
        }
        if (total != dim)
            ctx.invalid("split lengths sum to " + std::to_string(total) + ", axis " + std::to_string(axis) + " has " +
                        std::to_string(dim));
    }
    std::vector<Tensor> pieces;
    int64_t at = 0;
    for (int64_t l : lengths) {
        Tensor piece = x.tensor.slice(axis, at, at + l);
        if (squeeze) {
            Shape shape = piece.shape();
            shape.erase(shape.begin() + axis);
            piece = piece.reshape(shape);
        }
        pieces.push_back(piece.contiguous());
        at += l;
    }
    return {sequence_value(x.type, std::move(pieces))};
}

// ConcatFromSequence: the tensors joined along axis, or stacked on a new axis when new_axis is 1.
std::vector<Value> concat_from_sequence(Ctx &ctx) {
    const Value &seq = sequence_input(ctx, 0);
    if (!ctx.has_attr("axis")) ctx.invalid("needs the attribute axis");
    if (seq.elements.empty()) ctx.invalid("cannot concatenate an empty sequence");
    const int64_t new_axis = ctx.attr_int("new_axis", 0);
    if (new_axis != 0 && new_axis != 1) ctx.invalid("new_axis must be 0 or 1");
    const int64_t rank = seq.elements[0].rank();
    for (const Tensor &t : seq.elements)
        if (t.rank() != rank) ctx.invalid("the sequence's tensors have different ranks");
    const int64_t out_rank = rank + new_axis;
    int64_t axis = ctx.attr_int("axis", 0);
    if (axis < -out_rank || axis >= out_rank || out_rank == 0)
        ctx.invalid("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(out_rank));
    if (axis < 0) axis += out_rank;
    Tensor out = new_axis == 1 ? stack(seq.elements, axis) : concat(seq.elements, axis);
    return {make(std::move(out), seq.type)};
}

// Optional: the input as it is, or none without one.
std::vector<Value> optional_op(Ctx &ctx) {
    if (ctx.has_input(0)) return {ctx.value(0)};
    if (!ctx.has_attr("type")) ctx.invalid("without an input, the attribute type is required");
    return {none_value()};
}

std::vector<Value> optional_has_element(Ctx &ctx) {
    const bool has = ctx.has_input(0) && ctx.value(0).kind != ValueKind::none;
    return {make(scalar(has ? 1 : 0, DType::boolean, ctx.device), ElementType::boolean)};
}

std::vector<Value> optional_get_element(Ctx &ctx) {
    const Value &v = ctx.value(0);
    if (v.kind == ValueKind::none) ctx.invalid("the optional input holds no value");
    return {v};
}

constexpr OpRow k_rows[] = {
    {"SequenceEmpty", 11, 11, sequence_empty},
    {"SequenceConstruct", 11, 11, sequence_construct},
    {"SequenceAt", 11, 11, sequence_at},
    {"SequenceInsert", 11, 11, sequence_insert},
    {"SequenceErase", 11, 11, sequence_erase},
    {"SequenceLength", 11, 11, sequence_length},
    {"SplitToSequence", 11, 11, split_to_sequence},
    {"ConcatFromSequence", 11, 11, concat_from_sequence},
    {"Optional", 15, 15, optional_op},
    {"OptionalHasElement", 15, 15, optional_has_element},
    {"OptionalGetElement", 15, 15, optional_get_element},
};

}  // namespace

std::span<const OpRow> sequence_ops() { return k_rows; }

}  // namespace tinyfin::onnx::detail
