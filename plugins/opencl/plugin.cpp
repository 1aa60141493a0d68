// The opencl plugin: device-resident tensors and the kernels of shaders/opencl/ on every OpenCL
// device (GPUs, accelerators, and CPU devices such as pocl, which count as software devices),
// with matmul through CLBlast when it is installed.
//
// Only what is OpenCL's lives here (the ICD loader, CLBlast, the devices, the features); the
// members every GPU plugin shares are the plugin kit's GPU shell (tinyfin/plugin_kit/gpu/), and
// the kernels are the rows of plugins/gpu (ops.hpp) whose shaders have OpenCL C ports. In order: logging, the
// backend, the plugin table and the entry point.
#include <tinyfin/plugin_kit/gpu/plugin_shell.hpp>

#include "clblast.hpp"
#include "device.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <type_traits>

#ifndef TF_OPENCL_VERSION
#define TF_OPENCL_VERSION "0.1.0"
#endif

namespace tf_cl {

void log_message(int32_t level, const char *fmt, ...) {
    char message[TF_TEXT_SIZE * 2];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    tf_kit::log_message(level, message);
}

const char *environment(const char *name) { return tf_kit::get_env(name); }

}  // namespace tf_cl

namespace {

using namespace tf_cl;
using tf_kit::fail;

struct OpenClApi {
    static constexpr const char *name = "opencl";
    using Device = tf_cl::Device;

    struct State {
        std::unique_ptr<ClApi> api;
        std::unique_ptr<ClBlastLibrary> blas;
        std::string blas_why;  // why CLBlast is not used, when it is not
        // Last: destroyed first, while the entry points they use are still loaded.
        std::vector<std::unique_ptr<Device>> devices;

        ~State() { devices.clear(); }
    };

    static tf_status probe(tf_error *err) {
        std::string why;
        std::unique_ptr<ClApi> api = load_cl_api(environment("TINYFIN_OPENCL_LOADER"), why);
        if (!api) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        if (find_devices(*api, why).empty()) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        return TF_STATUS_OK;
    }

    static tf_status open(State &s, tf_error *err) {
        std::string why;
        s.api = load_cl_api(environment("TINYFIN_OPENCL_LOADER"), why);
        if (!s.api) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        std::vector<DeviceTarget> targets = find_devices(*s.api, why);
        if (targets.empty()) return fail(err, TF_STATUS_UNAVAILABLE, "%s", why.c_str());
        s.blas = ClBlastLibrary::load(environment("TINYFIN_OPENCL_CLBLAST"), s.blas_why);
        if (!s.blas)
            log_message(TF_LOG_INFO, "CLBlast not used (matmul runs on the own kernel): %s", s.blas_why.c_str());
        std::string last_error;
        for (const DeviceTarget &target : targets) {
            try {
                s.devices.push_back(Device::create(static_cast<int>(s.devices.size()), *s.api, target, s.blas.get()));
            } catch (const tf_gpu::Failure &e) {
                // One unusable device does not hide the others.
                last_error = e.what();
                log_message(TF_LOG_WARN, "skipping a device: %s", e.what());
            }
        }
        if (s.devices.empty())
            return fail(err, TF_STATUS_UNAVAILABLE, "no usable OpenCL device (%s)", last_error.c_str());
        return TF_STATUS_OK;
    }

    static void close() noexcept {}

    // Every device member runs under the device's lock (device.hpp).
    template <class F>
    static void call(Device &dev, F &&f) {
        auto lock = dev.enter();
        f();
    }

    // The device's rows (Device::kernels: CLBlast's matmul, then the ported kernels), with the
    // limits the kernels share; each op's commands are flushed at its end.
    static std::span<const tf_gpu::KernelRow> kernels(const Device &dev) { return dev.kernels(); }
    static bool fits(const Device &dev, const tf_op_desc &op) { return tf_gpu::fits(dev, op); }
    static void after_op(Device &dev) { dev.flush(); }

    static void list_features(const State &s, tf_feature_fn emit, void *user) {
        emit(user, "icd_loader", s.api->path.c_str());
        const std::string blas = s.blas ? s.blas->path : "not used: " + s.blas_why;
        emit(user, "clblast", blas.c_str());
        size_t ported = 0;
        for (size_t i = 0; i < tf_gpu::shader_count; ++i)
            if (tf_shaders::shader_code_of(static_cast<Shader>(i)).size) ++ported;
        char value[96];
        std::snprintf(value, sizeof value, "%zu of %zu (OpenCL C, embedded; built on first use, binaries cached)",
                      ported, tf_gpu::shader_count);
        emit(user, "kernels", value);
        emit(user, "threading", "one in-order queue per device; calls from several threads take the device's lock");
        for (const auto &dev : s.devices) call(*dev, [&] { dev->list_features(emit, user); });
    }
};

using Shell = tf_kit::gpu::GpuPlugin<OpenClApi>;

// ---- Plugin table -----------------------------------------------------------------------------------------

// 30: below vulkan and opengl, which drive the same GPU better. Device-resident, even on pocl.
constexpr tf_plugin k_plugin = Shell::table("opencl", TF_OPENCL_VERSION, 30);

}  // namespace

// ---- Entry point ------------------------------------------------------------------------------------------

TF_KIT_PLUGIN_ENTRY(k_plugin);
