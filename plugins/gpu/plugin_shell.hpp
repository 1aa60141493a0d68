// The tf_plugin members every GPU plugin shares, written once: device lookup, device info,
// buffers, supports() and run() through the shared ops (kernels.hpp), synchronize, the feature
// list's frame, shutdown. A plugin supplies what differs as an Api struct:
//
//   struct Api {
//       static constexpr const char *name = "vulkan";       // for messages
//       using Device = tf_vk::Device;                       // a KernelDevice with info(), allocate(),
//                                                           // free(), write(), read(), copy(),
//                                                           // synchronize(), label(), list_features()
//       struct State { std::vector<std::unique_ptr<Device>> devices; ... };
//       static tf_status probe(tf_error *err);              // may throw (guarded here)
//       static tf_status open(State &s, tf_error *err);     // init: fills s.devices; may throw
//       static void close() noexcept;                       // shutdown, after the state is gone
//       template <class F> static void call(Device &d, F &&f);  // runs f with the device's lock
//                                                           // held (or on its thread)
//       static void list_features(const State &s, tf_feature_fn emit, void *user);
//       // Optional: whether this plugin has op's kernel (default: every kernel of kernels.hpp).
//       static bool has_kernel(const tf_op_desc &op);
//       // Optional: how an op runs, under call() (default: tf_kernels::run).
//       static void run(Device &d, const tf_op_desc &op);
//   };
//
// and its table is GpuPlugin<Api>::table(name, version, priority). Every member turns exceptions into a
// tf_status and a message (tf_kit::guarded); nothing crosses the ABI.
#ifndef TINYFIN_GPU_PLUGIN_SHELL_HPP
#define TINYFIN_GPU_PLUGIN_SHELL_HPP

#include "kernels.hpp"

#include <tinyfin/plugin_kit.hpp>

#include <memory>

namespace tf_gpu {

using tf_kit::fail;
using tf_kit::guarded;

template <class Api>
struct GpuPlugin {
    using Device = typename Api::Device;
    using State = typename Api::State;

    // Everything init creates; shutdown deletes it. A plain pointer: constant-initialised, so the
    // plugin runs no code at dlopen.
    static inline State *g_state = nullptr;

    static Device *device_at(int32_t index) noexcept {
        if (!g_state || index < 0 || static_cast<size_t>(index) >= g_state->devices.size()) return nullptr;
        return g_state->devices[static_cast<size_t>(index)].get();
    }

    // ---- Backend ----

    static tf_status probe(tf_error *err) {
        return guarded(err, "probe", [&] { return Api::probe(err); });
    }

    static tf_status init(tf_error *err) {
        return guarded(err, "init", [&]() -> tf_status {
            auto s = std::make_unique<State>();
            if (tf_status status = Api::open(*s, err); status != TF_STATUS_OK) return status;
            g_state = s.release();
            return TF_STATUS_OK;
        });
    }

    static void shutdown() {
        delete g_state;
        g_state = nullptr;
        Api::close();
    }

    // ---- Devices ----

    static int32_t device_count() { return g_state ? static_cast<int32_t>(g_state->devices.size()) : 0; }

    static tf_status device_info(int32_t index, tf_device_info *info, tf_error *err) {
        return guarded(err, "device_info", [&]() -> tf_status {
            Device *dev = device_at(index);
            if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: no %s device %d", Api::name, index);
            if (!info) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info is NULL");
            tf_device_info full{};
            dev->info(full);
            tf_kit::copy_device_info(full, info);
            return TF_STATUS_OK;
        });
    }

    // ---- Buffers ----

