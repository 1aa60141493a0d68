/* A plugin that breaks the one-exported-symbol rule: it also exports
 * tf_leaky_helper. Only the exported-symbols checker's self-test uses it, to
 * prove the checker catches a leak. */
#include "tinyfin/plugin.h"

TF_PLUGIN_EXPORT int tf_leaky_helper(void);
int tf_leaky_helper(void) { return 1; }

TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
const tf_plugin *tf_plugin_entry(const tf_host_api *host) {
    (void)host;
    return NULL;
}
