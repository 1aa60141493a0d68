// tinyfin — for libraries built on top of the core (tinyfin-dist): writes from host memory and
// autograd hooks.
//
// Kept out of tinyfin.hpp because ordinary programs need none of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tinyfin/tinyfin.hpp"

namespace tinyfin {

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

}  // namespace tinyfin
