// dequantize, embedding_q and matmul_q on the kernels of quant.cu (quantize stays on the cpu
// plugin: its k-quant scale search is serial per block and runs once per weight, at load time).
//
// matmul_q takes one of two paths:
//  - many rows of x (a prompt's prefill) with dense rows in x and out: the weight is
//    dequantized to f32 a tile of rows at a time (at most gemm_tile_bytes of scratch) and each tile
//    multiplied by cuBLAS's f32 GEMM (exact f32 unless TINYFIN_CUDA_TF32=1, as matmul);
//  - everything else (generation's one row, strided layouts): quant.cu's matrix-vector kernel,
//    which reads each weight block once per 8 rows of x.
// Both take f32 x and out: f16/bf16 ones are converted to dense f32 copies around them.
// Both accumulate in f32: the result is within K 2^-24 sum |x w| of the exact product of x and
// the dequantized weight (docs/quantization.md).
#include "context.hpp"
#include "quant_decode.hpp"

#include <algorithm>
#include <climits>

namespace tf_cuda {
namespace {

// Rows of x from which the cuBLAS path pays: below it the matrix-vector kernel reads the weight
// fewer times than the tile is written and read back in f32.
constexpr int64_t gemm_min_rows = 64;
// Scratch for one dequantized tile of the weight.
constexpr uint64_t gemm_tile_bytes = uint64_t{64} << 20;

// Bytes from one row of a quantized tensor to the next, from its stride in elements (a multiple
// of the block length: whole_blocks).
int64_t row_bytes(int32_t dtype, int64_t stride) {
    return stride / quant::block_length(dtype) * quant::block_bytes(dtype);
}

// The leading axes (all but the last) of a and b, walked together over a's leading shape.
Strided<2> leading(const tf_tensor_desc &shape_of, const tf_tensor_desc &a, const tf_tensor_desc &b, int rank) {
    const int64_t *strides[2] = {a.strides, b.strides};
    return make_strided<2>(rank, shape_of.shape, strides);
}

int64_t last_stride(const tf_tensor_desc &t) {
    return t.rank > 0 && t.shape[t.rank - 1] > 1 ? t.strides[t.rank - 1] : 1;
}

tf_status launched(tf_error *err, const char *name, cudaError_t e) {
    if (e == cudaSuccess) return TF_STATUS_OK;
    char what[64];
    std::snprintf(what, sizeof what, "%s: kernel launch", name);
    return cuda_fail(err, what, e);
}

// t as a dense f32 tensor of its shape (the copy's descriptor).
tf_tensor_desc dense_f32(const tf_tensor_desc &t) {
    tf_tensor_desc d = t;
    d.dtype = TF_DTYPE_F32;
    d.offset = 0;
    int64_t stride = 1;
    for (int i = t.rank - 1; i >= 0; --i) {
        d.strides[i] = stride;
        stride *= t.shape[i];
    }
    return d;
}

// A strided copy with conversion (elementwise.cu's contiguous/cast kernel) from in to out, one shape.
cudaError_t convert(Device &device, const tf_tensor_desc &out, void *out_address, const tf_tensor_desc &in,
                    const void *in_address) {
    const int64_t *strides[2] = {out.strides, in.strides};
    return launch_copy(device.stream.get(), out.dtype, in.dtype, make_strided<2>(out.rank, out.shape, strides),
                       out_address, in_address);
}

MatmulQArgs matmul_q_args(const tf_tensor_desc &x, const tf_tensor_desc &w, const tf_tensor_desc &out) {
    MatmulQArgs a{};
    a.lead = leading(x, out, x, x.rank - 1);
    a.n = w.shape[0];
    a.chunks = w.shape[1] / quant::chunk;
    a.x_col = last_stride(x);
    a.out_col = last_stride(out);
    a.w_row_bytes = row_bytes(w.dtype, w.shape[0] > 1 ? w.strides[0] : w.shape[1]);
    return a;
}

// The cuBLAS path's conditions: enough rows, one row axis with dense rows that cuBLAS's int sizes
// and leading dimensions describe.
bool gemm_fits(const tf_tensor_desc &w, const MatmulQArgs &a) {
    const int64_t m = a.lead.count, n = w.shape[0], k = w.shape[1];
    if (m < gemm_min_rows || k == 0 || n == 0) return false;
    if (a.lead.rank != 1 || a.x_col != 1 || a.out_col != 1) return false;
    const int64_t ldo = a.lead.strides[0][0], ldx = a.lead.strides[1][0];
    return ldx >= k && ldo >= n && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && ldx <= INT_MAX && ldo <= INT_MAX;
}

// out = x w^T through dequantized f32 tiles of w and cublasSgemm (as a batch of one).
tf_status matmul_q_gemm(Device &device, const tf_tensor_desc &w, const MatmulQArgs &a, float *out, const float *x,
                        tf_error *err) {
    const int64_t m = a.lead.count, n = w.shape[0], k = w.shape[1];
    const int64_t ldo = a.lead.strides[0][0], ldx = a.lead.strides[1][0];
    const int64_t tile_rows =
        std::clamp<int64_t>(static_cast<int64_t>(gemm_tile_bytes / (static_cast<uint64_t>(k) * sizeof(float))), 1, n);
    Scratch tile;
    if (cudaError_t e = tile.allocate(device, static_cast<uint64_t>(tile_rows * k) * sizeof(float)); e != cudaSuccess)
        return cuda_fail(err, "matmul_q: scratch for a dequantized tile", e);
    const Cublas &api = g_context->libs.cublas;
    const float alpha = 1.f, beta = 0.f;
    const auto *wq = static_cast<const char *>(address_of(w));
    for (int64_t n0 = 0; n0 < n; n0 += tile_rows) {
        const int64_t rows = std::min(tile_rows, n - n0);
        // The tile: rows n0 .. n0 + rows - 1 of w as a dense [rows, K] f32 matrix.
        QuantRowsArgs t{};
        const int64_t shape[1] = {rows};
        const int64_t tile_stride[1] = {k}, w_stride[1] = {rows > 1 ? w.strides[0] : k};
        const int64_t *strides[2] = {tile_stride, w_stride};
        t.lead = make_strided<2>(1, shape, strides);
        t.chunks = k / quant::chunk;
        t.out_col = 1;
        if (tf_status s = launched(
                err, "matmul_q",
                launch_dequantize(device.stream.get(), w.dtype, TF_DTYPE_F32, t, tile.get(), wq + n0 * a.w_row_bytes));
            s != TF_STATUS_OK)
            return s;
        // Column-major: out^T [rows, M] (ld ldo) = op_T(tile^T [K, rows]) x^T [K, M] (ld ldx).
        const cublasStatus_t status = api.cublasSgemmStridedBatched(
            device.blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(m),
            static_cast<int>(k), &alpha, static_cast<const float *>(tile.get()), static_cast<int>(k), 0, x,
            static_cast<int>(ldx), 0, &beta, out + n0, static_cast<int>(ldo), 0, 1);
        if (status != CUBLAS_STATUS_SUCCESS)
            return fail(err, status == CUBLAS_STATUS_ALLOC_FAILED ? TF_STATUS_OUT_OF_MEMORY : TF_STATUS_INTERNAL,
                        "matmul_q %s [%lld x %lld] x [%lld x %lld]^T: cuBLAS failed: %s", dtype_name(w.dtype),
                        static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
                        static_cast<long long>(k), cublas_status_name(api, status));
    }
    return TF_STATUS_OK;
}

}  // namespace

tf_status dequantize_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &q = op.inputs[0], &out = op.outputs[0];
    QuantRowsArgs a{};
    a.lead = leading(q, out, q, q.rank - 1);
    a.chunks = q.shape[q.rank - 1] / quant::chunk;
    a.out_col = last_stride(out);
    return launched(err, "dequantize",
                    launch_dequantize(device.stream.get(), q.dtype, out.dtype, a, address_of(out), address_of(q)));
}

