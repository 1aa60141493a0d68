// The blas plugin: OpenBLAS on host memory. One cpu device whose buffers are plain 64-byte
// aligned host memory, like cpu's, so tensors move between blas and cpu without copies and
// every op blas does not claim runs on cpu in place. It claims only f32 matmul and conv2d
// (forward and both gradients) where sgemm beats the cpu plugin.
//
// In order: context, the kernel table, backend, device, buffers, ops, features, the plugin table
// and the entry point. OpenBLAS itself is loaded in init (openblas.cpp), the scratch arena is in
// scratch.cpp; buffers are cpu's, from the plugin kit.
#include "blas.hpp"

#include <tinyfin/plugin_kit/host_buffer.hpp>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>

#include <unistd.h>

#ifndef TF_BLAS_VERSION
#define TF_BLAS_VERSION "0.1.0"
#endif

// ---- Context --------------------------------------------------------------------------------

namespace {

// Serialises run(): OpenBLAS's pthread server is one pool for the process, and the scratch arena
// is shared. std::mutex is constant-initialised and trivially destructible.
std::mutex g_lock;

}  // namespace

using namespace tf_blas;

namespace {

// ---- Kernel table ----------------------------------------------------------------------------

// A kernel run under the BLAS lock.
template <HostKernel Kernel>
tf_status locked(const tf_op_desc &op, tf_error *err) {
    std::lock_guard<std::mutex> lock(g_lock);
    return Kernel(op, err);
}

// f32 only, and only the layouts sgemm takes without a copy (each kernel's *_supported).
constexpr HostRow k_kernels[] = {
    {TF_OP_MATMUL, k_f32, locked<matmul_run>, matmul_supported},
    {TF_OP_CONV2D, k_f32, locked<conv2d_weight_times_run>, conv2d_supported},
    {TF_OP_CONV2D_GRAD_INPUT, k_f32, locked<conv2d_weight_times_run>, conv2d_supported},
    {TF_OP_CONV2D_GRAD_WEIGHT, k_f32, locked<conv2d_grad_weight_run>, conv2d_supported},
};

// The plugin's members (the table's, by name: tf_kit::plugin_table). Buffers and synchronize are
// cpu's buffer layer, from the plugin kit (tinyfin/plugin_kit/host_buffer.hpp): the same blocks,
// the same cache (TINYFIN_HOST_CACHE_BYTES), so cpu runs ops on blas buffers in place.
struct BlasPlugin : HostBuffers {
    // ---- Backend ---------------------------------------------------------------------------------

    // Nothing to check cheaply: whether OpenBLAS loads is init's answer.
    static tf_status probe(tf_error *) { return TF_STATUS_OK; }

    static tf_status init(tf_error *err) {
        return guarded(err, "init", [&]() -> tf_status {
            if (tf_status s = openblas_load(err); s != TF_STATUS_OK) return s;
            log_line(TF_LOG_DEBUG, "%s, core %s, %d threads (%s)", openblas_path(), openblas().get_corename(),
                     openblas().get_num_threads(), openblas_threads_source());
            return TF_STATUS_OK;
        });
    }

    // Buffers still allocated belong to tensors the core no longer frees (see R14): they are plain
    // host memory that process exit returns. Cached blocks and scratch memory are freed here.
    static void shutdown() {
        std::lock_guard<std::mutex> lock(g_lock);
        scratch_release();
        host_cache_release();
        openblas_unload();
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

    // ---- Ops -------------------------------------------------------------------------------------

    // supports() and run() are the kit's, derived from these rows (tinyfin/plugin_kit/kernel_rows.hpp).
    static constexpr std::span<const HostRow> kernels{k_kernels};

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
    }
};

// ---- Plugin table ----------------------------------------------------------------------------

// 0: not picked by TINYFIN_BACKEND=auto. On the machines measured (docs/performance.md) cpu
// matches OpenBLAS's sgemm and beats this plugin's conv, and OpenBLAS's spinning threads
// slow cpu's pool down when both run ops of one program.
constexpr tf_plugin k_plugin = plugin_table<BlasPlugin>("blas", TF_BLAS_VERSION, 0);

}  // namespace

// ---- Entry point -----------------------------------------------------------------------------

TF_KIT_PLUGIN_ENTRY(k_plugin);
