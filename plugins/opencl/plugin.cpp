// The opencl plugin: device-resident tensors and the kernels of shaders/opencl/ on every OpenCL
// device (GPUs, accelerators, and CPU devices such as pocl, which count as software devices),
// with matmul through CLBlast when it is installed.
//
// In order: context, backend, devices, buffers, ops, features, the plugin table and the entry
// point. Every call on a device holds that device's lock (device.hpp).
#include "clblast.hpp"
#include "device.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <type_traits>

#ifndef TF_OPENCL_VERSION
#define TF_OPENCL_VERSION "0.1.0"
#endif

// ---- Context --------------------------------------------------------------------------------------

namespace {

struct BackendState {
    std::unique_ptr<tf_cl::ClApi> api;
    std::unique_ptr<tf_cl::ClBlastLibrary> blas;
    std::string blas_why;  // why CLBlast is not used, when it is not
    // Last: destroyed first, while the entry points they use are still loaded.
    std::vector<std::unique_ptr<tf_cl::Device>> devices;

    ~BackendState() { devices.clear(); }
};

BackendState *g_state = nullptr;

using tf_kit::fail;
using tf_kit::guarded;

tf_cl::Device *device_at(int32_t device) {
    if (!g_state || device < 0 || static_cast<size_t>(device) >= g_state->devices.size()) return nullptr;
    return g_state->devices[static_cast<size_t>(device)].get();
}

}  // namespace

namespace tf_cl {

void log_message(int32_t level, const char *fmt, ...) {
    char message[TF_TEXT_SIZE * 2];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    tf_kit::log_message(level, message);
}

const char *environment(const char *name) { return tf_kit::get_env(name); }

}  // namespace tf_cl

using namespace tf_cl;

namespace {

// ---- Backend ------------------------------------------------------------------------------------------

tf_status cl_probe(tf_error *err) {
    return guarded(err, "probe", [&]() -> tf_status {
        std::string why;
        std::unique_ptr<ClApi> api = load_cl_api(environment("TINYFIN_OPENCL_LOADER"), why);
        if (!api) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        if (find_devices(*api, why).empty()) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        return TF_STATUS_OK;
    });
}

tf_status cl_init(tf_error *err) {
    return guarded(err, "init", [&]() -> tf_status {
        auto state = std::make_unique<BackendState>();
        std::string why;
        state->api = load_cl_api(environment("TINYFIN_OPENCL_LOADER"), why);
        if (!state->api) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        std::vector<DeviceTarget> targets = find_devices(*state->api, why);
        if (targets.empty()) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        state->blas = ClBlastLibrary::load(environment("TINYFIN_OPENCL_CLBLAST"), state->blas_why);
        if (!state->blas)
            log_message(TF_LOG_INFO, "CLBlast not used (matmul runs on the own kernel): %s", state->blas_why.c_str());
        std::string last_error;
        for (const DeviceTarget &target : targets) {
            try {
                state->devices.push_back(
                    Device::create(static_cast<int>(state->devices.size()), *state->api, target, state->blas.get()));
            } catch (const tf_kernels::Failure &e) {
                // One unusable device does not hide the others.
                last_error = e.what();
                log_message(TF_LOG_WARN, "skipping a device: %s", e.what());
            }
        }
        if (state->devices.empty())
            return fail(err, TF_STATUS_UNAVAILABLE, "no usable OpenCL device (%s)", last_error.c_str());
        g_state = state.release();
        return TF_STATUS_OK;
    });
}

void cl_shutdown(void) {
    delete g_state;
    g_state = nullptr;
}

// ---- Devices -------------------------------------------------------------------------------------------

int32_t cl_device_count(void) { return g_state ? static_cast<int32_t>(g_state->devices.size()) : 0; }

tf_status cl_device_info(int32_t device, tf_device_info *info, tf_error *err) {
    return guarded(err, "device_info", [&]() -> tf_status {
        tf_cl::Device *dev = device_at(device);
        if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: no opencl device %d", device);
        if (!info) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info is NULL");
        tf_device_info full{};
        dev->info(full);
        tf_kit::copy_device_info(full, info);
        return TF_STATUS_OK;
    });
}

// ---- Buffers -------------------------------------------------------------------------------------------

// The buffer exists, offset + size lie inside it, and the host pointer is there when needed.
tf_status check_range(const char *what, const tf_buffer *buffer, uint64_t offset, uint64_t size, const void *host,
                      tf_error *err) {
    if (!buffer) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: buffer is NULL", what);
    if (tf_status s = tf_kit::check_range(what, buffer->size, offset, size, err); s != TF_STATUS_OK) return s;
    if (size > 0 && !host) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: host pointer is NULL", what);
    return TF_STATUS_OK;
}

tf_status cl_buffer_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err) {
    return guarded(err, "buffer_alloc", [&]() -> tf_status {
        if (!out) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: out is NULL");
        *out = nullptr;
        tf_cl::Device *dev = device_at(device);
        if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: no opencl device %d", device);
        if (size == 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: size is 0");
        auto lock = dev->enter();
        *out = dev->allocate(size);
        return TF_STATUS_OK;
    });
}

void cl_buffer_free(tf_buffer *buffer) {
    if (!buffer) return;
    tf_cl::Device *dev = buffer->owner;
    auto lock = dev->enter();
    dev->free(buffer);
}

tf_status cl_buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
    if (tf_status s = check_range("buffer_write", buffer, offset, size, src, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    return guarded(err, "buffer_write", [&]() -> tf_status {
        auto lock = buffer->owner->enter();
        buffer->owner->write(buffer, offset, src, size);
        return TF_STATUS_OK;
    });
}

tf_status cl_buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (tf_status s = check_range("buffer_read", buffer, offset, size, dst, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    return guarded(err, "buffer_read", [&]() -> tf_status {
        auto lock = buffer->owner->enter();
        buffer->owner->read(buffer, offset, dst, size);
        return TF_STATUS_OK;
    });
}

tf_status cl_buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size,
                         tf_error *err) {
    const char *any = "";
    if (tf_status s = check_range("buffer_copy", dst, dst_offset, size, any, err); s != TF_STATUS_OK) return s;
    if (tf_status s = check_range("buffer_copy", src, src_offset, size, any, err); s != TF_STATUS_OK) return s;
    if (dst->owner != src->owner)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_copy: the buffers are on different devices (%s, %s)",
                    dst->owner->label(), src->owner->label());
    if (size == 0) return TF_STATUS_OK;
    return guarded(err, "buffer_copy", [&]() -> tf_status {
        auto lock = dst->owner->enter();
        dst->owner->copy(dst, dst_offset, src, src_offset, size);
        dst->owner->flush();
        return TF_STATUS_OK;
    });
}

// ---- Ops ------------------------------------------------------------------------------------------------

// The shared kernels' answer (plugins/gpu/ops.cpp), for ops whose kernel file is ported.
bool supported(int32_t device, const tf_op_desc *op) {
    tf_cl::Device *dev = device_at(device);
    if (!dev || !op) return false;
    const Shader kernel = tf_kernels::kernel_of(op->op);
    if (kernel == Shader::count_ || tf_shaders::shader_code_of(kernel).size == 0) return false;
    return tf_kernels::supports(dev->caps(), *op);
}

int32_t cl_supports(int32_t device, const tf_op_desc *op) {
    return tf_kit::guarded_answer([&] { return supported(device, op); });
}

tf_status cl_run(int32_t device, const tf_op_desc *op, tf_error *err) {
    const char *name = op ? tf_kernels::op_name(op->op) : "run";
    return guarded(err, name, [&]() -> tf_status {
        if (!supported(device, op))
            return fail(err, TF_STATUS_UNSUPPORTED, "%s: the opencl plugin does not support this descriptor", name);
        tf_cl::Device &dev = *device_at(device);
        auto lock = dev.enter();
        dev.run(*op);
        dev.flush();
        return TF_STATUS_OK;
    });
}

tf_status cl_synchronize(int32_t device, tf_error *err) {
    return guarded(err, "synchronize", [&]() -> tf_status {
        tf_cl::Device *dev = device_at(device);
        if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "synchronize: no opencl device %d", device);
        auto lock = dev->enter();
        dev->synchronize();
        return TF_STATUS_OK;
    });
}