tf_status embedding_q_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &w = op.inputs[0], &idx = op.inputs[1], &out = op.outputs[0];
    QuantRowsArgs a{};
    a.lead = leading(idx, out, idx, idx.rank);
    a.chunks = w.shape[1] / quant::chunk;
    a.out_col = last_stride(out);
    a.table_row_bytes = row_bytes(w.dtype, w.shape[0] > 1 ? w.strides[0] : w.shape[1]);
    a.vocab = w.shape[0];
    return launched(err, "embedding_q",
                    launch_embedding_q(device.stream.get(), w.dtype, out.dtype, idx.dtype, a, address_of(out),
                                       address_of(w), address_of(idx), device.data_error_device));
}

tf_status matmul_q_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &x = op.inputs[0], &w = op.inputs[1], &out = op.outputs[0];
    if (numel(out) == 0) return TF_STATUS_OK;
    // f16/bf16 operands: x converted to a dense f32 copy first, out written as one and converted
    // after (the scratch goes back to the cache at once: later work on the stream reuses it).
    Scratch x_copy, out_copy;
    tf_tensor_desc xf = x, of = out;
    void *x_address = address_of(x), *out_address = address_of(out);
    if (x.dtype != TF_DTYPE_F32) {
        xf = dense_f32(x);
        if (cudaError_t e = x_copy.allocate(device, static_cast<uint64_t>(numel(x)) * sizeof(float)); e != cudaSuccess)
            return cuda_fail(err, "matmul_q: scratch for x in f32", e);
        if (tf_status s = launched(err, "matmul_q", convert(device, xf, x_copy.get(), x, x_address)); s != TF_STATUS_OK)
            return s;
        x_address = x_copy.get();
    }
    if (out.dtype != TF_DTYPE_F32) {
        of = dense_f32(out);
        if (cudaError_t e = out_copy.allocate(device, static_cast<uint64_t>(numel(out)) * sizeof(float));
            e != cudaSuccess)
            return cuda_fail(err, "matmul_q: scratch for the f32 product", e);
        out_address = out_copy.get();
    }
    const MatmulQArgs a = matmul_q_args(xf, w, of);
    auto *y = static_cast<float *>(out_address);
    const auto *xv = static_cast<const float *>(x_address);
    if (gemm_fits(w, a)) {
        if (tf_status s = matmul_q_gemm(device, w, a, y, xv, err); s != TF_STATUS_OK) return s;
    } else if (tf_status s =
                   launched(err, "matmul_q", launch_matmul_q(device.stream.get(), w.dtype, a, y, xv, address_of(w)));
               s != TF_STATUS_OK) {
        return s;
    }
    if (out.dtype == TF_DTYPE_F32) return TF_STATUS_OK;
    return launched(err, "matmul_q", convert(device, out, address_of(out), of, out_address));
}

}  // namespace tf_cuda
