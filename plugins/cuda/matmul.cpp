// matmul through cublasSgemmStridedBatched (f32) and cublasGemmStridedBatchedEx (f16, bf16 with
// f32 accumulation), as matmul_plan.cpp maps the descriptor: transposed and broadcast operands are
// read in place, never copied (batch axes that do not collapse are a loop of such calls); layouts
// it cannot map are not supported and run on cpu.
#include "context.hpp"
#include "matmul_plan.hpp"

namespace tf_cuda {
namespace {

cudaDataType_t cuda_type(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F16: return CUDA_R_16F;
    case TF_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

// Nothing to multiply: an empty output, or K == 0 (the output is zeros).
bool trivial(const tf_op_desc &op) {
    return numel(op.outputs[0]) == 0 || op.inputs[0].shape[op.inputs[0].rank - 1] == 0;
}

}  // namespace

bool matmul_supported(const Device &, const tf_op_desc &op) {
    GemmCall call;
    return trivial(op) || plan_gemm(op, &call);
}

tf_status matmul_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &a = op.inputs[0], &b = op.inputs[1], &out = op.outputs[0];
    if (numel(out) == 0) return TF_STATUS_OK;
    if (trivial(op)) return zero_fill(device, out, err);
    GemmCall c;
    if (!plan_gemm(op, &c)) return fail(err, TF_STATUS_UNSUPPORTED, "matmul: layout not supported by cuBLAS");
    const cublasOperation_t ta = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const float alpha = 1.f, beta = 0.f;
    const Cublas &api = g_context->libs.cublas;
    const size_t element = dtype_size(out.dtype);
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    for (long long outer = 0; outer < c.outer_count && status == CUBLAS_STATUS_SUCCESS; ++outer) {
        long long off[3];
        outer_offsets(c, outer, off);
        const char *base_a = static_cast<const char *>(address_of(a)) + off[0] * element;
        const char *base_b = static_cast<const char *>(address_of(b)) + off[1] * element;
        void *pc = static_cast<char *>(address_of(out)) + off[2] * element;
        const void *pa = c.swapped ? base_b : base_a, *pb = c.swapped ? base_a : base_b;
        if (out.dtype == TF_DTYPE_F32) {
            status = api.cublasSgemmStridedBatched(device.blas.get(), ta, tb, c.m, c.n, c.k, &alpha,
                                                   static_cast<const float *>(pa), c.lda, c.stride_a,
                                                   static_cast<const float *>(pb), c.ldb, c.stride_b, &beta,
                                                   static_cast<float *>(pc), c.ldc, c.stride_c, c.batch);
        } else {
            const cudaDataType_t type = cuda_type(out.dtype);
            status = api.cublasGemmStridedBatchedEx(device.blas.get(), ta, tb, c.m, c.n, c.k, &alpha, pa, type, c.lda,
                                                    c.stride_a, pb, type, c.ldb, c.stride_b, &beta, pc, type, c.ldc,
                                                    c.stride_c, c.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        }
    }
    if (status != CUBLAS_STATUS_SUCCESS) {
        const int r = out.rank;
        return fail(err, status == CUBLAS_STATUS_ALLOC_FAILED ? TF_STATUS_OUT_OF_MEMORY : TF_STATUS_INTERNAL,
                    "matmul %s [%lld x %lld] x [%lld x %lld], batch %d: cuBLAS failed: %s", dtype_name(out.dtype),
                    static_cast<long long>(out.shape[r - 2]), static_cast<long long>(a.shape[r - 1]),
                    static_cast<long long>(b.shape[r - 2]), static_cast<long long>(out.shape[r - 1]), c.batch,
                    cublas_status_name(api, status));
    }
    return TF_STATUS_OK;
}

}  // namespace tf_cuda
