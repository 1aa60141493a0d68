// The plain pieces of tensors, below dispatch and autograd: shapes and broadcasting, devices,
// storage (allocation, extents, overlap), construction of tensors and views, and the Tensor
// accessors. Nothing here dispatches an op or records a gradient; tensor.cpp's methods that do
// build on these.
#include <algorithm>
#include <cstring>

#include "errors.hpp"
#include "registry.hpp"
#include "tensor_impl.hpp"
#include "tinyfin/extend.hpp"

namespace tinyfin {

using namespace detail;

// ---- dtypes, devices, shapes --------------------------------------------------

std::string shape_str(const Shape &shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) text += ",";
        text += std::to_string(shape[i]);
    }
    return text + "]";
}

Device Device::parse(std::string_view text) {
    Device device;
    std::size_t colon = text.find(':');
    device.backend = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) {
        std::string digits(text.substr(colon + 1));
        if (digits.empty() || digits.size() > 6 ||
            !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
            raise<DeviceError>("'" + std::string(text) + "' is not a device (expected name or name:index)");
        device.index = std::stoi(digits);
    }
    Backend *backend = Registry::checked().usable(device.backend);
    if (!backend)
        raise<DeviceError>("no usable backend '" + device.backend + "' for device '" + std::string(text) +
                           "'; run tinyfin-info to see what is loaded");
    if (device.index >= backend->device_count())
        raise<DeviceError>("device '" + std::string(text) + "' does not exist: " + device.backend + " has " +
                           std::to_string(backend->device_count()) + " device(s)");
    return device;
}

std::string Device::str() const {
    return backend == "cpu" && index == 0 ? backend : backend + ":" + std::to_string(index);
}

Shape broadcast_shapes(const Shape &a, const Shape &b, std::string_view op) {
    std::size_t rank = std::max(a.size(), b.size());
    Shape out(rank);
    for (std::size_t i = 0; i < rank; ++i) {
        int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
        int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
        if (da != db && da != 1 && db != 1)
            raise<ShapeError>(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                              " cannot broadcast");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

namespace detail {

void raise_status(tf_status status, const std::string &message) {
    switch (status) {
    case TF_STATUS_OUT_OF_MEMORY: raise<OutOfMemoryError>(message);
    case TF_STATUS_INVALID_ARGUMENT: raise<ValueError>(message);
    case TF_STATUS_UNSUPPORTED: raise<DTypeError>(message);
    default: raise<PluginError>(message);
    }
}

Storage::~Storage() {
    if (buffer && Registry::alive()) {
        guarded_value(backend->name(), "buffer_free", false, [&] {
            backend->table().buffer_free(buffer);
            return true;
        });
        if (counted)
            Registry::instance().counters().backends[backend->slot()].bytes_in_use.fetch_sub(nbytes,
                                                                                             std::memory_order_relaxed);
    }
    if (release) release();
}

std::shared_ptr<Storage> allocate_storage(Backend &backend, int device, uint64_t nbytes) {
    auto storage = std::make_shared<Storage>();
    storage->backend = &backend;
    storage->device = device;
    storage->nbytes = nbytes;
    ScratchError err;
    tf_error &e = err.get();
    tf_status status = guarded(e, "buffer_alloc", [&] {
        return backend.table().buffer_alloc(device, std::max<uint64_t>(nbytes, 1), &storage->buffer, &e);
    });
    if (status != TF_STATUS_OK || !storage->buffer) {
        storage->buffer = nullptr;
        std::string where = Device{backend.name(), device}.str();
        raise_status(status == TF_STATUS_OK ? TF_STATUS_INTERNAL : status,
                     "cannot allocate " + std::to_string(nbytes) + " bytes on " + where + ": " +
                         err.text("the plugin returned no buffer"));
    }
    storage->host = backend.host_addressable(device) ? backend.buffer_host_ptr(storage->buffer) : nullptr;
    count_allocation(Registry::instance().counters().backends[backend.slot()], nbytes);
    storage->counted = true;
    return storage;
}

int64_t extent(const TensorImpl &t) {
    int64_t end = 1;
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
        if (t.shape[i] == 0) return 0;
        end += (t.shape[i] - 1) * t.strides[i];
    }
    return end;
}

bool overlaps(const TensorImpl &a, const TensorImpl &b) {
    if (a.storage != b.storage) return false;
    const int64_t na = extent(a), nb = extent(b);
    if (na == 0 || nb == 0) return false;
    return byte_offset(a.dtype, a.offset) < byte_offset(b.dtype, b.offset + nb) &&
           byte_offset(b.dtype, b.offset) < byte_offset(a.dtype, a.offset + na);
}

int64_t checked_numel(const Shape &shape, std::string_view op) {
    if (shape.size() > TF_MAX_RANK)
        raise<ShapeError>(std::string(op) + ": rank " + std::to_string(shape.size()) + " exceeds the limit of " +
                          std::to_string(TF_MAX_RANK) + " (shape " + shape_str(shape) + ")");
    for (int64_t size : shape)
        if (size < 0) raise<ShapeError>(std::string(op) + ": negative size in shape " + shape_str(shape));
    // A zero-size axis anywhere makes 0 elements, whatever the order of the axes: a permuted
    // [0, 2^62, 5] must not overflow where [2^62, 5, 0] is multiplied from the left.
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
    int64_t numel = 1;
    for (int64_t size : shape) {
        if (__builtin_mul_overflow(numel, size, &numel))
            raise<ShapeError>(std::string(op) + ": shape " + shape_str(shape) +
                              " has more elements than fit in 64 bits");
    }
    return numel;
}

Shape contiguous_strides(const Shape &shape) {
    Shape strides(shape.size());
    contiguous_strides(shape, strides);
    return strides;
}

void contiguous_strides(const Shape &shape, Shape &strides) {
    int64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        // A zero-size axis keeps numel at 0, so checked_numel lets [0, 2^62, 3] through; its
        // strides would still overflow.
        if (__builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1), &stride))
            raise<ShapeError>("shape " + shape_str(shape) + " has strides that do not fit in 64 bits");
    }
}

