// The blas plugin: OpenBLAS on host memory. One cpu device whose buffers are plain 64-byte
// aligned host memory, like cpu's, so tensors move between blas and cpu without copies and
// every op blas does not claim runs on cpu in place. It claims only f32 matmul and conv2d
// (forward and both gradients) where sgemm beats the cpu plugin.
//
// In order: context, shared helpers, backend, device, buffers, ops, features, the plugin table
// and the entry point. OpenBLAS itself is loaded in init (openblas.cpp); host memory and the
// scratch arena are in memory.cpp.
#include "blas.h"

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

// The core's table, set once by the entry point before any other call; constant-initialised
// (no static constructor runs at dlopen).
const tf_host_api *g_host = nullptr;

// Serialises run(): OpenBLAS's pthread server is one pool for the process, and the scratch arena
// is shared. std::mutex is constant-initialised and trivially destructible.
std::mutex g_lock;

}  // namespace

// The ABI's opaque buffer: one host block from memory.cpp, owned here (not copyable).
struct tf_buffer {
    tf_buffer(void *block, uint64_t bytes, uint64_t capacity) : data(block), size(bytes), capacity_(capacity) {}
    ~tf_buffer() { tf_blas::host_free(data, capacity_); }
    tf_buffer(const tf_buffer &) = delete;
    tf_buffer &operator=(const tf_buffer &) = delete;

    void *const data;
    // Bytes the core asked for; read, write and copy stay inside them.
    const uint64_t size;

private:
    const uint64_t capacity_;
};

// ---- Shared helpers (declared in blas.h) ----------------------------------------------------

namespace tf_blas {

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

void log_line(int32_t level, const char *fmt, ...) noexcept {
    const tf_host_api *host = g_host;
    if (!host || host->struct_size < offsetof(tf_host_api, log) + sizeof host->log || !host->log) return;
    char message[TF_TEXT_SIZE];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    host->log(level, "blas", message);
}

const char *get_env(const char *name) noexcept {
    const tf_host_api *host = g_host;
    if (!host || host->struct_size < offsetof(tf_host_api, get_env) + sizeof host->get_env || !host->get_env)
        return nullptr;
    return host->get_env(name);
}

bool count_elements(const tf_tensor_desc &t, int64_t *count) noexcept {
    int64_t n = 1;
    for (int i = 0; i < t.rank; ++i)
        if (t.shape[i] < 0 || __builtin_mul_overflow(n, t.shape[i], &n)) return false;
    *count = n;
    return true;
}

bool is_plain_f32(const tf_tensor_desc &t, int rank) noexcept {
    if (t.struct_size < sizeof(tf_tensor_desc) || t.dtype != TF_DTYPE_F32 || t.rank != rank || rank > TF_MAX_RANK)
        return false;
    // The byte offset of the last element must be addressable (walks use int64_t).
    uint64_t last = t.offset;
    int64_t count = 0;
    if (!count_elements(t, &count)) return false;
    for (int i = 0; i < rank; ++i) {
        if (t.strides[i] < 0) return false;
        if (t.shape[i] == 0) continue;
        uint64_t reach = 0;
        if (__builtin_mul_overflow(static_cast<uint64_t>(t.shape[i] - 1), static_cast<uint64_t>(t.strides[i]), &reach) ||
            __builtin_mul_overflow(reach, sizeof(float), &reach) || __builtin_add_overflow(last, reach, &last))
            return false;
    }
    return last <= static_cast<uint64_t>(INT64_MAX);
}

}  // namespace tf_blas

using namespace tf_blas;

