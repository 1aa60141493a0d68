// Elementwise ops: binary with broadcasting, comparisons, where, unary, scalars.
#include <cmath>
#include <cstring>
#include <utility>

#include "autocast.hpp"
#include "ops_common.hpp"
#include "registry.hpp"

namespace tinyfin {

using namespace detail;

namespace detail {

int normalize_axis(int64_t axis, int rank, const char *op) {
    if (axis < -rank || axis >= rank)
        raise<ShapeError>(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for rank " +
                          std::to_string(rank));
    return axis < 0 ? axis + rank : axis;
}

uint32_t axes_mask(const Shape &shape, const Axes &axes, const char *op) {
    int rank = static_cast<int>(shape.size());
    if (axes.empty()) return rank == 0 ? 0u : (1u << rank) - 1;
    uint32_t mask = 0;
    for (int64_t axis : axes) {
        if (axis < -rank || axis >= rank)
            raise<ShapeError>(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for shape " +
                              shape_str(shape));
        int a = static_cast<int>(axis < 0 ? axis + rank : axis);
        if (mask & (1u << a)) raise<ShapeError>(std::string(op) + ": axis " + std::to_string(axis) + " repeated");
        mask |= 1u << a;
    }
    return mask;
}

Shape keep_shape(const Shape &shape, uint32_t mask) {
    Shape out = shape;
    for (std::size_t i = 0; i < shape.size(); ++i)
        if (mask & (1u << i)) out[i] = 1;
    return out;
}

Shape drop_shape(const Shape &shape, uint32_t mask) {
    Shape out;
    for (std::size_t i = 0; i < shape.size(); ++i)
        if (!(mask & (1u << i))) out.push_back(shape[i]);
    return out;
}

void place_together(std::initializer_list<Tensor *> operands, const char *op) {
    std::vector<const Tensor *> defined;
    for (Tensor *t : operands)
        if (t->defined()) defined.push_back(t);
    if (defined.size() < 2) return;
    Device device = defined[0]->device();
    bool same = true;
    for (const Tensor *t : defined) same = same && t->device() == device;
    if (same) return;
    if (mixed_devices() == MixedDevices::strict) {
        // Only cpu scalars travel: every other operand must already share one device.
        const Tensor *first = nullptr;
        for (const Tensor *t : defined) {
            if (t->rank() == 0 && t->device().backend == "cpu") continue;
            if (!first) {
                first = t;
            } else if (t->device() != first->device()) {
                raise<DeviceError>(std::string(op) + ": expected all tensors on one device, got " +
                                   first->device().str() + " and " + t->device().str() + "; move one with .to(device)");
            }
        }
        Device target = first ? first->device() : device;
        for (Tensor *t : operands)
            if (t->defined() && t->device() != target) *t = t->to(target);
        return;
    }
    const Tensor *best = defined[0];
    for (const Tensor *t : defined) {
        Device d = common_device({best, t});
        if (d == t->device()) best = t;
    }
    Device target = best->device();
    for (Tensor *t : operands)
        if (t->defined()) *t = t->to(target);
}

}  // namespace detail

namespace {

bool same_device(const TensorImpl &a, const TensorImpl &b) {
    return a.storage->backend == b.storage->backend && a.storage->device == b.storage->device;
}

void check_same_dtype(const char *name, const TensorImpl &a, const TensorImpl &b) {
    if (a.dtype != b.dtype)
        raise<DTypeError>(std::string(name) + ": dtypes " + dtype_name(a.dtype) + " and " + dtype_name(b.dtype) +
                          " differ; cast one operand with .to(DType)");
}

// Comparisons produce bool; the other binary ops keep the operands' dtype.
Tensor binary_forward(tf_op op, const Tensor &a, const Tensor &b, bool compare) {
    const char *name = op_info(op).name;
    const TensorImpl &ia = impl_of(a, name), &ib = impl_of(b, name);
    check_same_dtype(name, ia, ib);
    const DType dtype = compare ? DType::boolean : ia.dtype;
    // Equal shapes on one device, the common case: the operands are canonical as they are, so no
    // broadcast shape, expanded views or moves are built for them.
    if (same_shape(ia.shape, ib.shape) && same_device(ia, ib)) {
        Tensor out = make_tensor(*ia.storage->backend, ia.storage->device, ia.shape, dtype);
        const TensorImpl *inputs[] = {&ia, &ib}, *outputs[] = {out.impl()};
        dispatch(op, inputs, outputs);
        return out;
    }
    Shape shape = broadcast_shapes(ia.shape, ib.shape, name);
    Tensor x = a, y = b;
    place_together({&x, &y}, name);
    Tensor out = empty_like_device(x, shape, dtype);
    dispatch(op, {raw_expand(x, shape), raw_expand(y, shape)}, {out});
    return out;
}

// out = op(a, b) written into out's elements (the out= form of BINARY and COMPARE ops).
void binary_into(tf_op op, const Tensor &a, const Tensor &b, const Tensor &out) {
    const OpInfo &info = op_info(op);
    const char *name = info.name;
    const TensorImpl &ia = impl_of(a, name), &ib = impl_of(b, name), &io = impl_of(out, name);
    if ((needs_grad(a) || needs_grad(b) || needs_grad(out)) && grad_enabled()) [[unlikely]] {
        const char *which = needs_grad(a) ? "a" : needs_grad(b) ? "b" : "out";
        raise<AutogradError>(std::string(name) + ": the out= form records no autograd history and " + which +
                             " requires grad; call " + name +
                             "(a, b) to get a gradient, "
                             "or run it under NoGradGuard");
    }
    check_same_dtype(name, ia, ib);
    const DType dtype = info.kind == OpKind::COMPARE ? DType::boolean : ia.dtype;
    if (io.dtype != dtype) [[unlikely]]
        raise<DTypeError>(std::string(name) + ": out is " + dtype_name(io.dtype) + " but the result of " +
                          dtype_name(ia.dtype) + " operands is " + dtype_name(dtype) + "; pass an out of dtype " +
                          dtype_name(dtype));
    if (!same_device(ia, io) || !same_device(ib, io)) [[unlikely]]
        raise<DeviceError>(std::string(name) + ": out is on " + out.device().str() + ", a on " + a.device().str() +
                           " and b on " + b.device().str() +
                           "; the out= form runs on out's device: move the inputs there with .to()");
    const bool same_shapes = same_shape(ia.shape, ib.shape);
    if (!same_shapes || !same_shape(ia.shape, io.shape)) [[unlikely]] {
        Shape shape = broadcast_shapes(ia.shape, ib.shape, name);
        if (shape != io.shape)
            raise<ShapeError>(std::string(name) + ": out has shape " + shape_str(io.shape) + " but " +
                              shape_str(ia.shape) + " and " + shape_str(ib.shape) + " broadcast to " +
                              shape_str(shape) + "; pass an out of that shape");
    }
    for (std::size_t i = 0; i < io.shape.size(); ++i)
        if (io.strides[i] == 0 && io.shape[i] > 1) [[unlikely]]
            raise<ValueError>(std::string(name) + ": out (shape " + shape_str(io.shape) + ", strides " +
                              shape_str(io.strides) +
                              ") repeats elements in memory, as an expand() "
                              "view does; pass a tensor whose elements are distinct");
    // Plugins are promised outputs that never alias inputs (plugin.h), so when out shares memory
    // with an input the result goes through a temporary: as if computed into a new tensor and
    // then copied into out, like numpy's ufuncs.
    const bool through_temporary = overlaps(ia, io) || overlaps(ib, io);
    io.storage->version.fetch_add(1, std::memory_order_relaxed);
    if (!same_shapes || through_temporary) [[unlikely]] {
        Tensor result =
            through_temporary ? make_tensor(*io.storage->backend, io.storage->device, io.shape, dtype) : out;
        dispatch(op, {raw_expand(a, io.shape), raw_expand(b, io.shape)}, {result});
        if (through_temporary) dispatch(TF_OP_CONTIGUOUS, {result}, {out});
        return;
    }
    const TensorImpl *inputs[] = {&ia, &ib}, *outputs[] = {&io};
    dispatch(op, inputs, outputs);
}

Tensor binary(tf_op op, const Tensor &a, const Tensor &b) { return binary_forward(op, a, b, false); }

Tensor compare(tf_op op, const Tensor &a, const Tensor &b) { return binary_forward(op, a, b, true); }

Tensor unary(tf_op op, const Tensor &a, const void *params = nullptr) {
    const TensorImpl &ia = impl_of(a, op_info(op).name);
    Tensor out = make_tensor(*ia.storage->backend, ia.storage->device, ia.shape, ia.dtype);
    const TensorImpl *inputs[] = {&ia}, *outputs[] = {out.impl()};
    dispatch(op, inputs, outputs, params);
    return out;
}

// A float 0/1 mask of cond in the dtype of like.
Tensor mask_of(const Tensor &cond, const Tensor &like) { return cast(cond, like.dtype()); }

}  // namespace

Tensor scalar_like(const Tensor &like, double value) { return full({}, value, like.dtype(), like.device()); }

namespace detail {

// A few dozen recent constants per thread, keyed by backend, device, dtype and the value's bits.
// Evicted oldest first, so values that change every step (AdamW's bias corrections) do not grow
// the cache.
Tensor constant_like(const Tensor &like, double value) {
    const TensorImpl &impl = *like.impl();
    struct Entry {
        const Backend *backend;
        int device;
        DType dtype;
        uint64_t bits;
        Tensor tensor;
    };
    constexpr std::size_t capacity = 48;
    thread_local std::vector<Entry> cache;
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    const Backend *backend = impl.storage->backend;
    const int device = impl.storage->device;
    for (auto it = cache.rbegin(); it != cache.rend(); ++it)
        if (it->bits == bits && it->dtype == impl.dtype && it->backend == backend && it->device == device)
            return it->tensor;
    Tensor t;
    if (bits == 0) {
        // +0 is all-zero bytes in every dtype: written from the host, no fill dispatched (the
        // zero mask of attention without a mask, the zeros of many backward rules).
        const uint64_t zero[1] = {0};
        t = from_host(zero, {}, impl.dtype, like.device());
    } else {
        HelperScope helper;
        t = full({}, value, impl.dtype, like.device());
    }
    if (cache.size() >= capacity) cache.erase(cache.begin());
    cache.push_back({backend, device, impl.dtype, bits, t});
    return t;
}

}  // namespace detail

Tensor add(const Tensor &a, const Tensor &b) {
    if (Autocast cast{"add", {&a, &b}}) return add(cast[0], cast[1]);
    Tensor out = binary(TF_OP_ADD, a, b);
    return record(out, {&a, &b}, "add", [&] {
        return [sa = a.shape(), sb = b.shape()](const Tensor &g) -> std::vector<Tensor> {
            return {input_needs_grad(0) ? sum_to(g, sa) : Tensor(), input_needs_grad(1) ? sum_to(g, sb) : Tensor()};
        };
    });
}

Tensor sub(const Tensor &a, const Tensor &b) {
    if (Autocast cast{"sub", {&a, &b}}) return sub(cast[0], cast[1]);
    Tensor out = binary(TF_OP_SUB, a, b);
    return record(out, {&a, &b}, "sub", [&] {
        return [sa = a.shape(), sb = b.shape()](const Tensor &g) -> std::vector<Tensor> {
            return {input_needs_grad(0) ? sum_to(g, sa) : Tensor(),
                    input_needs_grad(1) ? sum_to(neg(g), sb) : Tensor()};
        };
    });
}

Tensor mul(const Tensor &a, const Tensor &b) {
    if (Autocast cast{"mul", {&a, &b}}) return mul(cast[0], cast[1]);
    Tensor out = binary(TF_OP_MUL, a, b);
    return record(out, {&a, &b}, "mul", [&] {
        return [a = a.detach(), b = b.detach()](const Tensor &g) -> std::vector<Tensor> {
            return {input_needs_grad(0) ? sum_to(mul(g, b), a.shape()) : Tensor(),
                    input_needs_grad(1) ? sum_to(mul(g, a), b.shape()) : Tensor()};
        };
    });
}

Tensor div(const Tensor &a, const Tensor &b) {
    if (Autocast cast{"div", {&a, &b}}) return div(cast[0], cast[1]);
    Tensor out = binary(TF_OP_DIV, a, b);
    return record(out, {&a, &b}, "div", [&] {
        return [a = a.detach(), b = b.detach()](const Tensor &g) -> std::vector<Tensor> {
            Tensor ga = div(g, b);
            return {input_needs_grad(0) ? sum_to(ga, a.shape()) : Tensor(),
                    input_needs_grad(1) ? sum_to(neg(mul(ga, div(a, b))), b.shape()) : Tensor()};
        };
    });
}

Tensor pow(const Tensor &a, const Tensor &b) {
    Tensor out = binary(TF_OP_POW, a, b);
    return record(out, {&a, &b}, "pow", [&] {
        return [a = a.detach(), b = b.detach(), y = out.detach()](const Tensor &g) -> std::vector<Tensor> {
            // d/da = b a^(b-1); d/db = a^b log a, taken as 0 where a <= 0 (as PyTorch does at a == 0).
            Tensor ga = mul(g, mul(b, pow(a, sub(b, constant_like(b, 1)))));
            Tensor positive = gt(a, constant_like(a, 0));
            Tensor safe_a = where(positive, a, constant_like(a, 1));
            Tensor gb = mul(g, mul(y, log(safe_a)));
            return {sum_to(ga, a.shape()), sum_to(gb, b.shape())};
        };
    });
}

// Ties split the gradient equally, like PyTorch.
static Tensor extremum(tf_op op, const Tensor &a, const Tensor &b, const char *name) {
    Tensor out = binary(op, a, b);
    bool is_max = op == TF_OP_MAXIMUM;
    return record(out, {&a, &b}, name, [&] {
        return [a = a.detach(), b = b.detach(), is_max](const Tensor &g) -> std::vector<Tensor> {
            Tensor wins = mask_of(is_max ? gt(a, b) : lt(a, b), g);
            Tensor ties = mul(mask_of(eq(a, b), g), constant_like(g, 0.5));
            Tensor share_a = add(wins, ties);
            Tensor share_b = sub(constant_like(g, 1), share_a);
            return {sum_to(mul(g, share_a), a.shape()), sum_to(mul(g, share_b), b.shape())};
        };
    });
}

Tensor maximum(const Tensor &a, const Tensor &b) { return extremum(TF_OP_MAXIMUM, a, b, "maximum"); }
Tensor minimum(const Tensor &a, const Tensor &b) { return extremum(TF_OP_MINIMUM, a, b, "minimum"); }

Tensor eq(const Tensor &a, const Tensor &b) { return compare(TF_OP_EQ, a, b); }
Tensor ne(const Tensor &a, const Tensor &b) { return compare(TF_OP_NE, a, b); }
Tensor lt(const Tensor &a, const Tensor &b) { return compare(TF_OP_LT, a, b); }
Tensor le(const Tensor &a, const Tensor &b) { return compare(TF_OP_LE, a, b); }
Tensor gt(const Tensor &a, const Tensor &b) { return compare(TF_OP_GT, a, b); }
Tensor ge(const Tensor &a, const Tensor &b) { return compare(TF_OP_GE, a, b); }

// ---- out= forms -----------------------------------------------------------------------

#define TINYFIN_DEFINE_OUT(fn, SYM)                                                                                    \
    void fn(const Tensor &a, const Tensor &b, const Tensor &out) { binary_into(TF_OP_##SYM, a, b, out); }
TINYFIN_BINARY_OUT_OPS(TINYFIN_DEFINE_OUT)
#undef TINYFIN_DEFINE_OUT

namespace {

constexpr bool same_text(const char *a, const char *b) {
    while (*a && *a == *b) ++a, ++b;
    return *a == *b;
}

// The header's list is checked against ops.def: each entry is a BINARY or COMPARE op whose
// function has the op's name, and every such op of ops.def is listed.
#define TINYFIN_CHECK_OUT(fn, SYM)                                                                                     \
    static_assert(op_table[TF_OP_##SYM].kind == OpKind::BINARY || op_table[TF_OP_##SYM].kind == OpKind::COMPARE,       \
                  #fn ": TINYFIN_BINARY_OUT_OPS lists an op that is not BINARY or COMPARE");                           \
    static_assert(same_text(op_table[TF_OP_##SYM].name, #fn),                                                          \
                  #fn ": TINYFIN_BINARY_OUT_OPS pairs a function with another op's symbol");
TINYFIN_BINARY_OUT_OPS(TINYFIN_CHECK_OUT)
#undef TINYFIN_CHECK_OUT

constexpr std::size_t binary_ops_in_table = [] {
    std::size_t n = 0;
    for (const OpInfo &info : op_table) n += info.kind == OpKind::BINARY || info.kind == OpKind::COMPARE;
    return n;
}();
#define TINYFIN_COUNT_OUT(fn, SYM) +1
static_assert(0 TINYFIN_BINARY_OUT_OPS(TINYFIN_COUNT_OUT) == binary_ops_in_table,
              "a BINARY or COMPARE op of ops.def is missing from TINYFIN_BINARY_OUT_OPS in tinyfin.hpp");
#undef TINYFIN_COUNT_OUT

}  // namespace

Tensor where(const Tensor &cond, const Tensor &a, const Tensor &b) {
    if (Autocast cast{"where", {&cond, &a, &b}}) return where(cast[0], cast[1], cast[2]);
    impl_of(cond, "where");
    impl_of(a, "where");
    impl_of(b, "where");
    if (cond.dtype() != DType::boolean)
        raise<DTypeError>(std::string("where: condition must be bool, got ") + dtype_name(cond.dtype()));
    if (a.dtype() != b.dtype())
        raise<DTypeError>(std::string("where: dtypes ") + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) +
                          " differ");
    Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
    Tensor c = cond, x = a, y = b;
    place_together({&c, &x, &y}, "where");
    Tensor out = empty_like_device(x, shape, a.dtype());
    dispatch(TF_OP_WHERE, {raw_expand(c, shape), raw_expand(x, shape), raw_expand(y, shape)}, {out});
    return record(out, {&cond, &a, &b}, "where", [&] {
        return [c = c.detach(), sa = a.shape(), sb = b.shape()](const Tensor &g) -> std::vector<Tensor> {
            Tensor zero = constant_like(g, 0);
            return {Tensor(), sum_to(where(c, g, zero), sa), sum_to(where(c, zero, g), sb)};
        };
    });
}

// ---- Unary ----------------------------------------------------------------------------

Tensor neg(const Tensor &a) {
    Tensor out = unary(TF_OP_NEG, a);
    return record(out, {&a}, "neg", [&] { return [](const Tensor &g) -> std::vector<Tensor> { return {neg(g)}; }; });
}

Tensor abs(const Tensor &a) {
    Tensor out = unary(TF_OP_ABS, a);
    return record(out, {&a}, "abs", [&] {
        return [a = a.detach()](const Tensor &g) -> std::vector<Tensor> {
            Tensor zero = constant_like(a, 0);
            Tensor sign = sub(mask_of(gt(a, zero), g), mask_of(lt(a, zero), g));
            return {mul(g, sign)};
        };
    });
}

Tensor exp(const Tensor &a) {
    if (Autocast cast{"exp", {&a}}) return exp(cast[0]);
    Tensor out = unary(TF_OP_EXP, a);
    return record(out, {&a}, "exp",
                  [&] { return [y = out.detach()](const Tensor &g) -> std::vector<Tensor> { return {mul(g, y)}; }; });
}

Tensor log(const Tensor &a) {
    if (Autocast cast{"log", {&a}}) return log(cast[0]);
    Tensor out = unary(TF_OP_LOG, a);
    return record(out, {&a}, "log",
                  [&] { return [a = a.detach()](const Tensor &g) -> std::vector<Tensor> { return {div(g, a)}; }; });
}

Tensor sqrt(const Tensor &a) {
    Tensor out = unary(TF_OP_SQRT, a);
    return record(out, {&a}, "sqrt", [&] {
        return [y = out.detach()](const Tensor &g) -> std::vector<Tensor> {
            return {div(mul(g, constant_like(g, 0.5)), y)};
        };
    });
}

Tensor rsqrt(const Tensor &a) {
    Tensor out = unary(TF_OP_RSQRT, a);
    return record(out, {&a}, "rsqrt", [&] {
        return [y = out.detach()](const Tensor &g) -> std::vector<Tensor> {
            return {mul(g, mul(constant_like(g, -0.5), mul(y, square(y))))};
        };
    });
}

Tensor sin(const Tensor &a) {
    Tensor out = unary(TF_OP_SIN, a);
    return record(out, {&a}, "sin", [&] {
        return [a = a.detach()](const Tensor &g) -> std::vector<Tensor> { return {mul(g, cos(a))}; };
    });
}

Tensor cos(const Tensor &a) {
    Tensor out = unary(TF_OP_COS, a);
    return record(out, {&a}, "cos", [&] {
        return [a = a.detach()](const Tensor &g) -> std::vector<Tensor> { return {neg(mul(g, sin(a)))}; };
    });
}

Tensor tanh(const Tensor &a) {
    Tensor out = unary(TF_OP_TANH, a);
    return record(out, {&a}, "tanh", [&] {
        return [y = out.detach()](const Tensor &g) -> std::vector<Tensor> {
            return {mul(g, sub(constant_like(y, 1), square(y)))};
        };
    });
}

Tensor erf(const Tensor &a) {
    Tensor out = unary(TF_OP_ERF, a);
    return record(out, {&a}, "erf", [&] {
        return [a = a.detach()](const Tensor &g) -> std::vector<Tensor> {
            // d/dx erf(x) = 2/sqrt(pi) exp(-x^2)
            return {mul(g, mul(constant_like(a, 2.0 / std::sqrt(M_PI)), exp(neg(square(a)))))};
        };
    });
}

namespace {

// (1 - a)(1 + a) and (a - 1)(a + 1): 1 - a^2 and a^2 - 1 without the cancellation near |a| = 1.
Tensor one_minus_square(const Tensor &a) { return mul(sub(constant_like(a, 1), a), add(constant_like(a, 1), a)); }

Tensor square_minus_one(const Tensor &a) { return mul(sub(a, constant_like(a, 1)), add(a, constant_like(a, 1))); }

// A unary op whose gradient is g * d(a), d computed from the saved input.
template <class D>
Tensor unary_with_derivative(tf_op op, const char *name, const Tensor &a, D derivative) {
    Tensor out = unary(op, a);
    return record(out, {&a}, name, [&] {
        return [a = a.detach(), derivative](const Tensor &g) -> std::vector<Tensor> { return {mul(g, derivative(a))}; };
    });
}

}  // namespace

Tensor asin(const Tensor &a) {
    return unary_with_derivative(TF_OP_ASIN, "asin", a, [](const Tensor &x) { return rsqrt(one_minus_square(x)); });
}

Tensor acos(const Tensor &a) {
    return unary_with_derivative(TF_OP_ACOS, "acos", a,
                                 [](const Tensor &x) { return neg(rsqrt(one_minus_square(x))); });
}

Tensor atan(const Tensor &a) {
    return unary_with_derivative(TF_OP_ATAN, "atan", a, [](const Tensor &x) {
        return div(constant_like(x, 1), add(constant_like(x, 1), square(x)));
    });
}

Tensor asinh(const Tensor &a) {
    return unary_with_derivative(TF_OP_ASINH, "asinh", a,
                                 [](const Tensor &x) { return rsqrt(add(square(x), constant_like(x, 1))); });
}

Tensor acosh(const Tensor &a) {
    return unary_with_derivative(TF_OP_ACOSH, "acosh", a, [](const Tensor &x) { return rsqrt(square_minus_one(x)); });
}

Tensor atanh(const Tensor &a) {
    return unary_with_derivative(TF_OP_ATANH, "atanh", a,
                                 [](const Tensor &x) { return div(constant_like(x, 1), one_minus_square(x)); });
}

Tensor sigmoid(const Tensor &a) {
    Tensor out = unary(TF_OP_SIGMOID, a);
    return record(out, {&a}, "sigmoid", [&] {
        return [y = out.detach()](const Tensor &g) -> std::vector<Tensor> {
            return {mul(g, mul(y, sub(constant_like(y, 1), y)))};
        };
    });
}

Tensor relu(const Tensor &a) {
    Tensor out = unary(TF_OP_RELU, a);
    // The output gives relu_backward the input's mask (y > 0 exactly where x > 0, NaN where x is
    // NaN), as torch's threshold_backward uses the result: the input can be freed after the
    // forward, and a following max_pool2d's backward has just read y, so it is still in cache.
    return record(out, {&a}, "relu", [&] {
        return [y = out.detach()](const Tensor &g) -> std::vector<Tensor> { return {relu_backward(g, y)}; };
    });
}

Tensor relu_backward(const Tensor &dy, const Tensor &x) {
    Tensor out = binary(TF_OP_RELU_BACKWARD, dy, x);
    // Linear in dy through the same mask; piecewise constant in x, so x's gradient is zero
    // (torch's threshold_backward has the same double backward).
    return record(out, {&dy, &x}, "relu_backward", [&] {
        return [x = x.detach(), sdy = dy.shape()](const Tensor &g) -> std::vector<Tensor> {
            return {input_needs_grad(0) ? sum_to(relu_backward(g, x), sdy) : Tensor(),
                    input_needs_grad(1) ? zeros(x.shape(), x.dtype(), x.device()) : Tensor()};
        };
    });
}

namespace {

// dy (Phi(x) + x phi(x)) from ordinary ops, where no plugin claims gelu_backward: the exact
// gelu's gradient as its backward composed it before the op existed.
Tensor gelu_backward_composed(const Tensor &dy, const Tensor &x) {
    Tensor cdf = mul(constant_like(x, 0.5), add(constant_like(x, 1), erf(mul(x, constant_like(x, M_SQRT1_2)))));
    Tensor pdf = mul(constant_like(x, 1.0 / std::sqrt(2 * M_PI)), exp(mul(constant_like(x, -0.5), square(x))));
    return mul(dy, add(cdf, mul(x, pdf)));
}

}  // namespace

Tensor gelu_backward(const Tensor &dy, const Tensor &x) {
    constexpr tf_op op = TF_OP_GELU_BACKWARD;
    const char *name = op_info(op).name;
    const TensorImpl &idy = impl_of(dy, name), &ix = impl_of(x, name);
    check_same_dtype(name, idy, ix);
    if (!is_float(idy.dtype))
        raise<DTypeError>(std::string(name) + ": dy and x are " + dtype_name(idy.dtype) +
                          "; gelu_backward is defined on float dtypes (f32, f16, bf16): cast them first");
    const Shape shape = broadcast_shapes(idy.shape, ix.shape, name);
    Tensor a = dy, b = x;
    place_together({&a, &b}, "gelu_backward");
    Tensor out;
    {
        // One pass where the operands' plugin claims the op (never a host trip for it: the
        // composition below runs on the device otherwise), recorded as one node either way.
        NoGradGuard no_grad;
        if (may_claim(op, *a.impl(), idy.dtype)) {
            out = empty_like_device(a, shape, idy.dtype);
            const Tensor ea = raw_expand(a, shape), eb = raw_expand(b, shape);
            const TensorImpl *inputs[] = {ea.impl(), eb.impl()}, *outputs[] = {out.impl()};
            if (!dispatch_if_claimed(op, inputs, outputs, nullptr)) out = Tensor();
        }
        if (!out.defined()) out = gelu_backward_composed(a, b);
    }
    // Linear in dy; in x, dy times gelu''(x) = phi(x) (2 - x^2), composed (second derivatives
    // are rare, so they get no kernel).
    return record(out, {&dy, &x}, name, [&] {
        return [dy = dy.detach(), x = x.detach()](const Tensor &g) -> std::vector<Tensor> {
            Tensor gdy = input_needs_grad(0) ? sum_to(gelu_backward(g, x), dy.shape()) : Tensor();
            if (!input_needs_grad(1)) return {gdy, Tensor()};
            Tensor pdf = mul(constant_like(x, 1.0 / std::sqrt(2 * M_PI)), exp(mul(constant_like(x, -0.5), square(x))));
            Tensor second = mul(pdf, sub(constant_like(x, 2), square(x)));
            return {gdy, sum_to(mul(mul(g, dy), second), x.shape())};
        };
    });
}

Tensor gelu(const Tensor &a, bool approximate) {
    if (approximate) {
        Tensor out = unary(TF_OP_GELU_TANH, a);
        return record(out, {&a}, "gelu_tanh", [&] {
            return [x = a.detach()](const Tensor &g) -> std::vector<Tensor> {
                // y = x/2 (1 + tanh(u)), u = k (x + c x^3)
                const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
                Tensor x2 = square(x);
                Tensor u = mul(constant_like(x, k), add(x, mul(constant_like(x, c), mul(x2, x))));
                Tensor t = tanh(u);
                Tensor du = mul(constant_like(x, k), add(constant_like(x, 1), mul(constant_like(x, 3 * c), x2)));
                Tensor half = constant_like(x, 0.5);
                Tensor dy = add(mul(half, add(constant_like(x, 1), t)),
                                mul(mul(half, x), mul(sub(constant_like(x, 1), square(t)), du)));
                return {mul(g, dy)};
            };
        });
    }
    Tensor out = unary(TF_OP_GELU, a);
    return record(out, {&a}, "gelu", [&] {
        return [x = a.detach()](const Tensor &g) -> std::vector<Tensor> {
            // d/dx x Phi(x) = Phi(x) + x phi(x)
            return {gelu_backward(g, x)};
        };
    });
}

Tensor silu(const Tensor &a) {
    Tensor out = unary(TF_OP_SILU, a);
    return record(out, {&a}, "silu", [&] {
        return [x = a.detach()](const Tensor &g) -> std::vector<Tensor> {
            Tensor s = sigmoid(x);
            Tensor one = constant_like(x, 1);
            return {mul(g, mul(s, add(one, mul(x, sub(one, s)))))};
        };
    });
}

Tensor square(const Tensor &a) {
    Tensor out = unary(TF_OP_SQUARE, a);
    return record(out, {&a}, "square", [&] {
        return
            [x = a.detach()](const Tensor &g) -> std::vector<Tensor> { return {mul(g, mul(x, constant_like(x, 2)))}; };
    });
}

Tensor clamp(const Tensor &a, double min, double max) {
    if (std::isnan(min) || std::isnan(max) || min > max)
        raise<ValueError>("clamp: bounds [" + std::to_string(min) + ", " + std::to_string(max) +
                          "] are not an interval");
    tf_params_clamp params{sizeof(tf_params_clamp), min, max};
    Tensor out = unary(TF_OP_CLAMP, a, &params);
    return record(out, {&a}, "clamp", [&] {
        return [x = a.detach(), min, max](const Tensor &g) -> std::vector<Tensor> {
            Tensor inside = mul(mask_of(ge(x, constant_like(x, min)), g), mask_of(le(x, constant_like(x, max)), g));
            return {mul(g, inside)};
        };
    });
}

// ---- Scalars ------------------------------------------------------------------------------

Tensor operator+(const Tensor &a, double b) { return add(a, constant_like(a, b)); }
Tensor operator-(const Tensor &a, double b) { return sub(a, constant_like(a, b)); }
Tensor operator*(const Tensor &a, double b) { return mul(a, constant_like(a, b)); }
Tensor operator/(const Tensor &a, double b) { return div(a, constant_like(a, b)); }
Tensor operator+(double a, const Tensor &b) { return add(constant_like(b, a), b); }
Tensor operator-(double a, const Tensor &b) { return sub(constant_like(b, a), b); }
Tensor operator*(double a, const Tensor &b) { return mul(constant_like(b, a), b); }
Tensor operator/(double a, const Tensor &b) { return div(constant_like(b, a), b); }

Tensor add(const Tensor &a, double b) { return add(a, constant_like(a, b)); }
Tensor sub(const Tensor &a, double b) { return sub(a, constant_like(a, b)); }
Tensor mul(const Tensor &a, double b) { return mul(a, constant_like(a, b)); }
Tensor div(const Tensor &a, double b) { return div(a, constant_like(a, b)); }
Tensor pow(const Tensor &a, double exponent) { return pow(a, constant_like(a, exponent)); }
Tensor maximum(const Tensor &a, double b) { return maximum(a, constant_like(a, b)); }
Tensor minimum(const Tensor &a, double b) { return minimum(a, constant_like(a, b)); }
Tensor add(double a, const Tensor &b) { return add(constant_like(b, a), b); }
Tensor sub(double a, const Tensor &b) { return sub(constant_like(b, a), b); }
Tensor mul(double a, const Tensor &b) { return mul(constant_like(b, a), b); }
Tensor div(double a, const Tensor &b) { return div(constant_like(b, a), b); }
Tensor pow(double base, const Tensor &exponent) { return pow(constant_like(exponent, base), exponent); }
Tensor maximum(double a, const Tensor &b) { return maximum(constant_like(b, a), b); }
Tensor minimum(double a, const Tensor &b) { return minimum(constant_like(b, a), b); }
Tensor where(const Tensor &cond, const Tensor &a, double b) { return where(cond, a, constant_like(a, b)); }
Tensor where(const Tensor &cond, double a, const Tensor &b) { return where(cond, constant_like(b, a), b); }

namespace {

// The smallest and largest value of an integer or bool dtype, as doubles (i64's largest rounds
// up to 2^63, which no i64 reaches: the comparisons below stay right).
std::pair<double, double> integer_range(DType dtype) {
    switch (dtype) {
    case DType::boolean: return {0.0, 1.0};
    case DType::i32: return {-2147483648.0, 2147483647.0};
    default: return {-9223372036854775808.0, 9223372036854775807.0};
    }
}

// a OP s for a scalar s, exactly. A float tensor compares with s rounded to its dtype, as the
// arithmetic forms and torch do. An integer or bool tensor compares with s itself: when s is not
// one of the dtype's values (a fraction, out of range, NaN), the comparison is rewritten to an
// equal one on a value the dtype holds, or to its constant answer (converting s to the dtype
// would truncate: lt(i, 0.5) would become i < 0).
Tensor compare_scalar(tf_op op, const Tensor &a, double s) {
    const DType dtype = a.dtype();
    if (is_float(dtype)) return compare(op, a, constant_like(a, s));
    const auto [lo, hi] = integer_range(dtype);
    if (s == std::floor(s) && s >= lo && s < 9223372036854775808.0 && s <= hi)
        return compare(op, a, constant_like(a, s));
    const Tensor always = eq(a, a), never = ne(a, a);  // an integer equals itself
    if (std::isnan(s)) return op == TF_OP_NE ? always : never;
    switch (op) {
    case TF_OP_EQ: return never;
    case TF_OP_NE: return always;
    case TF_OP_LT:
    case TF_OP_LE: {  // a < s and a <= s: a <= floor(s)
        const double t = std::floor(s);
        if (t >= hi) return always;
        if (t < lo) return never;
        return le(a, constant_like(a, t));
    }
    default: {  // a > s and a >= s: a >= ceil(s)
        const double t = std::ceil(s);
        if (t <= lo) return always;
        if (t > hi) return never;
        return ge(a, constant_like(a, t));
    }
    }
}

// s OP a as a OP' s.
tf_op mirrored(tf_op op) {
    switch (op) {
    case TF_OP_LT: return TF_OP_GT;
    case TF_OP_LE: return TF_OP_GE;
    case TF_OP_GT: return TF_OP_LT;
    case TF_OP_GE: return TF_OP_LE;
    default: return op;  // eq, ne
    }
}

}  // namespace

Tensor eq(const Tensor &a, double b) { return compare_scalar(TF_OP_EQ, a, b); }
Tensor ne(const Tensor &a, double b) { return compare_scalar(TF_OP_NE, a, b); }
Tensor lt(const Tensor &a, double b) { return compare_scalar(TF_OP_LT, a, b); }
Tensor le(const Tensor &a, double b) { return compare_scalar(TF_OP_LE, a, b); }
Tensor gt(const Tensor &a, double b) { return compare_scalar(TF_OP_GT, a, b); }
Tensor ge(const Tensor &a, double b) { return compare_scalar(TF_OP_GE, a, b); }
Tensor eq(double a, const Tensor &b) { return compare_scalar(mirrored(TF_OP_EQ), b, a); }
Tensor ne(double a, const Tensor &b) { return compare_scalar(mirrored(TF_OP_NE), b, a); }
Tensor lt(double a, const Tensor &b) { return compare_scalar(mirrored(TF_OP_LT), b, a); }
Tensor le(double a, const Tensor &b) { return compare_scalar(mirrored(TF_OP_LE), b, a); }
Tensor gt(double a, const Tensor &b) { return compare_scalar(mirrored(TF_OP_GT), b, a); }
Tensor ge(double a, const Tensor &b) { return compare_scalar(mirrored(TF_OP_GE), b, a); }

}  // namespace tinyfin