    static tf_status buffer_alloc(int32_t index, uint64_t size, tf_buffer **out, tf_error *err) {
        return guarded(err, "buffer_alloc", [&]() -> tf_status {
            if (!out) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: out is NULL");
            *out = nullptr;
            Device *dev = device_at(index);
            if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: no %s device %d", Api::name, index);
            if (size == 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: size is 0");
            tf_buffer *made = nullptr;
            Api::call(*dev, [&] { made = dev->allocate(size); });
            *out = made;
            return TF_STATUS_OK;
        });
    }

    static void buffer_free(tf_buffer *buffer) {
        if (!buffer) return;
        Device *dev = buffer->owner;
        try {
            Api::call(*dev, [&] { dev->free(buffer); });
        } catch (...) {
            // free() throws nothing; only reaching the device could (out of host memory): the range leaks.
        }
    }

    // buffer_write and buffer_read: the range check, then the device's copy (f) under call().
    template <class F>
    static tf_status transfer(const char *what, tf_buffer *buffer, uint64_t offset, uint64_t size, const void *host,
                              tf_error *err, F &&f) {
        if (tf_status s = tf_kit::check_buffer_range(what, buffer, offset, size, host, err); s != TF_STATUS_OK)
            return s;
        if (size == 0) return TF_STATUS_OK;
        return guarded(err, what, [&]() -> tf_status {
            Api::call(*buffer->owner, f);
            return TF_STATUS_OK;
        });
    }

    static tf_status buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
        return transfer("buffer_write", buffer, offset, size, src, err,
                        [&] { buffer->owner->write(buffer, offset, src, size); });
    }

    static tf_status buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
        return transfer("buffer_read", buffer, offset, size, dst, err,
                        [&] { buffer->owner->read(buffer, offset, dst, size); });
    }

    static tf_status buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset,
                                 uint64_t size, tf_error *err) {
        const char *any = "";  // no host memory in a copy
        if (tf_status s = tf_kit::check_buffer_range("buffer_copy", dst, dst_offset, size, any, err); s != TF_STATUS_OK)
            return s;
        if (tf_status s = tf_kit::check_buffer_range("buffer_copy", src, src_offset, size, any, err); s != TF_STATUS_OK)
            return s;
        if (dst->owner != src->owner)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_copy: the buffers are on different devices (%s, %s)",
                        dst->owner->label(), src->owner->label());
        if (size == 0) return TF_STATUS_OK;
        return guarded(err, "buffer_copy", [&]() -> tf_status {
            Api::call(*dst->owner, [&] { dst->owner->copy(dst, dst_offset, src, src_offset, size); });
            return TF_STATUS_OK;
        });
    }

    // ---- Ops ----

    // Which ops run here, and with which descriptors, is the shared ops' answer (ops.cpp): read
    // from the device's immutable limits, on the caller's thread, without the device's lock.
    static bool supported(int32_t index, const tf_op_desc *op) {
        Device *dev = device_at(index);
        if (!dev || !op) return false;
        if constexpr (requires { Api::has_kernel(*op); })
            if (!Api::has_kernel(*op)) return false;
        return tf_kernels::supports(dev->caps(), *op);
    }

    static int32_t supports(int32_t index, const tf_op_desc *op) {
        return tf_kit::guarded_answer([&] { return supported(index, op); });
    }

    static tf_status run(int32_t index, const tf_op_desc *op, tf_error *err) {
        const char *name = op ? tf_kit::op_name(op->op) : "run";
        return guarded(err, name, [&]() -> tf_status {
            // run() only gets what supports() accepted, but a bad descriptor must never crash.
            if (!supported(index, op))
                return fail(err, TF_STATUS_UNSUPPORTED, "%s: the %s plugin does not support this descriptor", name,
                            Api::name);
            Device &dev = *device_at(index);
            Api::call(dev, [&] {
                if constexpr (requires { Api::run(dev, *op); })
                    Api::run(dev, *op);
                else
                    tf_kernels::run(dev, *op);
            });
            return TF_STATUS_OK;
        });
    }

    static tf_status synchronize(int32_t index, tf_error *err) {
        return guarded(err, "synchronize", [&]() -> tf_status {
            Device *dev = device_at(index);
            if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "synchronize: no %s device %d", Api::name, index);
            Api::call(*dev, [&] { dev->synchronize(); });
            return TF_STATUS_OK;
        });
    }

    // ---- The table ----

    // The plugin's table: every member is the shell's (tf_kit::plugin_table). GPU memory is
    // device-resident (no buffer_host_ptr, even where it is host-visible), and no extensions
    // (get_proc).
    static constexpr tf_plugin table(const char *name, const char *version, int32_t priority) {
        return tf_kit::plugin_table<GpuPlugin>(name, version, priority);
    }

    // ---- Features ----

    static void list_features(tf_feature_fn emit, void *user) {
        if (!emit || !g_state) return;
        try {
            Api::list_features(*g_state, emit, user);
        } catch (...) {
            // A feature list is best effort: what was emitted stays.
        }
    }
};

}  // namespace tf_gpu

#endif  // TINYFIN_GPU_PLUGIN_SHELL_HPP
