// attention's gradients in one op (attention_backward of ops.def) where the operands' plugin
// claims it; scaled_dot_product_attention's backward rule composes them from ordinary ops
// otherwise.
#pragma once

#include <optional>
#include <vector>

#include "tensor_impl.hpp"

namespace tinyfin::detail {

// q, k, v, mask: attention's operands as its forward placed them (one device, the mask additive,
// none of them expanded yet); dy: the output's gradient [..., Tq, Dv]. The gradients of q, k and
// v summed to their shapes, or nothing (with nothing run) when no plugin claims the op there.
std::optional<std::vector<Tensor>> attention_backward_fused(const Tensor &q, const Tensor &k, const Tensor &v,
                                                            const Tensor &mask, const Tensor &dy, bool causal,
                                                            double scale);

}  // namespace tinyfin::detail
