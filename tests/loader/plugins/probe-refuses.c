/* A plugin whose probe says it cannot run here (as a GPU plugin does on a
 * machine without the GPU). Expected outcome: "probe-refused" with the
 * plugin's reason, "no frobnicator attached"; init is never called. */
#define STUB_NAME "refuser"
#define STUB_DEVICE_NAME "frobnicator"
#define STUB_DEVICE_KIND TF_DEVICE_KIND_GPU_DISCRETE
#include "host_stub.h"

static tf_status refuser_probe(tf_error *err) {
    stub_set_error(err, "no frobnicator attached");
    return TF_STATUS_UNAVAILABLE;
}

static tf_status refuser_init(tf_error *err) {
    stub_set_error(err, "refuser: init called although probe refused");
    return TF_STATUS_INTERNAL;
}

static const tf_plugin refuser_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = STUB_NAME,
    .version = "test",
    .priority = 90,
    .probe = refuser_probe,
    .init = refuser_init,
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
    return &refuser_plugin;
}
