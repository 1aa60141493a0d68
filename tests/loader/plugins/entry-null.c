/* A plugin whose entry point refuses this core by returning NULL.
 * Expected outcome: "entry-refused". */
#include "tinyfin/plugin.h"

TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    if (host && host->struct_size >= sizeof(tf_host_api) && host->log)
        host->log(TF_LOG_INFO, "entrynull", "refusing this core on purpose");
    return NULL;
}
