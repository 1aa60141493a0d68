// What the ops' host side needs from a device, and what it hands one: the device's immutable
// limits (DeviceCaps), a kernel with its selectors (PipelineKey), a tensor bound to a byte range
// of its buffer (TensorBinding), one kernel launch (DispatchArgs) and the device interface the
// vulkan, opengl and opencl plugins implement (KernelDevice). The enum of kernels is the generated
// "shader_ids.h" (plugins/gpu/meson.build).
#pragma once

#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit.hpp>

#include "shader_ids.h"

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>

namespace tf_gpu {

// The plugin kit's failure (a tf_status and a lower-case message), thrown inside a plugin and
// turned into both at the ABI boundary (tf_kit::guarded); raise() throws one with a printf-style
// message. op_name, numel and same_shape are the kit's as well.
using tf_kit::Failure;
using tf_kit::numel;
using tf_kit::op_name;
using tf_kit::raise;
using tf_kit::same_shape;

using Shader = tf_shaders::Shader;
constexpr size_t shader_count = static_cast<size_t>(Shader::count_);

// Tensor slots of every kernel (binding 2 of shaders/README.md).
constexpr uint32_t tensor_slots = 5;

// What supports() decides with: fixed once the device exists, read without any lock.
struct DeviceCaps {
    // Bytes one storage-buffer binding may span.
    uint64_t max_binding;
    // Alignment of a binding's offset, at least 16.
    uint64_t bind_align;
    // Workgroups a dispatch may have per dimension.
    uint32_t max_groups[3];
};

// A kernel with the values of its selectors (TF_SPEC ids 0 .. count - 1): one pipeline or
// program, made on first use.
struct PipelineKey {
    Shader kernel = Shader::count_;
    uint32_t count = 0;
    std::array<uint32_t, 8> spec{};

    auto operator<=>(const PipelineKey &) const = default;
};

template <class... V>
PipelineKey key_of(Shader kernel, V... values) {
    static_assert(sizeof...(V) <= 8);
    return PipelineKey{kernel, static_cast<uint32_t>(sizeof...(V)), {static_cast<uint32_t>(values)...}};
}

// A tensor as a kernel sees it: a bound byte range of its buffer and the element index, within
// that range, of the tensor's element [0, ..., 0]. buffer == nullptr: no elements, left unbound.
struct TensorBinding {
    tf_buffer *buffer = nullptr;
    uint64_t offset = 0;  // bytes from the start of the buffer's backing storage
    uint64_t range = 0;
    uint32_t base = 0;
};

// One kernel launch as the ops describe it to a device.
struct DispatchArgs {
    // The kernel and its selectors.
    PipelineKey kernel;
    // The kernel's parameter struct (binding 0 of shaders/README.md) and its size in bytes.
    const void *params = nullptr;
    size_t params_size = 0;
    // The tensors, slot i = tensors[i], count of them.
    const TensorBinding *tensors = nullptr;
    size_t count = 0;
    // Workgroups in x, y and z.
    uint32_t groups[3] = {1, 1, 1};
    // An op whose kernel may set status bits (a bad index), named when one is read back; or NULL.
    const char *reporting_op = nullptr;

    // No workgroups: nothing to record.
    bool empty() const noexcept { return groups[0] == 0 || groups[1] == 0 || groups[2] == 0; }
};

// A device the ops record on; the plugin holds the device's lock (or is on its thread) while
// any member is called.
class KernelDevice {
public:
    virtual const DeviceCaps &caps() const noexcept = 0;
    // The binding of a tensor whose buffer belongs to this device. Throws INVALID_ARGUMENT,
    // naming op and role ("input 1"), when the view does not lie inside its buffer.
    virtual TensorBinding bind(const tf_tensor_desc &tensor, const char *op, const char *role, uint32_t index) = 0;
    // Records one dispatch (DispatchArgs); later work sees its writes.
    virtual void dispatch(const DispatchArgs &args) = 0;
    // A scratch buffer; free() may come before the work using it has run.
    virtual tf_buffer *allocate(uint64_t size) = 0;
    // Copies size bytes from the host into buffer at offset; work recorded later sees them.
    virtual void write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size) = 0;
    virtual void free(tf_buffer *buffer) noexcept = 0;

protected:
    ~KernelDevice() = default;
};

// The binding of a view of dtype size elements at its byte offset inside a buffer whose storage
// starts at storage_offset and holds buffer_size bytes (shared by the plugins' bind()).
TensorBinding bind_view(const DeviceCaps &caps, const tf_tensor_desc &t, tf_buffer *buffer, uint64_t storage_offset,
                        uint64_t buffer_size, const char *op, const char *role, uint32_t index);

// bind() of a device whose buffers (tf_buffer: owner, size, and memory.offset, the storage's
// place in a pool block) come from pools: refuses a buffer of another device (owner), naming
// label, then bind_view.
template <class Buffer = tf_buffer>
TensorBinding bind_pooled(const DeviceCaps &caps, const void *owner, const char *label, const tf_tensor_desc &t,
                          const char *op, const char *role, uint32_t index) {
    Buffer *buffer = t.buffer;
    if (!buffer || buffer->owner != owner)
        raise(TF_STATUS_INVALID_ARGUMENT, "%s: %s %u is not a buffer of %s", op, role, index, label);
    return bind_view(caps, t, buffer, buffer->memory.offset, buffer->size, op, role, index);
}

// A buffer for an op's intermediate result (a split-K product, f32 sums, rope's table), freed
// when it goes out of scope, also on failure: free() may come before the work using it has run.
class ScratchBuffer {
public:
    ScratchBuffer(KernelDevice &dev, uint64_t size) : dev_(dev), buffer_(dev.allocate(size)) {}
    ScratchBuffer(const ScratchBuffer &) = delete;
    ScratchBuffer &operator=(const ScratchBuffer &) = delete;
    ~ScratchBuffer() { dev_.free(buffer_); }
    tf_buffer *get() const noexcept { return buffer_; }

private:
    KernelDevice &dev_;
    tf_buffer *const buffer_;
};

inline uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }
inline uint64_t align_down(uint64_t value, uint64_t alignment) { return value / alignment * alignment; }

}  // namespace tf_gpu
