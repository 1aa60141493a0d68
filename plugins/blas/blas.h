// Private to the blas plugin: what plugin.cpp, openblas.cpp, matmul.cpp and conv.cpp share.
// Nothing here crosses the ABI.
#ifndef TINYFIN_BLAS_BLAS_H
#define TINYFIN_BLAS_BLAS_H

#include <tinyfin/plugin.h>

// Only for the prototypes (decltype of each entry point we look up): the plugin does not link
// OpenBLAS, it loads it in init (see openblas.cpp).
#include <cblas.h>

#include <cstddef>
#include <cstdint>

namespace tf_blas {

// ---- Errors -----------------------------------------------------------------------------------

// Writes a printf-style message into err (when err has room for one) and returns status.
tf_status fail(tf_error *err, tf_status status, const char *fmt, ...) noexcept __attribute__((format(printf, 3, 4)));

// Logs one line through the core's host table (no-op before the entry point ran).
void log_line(int32_t level, const char *fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

// The core's environment lookup (secure_getenv); NULL when unset or before the entry point ran.
const char *get_env(const char *name) noexcept;

// ---- OpenBLAS, loaded lazily ----------------------------------------------------------------

// The entry points the plugin calls, resolved by openblas_load(). Valid after a successful init
// until shutdown.
struct openblas_api {
    decltype(&::cblas_sgemm) sgemm;
    decltype(&::openblas_set_num_threads) set_num_threads;
    decltype(&::openblas_get_num_threads) get_num_threads;
    decltype(&::openblas_get_config) get_config;
    decltype(&::openblas_get_corename) get_corename;
};

// dlopens OpenBLAS, resolves openblas_api and sizes its thread pool (TINYFIN_THREADS, else
// OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or OMP_NUM_THREADS as OpenBLAS applies them, else the
// cores this process may run on). Called once, from init.
tf_status openblas_load(tf_error *err);
// dlcloses it; the api is invalid afterwards. Called from shutdown.
void openblas_unload() noexcept;
// The loaded api; only after openblas_load succeeded.
const openblas_api &openblas();
// Where the thread count came from: "TINYFIN_THREADS", one of OpenBLAS's variables, or "cores".
const char *openblas_threads_source() noexcept;
// The file openblas_load opened.
const char *openblas_path() noexcept;

// ---- Ops --------------------------------------------------------------------------------------

// Each pair decides from the descriptor alone (supports) and runs what it accepted (run). run
// holds the plugin's BLAS lock: OpenBLAS's pthread server and the scratch arena are shared.
bool matmul_supported(const tf_op_desc &op) noexcept;
tf_status matmul_run(const tf_op_desc &op, tf_error *err);

bool conv2d_supported(const tf_op_desc &op) noexcept;
tf_status conv2d_run(const tf_op_desc &op, tf_error *err);

// ---- Host memory (memory.cpp) ------------------------------------------------------------------

// Creates and frees the allocator's state (block cache, scratch arena); from init and shutdown.
void memory_init();
void memory_release() noexcept;

// Host memory for a buffer of size bytes: 64-byte aligned, 2 MiB aligned and advised as huge pages
// from 2 MiB on. *capacity receives the size really allocated, which host_free needs back. NULL
// when memory is exhausted. Blocks from 2 MiB on are reused from a bounded cache of freed ones.
void *host_alloc(uint64_t size, uint64_t *capacity);
void host_free(void *p, uint64_t capacity) noexcept;

// Per-call scratch memory reused across calls (im2col columns, packed operands): slot 0, 1 or 2;
// grows on demand, freed by memory_release. Only under the BLAS lock. Throws std::bad_alloc.
float *scratch(size_t floats, size_t slot);

// ---- Descriptor helpers -------------------------------------------------------------------------

// Element count, false on overflow or a negative size.
bool count_elements(const tf_tensor_desc &t, int64_t *count) noexcept;

// Plain tensor checks shared by every op: f32, the given rank, sizes and strides >= 0, the byte
// extent addressable.
bool is_plain_f32(const tf_tensor_desc &t, int rank) noexcept;

// Host address of element [0, ...] of a host tensor.
inline float *f32_data(const tf_tensor_desc &t) {
    return reinterpret_cast<float *>(static_cast<char *>(t.data) + t.offset);
}

}  // namespace tf_blas

#endif  // TINYFIN_BLAS_BLAS_H
