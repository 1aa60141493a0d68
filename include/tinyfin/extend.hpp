// tinyfin — for libraries built on top of the core (tinyfin-dist): writes from host memory and
// autograd hooks.
//
// Kept out of tinyfin.hpp because ordinary programs need none of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tinyfin/tinyfin.hpp"

namespace tinyfin {

// A hint that t's memory changes from now on only through tinyfin (ops, assign_, copy_from_host),
// never through host_data(), numpy views or DLPack: its backend may keep forms prepared from it
// and refresh them on those writes (the cpu plugin packs a constant matmul B once instead of on
// every call; get_proc("buffer_mark_constant"), docs/plugin-abi.md). Backends without such forms
// ignore it. libtinyfin-onnx marks the constants its graphs read.
void mark_constant(const Tensor &t);

// Host memory of a host-addressable tensor: Tensor::host_data() (tinyfin.hpp).

// Writes bytes of row-major data over the elements of a contiguous tensor, on its device (the
// inverse of Tensor::copy_to_host), after the tensor's queued ops. Not recorded by autograd,
// like assign_: a tensor that requires grad needs NoGradGuard. A non-contiguous tensor or a
// wrong byte count is a ValueError.
void copy_from_host(const Tensor &tensor, const void *src, std::size_t bytes);

// Called with the leaf after backward() has accumulated a gradient into its grad(): once per
// backward, when every use of the leaf has contributed (PyTorch's
// register_post_accumulate_grad_hook). Runs on the thread running backward, under NoGradGuard;
// an exception it throws leaves backward. Hooks run in registration order.
using GradHook = std::function<void(const Tensor &leaf)>;
// Leaves only (AutogradError otherwise). Returns an id for remove_post_accumulate_grad_hook.
uint64_t register_post_accumulate_grad_hook(const Tensor &leaf, GradHook hook);
// Removes a hook of this leaf; an unknown id is ignored.
void remove_post_accumulate_grad_hook(const Tensor &leaf, uint64_t id);

// ---- Autograd introspection (Python's Tensor.grad_fn, retain_grad) --------------------------

namespace detail {
struct Node;
}

// A handle to the autograd node that recorded a tensor (PyTorch's grad_fn): empty for a leaf.
// Holding it keeps that part of the graph alive, as holding the output tensor does.
class GradFn {
public:
    GradFn() = default;
    explicit GradFn(std::shared_ptr<detail::Node> node) : node_(std::move(node)) {}
    bool defined() const { return node_ != nullptr; }
    // The op's name ("mul", "matmul", "accumulate_grad" for a leaf's accumulator).
    std::string name() const;
    // One entry per op input: the node its gradient flows into (empty when it needs none).
    std::vector<GradFn> next() const;
    // Identity of the node (two handles to one node compare equal).
    const void *id() const { return node_.get(); }

private:
    std::shared_ptr<detail::Node> node_;
};

// The node that recorded t; empty for a leaf or a tensor without history.
GradFn grad_fn(const Tensor &t);
// Makes backward() also accumulate the gradient that reaches t into t.grad() though t is not a
// leaf (PyTorch's retain_grad); a leaf keeps its gradient anyway. t must require grad
// (AutogradError otherwise). Gradients flowing through t's current node count, whether the uses
// of t came before or after the call.
void retain_grad(const Tensor &t);

}  // namespace tinyfin
