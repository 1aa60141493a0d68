// Device-side helpers shared by the kernel files: dtype dispatch, launch shapes, block reductions
// and the data-error report. Storage types and per-element math are in element.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <tinyfin/plugin_kit/dtypes.hpp>

#include <cstdint>
#include <type_traits>

#include "element.hpp"
#include "kernels.hpp"

namespace tf_cuda {

// Threads per block of the elementwise kernels and the ceiling of the row kernels.
constexpr int block_size = 256;
// Grid-stride loops: more blocks than this only add scheduling work.
constexpr int64_t max_blocks = int64_t{1} << 20;

inline unsigned blocks_for(int64_t n, int threads = block_size) {
    const int64_t b = (n + threads - 1) / threads;
    return static_cast<unsigned>(b < max_blocks ? (b > 0 ? b : 1) : max_blocks);
}

inline unsigned row_blocks(int64_t rows) {
    return static_cast<unsigned>(rows < max_blocks ? (rows > 0 ? rows : 1) : max_blocks);
}

// Threads for one block per row: a power of two from 32 to block_size, near the row length.
inline int row_threads(int64_t cols) {
    int t = 32;
    while (t < block_size && t < cols) t *= 2;
    return t;
}

__device__ __forceinline__ int64_t global_index() {
    return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t global_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ---- dtypes -------------------------------------------------------------------------------------

// The dtype switch over cuda's storage types (tinyfin/plugin_kit/dtypes.hpp): Dtypes::with_float,
// with_index, with_numeric, with_any and with_bits (raw copies: contiguous, where, fill move bits).
using Dtypes = tf_kit::DtypeSwitch<__half, __nv_bfloat16, Boolean>;

// The status a launcher returns for a dtype its caller should never have sent.
inline cudaError_t bad_dtype() { return cudaErrorInvalidValue; }

// ---- block reductions ----------------------------------------------------------------------------

struct Add {
    template <class V>
    __device__ V operator()(V a, V b) const {
        return a + b;
    }
};
struct Max {
    template <class V>
    __device__ V operator()(V a, V b) const {
        return maximum_of(a, b);
    }
};
struct Min {
    template <class V>
    __device__ V operator()(V a, V b) const {
        return minimum_of(a, b);
    }
};

// A value and where it was found: the argmax / argmin reduction's element.
template <class C>
struct Located {
    C value;
    int64_t index;
};

template <class T>
__device__ __forceinline__ T shfl_down(T v, int offset) {
    return __shfl_down_sync(0xffffffffu, v, offset);
}
template <class C>
__device__ __forceinline__ Located<C> shfl_down(Located<C> v, int offset) {
    return {__shfl_down_sync(0xffffffffu, v.value, offset), __shfl_down_sync(0xffffffffu, v.index, offset)};
}

// Combines v over the block (blockDim.x a multiple of 32, at most 1024) with op; every thread gets
// the result. shared holds 32 values. Callers reach it with the whole block.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T *shared) {
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (int offset = 16; offset > 0; offset >>= 1) v = op(v, shfl_down(v, offset));
    __syncthreads();  // shared may still be read from the previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    const unsigned warps = (blockDim.x + 31u) >> 5;
    if (warp == 0) {
        v = shared[lane < warps ? lane : 0];
        for (int offset = 16; offset > 0; offset >>= 1) {
            const T other = shfl_down(v, offset);
            if (lane + offset < warps) v = op(v, other);
        }
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    return shared[0];
}

// ---- data errors ----------------------------------------------------------------------------------

// Records the first bad index of the whole stream's life until the host clears it.
__device__ __forceinline__ void report_index_error(DataError *error, uint32_t op, int64_t value, int64_t bound) {
    if (atomicCAS(&error->code, 0, 1) != 0) return;
    error->op = op;
    error->value = value;
    error->bound = bound;
    __threadfence_system();
}

}  // namespace tf_cuda
