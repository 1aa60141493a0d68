#include "autograd.hpp"

#include <atomic>
#include <unordered_map>

#include "errors.hpp"
#include "autocast.hpp"
#include "tinyfin/extend.hpp"
#include "tensor_impl.hpp"

namespace tinyfin {

using namespace detail;

namespace {

thread_local bool grad_mode = true;

// The edges of the node whose backward rule runs on this thread (null outside backward).
thread_local const std::vector<std::shared_ptr<Node>> *current_edges = nullptr;

// The saved tensors of the rule whose factory runs on this thread (null outside a factory).
thread_local std::vector<SavedVersion> *current_saved = nullptr;

// The closure of one recorded op.
struct FunctionNode final : Node {
    BackwardFn backward;
    bool freed = false;

    std::vector<Tensor> apply(const Tensor &grad_output) override {
        if (freed)
            raise<AutogradError>(std::string("backward through ") + name +
                                 " whose graph was already freed; pass retain_graph=true to the first "
                                 "backward() to run backward twice through the same graph");
        const auto *previous = current_edges;
        current_edges = &next;
        struct Restore {
            const std::vector<std::shared_ptr<Node>> *previous;
            ~Restore() { current_edges = previous; }
        } guard{previous};
        return backward(grad_output);
    }
    void release() override {
        backward = nullptr;
        freed = true;
    }
    // Frees the nodes behind this one iteratively: a node whose last owner is this loop hands
    // over its edges before it dies, so a long chain (a loss summed over 10^5 steps) does not
    // recurse one destructor per node and overflow the stack.
    ~FunctionNode() override {
        std::vector<std::shared_ptr<Node>> pending = std::move(next);
        while (!pending.empty()) {
            std::shared_ptr<Node> node = std::move(pending.back());
            pending.pop_back();
            if (!node || node.use_count() != 1) continue;
            for (std::shared_ptr<Node> &edge : node->next) pending.push_back(std::move(edge));
            node->next.clear();
        }
    }
};

// A leaf's own gradient: grad itself when nothing else can see its memory (the fresh result of
// a backward rule), else a contiguous copy. Without the copy two leaves could share one
// gradient (add hands the same tensor to both sides), or a gradient could be a stride-0
// broadcast or the caller's seed, and an in-place update of one grad() would change others.
Tensor owned_gradient(const Tensor &grad) {
    const TensorImpl &impl = *grad.impl();
    bool exclusive = impl.weak_from_this().use_count() == 1 && impl.storage.use_count() == 1;
    if (exclusive && impl.offset == 0 && grad.is_contiguous() && impl.storage->nbytes == grad.nbytes())
        return grad.detach();
    Tensor copy = empty(grad.shape(), grad.dtype(), grad.device());
    copy.assign_(grad);
    return copy;
}

// Whether nothing but this handle reaches grad's memory: an engine-made sum of gradients that
// may be updated in place.
bool unshared(const Tensor &grad) {
    const TensorImpl &impl = *grad.impl();
    return impl.weak_from_this().use_count() == 1 && impl.storage.use_count() == 1;
}

// Adds each incoming gradient into a leaf's grad. Backward passes on several threads may reach
// one leaf at once: the read, the add and the store are one step under the leaf's mutex, so no
// pass's contribution is lost and no thread reads a grad another is replacing. The add runs
// under the lock: contributions to one leaf are serialised, those to different leaves are not.
struct AccumulateNode final : Node {
    std::weak_ptr<TensorImpl> leaf;