namespace {

// Runs f at the ABI boundary: no exception ever crosses into the core.
template <class F>
tf_status guarded(tf_error *err, const char *what, F &&f) noexcept {
    try {
        return f();
    } catch (const std::bad_alloc &) {
        return fail(err, TF_STATUS_OUT_OF_MEMORY, "%s: out of host memory", what);
    } catch (const std::exception &e) {
        return fail(err, TF_STATUS_INTERNAL, "%s: %s", what, e.what());
    } catch (...) {
        return fail(err, TF_STATUS_INTERNAL, "%s: unknown exception", what);
    }
}

// ---- Backend ---------------------------------------------------------------------------------

// Nothing to check cheaply: whether OpenBLAS loads is init's answer.
tf_status blas_probe(tf_error *) { return TF_STATUS_OK; }

tf_status blas_init(tf_error *err) {
    return guarded(err, "init", [&]() -> tf_status {
        memory_init();
        if (tf_status s = openblas_load(err); s != TF_STATUS_OK) {
            memory_release();
            return s;
        }
        log_line(TF_LOG_DEBUG, "%s, core %s, %d threads (%s)", openblas_path(), openblas().get_corename(),
                 openblas().get_num_threads(), openblas_threads_source());
        return TF_STATUS_OK;
    });
}

// Buffers still allocated belong to tensors the core no longer frees (see R14): they are plain
// host memory that process exit returns. Cached blocks and scratch memory are freed here.
void blas_shutdown(void) {
    std::lock_guard<std::mutex> lock(g_lock);
    memory_release();
    openblas_unload();
}

// ---- Device ----------------------------------------------------------------------------------

int32_t blas_device_count(void) { return 1; }

uint64_t pages_to_bytes(long pages) {
    const long page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

tf_status blas_device_info(int32_t device, tf_device_info *info, tf_error *err) {
    if (device != 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: no blas device %d (there is 1)", device);
    if (!info) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info is NULL");
    tf_device_info full{};
    full.kind = TF_DEVICE_KIND_CPU;
    full.memory_total = pages_to_bytes(sysconf(_SC_PHYS_PAGES));
    full.memory_free = pages_to_bytes(sysconf(_SC_AVPHYS_PAGES));
    full.host_addressable = 1;
    std::snprintf(full.name, sizeof full.name, "OpenBLAS %s, %d threads", openblas().get_corename(),
                  openblas().get_num_threads());
    // A caller built against an older, shorter struct gets the members it knows.
    const size_t n = std::min<size_t>(info->struct_size, sizeof full);
    full.struct_size = static_cast<uint32_t>(n);
    std::memcpy(info, &full, n);
    return TF_STATUS_OK;
}

// ---- Buffers ---------------------------------------------------------------------------------

tf_status blas_buffer_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err) {
    return guarded(err, "buffer_alloc", [&]() -> tf_status {
        if (device != 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: no blas device %d (there is 1)", device);
        if (!out) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: out is NULL");
        *out = nullptr;
        if (size == 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: size is 0");
        uint64_t capacity = 0;
        void *data = host_alloc(size, &capacity);
        if (!data)
            return fail(err, TF_STATUS_OUT_OF_MEMORY, "buffer_alloc: cannot allocate %llu bytes of host memory",
                        static_cast<unsigned long long>(size));
        try {
            *out = new tf_buffer(data, size, capacity);
        } catch (...) {
            host_free(data, capacity);
            throw;
        }
        return TF_STATUS_OK;
    });
}

void blas_buffer_free(tf_buffer *buffer) { delete buffer; }

void *blas_buffer_host_ptr(tf_buffer *buffer) { return buffer ? buffer->data : nullptr; }

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

tf_status blas_buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
    if (tf_status s = check_range("buffer_write", buffer, offset, size, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    if (!src) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_write: src is NULL");
    std::memcpy(bytes_of(buffer, offset), src, size);
    return TF_STATUS_OK;
}

tf_status blas_buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (tf_status s = check_range("buffer_read", buffer, offset, size, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    if (!dst) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_read: dst is NULL");
    std::memcpy(dst, bytes_of(buffer, offset), size);
    return TF_STATUS_OK;
}

tf_status blas_buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size,
                           tf_error *err) {
    if (tf_status s = check_range("buffer_copy", dst, dst_offset, size, err); s != TF_STATUS_OK) return s;
    if (tf_status s = check_range("buffer_copy", src, src_offset, size, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    // memmove: the ABI does not forbid overlapping ranges of one buffer.
    std::memmove(bytes_of(dst, dst_offset), bytes_of(src, src_offset), size);
    return TF_STATUS_OK;
}

// ---- Ops -------------------------------------------------------------------------------------

int32_t blas_supports(int32_t device, const tf_op_desc *op) {
    if (device != 0 || !op || op->struct_size < sizeof(tf_op_desc)) return 0;
    switch (op->op) {
    case TF_OP_MATMUL:
        return matmul_supported(*op);
    case TF_OP_CONV2D:
    case TF_OP_CONV2D_GRAD_INPUT:
    case TF_OP_CONV2D_GRAD_WEIGHT:
        return conv2d_supported(*op);
    default:
        return 0;
    }
}

tf_status blas_run(int32_t device, const tf_op_desc *op, tf_error *err) {
    return guarded(err, "run", [&]() -> tf_status {
        if (device != 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "run: no blas device %d (there is 1)", device);
        if (!op || op->struct_size < sizeof(tf_op_desc))
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "run: op descriptor missing or smaller than %zu bytes", sizeof(tf_op_desc));
        std::lock_guard<std::mutex> lock(g_lock);
        switch (op->op) {
        case TF_OP_MATMUL:
            return matmul_run(*op, err);
        case TF_OP_CONV2D:
        case TF_OP_CONV2D_GRAD_INPUT:
        case TF_OP_CONV2D_GRAD_WEIGHT:
            return conv2d_run(*op, err);
        default:
            return fail(err, TF_STATUS_UNSUPPORTED, "run: blas has no kernel for op %u", op->op);
        }
    });
}

// sgemm returns when its result is written: nothing is ever pending.
tf_status blas_synchronize(int32_t device, tf_error *err) {
    if (device != 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "synchronize: no blas device %d (there is 1)", device);
    return TF_STATUS_OK;
}

// ---- Features --------------------------------------------------------------------------------

void blas_list_features(tf_feature_fn emit, void *user) {
    if (!emit) return;
    char threads[16];
    std::snprintf(threads, sizeof threads, "%d", openblas().get_num_threads());
    emit(user, "openblas.core", openblas().get_corename());
    emit(user, "openblas.threads", threads);
    emit(user, "openblas.threads.source", openblas_threads_source());
    emit(user, "openblas.config", openblas().get_config());
    emit(user, "openblas.library", openblas_path());
}

// ---- Plugin table ----------------------------------------------------------------------------

constexpr tf_plugin k_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = "blas",
    .version = TF_BLAS_VERSION,
    // 0: not picked by TINYFIN_BACKEND=auto. On the machines measured (docs/performance.md) cpu
    // matches OpenBLAS's sgemm and beats this plugin's conv, and OpenBLAS's spinning threads
    // slow cpu's pool down when both run ops of one program.
    .priority = 0,
    .reserved_ = 0,
    .probe = blas_probe,
    .init = blas_init,
    .shutdown = blas_shutdown,
    .device_count = blas_device_count,
    .device_info = blas_device_info,
    .buffer_alloc = blas_buffer_alloc,
    .buffer_free = blas_buffer_free,
    .buffer_host_ptr = blas_buffer_host_ptr,
    .buffer_write = blas_buffer_write,
    .buffer_read = blas_buffer_read,
    .buffer_copy = blas_buffer_copy,
    .supports = blas_supports,
    .run = blas_run,
    .synchronize = blas_synchronize,
    .list_features = blas_list_features,
    .get_proc = nullptr,  // no extensions
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
