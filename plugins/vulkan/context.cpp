// Failures, the loader library, the instance and the search for compute devices.
#include "context.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "code_trust.hpp"

namespace tf_vk {

// ---- Failures --------------------------------------------------------------------------------

const char *result_name(VkResult result) noexcept {
    switch (result) {
#define TF_VK_RESULT(name)                                                                                             \
    case name: return #name;
        TF_VK_RESULT(VK_SUCCESS)
        TF_VK_RESULT(VK_NOT_READY)
        TF_VK_RESULT(VK_TIMEOUT)
        TF_VK_RESULT(VK_INCOMPLETE)
        TF_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
        TF_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        TF_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
        TF_VK_RESULT(VK_ERROR_DEVICE_LOST)
        TF_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
        TF_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
        TF_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
        TF_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
        TF_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
        TF_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
        TF_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
        TF_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
        TF_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
        TF_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        TF_VK_RESULT(VK_ERROR_FRAGMENTATION)
#undef TF_VK_RESULT
    default: return "VK_ERROR_UNKNOWN";
    }
}

tf_status status_of(VkResult result) noexcept {
    switch (result) {
    case VK_SUCCESS: return TF_STATUS_OK;
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
    case VK_ERROR_FRAGMENTATION: return TF_STATUS_OUT_OF_MEMORY;
    case VK_ERROR_DEVICE_LOST: return TF_STATUS_DEVICE_LOST;
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_INITIALIZATION_FAILED: return TF_STATUS_UNAVAILABLE;
    default: return TF_STATUS_INTERNAL;
    }
}

void check(VkResult result, const char *what) {
    if (result != VK_SUCCESS) raise(status_of(result), "%s: %s", what, result_name(result));
}

// ---- Loader ------------------------------------------------------------------------------------

bool LoaderLibrary::open(std::string &why) {
    if (handle_) return true;
    const char *override_path = get_env("TINYFIN_VULKAN_LOADER");
    const char *path = override_path && *override_path ? override_path : "libvulkan.so.1";
    // The default soname goes to the dynamic linker's own search, as a linked library would; a
    // path from the environment names code and passes the plugin trust rules (code_trust.hpp).
    if (path == override_path && path[0] == '/' && !tf_common::starts_with_proc(path) && access(path, F_OK) != 0) {
        why = std::string("no Vulkan loader (") + path + " not found)";
        return false;
    }
    if (path == override_path) {
        std::string resolved, problem;
        const tf_common::CodeVerdict verdict =
            tf_common::check_code_file(path, resolved, problem, "TINYFIN_VULKAN_LOADER file");
        const char *insecure = get_env("TINYFIN_ALLOW_INSECURE_PLUGINS");
        const bool allowed = insecure && *insecure && std::strcmp(insecure, "0") != 0;
        if (verdict == tf_common::CodeVerdict::not_a_file ||
            (verdict == tf_common::CodeVerdict::untrusted && !allowed)) {
            why = "TINYFIN_VULKAN_LOADER refused: " + problem +
                  (verdict == tf_common::CodeVerdict::untrusted
                       ? " (or set TINYFIN_ALLOW_INSECURE_PLUGINS=1 to load it anyway)"
                       : "");
            return false;
        }
        if (verdict == tf_common::CodeVerdict::untrusted)
            log_line(TF_LOG_WARN, "loading despite: %s (TINYFIN_ALLOW_INSECURE_PLUGINS)", problem.c_str());
    }
    handle_.reset(dlopen(path, RTLD_NOW | RTLD_LOCAL));
    if (!handle_) {
        const char *text = dlerror();
        why = std::string("no Vulkan loader (") + path + " not found)";
        if (text) log_line(TF_LOG_DEBUG, "dlopen: %s", text);
        return false;
    }
    auto get_proc = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(handle_.get(), "vkGetInstanceProcAddr"));
    if (!get_proc) {
        why = std::string("no Vulkan loader (") + path + " has no vkGetInstanceProcAddr)";
        handle_.reset();
        return false;
    }
    // What volkInitialize() does, with the handle owned here so it can be closed again.
    volkInitializeCustom(get_proc);
    return true;
}

// ---- Instance and devices ----------------------------------------------------------------------

InstanceHandle create_instance(uint32_t *api_version) {
    // vkEnumerateInstanceVersion is absent from 1.0 loaders: volk then reports 1.0.
    const uint32_t loader_version = volkGetInstanceVersion();
    const uint32_t version = loader_version >= VK_API_VERSION_1_1 ? VK_API_VERSION_1_1 : VK_API_VERSION_1_0;
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "tinyfin";
    app.pEngineName = "tinyfin";
    app.apiVersion = version;
    VkInstanceCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    info.pApplicationInfo = &app;
    VkInstance instance = VK_NULL_HANDLE;
    check(vkCreateInstance(&info, nullptr, &instance), "vkCreateInstance");
    InstanceHandle owner(instance);
    volkLoadInstance(instance);
    if (api_version) *api_version = version;
    return owner;
}

std::vector<ComputeDevice> find_compute_devices(VkInstance instance) {
    uint32_t count = 0;
    check(vkEnumeratePhysicalDevices(instance, &count, nullptr), "vkEnumeratePhysicalDevices");
    std::vector<VkPhysicalDevice> physical(count);
    VkResult listed = vkEnumeratePhysicalDevices(instance, &count, physical.data());
    if (listed != VK_INCOMPLETE) check(listed, "vkEnumeratePhysicalDevices");
    physical.resize(count);

    std::vector<ComputeDevice> found;
    for (VkPhysicalDevice device : physical) {
        uint32_t families = 0;
        vkGetPhysicalDeviceQueueFamilyProperties(device, &families, nullptr);
        std::vector<VkQueueFamilyProperties> props(families);
        vkGetPhysicalDeviceQueueFamilyProperties(device, &families, props.data());
        int best = -1;
        for (uint32_t i = 0; i < families; ++i) {
            if (!(props[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || props[i].queueCount == 0) continue;
            const bool dedicated = !(props[i].queueFlags & VK_QUEUE_GRAPHICS_BIT);
            if (best < 0 || (dedicated && (props[best].queueFlags & VK_QUEUE_GRAPHICS_BIT))) best = static_cast<int>(i);
        }
        if (best >= 0) found.push_back({device, static_cast<uint32_t>(best)});
    }
    // Hardware first: vulkan:0 is the best device, and an emulated one (lavapipe) comes last.
    auto rank = [](VkPhysicalDevice device) {
        VkPhysicalDeviceProperties props;
        vkGetPhysicalDeviceProperties(device, &props);
        switch (props.deviceType) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return 4;
        default: return 3;
        }
    };
    std::stable_sort(found.begin(), found.end(), [&](const ComputeDevice &a, const ComputeDevice &b) {
        return rank(a.physical) < rank(b.physical);
    });
    return found;
}

}  // namespace tf_vk
