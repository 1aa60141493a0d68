// The ops the kernels of shaders/ run, as rows of the plugin kit's kernel table
// (tinyfin/plugin_kit/kernel_rows.hpp): each row names its op, the dtypes its kernel takes, the
// host code that records its dispatches on a KernelDevice, the further limits of the kernel
// (accepts) and the shader it dispatches. The op's rule (shapes, params, shared dtypes) is the
// kit's check_op, checked before any row; a row states only what its kernel adds. Each family
// file (ops_<family>.cpp) holds its rows beside its kernels; kernels() is all of them.
#pragma once

#include "descriptors.hpp"
#include "kernel_device.hpp"
#include "kernel_params.hpp"

#include <span>

namespace tf_gpu {

// A row's host code: records op (which check_op and the row accepted) on dev.
using KernelRun = void (*)(KernelDevice &dev, const tf_op_desc &op);
// A row's further limits, from the descriptor and the device's immutable limits (no lock).
using KernelAccepts = bool (*)(const KernelDevice &dev, const tf_op_desc &op);

// One kernel: the kit's {op, dtypes, run, accepts} and the shader whose dispatches it records (a
// plugin whose API lacks a port of a shader leaves out its rows; besides it a row may record
// elementwise fills and casts and reduce's sums).
struct KernelRow : tf_kit::KernelRow<KernelRun, KernelAccepts> {
    Shader shader = Shader::count_;
};

constexpr KernelRow kernel_row(uint32_t op, Shader shader, tf_kit::DtypeSet dtypes, KernelRun run,
                               KernelAccepts accepts = nullptr) {
    KernelRow r{};
    r.op = op;
    r.dtypes = dtypes;
    r.run = run;
    r.accepts = accepts;
    r.shader = shader;
    return r;
}

// Every row, the families in order: elementwise, reduce, scan, gemm, nn, optim, quant.
std::span<const KernelRow> kernels();

// What every kernel shares: at most tensor_slots tensors, each of a dtype the kernels address, its
// extent within one binding; dense outputs. The shell checks it after the op's rule and a row.
bool fits(const KernelDevice &dev, const tf_op_desc &op);

// ---- The families (ops_<family>.cpp) -----------------------------------------------------------

std::span<const KernelRow> elementwise_kernels();  // elementwise.comp: unary, binary, compare,
    // where, contiguous, cast, fill
std::span<const KernelRow> reduce_kernels();  // reduce.comp: sum, mean, max, min, var, argmax, argmin
std::span<const KernelRow> scan_kernels();  // scan.comp: cumsum
std::span<const KernelRow> gemm_kernels();  // gemm.comp: matmul, conv2d and its gradients
// ops_nn.cpp: pool2d.comp (pooling and its backwards), rows.comp (softmax, log_softmax,
// layer_norm, rms_norm, cross_entropy), index.comp (one_hot, embedding(_backward), rope),
// attention.comp.
std::span<const KernelRow> nn_kernels();
std::span<const KernelRow> optim_kernels();  // optim.comp: adamw_step, sgd_step
// quant.comp: dequantize, embedding_q, matmul_q (a block-quantized operand bound as bytes;
// quantize stays on cpu).
std::span<const KernelRow> quant_kernels();

// ---- Steps one family records for another ------------------------------------------------------

// A fill of a whole tensor with raw bits (ops that start from zeros).
void record_fill(KernelDevice &dev, const tf_tensor_desc &out, uint32_t lo, uint32_t hi);
// out = in converted to out's dtype (cast's rules).
void record_cast(KernelDevice &dev, const tf_tensor_desc &in, const tf_tensor_desc &out);
// out = in summed over the axes in axes_mask (kept as size 1).
void record_sum(KernelDevice &dev, const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask);

}  // namespace tf_gpu
