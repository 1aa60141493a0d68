// Reverse-mode autograd: graph nodes, recording, and the backward engine.
//
// Every op that produced a tensor needing a gradient records a Node holding a
// closure that maps the output's gradient to its inputs' gradients using only
// dispatched ops, so backward runs on the tensors' device.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "tensor_impl.hpp"
#include "tinyfin/extend.hpp"
#include "tinyfin/tinyfin.hpp"

namespace tinyfin::detail {

struct Node;

// Per-tensor autograd state; absent for tensors that never need a gradient.
struct AutogradMeta {
    bool requires_grad = false;
    // The op that produced the tensor; null for leaves.
    std::shared_ptr<Node> grad_fn;
    // Leaves only: guards grad and accumulator. Forward and backward passes on several threads
    // may share a leaf (one model, several threads): each accumulates into the same grad.
    std::mutex mutex;
    // Leaves only: the accumulated gradient.
    Tensor grad;
    // Leaves only: the node that accumulates into grad (shared by every use of the leaf).
    std::weak_ptr<Node> accumulator;
    // Leaves only: register_post_accumulate_grad_hook's hooks with their ids, in order.
    std::vector<std::pair<uint64_t, GradHook>> grad_hooks;
};

// grads of the op's inputs (undefined for inputs that need none) from the output's grad.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor &grad_output)>;

// A tensor a backward rule keeps (its detach() in the rule's factory): its storage and the
// storage's version then. Held until backward releases the graph.
struct SavedVersion {
    std::shared_ptr<const Storage> storage;
    uint64_t version;
    Shape shape;
};

struct Node {
    const char *name = "";
    // One entry per op input: the node its gradient flows into, or null.
    std::vector<std::shared_ptr<Node>> next;
    // The tensors the rule saved; the engine refuses to run it when one was written in place
    // since (its values are no longer the forward pass's).
    std::vector<SavedVersion> saved;
    // retain_grad(): the non-leaf tensor whose gradient (the one this node receives) is kept.
    std::weak_ptr<TensorImpl> retains_grad_of;
    virtual ~Node() = default;
    virtual std::vector<Tensor> apply(const Tensor &grad_output) = 0;
    // (optional) For a node with one input whose gradient is grad_output placed into zeros (a
    // slice's): adds grad_output into `into`, the gradient summed so far for that input, which
    // nothing else references, and returns true. false (the default): the engine calls apply()
    // and adds its result to `into`.
    virtual bool accumulate_into(const Tensor &grad_output, Tensor &into) {
        (void)grad_output;
        (void)into;
        return false;
    }
    // Drops saved tensors once backward is done (unless the graph is retained).
    virtual void release() {}
};

inline bool needs_grad(const Tensor &t) {
    return t.defined() && t.impl()->autograd && t.impl()->autograd->requires_grad;
}
// Inside a backward rule: whether the rule's input i needs a gradient (false for a constant, a
// detached tensor or an integer index); rules skip the gradients nobody receives. Outside
// backward: true.
bool input_needs_grad(std::size_t i);
bool any_needs_grad(std::initializer_list<const Tensor *> tensors);

// While a rule's factory runs, Tensor::detach() notes each tensor it detaches as saved.
class SavingScope {
public:
    SavingScope();
    ~SavingScope();
    SavingScope(const SavingScope &) = delete;
    SavingScope &operator=(const SavingScope &) = delete;
    std::vector<SavedVersion> take() { return std::move(saved_); }

private:
    std::vector<SavedVersion> saved_;
    std::vector<SavedVersion> *previous_;
};
// detach()'s hook: notes t when a SavingScope is open on this thread.
void note_saved(const TensorImpl &t);

// Attaches history to out = op(inputs) when grad mode is on and an input needs a gradient;
// returns out. The backward closure comes from a factory, called only then: an op written
//   return record(out, {&a, &b}, "mul", [&] { return [a = a.detach(), ...](const Tensor &g) {...}; });
// builds no detached handles, no captured shapes and no std::function in inference, and needs
// no guard of its own.
Tensor record_function(const Tensor &out, const std::vector<const Tensor *> &inputs, const char *name,
                       BackwardFn backward, std::vector<SavedVersion> saved = {});
template <typename Factory>
requires std::is_invocable_v<Factory &> Tensor record(const Tensor &out, std::initializer_list<const Tensor *> inputs,
                                                      const char *name, Factory &&make_backward) {
    if (!any_needs_grad(inputs)) return out;
    SavingScope saving;
    BackwardFn backward(make_backward());
    return record_function(out, std::vector<const Tensor *>(inputs), name, std::move(backward), saving.take());
}
// The same for a variable number of inputs (concat).
template <typename Factory>
requires std::is_invocable_v<Factory &> Tensor record_many(const Tensor &out, const std::vector<const Tensor *> &inputs,
                                                           const char *name, Factory &&make_backward) {
    bool any = false;
    for (const Tensor *t : inputs) any = any || needs_grad(*t);
    if (!any || !grad_enabled()) return out;
    SavingScope saving;
    BackwardFn backward(make_backward());
    return record_function(out, inputs, name, std::move(backward), saving.take());
}

// The same with a node of the caller's own type (a Node subclass overriding apply and, for
// example, accumulate_into), made by make_node only when history is recorded.
Tensor attach_node(const Tensor &out, std::initializer_list<const Tensor *> inputs, const char *name,
                   std::shared_ptr<Node> node);
template <typename Factory>
requires std::is_invocable_v<Factory &> Tensor record_node(const Tensor &out,
                                                           std::initializer_list<const Tensor *> inputs,
                                                           const char *name, Factory &&make_node) {
    if (!any_needs_grad(inputs)) return out;
    SavingScope saving;
    std::shared_ptr<Node> node = make_node();
    node->saved = saving.take();
    return attach_node(out, inputs, name, std::move(node));
}

// Records an in-place write of src into target's elements (assign_ while grad mode is on and
// target or src needs a gradient): target's history (or, for a view, its base's) becomes the
// write, as PyTorch's copy_. Called after the write. AutogradError for a leaf that requires grad
// (or a view of one).
void record_overwrite(const Tensor &target, const Tensor &src);
// Refuses an in-place write into a leaf that requires grad (or a view of one) while grad mode
// is on; op names the write in the message.
void check_inplace_allowed(const Tensor &target, const char *op);

// Sums grad over broadcast axes so it has shape (the inverse of broadcasting to grad's shape).
Tensor sum_to(const Tensor &grad, const Shape &shape);

}  // namespace tinyfin::detail
