// The vulkan-compute plugin: device-resident tensors and the ops of shaders/ on every Vulkan
// device with a compute queue. Vulkan is loaded at run time (volk over dlopen), so the plugin
// loads on machines without it and says why in probe.
//
// Only what is Vulkan's lives here (the loader, the instance, the devices, the features); the
// members every GPU plugin shares are the plugin kit's GPU shell (tinyfin/plugin_kit/gpu/), and
// the kernels are the rows of plugins/gpu (ops.hpp). In order: the backend, the
// plugin table and the entry point.
#include <tinyfin/plugin_kit/gpu/plugin_shell.hpp>

#include "device.hpp"
#include "ops.hpp"

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#ifndef TF_VULKAN_VERSION
#define TF_VULKAN_VERSION "0.1.0"
#endif

namespace {

using namespace tf_vk;
using tf_kit::fail;

// The loader a successful probe opened, handed to init (a refusing probe closes it).
LoaderLibrary *g_probed_loader = nullptr;

struct VulkanApi {
    static constexpr const char *name = "vulkan";
    using Device = tf_vk::Device;

    // Members go in reverse order: devices, then the instance, then the loader they came from.
    struct State {
        LoaderLibrary loader;
        InstanceHandle instance;
        uint32_t api_version = 0;
        std::vector<std::unique_ptr<Device>> devices;
    };

    static tf_status probe(tf_error *err) {
        auto loader = std::make_unique<LoaderLibrary>();
        std::string why;
        if (!loader->open(why)) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        std::vector<ComputeDevice> found;
        try {
            InstanceHandle instance = create_instance(nullptr);
            found = find_compute_devices(instance.get());
        } catch (const Failure &e) {
            return fail(err, TF_STATUS_UNAVAILABLE, "no Vulkan device with a compute queue (%s)", e.what());
        }
        if (found.empty()) return fail(err, TF_STATUS_UNAVAILABLE, "no Vulkan device with a compute queue");
        delete g_probed_loader;
        g_probed_loader = loader.release();
        return TF_STATUS_OK;
    }

    static tf_status open(State &s, tf_error *err) {
        std::string why;
        if (!s.loader.open(why)) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        // init's own handle is open: the probe's may go.
        delete g_probed_loader;
        g_probed_loader = nullptr;
        s.instance = create_instance(&s.api_version);
        std::string last_error;
        for (const ComputeDevice &where : find_compute_devices(s.instance.get())) {
            try {
                s.devices.push_back(Device::create(static_cast<int>(s.devices.size()), where, s.api_version));
            } catch (const Failure &e) {
                // One unusable device does not hide the others.
                last_error = e.what();
                log_line(TF_LOG_WARN, "skipping a device: %s", e.what());
            }
        }
        if (s.devices.empty())
            return fail(err, TF_STATUS_UNAVAILABLE, "no Vulkan device with a compute queue%s%s%s",
                        last_error.empty() ? "" : " (", last_error.c_str(), last_error.empty() ? "" : ")");
        return TF_STATUS_OK;
    }

    static void close() noexcept {
        delete g_probed_loader;
        g_probed_loader = nullptr;
    }

    // Every device member runs under the device's mutex.
    template <class F>
    static void call(Device &dev, F &&f) {
        std::lock_guard lock(dev.mutex);
        f();
    }

    // Every kernel of shaders/ (SPIR-V), with the limits they share.
    static std::span<const tf_gpu::KernelRow> kernels(const Device &) { return tf_gpu::kernels(); }
    static bool fits(const Device &dev, const tf_op_desc &op) { return tf_gpu::fits(dev, op); }

    static void list_features(const State &s, tf_feature_fn emit, void *user) {
        char value[64];
        std::snprintf(value, sizeof value, "%u.%u", VK_API_VERSION_MAJOR(s.api_version),
                      VK_API_VERSION_MINOR(s.api_version));
        emit(user, "instance_api", value);
        std::snprintf(value, sizeof value, "%zu (SPIR-V, embedded)", tf_gpu::shader_count);
        emit(user, "kernels", value);
        emit(user, "loader", "volk (dlopen)");
        for (const auto &dev : s.devices) dev->list_features(emit, user);
    }
};

using Shell = tf_kit::gpu::GpuPlugin<VulkanApi>;

// ---- Plugin table -----------------------------------------------------------------------------------------

constexpr tf_plugin k_plugin = Shell::table("vulkan", TF_VULKAN_VERSION, 50);

}  // namespace

// ---- Entry point ------------------------------------------------------------------------------------------

TF_KIT_PLUGIN_ENTRY(k_plugin);
