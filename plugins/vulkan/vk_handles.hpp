// One owner for every Vulkan object: move-only wrappers that destroy their handle exactly once.
// Device-level objects remember the VkDevice that created them; the owner of the VkDevice
// (DeviceHandle) must outlive them, which member order in `device` guarantees.
#pragma once

#include <volk.h>

#include <utility>

#include <tinyfin/plugin_kit/gpu/unique_handle.hpp>

namespace tf_vk {

template <class Handle, void (*Destroy)(VkDevice, Handle)>
class DeviceObject {
public:
    DeviceObject() noexcept = default;
    DeviceObject(VkDevice device, Handle handle) noexcept : device_(device), handle_(handle) {}
    DeviceObject(DeviceObject &&other) noexcept
        : device_(other.device_), handle_(std::exchange(other.handle_, Handle{})) {}
    DeviceObject &operator=(DeviceObject &&other) noexcept {
        if (this != &other) {
            reset();
            device_ = other.device_;
            handle_ = std::exchange(other.handle_, Handle{});
        }
        return *this;
    }
    DeviceObject(const DeviceObject &) = delete;
    DeviceObject &operator=(const DeviceObject &) = delete;
    ~DeviceObject() { reset(); }

    void reset() noexcept {
        if (handle_ != Handle{}) Destroy(device_, handle_);
        handle_ = Handle{};
    }
    Handle get() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != Handle{}; }

private:
    VkDevice device_ = VK_NULL_HANDLE;
    Handle handle_{};
};

namespace destroy {
inline void buffer(VkDevice d, VkBuffer h) { vkDestroyBuffer(d, h, nullptr); }
inline void memory(VkDevice d, VkDeviceMemory h) { vkFreeMemory(d, h, nullptr); }
inline void shader_module(VkDevice d, VkShaderModule h) { vkDestroyShaderModule(d, h, nullptr); }
inline void set_layout(VkDevice d, VkDescriptorSetLayout h) { vkDestroyDescriptorSetLayout(d, h, nullptr); }
inline void pipeline_layout(VkDevice d, VkPipelineLayout h) { vkDestroyPipelineLayout(d, h, nullptr); }
inline void pipeline(VkDevice d, VkPipeline h) { vkDestroyPipeline(d, h, nullptr); }
inline void pipeline_cache(VkDevice d, VkPipelineCache h) { vkDestroyPipelineCache(d, h, nullptr); }
inline void command_pool(VkDevice d, VkCommandPool h) { vkDestroyCommandPool(d, h, nullptr); }
inline void descriptor_pool(VkDevice d, VkDescriptorPool h) { vkDestroyDescriptorPool(d, h, nullptr); }
inline void fence(VkDevice d, VkFence h) { vkDestroyFence(d, h, nullptr); }
}  // namespace destroy

using BufferHandle = DeviceObject<VkBuffer, destroy::buffer>;
using MemoryHandle = DeviceObject<VkDeviceMemory, destroy::memory>;
using ShaderModuleHandle = DeviceObject<VkShaderModule, destroy::shader_module>;
using SetLayoutHandle = DeviceObject<VkDescriptorSetLayout, destroy::set_layout>;
using PipelineLayoutHandle = DeviceObject<VkPipelineLayout, destroy::pipeline_layout>;
using PipelineHandle = DeviceObject<VkPipeline, destroy::pipeline>;
using PipelineCacheHandle = DeviceObject<VkPipelineCache, destroy::pipeline_cache>;
using CommandPoolHandle = DeviceObject<VkCommandPool, destroy::command_pool>;
using DescriptorPoolHandle = DeviceObject<VkDescriptorPool, destroy::descriptor_pool>;
using FenceHandle = DeviceObject<VkFence, destroy::fence>;

// The VkDevice itself: waits for the device to go idle before destroying it.
inline void destroy_device(VkDevice device) {
    vkDeviceWaitIdle(device);
    vkDestroyDevice(device, nullptr);
}
inline void destroy_instance(VkInstance instance) { vkDestroyInstance(instance, nullptr); }

using DeviceHandle = tf_kit::gpu::UniqueHandle<VkDevice, destroy_device>;
using InstanceHandle = tf_kit::gpu::UniqueHandle<VkInstance, destroy_instance>;

}  // namespace tf_vk
