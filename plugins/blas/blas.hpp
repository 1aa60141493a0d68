// Private to the blas plugin: what plugin.cpp, openblas.cpp, matmul.cpp and conv.cpp share.
// Nothing here crosses the ABI.
#pragma once

#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit.hpp>

// Only for the prototypes (decltype of each entry point we look up): the plugin does not link
// OpenBLAS, it loads it in init (see openblas.cpp).
#include <cblas.h>

#include <cstddef>
#include <cstdint>

namespace tf_blas {

// fail(), log_line(), get_env(), guarded() and the rest of include/tinyfin/plugin_kit.hpp.
using namespace tf_kit;

// ---- OpenBLAS, loaded lazily ----------------------------------------------------------------

// The entry points the plugin calls, resolved by openblas_load(). Valid after a successful init
// until shutdown.
struct OpenBlasApi {
    decltype(&::cblas_sgemm) sgemm;
    decltype(&::openblas_set_num_threads) set_num_threads;
    decltype(&::openblas_get_num_threads) get_num_threads;
    decltype(&::openblas_get_config) get_config;
    decltype(&::openblas_get_corename) get_corename;
};

// dlopens OpenBLAS, resolves OpenBlasApi and sizes its thread pool (TINYFIN_THREADS, else
// OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or OMP_NUM_THREADS as OpenBLAS applies them, else the
// cores this process may run on). Called once, from init.
tf_status openblas_load(tf_error *err);
// dlcloses it; the api is invalid afterwards. Called from shutdown.
void openblas_unload() noexcept;
// The loaded api; only after openblas_load succeeded.
const OpenBlasApi &openblas();
// Where the thread count came from: "TINYFIN_THREADS", one of OpenBLAS's variables, or "cores".
const char *openblas_threads_source() noexcept;
// The file openblas_load opened.
const char *openblas_path() noexcept;

// ---- Ops --------------------------------------------------------------------------------------

// The kernels of plugin.cpp's rows and their accepts: each *_supported decides from the
// descriptor alone (beyond the kit's op rule), each *_run runs what it accepted; plugin.cpp's rows
// hold the plugin's BLAS lock around a run: OpenBLAS's pthread server and the scratch arena are
// shared.
bool matmul_supported(const tf_op_desc &op) noexcept;
tf_status matmul_run(const tf_op_desc &op, tf_error *err);
// matmul_bias: matmul's sgemm where matmul_supported takes the product, then the bias added as
// cpu's add would (the bits of blas's matmul followed by add); cpu's row takes the rest.
bool matmul_bias_supported(const tf_op_desc &op) noexcept;
tf_status matmul_bias_run(const tf_op_desc &op, tf_error *err);

bool conv2d_supported(const tf_op_desc &op) noexcept;
// conv2d and conv2d_grad_input (one product with the weight), conv2d_grad_weight.
tf_status conv2d_weight_times_run(const tf_op_desc &op, tf_error *err);
tf_status conv2d_grad_weight_run(const tf_op_desc &op, tf_error *err);

// ---- Scratch memory (scratch.cpp) --------------------------------------------------------------

// Per-call scratch memory reused across calls (im2col columns, packed operands): slot 0, 1 or 2;
// grows on demand, freed by scratch_release (shutdown). Only under the BLAS lock. Throws
// std::bad_alloc.
float *scratch(size_t floats, size_t slot);
void scratch_release() noexcept;

// ---- Descriptor helpers -------------------------------------------------------------------------

// A tensor the kit's check_tensor accepts, f32 and of the given rank.
inline bool is_plain_f32(const tf_tensor_desc &t, int rank) noexcept {
    return check_tensor("", "", 0, t, false, nullptr) == TF_STATUS_OK && t.dtype == TF_DTYPE_F32 && t.rank == rank;
}

// Host address of element [0, ...] of a host tensor.
inline float *f32_data(const tf_tensor_desc &t) {
    return reinterpret_cast<float *>(static_cast<char *>(t.data) + t.offset);
}

}  // namespace tf_blas
