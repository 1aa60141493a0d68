// Backend and devices: probe (driver, devices, libraries), init (a stream, cuBLAS and cuDNN
// handles, staging buffers per device), shutdown, device queries and tinyfin-info features.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "context.hpp"

namespace tf_cuda {

Context *g_context = nullptr;
Libraries *g_probed_libraries = nullptr;

namespace {

// Architectures the build carries code for (plugins/cuda/meson.build, option nvcc_arch).
#ifndef TF_CUDA_ARCHS
#define TF_CUDA_ARCHS "sm_75 sm_80 sm_86 sm_89 sm_90 compute_90"
#endif
constexpr const char *built_archs = TF_CUDA_ARCHS;

// "13.0" from 13000: how cudaRuntimeGetVersion and cudaDriverGetVersion pack versions.
std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// The device's 16-byte UUID as 32 lower-case hex digits: the bytes Vulkan reports as
// VkPhysicalDeviceIDProperties::deviceUUID, written the way the vulkan plugin writes them, so one
// GPU seen by both plugins has one id.
void format_uuid(const cudaUUID_t &uuid, char *dst, size_t size) {
    const auto *b = reinterpret_cast<const unsigned char *>(uuid.bytes);
    size_t used = 0;
    for (int i = 0; i < 16 && used + 2 < size; ++i) used += std::snprintf(dst + used, size - used, "%02x", b[i]);
}

tf_status device_fail(tf_error *err, const Device &device, const char *what, cudaError_t error) {
    char context[TF_TEXT_SIZE];
    std::snprintf(context, sizeof context, "init: device %d (%s, sm_%d): %s", device.index, device.prop.name,
                  device.capability, what);
    return cuda_fail(err, context, error);
}

// Everything one device needs before its first op. Leaves the device current.
tf_status open_device(Context &context, Device &device, tf_error *err) {
    if (cudaError_t e = cudaGetDeviceProperties(&device.prop, device.index); e != cudaSuccess)
        return cuda_fail(err, "init: cudaGetDeviceProperties", e);
    device.capability = device.prop.major * 10 + device.prop.minor;
    if (cudaError_t e = make_current(device); e != cudaSuccess) return device_fail(err, device, "cudaSetDevice", e);
    // cudaFuncGetAttributes fails when the build has no code this GPU can run (older than the
    // oldest built architecture, or a driver too old to compile the PTX).
    if (cudaError_t e = probe_kernels(); e != cudaSuccess)
        return device_fail(err, device, "the plugin's kernels cannot run on this GPU (built for " TF_CUDA_ARCHS ")", e);
    cudaStream_t stream = nullptr;
    if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess)
        return device_fail(err, device, "cudaStreamCreateWithFlags", e);
    device.stream.reset(stream);

    const Cublas &blas = context.libs.cublas;
    cublasHandle_t blas_handle = nullptr;
    if (cublasStatus_t s = blas.cublasCreate_v2(&blas_handle); s != CUBLAS_STATUS_SUCCESS)
        return fail(err, TF_STATUS_UNAVAILABLE, "init: device %d (%s): cublasCreate failed: %s", device.index,
                    device.prop.name, cublas_status_name(blas, s));
    device.blas = CublasPtr(blas_handle, {blas.cublasDestroy_v2});
    if (cublasStatus_t s = blas.cublasSetStream_v2(blas_handle, stream); s != CUBLAS_STATUS_SUCCESS)
        return fail(err, TF_STATUS_INTERNAL, "init: cublasSetStream failed: %s", cublas_status_name(blas, s));
    // Default math is exact f32; TF32 tensor cores only when the user asked for them.
    blas.cublasSetMathMode(blas_handle, context.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);

    const Cudnn &dnn = context.libs.cudnn;
    cudnnHandle_t dnn_handle = nullptr;
    if (cudnnStatus_t s = dnn.cudnnCreate(&dnn_handle); s != CUDNN_STATUS_SUCCESS)
        return fail(err, TF_STATUS_UNAVAILABLE, "init: device %d (%s): cudnnCreate failed: %s", device.index,
                    device.prop.name, dnn.cudnnGetErrorString(s));
    device.dnn = CudnnPtr(dnn_handle, {dnn.cudnnDestroy});
    if (cudnnStatus_t s = dnn.cudnnSetStream(dnn_handle, stream); s != CUDNN_STATUS_SUCCESS)
        return fail(err, TF_STATUS_INTERNAL, "init: cudnnSetStream failed: %s", dnn.cudnnGetErrorString(s));

