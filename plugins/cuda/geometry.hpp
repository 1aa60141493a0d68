// How kernels walk tensors: a shape and each operand's element strides, passed to a kernel by
// value, and the index arithmetic both sides share. Included by the host code (g++) and the
// kernels (nvcc); the index functions are __host__ __device__ so the host test
// (tests/cuda/test_cuda_geometry.cpp) checks exactly what the kernels run.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define TF_CUDA_HD __host__ __device__ __forceinline__
#else
#define TF_CUDA_HD inline
#endif

namespace tf_cuda {

constexpr int max_rank = 8;

// N operands over one shape, in elements. make_strided drops size-1 axes and merges axes that
// are contiguous in every operand, so a dense tensor is rank 1 and costs no divisions. rank is
// at least 1 (a scalar is shape {1}); count is the number of elements, 0 for an empty shape.
template <int N>
struct Strided {
    int32_t rank;
    int64_t count;
    int64_t shape[max_rank];
    int64_t strides[N][max_rank];
};

// Element offsets, in each operand, of the element with row-major linear index i.
template <int N>
TF_CUDA_HD void offsets_of(const Strided<N> &g, int64_t i, int64_t (&off)[N]) {
    for (int k = 0; k < N; ++k) off[k] = 0;
    auto rest = static_cast<uint64_t>(i);
    for (int d = g.rank - 1; d > 0; --d) {
        const auto size = static_cast<uint64_t>(g.shape[d]);
        const uint64_t q = rest / size;
        const auto idx = static_cast<int64_t>(rest - q * size);
        rest = q;
        for (int k = 0; k < N; ++k) off[k] += idx * g.strides[k][d];
    }
    for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(rest) * g.strides[k][0];
}

// Rows and columns: the axes of a row (reduced, normalised, ...) and the axes that pick the row,
// each collapsed on its own. Operand k's element (row r, column c) is at
// offsets_of(rows, r)[k] + offsets_of(cols, c)[k]; an operand constant along a part has
// strides 0 there.
template <int N>
struct RowGeom {
    Strided<N> rows;
    Strided<N> cols;
};

// ---- Host-side construction -------------------------------------------------------------------

// strides[k] points at operand k's rank strides. Strides of size-1 axes are never read.
template <int N>
inline Strided<N> make_strided(int rank, const int64_t *shape, const int64_t *const *strides) {
    Strided<N> g{};
    g.count = 1;
    int r = 0;
    for (int d = 0; d < rank; ++d) {
        g.count *= shape[d];
        if (shape[d] == 1) continue;
        if (r > 0) {
            bool merge = true;
            for (int k = 0; k < N; ++k) merge = merge && g.strides[k][r - 1] == strides[k][d] * shape[d];
            if (merge) {
                g.shape[r - 1] *= shape[d];
                for (int k = 0; k < N; ++k) g.strides[k][r - 1] = strides[k][d];
                continue;
            }
        }
        g.shape[r] = shape[d];
        for (int k = 0; k < N; ++k) g.strides[k][r] = strides[k][d];
        ++r;
    }
    if (r == 0) {
        g.shape[0] = 1;
        for (int k = 0; k < N; ++k) g.strides[k][0] = 0;
        r = 1;
    }
    g.rank = r;
    return g;
}

// Splits the axes of shape by col_mask (bit i set: axis i is a column axis) and collapses each
// part. strides[k] as for make_strided.
template <int N>
inline RowGeom<N> make_rows(int rank, const int64_t *shape, const int64_t *const *strides, uint32_t col_mask) {
    int64_t row_shape[max_rank], col_shape[max_rank];
    int64_t row_strides[N][max_rank], col_strides[N][max_rank];
    int nr = 0, nc = 0;
    for (int d = 0; d < rank; ++d) {
        const bool col = (col_mask >> d) & 1;
        int64_t *dst_shape = col ? col_shape : row_shape;
        int &n = col ? nc : nr;
        dst_shape[n] = shape[d];
        for (int k = 0; k < N; ++k) (col ? col_strides : row_strides)[k][n] = strides[k][d];
        ++n;
    }
    const int64_t *rs[N], *cs[N];
    for (int k = 0; k < N; ++k) {
        rs[k] = row_strides[k];
        cs[k] = col_strides[k];
    }
    return RowGeom<N>{make_strided<N>(nr, row_shape, rs), make_strided<N>(nc, col_shape, cs)};
}

}  // namespace tf_cuda
