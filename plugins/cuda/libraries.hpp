// cuBLAS and cuDNN, opened with dlopen by probe so the plugin loads (and explains itself) on a
// machine without them, with the entry points the plugin uses as typed function pointers, and
// owners for the handles and descriptors they create.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>
#include <tinyfin/plugin_kit/library.hpp>

#include <cstddef>
#include <memory>

namespace tf_cuda {

// The sonames the plugin was built against: cuBLAS of CUDA 13 and cuDNN 9.
inline constexpr const char *cublas_soname = "libcublas.so.13";
inline constexpr const char *cudnn_soname = "libcudnn.so.9";

using LibraryPtr = tf_kit::LibraryHandle;

// Each member is the library function of the same name (cublas_v2.h maps cublasCreate to
// cublasCreate_v2 and so on), resolved by load_libraries.
#define TF_CUDA_CUBLAS_FUNCTIONS(X)                                                                                    \
    X(cublasCreate_v2)                                                                                                 \
    X(cublasDestroy_v2)                                                                                                \
    X(cublasSetStream_v2)                                                                                              \
    X(cublasSetMathMode)                                                                                               \
    X(cublasGetVersion_v2)                                                                                             \
    X(cublasGetStatusName)                                                                                             \
    X(cublasSgemmStridedBatched)

#define TF_CUDA_CUDNN_FUNCTIONS(X)                                                                                     \
    X(cudnnGetVersion)                                                                                                 \
    X(cudnnGetErrorString)                                                                                             \
    X(cudnnCreate)                                                                                                     \
    X(cudnnDestroy)                                                                                                    \
    X(cudnnSetStream)                                                                                                  \
    X(cudnnCreateTensorDescriptor)                                                                                     \
    X(cudnnDestroyTensorDescriptor)                                                                                    \
    X(cudnnSetTensor4dDescriptorEx)                                                                                    \
    X(cudnnCreateFilterDescriptor)                                                                                     \
    X(cudnnDestroyFilterDescriptor)                                                                                    \
    X(cudnnSetFilter4dDescriptor)                                                                                      \
    X(cudnnCreateConvolutionDescriptor)                                                                                \
    X(cudnnDestroyConvolutionDescriptor)                                                                               \
    X(cudnnSetConvolution2dDescriptor)                                                                                 \
    X(cudnnSetConvolutionGroupCount)                                                                                   \
    X(cudnnSetConvolutionMathType)                                                                                     \
    X(cudnnGetConvolutionForwardAlgorithm_v7)                                                                          \
    X(cudnnGetConvolutionForwardWorkspaceSize)                                                                         \
    X(cudnnConvolutionForward)                                                                                         \
    X(cudnnGetConvolutionBackwardDataAlgorithm_v7)                                                                     \
    X(cudnnGetConvolutionBackwardDataWorkspaceSize)                                                                    \
    X(cudnnConvolutionBackwardData)                                                                                    \
    X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                                                                   \
    X(cudnnGetConvolutionBackwardFilterWorkspaceSize)                                                                  \
    X(cudnnConvolutionBackwardFilter)

struct Cublas {
#define TF_CUDA_MEMBER(name) decltype(&::name) name = nullptr;
    TF_CUDA_CUBLAS_FUNCTIONS(TF_CUDA_MEMBER)
#undef TF_CUDA_MEMBER
    // The library's C function; cublas_api.h adds a C++ overload with the pre-11 compute type.
    cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                 const void *, const void *, cudaDataType, int, long long int,
                                                 const void *, cudaDataType, int, long long int, const void *, void *,
                                                 cudaDataType, int, long long int, int, cublasComputeType_t,
                                                 cublasGemmAlgo_t) = nullptr;
};

struct Cudnn {
#define TF_CUDA_MEMBER(name) decltype(&::name) name = nullptr;
    TF_CUDA_CUDNN_FUNCTIONS(TF_CUDA_MEMBER)
#undef TF_CUDA_MEMBER
};

// Both libraries, open for the life of the plugin after a successful probe.
struct Libraries {
    LibraryPtr cublas_handle;
    LibraryPtr cudnn_handle;
    Cublas cublas;
    Cudnn cudnn;
};

// Opens both libraries and resolves every function. On failure returns false with a message
// such as "cuBLAS not found: libcublas.so.13: cannot open shared object file: ..." in message
// and leaves nothing open.
bool load_libraries(Libraries &libs, char *message, size_t size);

// "CUBLAS_STATUS_NOT_SUPPORTED" (or the number when the name is unknown).
const char *cublas_status_name(const Cublas &api, cublasStatus_t status);

// ---- Owners ---------------------------------------------------------------------------------------

// A deleter calling Destroy, the library function loaded by load_libraries (not called when it
// was not loaded): HandlePtr<cudnnTensorStruct, cudnnDestroyTensorDescriptor>(d, {api.cudnnDestroyTensorDescriptor}).
template <auto &Destroy>
struct LoadedDestroy {
    decltype(&Destroy) destroy = nullptr;
    template <class Handle>
    void operator()(Handle handle) const noexcept {
        if (destroy) destroy(handle);
    }
};
template <class Struct, auto &Destroy>
using HandlePtr = std::unique_ptr<Struct, LoadedDestroy<Destroy>>;

using CublasPtr = HandlePtr<cublasContext, ::cublasDestroy_v2>;
using CudnnPtr = HandlePtr<cudnnContext, ::cudnnDestroy>;
using TensorDescriptorPtr = HandlePtr<cudnnTensorStruct, ::cudnnDestroyTensorDescriptor>;
using FilterDescriptorPtr = HandlePtr<cudnnFilterStruct, ::cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptorPtr = HandlePtr<cudnnConvolutionStruct, ::cudnnDestroyConvolutionDescriptor>;

}  // namespace tf_cuda
