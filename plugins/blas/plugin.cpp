// The blas plugin: OpenBLAS on host memory, and the cpu plugin's kernels for the rest. One cpu
// device whose buffers are plain 64-byte aligned host memory, like cpu's, so tensors move between
// blas and cpu without copies. Its rows: sgemm for f32 matmul and conv2d (forward and both
// gradients) where sgemm beats the cpu plugin's kernels, then every row of the cpu plugin (its
// kernels, linked from the tinyfin-cpu-kernels library: plugins/cpu/kernel_table.hpp), so blas
// runs every op itself and a program runs on it with TINYFIN_FALLBACK=error.
//
// In order: context, the kernel table, backend, device, buffers, ops, features, the plugin table
// and the entry point. OpenBLAS itself is loaded in init (openblas.cpp), the scratch arena is in
// scratch.cpp; buffers are cpu's, from the plugin kit; cpu's kernels bring their own runtime
// (plugins/cpu/runtime.hpp: thread pool, scratch arenas, instruction set), a copy private to
// this plugin.
#include "blas.hpp"

#include "kernel_table.hpp"
#include "runtime.hpp"

#include <tinyfin/plugin_kit/host_buffer.hpp>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include <unistd.h>

#ifndef TF_BLAS_VERSION
#define TF_BLAS_VERSION "0.1.0"
#endif

// ---- Context --------------------------------------------------------------------------------

namespace {

// Serialises the OpenBLAS rows' runs: OpenBLAS's pthread server is one pool for the process, and
// the scratch arena is shared. std::mutex is constant-initialised and trivially destructible.
std::mutex g_lock;
// Ops run through OpenBLAS since init: the feature openblas.ops, which tells the tests (and
// tinyfin-info) which row ran, now that cpu's rows take whatever sgemm does not.
std::atomic<uint64_t> g_openblas_ops{0};

}  // namespace

using namespace tf_blas;

namespace {

// ---- Kernel table ----------------------------------------------------------------------------

// A kernel run under the BLAS lock, and counted.
template <HostKernel Kernel>
tf_status locked(const tf_op_desc &op, tf_error *err) {
    std::lock_guard<std::mutex> lock(g_lock);
    g_openblas_ops.fetch_add(1, std::memory_order_relaxed);
    return Kernel(op, err);
}

// f32 only, and only the layouts and sizes sgemm takes without a copy and runs faster than cpu's
// kernels (each kernel's *_supported): first, so they win where they accept.
constexpr HostRow k_openblas_kernels[] = {
    {TF_OP_MATMUL, k_f32, locked<matmul_run>, matmul_supported},
    {TF_OP_MATMUL_BIAS, k_f32, locked<matmul_bias_run>, matmul_bias_supported},
    {TF_OP_CONV2D, k_f32, locked<conv2d_weight_times_run>, conv2d_supported},
    {TF_OP_CONV2D_GRAD_INPUT, k_f32, locked<conv2d_weight_times_run>, conv2d_supported},
    {TF_OP_CONV2D_GRAD_WEIGHT, k_f32, locked<conv2d_grad_weight_run>, conv2d_supported},
};

// The OpenBLAS rows, then every row of the cpu plugin: gathered on first use.
std::span<const HostRow> blas_kernels() {
    static const std::vector<HostRow> table = [] {
        std::vector<HostRow> rows(std::begin(k_openblas_kernels), std::end(k_openblas_kernels));
        const std::span<const HostRow> cpu = tf_cpu::cpu_kernels();
        rows.insert(rows.end(), cpu.begin(), cpu.end());
        return rows;
    }();
    return table;
}

// The plugin's members (the table's, by name: tf_kit::plugin_table). Buffers and synchronize are
// cpu's buffer layer, from the plugin kit (tinyfin/plugin_kit/host_buffer.hpp): the same blocks,
// the same cache (TINYFIN_HOST_CACHE_BYTES), so cpu runs ops on blas buffers in place.
struct BlasPlugin : HostBuffers {
    // ---- Backend ---------------------------------------------------------------------------------

    // Nothing to check cheaply: whether OpenBLAS loads is init's answer.
    static tf_status probe(tf_error *) { return TF_STATUS_OK; }

