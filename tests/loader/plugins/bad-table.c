/* A plugin with the right ABI whose table lacks every required function.
 * Expected outcome: "invalid-table" (the core must never call through NULL). */
#include "tinyfin/plugin.h"

static const tf_plugin bad_table_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = "badtable",
    .version = "test",
    .priority = 0,
    .probe = NULL,
    .init = NULL,
};

TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    (void)host;
    return &bad_table_plugin;
}