    if (cudaError_t e = create_staging(device); e != cudaSuccess)
        return device_fail(err, device, "pinned staging buffers", e);
    void *mapped = nullptr;
    if (cudaError_t e = cudaHostAlloc(&mapped, sizeof(DataError), cudaHostAllocMapped | cudaHostAllocPortable);
        e != cudaSuccess)
        return device_fail(err, device, "cudaHostAlloc of the error slot", e);
    device.data_error_memory.reset(mapped);
    std::memset(mapped, 0, sizeof(DataError));
    device.data_error = static_cast<DataError *>(mapped);
    void *mapped_device = nullptr;
    if (cudaError_t e = cudaHostGetDevicePointer(&mapped_device, mapped, 0); e != cudaSuccess)
        return device_fail(err, device, "cudaHostGetDevicePointer", e);
    device.data_error_device = static_cast<DataError *>(mapped_device);
    return TF_STATUS_OK;
}

}  // namespace

// ---- Helpers shared with the other files ------------------------------------------------------------

Device *device_at(int32_t index, tf_error *err) noexcept {
    Context *context = g_context;
    if (!context || index < 0 || static_cast<size_t>(index) >= context->devices.size()) {
        fail(err, TF_STATUS_INVALID_ARGUMENT, "no cuda device %d (there are %zu)", index,
             context ? context->devices.size() : size_t{0});
        return nullptr;
    }
    return context->devices[static_cast<size_t>(index)].get();
}

cudaError_t make_current(const Device &device) noexcept { return cudaSetDevice(device.index); }

tf_status take_data_error(Device &device, tf_error *err) noexcept {
    DataError *slot = device.data_error;
    if (!slot || slot->code == 0) return TF_STATUS_OK;
    const DataError seen = *slot;
    std::memset(slot, 0, sizeof *slot);
    return fail(err, TF_STATUS_INVALID_ARGUMENT,
                "%s on cuda:%d: index %lld is outside [0, %lld) (found by the kernel; reported at the next "
                "synchronisation)",
                op_name(seen.op), device.index, static_cast<long long>(seen.value), static_cast<long long>(seen.bound));
}

Device::~Device() {
    if (cudaSetDevice(index) != cudaSuccess) return;  // the driver is gone: nothing can be freed
    if (stream) cudaStreamSynchronize(stream.get());
    for (tf_buffer *buffer : live_buffers) {
        allocator.release(buffer->ptr, buffer->size);
        delete buffer;
    }
    live_buffers.clear();
    release_conv_plans(*this);
    staging.clear();
    allocator.release_cache();
}

// ---- Backend ----------------------------------------------------------------------------------------

tf_status CudaPlugin::probe(tf_error *err) {
    return guarded(err, "probe", [&]() -> tf_status {
        int count = 0;
        // Loads libcuda.so.1 and initialises the driver; creates no context.
        const cudaError_t e = cudaGetDeviceCount(&count);
        if (e != cudaSuccess) {
            const char *what = e == cudaErrorNoDevice ? "no CUDA device" : "CUDA driver not usable";
            return fail(err, TF_STATUS_UNAVAILABLE, "%s: %s (%d): %s", what, cudaGetErrorName(e), static_cast<int>(e),
                        cudaGetErrorString(e));
        }
        if (count <= 0) return fail(err, TF_STATUS_UNAVAILABLE, "no CUDA device: the driver reports 0 devices");
        auto libs = std::make_unique<Libraries>();
        char message[TF_TEXT_SIZE * 2];
        if (!load_libraries(*libs, message, sizeof message)) return fail(err, TF_STATUS_UNAVAILABLE, "%s", message);
        delete g_probed_libraries;
        g_probed_libraries = libs.release();
        return TF_STATUS_OK;
    });
}

