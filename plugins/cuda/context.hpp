// Private to the cuda plugin's host code: the plugin context (one per process, created by init,
// destroyed by shutdown), each device's stream, handles and memory, and the helpers every file
// uses. Nothing here crosses the ABI.
//
// Ownership: every CUDA, cuBLAS and cuDNN object has one owner, a unique_ptr with a deleter (or
// a member of one); Context owns the devices, each Device owns what it created. The context is
// a plain pointer set by init: a global with a destructor would need a static constructor.
//
// Threading: each Device has a mutex. Every member that touches a device (buffers, run,
// synchronize) holds its mutex for the whole call, so the stream, the handles, the caching
// allocator and the conv plan cache see one thread at a time.
#pragma once

#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit.hpp>

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "kernels.hpp"
#include "libraries.hpp"

struct tf_buffer;

namespace tf_cuda {

// ---- Errors and logging -----------------------------------------------------------------------------

// fail(), log_line(), guarded(), op_name(), dtype_name(), dtype_size(), numel(), is_contiguous()
// and the rest of include/tinyfin/plugin_kit.hpp.
using namespace tf_kit;

// "<what>: cudaErrorMemoryAllocation (2): out of memory", with the status that fits the error.
tf_status cuda_fail(tf_error *err, const char *what, cudaError_t error) noexcept;
// The status a CUDA error maps to: OUT_OF_MEMORY, DEVICE_LOST (sticky errors) or INTERNAL.
tf_status status_of(cudaError_t error) noexcept;

// ---- Owners of CUDA objects ------------------------------------------------------------------------

struct StreamDestroy {
    void operator()(cudaStream_t stream) const noexcept { cudaStreamDestroy(stream); }
};
using StreamPtr = std::unique_ptr<CUstream_st, StreamDestroy>;

struct EventDestroy {
    void operator()(cudaEvent_t event) const noexcept { cudaEventDestroy(event); }
};
using EventPtr = std::unique_ptr<CUevent_st, EventDestroy>;

struct DeviceFree {
    void operator()(void *p) const noexcept { cudaFree(p); }
};
using DeviceMemoryPtr = std::unique_ptr<void, DeviceFree>;

struct HostFree {
    void operator()(void *p) const noexcept { cudaFreeHost(p); }
};
using PinnedMemoryPtr = std::unique_ptr<void, HostFree>;

// ---- Memory -----------------------------------------------------------------------------------------

// A caching allocator for one device: freed blocks go to a free list per size class and are
// handed out again before any new cudaMalloc, so a training loop stops calling cudaMalloc after
// its first step. Size classes: powers of two from 512 bytes to 1 MiB, then multiples of 2 MiB.
// A block returned while kernels still use it is safe to reuse at once: every use of the device
// goes through its one stream, so later work that receives the block runs after the earlier
// work is done. Not thread-safe: the device mutex guards it.
class Allocator {
public:
    Allocator() = default;
    Allocator(const Allocator &) = delete;
    Allocator &operator=(const Allocator &) = delete;
    ~Allocator();

    static uint64_t size_class(uint64_t size);
    // A block of size_class(size) bytes, or cudaErrorMemoryAllocation after the cache was
    // released and cudaMalloc still failed.
    cudaError_t allocate(uint64_t size, void **out);
    // Takes a block from allocate() back into the cache.
    void release(void *block, uint64_t size);
    // cudaFree of every cached block (cudaFree waits for the device).
    void release_cache();

    uint64_t cached_bytes() const { return cached_bytes_; }
    uint64_t live_bytes() const { return live_bytes_; }
    uint64_t peak_bytes() const { return peak_bytes_; }
    uint64_t cuda_mallocs() const { return mallocs_; }

private:
    std::map<uint64_t, std::vector<void *>> free_;
    uint64_t cached_bytes_ = 0, live_bytes_ = 0, peak_bytes_ = 0, mallocs_ = 0;
};

// A pinned host buffer for transfers and the event of the last copy that used it.
struct StagingSlot {
    PinnedMemoryPtr host;
    EventPtr done;
};

struct Device;

// Gives a block back to the allocator it came from.
struct AllocatorRelease {
    Allocator *allocator = nullptr;
    uint64_t size = 0;
    void operator()(void *block) const noexcept { allocator->release(block, size); }
};

// Device memory for the length of one op (cuDNN workspace, dense copies): back to the cache when
// it goes out of scope, which is safe while kernels still use it (see Allocator).
class Scratch {
public:
    // Size 0 gives a null pointer and OK.
    cudaError_t allocate(Device &device, uint64_t size);
    void *get() const { return block_.get(); }

private:
    std::unique_ptr<void, AllocatorRelease> block_;
};

// ---- Devices ----------------------------------------------------------------------------------------

// cuDNN descriptors of one convolution shape (packed NCHW) and, per direction, the algorithm
// chosen for it, its math type and workspace bytes (conv.cpp).
struct ConvPlan {
    TensorDescriptorPtr x, y;
    FilterDescriptorPtr w;
    ConvolutionDescriptorPtr conv;
    bool forward_ready = false, data_ready = false, filter_ready = false;
    cudnnConvolutionFwdAlgo_t forward_algo{};
    cudnnConvolutionBwdDataAlgo_t data_algo{};
    cudnnConvolutionBwdFilterAlgo_t filter_algo{};
    cudnnMathType_t forward_math{}, data_math{}, filter_math{};
    size_t forward_workspace = 0, data_workspace = 0, filter_workspace = 0;
};

struct Device {
    int index = 0;
    cudaDeviceProp prop{};
    // Compute capability as 10 * major + minor (86 for sm_86).
    int capability = 0;
    std::mutex mutex;
    // Every kernel, copy and library call of this device, in order.
    StreamPtr stream;
    CublasPtr blas;
    CudnnPtr dnn;
    Allocator allocator;
    // Transfers go through these in turn; a slot is reused after its last copy completed.
    std::vector<StagingSlot> staging;
    size_t next_slot = 0;
    // Mapped pinned memory the kernels report bad indices into (kernels.hpp).
    PinnedMemoryPtr data_error_memory;
    DataError *data_error = nullptr;  // host address
    DataError *data_error_device = nullptr;  // the same memory as kernels address it
    // cuDNN descriptors and algorithms per convolution shape (conv.cpp).
    std::map<std::vector<int64_t>, std::unique_ptr<ConvPlan>> conv_plans;
    // Buffers the core has not freed yet: shutdown frees them (the core skips buffer_free for
    // tensors that outlive the registry).
    std::unordered_set<tf_buffer *> live_buffers;

