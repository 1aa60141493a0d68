// The C++ op functions: shape and dtype rules per op kind, placement, dispatch.
#include <algorithm>
#include <cmath>

#include "dispatch.hpp"
#include "errors.hpp"
#include "op_table.hpp"
#include "registry.hpp"

namespace tinyfin {

using namespace detail;

namespace {

Tensor empty_on(const Device &device, const Shape &shape, DType dtype) {
    Backend *backend = Registry::checked().usable(device.backend);
    if (!backend) raise<DeviceError>("device " + device.str() + " is not available");
    return make_tensor(*backend, device.index, shape, dtype);
}

Tensor empty_like_device(const Tensor &like, const Shape &shape, DType dtype) {
    const TensorImpl &impl = *like.impl();
    return make_tensor(*impl.storage->backend, impl.storage->device, shape, dtype);
}

Tensor binary(tf_op op, const Tensor &a, const Tensor &b) {
    const char *name = op_info(op).name;
    impl_of(a, name);
    impl_of(b, name);
    if (a.dtype() != b.dtype())
        raise<DTypeError>(std::string(name) + ": dtypes " + dtype_name(a.dtype()) + " and " +
                          dtype_name(b.dtype()) + " differ; cast one operand with .to(DType)");
    Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
    Device device = common_device({&a, &b});
    Tensor x = a.to(device), y = b.to(device);
    Tensor out = empty_like_device(x, shape, a.dtype());
    dispatch(op, {x.expand(shape), y.expand(shape)}, {out});
    return out;
}

Tensor unary(tf_op op, const Tensor &a) {
    impl_of(a, op_info(op).name);
    Tensor out = empty_like_device(a, a.shape(), a.dtype());
    dispatch(op, {a}, {out});
    return out;
}

} // namespace

Tensor add(const Tensor &a, const Tensor &b) { return binary(TF_OP_ADD, a, b); }
Tensor sub(const Tensor &a, const Tensor &b) { return binary(TF_OP_SUB, a, b); }
Tensor mul(const Tensor &a, const Tensor &b) { return binary(TF_OP_MUL, a, b); }
Tensor div(const Tensor &a, const Tensor &b) { return binary(TF_OP_DIV, a, b); }
Tensor neg(const Tensor &a) { return unary(TF_OP_NEG, a); }
Tensor exp(const Tensor &a) { return unary(TF_OP_EXP, a); }
Tensor relu(const Tensor &a) { return unary(TF_OP_RELU, a); }

Tensor sum(const Tensor &a, const std::vector<int> &axes, bool keepdim) {
    const TensorImpl &impl = impl_of(a, "sum");
    int rank = static_cast<int>(impl.shape.size());
    uint32_t mask = 0;
    if (axes.empty()) {
        mask = rank == 0 ? 0 : (1u << rank) - 1;
    } else {
        for (int axis : axes) {
            if (axis < -rank || axis >= rank)
                raise<ShapeError>("sum: axis " + std::to_string(axis) + " is out of range for shape " +
                                  shape_str(impl.shape));
            int a_ = axis < 0 ? axis + rank : axis;
            if (mask & (1u << a_)) raise<ShapeError>("sum: axis " + std::to_string(axis) + " repeated");
            mask |= 1u << a_;
        }
    }
    Shape kept = impl.shape, squeezed;
    for (int i = 0; i < rank; ++i) {
        if (mask & (1u << i)) kept[i] = 1;
        else squeezed.push_back(impl.shape[i]);
    }
    Tensor out = empty_like_device(a, kept, impl.dtype);
    tf_params_reduce params{sizeof(tf_params_reduce), mask};
    dispatch(TF_OP_SUM, {a}, {out}, &params);
    return keepdim ? out : out.view(squeezed);
}

Tensor matmul(const Tensor &a, const Tensor &b) {
    impl_of(a, "matmul");
    impl_of(b, "matmul");
    if (a.rank() == 0 || b.rank() == 0)
        raise<ShapeError>("matmul: operands must have rank >= 1, got shapes " + shape_str(a.shape()) +
                          " and " + shape_str(b.shape()));
    if (a.dtype() != b.dtype())
        raise<DTypeError>(std::string("matmul: dtypes ") + dtype_name(a.dtype()) + " and " +
                          dtype_name(b.dtype()) + " differ");
    // 1-D operands become a row (left) or a column (right) and the axis is dropped afterwards.
    Tensor x = a.rank() == 1 ? a.view({1, a.size(0)}) : a;
    Tensor y = b.rank() == 1 ? b.view({b.size(0), 1}) : b;
    int64_t m = x.size(-2), k = x.size(-1), k2 = y.size(-2), n = y.size(-1);
    if (k != k2)
        raise<ShapeError>("matmul: shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) +
                          " do not match: inner dimensions " + std::to_string(k) + " and " +
                          std::to_string(k2) + " differ");
    Shape batch_x(x.shape().begin(), x.shape().end() - 2);
    Shape batch_y(y.shape().begin(), y.shape().end() - 2);
    Shape batch = broadcast_shapes(batch_x, batch_y, "matmul");
    Shape sx = batch, sy = batch, so = batch;
    sx.insert(sx.end(), {m, k});
    sy.insert(sy.end(), {k, n});
    so.insert(so.end(), {m, n});
    Device device = common_device({&x, &y});
    x = x.to(device);
    y = y.to(device);
    Tensor out = empty_like_device(x, so, a.dtype());
    dispatch(TF_OP_MATMUL, {x.expand(sx), y.expand(sy)}, {out});
    Shape result = batch;
    if (a.rank() != 1) result.push_back(m);
    if (b.rank() != 1) result.push_back(n);
    return out.view(result);
}

Tensor cast(const Tensor &a, DType dtype) {
    const TensorImpl &impl = impl_of(a, "cast");
    dtype_size(dtype); // rejects values outside the enum
    if (impl.dtype == dtype) return a;
    Tensor out = empty_like_device(a, impl.shape, dtype);
    dispatch(TF_OP_CAST, {a}, {out});
    return out;
}

// ---- Factories ---------------------------------------------------------------------

Device default_device() { return Device{Registry::checked().selected().name(), 0}; }

Tensor empty(const Shape &shape, DType dtype, std::optional<Device> device) {
    dtype_size(dtype);
    return empty_on(device ? *device : default_device(), shape, dtype);
}

Tensor full(const Shape &shape, double value, DType dtype, std::optional<Device> device) {
    Tensor out = empty(shape, dtype, std::move(device));
    tf_params_fill params{sizeof(tf_params_fill), value};
    dispatch(TF_OP_FILL, {}, {out}, &params);
    return out;
}

Tensor zeros(const Shape &shape, DType dtype, std::optional<Device> device) {
    return full(shape, 0.0, dtype, std::move(device));
}

Tensor ones(const Shape &shape, DType dtype, std::optional<Device> device) {
    return full(shape, 1.0, dtype, std::move(device));
}

Tensor scalar(double value, DType dtype, std::optional<Device> device) {
    return full({}, value, dtype, std::move(device));
}

Tensor from_host(const void *data, const Shape &shape, DType dtype, std::optional<Device> device) {
    Tensor out = empty(shape, dtype, std::move(device));
    std::size_t bytes = out.nbytes();
    if (bytes == 0) return out;
    if (!data) raise<ValueError>("from_host: data is NULL for shape " + shape_str(shape));
    Storage &storage = *out.impl()->storage;
    tf_error err = make_error();
    tf_status status = storage.backend->table().buffer_write(storage.buffer, 0, data, bytes, &err);
    if (!storage.host)
        Registry::instance().counters().backends[storage.backend->slot()].bytes_to_device += bytes;
    if (status != TF_STATUS_OK)
        raise_status(status, "from_host to " + out.device().str() + ": " +
                                 error_text(err, "failed without a message"));
    return out;
}

Tensor arange(double start, double end, double step, DType dtype, std::optional<Device> device) {
    if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
        raise<ValueError>("arange: start, end and step must be finite and step non-zero");
    double count = std::ceil((end - start) / step);
    if (count > 1e12) raise<ValueError>("arange: " + std::to_string(count) + " elements is too many");
    int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    // Generated in double on the host, then cast on the device: exact for every dtype.
    std::vector<double> values(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) values[i] = start + static_cast<double>(i) * step;
    std::vector<float> f32(values.begin(), values.end());
    std::vector<int64_t> i64(n);
    for (int64_t i = 0; i < n; ++i) i64[i] = static_cast<int64_t>(values[i]);
    bool integral = dtype == DType::i32 || dtype == DType::i64 || dtype == DType::boolean;
    Tensor t = integral ? from_host(i64.data(), {n}, DType::i64, std::move(device))
                        : from_host(f32.data(), {n}, DType::f32, std::move(device));
    return cast(t, dtype);
}

namespace {

// splitmix64: a tiny, well-mixed generator; same stream on every platform.
struct SplitMix64 {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Uniform in [0, 1) with 24 bits, exactly representable in f32.
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
};

} // namespace

Tensor rand(const Shape &shape, uint64_t seed, std::optional<Device> device) {
    int64_t n = checked_numel(shape, "rand");
    std::vector<float> values(static_cast<std::size_t>(n));
    SplitMix64 gen{seed};
    for (float &v : values) v = gen.uniform();
    return from_host(values.data(), shape, DType::f32, std::move(device));
}

Tensor randn(const Shape &shape, uint64_t seed, std::optional<Device> device) {
    int64_t n = checked_numel(shape, "randn");
    std::vector<float> values(static_cast<std::size_t>(n));
    SplitMix64 gen{seed};
    // Box-Muller in double, two normals per pair of uniforms.
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = (static_cast<double>(gen.next() >> 11) + 1.0) * (1.0 / 9007199254740993.0);
        double u2 = static_cast<double>(gen.next() >> 11) * (1.0 / 9007199254740992.0);
        double r = std::sqrt(-2.0 * std::log(u1));
        values[i] = static_cast<float>(r * std::cos(2.0 * M_PI * u2));
        if (i + 1 < n) values[i + 1] = static_cast<float>(r * std::sin(2.0 * M_PI * u2));
    }
    return from_host(values.data(), shape, DType::f32, std::move(device));
}

} // namespace tinyfin
