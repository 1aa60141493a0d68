// The cpu plugin: kernels on host memory, one device, always loadable. Every other backend falls
// back to it, so correctness comes before speed here; the f32 GEMM (matmul, conv2d, attention)
// is packed and vectorised, and work is split over a thread pool (runtime.h).
//
// In order: context, shared helpers, descriptor validation, backend, device, buffers, ops,
// features, the plugin table and the entry point.
#include "kernels.h"
#include "kernels_nn.h"
#include "runtime.h"

#include <tinyfin/env.h>

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

// ---- Context --------------------------------------------------------------------------------

namespace {

// The core's table, set once by the entry point before any other call; constant-initialised
// (no static constructor runs at dlopen).
const tf_host_api *g_host = nullptr;

}  // namespace

// The ABI's opaque buffer: one 64-byte-aligned block of the host caching allocator (runtime.h).
struct tf_buffer {
    void *data;
    uint64_t capacity;  // bytes of the block, handed back to the cache with it
    // Bytes the core asked for; read, write and copy stay inside them.
    uint64_t size;
    // False for memory lent by buffer_wrap (a numpy array, a DLPack tensor): its owner frees it.
    bool owned = true;
    ~tf_buffer() {
        if (owned) tf_cpu::host_free(data, capacity);
    }
};

// ---- Shared helpers (declared in kernels.h) --------------------------------------------------

