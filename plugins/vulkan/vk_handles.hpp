// One owner for every Vulkan object: move-only wrappers that destroy their handle exactly once.
// Device-level objects remember the VkDevice that created them; the owner of the VkDevice
// (device_handle) must outlive them, which member order in `device` guarantees.
#ifndef TINYFIN_VULKAN_HANDLES_HPP
#define TINYFIN_VULKAN_HANDLES_HPP

#include <volk.h>

#include <utility>

namespace tf_vk {

template <class Handle, void (*Destroy)(VkDevice, Handle)>
class device_object {
public:
    device_object() noexcept = default;
    device_object(VkDevice device, Handle handle) noexcept : device_(device), handle_(handle) {}
    device_object(device_object &&other) noexcept
        : device_(other.device_), handle_(std::exchange(other.handle_, Handle{})) {}
    device_object &operator=(device_object &&other) noexcept {
        if (this != &other) {
            reset();
            device_ = other.device_;
            handle_ = std::exchange(other.handle_, Handle{});
        }
        return *this;
    }
    device_object(const device_object &) = delete;
    device_object &operator=(const device_object &) = delete;
    ~device_object() { reset(); }

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

using buffer_handle = device_object<VkBuffer, destroy::buffer>;
using memory_handle = device_object<VkDeviceMemory, destroy::memory>;
using shader_module_handle = device_object<VkShaderModule, destroy::shader_module>;
using set_layout_handle = device_object<VkDescriptorSetLayout, destroy::set_layout>;
using pipeline_layout_handle = device_object<VkPipelineLayout, destroy::pipeline_layout>;
using pipeline_handle = device_object<VkPipeline, destroy::pipeline>;
using pipeline_cache_handle = device_object<VkPipelineCache, destroy::pipeline_cache>;
using command_pool_handle = device_object<VkCommandPool, destroy::command_pool>;
using descriptor_pool_handle = device_object<VkDescriptorPool, destroy::descriptor_pool>;
using fence_handle = device_object<VkFence, destroy::fence>;

// The VkDevice itself; waits for the device to go idle before destroying it.
class device_handle {
public:
    device_handle() noexcept = default;
    explicit device_handle(VkDevice device) noexcept : device_(device) {}
    device_handle(device_handle &&other) noexcept : device_(std::exchange(other.device_, VK_NULL_HANDLE)) {}
    device_handle &operator=(device_handle &&other) noexcept {
        if (this != &other) {
            reset();
            device_ = std::exchange(other.device_, VK_NULL_HANDLE);
        }
        return *this;
    }
    device_handle(const device_handle &) = delete;
    device_handle &operator=(const device_handle &) = delete;
    ~device_handle() { reset(); }

    void reset() noexcept {
        if (device_ == VK_NULL_HANDLE) return;
        vkDeviceWaitIdle(device_);
        vkDestroyDevice(device_, nullptr);
        device_ = VK_NULL_HANDLE;
    }
    VkDevice get() const noexcept { return device_; }

private:
    VkDevice device_ = VK_NULL_HANDLE;
};

class instance_handle {
public:
    instance_handle() noexcept = default;
    explicit instance_handle(VkInstance instance) noexcept : instance_(instance) {}
    instance_handle(instance_handle &&other) noexcept : instance_(std::exchange(other.instance_, VK_NULL_HANDLE)) {}
    instance_handle &operator=(instance_handle &&other) noexcept {
        if (this != &other) {
            reset();
            instance_ = std::exchange(other.instance_, VK_NULL_HANDLE);
        }
        return *this;
    }
    instance_handle(const instance_handle &) = delete;
    instance_handle &operator=(const instance_handle &) = delete;
    ~instance_handle() { reset(); }

    void reset() noexcept {
        if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
        instance_ = VK_NULL_HANDLE;
    }
    VkInstance get() const noexcept { return instance_; }

private:
    VkInstance instance_ = VK_NULL_HANDLE;
};

}  // namespace tf_vk

#endif
