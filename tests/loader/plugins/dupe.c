/* Built twice, into dup-a/fakecpu.so and dup-b/fakecpu.so: two plugins named
 * "dupe". The first on the search path loads; the second must be "shadowed",
 * naming the first one's path. The device is a software-emulated GPU so that
 * TINYFIN_BACKEND=auto skips it (it runs no ops) and still ends on cpu.
 * DUPE_COPY tells the builds apart in the version field; DUPE_NAME (default
 * "dupe") lets the sorted/ pair use a name of its own. */
#ifndef DUPE_NAME
#define DUPE_NAME "dupe"
#endif
#define STUB_NAME DUPE_NAME
#define STUB_DEVICE_NAME "dupe software device"
#define STUB_DEVICE_KIND TF_DEVICE_KIND_GPU_SOFTWARE
#include "host_stub.h"

#ifndef DUPE_COPY
#error "build with -DDUPE_COPY=\"a\" (any text naming this copy)"
#endif

static tf_status dupe_probe(tf_error *err) {
    (void)err;
    return TF_STATUS_OK;
}

static tf_status dupe_init(tf_error *err) {
    (void)err;
    return TF_STATUS_OK;
}

static void dupe_list_features(tf_feature_fn emit, void *user) { emit(user, "dupe.copy", DUPE_COPY); }

static const tf_plugin dupe_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = STUB_NAME,
    .version = "test-" DUPE_COPY,
    .priority = 0,
    .probe = dupe_probe,
    .init = dupe_init,
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
    .list_features = dupe_list_features,
    .get_proc = NULL,
};

TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    (void)host;
    return &dupe_plugin;
}
