// Scans: cumsum (ONNX CumSum, torch.cumsum), its autograd rule beside it.
#include "autocast.hpp"
#include "ops_common.hpp"

namespace tinyfin {

using namespace detail;

Tensor cumsum(const Tensor &x, int64_t axis, bool exclusive, bool reverse) {
    if (Autocast cast{"cumsum", {&x}}) return cumsum(cast[0], axis, exclusive, reverse);
    const char *op = op_info(TF_OP_CUMSUM).name;
    impl_of(x, op);
    // A rank-0 tensor scans as one element along axis 0 or -1, as torch.cumsum does.
    if (x.rank() == 0) {
        if (axis != 0 && axis != -1)
            raise<ShapeError>(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for rank 0");
        return cumsum(x.reshape({1}), 0, exclusive, reverse).reshape({});
    }
    const int ax = normalize_axis(axis, x.rank(), op);
    tf_params_cumsum p{sizeof(tf_params_cumsum), ax, exclusive ? 1 : 0, reverse ? 1 : 0};
    Tensor y = empty_like_device(x, x.shape(), x.dtype());
    dispatch(TF_OP_CUMSUM, {x}, {y}, &p);
    // y_i sums x_j over j <= i (j < i when exclusive), so dx_j sums g_i over the same pairs from
    // the other side: the same scan run the other way.
    return record(y, {&x}, op, [&] {
        return [ax, exclusive, reverse](const Tensor &g) -> std::vector<Tensor> {
            return {cumsum(g, ax, exclusive, !reverse)};
        };
    });
}

}  // namespace tinyfin
