/* A valid shared object that is not a tinyfin plugin: it exports no
 * tf_plugin_entry. Expected outcome: "no-entry-symbol". */
#include "tinyfin/plugin.h"

/* Exported on purpose, under another name than the entry point. */
TF_PLUGIN_EXPORT int tf_not_the_entry(void);
TF_PLUGIN_EXPORT int tf_not_the_entry(void) { return 42; }
