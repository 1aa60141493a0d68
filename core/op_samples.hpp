// One valid f32 descriptor per op, small except matmul and conv (sizes where a GEMM backend
// claims them): what tinyfin-info asks each plugin's supports() to build the op matrix.
#pragma once

#include <vector>

#include "tinyfin/plugin.h"
#include "tinyfin/plugin_kit/params.hpp"

namespace tinyfin {
enum class DType : int32_t;
}

namespace tinyfin::detail {

// Hidden, as the kit's AnyParams it holds: a detail of libtinyfin, never seen outside it.
struct __attribute__((visibility("hidden"))) OpSample {
    std::vector<tf_tensor_desc> inputs, outputs;
    // Storage for whichever params struct the op takes (sized from ops.def).
    tf_kit::AnyParams params;
    bool has_params = false;

    // The descriptor; valid while this sample lives and is not moved.
    tf_op_desc desc(tf_op op) const;
};

OpSample make_sample(tf_op op);

class Backend;
// Whether backend's device claims op with its float operands in dtype (its sample, f32 replaced
// by dtype, asked of the plugin's supports() once per backend, device, op and dtype): autocast's
// per-backend allow-list, and the question a fused path asks before allocating its output.
bool claims(Backend &backend, int device, tf_op op, DType dtype);

}  // namespace tinyfin::detail
