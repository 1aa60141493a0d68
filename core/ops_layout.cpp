// Layout ops built from views and strided copies: concat, stack, split, pad, narrow.
#include "ops_common.hpp"

namespace tinyfin {

using namespace detail;

Tensor narrow(const Tensor &tensor, int64_t axis, int64_t start, int64_t length) {
    impl_of(tensor, "narrow");
    if (tensor.rank() == 0) raise<ShapeError>("narrow: a rank-0 tensor has no axis");
    int ax = normalize_axis(axis, tensor.rank(), "narrow");
    int64_t n = tensor.size(ax);
    if (start < 0) start += n;
    // length > n - start rather than start + length > n: no overflow for huge lengths.
    if (start < 0 || length < 0 || start > n || length > n - start) {
        int64_t end = 0;
        std::string end_text =
            __builtin_add_overflow(start, length, &end) ? std::string("2^63 and beyond") : std::to_string(end);
        raise<ShapeError>("narrow: [" + std::to_string(start) + ", " + end_text + ") is outside axis " +
                          std::to_string(axis) + " of shape " + shape_str(tensor.shape()));
    }
    return tensor.slice(ax, start, start + length);
}

Tensor flatten(const Tensor &x, int64_t start_dim, int64_t end_dim) {
    impl_of(x, "flatten");
    int64_t rank = x.rank();
    if (rank == 0) return x.reshape({1});
    int64_t start = start_dim < 0 ? start_dim + rank : start_dim;
    int64_t end = end_dim < 0 ? end_dim + rank : end_dim;
    if (start < 0 || end >= rank || start > end)
        raise<ShapeError>("flatten: axes " + std::to_string(start_dim) + ".." + std::to_string(end_dim) +
                          " do not fit an input of shape " + shape_str(x.shape()));
    Shape shape(x.shape().begin(), x.shape().begin() + start);
    int64_t merged = 1;
    for (int64_t i = start; i <= end; ++i) merged *= x.size(i);
    shape.push_back(merged);
    shape.insert(shape.end(), x.shape().begin() + end + 1, x.shape().end());
    return x.reshape(shape);
}

Tensor concat(const std::vector<Tensor> &tensors, int64_t axis) {
    if (tensors.empty()) raise<ShapeError>("concat: needs at least one tensor");
    for (const Tensor &t : tensors) impl_of(t, "concat");
    const Tensor &first = tensors[0];
    if (first.rank() == 0) raise<ShapeError>("concat: rank-0 tensors have no axis; use stack");
    int ax = normalize_axis(axis, first.rank(), "concat");
    Shape shape = first.shape();
    shape[ax] = 0;
    for (const Tensor &t : tensors) {
        bool fits = t.rank() == first.rank() && t.dtype() == first.dtype();
        for (int i = 0; fits && i < t.rank(); ++i) fits = i == ax || t.size(i) == first.size(i);
        if (!fits)
            raise<ShapeError>("concat: " + std::string(dtype_name(t.dtype())) + shape_str(t.shape()) +
                              " does not match " + dtype_name(first.dtype()) + shape_str(first.shape()) +
                              " outside axis " + std::to_string(axis));
        shape[ax] += t.size(ax);
    }
    Device device = first.device();
    if (mixed_devices() == MixedDevices::strict)
        for (const Tensor &t : tensors)
            if (t.device() != device)
                raise<DeviceError>("concat: expected all tensors on one device, got " + device.str() + " and " +
                                   t.device().str() + "; move one with .to(device)");
    Tensor out = empty(shape, first.dtype(), device);
    std::vector<int64_t> sizes;
    int64_t at = 0;
    for (const Tensor &t : tensors) {
        raw_slice(out, ax, at, at + t.size(ax), 1).assign_(t.detach());
        at += t.size(ax);
        sizes.push_back(t.size(ax));
    }
    // Gradients: the matching pieces of the output's gradient.
    std::vector<const Tensor *> inputs;
    for (const Tensor &t : tensors) inputs.push_back(&t);
    return detail::record_many(out, inputs, "concat", [&] {
        return [sizes, ax](const Tensor &g) -> std::vector<Tensor> { return split(g, sizes, ax); };
    });
}

Tensor stack(const std::vector<Tensor> &tensors, int64_t axis) {
    if (tensors.empty()) raise<ShapeError>("stack: needs at least one tensor");
    int rank = static_cast<int>(impl_of(tensors[0], "stack").shape.size());
    int ax = normalize_axis(axis, rank + 1, "stack");
    std::vector<Tensor> expanded;
    for (const Tensor &t : tensors) {
        if (t.shape() != tensors[0].shape())
            raise<ShapeError>("stack: shapes " + shape_str(tensors[0].shape()) + " and " + shape_str(t.shape()) +
                              " differ");
        Shape s = t.shape();
        s.insert(s.begin() + ax, 1);
        expanded.push_back(t.reshape(s));
    }
    return concat(expanded, ax);
}

std::vector<Tensor> split(const Tensor &tensor, const std::vector<int64_t> &sizes, int64_t axis) {
    impl_of(tensor, "split");
    if (tensor.rank() == 0) raise<ShapeError>("split: a rank-0 tensor has no axis");
    int ax = normalize_axis(axis, tensor.rank(), "split");
    int64_t total = 0;
    for (int64_t s : sizes) {
        if (s < 0) raise<ShapeError>("split: negative size " + std::to_string(s));
        // Wrapped, {INT64_MAX, INT64_MAX, 7} would add up to 5.
        if (__builtin_add_overflow(total, s, &total))
            raise<ShapeError>("split: sizes add up to more than fit in 64 bits, axis " + std::to_string(axis) + " of " +
                              shape_str(tensor.shape()) + " has " + std::to_string(tensor.size(ax)));
    }
    if (total != tensor.size(ax))
        raise<ShapeError>("split: sizes add up to " + std::to_string(total) + ", axis " + std::to_string(axis) +
                          " of " + shape_str(tensor.shape()) + " has " + std::to_string(tensor.size(ax)));
    std::vector<Tensor> pieces;
    int64_t at = 0;
    for (int64_t s : sizes) {
        pieces.push_back(tensor.slice(ax, at, at + s));
        at += s;
    }
    return pieces;
}

Tensor pad(const Tensor &tensor, const std::vector<int64_t> &pads, double value) {
    impl_of(tensor, "pad");
    if (pads.size() % 2 != 0 || pads.size() / 2 > static_cast<std::size_t>(tensor.rank()))
        raise<ShapeError>("pad: needs (before, after) pairs for at most " + std::to_string(tensor.rank()) +
                          " axes, got " + std::to_string(pads.size()) + " values");
    Shape shape = tensor.shape();
    for (std::size_t i = 0; i < pads.size() / 2; ++i) {
        if (pads[2 * i] < 0 || pads[2 * i + 1] < 0)
            raise<ShapeError>("pad: negative padding on axis " + std::to_string(i));
        shape[i] += pads[2 * i] + pads[2 * i + 1];
    }
    Tensor out = full(shape, value, tensor.dtype(), tensor.device());
    Tensor inner = out;
    for (std::size_t i = 0; i < pads.size() / 2; ++i)
        inner = raw_slice(inner, static_cast<int>(i), pads[2 * i], pads[2 * i] + tensor.size(i), 1);
    inner.assign_(tensor.detach());
    return record(out, {&tensor}, "pad", [&] {
        return [pads, shape = tensor.shape()](const Tensor &g) -> std::vector<Tensor> {
            Tensor piece = g;
            for (std::size_t i = 0; i < pads.size() / 2; ++i)
                piece = piece.slice(static_cast<int>(i), pads[2 * i], pads[2 * i] + shape[i]);
            return {piece};
        };
    });
}

}  // namespace tinyfin
