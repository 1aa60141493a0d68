// Plugins written in C++ that break the C ABI's rules, one per build of this file (the
// THROWING_* macro picks which). The core must contain each one (docs/plugin-abi.md R14-R16):
//
//   THROWING_ENTRY           "throwentry": tf_plugin_entry throws (entry-refused)
//   THROWING_PROBE           "throwprobe": probe throws std::runtime_error (probe-refused)
//   THROWING_RUN             "throwrun": supports add, run throws (PluginError for that op)
//   THROWING_RECURSE         "recurse": probe calls back into the tinyfin API (probe-refused)
//   THROWING_RECURSE_INIT    "recurseinit": init calls back into the tinyfin API; with priority 5
//                            it is initialised while the registry is built (init-failed)
//   THROWING_THREAD_REFUSES  "threadrefuses": probe starts a thread that keeps running this
//                            plugin's code, then refuses (the plugin must stay mapped)
#include <stdexcept>
#include <thread>
#include <time.h>

#if defined(THROWING_ENTRY)
#define STUB_NAME "throwentry"
#elif defined(THROWING_PROBE)
#define STUB_NAME "throwprobe"
#elif defined(THROWING_RUN)
#define STUB_NAME "throwrun"
#elif defined(THROWING_RECURSE)
#define STUB_NAME "recurse"
#include "tinyfin/tinyfin.hpp"
#elif defined(THROWING_RECURSE_INIT)
#define STUB_NAME "recurseinit"
#include "tinyfin/tinyfin.hpp"
#elif defined(THROWING_THREAD_REFUSES)
#define STUB_NAME "threadrefuses"
#else
#error "define one THROWING_* macro"
#endif
#define STUB_DEVICE_NAME "throwing device"
#define STUB_DEVICE_KIND TF_DEVICE_KIND_GPU_DISCRETE
#include "host_stub.h"

namespace {

#ifdef THROWING_THREAD_REFUSES
// Runs this library's code for the rest of the process: a loop in its text, sleeping in between.
[[noreturn]] void keep_running() {
    volatile unsigned long spins = 0;
    for (;;) {
        timespec pause{0, 1000000};
        nanosleep(&pause, nullptr);
        spins = spins + 1;
    }
}
#endif

tf_status throwing_probe(tf_error *err) {
#if defined(THROWING_PROBE)
    (void)err;
    throw std::runtime_error("probe exploded in C++");
#elif defined(THROWING_RECURSE)
    (void)err;
    // A probe must not use the tinyfin API; this one does.
    tinyfin::Tensor t = tinyfin::ones({2});
    (void)t;
    return TF_STATUS_OK;
#elif defined(THROWING_THREAD_REFUSES)
    std::thread(keep_running).detach();
    stub_set_error(err, "started a thread, then refused");
    return TF_STATUS_UNAVAILABLE;
#else
    (void)err;
    return TF_STATUS_OK;
#endif
}

tf_status throwing_init(tf_error *err) {
    (void)err;
#ifdef THROWING_RECURSE_INIT
    // init must not use the tinyfin API either; this one does.
    tinyfin::Tensor t = tinyfin::ones({2});
    (void)t;
#endif
    return TF_STATUS_OK;
}

int32_t throwing_supports(int32_t device, const tf_op_desc *op) {
    (void)device;
#ifdef THROWING_RUN
    return op->op == TF_OP_ADD;
#else
    (void)op;
    return 0;
#endif
}

tf_status throwing_run(int32_t device, const tf_op_desc *op, tf_error *err) {
    (void)device;
    (void)op;
    (void)err;
    throw std::logic_error("run exploded in C++");
}

const tf_plugin throwing_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = STUB_NAME,
    .version = "test",
    .priority = 5,
    .reserved_ = 0,
    .probe = throwing_probe,
    .init = throwing_init,
    .shutdown = stub_shutdown,
    .device_count = stub_device_count,
    .device_info = stub_device_info,
    .buffer_alloc = stub_buffer_alloc,
    .buffer_free = stub_buffer_free,
    .buffer_host_ptr = stub_buffer_host_ptr,
    .buffer_write = stub_buffer_write,
    .buffer_read = stub_buffer_read,
    .buffer_copy = stub_buffer_copy,
    .supports = throwing_supports,
    .run = throwing_run,
    .synchronize = stub_synchronize,
    .list_features = nullptr,
    .get_proc = nullptr,
};

}  // namespace

extern "C" TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
extern "C" const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    (void)host;
#ifdef THROWING_ENTRY
    throw std::runtime_error("entry exploded in C++");
#endif
    return &throwing_plugin;
}
