// What a Tensor handle points at: a view (dtype, shape, strides, offset) of storage.
#pragma once

#include <memory>

#include "backend.hpp"
#include "tinyfin/tinyfin.hpp"

namespace tinyfin::detail {

// One plugin buffer on one device. Freed through its plugin when the last view goes.
struct Storage {
    Backend *backend = nullptr;
    int device = 0;
    tf_buffer *buffer = nullptr;
    uint64_t nbytes = 0;
    // Host address of byte 0 when the buffer is host-addressable.
    void *host = nullptr;

    Storage() = default;
    Storage(const Storage &) = delete;
    Storage &operator=(const Storage &) = delete;
    ~Storage();
};

// Allocates nbytes (at least one byte is requested from the plugin) on backend's device.
std::shared_ptr<Storage> allocate_storage(Backend &backend, int device, uint64_t nbytes);

} // namespace tinyfin::detail

namespace tinyfin {

struct TensorImpl {
    DType dtype = DType::f32;
    Shape shape;
    Shape strides;     // in elements
    int64_t offset = 0; // in elements
    std::shared_ptr<detail::Storage> storage;
};

} // namespace tinyfin

namespace tinyfin::detail {

int64_t checked_numel(const Shape &shape, std::string_view op);
Shape contiguous_strides(const Shape &shape);
// A new contiguous tensor on backend's device (uninitialised contents).
Tensor make_tensor(Backend &backend, int device, const Shape &shape, DType dtype);
Tensor make_view(const Tensor &base, Shape shape, Shape strides, int64_t offset);
Backend &backend_of(const Tensor &tensor);
const TensorImpl &impl_of(const Tensor &tensor, std::string_view op);

} // namespace tinyfin::detail
