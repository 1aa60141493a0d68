// The cpu plugin: kernels on host memory, one device, always loadable. Every other backend falls
// back to it, so correctness comes before speed here; the f32 GEMM (matmul, conv2d, attention)
// is packed and vectorised, and work is split over a thread pool (runtime.h).
//
// In order: descriptor validation, backend, device, buffers, ops, features, the plugin table and
// the entry point. The ABI plumbing (errors, op table, tensor checks, host buffers) is the
// plugin kit's (include/tinyfin/plugin_kit.hpp).
#include "kernels.h"
#include "kernels_nn.h"
#include "runtime.h"

#include <tinyfin/plugin_kit/host_buffer.hpp>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string_view>

#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#ifndef TF_CPU_VERSION
#define TF_CPU_VERSION "0.1.0"
#endif

using namespace tf_cpu;

namespace {

// ---- Descriptor validation -------------------------------------------------------------------

// The cpu plugin has a kernel for every dtype tinyfin defines an op on (ops.def's dtypes column
// and the kind's rule): it is every op's fallback, so it states no limits of its own.

// Everything supports() answers and run() relies on. With err == NULL no text is formatted.
// supports() passes need_data = false: the core asks it about descriptors without memory (the
// tinyfin-info matrix, and whether a device tensor could fall back to cpu before copying it).
tf_status validate(int32_t device, const tf_op_desc *op, bool need_data, tf_error *err) {
    OpRule rule;
    if (tf_status s = check_call(op, &rule, err); s != TF_STATUS_OK) return s;
    const char *name = rule.name;
    if (device != 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: no cpu device %d (there is 1)", name, device);
    if (tf_status s = check_tensors(name, *op, need_data, err); s != TF_STATUS_OK) return s;
    if (!dtypes_in_column(*op)) {
        const int32_t from = op->n_inputs > 0 ? op->inputs[0].dtype : op->outputs[0].dtype;
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: dtypes %s -> %s outside its dtypes column \"%s\" in ops.def", name,
                    dtype_name(from), dtype_name(op->outputs[0].dtype), op_dtypes(op->op));
    }

    const tf_tensor_desc &out = op->outputs[0];
    const tf_tensor_desc *in = op->inputs;
    switch (rule.kind) {
    case OpKind::UNARY:
    case OpKind::COPY:
        if (!same_shape(in[0], out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: input and output shapes differ", name);
        break;
    case OpKind::BINARY:
    case OpKind::COMPARE:
        if (!same_shape(in[0], out) || !same_shape(in[1], out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: inputs are not broadcast to the output shape", name);
        break;
    case OpKind::WHERE:
        if (!same_shape(in[0], out) || !same_shape(in[1], out) || !same_shape(in[2], out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: cond, a and b are not broadcast to the output shape",
                        name);
        break;
    case OpKind::REDUCE: {
        const uint32_t mask = reduce_axes_mask(*op);
        if (in[0].rank != out.rank || (mask >> in[0].rank) != 0)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axes mask 0x%x does not fit rank %d -> %d", name, mask,
                        in[0].rank, out.rank);
        for (int i = 0; i < out.rank; ++i)
            if (out.shape[i] != ((mask >> i & 1) ? 1 : in[0].shape[i]))
                return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output axis %d has size %lld, expected %lld", name, i,
                            static_cast<long long>(out.shape[i]),
                            static_cast<long long>((mask >> i & 1) ? 1 : in[0].shape[i]));
        // max and min have no identity to give an empty reduction.
        if (op->op == TF_OP_MAX || op->op == TF_OP_MIN)
            for (int i = 0; i < in[0].rank; ++i)
                if ((mask >> i & 1) && in[0].shape[i] == 0)
                    return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: reduced axis %d has size 0", name, i);
        break;
    }
    case OpKind::ARG: {
        const int32_t axis = static_cast<const tf_params_axis *>(op->params)->axis;
        if (axis < 0 || axis >= in[0].rank)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axis %d is out of range for rank %d", name, axis,
                        in[0].rank);
        if (out.rank != in[0].rank)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output rank %d differs from input rank %d", name,
                        out.rank, in[0].rank);
        for (int i = 0; i < out.rank; ++i)
            if (out.shape[i] != (i == axis ? 1 : in[0].shape[i]))
                return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output axis %d has size %lld, expected %lld", name, i,
                            static_cast<long long>(out.shape[i]),
                            static_cast<long long>(i == axis ? 1 : in[0].shape[i]));
        // An empty axis has no first extreme to point at.
        if (in[0].shape[axis] == 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axis %d has size 0", name, axis);
        break;
    }
    case OpKind::MATMUL: {
        const tf_tensor_desc &a = in[0], &b = in[1];
        const int r = out.rank;
        bool ok = r >= 2 && a.rank == r && b.rank == r;
        for (int i = 0; ok && i < r - 2; ++i) ok = a.shape[i] == out.shape[i] && b.shape[i] == out.shape[i];
        ok = ok && a.shape[r - 2] == out.shape[r - 2] && b.shape[r - 1] == out.shape[r - 1] &&
             a.shape[r - 1] == b.shape[r - 2];
        if (!ok)
            return fail(err, TF_STATUS_INVALID_ARGUMENT,
                        "%s: shapes of a, b and out do not form [..., M, K] x [..., K, N] -> [..., M, N]", name);
        break;
    }
    case OpKind::FILL: break;
    case OpKind::OWN:
        // The OWN ops: kernels_nn.h checks their shapes, params and dtypes.
        return validate_own(*op, err);
    }
    if (!dtypes_consistent(*op, rule.kind)) {
        const int32_t from = op->n_inputs > 0 ? in[0].dtype : out.dtype;
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: operand dtypes %s -> %s break its kind's rule of shared dtypes",
                    name, dtype_name(from), dtype_name(out.dtype));
    }
    return TF_STATUS_OK;
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

    static int32_t supports(int32_t device, const tf_op_desc *op) {
        return guarded_answer([&] { return validate(device, op, false, nullptr) == TF_STATUS_OK; });
    }

    static tf_status run(int32_t device, const tf_op_desc *op, tf_error *err) {
        return guarded(
            err, [op] { return op ? op_name(op->op) : "run"; },
            [&]() -> tf_status {
                // run() only gets what supports() accepted, but a bad descriptor must never crash.
                if (tf_status s = validate(device, op, true, err); s != TF_STATUS_OK) return s;
                const tf_tensor_desc *in = op->inputs;
                const tf_tensor_desc &out = op->outputs[0];
                OpRule rule{};
                find_op_rule(op->op, &rule);
                // By kind (ops.def): each kind's kernel file switches on the op itself.
                switch (rule.kind) {
                case OpKind::BINARY: return run_binary(op->op, in[0], in[1], out, err);
                case OpKind::COMPARE: return run_compare(op->op, in[0], in[1], out, err);
                case OpKind::WHERE: return run_where(in[0], in[1], in[2], out, err);
                case OpKind::UNARY:
                    if (op->op == TF_OP_CLAMP) {
                        const auto &p = params_of<tf_params_clamp>(*op);
                        return run_clamp(in[0], out, p.min, p.max, err);
                    }
                    return run_unary(op->op, in[0], out, err);
                case OpKind::REDUCE:
                    switch (op->op) {
                    case TF_OP_SUM: return run_sum(in[0], out, reduce_axes_mask(*op), err);
                    case TF_OP_MEAN: return run_mean(in[0], out, reduce_axes_mask(*op), err);
                    case TF_OP_VAR:
                        return run_var(in[0], out, reduce_axes_mask(*op), params_of<tf_params_var>(*op).correction,
                                       err);
                    default: return run_extreme(op->op, in[0], out, reduce_axes_mask(*op), err);  // max, min
                    }
                case OpKind::ARG: return run_arg(op->op, in[0], out, params_of<tf_params_axis>(*op).axis, err);
                case OpKind::MATMUL: return run_matmul(in[0], in[1], out, err);
                case OpKind::COPY:
                    if (op->op == TF_OP_CAST) return run_cast(in[0], out, err);
                    return run_contiguous(in[0], out, err);
                case OpKind::FILL: return run_fill(out, params_of<tf_params_fill>(*op).value, err);
                case OpKind::OWN: return run_own(*op, err);
                }
                return fail(err, TF_STATUS_UNSUPPORTED, "%s: no cpu kernel", rule.name);
            });
    }

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
