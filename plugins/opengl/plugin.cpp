// The opengl-compute plugin: device-resident tensors and the ops of shaders/ on every EGL device
// with desktop OpenGL 4.3+ (compute shaders), headless: no window system, no display server.
//
// Only what is OpenGL's lives here (EGL targets, the devices and their GL threads, the features);
// the members every GPU plugin shares are the plugin kit's GPU shell (tinyfin/plugin_kit/gpu/), and
// the kernels are the rows of plugins/gpu (ops.hpp). In order: the backend,
// the plugin table and the entry point. Every call that touches GL runs on the device's GL thread
// (worker.hpp).
#include <tinyfin/plugin_kit/gpu/plugin_shell.hpp>

#include "device.hpp"
#include "ops.hpp"

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef TF_OPENGL_VERSION
#define TF_OPENGL_VERSION "0.1.0"
#endif

namespace {

using namespace tf_gl;
using tf_kit::fail;

// On a thread of its own, so the caller's current GL context (if any) is left alone: finds the
// EGL displays and makes a context on the first usable one; "" when one works, else why not.
std::string probe_reason() {
    std::string why;
    std::thread([&] {
        try {
            std::vector<EglTarget> targets = find_egl_targets(why);
            std::string last;
            for (const EglTarget &t : targets) {
                try {
                    ContextHandle context = make_context(t);
                    why.clear();
                    return;
                } catch (const Failure &e) {
                    last = e.what();
                }
            }
            if (!targets.empty()) why = last;
        } catch (const std::exception &e) {
            why = e.what();
        }
        // The thread's EGL state (eglBindAPI, the last error) goes with it.
        eglReleaseThread();
    }).join();
    return why;
}

struct OpenGlApi {
    static constexpr const char *name = "opengl";
    using Device = tf_gl::Device;

    struct State {
        std::vector<std::unique_ptr<Device>> devices;
    };

    static tf_status probe(tf_error *err) {
        const std::string why = probe_reason();
        if (!why.empty()) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        return TF_STATUS_OK;
    }

    static tf_status open(State &s, tf_error *err) {
        std::string why;
        std::vector<EglTarget> targets = find_egl_targets(why);
        if (targets.empty()) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        std::string last_error;
        for (EglTarget &target : targets) {
            try {
                s.devices.push_back(Device::create(static_cast<int>(s.devices.size()), std::move(target)));
            } catch (const Failure &e) {
                // One unusable device does not hide the others.
                last_error = e.what();
                log_line(TF_LOG_WARN, "skipping a device: %s", e.what());
            }
        }
        if (s.devices.empty()) return fail(err, TF_STATUS_UNAVAILABLE, "no OpenGL 4.3 device (%s)", last_error.c_str());
        return TF_STATUS_OK;
    }

    static void close() noexcept {}

    // Every device member runs on the device's GL thread; the caller waits for it.
    template <class F>
    static void call(Device &dev, F &&f) {
        dev.call(std::forward<F>(f));
    }

    // Every kernel of shaders/ (GLSL), with the limits they share.
    static std::span<const tf_gpu::KernelRow> kernels(const Device &) { return tf_gpu::kernels(); }
    static bool fits(const Device &dev, const tf_op_desc &op) { return tf_gpu::fits(dev, op); }

    static void list_features(const State &s, tf_feature_fn emit, void *user) {
        char value[64];
        std::snprintf(value, sizeof value, "%zu (GLSL 4.30, embedded; compiled on first use)", tf_gpu::shader_count);
        emit(user, "kernels", value);
        emit(user, "threading", "one GL thread per device owns its context; calls wait for it");
        // The counters change on the GL thread: read them there.
        for (const auto &dev : s.devices) {
            try {
                dev->call([&] { dev->list_features(emit, user); });
            } catch (...) {
            }
        }
    }
};

using Shell = tf_kit::gpu::GpuPlugin<OpenGlApi>;

// ---- Plugin table -----------------------------------------------------------------------------------------

// Below vulkan: the same GPU is better driven through Vulkan.
constexpr tf_plugin k_plugin = Shell::table("opengl", TF_OPENGL_VERSION, 40);

}  // namespace

// ---- Entry point ------------------------------------------------------------------------------------------

TF_KIT_PLUGIN_ENTRY(k_plugin);
