// Reduction reference kernel: sum over the axes in tf_params_reduce.axes_mask.
#include "kernels.h"

namespace tf_cpu {
namespace {

// Floats accumulate in double, integers in uint64_t (wrapping, then truncated to the output
// type: the same bits as summing in the output type with wraparound).
template <class T>
using accumulator = std::conditional_t<std::is_same_v<typename traits<T>::compute, float>, double, uint64_t>;

template <class T>
void sum(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask) {
    using tr = traits<T>;
    using acc_t = accumulator<T>;
    // Outer walk: the output's elements (reduced axes have size 1 there). Inner walk: for one
    // output element, the input elements of the reduced axes, always in row-major order, so the
    // sum is the same on every run and every machine.
    int64_t inner_shape[TF_MAX_RANK];
    for (int i = 0; i < in.rank; ++i) inner_shape[i] = (axes_mask >> i & 1) ? in.shape[i] : 1;
    const view in_view = view_of(in);
    walk<2>(out.rank, out.shape, {view_of(out), in_view},
            [&](char *const *p, int64_t n, const int64_t *step) {
                for (int64_t i = 0; i < n; ++i) {
                    acc_t acc = 0;
                    view first = in_view;
                    first.base = p[1] + i * step[1];
                    walk<1>(in.rank, inner_shape, {first}, [&](char *const *q, int64_t m, const int64_t *qstep) {
                        for (int64_t j = 0; j < m; ++j) acc += static_cast<acc_t>(tr::load(q[0] + j * qstep[0]));
                    });
                    // From the accumulator in one rounding (double -> f16 directly, not via float).
                    tr::store_wide(p[0] + i * step[0], static_cast<typename tr::wide>(acc));
                }
            });
}

}  // namespace

tf_status run_sum(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask, tf_error *err) {
    const bool known = with_numeric_dtype(out.dtype, [&](auto tag) { sum<decltype(tag)>(in, out, axes_mask); });
    if (!known) return fail(err, TF_STATUS_UNSUPPORTED, "sum: dtype %s not supported", dtype_name(out.dtype));
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
