// Running one op: on the operands' device when its plugin supports the exact
// descriptor, otherwise on cpu with copies to host and back.
#pragma once

#include <initializer_list>
#include <span>

#include "tensor_impl.hpp"

namespace tinyfin::detail {

// inputs and outputs must be on one device (the op layer moves them first) and
// in the canonical form the op's kind demands (see plugin.h).
void dispatch(tf_op op, std::initializer_list<Tensor> inputs, std::initializer_list<Tensor> outputs,
              const void *params = nullptr);
// The same for callers that hold the views already: no handle copies (refcount traffic) on the
// path of every small op. The caller keeps the operands alive for the call.
void dispatch(tf_op op, std::span<const TensorImpl *const> inputs, std::span<const TensorImpl *const> outputs,
              const void *params = nullptr);

// The descriptor a plugin receives for t (every member written, zeros beyond its rank).
void describe_tensor(const TensorImpl &t, tf_tensor_desc &desc);

// An optional input left out ('?' after its letter in ops.def's dtypes column), to pass in
// dispatch's inputs: a TensorImpl without storage, of the dtype and shape of the zeros that mean
// the same. Plugins of ABI 1.1 and later receive an absent descriptor (TF_TENSOR_ABSENT); for an
// older plugin dispatch writes one zero element on its device (once per thread and dtype, then
// kept) and describes it broadcast to that shape (strides 0), so no tensor of zeros is ever made
// for a current plugin.
TensorImpl absent_input(DType dtype, const Shape &shape);

// Runs op only where it runs without a fallback: on the device of output 0 when its plugin
// claims the descriptor, or on cpu in place when cpu claims it and every operand is memory the
// cpu plugin addresses (blas's). Returns false, with nothing run, otherwise: the caller then
// composes the op from ordinary ops on that device. For ops that have such a composition (the
// optimizer updates), so a missing kernel never costs a host round trip.
bool dispatch_if_claimed(tf_op op, std::span<const TensorImpl *const> inputs,
                         std::span<const TensorImpl *const> outputs, const void *params);
// Whether dispatch_if_claimed could run op with its output on like's device: that device's plugin
// claims the op's sample in dtype (op_samples.hpp's claims), or the memory is host memory and cpu
// claims it. Asked before allocating the output of a fused op, so that a backend that declines
// the op costs no allocation left unused.
bool may_claim(tf_op op, const TensorImpl &like, DType dtype);

// While alive, ops this thread dispatches are helper work the core does for the user's op (the
// contiguous copy of a host read-back, a constant operand): when their device's plugin does not
// claim them and every operand is memory the cpu plugin addresses in place (blas), they run on
// cpu even under TINYFIN_FALLBACK=error and are not counted as fallbacks. Operands on a device
// the cpu cannot address still fall back (and fail) as usual: that would be a real host trip.
class HelperScope {
public:
    HelperScope();
    ~HelperScope();
    HelperScope(const HelperScope &) = delete;
    HelperScope &operator=(const HelperScope &) = delete;

private:
    bool previous_;
};

// The device an op with these operands runs on: the operands' device when they agree,
// else the one whose backend ranks highest (plugin priority; cpu lowest).
Device common_device(std::initializer_list<const Tensor *> operands);

// Copies bytes between storages of any two backends (via host when needed), counting transfers.
void copy_bytes(Storage &dst, uint64_t dst_offset, Storage &src, uint64_t src_offset, uint64_t nbytes);

}  // namespace tinyfin::detail
