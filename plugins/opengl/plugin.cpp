// The opengl-compute plugin: device-resident tensors and the ops of shaders/ on every EGL device
// with desktop OpenGL 4.3+ (compute shaders), headless: no window system, no display server.
//
// In order: context, backend, devices, buffers, ops, features, the plugin table and the entry
// point. Every call that touches GL runs on the device's GL thread (worker.hpp).
#include "device.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <thread>
#include <type_traits>

#ifndef TF_OPENGL_VERSION
#define TF_OPENGL_VERSION "0.1.0"
#endif

// ---- Context --------------------------------------------------------------------------------------

namespace {

struct backend_state {
    std::vector<std::unique_ptr<tf_gl::device>> devices;
};

backend_state *g_state = nullptr;

tf_gl::device *device_at(int32_t device) {
    if (!g_state || device < 0 || static_cast<size_t>(device) >= g_state->devices.size()) return nullptr;
    return g_state->devices[static_cast<size_t>(device)].get();
}

}  // namespace

using namespace tf_gl;
using tf_kit::fail;
using tf_kit::guarded;

namespace {

// ---- Backend ------------------------------------------------------------------------------------------

// On a thread of its own, so the caller's current GL context (if any) is left alone: finds the
// EGL displays and makes a context on the first usable one; "" when one works, else why not.
std::string probe_reason() {
    std::string why;
    std::thread([&] {
        try {
            std::vector<egl_target> targets = find_egl_targets(why);
            std::string last;
            for (const egl_target &t : targets) {
                try {
                    context_handle context = make_context(t);
                    why.clear();
                    return;
                } catch (const failure &e) {
                    last = e.what();
                }
            }
            if (!targets.empty()) why = last;
        } catch (const std::exception &e) {
            why = e.what();
        }
        // The thread's EGL state (eglBindAPI, the last error) goes with it.
        eglReleaseThread();
    }).join();
    return why;
}

tf_status gl_probe(tf_error *err) {
    return guarded(err, "probe", [&]() -> tf_status {
        const std::string why = probe_reason();
        if (!why.empty()) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        return TF_STATUS_OK;
    });
}

tf_status gl_init(tf_error *err) {
    return guarded(err, "init", [&]() -> tf_status {
        auto state = std::make_unique<backend_state>();
        std::string why;
        std::vector<egl_target> targets = find_egl_targets(why);
        if (targets.empty()) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        std::string last_error;
        for (egl_target &target : targets) {
            try {
                state->devices.push_back(device::create(static_cast<int>(state->devices.size()), std::move(target)));
            } catch (const failure &e) {
                // One unusable device does not hide the others.
                last_error = e.what();
                log_line(TF_LOG_WARN, "skipping a device: %s", e.what());
            }
        }
        if (state->devices.empty())
            return fail(err, TF_STATUS_UNAVAILABLE, "no OpenGL 4.3 device (%s)", last_error.c_str());
        g_state = state.release();
        return TF_STATUS_OK;
    });
}

void gl_shutdown(void) {
    delete g_state;
    g_state = nullptr;
}

// ---- Devices -------------------------------------------------------------------------------------------

int32_t gl_device_count(void) { return g_state ? static_cast<int32_t>(g_state->devices.size()) : 0; }

tf_status gl_device_info(int32_t device, tf_device_info *info, tf_error *err) {
    return guarded(err, "device_info", [&]() -> tf_status {
        tf_gl::device *dev = device_at(device);
        if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: no opengl device %d", device);
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

tf_status gl_buffer_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err) {
    return guarded(err, "buffer_alloc", [&]() -> tf_status {
        if (!out) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: out is NULL");
        *out = nullptr;
        tf_gl::device *dev = device_at(device);
        if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: no opengl device %d", device);
        if (size == 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: size is 0");
        *out = dev->call([&] { return dev->allocate(size); });
        return TF_STATUS_OK;
    });
}

void gl_buffer_free(tf_buffer *buffer) {
    if (!buffer) return;
    tf_gl::device *dev = buffer->owner;
    try {
        dev->call([&] { dev->free(buffer); });
    } catch (...) {
        // free() throws nothing; only starting the call could (out of host memory): the range leaks.
    }
}

tf_status gl_buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
    if (tf_status s = check_range("buffer_write", buffer, offset, size, src, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    return guarded(err, "buffer_write", [&]() -> tf_status {
        buffer->owner->call([&] { buffer->owner->write(buffer, offset, src, size); });
        return TF_STATUS_OK;
    });
}

tf_status gl_buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (tf_status s = check_range("buffer_read", buffer, offset, size, dst, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    return guarded(err, "buffer_read", [&]() -> tf_status {
        buffer->owner->call([&] { buffer->owner->read(buffer, offset, dst, size); });
        return TF_STATUS_OK;
    });
}

tf_status gl_buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size,
                         tf_error *err) {
    const char *any = "";  // the range checks need a non-NULL host pointer only for host copies
    if (tf_status s = check_range("buffer_copy", dst, dst_offset, size, any, err); s != TF_STATUS_OK) return s;
    if (tf_status s = check_range("buffer_copy", src, src_offset, size, any, err); s != TF_STATUS_OK) return s;
    if (dst->owner != src->owner)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_copy: the buffers are on different devices (%s, %s)",
                    dst->owner->label(), src->owner->label());
    if (size == 0) return TF_STATUS_OK;
    return guarded(err, "buffer_copy", [&]() -> tf_status {
        dst->owner->call([&] { dst->owner->copy(dst, dst_offset, src, src_offset, size); });
        return TF_STATUS_OK;
    });
}

// ---- Ops ------------------------------------------------------------------------------------------------

// Which ops run here, and with which descriptors, is the shared kernels' answer
// (shaders/host/ops.cpp): read from immutable limits, on the caller's thread.
bool supported(int32_t device, const tf_op_desc *op) {
    tf_gl::device *dev = device_at(device);
    return dev && op && tf_kernels::supports(dev->caps(), *op);
}

int32_t gl_supports(int32_t device, const tf_op_desc *op) {
    try {
        return supported(device, op) ? 1 : 0;
    } catch (...) {
        return 0;
    }
}

tf_status gl_run(int32_t device, const tf_op_desc *op, tf_error *err) {
    const char *name = op ? tf_kernels::op_name(op->op) : "run";
    return guarded(err, name, [&]() -> tf_status {
        // run() only gets what supports() accepted, but a bad descriptor must never crash.
        if (!supported(device, op))
            return fail(err, TF_STATUS_UNSUPPORTED, "%s: the opengl plugin does not support this descriptor", name);
        tf_gl::device &dev = *device_at(device);
        dev.call([&] { tf_kernels::run(dev, *op); });
        return TF_STATUS_OK;
    });
}

tf_status gl_synchronize(int32_t device, tf_error *err) {
    return guarded(err, "synchronize", [&]() -> tf_status {
        tf_gl::device *dev = device_at(device);
        if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "synchronize: no opengl device %d", device);
        dev->call([&] { dev->synchronize(); });
        return TF_STATUS_OK;
    });
}

// ---- Features -------------------------------------------------------------------------------------------

void gl_list_features(tf_feature_fn emit, void *user) {
    if (!emit || !g_state) return;
    char value[64];
    std::snprintf(value, sizeof value, "%zu (GLSL 4.30, embedded; compiled on first use)", tf_kernels::shader_count);
    emit(user, "kernels", value);
    emit(user, "threading", "one GL thread per device owns its context; calls wait for it");
    // The counters change on the GL thread: read them there.
    for (const auto &dev : g_state->devices) {
        try {
            dev->call([&] { dev->list_features(emit, user); });
        } catch (...) {
        }
    }
}

// ---- Plugin table -----------------------------------------------------------------------------------------

constexpr tf_plugin k_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = "opengl",
    .version = TF_OPENGL_VERSION,
    .priority = 40,  // below vulkan: the same GPU is better driven through Vulkan
    .reserved_ = 0,
    .probe = gl_probe,
    .init = gl_init,
    .shutdown = gl_shutdown,
    .device_count = gl_device_count,
    .device_info = gl_device_info,
    .buffer_alloc = gl_buffer_alloc,
    .buffer_free = gl_buffer_free,
    .buffer_host_ptr = nullptr,  // device-resident, even on llvmpipe
    .buffer_write = gl_buffer_write,
    .buffer_read = gl_buffer_read,
    .buffer_copy = gl_buffer_copy,
    .supports = gl_supports,
    .run = gl_run,
    .synchronize = gl_synchronize,
    .list_features = gl_list_features,
    .get_proc = nullptr,  // no extensions
};

}  // namespace

// ---- Entry point ------------------------------------------------------------------------------------------

extern "C" TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    return tf_kit::enter(host, k_plugin);
}

static_assert(std::is_same_v<decltype(&tf_plugin_entry), tf_plugin_entry_fn>);
