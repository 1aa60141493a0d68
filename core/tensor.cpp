// The Tensor methods that record autograd or dispatch ops: views (reshape, transpose, permute,
// slice, expand), contiguous, assignment and host transfers. The plain pieces below dispatch
// (shapes, devices, storage, construction, accessors) are tensor_storage.cpp's.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "dispatch.hpp"
#include "errors.hpp"
#include "registry.hpp"
#include "autograd.hpp"
#include "tensor_impl.hpp"
#include "tinyfin/extend.hpp"

namespace tinyfin {

using namespace detail;

// ---- Views ---------------------------------------------------------------------

// Strides for viewing this tensor as new_shape without a copy, or empty when impossible.
static std::optional<Shape> view_strides(const TensorImpl &t, const Shape &new_shape) {
    if (new_shape.empty()) return Shape{};
    if (t.shape.empty()) return contiguous_strides(new_shape);
    if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end()) return contiguous_strides(new_shape);
    // Walk groups of old axes that are contiguous among themselves, matching new axes to each.
    Shape result(new_shape.size());
    int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
    int64_t chunk_base_stride = t.strides.empty() ? 1 : t.strides.back();
    int64_t tensor_numel = 1, view_numel = 1;
    for (int64_t d = static_cast<int64_t>(t.shape.size()) - 1; d >= 0; --d) {
        tensor_numel *= t.shape[d];
        if (d == 0 || (t.shape[d - 1] != 1 && t.strides[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
                result[view_d] = view_numel * chunk_base_stride;
                view_numel *= new_shape[view_d];
                --view_d;
            }
            if (view_numel != tensor_numel) return std::nullopt;
            if (d > 0) {
                chunk_base_stride = t.strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    if (view_d != -1) return std::nullopt;
    return result;
}

static Shape infer_shape(const Shape &requested, int64_t numel, std::string_view op) {
    Shape shape = requested;
    int infer = -1;
    int64_t known = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == -1) {
            if (infer >= 0) raise<ShapeError>(std::string(op) + ": only one -1 allowed in " + shape_str(requested));
            infer = static_cast<int>(i);
            continue;
        }
        if (shape[i] < 0) raise<ShapeError>(std::string(op) + ": negative size in " + shape_str(requested));
        if (__builtin_mul_overflow(known, shape[i], &known))
            raise<ShapeError>(std::string(op) + ": shape " + shape_str(requested) + " overflows");
    }
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            raise<ShapeError>(std::string(op) + ": cannot infer -1 in " + shape_str(requested) + " for " +
                              std::to_string(numel) + " elements");
        shape[infer] = numel / known;
        known *= shape[infer];
    }
    if (known != numel)
        raise<ShapeError>(std::string(op) + ": shape " + shape_str(requested) + " has " + std::to_string(known) +
                          " elements, the tensor has " + std::to_string(numel));
    checked_numel(shape, op);
    return shape;
}

namespace detail {

Tensor raw_view(const Tensor &t, const Shape &new_shape) {
    const TensorImpl &impl = impl_of(t, "view");
    Shape shape = infer_shape(new_shape, t.numel(), "view");
    auto strides = view_strides(impl, shape);
    if (!strides)
        raise<ShapeError>("view: a tensor of shape " + shape_str(impl.shape) + " and strides " +
                          shape_str(impl.strides) + " cannot be viewed as " + shape_str(shape) +
                          " without a copy; use reshape");
    return make_view(t, shape, *strides, impl.offset);
}

}  // namespace detail

// Gradient of any reshape-like view: reshape the gradient back.
static Tensor record_reshape(const Tensor &out, const Tensor &in, const char *name) {
    return record(out, {&in}, name, [&] {
        return [shape = in.shape()](const Tensor &g) -> std::vector<Tensor> { return {g.reshape(shape)}; };
    });
}

Tensor Tensor::view(const Shape &new_shape) const { return record_reshape(raw_view(*this, new_shape), *this, "view"); }

Tensor Tensor::reshape(const Shape &new_shape) const {
    const TensorImpl &impl = impl_of(*this, "reshape");
    Shape shape = infer_shape(new_shape, numel(), "reshape");
    if (auto strides = view_strides(impl, shape))
        return record_reshape(make_view(*this, shape, *strides, impl.offset), *this, "reshape");
    return contiguous().view(shape);
}

Tensor Tensor::transpose(int64_t axis0, int64_t axis1) const {
    int r = rank();
    int a = tensor_axis(axis0, r, "transpose"), b = tensor_axis(axis1, r, "transpose");
    std::vector<int> axes(r);
    std::iota(axes.begin(), axes.end(), 0);
    if (r > 0) std::swap(axes[a], axes[b]);
    return permute(axes);
}

Tensor Tensor::permute(const Axes &axes) const {
    Tensor out = raw_permute(*this, axes);
    std::vector<int64_t> inverse(axes.size());
    for (std::size_t i = 0; i < axes.size(); ++i)
        inverse[axes[i] < 0 ? axes[i] + rank() : axes[i]] = static_cast<int>(i);
    return record(out, {this}, "permute",
                  [&] { return [inverse](const Tensor &g) -> std::vector<Tensor> { return {g.permute(inverse)}; }; });
}

Tensor detail::raw_permute(const Tensor &t, const Axes &axes) {
    const Tensor *self = &t;
    const TensorImpl &impl = impl_of(t, "permute");
    int r = t.rank();
    if (static_cast<int>(axes.size()) != r)
        raise<ShapeError>("permute: " + std::to_string(axes.size()) + " axes given for rank " + std::to_string(r));
    std::vector<bool> seen(r, false);
    Shape shape(r), strides(r);
    for (int i = 0; i < r; ++i) {
        int a = tensor_axis(axes[i], r, "permute");
        if (seen[a]) raise<ShapeError>("permute: axis " + std::to_string(axes[i]) + " repeated");
        seen[a] = true;
        shape[i] = impl.shape[a];
        strides[i] = impl.strides[a];
    }
    return make_view(*self, shape, strides, impl.offset);
}

namespace {

// slice's history. The gradient is zero outside the slice: apply scatters g into the same view
// of zeros; accumulate_into adds g into that view of the input's gradient summed so far.
struct SliceNode final : Node {
    Shape shape;
    DType dtype;
    int64_t axis, start, end, step;
    bool freed = false;

