// Unloads the cpu plugin the way the core does: shutdown first, then dlclose. The plugin frees
// its thread pool, scratch arenas and buffer cache in shutdown; unmapped without it, whatever it
// still cached would be reported by LeakSanitizer (scripts/sanitize asan).
#pragma once

#include <tinyfin/plugin.h>

#include <dlfcn.h>

// Host is the host table the test handed the plugin: the entry point keeps the last one it got.
template <const tf_host_api *Host>
struct PluginCloser {
    void operator()(void *handle) const {
        auto entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(handle, TF_PLUGIN_ENTRY_NAME));
        if (const tf_plugin *table = entry ? entry(Host) : nullptr) table->shutdown();
        dlclose(handle);
    }
};
