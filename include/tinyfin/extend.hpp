// tinyfin — for libraries built on top of the core (tinyfin-dist): tensor memory handed to
// other libraries in place, writes from host memory, and autograd hooks.
//
// Kept out of tinyfin.hpp because ordinary programs need none of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tinyfin/tinyfin.hpp"

namespace tinyfin {

// Host address of the tensor's first element when its storage is host-addressable (cpu, blas),
// else nullptr (device memory: use copy_to_host / copy_from_host). Waits for the device's queued
// work first (nothing to wait for on cpu, whose ops are done when they return), so the memory
// may be read and written until the next op on it. The pointer lives as long as the storage.
void *host_data(const Tensor &tensor);

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

} // namespace tinyfin