namespace tf_cpu {

const char *env(const char *name) {
    const tf_host_api *host = g_host;
    if (host && host->struct_size >= offsetof(tf_host_api, get_env) + sizeof host->get_env && host->get_env)
        return host->get_env(name);
    return secure_getenv(name);
}

void warn(const char *message) {
    const tf_host_api *host = g_host;
    if (host && host->struct_size >= offsetof(tf_host_api, log) + sizeof host->log && host->log)
        host->log(TF_LOG_WARN, "cpu", message);
}

tf_status fail(tf_error *err, tf_status status, const char *fmt, ...) noexcept {
    // Older or smaller tf_error structs get as much of the message as fits them.
    if (!err || err->struct_size <= offsetof(tf_error, message)) return status;
    const size_t room = std::min<size_t>(err->struct_size - offsetof(tf_error, message), sizeof err->message);
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(err->message, room, fmt, args);
    va_end(args);
    return status;
}

namespace {

// The op's shape rule: the KIND column of ops.def. Kinds the cpu plugin has no kernel for are
// OTHER, so ops.def can grow new kinds without touching this file.
enum class op_kind { UNARY, BINARY, REDUCE, MATMUL, COPY, FILL, COMPARE, WHERE, ARG, OTHER };

constexpr op_kind kind_named(std::string_view kind) {
    if (kind == "UNARY") return op_kind::UNARY;
    if (kind == "BINARY") return op_kind::BINARY;
    if (kind == "REDUCE") return op_kind::REDUCE;
    if (kind == "MATMUL") return op_kind::MATMUL;
    if (kind == "COPY") return op_kind::COPY;
    if (kind == "FILL") return op_kind::FILL;
    if (kind == "COMPARE") return op_kind::COMPARE;
    if (kind == "WHERE") return op_kind::WHERE;
    if (kind == "ARG") return op_kind::ARG;
    return op_kind::OTHER;
}

struct op_rule {
    const char *name;
    op_kind kind;
    uint32_t n_inputs;
    uint32_t n_outputs;
    // sizeof the params struct, 0 for tf_params_none (params is then NULL and ignored).
    size_t params_size;
};

// The op's row of ops.def; false for an id the table does not have.
bool find_op_rule(uint32_t op, op_rule *rule) {
    switch (op) {
#define TF_OP(id, sym, name, kind, n_in, n_out, params)                                       \
    case id: {                                                                                \
        constexpr op_kind k = kind_named(#kind); /* folded at compile time */                 \
        *rule = {name, k, n_in, n_out, std::is_same_v<params, tf_params_none> ? 0 : sizeof(params)}; \
        return true;                                                                          \
    }
#include <tinyfin/ops.def>
#undef TF_OP
    default:
        return false;
    }
}

}  // namespace

const char *op_name(uint32_t op) noexcept {
    op_rule rule;
    return find_op_rule(op, &rule) ? rule.name : "op?";
}

const char *dtype_name(int32_t dtype) noexcept {
    switch (dtype) {
    case TF_DTYPE_F32: return "f32";
    case TF_DTYPE_F16: return "f16";
    case TF_DTYPE_BF16: return "bf16";
    case TF_DTYPE_I32: return "i32";
    case TF_DTYPE_I64: return "i64";
    case TF_DTYPE_BOOL: return "bool";
    default: return "dtype?";
    }
}

size_t dtype_size(int32_t dtype) noexcept {
    switch (dtype) {
    case TF_DTYPE_F32: case TF_DTYPE_I32: return 4;
    case TF_DTYPE_F16: case TF_DTYPE_BF16: return 2;
    case TF_DTYPE_I64: return 8;
    case TF_DTYPE_BOOL: return 1;
    default: return 0;
    }
}

}  // namespace tf_cpu

using namespace tf_cpu;

namespace {

void log_line(int32_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_line(int32_t level, const char *fmt, ...) {
    const tf_host_api *host = g_host;
    if (!host || host->struct_size < offsetof(tf_host_api, log) + sizeof host->log || !host->log) return;
    char message[TF_TEXT_SIZE];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    host->log(level, "cpu", message);
}

// Runs f at the ABI boundary: no exception ever crosses into the core. what names the call in
// the message: a string, or a function returning one, called only when f threw (run() looks up
// the op's name only then, not on every call).
template <class What, class F>
tf_status guarded(tf_error *err, What &&what, F &&f) noexcept {
    auto name = [&]() -> const char * {
        if constexpr (std::is_invocable_v<What>) return what();
        else return what;
    };
    try {
        return f();
    } catch (const std::bad_alloc &) {
        return fail(err, TF_STATUS_OUT_OF_MEMORY, "%s: out of host memory", name());
    } catch (const std::exception &e) {
        return fail(err, TF_STATUS_INTERNAL, "%s: %s", name(), e.what());
    } catch (...) {
        return fail(err, TF_STATUS_INTERNAL, "%s: unknown exception", name());
    }
}

// ---- Descriptor validation -------------------------------------------------------------------

// The cpu plugin's op x dtype matrix; the other checks come from ops.def. An op without a case
// here answers "no" until it has a kernel, a case here and one in cpu_run.

bool is_float(int32_t dtype) {
    return dtype == TF_DTYPE_F32 || dtype == TF_DTYPE_F16 || dtype == TF_DTYPE_BF16;
}
bool is_numeric(int32_t dtype) { return is_float(dtype) || dtype == TF_DTYPE_I32 || dtype == TF_DTYPE_I64; }

// The kind's dtype rule: which operands share a dtype and which dtypes are fixed.
bool dtypes_consistent(const tf_op_desc &op, op_kind kind) {
    const tf_tensor_desc *in = op.inputs;
    const int32_t out = op.outputs[0].dtype;
    switch (kind) {
    case op_kind::COMPARE:
        return in[1].dtype == in[0].dtype && out == TF_DTYPE_BOOL;
    case op_kind::WHERE:
        return in[0].dtype == TF_DTYPE_BOOL && in[1].dtype == out && in[2].dtype == out;
    case op_kind::ARG:
        return out == TF_DTYPE_I64;
    default:
        if (op.op == TF_OP_CAST) return true;
        for (uint32_t i = 0; i < op.n_inputs; ++i)
            if (in[i].dtype != out) return false;
        return true;
    }
}

bool dtypes_supported(const tf_op_desc &op, op_kind kind) {
    if (!dtypes_consistent(op, kind)) return false;
    // The dtype the kernel works in: the inputs' for comparisons and arg ops, else the output's.
    const int32_t dtype = kind == op_kind::COMPARE || kind == op_kind::ARG ? op.inputs[0].dtype : op.outputs[0].dtype;
    switch (op.op) {
    case TF_OP_ADD:
    case TF_OP_SUB:
    case TF_OP_MUL:
    case TF_OP_DIV:
    case TF_OP_POW:  // integers: non-negative exponents only, checked by the kernel
    case TF_OP_MAXIMUM:
    case TF_OP_MINIMUM:
    case TF_OP_RELU_BACKWARD:
    case TF_OP_NEG:
    case TF_OP_RELU:
    case TF_OP_ABS:
    case TF_OP_SQUARE:
    case TF_OP_CLAMP:
    case TF_OP_SUM:
    case TF_OP_MAX:
    case TF_OP_MIN:
    case TF_OP_ARGMAX:
    case TF_OP_ARGMIN:
        return is_numeric(dtype);
    case TF_OP_EXP:
    case TF_OP_LOG:
    case TF_OP_SQRT:
    case TF_OP_RSQRT:
    case TF_OP_SIN:
    case TF_OP_COS:
    case TF_OP_TANH:
    case TF_OP_SIGMOID:
    case TF_OP_GELU:
    case TF_OP_GELU_TANH:
    case TF_OP_SILU:
    case TF_OP_ERF:
    case TF_OP_MEAN:
    case TF_OP_VAR:
    case TF_OP_MATMUL:
        return is_float(dtype);
    case TF_OP_EQ:
    case TF_OP_NE:
    case TF_OP_LT:
    case TF_OP_LE:
    case TF_OP_GT:
    case TF_OP_GE:
    case TF_OP_WHERE:
    case TF_OP_CONTIGUOUS:
    case TF_OP_CAST:
    case TF_OP_FILL:
        return true;  // all six dtypes; check_tensor rejected unknown ones
    default:
        return false;
    }
}

// One tensor on its own: a known dtype, a rank within TF_MAX_RANK, no negative sizes or strides,
// no overflow in its element count or byte extent; with need_data, a host address whenever it has
// elements.
tf_status check_tensor(const char *op, const char *role, uint32_t index, const tf_tensor_desc &t, bool need_data,
                       tf_error *err) {
    if (t.struct_size < sizeof(tf_tensor_desc))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u descriptor has struct_size %u, need %zu", op, role,
                    index, t.struct_size, sizeof(tf_tensor_desc));
    if (dtype_size(t.dtype) == 0)
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: %s %u has unknown dtype %d", op, role, index, t.dtype);
    if (t.rank < 0 || t.rank > TF_MAX_RANK)
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: %s %u has rank %d (max %d)", op, role, index, t.rank, TF_MAX_RANK);
    int64_t count = 1;
    uint64_t last = t.offset;  // byte offset of the last element
    const auto size = static_cast<uint64_t>(dtype_size(t.dtype));
    bool overflow = false;
    // The product of the non-zero sizes: kernels multiply sizes in axis order, so an empty tensor
    // must not overflow before its zero either.
    int64_t nonzero_count = 1;
    bool sizes_overflow = false;
    for (int i = 0; i < t.rank; ++i) {
        if (t.shape[i] < 0 || t.strides[i] < 0)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u axis %d has size %lld and stride %lld", op, role,
                        index, i, static_cast<long long>(t.shape[i]), static_cast<long long>(t.strides[i]));
        uint64_t reach = 0;
        overflow |= __builtin_mul_overflow(t.shape[i], count, &count);
        if (t.shape[i] > 0) {
            sizes_overflow |= __builtin_mul_overflow(t.shape[i], nonzero_count, &nonzero_count);
            overflow |= __builtin_mul_overflow(static_cast<uint64_t>(t.shape[i] - 1), static_cast<uint64_t>(t.strides[i]), &reach);
            overflow |= __builtin_mul_overflow(reach, size, &reach);
            overflow |= __builtin_add_overflow(last, reach, &last);
        }
    }
    // No elements, nothing addressed: [0, 2^62] is a valid empty tensor whatever its strides.
    for (int i = 0; i < t.rank; ++i)
        if (t.shape[i] == 0) {
            if (sizes_overflow)
                return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u: the product of its non-zero sizes overflows",
                            op, role, index);
            return TF_STATUS_OK;
        }
    // Walks do byte arithmetic in int64_t.
    if (overflow || last > static_cast<uint64_t>(INT64_MAX))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u is too large to address", op, role, index);
    if (need_data && count > 0 && !t.data)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u has %lld elements but no host address", op, role,
                    index, static_cast<long long>(count));
    return TF_STATUS_OK;
}

