// The cpu plugin's kernel table: every row of every kernel file, in one list. Part of the
// tinyfin-cpu-kernels library (meson.build) with the kernels and the runtime, which the cpu plugin
// and the blas plugin link: blas puts its OpenBLAS rows before these (kernel_table.hpp).
#include "kernel_table.hpp"

#include "kernels.hpp"
#include "kernels_nn.hpp"

#include <vector>

namespace tf_cpu {
namespace {

// The OWN ops' kernels (kernels_nn.hpp, one file per family), one row each. The cpu plugin has a
// kernel for every dtype tinyfin defines an op on (ops.def's dtypes column and the op's rule,
// tinyfin/plugin_kit/rules.hpp): it is every op's fallback, so its rows state no limits of their
// own but the optimizer steps' dense f32.
constexpr HostRow k_own_kernels[] = {
    // kernels_conv.cpp
    {TF_OP_CONV2D, k_float_dtypes, run_conv2d},
    {TF_OP_CONV2D_ACT, k_float_dtypes, run_conv2d_act},
    {TF_OP_CONV2D_GRAD_INPUT, k_float_dtypes, run_conv2d_grad_input},
    {TF_OP_CONV2D_GRAD_WEIGHT, k_float_dtypes, run_conv2d_grad_weight},
    // kernels_pool.cpp
    {TF_OP_MAX_POOL2D, k_float_dtypes, run_max_pool2d},
    {TF_OP_MAX_POOL2D_BACKWARD, k_float_dtypes, run_max_pool2d_backward},
    {TF_OP_AVG_POOL2D, k_float_dtypes, run_avg_pool2d},
    {TF_OP_AVG_POOL2D_BACKWARD, k_float_dtypes, run_avg_pool2d_backward},
    // kernels_softmax.cpp
    {TF_OP_SOFTMAX, k_float_dtypes, run_softmax},
    {TF_OP_LOG_SOFTMAX, k_float_dtypes, run_softmax},
    {TF_OP_CROSS_ENTROPY, k_float_dtypes, run_cross_entropy},
    // kernels_norm.cpp
    {TF_OP_LAYER_NORM, k_float_dtypes, run_layer_norm},
    {TF_OP_RMS_NORM, k_float_dtypes, run_rms_norm},
    {TF_OP_LAYER_NORM_BACKWARD, k_float_dtypes, run_layer_norm_backward},
    {TF_OP_ROPE, k_float_dtypes, run_rope},
    // kernels_attention.cpp
    {TF_OP_ATTENTION, k_float_dtypes, run_attention},
    // kernels_attention_backward.cpp
    {TF_OP_ATTENTION_BACKWARD, k_float_dtypes, run_attention_backward},
    // kernels_lookup.cpp
    {TF_OP_EMBEDDING, k_any_dtype, run_embedding},
    {TF_OP_EMBEDDING_BACKWARD, k_float_dtypes, run_embedding_backward},
    {TF_OP_ONE_HOT, k_any_dtype, run_one_hot},
    // kernels_optim.cpp
    {TF_OP_ADAMW_STEP, k_f32, run_optim, dense_f32_operands},
    {TF_OP_SGD_STEP, k_f32, run_optim, dense_f32_operands},
    // kernels_quant.cpp
    {TF_OP_QUANTIZE, k_any_dtype, run_quantize},
    {TF_OP_DEQUANTIZE, k_any_dtype, run_dequantize},
    {TF_OP_MATMUL_Q, k_any_dtype, run_matmul_q},
    {TF_OP_EMBEDDING_Q, k_any_dtype, run_embedding_q},
    // kernels_cumsum.cpp
    {TF_OP_CUMSUM, k_numeric_dtypes, run_cumsum},
};

}  // namespace

// Every row: the elementwise, compare, reduce, matmul and copy files' tables (their kernels are
// templates private to each file) and the OWN ops' above, gathered once.
std::span<const HostRow> cpu_kernels() {
    static const std::vector<HostRow> table = [] {
        std::vector<HostRow> rows;
        for (std::span<const HostRow> family :
             {elementwise_kernels(), compare_kernels(), reduce_kernels(), matmul_kernels(), copy_kernels(),
              std::span<const HostRow>(k_own_kernels)})
            rows.insert(rows.end(), family.begin(), family.end());
        return rows;
    }();
    return table;
}

}  // namespace tf_cpu