    void check_alive() const {
        if (freed)
            raise<AutogradError>("backward through slice whose graph was already freed; pass retain_graph=true to "
                                 "the first backward() to run backward twice through the same graph");
    }
    std::vector<Tensor> apply(const Tensor &g) override {
        check_alive();
        Tensor full_grad = zeros(shape, dtype, g.device());
        raw_slice(full_grad, axis, start, end, step).assign_(g);
        return {full_grad};
    }
    bool accumulate_into(const Tensor &g, Tensor &into) override {
        check_alive();
        if (into.dtype() != g.dtype() || into.shape() != shape) return false;
        const Tensor part = raw_slice(into, axis, start, end, step);
        add(part, g, part);
        return true;
    }
    void release() override { freed = true; }
};

}  // namespace

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t end, int64_t step) const {
    Tensor out = raw_slice(*this, axis, start, end, step);
    return record_node(out, {this}, "slice", [&] {
        auto node = std::make_shared<SliceNode>();
        node->shape = shape();
        node->dtype = dtype();
        node->axis = axis;
        node->start = start;
        node->end = end;
        node->step = step;
        return node;
    });
}

Tensor detail::raw_slice(const Tensor &t, int64_t axis, int64_t start, int64_t end, int64_t step) {
    const Tensor &self = t;
    const TensorImpl &impl = impl_of(t, "slice");
    auto rank = [&] { return t.rank(); };
    if (rank() == 0) raise<ShapeError>("slice: a rank-0 tensor has no axis to slice");
    int a = tensor_axis(axis, rank(), "slice");
    if (step <= 0) raise<ValueError>("slice: step must be positive, got " + std::to_string(step));
    int64_t n = impl.shape[a];
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, start, n);
    // A step past the axis picks at most one element: clamp it so the stride cannot overflow.
    step = std::min<int64_t>(step, std::max<int64_t>(n, 1));
    Shape shape = impl.shape, strides = impl.strides;
    shape[a] = end == start ? 0 : 1 + (end - start - 1) / step;
    int64_t skipped = 0;
    if (__builtin_mul_overflow(impl.strides[a], step, &strides[a]) ||
        __builtin_mul_overflow(start, impl.strides[a], &skipped))
        raise<ShapeError>("slice: step " + std::to_string(step) + " or start " + std::to_string(start) +
                          " overflows the strides of " + shape_str(impl.shape));
    return make_view(self, shape, strides, impl.offset + skipped);
}

