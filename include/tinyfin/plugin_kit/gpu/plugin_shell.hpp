// The tf_plugin members every plugin with device-resident memory repeats, written once: device
// lookup, device info, the buffer members (range checks, then the device's allocate, free, write,
// read, copy), supports() and run() derived from the plugin's kernel rows (kernel_rows.hpp),
// synchronize, the feature list's frame, shutdown. The vulkan, opengl and opencl plugins are this
// shell and a device each; an out-of-tree GPU plugin supplies what differs as an Api struct:
//
//   struct Api {
//       static constexpr const char *name = "mygpu";        // for messages
//       using Device = my::Device;                          // info(tf_device_info &), allocate(size)
//                                                           // -> tf_buffer *, free(tf_buffer *),
//                                                           // write, read, copy, synchronize(),
//                                                           // label() (see below)
//       struct State { std::vector<std::unique_ptr<Device>> devices; ... };
//       static tf_status probe(tf_error *err);              // may throw (guarded here)
//       static tf_status open(State &s, tf_error *err);     // init: fills s.devices; may throw
//       static void close() noexcept;                       // shutdown, after the state is gone
//       template <class F> static void call(Device &d, F &&f);  // runs f with the device's lock
//                                                           // held (or on its thread)
//       static void list_features(const State &s, tf_feature_fn emit, void *user);
//       // The device's kernels: rows {op, dtypes, run, accepts} (tf_kit::KernelRow) whose run is
//       // callable as run(Device &, const tf_op_desc &) and accepts as
//       // accepts(const Device &, const tf_op_desc &); read without the device's lock.
//       static std::span<const Row> kernels(const Device &d);
//       // Optional: limits every kernel of the device shares (say, what one binding can span),
//       // checked after the op's rule and before the rows.
//       static bool fits(const Device &d, const tf_op_desc &op);
//       // Optional: after each op's run, under call() (say, submitting what it enqueued).
//       static void after_op(Device &d);
//   };
//
// The plugin defines struct tf_buffer with `Device *owner` and `uint64_t size`; Device's members:
//   void info(tf_device_info &full);                 // filled in; the shell copies it (R: struct_size)
//   tf_buffer *allocate(uint64_t size);              // throws tf_kit::Failure (OUT_OF_MEMORY, ...)
//   void free(tf_buffer *buffer) noexcept;
//   void write(tf_buffer *, uint64_t offset, const void *src, uint64_t size);
//   void read(tf_buffer *, uint64_t offset, void *dst, uint64_t size);
//   void copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size);
//   void synchronize();
//   const char *label() const;                      // "vulkan:0 (name)", for messages
//
// Its table is GpuPlugin<Api>::table(name, version, priority). Every member turns exceptions into
// a tf_status and a message (tf_kit::guarded); nothing crosses the ABI. GPU memory is
// device-resident (no buffer_host_ptr, even where it is host-visible), and there are no
// extensions (get_proc).
#pragma once

#include <tinyfin/plugin_kit/errors.hpp>
#include <tinyfin/plugin_kit/kernel_rows.hpp>
#include <tinyfin/plugin_kit/table.hpp>

#include <memory>
#include <span>
#include <type_traits>
#include <utility>

namespace tf_kit TF_KIT_HIDDEN {
namespace gpu {

template <class Api>
struct GpuPlugin {
    using Device = typename Api::Device;
    using State = typename Api::State;

    // Everything init creates; shutdown deletes it. A plain pointer: constant-initialised, so the
    // plugin runs no code at dlopen.
    static inline State *g_state = nullptr;

    // The device of a buffer (through a template, so tf_buffer may still be incomplete where this
    // header is included).
    template <class Buffer>
    static Device *owner_of(Buffer *buffer) noexcept {
        return buffer->owner;
    }

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
            copy_device_info(full, info);
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
        Device *dev = owner_of(buffer);
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
        if (tf_status s = check_buffer_range(what, buffer, offset, size, host, err); s != TF_STATUS_OK) return s;
        if (size == 0) return TF_STATUS_OK;
        return guarded(err, what, [&]() -> tf_status {
            Api::call(*owner_of(buffer), f);
            return TF_STATUS_OK;
        });
    }

    static tf_status buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
        return transfer("buffer_write", buffer, offset, size, src, err,
                        [&] { owner_of(buffer)->write(buffer, offset, src, size); });
    }

    static tf_status buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
        return transfer("buffer_read", buffer, offset, size, dst, err,
                        [&] { owner_of(buffer)->read(buffer, offset, dst, size); });
    }

    static tf_status buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset,
                                 uint64_t size, tf_error *err) {
        const char *any = "";  // no host memory in a copy
        if (tf_status s = check_buffer_range("buffer_copy", dst, dst_offset, size, any, err); s != TF_STATUS_OK)
            return s;
        if (tf_status s = check_buffer_range("buffer_copy", src, src_offset, size, any, err); s != TF_STATUS_OK)
            return s;
        Device *dev = owner_of(dst);
        if (dev != owner_of(src))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_copy: the buffers are on different devices (%s, %s)",
                        dev->label(), owner_of(src)->label());
        if (size == 0) return TF_STATUS_OK;
        return guarded(err, "buffer_copy", [&]() -> tf_status {
            Api::call(*dev, [&] { dev->copy(dst, dst_offset, src, src_offset, size); });
            return TF_STATUS_OK;
        });
    }

    // ---- Ops ----

    // The device's kernel rows' type (tf_kit::KernelRow or a struct derived from it).
    using Row = std::remove_cvref_t<decltype(*Api::kernels(std::declval<const Device &>()).data())>;

    // The row that runs op on dev in *row: the op's rule (check_op), then the first row that takes
    // the descriptor, then the device's shared limits (fits); a status and err set when one
    // refuses. Reads only the descriptor and the device's immutable limits: no lock.
    static tf_status kernel_for(const Device &dev, const tf_op_desc *op, tf_error *err, const Row **row) {
        if (tf_status s = kernel_to_run(Api::kernels(dev), op, false, err, row, dev); s != TF_STATUS_OK) return s;
        if constexpr (requires { Api::fits(dev, *op); }) {
            if (!Api::fits(dev, *op)) {
                *row = nullptr;
                return fail(err, TF_STATUS_UNSUPPORTED, "%s: operands beyond what one %s kernel can address",
                            op_name(op->op), Api::name);
            }
        }
        return TF_STATUS_OK;
    }

    static int32_t supports(int32_t index, const tf_op_desc *op) {
        return guarded_answer([&] {
            const Device *dev = device_at(index);
            const Row *row = nullptr;
            return dev && kernel_for(*dev, op, nullptr, &row) == TF_STATUS_OK;
        });
    }

    static tf_status run(int32_t index, const tf_op_desc *op, tf_error *err) {
        const char *name = op && op->struct_size >= sizeof(tf_op_desc) ? op_name(op->op) : "run";
        return guarded(err, name, [&]() -> tf_status {
            Device *dev = device_at(index);
            if (!dev) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: no %s device %d", name, Api::name, index);
            // run() only gets what supports() accepted, but a bad descriptor must never crash.
            const Row *row = nullptr;
            if (tf_status s = kernel_for(*dev, op, err, &row); s != TF_STATUS_OK) return s;
            Api::call(*dev, [&] {
                row->run(*dev, *op);
                if constexpr (requires { Api::after_op(*dev); }) Api::after_op(*dev);
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

    static constexpr tf_plugin table(const char *name, const char *version, int32_t priority) {
        return plugin_table<GpuPlugin>(name, version, priority);
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

}  // namespace gpu
}  // namespace TF_KIT_HIDDEN
