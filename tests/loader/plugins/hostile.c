/* Plugins that misbehave in ways the core must survive, one per build of this file (the
 * HOSTILE_* macro picks which):
 *
 *   HOSTILE_SEGV_PROBE   "segvprobe": probe dereferences NULL (tinyfin-info --isolate: crashed)
 *   HOSTILE_HANG_INIT    "hanginit": init never returns (tinyfin-info --isolate: timed-out)
 *   HOSTILE_BAD_COUNT    "badcount": init succeeds, then device_count says 2^30 (init-failed)
 *   HOSTILE_BAD_KIND     "badkind": device_info reports kind 77, no tf_device_kind (init-failed)
 *   HOSTILE_SILENT_FAIL  "silentfail": supports add, then run fails with status 99 and no
 *                        message (the op throws PluginError with a message of the core's)
 *   HOSTILE_SEGV_SHUTDOWN "segvshutdown": loads and initialises, then shutdown dereferences
 *                        NULL (tinyfin-info --isolate: crashed after its child reported)
 */
#include <signal.h>
#include <unistd.h>

#if defined(HOSTILE_SEGV_PROBE)
#define STUB_NAME "segvprobe"
#elif defined(HOSTILE_HANG_INIT)
#define STUB_NAME "hanginit"
#elif defined(HOSTILE_BAD_COUNT)
#define STUB_NAME "badcount"
#elif defined(HOSTILE_BAD_KIND)
#define STUB_NAME "badkind"
#elif defined(HOSTILE_SILENT_FAIL)
#define STUB_NAME "silentfail"
#elif defined(HOSTILE_SEGV_SHUTDOWN)
#define STUB_NAME "segvshutdown"
#else
#error "define one HOSTILE_* macro"
#endif
#define STUB_DEVICE_NAME "hostile device"
#ifdef HOSTILE_BAD_KIND
#define STUB_DEVICE_KIND ((tf_device_kind)77)
#else
#define STUB_DEVICE_KIND TF_DEVICE_KIND_GPU_DISCRETE
#endif
#include "host_stub.h"

static tf_status hostile_probe(tf_error *err) {
    (void)err;
#ifdef HOSTILE_SEGV_PROBE
    {
        /* volatile: the compiler may not drop or reorder the fault. */
        volatile int *volatile nowhere = NULL;
        *nowhere = 1;
        raise(SIGSEGV); /* in case the store did not fault (it always does on Linux) */
    }
#endif
    return TF_STATUS_OK;
}

static tf_status hostile_init(tf_error *err) {
    (void)err;
#ifdef HOSTILE_HANG_INIT
    for (;;) pause();
#endif
    return TF_STATUS_OK;
}

static void hostile_shutdown(void) {
#ifdef HOSTILE_SEGV_SHUTDOWN
    volatile int *volatile nowhere = NULL;
    *nowhere = 1;
    raise(SIGSEGV);
#endif
}

static int32_t hostile_device_count(void) {
#ifdef HOSTILE_BAD_COUNT
    return 1 << 30;
#else
    return 1;
#endif
}

static int32_t hostile_supports(int32_t device, const tf_op_desc *op) {
    (void)device;
#ifdef HOSTILE_SILENT_FAIL
    return op->op == TF_OP_ADD;
#else
    (void)op;
    return 0;
#endif
}

static tf_status hostile_run(int32_t device, const tf_op_desc *op, tf_error *err) {
    (void)device;
    (void)op;
    (void)err;
    return (tf_status)99; /* neither a tf_status nor a message */
}

static const tf_plugin hostile_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = STUB_NAME,
    .version = "test",
    .priority = 5,
    .probe = hostile_probe,
    .init = hostile_init,
    .shutdown = hostile_shutdown,
    .device_count = hostile_device_count,
    .device_info = stub_device_info,
    .buffer_alloc = stub_buffer_alloc,
    .buffer_free = stub_buffer_free,
    .buffer_host_ptr = stub_buffer_host_ptr,
    .buffer_write = stub_buffer_write,
    .buffer_read = stub_buffer_read,
    .buffer_copy = stub_buffer_copy,
    .supports = hostile_supports,
    .run = hostile_run,
    .synchronize = stub_synchronize,
    .list_features = NULL,
    .get_proc = NULL,
};

TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    (void)host;
    return &hostile_plugin;
}
