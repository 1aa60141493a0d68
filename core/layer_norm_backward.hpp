// layer_norm's gradients in one op (layer_norm_backward of ops.def) where the operands' plugin
// claims it; layer_norm's backward rule composes them from ordinary ops otherwise.
#pragma once

#include <optional>
#include <vector>

#include "tensor_impl.hpp"

namespace tinyfin::detail {

// x: layer_norm's input; w: its weight as the forward used it (ones when none was given), on x's
// device; dy: the output's gradient, of x's shape. The gradients of x, the weight and the bias
// (the last two of w's shape), or nothing (with nothing run) when no plugin claims the op there.
std::optional<std::vector<Tensor>> layer_norm_backward_fused(const Tensor &x, const Tensor &w, const Tensor &dy,
                                                             int n_axes, double eps);

}  // namespace tinyfin::detail
