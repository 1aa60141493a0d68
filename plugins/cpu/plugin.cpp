// The cpu plugin: kernels on host memory, one device, always loadable. Every other backend falls
// back to it, so correctness comes before speed here; the f32 GEMM (matmul, conv2d, attention)
// is packed and vectorised, and work is split over a thread pool (runtime.hpp).
//
// In order: the kernel table, backend, device, buffers, ops, features, the plugin table and the
// entry point. The ABI plumbing (errors, op rules, kernel tables, tensor checks, host buffers) is
// the plugin kit's (include/tinyfin/plugin_kit.hpp).
#include "kernels.hpp"
#include "kernels_nn.hpp"
#include "runtime.hpp"

#include <tinyfin/plugin_kit/host_buffer.hpp>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#ifndef TF_CPU_VERSION
#define TF_CPU_VERSION "0.1.0"
#endif

using namespace tf_cpu;

namespace {

// ---- Kernel table ------------------------------------------------------------------------------

// The OWN ops' kernels (kernels_nn.hpp, one file per family), one row each. The cpu plugin has a
// kernel for every dtype tinyfin defines an op on (ops.def's dtypes column and the op's rule,
// tinyfin/plugin_kit/rules.hpp): it is every op's fallback, so its rows state no limits of their
// own but the optimizer steps' dense f32.
constexpr HostRow k_own_kernels[] = {
    // kernels_conv.cpp
    {TF_OP_CONV2D, k_float_dtypes, run_conv2d},
    {TF_OP_CONV2D_GRAD_INPUT, k_float_dtypes, run_conv2d_grad_input},
    {TF_OP_CONV2D_GRAD_WEIGHT, k_float_dtypes, run_conv2d_grad_weight},
    // kernels_pool.cpp
    {TF_OP_MAX_POOL2D, k_float_dtypes, run_max_pool2d},
    {TF_OP_MAX_POOL2D_BACKWARD, k_float_dtypes, run_max_pool2d_backward},
    {TF_OP_AVG_POOL2D, k_float_dtypes, run_avg_pool2d},
    {TF_OP_AVG_POOL2D_BACKWARD, k_float_dtypes, run_avg_pool2d_backward},
    // kernels_softmax.cpp
    {TF_OP_SOFTMAX, k_float_dtypes, run_softmax},
    {TF_OP_LOG_SOFTMAX, k_float_dtypes, run_softmax},
    {TF_OP_CROSS_ENTROPY, k_float_dtypes, run_cross_entropy},
    // kernels_norm.cpp
    {TF_OP_LAYER_NORM, k_float_dtypes, run_layer_norm},
    {TF_OP_RMS_NORM, k_float_dtypes, run_rms_norm},
    {TF_OP_LAYER_NORM_BACKWARD, k_float_dtypes, run_layer_norm_backward},
    {TF_OP_ROPE, k_float_dtypes, run_rope},
    // kernels_attention.cpp
    {TF_OP_ATTENTION, k_float_dtypes, run_attention},
    // kernels_attention_backward.cpp
    {TF_OP_ATTENTION_BACKWARD, k_float_dtypes, run_attention_backward},
    // kernels_lookup.cpp
    {TF_OP_EMBEDDING, k_any_dtype, run_embedding},
    {TF_OP_EMBEDDING_BACKWARD, k_float_dtypes, run_embedding_backward},
    {TF_OP_ONE_HOT, k_any_dtype, run_one_hot},
    // kernels_optim.cpp
    {TF_OP_ADAMW_STEP, k_f32, run_optim, dense_f32_operands},
    {TF_OP_SGD_STEP, k_f32, run_optim, dense_f32_operands},
    // kernels_quant.cpp
    {TF_OP_QUANTIZE, k_any_dtype, run_quantize},
    {TF_OP_DEQUANTIZE, k_any_dtype, run_dequantize},
    {TF_OP_MATMUL_Q, k_any_dtype, run_matmul_q},
    {TF_OP_EMBEDDING_Q, k_any_dtype, run_embedding_q},
    // kernels_cumsum.cpp
    {TF_OP_CUMSUM, k_numeric_dtypes, run_cumsum},
};

// Every row: the elementwise, compare, reduce, matmul and copy files' tables (their kernels are
// templates private to each file) and the OWN ops' above, gathered once.
std::span<const HostRow> cpu_kernels() {
    static const std::vector<HostRow> table = [] {
        std::vector<HostRow> rows;
        for (std::span<const HostRow> family :
             {elementwise_kernels(), compare_kernels(), reduce_kernels(), matmul_kernels(), copy_kernels(),
              std::span<const HostRow>(k_own_kernels)})
            rows.insert(rows.end(), family.begin(), family.end());
        return rows;
    }();
    return table;
}

// ---- Helpers of the members ----------------------------------------------------------------

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

// cpuid by hand: __builtin_cpu_supports links libgcc's __cpu_indicator_init, a static
// constructor that would run at dlopen.
const char *simd_level() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return "none";
    const bool sse2 = d & bit_SSE2;
    bool ymm_enabled = false;  // the OS saves the AVX registers (XCR0 bits 1 and 2)
    if ((c & bit_OSXSAVE) && (c & bit_AVX)) {
        unsigned lo = 0, hi = 0;
        __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        ymm_enabled = (lo & 6) == 6;
    }
    if (ymm_enabled && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2)) return "avx2";
    return sse2 ? "sse2" : "none";
#else
    return "none";
#endif
}

// The plugin's members (the table's, by name: tf_kit::plugin_table); buffers and synchronize
// are the kit's host buffer layer (tinyfin/plugin_kit/host_buffer.hpp), shared with blas.
struct CpuPlugin : HostBuffers {
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

    // Stops the thread pool and frees the scratch arenas and the cached free blocks; buffers still
    // held by the core stay valid.
    static void shutdown() { runtime_shutdown(); }

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
    static void *get_proc(const char *name) {
        if (name && std::strcmp(name, "buffer_wrap") == 0) return reinterpret_cast<void *>(&host_buffer_wrap);
        return nullptr;
    }

    // ---- Ops -------------------------------------------------------------------------------------

    // supports() and run() are the kit's, derived from these rows (tinyfin/plugin_kit/kernel_rows.hpp).
    static std::span<const HostRow> kernels() { return cpu_kernels(); }

    // ---- Features --------------------------------------------------------------------------------

    static void list_features(tf_feature_fn emit, void *user) {
        if (!emit) return;
        emit(user, "simd", simd_level());
        char threads[16];
        std::snprintf(threads, sizeof threads, "%d", thread_count());
        emit(user, "threads", threads);
        emit(user, "kernels", isa_name(isa_level()));
        // bf16 x bf16 matmul: "avx512bf16" (vdpbf16ps) or "f32" (converted, the f32 GEMM).
        emit(user, "bf16_matmul", bf16_dot_level() > 0 ? "avx512bf16" : "f32");
        // For tests and tinyfin-info: scratch arenas alive and the bytes they hold.
        uint64_t arenas = 0, bytes = 0;
        scratch_stats(&arenas, &bytes);
        char text[32];
        std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(arenas));
        emit(user, "scratch_arenas", text);
        std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(bytes));
        emit(user, "scratch_bytes", text);
    }
};

// ---- Plugin table ----------------------------------------------------------------------------

constexpr tf_plugin k_plugin = plugin_table<CpuPlugin>("cpu", TF_CPU_VERSION, 0);

}  // namespace

// ---- Entry point -----------------------------------------------------------------------------

TF_KIT_PLUGIN_ENTRY(k_plugin);
