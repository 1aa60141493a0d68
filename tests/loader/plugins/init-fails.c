/* A plugin that probes fine and then fails its (lazy) init. Its priority (100)
 * makes TINYFIN_BACKEND=auto try it first; the core must then fall to the
 * next backend. Expected outcome once initialised: "init-failed" with
 * "device exploded during init". */
#define STUB_NAME "initfail"
#define STUB_DEVICE_NAME "exploding device"
#define STUB_DEVICE_KIND TF_DEVICE_KIND_GPU_DISCRETE
#include "host_stub.h"

static tf_status initfail_probe(tf_error *err) {
    (void)err;
    return TF_STATUS_OK;
}

static tf_status initfail_init(tf_error *err) {
    stub_set_error(err, "device exploded during init");
    return TF_STATUS_UNAVAILABLE;
}

static const tf_plugin initfail_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = STUB_NAME,
    .version = "test",
    .priority = 100,
    .probe = initfail_probe,
    .init = initfail_init,
    .shutdown = stub_shutdown,
    .device_count = stub_device_count,
    .device_info = stub_device_info,
    .buffer_alloc = stub_buffer_alloc,
    .buffer_free = stub_buffer_free,
    .buffer_host_ptr = stub_buffer_host_ptr,
    .buffer_write = stub_buffer_write,
    .buffer_read = stub_buffer_read,
    .buffer_copy = stub_buffer_copy,
    .supports = stub_supports,
    .run = stub_run,
    .synchronize = stub_synchronize,
    .list_features = NULL,
    .get_proc = NULL,
};

TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    (void)host;
    return &initfail_plugin;
}
