// Plugin discovery: the search path, dlopen, the entry call, validation, probe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend.hpp"
#include "tinyfin/tinyfin.hpp"

namespace tinyfin::detail {

struct SearchEntry {
    std::string path;
    std::string origin;  // "TINYFIN_PLUGIN_PATH", "install", "build-tree"
};

// What happened to one candidate file.
struct PluginRecord {
    std::string path;
    std::string resolved_path;
    std::string name;
    std::string outcome;  // see PluginReport::outcome in tinyfin.hpp
    std::string message;
    std::string version;
    uint32_t abi_version = 0;
    int priority = 0;
    Backend *backend = nullptr;  // set when outcome is "loaded"
};

struct LoadResult {
    std::vector<SearchEntry> search_path;
    std::vector<PluginRecord> records;
    std::vector<std::unique_ptr<Backend>> backends;  // loaded ones, in discovery order
    // dlopen handles of refused plugins, never closed: their code may still run (a thread
    // started by a constructor, the entry or probe).
    std::vector<void *> kept_mapped;
};

// The most backends one process keeps loaded (sizes the stats arrays).
inline constexpr int max_backends = 32;

// Set before the registry is built: load only `only` (when non-empty), and skip the files that
// have a verdict. Throws BackendError once plugins are loaded.
void configure_loading(std::vector<std::string> only, std::vector<PluginVerdict> verdicts);
// The files the loader would try, in order, without opening any.
std::vector<std::string> candidate_files();

// Walks the search path and loads every plugin it can. Never throws for a bad
// plugin: each candidate gets a record instead.
LoadResult load_plugins(const tf_host_api *host);

}  // namespace tinyfin::detail
