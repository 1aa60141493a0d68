// matmul (f32, f16, bf16) and conv2d on cuda through tinyfin against the same work on raw cuBLAS
// and cuDNN (same math: exact f32, no TF32, f16/bf16 accumulating in f32; cuDNN's v7 heuristic
// algorithm, as the plugin picks), so the plugin's overhead (dispatch, allocation, descriptors)
// shows as a ratio. Built always, run by
// scripts/gpu-check on a machine with a GPU.
//
//   gpu-bench [--quick]
#include <tinyfin/tinyfin.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace tinyfin;

namespace {

#define CHECK_CUDA(x)                                                                                                  \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                                              \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)
#define CHECK_BLAS(x)                                                                                                  \
    do {                                                                                                               \
        cublasStatus_t s_ = (x);                                                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                             \
            std::fprintf(stderr, "%s: %s\n", #x, cublasGetStatusString(s_));                                           \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)
#define CHECK_DNN(x)                                                                                                   \
    do {                                                                                                               \
        cudnnStatus_t s_ = (x);                                                                                        \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                                              \
            std::fprintf(stderr, "%s: %s\n", #x, cudnnGetErrorString(s_));                                             \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)

// Median seconds per call of fn over reps calls (after warm-up), each batch of calls timed with
// sync before and after.
double time_it(const std::function<void()> &fn, const std::function<void()> &sync, int reps) {
    for (int i = 0; i < 3; ++i) fn();
    sync();
    std::vector<double> samples;
    for (int round = 0; round < 5; ++round) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) fn();
        sync();
        samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
}

void device_sync() { CHECK_CUDA(cudaDeviceSynchronize()); }

struct DeviceBuffer {
    void *p = nullptr;
    explicit DeviceBuffer(size_t bytes) {
        CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
        CHECK_CUDA(cudaMemset(p, 0, bytes));  // zeros: no NaN or denormal slow paths
    }
    ~DeviceBuffer() { cudaFree(p); }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

// f32 against cublasSgemm; f16 and bf16 against cublasGemmEx with f32 accumulation
// (CUBLAS_COMPUTE_32F), the call the plugin makes.
void bench_matmul(int n, int reps, DType dtype) {
    const Device cuda{"cuda", 0};
    Tensor a = cast(rand({n, n}, 1), dtype).to(cuda), b = cast(rand({n, n}, 2), dtype).to(cuda);
    const double ours = time_it([&] { (void)matmul(a, b); }, [] { synchronize(); }, reps);

    cublasHandle_t handle;
    CHECK_BLAS(cublasCreate(&handle));
    CHECK_BLAS(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
    const size_t element = dtype == DType::f32 ? sizeof(float) : 2;
    DeviceBuffer da(element * n * n), db(element * n * n), dc(element * n * n);
    const float alpha = 1, beta = 0;
    const cudaDataType_t type = dtype == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
    const double raw = time_it(
        [&] {
            if (dtype == DType::f32)
                CHECK_BLAS(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, static_cast<float *>(db.p), n,
                                       static_cast<float *>(da.p), n, &beta, static_cast<float *>(dc.p), n));
            else
                CHECK_BLAS(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, db.p, type, n, da.p, type, n,
                                        &beta, dc.p, type, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        },
        device_sync, reps);
    cublasDestroy(handle);
    const double flops = 2.0 * n * n * n;
    std::printf("matmul %-4s %5dx%5d: tinyfin %8.3f ms (%7.1f GFLOP/s)  cuBLAS %8.3f ms (%7.1f GFLOP/s)  ratio %.2f\n",
                std::string(dtype_name(dtype)).c_str(), n, n, ours * 1e3, flops / ours * 1e-9, raw * 1e3,
                flops / raw * 1e-9, ours / raw);
}

struct ConvShape {
    const char *name;
    int n, c, h, w, o, k, pad;
};

void bench_conv(const ConvShape &s, int reps) {
    const Device cuda{"cuda", 0};
    Tensor x = rand({s.n, s.c, s.h, s.w}, 3).to(cuda), w = rand({s.o, s.c, s.k, s.k}, 4).to(cuda);
    Conv2dOptions o;
    o.pad_h = o.pad_w = s.pad;
    const double ours = time_it([&] { (void)conv2d(x, w, Tensor(), o); }, [] { synchronize(); }, reps);

    cudnnHandle_t handle;
    CHECK_DNN(cudnnCreate(&handle));
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    CHECK_DNN(cudnnCreateTensorDescriptor(&xd));
    CHECK_DNN(cudnnCreateTensorDescriptor(&yd));
    CHECK_DNN(cudnnCreateFilterDescriptor(&wd));
    CHECK_DNN(cudnnCreateConvolutionDescriptor(&cd));
    const int oh = s.h + 2 * s.pad - s.k + 1, ow = s.w + 2 * s.pad - s.k + 1;
    CHECK_DNN(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w));
    CHECK_DNN(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.o, oh, ow));
    CHECK_DNN(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.o, s.c, s.k, s.k));
    CHECK_DNN(cudnnSetConvolution2dDescriptor(cd, s.pad, s.pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CHECK_DNN(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    CHECK_DNN(
        cudnnGetConvolutionForwardAlgorithm_v7(handle, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
    int pick = 0;
    while (pick < count && perf[pick].status != CUDNN_STATUS_SUCCESS) ++pick;
    size_t ws = 0;
    CHECK_DNN(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, cd, yd, perf[pick].algo, &ws));
    DeviceBuffer dx(sizeof(float) * s.n * s.c * s.h * s.w), dw(sizeof(float) * s.o * s.c * s.k * s.k),
        dy(sizeof(float) * s.n * s.o * oh * ow), dws(ws);
    const float alpha = 1, beta = 0;
    const double raw = time_it(
        [&] {
            CHECK_DNN(cudnnConvolutionForward(handle, &alpha, xd, dx.p, wd, dw.p, cd, perf[pick].algo, dws.p, ws, &beta,
                                              yd, dy.p));
        },
        device_sync, reps);
    cudnnDestroyConvolutionDescriptor(cd);
    cudnnDestroyFilterDescriptor(wd);
    cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroy(handle);
    const double flops = 2.0 * s.n * s.o * oh * ow * s.c * s.k * s.k;
    std::printf("conv2d %-24s: tinyfin %8.3f ms (%7.1f GFLOP/s)  cuDNN %8.3f ms (%7.1f GFLOP/s)  ratio %.2f\n", s.name,
                ours * 1e3, flops / ours * 1e-9, raw * 1e3, flops / raw * 1e-9, ours / raw);
}

}  // namespace

int main(int argc, char **argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const auto names = available_backends();
    if (std::find(names.begin(), names.end(), "cuda") == names.end()) {
        std::printf("gpu-bench: cuda is not available here\n");
        return 77;
    }
    for (int n : {256, 1024, 4096}) {
        if (quick && n > 1024) continue;
        for (DType dtype : {DType::f32, DType::f16, DType::bf16}) bench_matmul(n, n >= 4096 ? 5 : 50, dtype);
    }
    const ConvShape shapes[] = {
        {"fmnist conv1 64x1x28x28", 64, 1, 28, 28, 32, 3, 1},
        {"fmnist conv2 64x32x14x14", 64, 32, 14, 14, 64, 3, 1},
        {"resnet 32x64x56x56", 32, 64, 56, 56, 64, 3, 1},
    };
    for (const ConvShape &s : shapes) bench_conv(s, quick ? 5 : 30);
    return 0;
}
