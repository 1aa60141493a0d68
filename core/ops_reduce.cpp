// Reductions over axes, arg-reductions, matmul and cast.
#include "autocast.hpp"
#include "ops_common.hpp"

namespace tinyfin {

using namespace detail;

namespace {

// Elements one reduction or matmul may read from an operand. Only a broadcast view (expand) gets
// past it - no device holds 2^40 elements densely - and reading sum(ones({1}).expand({2^63 - 1}))
// element by element would take centuries: refused instead, so every op ends in bounded time.
constexpr int64_t max_read_elements = int64_t{1} << 40;

void check_read_size(const Tensor &a, const char *op) {
    if (a.numel() > max_read_elements)
        raise<ValueError>(std::string(op) + ": the operand " + shape_str(a.shape()) + " has " +
                          std::to_string(a.numel()) + " elements, more than the 2^40 one op reads; " +
                          "reduce the broadcast view's source instead (e.g. sum of x.expand(n) is " + "n * sum(x))");
}

// Runs a REDUCE op into a keepdim-shaped output; returns it in the requested shape.
Tensor reduce(tf_op op, const Tensor &a, uint32_t mask, bool keepdim, const void *params) {
    check_read_size(a, op_info(op).name);
    Tensor out = empty_like_device(a, keep_shape(a.shape(), mask), a.dtype());
    dispatch(op, {a}, {out}, params);
    return keepdim ? out : raw_view(out, drop_shape(a.shape(), mask));
}

int64_t reduced_count(const Shape &shape, uint32_t mask) {
    int64_t n = 1;
    for (std::size_t i = 0; i < shape.size(); ++i)
        // Overflow needs a zero-size axis elsewhere ([0, 2^62, 5] over its last two axes).
        if ((mask & (1u << i)) && __builtin_mul_overflow(n, shape[i], &n))
            raise<ShapeError>("reduction over " + shape_str(shape) +
                              ": the reduced axes hold more elements than fit in 64 bits");
    return n;
}

// Brings a reduced gradient back to the input's shape (broadcast over the reduced axes).
Tensor unreduce(const Tensor &g, const Shape &input, uint32_t mask) {
    return g.reshape(keep_shape(input, mask)).expand(input);
}

}  // namespace

Tensor sum(const Tensor &a, const Axes &axes, bool keepdim) {
    if (Autocast cast{"sum", {&a}}) return sum(cast[0], axes, keepdim);
    impl_of(a, "sum");
    uint32_t mask = axes_mask(a.shape(), axes, "sum");
    tf_params_reduce params{sizeof(tf_params_reduce), mask};
    Tensor out = reduce(TF_OP_SUM, a, mask, keepdim, &params);
    return record(out, {&a}, "sum", [&] {
        return [shape = a.shape(), mask](const Tensor &g) -> std::vector<Tensor> { return {unreduce(g, shape, mask)}; };
    });
}

Tensor mean(const Tensor &a, const Axes &axes, bool keepdim) {
    if (Autocast cast{"mean", {&a}}) return mean(cast[0], axes, keepdim);
    impl_of(a, "mean");
    uint32_t mask = axes_mask(a.shape(), axes, "mean");
    tf_params_reduce params{sizeof(tf_params_reduce), mask};
    Tensor out = reduce(TF_OP_MEAN, a, mask, keepdim, &params);
    return record(out, {&a}, "mean", [&] {
        return [shape = a.shape(), mask](const Tensor &g) -> std::vector<Tensor> {
            double n = static_cast<double>(reduced_count(shape, mask));
            return {unreduce(div(g, constant_like(g, n)), shape, mask)};
        };
    });
}

// The gradient goes to the elements equal to the extreme, shared equally among ties.
static Tensor extreme(tf_op op, const char *name, const Tensor &a, const Axes &axes, bool keepdim) {
    impl_of(a, name);
    uint32_t mask = axes_mask(a.shape(), axes, name);
    // An empty reduced axis has no extreme; empty kept axes just give an empty result.
    for (std::size_t i = 0; i < a.shape().size(); ++i)
        if ((mask & (1u << i)) && a.shape()[i] == 0)
            raise<ShapeError>(std::string(name) + ": cannot reduce an empty tensor of shape " + shape_str(a.shape()) +
                              " over axis " + std::to_string(i));
    tf_params_reduce params{sizeof(tf_params_reduce), mask};
    Tensor out = reduce(op, a, mask, true, &params);
    Tensor result = keepdim ? out : raw_view(out, drop_shape(a.shape(), mask));
    return record(result, {&a}, name, [&] {
        return [x = a.detach(), y = out.detach(), mask](const Tensor &g) -> std::vector<Tensor> {
            Shape shape = x.shape();
            Tensor hits = cast(eq(x, y.expand(shape)), g.dtype());
            std::vector<int> axes;
            for (std::size_t i = 0; i < shape.size(); ++i)
                if (mask & (1u << i)) axes.push_back(static_cast<int>(i));
            Tensor count = axes.empty() ? hits : sum(hits, axes, true);
            return {mul(div(hits, count), unreduce(g, shape, mask))};
        };
    });
}

Tensor max(const Tensor &a, const Axes &axes, bool keepdim) { return extreme(TF_OP_MAX, "max", a, axes, keepdim); }

Tensor min(const Tensor &a, const Axes &axes, bool keepdim) { return extreme(TF_OP_MIN, "min", a, axes, keepdim); }

Tensor var(const Tensor &a, const Axes &axes) { return var(a, axes, Correction(1), false); }

Tensor var(const Tensor &a, const Axes &axes, Correction correction_, bool keepdim) {
    if (Autocast cast{"var", {&a}}) return var(cast[0], axes, correction_, keepdim);
    impl_of(a, "var");
    double correction = correction_.value;
    uint32_t mask = axes_mask(a.shape(), axes, "var");
    tf_params_var params{sizeof(tf_params_var), mask, correction};
    Tensor out = reduce(TF_OP_VAR, a, mask, keepdim, &params);
    return record(out, {&a}, "var", [&] {
        return [x = a.detach(), mask, correction](const Tensor &g) -> std::vector<Tensor> {
            Shape shape = x.shape();
            std::vector<int> axes;
            for (std::size_t i = 0; i < shape.size(); ++i)
                if (mask & (1u << i)) axes.push_back(static_cast<int>(i));
            double n = static_cast<double>(reduced_count(shape, mask));
            double divisor = std::max(n - correction, 0.0);
            Tensor centred = sub(x, mean(x, axes, true));
            Tensor scale = constant_like(g, 2.0 / divisor);
            return {mul(mul(centred, scale), unreduce(g, shape, mask))};
        };
    });
}

static Tensor arg_reduce(tf_op op, const char *name, const Tensor &a, int64_t axis, bool keepdim) {
    impl_of(a, name);
    if (a.rank() == 0) raise<ShapeError>(std::string(name) + ": needs rank >= 1");
    int ax = normalize_axis(axis, a.rank(), name);
    if (a.shape()[ax] == 0)
        raise<ShapeError>(std::string(name) + ": axis " + std::to_string(axis) + " of shape " + shape_str(a.shape()) +
                          " is empty");
    check_read_size(a, name);
    uint32_t mask = 1u << ax;
    Tensor out = empty_like_device(a, keep_shape(a.shape(), mask), DType::i64);
    tf_params_axis params{sizeof(tf_params_axis), ax};
    dispatch(op, {a}, {out}, &params);
    return keepdim ? out : raw_view(out, drop_shape(a.shape(), mask));
}

Tensor argmax(const Tensor &a, int64_t axis, bool keepdim) {
    return arg_reduce(TF_OP_ARGMAX, "argmax", a, axis, keepdim);
}

Tensor argmin(const Tensor &a, int64_t axis, bool keepdim) {
    return arg_reduce(TF_OP_ARGMIN, "argmin", a, axis, keepdim);
}

Tensor argmax(const Tensor &a) {
    impl_of(a, "argmax");
    return arg_reduce(TF_OP_ARGMAX, "argmax", a.reshape({-1}), 0, false);
}

Tensor argmin(const Tensor &a) {
    impl_of(a, "argmin");
    return arg_reduce(TF_OP_ARGMIN, "argmin", a.reshape({-1}), 0, false);
}

// ---- matmul ---------------------------------------------------------------------------

static Tensor matmul_nd(const Tensor &a, const Tensor &b);

namespace {

// The batch axes of an operand of batch shape `own` broadcast to `batch` (own padded on the left
// with 1s): kept where own has the batch's size, reduced where own has 1 and the batch more.
struct BatchAxes {
    std::vector<int64_t> kept, reduced;
    Shape kept_sizes;
    int64_t reduced_count = 1;
};

BatchAxes batch_axes(const Shape &batch, const Shape &operand) {
    BatchAxes r;
    const size_t own_rank = operand.size() - 2, lead = batch.size() - own_rank;
    for (size_t i = 0; i < batch.size(); ++i) {
        const int64_t own = i < lead ? 1 : operand[i - lead];
        if (own == 1 && batch[i] != 1) {
            r.reduced.push_back(static_cast<int64_t>(i));
            r.reduced_count *= batch[i];
        } else {
            r.kept.push_back(static_cast<int64_t>(i));
            r.kept_sizes.push_back(batch[i]);
        }
    }
    return r;
}

// x [batch..., p, q] as [kept..., rows, cols] with the reduced batch axes folded into its rows
// ([kept..., reduced..., p, q]) or into its columns ([kept..., p, reduced..., q]).
Tensor fold_reduced(const Tensor &x, const BatchAxes &axes, bool into_rows) {
    const int64_t nb = x.rank() - 2, p = x.size(-2), q = x.size(-1);
    std::vector<int64_t> perm = axes.kept;
    if (into_rows) {
        perm.insert(perm.end(), axes.reduced.begin(), axes.reduced.end());
        perm.insert(perm.end(), {nb, nb + 1});
    } else {
        perm.push_back(nb);
        perm.insert(perm.end(), axes.reduced.begin(), axes.reduced.end());
        perm.push_back(nb + 1);
    }
    Shape shape = axes.kept_sizes;
    if (into_rows)
        shape.insert(shape.end(), {axes.reduced_count * p, q});
    else
        shape.insert(shape.end(), {p, axes.reduced_count * q});
    return x.permute(Axes(perm)).reshape(shape);
}

}  // namespace

// Sums over broadcast batch axes of per-batch products (a matmul operand's gradient, attention's)
// summed by sum_to after the product round an f16/bf16 result twice. Folding the summed axes into
// the product's inner dimension makes the sum one product, accumulated in f32 like any other and
// rounded once (issue 31), and one GEMM instead of many.
Tensor detail::matmul_sum_to(const Tensor &a, const Tensor &b, const Shape &shape) {
    const Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                         Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
    const BatchAxes axes = batch_axes(batch, shape);
    if (axes.reduced.empty()) return sum_to(matmul_nd(a, b), shape);
    Shape sa = batch, sb = batch;
    sa.insert(sa.end(), {a.size(-2), a.size(-1)});
    sb.insert(sb.end(), {b.size(-2), b.size(-1)});
    return matmul_nd(fold_reduced(a.expand(sa), axes, false), fold_reduced(b.expand(sb), axes, true)).reshape(shape);
}

// Both operands have rank >= 2; batch dims broadcast.
static Tensor matmul_nd(const Tensor &a, const Tensor &b) {
    int64_t m = a.size(-2), k = a.size(-1), k2 = b.size(-2), n = b.size(-1);
    if (k != k2)
        raise<ShapeError>("matmul: shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) +
                          " do not match: inner dimensions " + std::to_string(k) + " and " + std::to_string(k2) +
                          " differ");
    Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                   Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
    Shape sa = batch, sb = batch, so = batch;
    sa.insert(sa.end(), {m, k});
    sb.insert(sb.end(), {k, n});
    so.insert(so.end(), {m, n});
    Tensor x = a, y = b;
    place_together({&x, &y}, "matmul");
    Tensor out = empty_like_device(x, so, a.dtype());
    Tensor xs = raw_expand(x, sa), ys = raw_expand(y, sb);
    check_read_size(xs, "matmul");
    check_read_size(ys, "matmul");
    dispatch(TF_OP_MATMUL, {xs, ys}, {out});
    return record(out, {&a, &b}, "matmul", [&] {
        return [a = a.detach(), b = b.detach()](const Tensor &g) -> std::vector<Tensor> {
            return {input_needs_grad(0) ? matmul_sum_to(g, b.transpose(-1, -2), a.shape()) : Tensor(),
                    input_needs_grad(1) ? matmul_sum_to(a.transpose(-1, -2), g, b.shape()) : Tensor()};
        };
    });
}

Tensor matmul(const Tensor &a, const Tensor &b) {
    if (Autocast cast{"matmul", {&a, &b}}) return matmul(cast[0], cast[1]);
    impl_of(a, "matmul");
    impl_of(b, "matmul");
    if (a.rank() == 0 || b.rank() == 0)
        raise<ShapeError>("matmul: operands must have rank >= 1, got shapes " + shape_str(a.shape()) + " and " +
                          shape_str(b.shape()));
    if (a.dtype() != b.dtype())
        raise<DTypeError>(std::string("matmul: dtypes ") + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) +
                          " differ");
    // 1-D operands become a row (left) or a column (right); that axis is dropped afterwards.
    Tensor x = a.rank() == 1 ? a.view({1, a.size(0)}) : a;
    Tensor y = b.rank() == 1 ? b.view({b.size(0), 1}) : b;
    if (x.size(-1) != y.size(-2))
        raise<ShapeError>("matmul: shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) +
                          " do not match: inner dimensions " + std::to_string(x.size(-1)) + " and " +
                          std::to_string(y.size(-2)) + " differ");
    Tensor out = matmul_nd(x, y);
    if (a.rank() != 1 && b.rank() != 1) return out;
    Shape result(out.shape().begin(), out.shape().end() - 2);
    if (a.rank() != 1) result.push_back(out.size(-2));
    if (b.rank() != 1) result.push_back(out.size(-1));
    return out.view(result);
}

Tensor cast(const Tensor &a, DType dtype) {
    const TensorImpl &impl = impl_of(a, "cast");
    dtype_size(dtype);  // rejects values outside the enum
    if (impl.dtype == dtype) return a;
    Tensor out = empty_like_device(a, impl.shape, dtype);
    dispatch(TF_OP_CAST, {a}, {out});
    if (!is_float(dtype)) return out;
    return record(out, {&a}, "cast", [&] {
        return [from = impl.dtype](const Tensor &g) -> std::vector<Tensor> { return {cast(g, from)}; };
    });
}

}  // namespace tinyfin
