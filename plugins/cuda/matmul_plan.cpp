// The layout arithmetic of matmul (matmul_plan.hpp). A matrix with a unit stride on either axis is a
// BLAS matrix: row-major reads as its transpose in column-major terms. The inner batch axes of a,
// b and out collapse to one batch index with a constant stride per operand (0 for a broadcast
// one); the rest are looped over.
#include "matmul_plan.hpp"

#include <algorithm>
#include <climits>

namespace tf_cuda {
namespace {

struct MatrixLayout {
    bool row_major;
    int64_t ld;  // elements between rows (row-major) or columns (column-major)
};

// How BLAS reads a rows x cols matrix with these element strides, if it can. A single row or
// column takes whichever layout fits, with the smallest valid ld.
bool layout_of(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, MatrixLayout *layout) {
    const int64_t min_cols = std::max<int64_t>(cols, 1), min_rows = std::max<int64_t>(rows, 1);
    if (col_stride == 1 || cols == 1) {
        const int64_t ld = rows == 1 ? min_cols : row_stride;
        if (ld >= min_cols && ld <= INT_MAX) {
            *layout = {true, ld};
            return true;
        }
    }
    if (row_stride == 1 || rows == 1) {
        const int64_t ld = cols == 1 ? min_rows : col_stride;
        if (ld >= min_rows && ld <= INT_MAX) {
            *layout = {false, ld};
            return true;
        }
    }
    return false;
}

// The batch axes of a, b and out, innermost first, collapse into one batch index with a constant
// stride per operand for as long as the strides allow; the axes beyond go to the outer loop.
bool split_batch(const tf_op_desc &op, GemmCall *call, int64_t *count, int64_t (&stride)[3]) {
    const tf_tensor_desc *t[3] = {&op.inputs[0], &op.inputs[1], &op.outputs[0]};
    const tf_tensor_desc &out = op.outputs[0];
    int64_t n = 1;
    bool first = true, collapsing = true;
    stride[0] = stride[1] = stride[2] = 0;
    call->outer_rank = 0;
    call->outer_count = 1;
    for (int d = out.rank - 3; d >= 0; --d) {
        const int64_t size = out.shape[d];
        if (size == 1) continue;
        // Batches of the output must not share memory.
        if (t[2]->strides[d] == 0) return false;
        if (collapsing && !first)
            for (int k = 0; k < 3; ++k) collapsing = collapsing && t[k]->strides[d] == stride[k] * n;
        if (collapsing) {
            if (first)
                for (int k = 0; k < 3; ++k) stride[k] = t[k]->strides[d];
            first = false;
            n *= size;
            if (n > INT_MAX) return false;
            continue;
        }
        // Outer axes are kept innermost first; outer_offsets() walks them in that order.
        const int o = call->outer_rank++;
        call->outer_shape[o] = size;
        for (int k = 0; k < 3; ++k) call->outer_strides[k][o] = t[k]->strides[d];
        call->outer_count *= size;
    }
    *count = n;
    return true;
}

}  // namespace

void outer_offsets(const GemmCall &call, long long index, long long (&offsets)[3]) {
    offsets[0] = offsets[1] = offsets[2] = 0;
    for (int o = 0; o < call.outer_rank; ++o) {
        const long long i = index % call.outer_shape[o];
        index /= call.outer_shape[o];
        for (int k = 0; k < 3; ++k) offsets[k] += i * call.outer_strides[k][o];
    }
}

bool plan_gemm(const tf_op_desc &op, GemmCall *call) {
    const tf_tensor_desc &a = op.inputs[0], &b = op.inputs[1], &out = op.outputs[0];
    const int r = out.rank;
    const int64_t m = out.shape[r - 2], n = out.shape[r - 1], k = a.shape[r - 1];
    if (m <= 0 || n <= 0 || k <= 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX) return false;
    int64_t batch = 0, stride[3];
    if (!split_batch(op, call, &batch, stride) || batch == 0) return false;
    MatrixLayout la, lb, lo;
    if (!layout_of(m, k, a.strides[r - 2], a.strides[r - 1], &la) ||
        !layout_of(k, n, b.strides[r - 2], b.strides[r - 1], &lb) ||
        !layout_of(m, n, out.strides[r - 2], out.strides[r - 1], &lo))
        return false;
    // out row-major: out^T (n x m, column-major) = b^T a^T, so A is b and B is a. A matrix whose
    // layout matches the output's reads as what the product needs (op N), the other as its
    // transpose (op T).
    const bool swapped = lo.row_major;
    const MatrixLayout &first = swapped ? lb : la, &second = swapped ? la : lb;
    call->swapped = swapped;
    call->trans_a = first.row_major != lo.row_major;
    call->trans_b = second.row_major != lo.row_major;
    call->m = static_cast<int>(swapped ? n : m);
    call->n = static_cast<int>(swapped ? m : n);
    call->k = static_cast<int>(k);
    call->lda = static_cast<int>(first.ld);
    call->ldb = static_cast<int>(second.ld);
    call->ldc = static_cast<int>(lo.ld);
    call->stride_a = swapped ? stride[1] : stride[0];
    call->stride_b = swapped ? stride[0] : stride[1];
    call->stride_c = stride[2];
    call->batch = static_cast<int>(batch);
    return true;
}

}  // namespace tf_cuda
