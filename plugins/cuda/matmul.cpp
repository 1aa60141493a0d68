// matmul through cublasSgemmStridedBatched (f32) and cublasGemmStridedBatchedEx (f16, bf16 with
// f32 accumulation). Transposed operands are never copied: a matrix with a unit stride on either
// axis is a BLAS matrix (row-major: transposed in column-major terms), and the batch axes of a, b
// and out must collapse to one batch index with a constant stride each (0 for a broadcast
// operand). Anything else is not supported and runs on cpu.
//
// cuBLAS is column-major. With out row-major the plugin computes out^T = b^T a^T; with out
// column-major, out = a b; each operand then reads with op N or T as its own layout says.
#include <algorithm>
#include <climits>

#include "context.h"

namespace tf_cuda {
namespace {

struct MatrixLayout {
    bool row_major;
    int64_t ld;  // elements between rows (row-major) or columns (column-major)
};

// How BLAS reads a rows x cols matrix with these element strides, if it can.
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

struct Plan {
    int64_t m, n, k;  // of the output matrix: [m, k] x [k, n]
    int64_t batch;
    int64_t batch_stride[3];  // a, b, out
    MatrixLayout layout[3];   // a, b, out
};

// Collapses the batch axes of a, b and out into one index with a constant stride per operand.
bool flatten_batch(const tf_op_desc &op, Plan *plan) {
    const tf_tensor_desc *t[3] = {&op.inputs[0], &op.inputs[1], &op.outputs[0]};
    const tf_tensor_desc &out = op.outputs[0];
    int64_t count = 1;
    bool first = true;
    plan->batch_stride[0] = plan->batch_stride[1] = plan->batch_stride[2] = 0;
    for (int d = out.rank - 3; d >= 0; --d) {
        const int64_t size = out.shape[d];
        if (size == 1) continue;
        for (int k = 0; k < 3; ++k) {
            if (first) plan->batch_stride[k] = t[k]->strides[d];
            else if (t[k]->strides[d] != plan->batch_stride[k] * count) return false;
        }
        first = false;
        count *= size;
    }
    plan->batch = count;
    // Batches of the output must not share memory.
    return count <= INT_MAX && (count == 1 || plan->batch_stride[2] != 0);
}

bool make_plan(const tf_op_desc &op, Plan *plan) {
    const tf_tensor_desc &a = op.inputs[0], &b = op.inputs[1], &out = op.outputs[0];
    const int r = out.rank;
    plan->m = out.shape[r - 2];
    plan->n = out.shape[r - 1];
    plan->k = a.shape[r - 1];
    if (plan->m > INT_MAX || plan->n > INT_MAX || plan->k > INT_MAX) return false;
    if (!flatten_batch(op, plan)) return false;
    return layout_of(plan->m, plan->k, a.strides[r - 2], a.strides[r - 1], &plan->layout[0]) &&
           layout_of(plan->k, plan->n, b.strides[r - 2], b.strides[r - 1], &plan->layout[1]) &&
           layout_of(plan->m, plan->n, out.strides[r - 2], out.strides[r - 1], &plan->layout[2]);
}

cudaDataType_t cuda_type(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F16: return CUDA_R_16F;
    case TF_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

}  // namespace

bool matmul_supported(const Device &, const tf_op_desc &op) {
    // Nothing to compute, or only zeros to write (k == 0): always possible.
    if (numel(op.outputs[0]) == 0 || op.inputs[0].shape[op.inputs[0].rank - 1] == 0) return true;
    Plan plan;
    return make_plan(op, &plan);
}

tf_status matmul_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &a = op.inputs[0], &b = op.inputs[1], &out = op.outputs[0];
    if (numel(out) == 0) return TF_STATUS_OK;
    if (a.shape[a.rank - 1] == 0) return zero_fill(device, out, err);
    Plan plan;
    if (!make_plan(op, &plan)) return fail(err, TF_STATUS_UNSUPPORTED, "matmul: layout not supported by cuBLAS");

    // Column-major operands (A_c, B_c) of C = op(A_c) op(B_c).
    const bool out_rows = plan.layout[2].row_major;
    const int first = out_rows ? 1 : 0, second = out_rows ? 0 : 1;  // which of a, b is A_c, B_c
    const tf_tensor_desc *operand[2] = {&a, &b};
    // A_c = b with out row-major: b row-major reads as b^T (N); col-major needs T. Mirrored for
    // out column-major, where A_c = a: a column-major is N.
    auto op_for = [&](int which) {
        return plan.layout[which].row_major == out_rows ? CUBLAS_OP_N : CUBLAS_OP_T;
    };
    const cublasOperation_t trans_a = op_for(first), trans_b = op_for(second);
    const int m = static_cast<int>(out_rows ? plan.n : plan.m);
    const int n = static_cast<int>(out_rows ? plan.m : plan.n);
    const int k = static_cast<int>(plan.k);
    const void *pa = address_of(*operand[first]), *pb = address_of(*operand[second]);
    const int lda = static_cast<int>(plan.layout[first].ld), ldb = static_cast<int>(plan.layout[second].ld);
    const int ldc = static_cast<int>(plan.layout[2].ld);
    const long long stride_a = plan.batch_stride[first], stride_b = plan.batch_stride[second];
    const long long stride_c = plan.batch_stride[2];
    const int batch = static_cast<int>(plan.batch);
    const float alpha = 1.f, beta = 0.f;

    const Cublas &api = g_context->libs.cublas;
    cublasStatus_t status;
    if (out.dtype == TF_DTYPE_F32) {
        status = api.cublasSgemmStridedBatched(device.blas.get(), trans_a, trans_b, m, n, k, &alpha,
                                               static_cast<const float *>(pa), lda, stride_a,
                                               static_cast<const float *>(pb), ldb, stride_b, &beta,
                                               static_cast<float *>(address_of(out)), ldc, stride_c, batch);
    } else {
        const cudaDataType_t type = cuda_type(out.dtype);
        status = api.cublasGemmStridedBatchedEx(device.blas.get(), trans_a, trans_b, m, n, k, &alpha, pa, type, lda,
                                                stride_a, pb, type, ldb, stride_b, &beta, address_of(out), type, ldc,
                                                stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    if (status != CUBLAS_STATUS_SUCCESS)
        return fail(err, status == CUBLAS_STATUS_ALLOC_FAILED ? TF_STATUS_OUT_OF_MEMORY : TF_STATUS_INTERNAL,
                    "matmul %s [%d x %d] x [%d x %d], batch %d: cuBLAS failed: %s", dtype_name(out.dtype),
                    static_cast<int>(plan.m), k, k, static_cast<int>(plan.n), batch, cublas_status_name(api, status));
    return TF_STATUS_OK;
}

}  // namespace tf_cuda