tf_status CudaPlugin::init(tf_error *err) {
    return guarded(err, "init", [&]() -> tf_status {
        auto context = std::make_unique<Context>();
        if (g_probed_libraries) {
            context->libs = std::move(*g_probed_libraries);
            delete g_probed_libraries;
            g_probed_libraries = nullptr;
        } else {
            char message[TF_TEXT_SIZE * 2];
            if (!load_libraries(context->libs, message, sizeof message))
                return fail(err, TF_STATUS_UNAVAILABLE, "init: %s", message);
        }
        const char *tf32 = get_env("TINYFIN_CUDA_TF32");
        context->allow_tf32 = tf32 && std::strcmp(tf32, "1") == 0;

        int count = 0;
        if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
            return cuda_fail(err, "init: cudaGetDeviceCount", e);
        // Devices that cannot run the plugin are skipped with a warning; init fails only when none
        // is left, with the last device's reason.
        tf_status last = fail(err, TF_STATUS_UNAVAILABLE, "init: no CUDA device");
        for (int i = 0; i < count; ++i) {
            auto device = std::make_unique<Device>();
            device->index = i;
            tf_error why{};
            why.struct_size = sizeof why;
            last = open_device(*context, *device, &why);
            if (last != TF_STATUS_OK) {
                log_line(TF_LOG_WARN, "skipping device %d: %s", i, why.message);
                fail(err, last, "%s", why.message);
                continue;
            }
            context->devices.push_back(std::move(device));
        }
        if (context->devices.empty()) return last;
        log_line(TF_LOG_DEBUG, "%zu device(s), cuBLAS and cuDNN loaded, tf32 %s", context->devices.size(),
                 context->allow_tf32 ? "on" : "off");
        g_context = context.release();
        return TF_STATUS_OK;
    });
}

void CudaPlugin::shutdown() {
    Context *context = g_context;
    g_context = nullptr;
    // Devices first (their handles need the libraries), then the libraries.
    if (context) context->devices.clear();
    delete context;
}

// ---- Devices ----------------------------------------------------------------------------------------

int32_t CudaPlugin::device_count() { return g_context ? static_cast<int32_t>(g_context->devices.size()) : 0; }

tf_status CudaPlugin::device_info(int32_t index, tf_device_info *info, tf_error *err) {
    Device *device = device_at(index, err);
    if (!device) return TF_STATUS_INVALID_ARGUMENT;
    if (!info) return fail(err, TF_STATUS_INVALID_ARGUMENT, "device_info: info is NULL");
    std::lock_guard lock(device->mutex);
    size_t free_bytes = 0, total_bytes = 0;
    if (make_current(*device) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
        free_bytes = 0;
        total_bytes = device->prop.totalGlobalMem;
    }
    char uuid[TF_TEXT_SIZE] = "";
    format_uuid(device->prop.uuid, uuid, sizeof uuid);
    const int32_t kind = device->prop.integrated ? TF_DEVICE_KIND_GPU_INTEGRATED : TF_DEVICE_KIND_GPU_DISCRETE;
    tf_kit::copy_device_info(tf_kit::device_info_of(kind, total_bytes, free_bytes, device->prop.name, uuid), info);
    return TF_STATUS_OK;
}

void CudaPlugin::list_features(tf_feature_fn emit, void *user) {
    Context *context = g_context;
    if (!emit || !context) return;
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    emit(user, "cuda.runtime", (cuda_version_text(runtime) + " (static)").c_str());
    emit(user, "cuda.driver", cuda_version_text(driver).c_str());
    const size_t cudnn = context->libs.cudnn.cudnnGetVersion();
    emit(user, "cudnn",
         (std::to_string(cudnn / 10000) + "." + std::to_string(cudnn % 10000 / 100) + "." + std::to_string(cudnn % 100))
             .c_str());
    emit(user, "kernels", built_archs);
    emit(user, "tf32", context->allow_tf32 ? "on (TINYFIN_CUDA_TF32=1)" : "off");
    for (const auto &device : context->devices) {
        std::lock_guard lock(device->mutex);
        const std::string prefix = "device" + std::to_string(device->index) + ".";
        if (device == context->devices.front()) {
            int version = 0;
            if (context->libs.cublas.cublasGetVersion_v2(device->blas.get(), &version) == CUBLAS_STATUS_SUCCESS)
                emit(user, "cublas",
                     (std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
                      std::to_string(version % 100))
                         .c_str());
        }
        emit(user, (prefix + "compute_capability").c_str(),
             (std::to_string(device->prop.major) + "." + std::to_string(device->prop.minor)).c_str());
        char bus[32] = "";
        if (cudaDeviceGetPCIBusId(bus, sizeof bus, device->index) == cudaSuccess)
            emit(user, (prefix + "pci_bus_id").c_str(), bus);
        emit(user, (prefix + "multiprocessors").c_str(), std::to_string(device->prop.multiProcessorCount).c_str());
        emit(user, (prefix + "allocator_cached_bytes").c_str(),
             std::to_string(device->allocator.cached_bytes()).c_str());
        emit(user, (prefix + "allocator_cuda_mallocs").c_str(),
             std::to_string(device->allocator.cuda_mallocs()).c_str());
    }
}

}  // namespace tf_cuda
