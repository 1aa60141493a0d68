// Helpers shared by the op files: placement, output allocation, axis handling.
#pragma once

#include <string>
#include <vector>

#include "autograd.hpp"
#include "dispatch.hpp"
#include "errors.hpp"
#include "op_table.hpp"
#include "tensor_impl.hpp"

namespace tinyfin::detail {

// A rank-0 constant of like's dtype on like's device, shared by every use of the same value: for
// operands inside the core (tensor-scalar operators, backward rules), never handed to the caller.
Tensor constant_like(const Tensor &like, double value);

// A new contiguous tensor on like's device.
inline Tensor empty_like_device(const Tensor &like, const Shape &shape, DType dtype) {
    const TensorImpl &impl = *like.impl();
    return make_tensor(*impl.storage->backend, impl.storage->device, shape, dtype);
}

inline bool is_float(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }
inline bool is_integer(DType d) { return d == DType::i32 || d == DType::i64; }

// Axis in [0, rank); throws ShapeError naming op otherwise.
int normalize_axis(int64_t axis, int rank, const char *op);
// Bit mask of axes (all axes when empty); rejects repeats.
uint32_t axes_mask(const Shape &shape, const Axes &axes, const char *op);
// The input shape with masked axes set to 1, and with them removed.
Shape keep_shape(const Shape &shape, uint32_t mask);
Shape drop_shape(const Shape &shape, uint32_t mask);

// Brings defined operands to their common device (see common_device()); under
// MixedDevices::strict only cpu scalars move, and operands on two devices are a DeviceError
// naming op.
void place_together(std::initializer_list<Tensor *> operands, const char *op);

// sum_to(matmul(a, b), shape) for a [..., M, K] and b [..., K, N] (rank >= 2, batch axes
// broadcast) with the summed batch axes folded into K: one product, rounded once (ops_reduce.cpp).
Tensor matmul_sum_to(const Tensor &a, const Tensor &b, const Shape &shape);

}  // namespace tinyfin::detail
