// attention's and attention_backward's batch-element blocks of q, k, v, the mask and the outputs
// as f32 matrices: read and written in place when f32, else staged through dense f32 scratch
// (load_matrix, store_matrix). Private to the cpu plugin's attention kernels.
#pragma once

#include "kernels_gemm.hpp"
#include "kernels_nn.hpp"

#include <algorithm>
#include <vector>

namespace tf_cpu {

// C = A B for any sizes: zeros when the inner size k is 0, nothing when C has no elements.
inline void product(int64_t m, int64_t n, int64_t k, F32Matrix a, F32Matrix b, float *c, int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
        for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
        return;
    }
    gemm_f32(m, n, k, a, b, c, ldc, false);
}

// Batch element `offset` (bytes) of an input as an f32 matrix: in place for f32, else loaded
// into `scratch` as a dense block.
inline F32Matrix input_matrix(const tf_tensor_desc &d, int64_t offset, int64_t rows, int64_t cols,
                              std::vector<float> &scratch) {
    if (rows == 0 || cols == 0) return {nullptr, cols, 1};
    if (d.dtype == TF_DTYPE_F32) {
        const View v = view_of(d);
        const auto *base = reinterpret_cast<const float *>(v.base + offset);
        const auto size = static_cast<int64_t>(sizeof(float));
        return {base, v.strides[d.rank - 2] / size, v.strides[d.rank - 1] / size};
    }
    scratch.resize(static_cast<size_t>(rows) * static_cast<size_t>(cols));
    load_matrix(d, offset, rows, cols, scratch.data());
    return {scratch.data(), cols, 1};
}

// Batch element `offset` of an output: written in place when f32 with rows of unit stride, else
// into `scratch` and stored by finish().
class OutputBlock {
public:
    OutputBlock(const tf_tensor_desc &d, int64_t offset, int64_t rows, int64_t cols, std::vector<float> &scratch)
        : desc_(d), offset_(offset), rows_(rows), cols_(cols) {
        if (rows == 0 || cols == 0) return;  // nothing to write
        const View v = view_of(d);
        const auto size = static_cast<int64_t>(sizeof(float));
        if (d.dtype == TF_DTYPE_F32 && (cols <= 1 || v.strides[d.rank - 1] == size)) {
            data_ = reinterpret_cast<float *>(v.base + offset);
            ld_ = rows > 1 ? v.strides[d.rank - 2] / size : cols;
            return;
        }
        scratch.resize(static_cast<size_t>(rows) * static_cast<size_t>(cols));
        data_ = scratch.data();
        ld_ = cols;
        staged_ = true;
    }
    float *data() const { return data_; }
    int64_t ld() const { return ld_; }
    void finish() const {
        if (staged_) store_matrix(desc_, offset_, rows_, cols_, data_);
    }

private:
    const tf_tensor_desc &desc_;
    int64_t offset_, rows_, cols_;
    float *data_ = nullptr;
    int64_t ld_ = 0;
    bool staged_ = false;
};

}  // namespace tf_cpu
