// Descriptor helpers the op families share: element sizes, merged axes, 32-bit division by
// multiplication (the shaders' tf_div), workgroup counts, and the descriptor of a step inside an
// op.
#pragma once

#include "kernel_device.hpp"

#include <cstdint>

namespace tf_gpu {

// Bytes per element of the dtypes the kernels handle (all six); 0 for the others.
uint64_t element_size(int32_t dtype);
// f32, f16 or bf16: the kernels load f16 and bf16 as f32, compute in f32 and round once on store.
inline bool is_float(int32_t dtype) { return dtype == TF_DTYPE_F32 || dtype == TF_DTYPE_F16 || dtype == TF_DTYPE_BF16; }

// Axes of one shape walked by several tensors (each with its own strides), with size-1 axes
// dropped and neighbours merged where every tensor's strides allow it.
struct MergedAxes {
    int rank = 0;
    int64_t shape[TF_MAX_RANK] = {};
    int64_t strides[5][TF_MAX_RANK] = {};
};
// At most 5 tensors.
MergedAxes merge_axes(int rank, const int64_t *shape, const int64_t *const *strides, int tensors);

// d as tf_div's multiplier and shifts (shaders/common.glsl): n / d == tf_div(n, m, s) for every
// 32-bit n, d >= 1.
struct Magic {
    uint32_t m, s;
};
Magic magic_of(uint32_t d);

// Workgroups for a grid-stride loop over items, per_group items each, at most the device's
// limit and 65535.
uint32_t groups_for(const DeviceCaps &caps, uint64_t items, uint32_t per_group);

// The descriptor of op (a step inside another op: a sum, a cast, a fill) with one input, in (none
// when in is nullptr), and one output.
inline tf_op_desc step_desc(uint32_t op, const tf_tensor_desc *in, const tf_tensor_desc &out,
                            const void *params = nullptr) {
    tf_op_desc d{};
    d.struct_size = sizeof d;
    d.op = op;
    d.n_inputs = in ? 1 : 0;
    d.n_outputs = 1;
    d.inputs = in ? in : &out;
    d.outputs = &out;
    d.params = params;
    return d;
}

}  // namespace tf_gpu
