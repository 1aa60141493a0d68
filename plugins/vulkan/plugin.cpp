// The vulkan-compute plugin: device-resident tensors and the ops of shaders/ on every Vulkan
// device with a compute queue. Vulkan is loaded at run time (volk over dlopen), so the plugin
// loads on machines without it and says why in probe.
//
// In order: context, descriptor validation, backend, devices, buffers, ops, features, the plugin
// table and the entry point.
#include "device.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#ifndef TF_VULKAN_VERSION
#define TF_VULKAN_VERSION "0.1.0"
#endif

// ---- Context --------------------------------------------------------------------------------------

namespace {

// Everything init creates; shutdown deletes it. Members go in reverse order: devices, then the
// instance, then the loader they came from.
struct backend_state {
    tf_vk::loader_library loader;
    tf_vk::instance_handle instance;
    uint32_t api_version = 0;
    std::vector<std::unique_ptr<tf_vk::device>> devices;
};

backend_state *g_state = nullptr;
// The loader a successful probe opened, handed to init (a refusing probe closes it).
tf_vk::loader_library *g_probed_loader = nullptr;

tf_vk::device *device_at(int32_t device) {
    if (!g_state || device < 0 || static_cast<size_t>(device) >= g_state->devices.size()) return nullptr;
    return g_state->devices[static_cast<size_t>(device)].get();
}

}  // namespace

using namespace tf_vk;
using tf_kit::fail;
using tf_kit::guarded;

namespace {

// ---- Descriptor validation ---------------------------------------------------------------------------

// Which ops run here, and with which descriptors, is the shared kernels' answer
// (shaders/host/ops.cpp); this only finds the device.
bool supported(int32_t device, const tf_op_desc *op) {
    tf_vk::device *dev = device_at(device);
    return dev && op && tf_kernels::supports(dev->caps(), *op);
}

// ---- Backend ------------------------------------------------------------------------------------------

tf_status vk_probe(tf_error *err) {
    return guarded(err, "probe", [&]() -> tf_status {
        auto loader = std::make_unique<loader_library>();
        std::string why;
        if (!loader->open(why)) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        std::vector<compute_device> found;
        try {
            instance_handle instance = create_instance(nullptr);
            found = find_compute_devices(instance.get());
        } catch (const failure &e) {
            return fail(err, TF_STATUS_UNAVAILABLE, "no Vulkan device with a compute queue (%s)", e.what());
        }
        if (found.empty()) return fail(err, TF_STATUS_UNAVAILABLE, "no Vulkan device with a compute queue");
        delete g_probed_loader;
        g_probed_loader = loader.release();
        return TF_STATUS_OK;
    });
}

tf_status vk_init(tf_error *err) {
    return guarded(err, "init", [&]() -> tf_status {
        auto state = std::make_unique<backend_state>();
        std::string why;
        if (!state->loader.open(why)) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        // init's own handle is open: the probe's may go.
        delete g_probed_loader;
        g_probed_loader = nullptr;
        state->instance = create_instance(&state->api_version);
        std::string last_error;
        for (const compute_device &where : find_compute_devices(state->instance.get())) {
            try {
                state->devices.push_back(device::create(static_cast<int>(state->devices.size()), where, state->api_version));
            } catch (const failure &e) {
                // One unusable device does not hide the others.
                last_error = e.what();
                log_line(TF_LOG_WARN, "skipping a device: %s", e.what());
            }
        }
        if (state->devices.empty())
            return fail(err, TF_STATUS_UNAVAILABLE, "no Vulkan device with a compute queue%s%s%s",
                        last_error.empty() ? "" : " (", last_error.c_str(), last_error.empty() ? "" : ")");
        g_state = state.release();
        return TF_STATUS_OK;
    });
}

void vk_shutdown(void) {
    delete g_state;
    g_state = nullptr;
    delete g_probed_loader;
    g_probed_loader = nullptr;
}

// ---- Devices -------------------------------------------------------------------------------------------

int32_t vk_device_count(void) { return g_state ? static_cast<int32_t>(g_state->devices.size()) : 0; }

tf_status vk_device_info(int32_t device, tf_device_info *info, tf_error *err) {
    return guarded(err, "device_info", [&]() -> tf_status {
        tf_vk::device *dev = device_at(device);
        if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: no vulkan device %d", device);
        if (!info) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info is NULL");
        tf_device_info full{};
        dev->info(full);
        // A caller built against an older, shorter struct gets the members it knows.
        const size_t n = std::min<size_t>(info->struct_size, sizeof full);
        full.struct_size = static_cast<uint32_t>(n);
        std::memcpy(info, &full, n);
        return TF_STATUS_OK;
    });
}

// ---- Buffers -------------------------------------------------------------------------------------------

// offset + size within the buffer, written so that it cannot overflow.
tf_status check_range(const char *what, const tf_buffer *buffer, uint64_t offset, uint64_t size, const void *host,
                      tf_error *err) {
    if (!buffer) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: buffer is NULL", what);
    if (offset > buffer->size || size > buffer->size - offset)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %llu bytes at offset %llu do not fit a buffer of %llu bytes",
                    what, static_cast<unsigned long long>(size), static_cast<unsigned long long>(offset),
                    static_cast<unsigned long long>(buffer->size));
    if (size > 0 && !host) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: host pointer is NULL", what);
    return TF_STATUS_OK;
}

