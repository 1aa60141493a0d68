// cumsum (ONNX CumSum): the running sum of x along one axis, exclusive (from 0) or inclusive,
// forwards or in reverse, over any strides. Floats are summed in double, each output rounded once
// to its dtype (the double sum's error, n 2^-53 of the terms' size, is far below an f32 rounding);
// integers wrap, two's complement, as add does.
#include "kernels_nn.hpp"

namespace tf_cpu {
namespace {

// What a line is summed in: double for the floats; the unsigned type of an integer's width,
// where wrapping is defined.
template <class T>
struct Accumulator {
    using type = double;
};
template <>
struct Accumulator<int32_t> {
    using type = uint32_t;
};
template <>
struct Accumulator<int64_t> {
    using type = uint64_t;
};

// One line of n elements `step` bytes apart in x and y.
template <class T>
void scan_line(const char *x, int64_t sx, char *y, int64_t sy, int64_t n, bool exclusive, bool reverse) {
    using Tr = Traits<T>;
    using Acc = typename Accumulator<T>::type;
    Acc acc = 0;
    for (int64_t k = 0; k < n; ++k) {
        const int64_t i = reverse ? n - 1 - k : k;
        const Acc v = static_cast<Acc>(Tr::load(x + i * sx));
        if (!exclusive) acc += v;
        if constexpr (std::is_integral_v<T>)
            Tr::store(y + i * sy, static_cast<T>(acc));
        else
            Tr::store_wide(y + i * sy, acc);
        if (exclusive) acc += v;
    }
}

}  // namespace

tf_status run_cumsum(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &x = op.inputs[0], &y = op.outputs[0];
    const auto &p = params_of<tf_params_cumsum>(op);
    const int axis = p.axis;
    const int64_t n = x.shape[axis];
    // The lines: every element of the shape with the axis cut to one, walked in x and y.
    int64_t starts[TF_MAX_RANK];
    for (int i = 0; i < x.rank; ++i) starts[i] = i == axis ? 1 : x.shape[i];
    const View vx = view_of(x), vy = view_of(y);
    const auto elem = static_cast<int64_t>(dtype_size(x.dtype));
    const int64_t sx = n > 1 ? x.strides[axis] * elem : 0, sy = n > 1 ? y.strides[axis] * elem : 0;
    const bool known = Dtypes::with_numeric(x.dtype, [&](auto tag) {
        using T = decltype(tag);
        walk<2>(x.rank, starts, {vx, vy}, [&](char *const *at, int64_t count, const int64_t *step) {
            for (int64_t j = 0; j < count; ++j)
                scan_line<T>(at[0] + j * step[0], sx, at[1] + j * step[1], sy, n, p.exclusive != 0, p.reverse != 0);
        });
    });
    return dtype_status(known, "cumsum", x.dtype, err);
}

}  // namespace tf_cpu
