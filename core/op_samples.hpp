// One valid f32 descriptor per op, small except matmul and conv (sizes where a GEMM backend
// claims them): what tinyfin-info asks each plugin's supports() to build the op matrix.
#pragma once

#include <vector>

#include "tinyfin/plugin.h"

namespace tinyfin::detail {

struct OpSample {
    std::vector<tf_tensor_desc> inputs, outputs;
    // Storage for whichever params struct the op takes.
    union {
        tf_params_reduce reduce;
        tf_params_var var;
        tf_params_fill fill;
        tf_params_clamp clamp;
        tf_params_axis axis;
        tf_params_conv2d conv2d;
        tf_params_pool2d pool2d;
        tf_params_norm norm;
        tf_params_rope rope;
        tf_params_attention attention;
        tf_params_cross_entropy cross_entropy;
        tf_params_one_hot one_hot;
        tf_params_adamw_step adamw_step;
        tf_params_sgd_step sgd_step;
    } params;
    bool has_params = false;

    // The descriptor; valid while this sample lives and is not moved.
    tf_op_desc desc(tf_op op) const;
};

OpSample make_sample(tf_op op);

}  // namespace tinyfin::detail
