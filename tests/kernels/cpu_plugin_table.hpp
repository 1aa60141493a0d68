// The cpu plugin's table, loaded once per test program from TF_CPU_PLUGIN_PATH with a quiet host
// (no log, the process environment), and unloaded the way the core does (plugin_closer.hpp).
#pragma once

#include <doctest/doctest.h>

#include <tinyfin/plugin.h>

#include "plugin_closer.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#ifndef TF_CPU_PLUGIN_PATH
#error "build with -DTF_CPU_PLUGIN_PATH=\"/path/to/tinyfin-cpu.so\""
#endif

inline void quiet_host_log(int32_t, const char *, const char *) {}
inline const char *process_host_get_env(const char *name) { return std::getenv(name); }
inline constexpr tf_host_api k_quiet_host = {sizeof(tf_host_api), TF_ABI_VERSION, quiet_host_log, process_host_get_env};

// The plugin's entry point (tf_plugin_entry), for tests of the entry itself.
inline tf_plugin_entry_fn cpu_plugin_entry() {
    static const std::unique_ptr<void, PluginCloser<&k_quiet_host>> handle(
        dlopen(TF_CPU_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL));
    static const tf_plugin_entry_fn entry = [] {
        const char *why = dlerror();
        INFO("dlopen(" TF_CPU_PLUGIN_PATH "): ", why ? why : "");
        REQUIRE(handle != nullptr);
        auto e = reinterpret_cast<tf_plugin_entry_fn>(dlsym(handle.get(), TF_PLUGIN_ENTRY_NAME));
        REQUIRE((e != nullptr));  // parenthesised: doctest cannot print function pointers
        return e;
    }();
    return entry;
}

inline const tf_plugin &cpu_plugin_table() {
    static const tf_plugin *table = [] {
        const tf_plugin *t = cpu_plugin_entry()(&k_quiet_host);
        REQUIRE(t != nullptr);
        return t;
    }();
    return *table;
}

// The cpu plugin's feature `key` (e.g. kernels: generic, avx2, avx512); empty when it has none.
inline std::string cpu_plugin_feature(const char *key) {
    std::string value;
    struct Ctx {
        const char *key;
        std::string *value;
    } ctx{key, &value};
    cpu_plugin_table().list_features(
        [](void *user, const char *k, const char *v) {
            auto *c = static_cast<Ctx *>(user);
            if (std::strcmp(k, c->key) == 0) *c->value = v;
        },
        &ctx);
    return value;
}
