/* A plugin built against a future ABI major (99.0). The loader must reject it
 * reading nothing past abi_version but name, at its 1.0 offset. Expected outcome:
 * "abi-mismatch" under the name "abimajor", with both versions ("99.0", "1.0") in the
 * message. */
#include "tinyfin/plugin.h"

static const tf_plugin abi_major_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = (uint32_t)(99u << 16),
    .name = "abimajor",
    .version = "test",
    .priority = 0,
};

TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    (void)host;
    return &abi_major_plugin;
}