    static tf_status init(tf_error *err) {
        return guarded(err, "init", [&]() -> tf_status {
            // cpu's variables (TINYFIN_THREADS, TINYFIN_CPU_ISA, TINYFIN_SCRATCH_BYTES,
            // TINYFIN_HOST_CACHE_BYTES) are read now, as cpu reads them; the cpu plugin, always
            // initialised first, has written the one warning line about a bad one.
            settings_warned_elsewhere();
            tf_cpu::read_settings();
            if (tf_status s = settings_status(err); s != TF_STATUS_OK) return s;
            if (tf_status s = openblas_load(err); s != TF_STATUS_OK) return s;
            log_line(TF_LOG_DEBUG, "%s, core %s, %d threads (%s)", openblas_path(), openblas().get_corename(),
                     openblas().get_num_threads(), openblas_threads_source());
            return TF_STATUS_OK;
        });
    }

    // Buffers still allocated belong to tensors the core no longer frees (see R14): they are plain
    // host memory that process exit returns. Cached blocks, scratch memory and cpu's runtime (its
    // pool and arenas) are freed here.
    static void shutdown() {
        std::lock_guard<std::mutex> lock(g_lock);
        scratch_release();
        tf_cpu::runtime_shutdown();  // also releases the host cache
        openblas_unload();
        g_openblas_ops.store(0);
    }

    // ---- Device ----------------------------------------------------------------------------------

    static int32_t device_count() { return 1; }

    static tf_status device_info(int32_t device, tf_device_info *info, tf_error *err) {
        if (tf_status s = check_host_device("device_info", device, err); s != TF_STATUS_OK) return s;
        if (!info) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info is NULL");
        tf_device_info full = host_device_info();
        std::snprintf(full.name, sizeof full.name, "OpenBLAS %s, %d threads", openblas().get_corename(),
                      openblas().get_num_threads());
        copy_device_info(full, info);
        return TF_STATUS_OK;
    }

    // ---- Extensions --------------------------------------------------------------------------

    // buffer_wrap: host memory lent by numpy or DLPack as a buffer (core/interop.cpp), as cpu.
    static void *get_proc(const char *name) {
        if (name && std::strcmp(name, "buffer_wrap") == 0) return reinterpret_cast<void *>(&host_buffer_wrap);
        return nullptr;
    }

    // ---- Ops -------------------------------------------------------------------------------------

    // supports() and run() are the kit's, derived from these rows (tinyfin/plugin_kit/kernel_rows.hpp).
    static std::span<const HostRow> kernels() { return blas_kernels(); }

    // ---- Features --------------------------------------------------------------------------------

    static void list_features(tf_feature_fn emit, void *user) {
        if (!emit) return;
        char threads[16];
        std::snprintf(threads, sizeof threads, "%d", openblas().get_num_threads());
        emit(user, "openblas.core", openblas().get_corename());
        emit(user, "openblas.threads", threads);
        emit(user, "openblas.threads.source", openblas_threads_source());
        emit(user, "openblas.config", openblas().get_config());
        emit(user, "openblas.library", openblas_path());
        char ops[24];
        std::snprintf(ops, sizeof ops, "%llu",
                      static_cast<unsigned long long>(g_openblas_ops.load(std::memory_order_relaxed)));
        emit(user, "openblas.ops", ops);
        // cpu's kernels' runtime in this plugin: simd, threads, kernels, bf16_matmul, scratch_*.
        tf_cpu::list_runtime_features(emit, user);
    }
};

// ---- Plugin table ----------------------------------------------------------------------------

// 0: not picked by TINYFIN_BACKEND=auto. On the machines measured (docs/performance.md) cpu
// matches OpenBLAS's sgemm and beats this plugin's conv, and OpenBLAS's spinning threads slow
// the cpu kernels' pool down when both run ops of one program.
constexpr tf_plugin k_plugin = plugin_table<BlasPlugin>("blas", TF_BLAS_VERSION, 0);

}  // namespace

// ---- Entry point -----------------------------------------------------------------------------

TF_KIT_PLUGIN_ENTRY(k_plugin);
