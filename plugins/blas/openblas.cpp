// OpenBLAS, loaded in init rather than linked: libopenblas starts its thread pool from an ELF
// constructor, and a linked library would run it at the plugin's dlopen, in every process that
// uses tinyfin, whichever backend it selects (rule R2 of docs/plugin-abi.md).
#include "blas.hpp"

#include <tinyfin/env.h>
#include <tinyfin/plugin_kit/library.hpp>

#include <cerrno>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <memory>
#include <string_view>

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

// The file the build found (its pthread, openmp or serial variant), "" when unknown.
#ifndef TF_OPENBLAS_PATH
#define TF_OPENBLAS_PATH ""
#endif
// The library's soname, stable across OpenBLAS releases: whatever the dynamic linker finds.
#define TF_OPENBLAS_SONAME "libopenblas.so.0"

namespace tf_blas {
namespace {

struct LibraryState {
    tf_kit::LibraryHandle handle;
    OpenBlasApi api{};
    const char *threads_source = "cores";
    const char *path = "";
};

// Created by openblas_load (init), destroyed by openblas_unload (shutdown). A plain pointer: a
// global with a destructor would add a static constructor (its atexit registration).
LibraryState *g_state = nullptr;

// The library the build found, then whatever the dynamic linker finds under the soname.
void *open_library(const char **opened, char *why, size_t why_size) {
    static const char *const candidates[] = {TF_OPENBLAS_PATH, TF_OPENBLAS_SONAME};
    why[0] = '\0';
    for (const char *path : candidates) {
        if (!*path) continue;
        if (void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
            *opened = path;
            return handle;
        }
        const char *text = dlerror();
        std::snprintf(why, why_size, "%s", text ? text : path);
    }
    return nullptr;
}

// A thread count from an environment variable (tinyfin/env.h's rules), 0 when unset or bad. A
// bad TINYFIN_THREADS is not warned about here: the cpu plugin, always initialised first, has
// written the one warning line about it, and under TINYFIN_STRICT=1 already failed.
int threads_from_env(const char *name) {
    int64_t n = 0;
    tf_env_parse_integer(get_env(name), 1, 1024, &n);
    return static_cast<int>(n);
}

// The cores this process may run on (affinity mask, so taskset and cgroup cpusets count).
int usable_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < INT_MAX ? static_cast<int>(n) : 1;
}

}  // namespace

tf_status openblas_load(tf_error *err) {
    if (g_state) return TF_STATUS_OK;
    auto state = std::make_unique<LibraryState>();
    char why[TF_TEXT_SIZE];
    state->handle.reset(open_library(&state->path, why, sizeof why));
    if (!state->handle) return fail(err, TF_STATUS_UNAVAILABLE, "cannot load OpenBLAS: %s", why);

    OpenBlasApi &api = state->api;
    struct Symbol {
        const char *name;
        void **slot;
    };
    const Symbol symbols[] = {
        {"cblas_sgemm", reinterpret_cast<void **>(&api.sgemm)},
        {"openblas_set_num_threads", reinterpret_cast<void **>(&api.set_num_threads)},
        {"openblas_get_num_threads", reinterpret_cast<void **>(&api.get_num_threads)},
        {"openblas_get_config", reinterpret_cast<void **>(&api.get_config)},
        {"openblas_get_corename", reinterpret_cast<void **>(&api.get_corename)},
    };
    for (const Symbol &s : symbols) {
        *s.slot = dlsym(state->handle.get(), s.name);
        if (!*s.slot)
            return fail(err, TF_STATUS_UNAVAILABLE, "%s has no symbol %s: not OpenBLAS?", state->path, s.name);
    }

    // One pool for the process: tinyfin's own setting first, then the variables OpenBLAS reads
    // itself (it applied them when it loaded, in this order), else one thread per usable core.
    state->threads_source = "cores";
    if (const int n = threads_from_env("TINYFIN_THREADS")) {
        api.set_num_threads(n);
        state->threads_source = "TINYFIN_THREADS";
    } else {
        // Set at all is enough: OpenBLAS parses them its own way.
        for (const char *name : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"})
            if (const char *value = get_env(name); value && *value) {
                state->threads_source = name;
                break;
            }
        if (std::string_view(state->threads_source) == "cores") api.set_num_threads(usable_cores());
    }
    g_state = state.release();
    return TF_STATUS_OK;
}

void openblas_unload() noexcept {
    delete g_state;
    g_state = nullptr;
}

const OpenBlasApi &openblas() { return g_state->api; }

const char *openblas_threads_source() noexcept { return g_state ? g_state->threads_source : ""; }

const char *openblas_path() noexcept { return g_state ? g_state->path : ""; }

}  // namespace tf_blas