// ---- Features -------------------------------------------------------------------------------------------

void cl_list_features(tf_feature_fn emit, void *user) {
    if (!emit || !g_state) return;
    emit(user, "icd_loader", g_state->api->path.c_str());
    const std::string blas = g_state->blas ? g_state->blas->path : "not used: " + g_state->blas_why;
    emit(user, "clblast", blas.c_str());
    size_t ported = 0;
    for (size_t i = 0; i < tf_kernels::shader_count; ++i)
        if (tf_shaders::shader_code_of(static_cast<Shader>(i)).size) ++ported;
    char value[96];
    std::snprintf(value, sizeof value, "%zu of %zu (OpenCL C, embedded; built on first use, binaries cached)", ported,
                  tf_kernels::shader_count);
    emit(user, "kernels", value);
    emit(user, "threading", "one in-order queue per device; calls from several threads take the device's lock");
    for (const auto &dev : g_state->devices) {
        auto lock = dev->enter();
        dev->list_features(emit, user);
    }
}

// ---- Plugin table -----------------------------------------------------------------------------------------

constexpr tf_plugin k_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = "opencl",
    .version = TF_OPENCL_VERSION,
    .priority = 30,  // below vulkan and opengl: the same GPU is better driven through them
    .reserved_ = 0,
    .probe = cl_probe,
    .init = cl_init,
    .shutdown = cl_shutdown,
    .device_count = cl_device_count,
    .device_info = cl_device_info,
    .buffer_alloc = cl_buffer_alloc,
    .buffer_free = cl_buffer_free,
    .buffer_host_ptr = nullptr,  // device-resident, even on pocl
    .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read,
    .buffer_copy = cl_buffer_copy,
    .supports = cl_supports,
    .run = cl_run,
    .synchronize = cl_synchronize,
    .list_features = cl_list_features,
    .get_proc = nullptr,  // no extensions
};

}  // namespace

// ---- Entry point ------------------------------------------------------------------------------------------

extern "C" TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    return tf_kit::enter(host, k_plugin);
}

static_assert(std::is_same_v<decltype(&tf_plugin_entry), tf_plugin_entry_fn>);
