/* Compiled by the "abi-header-c99" test with -std=c99 -pedantic -Werror (and as
 * C++20 by "abi-header-c++20" through abi_header.cpp): plugin.h must stay
 * plain, warning-free C that any plugin author's compiler accepts. */
#include "tinyfin/plugin.h"
#include "tinyfin/plugin.h" /* the include guard holds */

/* C99 has no _Static_assert: a negative array size fails the build instead. */
#define ABI_CHECK(name, condition) typedef char abi_check_##name[(condition) ? 1 : -1]

ABI_CHECK(major, TF_ABI_MAJOR(TF_ABI_VERSION) == TF_ABI_VERSION_MAJOR);
ABI_CHECK(minor, TF_ABI_MINOR(TF_ABI_VERSION) == TF_ABI_VERSION_MINOR);
ABI_CHECK(struct_size_first, offsetof(tf_plugin, struct_size) == 0);
ABI_CHECK(abi_version_second, offsetof(tf_plugin, abi_version) == 4);
ABI_CHECK(error_size_first, offsetof(tf_error, struct_size) == 0);
ABI_CHECK(tensor_size_first, offsetof(tf_tensor_desc, struct_size) == 0);
ABI_CHECK(op_size_first, offsetof(tf_op_desc, struct_size) == 0);
ABI_CHECK(device_size_first, offsetof(tf_device_info, struct_size) == 0);
ABI_CHECK(host_size_first, offsetof(tf_host_api, struct_size) == 0);
ABI_CHECK(op_ids_stable, TF_OP_ADD == 0 && TF_OP_FILL == 11);
ABI_CHECK(op_count, TF_OP_COUNT_ > TF_OP_FILL);
ABI_CHECK(dtype_ids_stable, TF_DTYPE_F32 == 0 && TF_DTYPE_BOOL == 5 && TF_DTYPE_Q8_0 == 6);
ABI_CHECK(dtype_count, TF_DTYPE_COUNT_ == 15); /* ABI 1.2: nine block-quantized dtypes after bool */

static tf_status check_probe(tf_error *err) {
    (void)err;
    return TF_STATUS_OK;
}

/* Every member named, as a plugin writes its table. */
static const tf_plugin check_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = "abicheck",
    .version = "0",
    .priority = 0,
    .reserved_ = 0,
    .probe = check_probe,
    .init = NULL,
    .shutdown = NULL,
    .device_count = NULL,
    .device_info = NULL,
    .buffer_alloc = NULL,
    .buffer_free = NULL,
    .buffer_host_ptr = NULL,
    .buffer_write = NULL,
    .buffer_read = NULL,
    .buffer_copy = NULL,
    .supports = NULL,
    .run = NULL,
    .synchronize = NULL,
    .list_features = NULL,
    .get_proc = NULL,
};

TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    tf_plugin_entry_fn self = tf_plugin_entry;
    tf_error err;
    tf_tensor_desc tensor = {0};
    tf_op_desc op = {0};
    tf_params_reduce reduce = {sizeof(tf_params_reduce), 1u};
    tensor.struct_size = sizeof tensor;
    tensor.dtype = TF_DTYPE_F32;
    op.struct_size = sizeof op;
    op.op = TF_OP_SUM;
    op.inputs = &tensor;
    op.params = &reduce;
    err.struct_size = sizeof err;
    err.message[0] = '\0';
    (void)self;
    (void)host;
    (void)op;
    return check_plugin.probe(&err) == TF_STATUS_OK ? &check_plugin : NULL;
}