tf_status vk_buffer_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err) {
    return guarded(err, "buffer_alloc", [&]() -> tf_status {
        if (!out) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: out is NULL");
        *out = nullptr;
        tf_vk::device *dev = device_at(device);
        if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: no vulkan device %d", device);
        if (size == 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: size is 0");
        std::lock_guard lock(dev->mutex);
        *out = dev->allocate(size);
        return TF_STATUS_OK;
    });
}

void vk_buffer_free(tf_buffer *buffer) {
    if (!buffer) return;
    tf_vk::device *dev = buffer->owner;
    std::lock_guard lock(dev->mutex);
    dev->free(buffer);
}

tf_status vk_buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
    if (tf_status s = check_range("buffer_write", buffer, offset, size, src, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    return guarded(err, "buffer_write", [&]() -> tf_status {
        std::lock_guard lock(buffer->owner->mutex);
        buffer->owner->write(buffer, offset, src, size);
        return TF_STATUS_OK;
    });
}

tf_status vk_buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (tf_status s = check_range("buffer_read", buffer, offset, size, dst, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    return guarded(err, "buffer_read", [&]() -> tf_status {
        std::lock_guard lock(buffer->owner->mutex);
        buffer->owner->read(buffer, offset, dst, size);
        return TF_STATUS_OK;
    });
}

tf_status vk_buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size,
                         tf_error *err) {
    const char *any = "";  // the range checks need a non-NULL host pointer only for host copies
    if (tf_status s = check_range("buffer_copy", dst, dst_offset, size, any, err); s != TF_STATUS_OK) return s;
    if (tf_status s = check_range("buffer_copy", src, src_offset, size, any, err); s != TF_STATUS_OK) return s;
    if (dst->owner != src->owner)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_copy: the buffers are on different devices (%s, %s)",
                    dst->owner->label(), src->owner->label());
    if (size == 0) return TF_STATUS_OK;
    return guarded(err, "buffer_copy", [&]() -> tf_status {
        std::lock_guard lock(dst->owner->mutex);
        dst->owner->copy(dst, dst_offset, src, src_offset, size);
        return TF_STATUS_OK;
    });
}

// ---- Ops ------------------------------------------------------------------------------------------------

int32_t vk_supports(int32_t device, const tf_op_desc *op) {
    try {
        return supported(device, op) ? 1 : 0;
    } catch (...) {
        return 0;
    }
}

tf_status vk_run(int32_t device, const tf_op_desc *op, tf_error *err) {
    const char *name = op ? tf_kernels::op_name(op->op) : "run";
    return guarded(err, name, [&]() -> tf_status {
        // run() only gets what supports() accepted, but a bad descriptor must never crash.
        if (!supported(device, op))
            return fail(err, TF_STATUS_UNSUPPORTED, "%s: the vulkan plugin does not support this descriptor", name);
        tf_vk::device &dev = *device_at(device);
        std::lock_guard lock(dev.mutex);
        tf_kernels::run(dev, *op);
        return TF_STATUS_OK;
    });
}

tf_status vk_synchronize(int32_t device, tf_error *err) {
    return guarded(err, "synchronize", [&]() -> tf_status {
        tf_vk::device *dev = device_at(device);
        if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "synchronize: no vulkan device %d", device);
        std::lock_guard lock(dev->mutex);
        dev->synchronize();
        return TF_STATUS_OK;
    });
}

// ---- Features -------------------------------------------------------------------------------------------

void vk_list_features(tf_feature_fn emit, void *user) {
    if (!emit || !g_state) return;
    char value[64];
    std::snprintf(value, sizeof value, "%u.%u", VK_API_VERSION_MAJOR(g_state->api_version),
                  VK_API_VERSION_MINOR(g_state->api_version));
    emit(user, "instance_api", value);
    std::snprintf(value, sizeof value, "%zu (SPIR-V, embedded)", tf_kernels::shader_count);
    emit(user, "kernels", value);
    emit(user, "loader", "volk (dlopen)");
    for (const auto &dev : g_state->devices) dev->list_features(emit, user);
}

// ---- Plugin table -----------------------------------------------------------------------------------------

constexpr tf_plugin k_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = "vulkan",
    .version = TF_VULKAN_VERSION,
    .priority = 50,
    .reserved_ = 0,
    .probe = vk_probe,
    .init = vk_init,
    .shutdown = vk_shutdown,
    .device_count = vk_device_count,
    .device_info = vk_device_info,
    .buffer_alloc = vk_buffer_alloc,
    .buffer_free = vk_buffer_free,
    .buffer_host_ptr = nullptr,  // device-resident, like a discrete GPU, even where memory is host-visible
    .buffer_write = vk_buffer_write,
    .buffer_read = vk_buffer_read,
    .buffer_copy = vk_buffer_copy,
    .supports = vk_supports,
    .run = vk_run,
    .synchronize = vk_synchronize,
    .list_features = vk_list_features,
    .get_proc = nullptr,  // no extensions
};

}  // namespace

// ---- Entry point ------------------------------------------------------------------------------------------

extern "C" TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    return tf_kit::enter(host, k_plugin);
}

static_assert(std::is_same_v<decltype(&tf_plugin_entry), tf_plugin_entry_fn>);