    std::vector<Tensor> apply(const Tensor &grad_output) override {
        std::shared_ptr<TensorImpl> impl = leaf.lock();
        if (!impl) return {};
        AutogradMeta &meta = *impl->autograd;
        std::vector<std::pair<uint64_t, GradHook>> hooks;
        {
            std::lock_guard lock(meta.mutex);
            meta.grad = meta.grad.defined() ? add(meta.grad, grad_output) : owned_gradient(grad_output);
            // A copy, run after the lock is released: hooks read grad() (which takes the lock)
            // and may register or remove hooks.
            hooks = meta.grad_hooks;
        }
        Tensor leaf_handle(impl);
        for (auto &[id, hook] : hooks) hook(leaf_handle);
        return {};
    }
};

AutogradMeta &meta_of(TensorImpl &impl) {
    if (!impl.autograd) impl.autograd = std::make_shared<AutogradMeta>();
    return *impl.autograd;
}

bool impl_needs_grad(const TensorImpl &impl) { return impl.autograd && impl.autograd->requires_grad; }

bool is_contiguous_impl(const TensorImpl &impl) {
    int64_t expected = 1;
    for (std::size_t i = impl.shape.size(); i-- > 0;) {
        if (impl.shape[i] != 1 && impl.strides[i] != expected) return false;
        expected *= impl.shape[i];
    }
    return true;
}

// Where a view's elements lie in its base's gradient: a contiguous tensor of the base's shape
// (the view's strides, the offsets' difference). Only for bases whose own layout is contiguous.
struct ViewGeometry {
    Shape base_shape;
    Shape shape, strides;
    int64_t offset = 0;

