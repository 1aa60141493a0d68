// One OpenCL device: its context and in-order queue, device-resident buffers (one cl_mem per
// tf_buffer), the compiled programs and the kernels' status words.
//
// Execution model. Every ABI call on a device holds the device's mutex (OpenCL objects are
// thread-safe, but clSetKernelArg on a shared kernel and the plugin's own bookkeeping are not).
// An op enqueues its kernels at once on the one in-order queue and flushes it, so commands run
// in issue order without events: a freed buffer is released at once (OpenCL keeps it alive until
// the commands using it have finished), a host write is a non-blocking copy from a staging copy
// the plugin keeps until the next wait. The host waits (clFinish) only in buffer_read and
// synchronize, and when staged writes pile up.
#pragma once

#include <tinyfin/plugin_kit/gpu/reported_ops.hpp>

#include "cl_api.hpp"
#include "kernel_device.hpp"
#include "ops.hpp"
#include "shaders_embedded.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <span>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tf_cl {

using tf_gpu::DeviceCaps;
using tf_gpu::PipelineKey;
using tf_gpu::raise;
using tf_gpu::Shader;
using tf_gpu::tensor_slots;
using tf_gpu::TensorBinding;

void log_message(int32_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// The core's environment (tf_host_api.get_env), or nullptr.
const char *environment(const char *name);

// Throws a failure naming what was called and the OpenCL error; out-of-memory codes become
// TF_STATUS_OUT_OF_MEMORY.
void check(cl_int code, const char *what, const char *label);

// One owner per OpenCL object: Release is the ClApi member that releases it (clReleaseMemObject,
// ...), called through the api the handle was made with: MemHandle(memory, {&api}).
template <auto Release>
struct ClRelease {
    const ClApi *api;
    template <class Object>
    void operator()(Object object) const noexcept {
        (api->*Release)(object);
    }
};
template <class Object, auto Release>
using ClHandle = std::unique_ptr<std::remove_pointer_t<Object>, ClRelease<Release>>;
using MemHandle = ClHandle<cl_mem, &ClApi::clReleaseMemObject>;
using ProgramHandle = ClHandle<cl_program, &ClApi::clReleaseProgram>;
using KernelHandle = ClHandle<cl_kernel, &ClApi::clReleaseKernel>;
using QueueHandle = ClHandle<cl_command_queue, &ClApi::clReleaseCommandQueue>;
using ContextHandle = ClHandle<cl_context, &ClApi::clReleaseContext>;

// A device found by enumeration.
struct DeviceTarget {
    cl_platform_id platform;
    cl_device_id id;
    std::string platform_name;
};

// Every GPU, accelerator and CPU device of every platform. Empty, with why, when none.
std::vector<DeviceTarget> find_devices(const ClApi &api, std::string &why);

class ClBlastLibrary;

// Start-up costs and counters shown by tinyfin-info.
struct DeviceCounters {
    double context_ms = 0;
    double build_ms = 0;  // programs built from source, in total
    uint64_t built = 0;  // programs built from source
    uint64_t cached = 0;  // programs loaded from the binary cache
    uint64_t dispatches = 0;
    uint64_t gemm_library = 0;  // matmuls run by CLBlast
    uint64_t waits = 0;
};

class Device final : public tf_gpu::KernelDevice {
public:
    // Makes the context and queue. Throws a failure.
    static std::unique_ptr<Device> create(int index, const ClApi &api, const DeviceTarget &target,
                                          const ClBlastLibrary *blas);
    ~Device();
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;

    // Locks the device for one ABI call from this thread; the status of the kernels that thread
    // issues is kept for it.
    std::unique_lock<std::mutex> enter() {
        std::unique_lock<std::mutex> lock(mutex_);
        caller_ = std::this_thread::get_id();
        return lock;
    }

    const DeviceCaps &caps() const noexcept override { return caps_; }
    const char *label() const noexcept { return label_.c_str(); }
    void info(tf_device_info &out) const;
    // Under enter().
    void list_features(tf_feature_fn emit, void *user) const;

    // ---- Buffers (under enter()) ----
    tf_buffer *allocate(uint64_t size) override;
    void free(tf_buffer *buffer) noexcept override;
    void write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size) override;
    void read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size);
    // Enqueues the copy and flushes the queue.
    void copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size);
    void synchronize();

    // ---- Kernels (tf_gpu::KernelDevice, under enter()) ----
    TensorBinding bind(const tf_tensor_desc &tensor, const char *op, const char *role, uint32_t index) override;
    void dispatch(const tf_gpu::DispatchArgs &args) override;
    // The device's kernel rows: matmul through CLBlast first when it is loaded, then every row
    // of plugins/gpu whose shader has an OpenCL C port (shaders/opencl/). Immutable, read
    // without the lock.
    std::span<const tf_gpu::KernelRow> kernels() const noexcept { return rows_; }
    // Submits what was enqueued (the end of an op: the shell's after_op).
    void flush();

private:
    Device(const ClApi &api) : api_(api) {}
    void start(const DeviceTarget &target);
    cl_kernel kernel_for(const PipelineKey &key);
    void save_binary(cl_program program, const std::string &path) noexcept;
    // Runs a matmul through CLBlast; false (nothing enqueued) where it refuses the operands.
    bool run_matmul_library(const tf_op_desc &op);
    // The row of run_matmul_library, with the own kernel's row for what CLBlast refuses.
    static tf_gpu::KernelRow matmul_library_row();
    // clFinish, then the status words are read and kept for the threads that issued them.
    void wait_all();
    void throw_reported();
    cl_mem memory_of(tf_buffer *buffer) const;

    const ClApi &api_;
    const ClBlastLibrary *blas_ = nullptr;
    std::vector<tf_gpu::KernelRow> rows_;
    int index_ = 0;
    std::string label_;
    DeviceCaps caps_{};
    // Immutable after start().
    std::string name_, vendor_, driver_, version_, platform_, c_version_, extensions_;
    bool software_ = false;
    uint64_t memory_total_ = 0, max_alloc_ = 0, local_memory_ = 0;
    cl_uint compute_units_ = 0;
    cl_device_id target_id_ = nullptr;
    size_t max_group_ = 0;

    std::mutex mutex_;
    // Everything below is used under mutex_.
    std::string cache_dir_;  // program binaries, found at the first build; "" when there is nowhere to put them
    DeviceCounters counters_;
    ContextHandle context_{nullptr, {nullptr}};
    QueueHandle queue_{nullptr, {nullptr}};
    MemHandle status_{nullptr, {nullptr}};  // word 0: kernels that never report; i + 1: i-th reporting dispatch
    std::map<PipelineKey, std::pair<ProgramHandle, KernelHandle>> kernels_;
    uint64_t allocated_ = 0;  // bytes in live buffers, bounded by the device's global memory
    // Freed buffers kept for reuse by size (a training step frees and allocates the same sizes
    // every step; pocl maps fresh memory for each new cl_mem), at most max_cached_bytes.
    std::multimap<uint64_t, cl_mem> cached_;
    uint64_t cached_bytes_ = 0;
    void drop_cache() noexcept;
    std::unordered_set<tf_buffer *> live_;
    std::vector<std::vector<char>> staged_;  // host writes in flight, freed at the next wait
    uint64_t staged_bytes_ = 0;
    std::thread::id caller_;
    std::vector<std::pair<const char *, std::thread::id>> reports_;
    tf_kit::gpu::ReportedOps reported_;
};

}  // namespace tf_cl

struct tf_buffer {
    tf_cl::Device *owner;
    cl_mem memory;  // owned: released by Device::free
    // Bytes the core asked for.
    uint64_t size;
};
