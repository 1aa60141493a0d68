// layer_norm_backward: the fused gradient of layer_norm (layer_norm_backward.hpp).
#include "layer_norm_backward.hpp"

#include "ops_common.hpp"

namespace tinyfin::detail {

std::optional<std::vector<Tensor>> layer_norm_backward_fused(const Tensor &x, const Tensor &w, const Tensor &dy,
                                                             int n_axes, double eps) {
    NoGradGuard no_grad;
    if (dy.dtype() != x.dtype()) return std::nullopt;  // the composition's rules apply
    Tensor xx = x, ww = w, gg = dy;
    place_together({&xx, &ww, &gg}, "layer_norm_backward");
    if (!may_claim(TF_OP_LAYER_NORM_BACKWARD, *xx.impl(), xx.dtype())) return std::nullopt;
    // dy may be a broadcast view (the gradient of a sum): the op takes x's shape, any strides.
    const Tensor eg = raw_expand(gg, xx.shape());
    Tensor gx = empty_like_device(xx, xx.shape(), xx.dtype()), gw = empty_like_device(xx, ww.shape(), xx.dtype()),
           gb = empty_like_device(xx, ww.shape(), xx.dtype());
    const TensorImpl *inputs[] = {xx.impl(), ww.impl(), eg.impl()};
    const TensorImpl *outputs[] = {gx.impl(), gw.impl(), gb.impl()};
    const tf_params_norm p{sizeof(tf_params_norm), n_axes, eps};
    if (!dispatch_if_claimed(TF_OP_LAYER_NORM_BACKWARD, inputs, outputs, &p)) return std::nullopt;
    return std::vector<Tensor>{gx, gw, gb};
}

}  // namespace tinyfin::detail
