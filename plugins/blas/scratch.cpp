// Scratch memory of the kernels (im2col columns, packed operands), reused across calls. The
// blocks behind buffers are the plugin kit's host caching allocator, shared with cpu
// (include/tinyfin/plugin_kit/host_buffer.hpp).
#include "blas.hpp"

#include <cstdlib>
#include <new>
#include <stdexcept>

namespace tf_blas {
namespace {

constexpr size_t k_scratch_slots = 3;

// Only under the BLAS lock. Plain arrays of pointers: constant-initialised, freed by
// scratch_release (a global with a destructor would add a static constructor).
void *g_scratch[k_scratch_slots] = {};
size_t g_scratch_floats[k_scratch_slots] = {};

}  // namespace

float *scratch(size_t floats, size_t slot) {
    if (slot >= k_scratch_slots) throw std::logic_error("scratch slot out of range");
    if (floats > g_scratch_floats[slot]) {
        std::free(g_scratch[slot]);
        g_scratch[slot] = nullptr;
        g_scratch_floats[slot] = 0;
        if (floats > SIZE_MAX / sizeof(float) / 2) throw std::bad_alloc();
        // The kit's block rounding and huge-page advice; never cached (released at shutdown).
        void *p = floats ? tf_kit::detail::raw_host_alloc((floats * sizeof(float) + 63) / 64 * 64) : nullptr;
        if (!p) throw std::bad_alloc();
        g_scratch[slot] = p;
        g_scratch_floats[slot] = floats;
    }
    return static_cast<float *>(g_scratch[slot]);
}

void scratch_release() noexcept {
    for (size_t i = 0; i < k_scratch_slots; ++i) {
        std::free(g_scratch[i]);
        g_scratch[i] = nullptr;
        g_scratch_floats[i] = 0;
    }
}

}  // namespace tf_blas