    Tensor in(const Tensor &base_grad) const { return make_view(base_grad, shape, strides, offset); }
};

ViewGeometry geometry_of(const TensorImpl &view, const TensorImpl &base) {
    return {base.shape, view.shape, view.strides, view.offset - base.offset};
}

// A view's history after its base was written in place: its gradient goes into its elements
// of the base's gradient (PyTorch's AsStridedBackward).
struct ViewOfBaseNode final : Node {
    ViewGeometry geometry;
    std::vector<Tensor> apply(const Tensor &g) override {
        Tensor base_grad = zeros(geometry.base_shape, g.dtype(), g.device());
        geometry.in(base_grad).assign_(g);
        return {base_grad};
    }
};

std::shared_ptr<Node> gradient_edge(const Tensor &t);

// A view whose storage was written since its history was set: its history becomes a view of
// its base's current history (which the write may have replaced), as PyTorch regenerates a
// view's grad_fn. Bases that are not contiguous keep the old history.
void refresh_view_history(TensorImpl &impl) {
    if (!impl.view_base) return;
    uint64_t version = impl.storage->version.load(std::memory_order_relaxed);
    if (version == impl.view_version) return;
    TensorImpl &base = *impl.view_base;
    if (!impl_needs_grad(base) || !is_contiguous_impl(base)) return;
    impl.view_version = version;
    auto node = std::make_shared<ViewOfBaseNode>();
    node->name = "view";
    node->geometry = geometry_of(impl, base);
    node->next.push_back(gradient_edge(Tensor(base.shared_from_this())));
    AutogradMeta &meta = meta_of(impl);
    meta.requires_grad = true;
    meta.grad_fn = std::move(node);
}

// The node a gradient for this tensor flows into: its grad_fn, or its leaf accumulator.
std::shared_ptr<Node> gradient_edge(const Tensor &t) {
    TensorImpl &impl = *t.impl();
    refresh_view_history(impl);
    AutogradMeta &meta = meta_of(impl);
    if (meta.grad_fn) return meta.grad_fn;
    std::lock_guard lock(meta.mutex);
    if (auto node = meta.accumulator.lock()) return node;
    // One accumulator per leaf, owned by the graphs that use it; the leaf refers to it weakly.
    auto node = std::make_shared<AccumulateNode>();
    node->name = "accumulate_grad";
    node->leaf = impl.weak_from_this();
    meta.accumulator = node;
    return node;
}

bool is_float(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

}  // namespace

bool grad_enabled() { return grad_mode; }
void set_grad_enabled(bool on) { grad_mode = on; }
NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }

namespace detail {

bool input_needs_grad(std::size_t i) {
    const auto *edges = current_edges;
    return !edges || (i < edges->size() && (*edges)[i] != nullptr);
}

SavingScope::SavingScope() : previous_(current_saved) { current_saved = &saved_; }
SavingScope::~SavingScope() { current_saved = previous_; }

void note_saved(const TensorImpl &t) {
    if (!current_saved) return;
    current_saved->push_back({t.storage, t.storage->version.load(std::memory_order_relaxed), t.shape});
}

bool any_needs_grad(std::initializer_list<const Tensor *> tensors) {
    // The tensors first: grad mode is a thread-local, dearer to read than a null autograd field.
    for (const Tensor *t : tensors)
        if (needs_grad(*t)) return grad_mode;
    return false;
}

Tensor record_function(const Tensor &out, const std::vector<const Tensor *> &inputs, const char *name,
                       BackwardFn backward, std::vector<SavedVersion> saved) {
    bool any = false;
    for (const Tensor *t : inputs) any = any || needs_grad(*t);
    if (!grad_mode || !any) return out;
    auto node = std::make_shared<FunctionNode>();
    node->name = name;
    node->backward = std::move(backward);
    node->saved = std::move(saved);
    for (const Tensor *t : inputs) node->next.push_back(needs_grad(*t) ? gradient_edge(*t) : nullptr);
    AutogradMeta &meta = meta_of(*out.impl());
    meta.requires_grad = true;
    meta.grad_fn = std::move(node);
    return out;
}

Tensor attach_node(const Tensor &out, std::initializer_list<const Tensor *> inputs, const char *name,
                   std::shared_ptr<Node> node) {
    node->name = name;
    for (const Tensor *t : inputs) node->next.push_back(needs_grad(*t) ? gradient_edge(*t) : nullptr);
    AutogradMeta &meta = meta_of(*out.impl());
    meta.requires_grad = true;
    meta.grad_fn = std::move(node);
    return out;
}

namespace {

// A tensor's history after src was written over all its elements (PyTorch's CopyBackwards):
// the old values get a zero gradient, src the (unbroadcast) gradient.
struct OverwriteNode final : Node {
    Shape src_shape;
    std::vector<Tensor> apply(const Tensor &g) override {
        return {next[0] ? zeros(g.shape(), g.dtype(), g.device()) : Tensor(),
                next[1] ? sum_to(g, src_shape) : Tensor()};
    }
};

// A base's history after src was written into a view of it (PyTorch's CopySlices): the view's
// elements of the gradient go to src, the others to the base's old history.
struct OverwriteViewNode final : Node {
    ViewGeometry geometry;
    Shape src_shape;
    std::vector<Tensor> apply(const Tensor &g) override {
        Tensor base_grad = empty(geometry.base_shape, g.dtype(), g.device());
        base_grad.assign_(g);
        Tensor region = geometry.in(base_grad);
        Tensor src_grad;
        if (next[1]) {
            src_grad = empty(region.shape(), region.dtype(), region.device());
            src_grad.assign_(region);
            src_grad = sum_to(src_grad, src_shape);
        }
        region.assign_(full({}, 0.0, g.dtype(), g.device()));
        return {next[0] ? base_grad : Tensor(), src_grad};
    }
};

[[noreturn]] void raise_leaf_inplace(const char *op, bool view) {
    raise<AutogradError>(std::string(op) + ": " + (view ? "a view of a leaf tensor" : "a leaf tensor") +
                         " that requires grad is written in place while grad mode is on, which would "
                         "lose its gradient; update parameters under NoGradGuard, or write into a clone()");
}

}  // namespace

void check_inplace_allowed(const Tensor &target, const char *op) {
    if (!grad_mode) return;
    const TensorImpl &impl = *target.impl();
    if (impl.view_base) {
        const TensorImpl &base = *impl.view_base;
        if (impl_needs_grad(base) && !base.autograd->grad_fn) raise_leaf_inplace(op, true);
        return;
    }
    if (impl_needs_grad(impl) && !impl.autograd->grad_fn) raise_leaf_inplace(op, false);
}

void record_overwrite(const Tensor &target, const Tensor &src) {
    TensorImpl &impl = *target.impl();
    std::shared_ptr<Node> src_edge = needs_grad(src) ? gradient_edge(src) : nullptr;
    uint64_t version = impl.storage->version.load(std::memory_order_relaxed);
    if (!impl.view_base) {
        std::shared_ptr<Node> old_edge = needs_grad(target) ? gradient_edge(target) : nullptr;
        if (!old_edge && !src_edge) return;
        auto node = std::make_shared<OverwriteNode>();
        node->name = "copy_";
        node->src_shape = src.shape();
        node->next.push_back(std::move(old_edge));
        node->next.push_back(std::move(src_edge));
        AutogradMeta &meta = meta_of(impl);
        meta.requires_grad = true;
        meta.grad_fn = std::move(node);
        return;
    }
    TensorImpl &base = *impl.view_base;
    if (!is_contiguous_impl(base))
        raise<AutogradError>("in-place write into a view of a non-contiguous tensor " + shape_str(base.shape) +
                             " with autograd recording: make the base contiguous() first");
    std::shared_ptr<Node> base_edge = impl_needs_grad(base) ? gradient_edge(Tensor(base.shared_from_this())) : nullptr;
    if (!base_edge && !src_edge) return;
    auto node = std::make_shared<OverwriteViewNode>();
    node->name = "copy_ (into a view)";
    node->geometry = geometry_of(impl, base);
    node->src_shape = src.shape();
    node->next.push_back(std::move(base_edge));
    node->next.push_back(std::move(src_edge));
    AutogradMeta &base_meta = meta_of(base);
    base_meta.requires_grad = true;
    base_meta.grad_fn = std::move(node);
    // The view itself now reads the base's new history.
    impl.view_version = version - 1;
    refresh_view_history(impl);
}

Tensor sum_to(const Tensor &grad, const Shape &shape) {
    if (grad.shape() == shape) return grad;
    int lead = grad.rank() - static_cast<int>(shape.size());
    std::vector<int> axes;
    for (int i = 0; i < grad.rank(); ++i)
        if (i < lead || (shape[i - lead] == 1 && grad.shape()[i] != 1)) axes.push_back(i);
    Tensor reduced = axes.empty() ? grad : sum(grad, axes, true);
    return reduced.reshape(shape);
}

}  // namespace detail

// ---- Tensor autograd methods ----------------------------------------------------------

bool Tensor::requires_grad() const { return needs_grad(*this); }

Tensor &Tensor::requires_grad_(bool on) {
    TensorImpl &impl = const_cast<TensorImpl &>(impl_of(*this, "requires_grad_"));
    if (impl.autograd && impl.autograd->grad_fn)
        raise<AutogradError>("requires_grad_: only leaf tensors can be marked; this tensor was "
                             "produced by " +
                             std::string(impl.autograd->grad_fn->name) + " (use detach() to make a leaf)");
    if (on && !is_float(impl.dtype))
        raise<AutogradError>(std::string("requires_grad_: gradients need a float dtype, got ") +
                             dtype_name(impl.dtype));
    meta_of(impl).requires_grad = on;
    return *this;
}

bool Tensor::is_leaf() const {
    const TensorImpl &impl = impl_of(*this, "is_leaf");
    return !impl.autograd || !impl.autograd->grad_fn;
}

Tensor Tensor::grad() const {
    const TensorImpl &impl = impl_of(*this, "grad");
    if (!impl.autograd) return Tensor();
    std::lock_guard lock(impl.autograd->mutex);
    return impl.autograd->grad;
}

void Tensor::set_grad(const Tensor &grad) {
    TensorImpl &impl = const_cast<TensorImpl &>(impl_of(*this, "set_grad"));
    if (grad.defined() && grad.shape() != impl.shape)
        raise<ShapeError>("set_grad: gradient shape " + shape_str(grad.shape()) + " differs from the tensor's " +
                          shape_str(impl.shape));
    // backward() accumulates into the gradient with the tensor's dtype on its device: a foreign
    // one would fail there, far from the call that set it.
    if (grad.defined() && grad.dtype() != impl.dtype)
        raise<DTypeError>("set_grad: gradient dtype " + std::string(dtype_name(grad.dtype())) +
                          " differs from the tensor's " + dtype_name(impl.dtype) + "; cast it with .to(dtype) first");
    if (grad.defined() && grad.device() != device())
        raise<DeviceError>("set_grad: gradient on " + grad.device().str() + ", the tensor on " + device().str() +
                           "; move it with .to(device) first");
    AutogradMeta &meta = meta_of(impl);
    std::lock_guard lock(meta.mutex);
    meta.grad = grad;
}

void Tensor::zero_grad() {
    TensorImpl &impl = const_cast<TensorImpl &>(impl_of(*this, "zero_grad"));
    if (!impl.autograd) return;
    Tensor old;  // released after the lock: freeing a buffer calls into the plugin
    std::lock_guard lock(impl.autograd->mutex);
    old = std::move(impl.autograd->grad);
}

uint64_t register_post_accumulate_grad_hook(const Tensor &leaf, GradHook hook) {
    TensorImpl &impl = const_cast<TensorImpl &>(impl_of(leaf, "register_post_accumulate_grad_hook"));
    if (impl.autograd && impl.autograd->grad_fn)
        raise<AutogradError>("register_post_accumulate_grad_hook: only leaf tensors accumulate "
                             "gradients; this tensor was produced by " +
                             std::string(impl.autograd->grad_fn->name));
    if (!hook) raise<ValueError>("register_post_accumulate_grad_hook: the hook is empty");
    static std::atomic<uint64_t> next_id{1};
    uint64_t id = next_id++;
    AutogradMeta &meta = meta_of(impl);
    std::lock_guard lock(meta.mutex);
    meta.grad_hooks.emplace_back(id, std::move(hook));
    return id;
}

void remove_post_accumulate_grad_hook(const Tensor &leaf, uint64_t id) {
    TensorImpl &impl = const_cast<TensorImpl &>(impl_of(leaf, "remove_post_accumulate_grad_hook"));
    if (!impl.autograd) return;
    std::lock_guard lock(impl.autograd->mutex);
    auto &hooks = impl.autograd->grad_hooks;
    std::erase_if(hooks, [id](const auto &entry) { return entry.first == id; });
}

std::string GradFn::name() const { return node_ ? node_->name : ""; }

std::vector<GradFn> GradFn::next() const {
    std::vector<GradFn> out;
    if (node_)
        for (const auto &n : node_->next) out.emplace_back(n);
    return out;
}

GradFn grad_fn(const Tensor &t) {
    TensorImpl &impl = const_cast<TensorImpl &>(impl_of(t, "grad_fn"));
    refresh_view_history(impl);
    if (!impl.autograd) return {};
    return GradFn(impl.autograd->grad_fn);
}

void retain_grad(const Tensor &t) {
    TensorImpl &impl = const_cast<TensorImpl &>(impl_of(t, "retain_grad"));
    if (!needs_grad(t)) raise<AutogradError>("retain_grad: the tensor does not require grad, so it gets no gradient");
    refresh_view_history(impl);
    if (!impl.autograd->grad_fn) return;  // a leaf keeps its gradient
    impl.autograd->grad_fn->retains_grad_of = impl.weak_from_this();
}

Tensor Tensor::detach() const {
    const TensorImpl &impl = impl_of(*this, "detach");
    note_saved(impl);
    auto copy = std::make_shared<TensorImpl>();
    copy->dtype = impl.dtype;
    copy->shape = impl.shape;
    copy->strides = impl.strides;
    copy->offset = impl.offset;
    copy->storage = impl.storage;
    return Tensor(std::move(copy));
}

void Tensor::backward(const Tensor &gradient, bool retain_graph) const {
    // Gradients follow the dtypes the forward pass recorded; an autocast scope around backward()
    // must not recast them (a bf16 gradient summed in f32 would not match its input).
    AutocastOff no_autocast;
    const TensorImpl &impl = impl_of(*this, "backward");
    if (!needs_grad(*this))
        raise<AutogradError>("backward: the tensor does not require grad (no parameter with "
                             "requires_grad_() contributed to it, or it was computed under no_grad)");
    Tensor seed = gradient;
    if (!seed.defined()) {
        if (numel() != 1)
            raise<AutogradError>("backward: a gradient can be implied only for one-element "
                                 "outputs; pass one of shape " +
                                 shape_str(impl.shape));
        seed = full(impl.shape, 1.0, impl.dtype, device());
    } else if (seed.shape() != impl.shape) {
        raise<ShapeError>("backward: gradient shape " + shape_str(seed.shape()) + " differs from the output's " +
                          shape_str(impl.shape));
    } else if (seed.dtype() != impl.dtype) {
        // Otherwise a leaf would get a gradient of another dtype, or a backward rule a mixed op.
        raise<DTypeError>(std::string("backward: gradient dtype ") + dtype_name(seed.dtype()) +
                          " differs from the output's " + dtype_name(impl.dtype));
    }

    std::shared_ptr<Node> root = gradient_edge(*this);

    // Topological order by iterative depth-first search.
    std::vector<Node *> order;
    std::unordered_map<Node *, int> state;  // 1 = on stack, 2 = done
    std::vector<std::pair<Node *, std::size_t>> stack{{root.get(), 0}};
    state[root.get()] = 1;
    while (!stack.empty()) {
        auto &[node, next_index] = stack.back();
        if (next_index < node->next.size()) {
            Node *child = node->next[next_index++].get();
            if (child && !state.count(child)) {
                state[child] = 1;
                stack.push_back({child, 0});
            }
            continue;
        }
        state[node] = 2;
        order.push_back(node);
        stack.pop_back();
    }

    NoGradGuard no_grad;
    std::unordered_map<Node *, Tensor> pending;
    pending[root.get()] = seed;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        Node *node = *it;
        auto found = pending.find(node);
        if (found == pending.end()) continue;
        Tensor grad = std::move(found->second);
        pending.erase(found);
        for (const SavedVersion &saved : node->saved) {
            uint64_t now = saved.storage->version.load(std::memory_order_relaxed);
            if (now != saved.version)
                raise<AutogradError>(std::string("backward: a tensor of shape ") + shape_str(saved.shape) + " that " +
                                     node->name + " saved for its gradient was modified in place " +
                                     "afterwards (version " + std::to_string(now) + ", saved at version " +
                                     std::to_string(saved.version) + "); write into a clone() instead, or do " +
                                     "the in-place op out of place");
        }
        if (auto retained = node->retains_grad_of.lock()) {
            AutogradMeta &meta = *retained->autograd;
            std::lock_guard lock(meta.mutex);
            meta.grad = meta.grad.defined() ? add(meta.grad, grad) : owned_gradient(grad);
        }
        // A slice's gradient goes into the slice of its input's gradient so far, in place, when
        // nothing else sees that tensor: split's pieces (char_gpt's q, k and v) then fill one
        // buffer instead of each making zeros of the whole input and adding them.
        if (node->next.size() == 1 && node->next[0]) {
            auto slot = pending.find(node->next[0].get());
            if (slot != pending.end() && unshared(slot->second) && node->accumulate_into(grad, slot->second)) continue;
        }
        std::vector<Tensor> grads = node->apply(grad);
        for (std::size_t i = 0; i < node->next.size() && i < grads.size(); ++i) {
            Node *child = node->next[i].get();
            if (!child || !grads[i].defined()) continue;
            Tensor &slot = pending[child];
            slot = slot.defined() ? add(slot, grads[i]) : grads[i];
        }
    }
    if (!retain_graph)
        for (Node *node : order) {
            node->release();
            node->saved.clear();
        }
}

}  // namespace tinyfin