Tensor Tensor::expand(const Shape &target) const {
    Tensor out = raw_expand(*this, target);
    return record(out, {this}, "expand", [&] {
        return [shape = shape()](const Tensor &g) -> std::vector<Tensor> { return {sum_to(g, shape)}; };
    });
}

Tensor detail::raw_expand(const Tensor &t, const Shape &target) {
    const TensorImpl &impl = impl_of(t, "expand");
    if (target.size() < impl.shape.size())
        raise<ShapeError>("expand: cannot expand " + shape_str(impl.shape) + " to fewer axes " + shape_str(target));
    std::size_t lead = target.size() - impl.shape.size();
    Shape shape(target.size()), strides(target.size());
    for (std::size_t i = 0; i < target.size(); ++i) {
        bool old = i >= lead;
        int64_t size = old ? impl.shape[i - lead] : 1;
        int64_t want = target[i] == -1 && old ? size : target[i];
        if (want < 0) raise<ShapeError>("expand: invalid size in " + shape_str(target));
        if (size == want) {
            shape[i] = size;
            strides[i] = old ? impl.strides[i - lead] : 0;
        } else if (size == 1) {
            shape[i] = want;
            strides[i] = 0;
        } else {
            raise<ShapeError>("expand: shape " + shape_str(impl.shape) + " cannot expand to " + shape_str(target));
        }
    }
    checked_numel(shape, "expand");
    return make_view(t, shape, strides, impl.offset);
}

Tensor Tensor::contiguous() const {
    if (is_contiguous()) return *this;
    const TensorImpl &impl = impl_of(*this, "contiguous");
    Tensor out = make_tensor(*impl.storage->backend, impl.storage->device, impl.shape, impl.dtype);
    dispatch(TF_OP_CONTIGUOUS, {*this}, {out});
    return record(out, {this}, "contiguous",
                  [&] { return [](const Tensor &g) -> std::vector<Tensor> { return {g}; }; });
}

void Tensor::assign_(const Tensor &src) {
    const TensorImpl &impl = impl_of(*this, "assign_");
    impl_of(src, "assign_");
    // With grad mode on, a write into a tensor with history (or of a source with one) is
    // recorded as PyTorch's copy_ is; into a leaf that requires grad it is an error.
    const bool recording =
        grad_enabled() && (needs_grad(*this) || needs_grad(src) ||
                           (impl.view_base && impl.view_base->autograd && impl.view_base->autograd->requires_grad));
    if (recording) check_inplace_allowed(*this, "assign_");
    Shape shape = broadcast_shapes(impl.shape, src.shape(), "assign_");
    if (shape != impl.shape)
        raise<ShapeError>("assign_: source of shape " + shape_str(src.shape()) + " does not broadcast to " +
                          shape_str(impl.shape));
    Tensor source = src.to(device());
    if (source.dtype() != impl.dtype) source = recording ? source.to(impl.dtype) : cast(source.detach(), impl.dtype);
    // A source sharing memory with the destination (a shifted slice, the transpose, a broadcast
    // row of it) is copied out first, as the out= forms do: the result is the one of reading the
    // whole source before writing. Only the source's own elements are copied, not its expansion.
    if (overlaps(*source.impl(), impl)) {
        Tensor copy = make_tensor(*impl.storage->backend, impl.storage->device, source.shape(), impl.dtype);
        dispatch(TF_OP_CONTIGUOUS, {source}, {copy});
        dispatch(TF_OP_CONTIGUOUS, {raw_expand(copy, impl.shape)}, {*this});
    } else {
        dispatch(TF_OP_CONTIGUOUS, {raw_expand(source, impl.shape)}, {*this});
    }
    impl.storage->version.fetch_add(1, std::memory_order_relaxed);
    if (recording) record_overwrite(*this, source);
}

uint64_t Tensor::version() const { return impl_of(*this, "version").storage->version.load(std::memory_order_relaxed); }

