// What a Tensor handle points at: a view (dtype, shape, strides, offset) of storage.
#pragma once

#include <atomic>
#include <functional>
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
    // For memory the core did not allocate (from_blob): called after the buffer is freed, to
    // hand the memory back to its owner (a numpy array, a DLPack producer).
    std::function<void()> release;
    // Whether nbytes are in the backend's bytes_in_use (allocate_storage's buffers; not memory
    // wrapped by from_blob, which the core never counted, so freeing it must not subtract).
    bool counted = false;
    // Bumped by every in-place write (assign_, the out= forms, copy_from_host): autograd checks
    // that a tensor saved for backward still has the version it had when saved. Shared by all
    // views, as the memory is.
    std::atomic<uint64_t> version{0};
    // Marked by mark_constant: never pooled for reuse (freed, so that the backend drops what it
    // prepared from the buffer).
    bool constant = false;

    Storage() = default;
    Storage(const Storage &) = delete;
    Storage &operator=(const Storage &) = delete;
    ~Storage();
};

// Allocates nbytes (at least one byte is requested from the plugin) on backend's device.
std::shared_ptr<Storage> allocate_storage(Backend &backend, int device, uint64_t nbytes);

}  // namespace tinyfin::detail

namespace tinyfin {

namespace detail {
struct AutogradMeta;
}

struct TensorImpl : std::enable_shared_from_this<TensorImpl> {
    // User-provided: make_shared value-initialises, which zero-fills the whole object with
    // `rep stos` first when the constructor is implicit (a tenth of a small op's allocation).
    TensorImpl() noexcept {}

    DType dtype = DType::f32;
    Shape shape;
    Shape strides;  // in elements
    int64_t offset = 0;  // in elements
    std::shared_ptr<detail::Storage> storage;
    // Null until autograd needs it (requires_grad_, or a recorded op's output).
    std::shared_ptr<detail::AutogradMeta> autograd;
    // Views only: the tensor whose storage this one views (never itself a view), so that an
    // in-place write through the view can update the base's autograd history.
    std::shared_ptr<TensorImpl> view_base;
    // Views only: the storage's version when this view's history was last brought up to date.
    uint64_t view_version = 0;
};

}  // namespace tinyfin

namespace tinyfin::detail {

// dtype_size() of a plain dtype the core holds: inline, without its error path.
inline std::size_t element_size(DType dtype) {
    switch (dtype) {
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::i64: return 8;
    case DType::boolean: return 1;
    default: break;
    }
    return dtype_size(dtype);
}

// The byte at which element `elements` of a buffer of dtype starts: elements * size, or for a
// block-quantized dtype (whose views start at block boundaries) whole blocks of block_bytes.
inline uint64_t byte_offset(DType dtype, int64_t elements) {
    if (static_cast<int32_t>(dtype) < TF_DTYPE_Q8_0) [[likely]]
        return static_cast<uint64_t>(elements) * element_size(dtype);
    return static_cast<uint64_t>(elements / dtype_block_length(dtype)) * dtype_block_bytes(dtype);
}

// A quantized tensor's layout must address whole blocks: rank >= 1, the last axis a multiple of the
// block length with stride 1, the other strides and the offset multiples of it. ShapeError naming
// `op` otherwise.
void check_quantized_layout(DType dtype, const Shape &shape, const Shape &strides, int64_t offset, std::string_view op);

// a == b for shapes (or strides), inline: std::vector's == calls memcmp, a visible cost for the
// two or three short shapes every small op compares.
inline bool same_shape(const Shape &a, const Shape &b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) return false;
    return true;
}

int64_t checked_numel(const Shape &shape, std::string_view op);
// Elements from the view's first element to one past its last (strides are >= 0); 0 when empty.
int64_t extent(const TensorImpl &t);
// Whether two views may share a byte: the same storage and intersecting byte spans (conservative:
// interleaved views that never touch the same element count as overlapping). Plugins are promised
// outputs that never alias inputs, so an op whose output overlaps an input goes through a
// temporary (the out= forms, assign_).
bool overlaps(const TensorImpl &a, const TensorImpl &b);
Shape contiguous_strides(const Shape &shape);
// The same into strides, already of shape's rank (no allocation when it has the capacity).
void contiguous_strides(const Shape &shape, Shape &strides);
// A contiguous view of a new storage of nbytes (shape's elements of dtype) on backend's device:
// taken from the thread's pool of freed small tensors when one fits (tensor_pool.cpp).
std::shared_ptr<TensorImpl> fresh_tensor_impl(Backend &backend, int device, const Shape &shape, DType dtype,
                                              uint64_t nbytes);
// A new contiguous tensor on backend's device (uninitialised contents).
Tensor make_tensor(Backend &backend, int device, const Shape &shape, DType dtype);
Tensor make_view(const Tensor &base, Shape shape, Shape strides, int64_t offset);
// Views without autograd recording, for the core's own descriptor building and rules.
Tensor raw_view(const Tensor &t, const Shape &shape);
Tensor raw_permute(const Tensor &t, const Axes &axes);
Tensor raw_slice(const Tensor &t, int64_t axis, int64_t start, int64_t end, int64_t step);
Tensor raw_expand(const Tensor &t, const Shape &shape);
Backend &backend_of(const Tensor &tensor);
[[noreturn]] void raise_undefined(std::string_view op);
// An axis of a Tensor method (size, transpose, permute) in [0, rank): a rank-0 tensor takes 0 and
// -1. ShapeError naming op otherwise.
int tensor_axis(int64_t axis, int rank, std::string_view op);
// The tensor's view; DeviceError naming op when it is undefined. Inline, so that the length of
// op is taken only on that error path, not on every op.
inline const TensorImpl &impl_of(const Tensor &tensor, const char *op) {
    if (!tensor.defined()) [[unlikely]]
        raise_undefined(op);
    return *tensor.impl();
}
inline const TensorImpl &impl_of(const Tensor &tensor, std::string_view op) {
    if (!tensor.defined()) [[unlikely]]
        raise_undefined(op);
    return *tensor.impl();
}

}  // namespace tinyfin::detail