Tensor make_tensor(Backend &backend, int device, const Shape &shape, DType dtype) {
    int64_t numel = checked_numel(shape, "empty");
    (void)numel;
    return Tensor(fresh_tensor_impl(backend, device, shape, dtype, dtype_bytes(dtype, shape)));
}

Tensor make_view(const Tensor &base, Shape shape, Shape strides, int64_t offset) {
    if (is_quantized(base.dtype())) check_quantized_layout(base.dtype(), shape, strides, offset, "view");
    auto impl = std::make_shared<TensorImpl>();
    impl->dtype = base.dtype();
    impl->shape = std::move(shape);
    impl->strides = std::move(strides);
    impl->offset = offset;
    impl->storage = base.impl()->storage;
    const TensorImpl &from = *base.impl();
    impl->view_base = from.view_base ? from.view_base : std::const_pointer_cast<TensorImpl>(from.shared_from_this());
    impl->view_version = impl->storage->version.load(std::memory_order_relaxed);
    return Tensor(std::move(impl));
}

Backend &backend_of(const Tensor &tensor) { return *impl_of(tensor, "tensor").storage->backend; }

void raise_undefined(std::string_view op) {
    raise<DeviceError>(std::string(op) + ": the tensor is undefined (default-constructed or moved from)");
}

}  // namespace detail

// ---- Tensor ---------------------------------------------------------------------

Tensor::Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

DType Tensor::dtype() const { return impl_of(*this, "dtype").dtype; }
int Tensor::rank() const { return static_cast<int>(impl_of(*this, "rank").shape.size()); }
const Shape &Tensor::shape() const { return impl_of(*this, "shape").shape; }
const Shape &Tensor::strides() const { return impl_of(*this, "strides").strides; }
int64_t Tensor::offset() const { return impl_of(*this, "offset").offset; }

int detail::tensor_axis(int64_t axis, int rank, std::string_view op) {
    if (axis < -rank || axis >= std::max(rank, 1) || (rank == 0 && axis != 0 && axis != -1))
        raise<ShapeError>(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for rank " +
                          std::to_string(rank));
    return static_cast<int>(axis < 0 ? axis + rank : axis);
}

int64_t Tensor::size(int64_t axis) const {
    if (rank() == 0) raise<ShapeError>("size: a 0-d tensor has no axis " + std::to_string(axis));
    int a = tensor_axis(axis, rank(), "size");
    return shape()[a];
}

int64_t Tensor::numel() const {
    const Shape &shape = this->shape();
    // Zero first: with a zero-size axis the other axes may multiply past 64 bits.
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

std::size_t Tensor::nbytes() const {
    // A broadcast view (expand) may have more elements than bytes fit in 64 bits.
    std::size_t bytes;
    if (is_quantized(dtype())) {
        // Quantized views are whole blocks (check_quantized_layout), never broadcast to more.
        if (numel() == 0) return 0;
        return dtype_bytes(dtype(), shape());
    }
    if (__builtin_mul_overflow(static_cast<std::size_t>(numel()), dtype_size(dtype()), &bytes))
        raise<ShapeError>("nbytes: " + shape_str(shape()) + " of " + dtype_name(dtype()) +
                          " is more than 2^64 bytes (a broadcast view this large has no dense form)");
    return bytes;
}

Device Tensor::device() const {
    const TensorImpl &impl = impl_of(*this, "device");
    return Device{impl.storage->backend->name(), impl.storage->device};
}

bool Tensor::shares_storage(const Tensor &other) const {
    return impl_of(*this, "shares_storage").storage == impl_of(other, "shares_storage").storage;
}

bool Tensor::is_contiguous() const {
    const TensorImpl &impl = impl_of(*this, "is_contiguous");
    int64_t expected = 1;
    for (std::size_t i = impl.shape.size(); i-- > 0;) {
        if (impl.shape[i] == 1) continue;
        if (impl.shape[i] == 0) return true;
        if (impl.strides[i] != expected) return false;
        expected *= impl.shape[i];
    }
    return true;
}

}  // namespace tinyfin