void Tensor::set_data(const Tensor &data) {
    TensorImpl &impl = const_cast<TensorImpl &>(impl_of(*this, "set_data"));
    const TensorImpl &from = impl_of(data, "set_data");
    if (impl.autograd && impl.autograd->grad_fn)
        raise<AutogradError>("set_data: only a leaf tensor's data can be replaced; this one was produced by " +
                             std::string(impl.autograd->grad_fn->name));
    if (impl.view_base || from.view_base)
        raise<ValueError>("set_data: views cannot take or give their data; pass contiguous() tensors");
    impl.dtype = from.dtype;
    impl.shape = from.shape;
    impl.strides = from.strides;
    impl.offset = from.offset;
    impl.storage = from.storage;
}

Tensor Tensor::to(const Device &device) const {
    const TensorImpl &impl = impl_of(*this, "to");
    if (device.backend == impl.storage->backend->name() && device.index == impl.storage->device) return *this;
    Backend *backend = Registry::checked().usable(device.backend);
    if (!backend || device.index < 0 || device.index >= backend->device_count())
        raise<DeviceError>("to: device '" + device.str() + "' is not available; run tinyfin-info");
    Tensor src = contiguous();
    Tensor out = make_tensor(*backend, device.index, impl.shape, impl.dtype);
    const TensorImpl &s = *src.impl();
    copy_bytes(*out.impl()->storage, 0, *s.storage, byte_offset(s.dtype, s.offset), nbytes());
    return record(out, {this}, "to", [&] {
        return [from = this->device()](const Tensor &g) -> std::vector<Tensor> { return {g.to(from)}; };
    });
}

Tensor Tensor::to(DType dtype) const { return cast(*this, dtype); }

void Tensor::copy_to_host(void *dst, std::size_t bytes) const {
    if (bytes != nbytes())
        raise<ValueError>("copy_to_host: destination has " + std::to_string(bytes) + " bytes, the tensor " +
                          shape_str(shape()) + " of " + dtype_name(dtype()) + " has " + std::to_string(nbytes()));
    if (bytes == 0) return;
    Tensor src;
    {
        HelperScope helper;
        src = contiguous();
    }
    const TensorImpl &s = *src.impl();
    Storage &storage = *s.storage;
    tf_error err = make_error();
    tf_status status = guarded(err, "buffer_read", [&] {
        return storage.backend->table().buffer_read(storage.buffer, byte_offset(s.dtype, s.offset), dst, bytes, &err);
    });
    if (!storage.host) Registry::instance().counters().backends[storage.backend->slot()].bytes_to_host += bytes;
    if (status != TF_STATUS_OK)
        raise_status(status,
                     "copy_to_host from " + device().str() + ": " + error_text(err, "failed without a message"));
}

void copy_from_host(const Tensor &tensor, const void *src, std::size_t bytes) {
    const TensorImpl &impl = impl_of(tensor, "copy_from_host");
    if (bytes != tensor.nbytes())
        raise<ValueError>("copy_from_host: source has " + std::to_string(bytes) + " bytes, the tensor " +
                          shape_str(tensor.shape()) + " of " + dtype_name(tensor.dtype()) + " has " +
                          std::to_string(tensor.nbytes()));
    if (!tensor.is_contiguous())
        raise<ValueError>("copy_from_host: the tensor " + shape_str(tensor.shape()) +
                          " is not contiguous; write into contiguous() and assign_ it");
    if (grad_enabled() && tensor.requires_grad())
        raise<AutogradError>("copy_from_host: the tensor requires grad; write it under NoGradGuard");
    impl.storage->version.fetch_add(1, std::memory_order_relaxed);
    if (bytes == 0) return;
    if (!src) raise<ValueError>("copy_from_host: source is NULL");
    Storage &storage = *impl.storage;
    tf_error err = make_error();
    // Queued ops may still read or write these elements; buffer_write does not wait for them.
    tf_status status = storage.backend->table().synchronize(storage.device, &err);
    if (status != TF_STATUS_OK)
        raise_status(status, "copy_from_host to " + tensor.device().str() + ": " +
                                 error_text(err, "synchronize failed without a message"));
    status =
        storage.backend->table().buffer_write(storage.buffer, byte_offset(impl.dtype, impl.offset), src, bytes, &err);
    if (!storage.host) Registry::instance().counters().backends[storage.backend->slot()].bytes_to_device += bytes;
    if (status != TF_STATUS_OK)
        raise_status(status,
                     "copy_from_host to " + tensor.device().str() + ": " + error_text(err, "failed without a message"));
}

}  // namespace tinyfin
