// The plugin kit's buffer layer for plugins whose one device is the host (cpu, blas, any
// host-memory plugin): the ABI's tf_buffer as a block of the host caching allocator, and the
// buffer members of tf_plugin, ready for the plugin's table. Their buffers are plain host memory,
// so tensors move between such plugins without copies.
//
// Opt-in, not included by plugin_kit.hpp: it defines struct tf_buffer, which a plugin with device
// memory defines itself. Include it in exactly one place per plugin (or in every file, the
// definitions being identical), and call host_cache_release() from shutdown.
#pragma once

#include <tinyfin/plugin_kit/host_memory.hpp>

#include <cstring>
#include <memory>

#include <unistd.h>

// The ABI's opaque buffer: one 64-byte-aligned block of the host caching allocator, or host
// memory lent by buffer_wrap. Not copyable: it owns its block.
struct TF_KIT_HIDDEN tf_buffer {
    tf_buffer(void *block, uint64_t bytes, uint64_t capacity, bool owns) noexcept
        : data(block), size(bytes), capacity_(capacity), owned_(owns) {}
    ~tf_buffer() {
        if (owned_) tf_kit::host_free(data, capacity_);
    }
    tf_buffer(const tf_buffer &) = delete;
    tf_buffer &operator=(const tf_buffer &) = delete;

    void *const data;
    // Bytes the core asked for; read, write and copy stay inside them.
    const uint64_t size;

private:
    const uint64_t capacity_;  // bytes of the block, handed back to the cache with it
    // False for memory lent by buffer_wrap (a numpy array, a DLPack tensor): its owner frees it.
    const bool owned_;
};

namespace tf_kit TF_KIT_HIDDEN {

// A host plugin has one device, 0.
inline tf_status check_host_device(const char *what, int32_t device, tf_error *err) noexcept {
    if (device == 0) return TF_STATUS_OK;
    return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: no %s device %d (there is 1)", what, plugin_name(), device);
}

// device_info's common part: a CPU device, host-addressable, the machine's memory.
inline tf_device_info host_device_info() noexcept {
    auto bytes = [](long pages) -> uint64_t {
        const long page = sysconf(_SC_PAGESIZE);
        return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
    };
    tf_device_info full{};
    full.kind = TF_DEVICE_KIND_CPU;
    full.memory_total = bytes(sysconf(_SC_PHYS_PAGES));
    full.memory_free = bytes(sysconf(_SC_AVPHYS_PAGES));
    full.host_addressable = 1;
    return full;
}

inline tf_status host_buffer_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err) {
    return guarded(err, "buffer_alloc", [&]() -> tf_status {
        if (tf_status s = check_host_device("buffer_alloc", device, err); s != TF_STATUS_OK) return s;
        if (!out) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: out is NULL");
        *out = nullptr;
        if (size == 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: size is 0");
        uint64_t capacity = 0;
        void *data = size <= (UINT64_MAX >> 2) ? host_alloc(size, &capacity) : nullptr;
        if (!data)
            return fail(err, TF_STATUS_OUT_OF_MEMORY, "buffer_alloc: cannot allocate %llu bytes of host memory",
                        static_cast<unsigned long long>(size));
        try {
            *out = new tf_buffer(data, size, capacity, true);
        } catch (...) {
            host_free(data, capacity);
            throw;
        }
        return TF_STATUS_OK;
    });
}

// get_proc("buffer_wrap"): host memory the caller owns, seen as a buffer (zero-copy interop).
inline tf_status host_buffer_wrap(int32_t device, void *data, uint64_t size, tf_buffer **out, tf_error *err) {
    return guarded(err, "buffer_wrap", [&]() -> tf_status {
        if (tf_status s = check_host_device("buffer_wrap", device, err); s != TF_STATUS_OK) return s;
        if (!out) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_wrap: out is NULL");
        *out = nullptr;
        if (!data && size > 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_wrap: data is NULL");
        *out = new tf_buffer(data, size, 0, false);
        return TF_STATUS_OK;
    });
}

inline void host_buffer_free(tf_buffer *buffer) { delete buffer; }

inline void *host_buffer_host_ptr(tf_buffer *buffer) { return buffer ? buffer->data : nullptr; }

namespace detail {
inline char *bytes_of(tf_buffer *buffer, uint64_t offset) noexcept {
    return static_cast<char *>(buffer->data) + offset;
}
}  // namespace detail

inline tf_status host_buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
    if (tf_status s = check_buffer_range("buffer_write", buffer, offset, size, src, err); s != TF_STATUS_OK) return s;
    if (size > 0) std::memcpy(detail::bytes_of(buffer, offset), src, size);
    return TF_STATUS_OK;
}

inline tf_status host_buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (tf_status s = check_buffer_range("buffer_read", buffer, offset, size, dst, err); s != TF_STATUS_OK) return s;
    if (size > 0) std::memcpy(dst, detail::bytes_of(buffer, offset), size);
    return TF_STATUS_OK;
}

inline tf_status host_buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset,
                                  uint64_t size, tf_error *err) {
    const char *any = "";  // no host memory in a copy
    if (tf_status s = check_buffer_range("buffer_copy", dst, dst_offset, size, any, err); s != TF_STATUS_OK) return s;
    if (tf_status s = check_buffer_range("buffer_copy", src, src_offset, size, any, err); s != TF_STATUS_OK) return s;
    // memmove: the ABI does not forbid overlapping ranges of one buffer.
    if (size > 0) std::memmove(detail::bytes_of(dst, dst_offset), detail::bytes_of(src, src_offset), size);
    return TF_STATUS_OK;
}

// Kernels run synchronously inside run(): nothing is ever pending.
inline tf_status host_synchronize(int32_t device, tf_error *err) {
    return check_host_device("synchronize", device, err);
}

// The members above under their tf_plugin names, for plugin_table() (table.hpp): a host plugin's
// struct derives from this one and adds probe, init, shutdown, device_count, device_info,
// supports, run, list_features (and get_proc for buffer_wrap).
struct HostBuffers {
    static constexpr auto buffer_alloc = host_buffer_alloc;
    static constexpr auto buffer_free = host_buffer_free;
    static constexpr auto buffer_host_ptr = host_buffer_host_ptr;
    static constexpr auto buffer_write = host_buffer_write;
    static constexpr auto buffer_read = host_buffer_read;
    static constexpr auto buffer_copy = host_buffer_copy;
    static constexpr auto synchronize = host_synchronize;
};

}  // namespace TF_KIT_HIDDEN