bool same_shape(const tf_tensor_desc &a, const tf_tensor_desc &b) {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)
        if (a.shape[i] != b.shape[i]) return false;
    return true;
}

// REDUCE ops' axes: var has tf_params_var, the others tf_params_reduce.
uint32_t reduce_axes_mask(const tf_op_desc &op) {
    if (op.op == TF_OP_VAR) return static_cast<const tf_params_var *>(op.params)->axes_mask;
    return static_cast<const tf_params_reduce *>(op.params)->axes_mask;
}

// Everything supports() answers and run() relies on. With err == NULL no text is formatted.
// supports() passes need_data = false: the core asks it about descriptors without memory (the
// tinyfin-info matrix, and whether a device tensor could fall back to cpu before copying it).
tf_status validate(int32_t device, const tf_op_desc *op, bool need_data, tf_error *err) {
    if (!op || op->struct_size < sizeof(tf_op_desc))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "cpu: op descriptor missing or smaller than %zu bytes", sizeof(tf_op_desc));
    op_rule rule;
    if (!find_op_rule(op->op, &rule)) return fail(err, TF_STATUS_UNSUPPORTED, "cpu: unknown op id %u", op->op);
    const char *name = rule.name;
    if (device != 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: no cpu device %d (there is 1)", name, device);
    if (op->n_inputs != rule.n_inputs || op->n_outputs != rule.n_outputs)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: takes %u inputs and %u outputs, got %u and %u", name,
                    rule.n_inputs, rule.n_outputs, op->n_inputs, op->n_outputs);
    if ((op->n_inputs > 0 && !op->inputs) || !op->outputs)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: tensor array is NULL", name);
    for (uint32_t i = 0; i < op->n_inputs; ++i)
        if (tf_status s = check_tensor(name, "input", i, op->inputs[i], need_data, err); s != TF_STATUS_OK) return s;
    if (tf_status s = check_tensor(name, "output", 0, op->outputs[0], need_data, err); s != TF_STATUS_OK) return s;
    if (rule.params_size > 0 && (!op->params || *static_cast<const uint32_t *>(op->params) < rule.params_size))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: params missing or smaller than %zu bytes", name, rule.params_size);

    const tf_tensor_desc &out = op->outputs[0];
    const tf_tensor_desc *in = op->inputs;
    switch (rule.kind) {
    case op_kind::UNARY:
    case op_kind::COPY:
        if (!same_shape(in[0], out)) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: input and output shapes differ", name);
        break;
    case op_kind::BINARY:
    case op_kind::COMPARE:
        if (!same_shape(in[0], out) || !same_shape(in[1], out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: inputs are not broadcast to the output shape", name);
        break;
    case op_kind::WHERE:
        if (!same_shape(in[0], out) || !same_shape(in[1], out) || !same_shape(in[2], out))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: cond, a and b are not broadcast to the output shape", name);
        break;
    case op_kind::REDUCE: {
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
    case op_kind::ARG: {
        const int32_t axis = static_cast<const tf_params_axis *>(op->params)->axis;
        if (axis < 0 || axis >= in[0].rank)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axis %d is out of range for rank %d", name, axis, in[0].rank);
        if (out.rank != in[0].rank)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output rank %d differs from input rank %d", name, out.rank,
                        in[0].rank);
        for (int i = 0; i < out.rank; ++i)
            if (out.shape[i] != (i == axis ? 1 : in[0].shape[i]))
                return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: output axis %d has size %lld, expected %lld", name, i,
                            static_cast<long long>(out.shape[i]), static_cast<long long>(i == axis ? 1 : in[0].shape[i]));
        // An empty axis has no first extreme to point at.
        if (in[0].shape[axis] == 0)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: axis %d has size 0", name, axis);
        break;
    }
    case op_kind::MATMUL: {
        const tf_tensor_desc &a = in[0], &b = in[1];
        const int r = out.rank;
        bool ok = r >= 2 && a.rank == r && b.rank == r;
        for (int i = 0; ok && i < r - 2; ++i) ok = a.shape[i] == out.shape[i] && b.shape[i] == out.shape[i];
        ok = ok && a.shape[r - 2] == out.shape[r - 2] && b.shape[r - 1] == out.shape[r - 1] && a.shape[r - 1] == b.shape[r - 2];
        if (!ok) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: shapes of a, b and out do not form [..., M, K] x [..., K, N] -> [..., M, N]", name);
        break;
    }
    case op_kind::FILL:
        break;
    case op_kind::OTHER:
        // The OWN ops: kernels_nn.h checks their shapes, params and dtypes.
        return validate_own(*op, err);
    }
    if (!dtypes_supported(*op, rule.kind)) {
        const int32_t from = op->n_inputs > 0 ? in[0].dtype : out.dtype;
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: no cpu kernel for dtype %s -> %s", name, dtype_name(from), dtype_name(out.dtype));
    }
    return TF_STATUS_OK;
}

