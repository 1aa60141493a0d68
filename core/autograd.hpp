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
#include <vector>

#include "tensor_impl.hpp"
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
};

// grads of the op's inputs (undefined for inputs that need none) from the output's grad.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor &grad_output)>;

struct Node {
    const char *name = "";
    // One entry per op input: the node its gradient flows into, or null.
    std::vector<std::shared_ptr<Node>> next;
    virtual ~Node() = default;
    virtual std::vector<Tensor> apply(const Tensor &grad_output) = 0;
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

// Records out = op(inputs) when grad mode is on and an input needs a gradient.
// Returns out (with history attached when recorded).
Tensor record(const Tensor &out, std::initializer_list<const Tensor *> inputs, const char *name,
              BackwardFn backward);
// The same for a variable number of inputs (concat).
Tensor record_many(const Tensor &out, const std::vector<const Tensor *> &inputs, const char *name,
                   BackwardFn backward);

// Sums grad over broadcast axes so it has shape (the inverse of broadcasting to grad's shape).
Tensor sum_to(const Tensor &grad, const Shape &shape);

} // namespace tinyfin::detail