    ~Device();
};

struct Context {
    Libraries libs;
    std::vector<std::unique_ptr<Device>> devices;
    // TINYFIN_CUDA_TF32=1: f32 matmul and convolution may use TF32 tensor cores.
    bool allow_tf32 = false;
};

// The context (set by init).
extern Context *g_context;
// Libraries probe loaded, handed to the context by init.
extern Libraries *g_probed_libraries;

// The device for index, or NULL (with err filled) when there is no such device.
Device *device_at(int32_t index, tf_error *err) noexcept;

// Makes the device current on the calling thread (CUDA keeps that per thread).
cudaError_t make_current(const Device &device) noexcept;

// After the stream drained: reports (and clears) a data error a kernel recorded.
tf_status take_data_error(Device &device, tf_error *err) noexcept;

// ---- Buffers ----------------------------------------------------------------------------------------

}  // namespace tf_cuda

// The ABI's opaque buffer: one block of the device's caching allocator.
struct tf_buffer {
    tf_cuda::Device *device;
    void *ptr;
    // Bytes the core asked for; reads, writes and copies stay inside them.
    uint64_t size;
};

namespace tf_cuda {

// The plugin's members, by their tf_plugin names (tf_kit::plugin_table builds the table in
// plugin.cpp): device.cpp the backend, devices and features; memory.cpp the buffers; ops.cpp
// supports and run; plugin.cpp synchronize.
struct CudaPlugin {
    static tf_status probe(tf_error *err);
    static tf_status init(tf_error *err);
    static void shutdown();
    static int32_t device_count();
    static tf_status device_info(int32_t device, tf_device_info *info, tf_error *err);
    static tf_status buffer_alloc(int32_t device, uint64_t size, tf_buffer **out, tf_error *err);
    static void buffer_free(tf_buffer *buffer);
    static tf_status buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err);
    static tf_status buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err);
    static tf_status buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset,
                                 uint64_t size, tf_error *err);
    static int32_t supports(int32_t device, const tf_op_desc *op);
    static tf_status run(int32_t device, const tf_op_desc *op, tf_error *err);
    // Waits for the device's queue, then reports a bad index a kernel found since the last wait.
    static tf_status synchronize(int32_t device, tf_error *err);
    static void list_features(tf_feature_fn emit, void *user);
};

// Creates the staging slots of a device (init).
cudaError_t create_staging(Device &device);

// ---- Ops --------------------------------------------------------------------------------------------

// A tensor's device address: its buffer's block plus the byte offset.
inline void *address_of(const tf_tensor_desc &t) {
    return t.buffer ? static_cast<char *>(t.buffer->ptr) + t.offset : nullptr;
}

// matmul.cpp: the exact cases cublas*StridedBatched can run without copies; run assumes supports.
bool matmul_supported(const Device &device, const tf_op_desc &op);
tf_status matmul_run(Device &device, const tf_op_desc &op, tf_error *err);

// conv.cpp: conv2d, conv2d_grad_input, conv2d_grad_weight through cuDNN.
bool conv_supported(const Device &device, const tf_op_desc &op);
// Op: TF_OP_CONV2D, TF_OP_CONV2D_GRAD_INPUT or TF_OP_CONV2D_GRAD_WEIGHT (instantiated in conv.cpp).
template <uint32_t Op>
tf_status conv_run(Device &device, const tf_op_desc &op, tf_error *err);
// Frees the cached cuDNN descriptors of a device (shutdown).
void release_conv_plans(Device &device);

// quant.cpp: dequantize, embedding_q and matmul_q on quant.cu's kernels (matmul_q's many-row f32
// products through dequantized tiles and cuBLAS).
tf_status dequantize_run(Device &device, const tf_op_desc &op, tf_error *err);
tf_status embedding_q_run(Device &device, const tf_op_desc &op, tf_error *err);
tf_status matmul_q_run(Device &device, const tf_op_desc &op, tf_error *err);

// Fills t with zeros on the device's stream.
tf_status zero_fill(Device &device, const tf_tensor_desc &t, tf_error *err);

}  // namespace tf_cuda
