// One Vulkan device: its queue, memory pools, pipelines and the batches of recorded work.
//
// Execution model. Every op records one or a few dispatches into the current batch (a command
// buffer with its own descriptor pool and parameter buffer); a batch is submitted once it holds
// enough work or when the host must wait: buffer_read and synchronize. A global compute/transfer
// memory barrier follows every command, so dependent dispatches see each other's writes. Each
// buffer remembers the serial of the last batch that used it: a buffer freed while its batch
// runs is released when that batch has finished, and a host write to a busy buffer goes through
// a queued staging copy instead of waiting.
#pragma once

#include <tinyfin/plugin_kit/gpu/reported_ops.hpp>

#include "kernel_device.hpp"
#include "memory.hpp"

#include <array>
#include <compare>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tf_vk {

using tf_gpu::DeviceCaps;
using tf_gpu::DispatchArgs;
using tf_gpu::key_of;
using tf_gpu::PipelineKey;
using tf_gpu::Shader;
using tf_gpu::shader_count;
using tf_gpu::tensor_slots;
using tf_gpu::TensorBinding;

class Device final : public tf_gpu::KernelDevice {
public:
    // Creates the VkDevice and everything the plugin keeps on it. Throws a failure.
    static std::unique_ptr<Device> create(int index, const ComputeDevice &where, uint32_t instance_api);
    ~Device();
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;

    // Serialises every member below except caps(), label() and info(): the ABI may call from
    // any thread.
    std::mutex mutex;

    const DeviceCaps &caps() const noexcept override { return caps_; }
    // "vulkan:0 (llvmpipe (LLVM 15.0.6, 256 bits))", for messages.
    const char *label() const noexcept { return label_.c_str(); }
    void info(tf_device_info &out) const;
    void list_features(tf_feature_fn emit, void *user) const;

    // ---- Buffers ----
    tf_buffer *allocate(uint64_t size) override;
    // Releases at once when idle, else when the last batch using the buffer has finished.
    void free(tf_buffer *buffer) noexcept override;
    void write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size) override;
    // Waits for the work that uses the buffer, then copies out.
    void read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size);
    void copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size);
    // Submits and waits for everything recorded so far.
    void synchronize();

    // ---- Recording ----
    // The binding of a tensor whose buffer belongs to this device. Throws INVALID_ARGUMENT,
    // naming op and role ("input 1"), when the view does not lie inside its buffer.
    TensorBinding bind(const tf_tensor_desc &tensor, const char *op, const char *role, uint32_t index) override;
    // Records one kernel launch (tf_gpu::DispatchArgs).
    void dispatch(const DispatchArgs &args) override;
    // Throws DEVICE_LOST once a Vulkan call reported the device lost.
    void throw_if_lost() const;

private:
    struct Batch {
        CommandPoolHandle pool;
        VkCommandBuffer commands = VK_NULL_HANDLE;  // freed with pool
        FenceHandle done;
        DescriptorPoolHandle descriptors;
        Allocation params;  // host-visible, mapped
        uint64_t params_used = 0;
        uint32_t sets_used = 0;
        uint32_t commands_recorded = 0;
        uint64_t serial = 0;
        enum class State { idle, recording, submitted } state = State::idle;
        VkPipeline bound = VK_NULL_HANDLE;
        // Ranges to release when the batch has finished (staging copies, temporaries).
        std::vector<std::pair<MemoryPool *, Allocation>> temporaries;
        // One status word per dispatch whose kernel may report bad data (bind_align apart,
        // mapped), and for each the op and the thread that recorded it: the error goes to that
        // thread, not to whichever thread waits next.
        Allocation status;
        std::vector<std::pair<const char *, std::thread::id>> reports;
    };

    Device() = default;
    void create_pools(const VkPhysicalDeviceMemoryProperties &memory);
    void create_layouts();
    void create_batches();
    void load_pipeline_cache();
    void save_pipeline_cache() noexcept;
    VkPipeline pipeline_for(const PipelineKey &key);

    bool busy(const tf_buffer *buffer) const noexcept { return buffer->last_use > completed_; }
    // The batch recording now, begun if needed; submitted and replaced first when it has no room
    // for params_size more bytes of parameters and one more descriptor set.
    Batch &recording(size_t params_size);
    // The recording batch, which releases range (a staging copy, a temporary) once it has
    // finished; when there is none to be had, range is released at once and the failure thrown.
    Batch &recording_with(MemoryPool &pool, Allocation range);
    void begin(Batch &b);
    void submit(Batch &b);
    void barrier(Batch &b);
    // Waits until every batch up to serial has finished (submitting the recording one if needed).
    void wait_for(uint64_t serial);
    void retire(Batch &b);
    void poll() noexcept;
    void check_result(VkResult result, const char *what);
    // Throws INVALID_ARGUMENT for bad data the kernels of ops this thread recorded reported.
    void throw_reported();
    void release_now(tf_buffer *buffer) noexcept;

    int index_ = 0;
    std::string label_;
    VkPhysicalDevice physical_ = VK_NULL_HANDLE;
    VkPhysicalDeviceProperties props_{};
    uint32_t instance_api_ = 0;
    DeviceCaps caps_{};
    uint32_t heap_index_ = 0;
    uint64_t heap_size_ = 0;
    bool has_budget_ = false;
    std::string uuid_;
    std::string driver_;
    bool host_visible_ = false;  // tensors live in mapped memory: host copies need no staging
    std::string cache_path_;

    // Declared first so it is destroyed last: everything below was created from it.
    DeviceHandle device_;
    VkQueue queue_ = VK_NULL_HANDLE;
    uint32_t family_ = 0;
    std::unique_ptr<MemoryPool> device_pool_;  // tensors
    std::unique_ptr<MemoryPool> host_pool_;  // staging, parameters, status: mapped
    Allocation status_;  // one word in host_pool_
    SetLayoutHandle set_layout_;
    PipelineLayoutHandle pipeline_layout_;
    PipelineCacheHandle pipeline_cache_;
    bool cache_dirty_ = false;
    std::map<PipelineKey, PipelineHandle> pipelines_;
    std::array<Batch, 3> batches_;
    size_t current_ = 0;
    uint64_t next_serial_ = 1;
    uint64_t completed_ = 0;
    // Buffers freed while busy: (serial of their last batch, buffer).
    std::vector<std::pair<uint64_t, tf_buffer *>> deferred_;
    // Every buffer not yet freed by the core, released at shutdown.
    std::unordered_set<tf_buffer *> live_;
    // Ops whose kernels reported bad data in finished batches, comma-separated, by the thread
    // that recorded them; thrown at that thread's next read or synchronize.
    tf_kit::gpu::ReportedOps reported_;
    bool lost_ = false;
};

}  // namespace tf_vk
