// What every part of the vulkan plugin shares: failures as exceptions inside the plugin (turned
// into a tf_status and a message at the ABI boundary), the core's logging and environment, the
// Vulkan loader library and the instance with its compute-capable physical devices.
#pragma once

#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit/errors.hpp>
#include <tinyfin/plugin_kit/library.hpp>

#include "vk_handles.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tf_vk {

// ---- Failures --------------------------------------------------------------------------------

// Failures are the plugin kit's: the ops code throws them too.
using tf_kit::Failure;
using tf_kit::raise;

// "VK_ERROR_OUT_OF_DEVICE_MEMORY", ...
const char *result_name(VkResult result) noexcept;
// The ABI status for a failed Vulkan call: memory -> OUT_OF_MEMORY, device lost -> DEVICE_LOST.
tf_status status_of(VkResult result) noexcept;
// Throws "<what>: <result name>" with status_of(result) unless result is VK_SUCCESS.
void check(VkResult result, const char *what);

// ---- The core's services: the plugin kit's (include/tinyfin/plugin_kit/errors.hpp) --------------

using tf_kit::get_env;
using tf_kit::log_line;

// ---- Loader, instance, physical devices ---------------------------------------------------------

// The Vulkan loader (libvulkan.so.1 unless TINYFIN_VULKAN_LOADER names another file), opened
// with dlopen at run time: the plugin has no link-time dependency on it. volk's function
// pointers point into it while it is open.
class LoaderLibrary {
public:
    // Opens the library and initialises volk; false, with why, when there is no loader.
    bool open(std::string &why);

private:
    tf_kit::LibraryHandle handle_;
};

struct ComputeDevice {
    VkPhysicalDevice physical;
    // A queue family with VK_QUEUE_COMPUTE_BIT, preferring one without graphics.
    uint32_t queue_family;
};

// An instance for compute (Vulkan 1.1 when the loader offers it; *api_version receives the
// version asked for). Throws a failure naming the VkResult.
InstanceHandle create_instance(uint32_t *api_version);

// Every physical device with a compute queue: discrete, integrated, virtual, others, then CPU
// (emulated) devices, each group in the driver's order.
std::vector<ComputeDevice> find_compute_devices(VkInstance instance);

}  // namespace tf_vk