// ---- Backend ---------------------------------------------------------------------------------

tf_status cpu_probe(tf_error *) { return TF_STATUS_OK; }

tf_status cpu_init(tf_error *err) {
    // Every variable is read (and a bad one reported) now, not at some later op.
    char problem[TF_TEXT_SIZE];
    bool settings_ok = false;
    try {
        settings_ok = read_settings(problem, sizeof problem);
    } catch (const std::bad_alloc &) {
        return fail(err, TF_STATUS_OUT_OF_MEMORY, "out of memory reading the settings");
    }
    int strict = 0;
    tf_env_parse_strict(env("TINYFIN_STRICT"), &strict);
    if (!settings_ok && strict)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s (an error because TINYFIN_STRICT=1)", problem);
    log_line(TF_LOG_DEBUG, "1 device, %s kernels, %d threads", isa_name(isa_level()), thread_count());
    return TF_STATUS_OK;
}

// Stops the thread pool and frees the scratch arenas and the cached free blocks; buffers still
// held by the core stay valid.
void cpu_shutdown(void) { runtime_shutdown(); }

// ---- Device ----------------------------------------------------------------------------------

int32_t cpu_device_count(void) { return 1; }

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

uint64_t pages_to_bytes(long pages) {
    const long page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

tf_status cpu_device_info(int32_t device, tf_device_info *info, tf_error *err) {
    if (device != 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: no cpu device %d (there is 1)", device);
    if (!info) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info is NULL");
    tf_device_info full{};
    full.kind = TF_DEVICE_KIND_CPU;
    full.memory_total = pages_to_bytes(sysconf(_SC_PHYS_PAGES));
    full.memory_free = pages_to_bytes(sysconf(_SC_AVPHYS_PAGES));
    full.host_addressable = 1;
    read_cpu_name(full.name, sizeof full.name);
    // A caller built against an older, shorter struct gets the members it knows.
    const size_t n = std::min<size_t>(info->struct_size, sizeof full);
    full.struct_size = static_cast<uint32_t>(n);
    std::memcpy(info, &full, n);
    return TF_STATUS_OK;
}

// ---- Buffers ---------------------------------------------------------------------------------

tf_status cpu_buffer_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err) {
    return guarded(err, "buffer_alloc", [&]() -> tf_status {
        if (device != 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: no cpu device %d (there is 1)", device);
        if (!out) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: out is NULL");
        *out = nullptr;
        if (size == 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: size is 0");
        // 64 bytes: a cache line and an AVX-512 vector; aligned_alloc wants a multiple of it.
        uint64_t capacity = 0;
        void *data = size <= (UINT64_MAX >> 2) ? host_alloc(size, &capacity) : nullptr;
        if (!data)
            return fail(err, TF_STATUS_OUT_OF_MEMORY, "buffer_alloc: cannot allocate %llu bytes of host memory",
                        static_cast<unsigned long long>(size));
        std::unique_ptr<tf_buffer> buffer;
        try {
            buffer.reset(new tf_buffer{data, capacity, size});
        } catch (...) {
            host_free(data, capacity);
            throw;
        }
        *out = buffer.release();
        return TF_STATUS_OK;
    });
}

void cpu_buffer_free(tf_buffer *buffer) { delete buffer; }

// get_proc("buffer_wrap"): host memory the caller owns, seen as a buffer (zero-copy interop).
tf_status cpu_buffer_wrap(int32_t device, void *data, uint64_t size, tf_buffer **out, tf_error *err) {
    return guarded(err, "buffer_wrap", [&]() -> tf_status {
        if (device != 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_wrap: no cpu device %d (there is 1)", device);
        if (!out) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_wrap: out is NULL");
        *out = nullptr;
        if (!data && size > 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_wrap: data is NULL");
        *out = new tf_buffer{data, 0, size, false};
        return TF_STATUS_OK;
    });
}

void *cpu_get_proc(const char *name) {
    if (name && std::strcmp(name, "buffer_wrap") == 0) return reinterpret_cast<void *>(&cpu_buffer_wrap);
    return nullptr;
}

void *cpu_buffer_host_ptr(tf_buffer *buffer) { return buffer ? buffer->data : nullptr; }

// offset + size within the buffer, written so that it cannot overflow.
tf_status check_range(const char *what, const tf_buffer *buffer, uint64_t offset, uint64_t size, tf_error *err) {
    if (!buffer) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: buffer is NULL", what);
    if (offset > buffer->size || size > buffer->size - offset)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %llu bytes at offset %llu do not fit a buffer of %llu bytes",
                    what, static_cast<unsigned long long>(size), static_cast<unsigned long long>(offset),
                    static_cast<unsigned long long>(buffer->size));
    return TF_STATUS_OK;
}

char *bytes_of(tf_buffer *buffer, uint64_t offset) { return static_cast<char *>(buffer->data) + offset; }

tf_status cpu_buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
    if (tf_status s = check_range("buffer_write", buffer, offset, size, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    if (!src) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_write: src is NULL");
    std::memcpy(bytes_of(buffer, offset), src, size);
    return TF_STATUS_OK;
}

tf_status cpu_buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (tf_status s = check_range("buffer_read", buffer, offset, size, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    if (!dst) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_read: dst is NULL");
    std::memcpy(dst, bytes_of(buffer, offset), size);
    return TF_STATUS_OK;
}

tf_status cpu_buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size,
                          tf_error *err) {
    if (tf_status s = check_range("buffer_copy", dst, dst_offset, size, err); s != TF_STATUS_OK) return s;
    if (tf_status s = check_range("buffer_copy", src, src_offset, size, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    // memmove: the ABI does not forbid overlapping ranges of one buffer.
    std::memmove(bytes_of(dst, dst_offset), bytes_of(src, src_offset), size);
    return TF_STATUS_OK;
}

// ---- Ops -------------------------------------------------------------------------------------

int32_t cpu_supports(int32_t device, const tf_op_desc *op) {
    try {
        return validate(device, op, false, nullptr) == TF_STATUS_OK;
    } catch (...) {
        return 0;
    }
}

tf_status cpu_run(int32_t device, const tf_op_desc *op, tf_error *err) {
    return guarded(err, [op] { return op ? op_name(op->op) : "run"; }, [&]() -> tf_status {
        // run() only gets what supports() accepted, but a bad descriptor must never crash.
        if (tf_status s = validate(device, op, true, err); s != TF_STATUS_OK) return s;
        const tf_tensor_desc *in = op->inputs;
        const tf_tensor_desc &out = op->outputs[0];
        switch (op->op) {
        case TF_OP_ADD:
        case TF_OP_SUB:
        case TF_OP_MUL:
        case TF_OP_DIV:
        case TF_OP_POW:
        case TF_OP_MAXIMUM:
        case TF_OP_MINIMUM:
        case TF_OP_RELU_BACKWARD:
            return run_binary(op->op, in[0], in[1], out, err);
        case TF_OP_EQ:
        case TF_OP_NE:
        case TF_OP_LT:
        case TF_OP_LE:
        case TF_OP_GT:
        case TF_OP_GE:
            return run_compare(op->op, in[0], in[1], out, err);
        case TF_OP_WHERE:
            return run_where(in[0], in[1], in[2], out, err);
        case TF_OP_NEG:
        case TF_OP_EXP:
        case TF_OP_RELU:
        case TF_OP_ABS:
        case TF_OP_LOG:
        case TF_OP_SQRT:
        case TF_OP_RSQRT:
        case TF_OP_SIN:
        case TF_OP_COS:
        case TF_OP_TANH:
        case TF_OP_SIGMOID:
        case TF_OP_GELU:
        case TF_OP_GELU_TANH:
        case TF_OP_SILU:
        case TF_OP_SQUARE:
        case TF_OP_ERF:
            return run_unary(op->op, in[0], out, err);
        case TF_OP_CLAMP: {
            const auto *p = static_cast<const tf_params_clamp *>(op->params);
            return run_clamp(in[0], out, p->min, p->max, err);
        }
        case TF_OP_SUM:
            return run_sum(in[0], out, reduce_axes_mask(*op), err);
        case TF_OP_MEAN:
            return run_mean(in[0], out, reduce_axes_mask(*op), err);
        case TF_OP_MAX:
        case TF_OP_MIN:
            return run_extreme(op->op, in[0], out, reduce_axes_mask(*op), err);
        case TF_OP_VAR:
            return run_var(in[0], out, reduce_axes_mask(*op), static_cast<const tf_params_var *>(op->params)->correction,
                           err);
        case TF_OP_ARGMAX:
        case TF_OP_ARGMIN:
            return run_arg(op->op, in[0], out, static_cast<const tf_params_axis *>(op->params)->axis, err);
        case TF_OP_MATMUL:
            return run_matmul(in[0], in[1], out, err);
        case TF_OP_CONTIGUOUS:
            return run_contiguous(in[0], out, err);
        case TF_OP_CAST:
            return run_cast(in[0], out, err);
        case TF_OP_FILL:
            return run_fill(out, static_cast<const tf_params_fill *>(op->params)->value, err);
        default:
            return run_own(*op, err);
        }
    });
}

// Kernels run synchronously inside run().
tf_status cpu_synchronize(int32_t device, tf_error *err) {
    if (device != 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "synchronize: no cpu device %d (there is 1)", device);
    return TF_STATUS_OK;
}

// ---- Features --------------------------------------------------------------------------------

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

void cpu_list_features(tf_feature_fn emit, void *user) {
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

// ---- Plugin table ----------------------------------------------------------------------------

constexpr tf_plugin k_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = "cpu",
    .version = TF_CPU_VERSION,
    .priority = 0,
    .reserved_ = 0,
    .probe = cpu_probe,
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_host_ptr = cpu_buffer_host_ptr,
    .buffer_write = cpu_buffer_write,
    .buffer_read = cpu_buffer_read,
    .buffer_copy = cpu_buffer_copy,
    .supports = cpu_supports,
    .run = cpu_run,
    .synchronize = cpu_synchronize,
    .list_features = cpu_list_features,
    .get_proc = cpu_get_proc,
};

}  // namespace

// ---- Entry point -----------------------------------------------------------------------------

extern "C" TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    // A core of another major version lays out its structs differently: refuse it.
    if (!host || host->struct_size < offsetof(tf_host_api, abi_version) + sizeof host->abi_version ||
        TF_ABI_MAJOR(host->abi_version) != TF_ABI_VERSION_MAJOR)
        return nullptr;
    g_host = host;
    return &k_plugin;
}

static_assert(std::is_same_v<decltype(&tf_plugin_entry), tf_plugin_entry_fn>);
