// The cpu plugin: kernels on host memory, one device, always loadable. Every other backend falls
// back to it, so correctness comes before speed here; the f32 GEMM (matmul, conv2d, attention)
// is packed and vectorised, and work is split over a thread pool (runtime.hpp).
//
// In order: helpers, backend, device, buffers, ops, features, the plugin table and the entry
// point. The kernels, their table and the runtime are the tinyfin-cpu-kernels library
// (kernel_table.hpp, runtime.hpp), which the blas plugin links too. The ABI plumbing (errors, op
// rules, kernel tables, tensor checks, host buffers) is the plugin kit's
// (include/tinyfin/plugin_kit.hpp).
#include "kernel_table.hpp"
#include "prepacked_weights.hpp"
#include "packed_weights.hpp"
#include "runtime.hpp"

#include <tinyfin/plugin_kit/host_buffer.hpp>

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#ifndef TF_CPU_VERSION
#define TF_CPU_VERSION "0.1.0"
#endif

using namespace tf_cpu;
using namespace tf_kit;

namespace {

// ---- Helpers of the members ----------------------------------------------------------------

// A write to buffer (any of its bytes): the packed GEMM weights (packed_weights.hpp) and the
// prepacked quantized weights (prepacked_weights.hpp) made from it are stale.
void written(tf_buffer *buffer) {
    buffer_written(buffer);
    forget_prepacked(buffer);
}

// get_proc("buffer_mark_constant"): a hint, so a failure to record it only costs speed.
void mark_constant_entry(tf_buffer *buffer) {
    try {
        mark_buffer_constant(buffer);
    } catch (...) {
    }
}

// "model name" from /proc/cpuinfo (x86 and most others); "cpu" where there is none.
void read_cpu_name(char *dst, size_t size) {
    std::snprintf(dst, size, "cpu");
    std::unique_ptr<FILE, decltype(&std::fclose)> file(std::fopen("/proc/cpuinfo", "re"), &std::fclose);
    if (!file) return;
    char line[512];
    while (std::fgets(line, sizeof line, file.get())) {
        if (std::strncmp(line, "model name", 10) != 0) continue;
        const char *colon = std::strchr(line, ':');
        if (!colon) continue;
        const char *value = colon + 1 + std::strspn(colon + 1, " \t");
        size_t len = std::strcspn(value, "\n");
        while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t')) --len;
        if (len > 0) std::snprintf(dst, size, "%.*s", static_cast<int>(len), value);
        return;
    }
}

// The plugin's members (the table's, by name: tf_kit::plugin_table); buffers and synchronize
// are the kit's host buffer layer (tinyfin/plugin_kit/host_buffer.hpp), shared with blas.
struct CpuPlugin : HostBuffers {
    // ---- Buffers: the kit's, and every write or free drops what was packed or prepacked from the
    // buffer ----

    static void buffer_free(tf_buffer *buffer) {
        buffer_freed(buffer);
        forget_prepacked(buffer);
        host_buffer_free(buffer);
    }

    static tf_status buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
        written(buffer);
        return host_buffer_write(buffer, offset, src, size, err);
    }

    static tf_status buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset,
                                 uint64_t size, tf_error *err) {
        written(dst);
        return host_buffer_copy(dst, dst_offset, src, src_offset, size, err);
    }

    // ---- Backend ---------------------------------------------------------------------------------

    static tf_status probe(tf_error *) { return TF_STATUS_OK; }

    static tf_status init(tf_error *err) {
        // Every variable is read (and a bad one reported) now, not at some later op.
        return guarded(err, "init", [&]() -> tf_status {
            read_settings();
            if (tf_status s = settings_status(err); s != TF_STATUS_OK) return s;
            log_line(TF_LOG_DEBUG, "1 device, %s kernels, %d threads", isa_name(isa_level()), thread_count());
            return TF_STATUS_OK;
        });
    }

    // Stops the thread pool and frees the scratch arenas, the packed and prepacked weights (the
    // kernels then read the tensors as stored) and the cached free blocks; buffers still held by
    // the core stay valid.
    static void shutdown() {
        packed_weights_clear();
        forget_all_prepacked();
        runtime_shutdown();
    }

    // ---- Device ----------------------------------------------------------------------------------

    static int32_t device_count() { return 1; }

    static tf_status device_info(int32_t device, tf_device_info *info, tf_error *err) {
        if (tf_status s = check_host_device("device_info", device, err); s != TF_STATUS_OK) return s;
        if (!info) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info is NULL");
        tf_device_info full = host_device_info();
        read_cpu_name(full.name, sizeof full.name);
        copy_device_info(full, info);
        return TF_STATUS_OK;
    }

    // ---- Extensions --------------------------------------------------------------------------

    // buffer_wrap: host memory lent by numpy or DLPack as a buffer (core/interop.cpp).
    // weight_prepack: q4_0/q8_0 weights repacked for matmul_q (prepacked_weights.hpp).
    static void *get_proc(const char *name) {
        if (name && std::strcmp(name, "buffer_wrap") == 0) return reinterpret_cast<void *>(&host_buffer_wrap);
        if (name && std::strcmp(name, "weight_prepack") == 0) return reinterpret_cast<void *>(&weight_prepack);
        if (name && std::strcmp(name, "buffer_mark_constant") == 0)
            return reinterpret_cast<void *>(&mark_constant_entry);
        return nullptr;
    }

    // ---- Ops -------------------------------------------------------------------------------------

    // supports() and run() are the kit's, derived from these rows (tinyfin/plugin_kit/kernel_rows.hpp).
    static std::span<const HostRow> kernels() { return cpu_kernels(); }

    static int32_t supports(int32_t device, const tf_op_desc *op) {
        return HostKernelTable<CpuPlugin>::supports(device, op);
    }

    // An op's outputs are written: what was packed from their buffers is stale.
    static tf_status run(int32_t device, const tf_op_desc *op, tf_error *err) {
        if (op && op->outputs)
            for (uint32_t i = 0; i < op->n_outputs; ++i) written(op->outputs[i].buffer);
        return HostKernelTable<CpuPlugin>::run(device, op, err);
    }

    // ---- Features --------------------------------------------------------------------------------

    static void list_features(tf_feature_fn emit, void *user) {
        list_runtime_features(emit, user);
        const std::string bytes = std::to_string(packed_weight_bytes());
        emit(user, "packed_weight_bytes", bytes.c_str());
    }
};

// ---- Plugin table ----------------------------------------------------------------------------

constexpr tf_plugin k_plugin = plugin_table<CpuPlugin>("cpu", TF_CPU_VERSION, 0);

}  // namespace

// ---- Entry point -----------------------------------------------------------------------------

TF_KIT_PLUGIN_ENTRY(k_plugin);
