// The cuda plugin: tensors in device memory, ops as cuBLAS (matmul), cuDNN (convolutions) and the
// plugin's own kernels (everything else it supports), all queued on one stream per device.
//
// Files, in the order a call meets them: plugin.cpp (this: CUDA errors, the table, the entry
// point), device.cpp (probe, init, devices, features), memory.cpp (caching allocator, buffers),
// ops.cpp (supports and run), matmul.cpp, conv.cpp, and the kernels in elementwise.cu,
// reduce.cu and nn.cu behind kernels.hpp.
//
// Load-time work: none of the plugin's own. nvcc and the static CUDA runtime add ELF
// constructors that register the kernel images with the runtime; they make no driver call (the
// driver is loaded by probe's cudaGetDeviceCount), so R2's intent holds (README.md).
#include <cstdio>
#include <type_traits>

#include "context.hpp"

#ifndef TF_CUDA_VERSION
#define TF_CUDA_VERSION "0.1.0"
#endif

namespace tf_cuda {

// ---- CUDA errors ------------------------------------------------------------------------------------------

tf_status status_of(cudaError_t error) noexcept {
    switch (error) {
    case cudaErrorMemoryAllocation: return TF_STATUS_OUT_OF_MEMORY;
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorNoKernelImageForDevice: return TF_STATUS_UNAVAILABLE;
    // Sticky errors: the context is unusable, every later call fails the same way.
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorDevicesUnavailable: return TF_STATUS_DEVICE_LOST;
    default: return TF_STATUS_INTERNAL;
    }
}

tf_status cuda_fail(tf_error *err, const char *what, cudaError_t error) noexcept {
    return fail(err, status_of(error), "%s: %s (%d): %s", what, cudaGetErrorName(error), static_cast<int>(error),
                cudaGetErrorString(error));
}

tf_status CudaPlugin::synchronize(int32_t index, tf_error *err) {
    Device *device = device_at(index, err);
    if (!device) return TF_STATUS_INVALID_ARGUMENT;
    std::lock_guard lock(device->mutex);
    if (cudaError_t e = make_current(*device); e != cudaSuccess) return cuda_fail(err, "synchronize: cudaSetDevice", e);
    if (cudaError_t e = cudaStreamSynchronize(device->stream.get()); e != cudaSuccess)
        return cuda_fail(err, "synchronize", e);
    return take_data_error(*device, err);
}

namespace {

// ---- Plugin table -----------------------------------------------------------------------------------------

// Above blas (10) and the GPU APIs that also reach NVIDIA hardware: on an NVIDIA GPU this is the
// backend to use.
constexpr tf_plugin k_plugin = tf_kit::plugin_table<CudaPlugin>("cuda", TF_CUDA_VERSION, 100);

}  // namespace
}  // namespace tf_cuda

// ---- Entry point ------------------------------------------------------------------------------------------

TF_KIT_PLUGIN_ENTRY(tf_cuda::k_plugin);
