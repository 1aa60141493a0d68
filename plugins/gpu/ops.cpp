// The whole table of the shared GPU kernels (the families' rows in order) and the limits every
// kernel shares.
#include "ops.hpp"

#include <vector>

namespace tf_gpu {

namespace {

// A tensor the kernels can address: a dtype they know, and an extent one storage-buffer binding
// can hold (with room for aligning the binding's start). check_op has checked sizes and strides.
bool tensor_fits(const DeviceCaps &caps, const tf_tensor_desc &t) {
    // A block-quantized tensor is bound as bytes (ops_quant.cpp); extent_of counts its bytes.
    const uint64_t size = tf_kit::is_quantized(t.dtype) ? 1 : element_size(t.dtype);
    if (size == 0) return false;
    const tf_kit::Extent e = tf_kit::extent_of(t);
    if (e.empty) return true;
    // The bound range starts at the tensor's first element, aligned down to bind_align.
    const uint64_t bytes = e.last_byte - t.offset + size;
    return bytes + caps.bind_align + 4 <= caps.max_binding && e.count < (int64_t{1} << 31);
}

}  // namespace

std::span<const KernelRow> kernels() {
    // Made on first use (a plugin runs no code at dlopen), then read by every thread.
    static const std::vector<KernelRow> rows = [] {
        std::vector<KernelRow> all;
        for (std::span<const KernelRow> family : {elementwise_kernels(), reduce_kernels(), scan_kernels(),
                                                  gemm_kernels(), nn_kernels(), optim_kernels(), quant_kernels()})
            all.insert(all.end(), family.begin(), family.end());
        return all;
    }();
    return rows;
}

bool fits(const KernelDevice &dev, const tf_op_desc &op) {
    if (op.n_inputs + op.n_outputs > tensor_slots) return false;
    for (uint32_t i = 0; i < op.n_inputs; ++i)
        if (!tf_kit::is_absent(op.inputs[i]) && !tensor_fits(dev.caps(), op.inputs[i])) return false;
    for (uint32_t i = 0; i < op.n_outputs; ++i)
        if (!tensor_fits(dev.caps(), op.outputs[i]) || !tf_kit::is_dense(op.outputs[i])) return false;
    return true;
}

}  // namespace tf_gpu
