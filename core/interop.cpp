// Zero-copy interop: host addresses of host-addressable tensors and cpu tensors over foreign
// memory (numpy arrays, DLPack tensors), through the cpu plugin's get_proc("buffer_wrap").
#include "tinyfin/extend.hpp"

#include "errors.hpp"
#include "ops_common.hpp"
#include "registry.hpp"

namespace tinyfin {

using namespace detail;

void *Tensor::host_data() const {
    const TensorImpl &t = impl_of(*this, "host_data");
    Storage &storage = *t.storage;
    if (!storage.host) return nullptr;
    // Like dispatch's in-place reads: the cpu plugin's ops are done when they return; another
    // host-addressable plugin (blas) may still be running queued work on this memory.
    if (storage.backend != &Registry::instance().cpu()) {
        tf_error err = make_error();
        tf_status status = storage.backend->table().synchronize(storage.device, &err);
        if (status != TF_STATUS_OK)
            raise_status(status, "host_data on " + device().str() + ": " +
                                     error_text(err, "synchronize failed without a message"));
    }
    return static_cast<char *>(storage.host) + byte_offset(t.dtype, t.offset);
}

void mark_constant(const Tensor &t) {
    const TensorImpl &impl = impl_of(t, "mark_constant");
    if (!impl.storage || !impl.storage->buffer) return;
    Storage &storage = *impl.storage;
    auto mark = reinterpret_cast<tf_buffer_mark_constant_fn>(storage.backend->get_proc("buffer_mark_constant"));
    if (!mark) return;
    storage.constant = true;
    mark(storage.buffer);
}

Tensor from_blob(void *data, const Shape &shape, const Shape &strides, DType dtype, std::function<void()> release) {
    return from_blob(data, shape, strides, dtype, std::move(release), Device{"cpu", 0});
}

Tensor from_blob(void *data, const Shape &shape, const Shape &strides, DType dtype, std::function<void()> release,
                 const Device &device) {
    // The release must run on every path, also when wrapping fails.
    struct Releaser {
        std::function<void()> fn;
        ~Releaser() {
            if (fn) fn();
        }
    } guard{std::move(release)};
    if (shape.size() != strides.size())
        raise<ValueError>("from_blob: shape " + shape_str(shape) + " and strides " + shape_str(strides) +
                          " have different ranks");
    dtype_block_length(dtype);  // rejects values outside the enum
    int64_t numel = checked_numel(shape, "from_blob");
    int64_t end = numel == 0 ? 0 : 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (strides[i] < 0)
            raise<ValueError>("from_blob: negative strides " + shape_str(strides) +
                              " (copy the data into a positive-stride layout first)");
        if (numel) end += (shape[i] - 1) * strides[i];
    }
    if (!data && numel > 0) raise<ValueError>("from_blob: data is NULL for shape " + shape_str(shape));
    if (is_quantized(dtype)) check_quantized_layout(dtype, shape, strides, 0, "from_blob");
    Backend *backend = Registry::checked().usable(device.backend);
    if (!backend) raise<DeviceError>("from_blob: device " + device.str() + " is not available");
    if (device.index < 0 || device.index >= backend->device_count())
        raise<DeviceError>("from_blob: device " + device.str() + " does not exist");
    if (!backend->host_addressable(device.index))
        raise<BackendError>("from_blob: device " + device.str() +
                            " does not address host memory; copy the data there with from_host");
    auto wrap = reinterpret_cast<tf_buffer_wrap_fn>(backend->get_proc("buffer_wrap"));
    if (!wrap)
        raise<BackendError>("from_blob: the " + device.backend + " plugin cannot wrap host memory (no buffer_wrap)");
    auto storage = std::make_shared<Storage>();
    storage->backend = backend;
    storage->device = device.index;
    storage->nbytes = byte_offset(dtype, end);
    ScratchError err;
    tf_status status = wrap(device.index, data, storage->nbytes, &storage->buffer, &err.get());
    if (status != TF_STATUS_OK || !storage->buffer) {
        storage->buffer = nullptr;
        raise_status(status == TF_STATUS_OK ? TF_STATUS_INTERNAL : status,
                     "from_blob: " + err.text(("the " + device.backend + " plugin returned no buffer").c_str()));
    }
    storage->host = data;
    storage->release = std::move(guard.fn);
    guard.fn = nullptr;
    auto impl = std::make_shared<TensorImpl>();
    impl->dtype = dtype;
    impl->shape = shape;
    impl->strides = strides;
    impl->offset = 0;
    impl->storage = std::move(storage);
    return Tensor(std::move(impl));
}

}  // namespace tinyfin
