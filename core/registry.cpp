#include "registry.hpp"

#include <algorithm>
#include <cstdio>

#include "errors.hpp"
#include "log.hpp"
#include "tinyfin/env.h"

namespace tinyfin::detail {

namespace {

std::atomic<bool> registry_alive{false};
// True once the registry's construction finished; until then, `building_on_this_thread` says
// whether this thread is the one constructing it (loading plugins, probing, initialising cpu and
// the selected backend).
std::atomic<bool> registry_built{false};
thread_local bool building_on_this_thread = false;

void host_log(int32_t level, const char *plugin, const char *message) {
    if (level < TF_LOG_DEBUG || level > TF_LOG_ERROR) level = TF_LOG_INFO;
    log_from(static_cast<tf_log_level>(level), plugin ? plugin : "plugin", message ? message : "");
}

const char *host_get_env(const char *name) { return name ? env_cstr(name) : nullptr; }

const tf_host_api host_api = {
    sizeof(tf_host_api),
    TF_ABI_VERSION,
    host_log,
    host_get_env,
};

std::vector<std::string> split_list(std::string_view spec) {
    std::vector<std::string> names;
    size_t start = 0;
    while (start <= spec.size()) {
        size_t end = spec.find(',', start);
        if (end == std::string_view::npos) end = spec.size();
        std::string_view word = spec.substr(start, end - start);
        while (!word.empty() && word.front() == ' ') word.remove_prefix(1);
        while (!word.empty() && word.back() == ' ') word.remove_suffix(1);
        if (!word.empty()) names.emplace_back(word);
        start = end + 1;
    }
    return names;
}

bool strict_mode() {
    int on = 0;
    tf_env_parse_strict(env_cstr("TINYFIN_STRICT"), &on);
    return on != 0;
}

// Warns about each bad core variable (tinyfin/env.h); returns the messages joined for the
// TINYFIN_STRICT=1 error. TINYFIN_LOG warned when it was parsed.
std::string check_core_env(bool &fallback_is_error) {
    std::string problems = log_config_problem();
    auto bad = [&](const char *name, const char *text, const char *expected, const char *instead) {
        char message[TF_TEXT_SIZE];
        tf_env_describe_bad(message, sizeof message, name, text, expected, instead);
        log(TF_LOG_WARN, message);
        problems += (problems.empty() ? "" : "; ") + std::string(message);
    };
    static const char *const fallback_words[] = {"allow", "error"};
    const char *fallback = env_cstr("TINYFIN_FALLBACK");
    int index = 0;
    switch (tf_env_parse_word(fallback, fallback_words, 2, &index)) {
    case TF_ENV_VALID: fallback_is_error = index == 1; break;
    case TF_ENV_INVALID: bad("TINYFIN_FALLBACK", fallback, "allow or error", "allow (ops fall back to cpu)"); break;
    case TF_ENV_UNSET: break;
    }
    // A bad TINYFIN_STRICT counts as on and is only a warning: it would otherwise fail itself.
    int on = 0;
    const char *strict = env_cstr("TINYFIN_STRICT");
    if (tf_env_parse_strict(strict, &on) == TF_ENV_INVALID) {
        char message[TF_TEXT_SIZE];
        tf_env_describe_bad(message, sizeof message, "TINYFIN_STRICT", strict, "0 or 1",
                            "1 (a typo never turns the checks off)");
        log(TF_LOG_WARN, message);
    }
    return problems;
}

}  // namespace

Registry &Registry::instance() {
    // A plugin's entry, probe or init calling back into tinyfin while the registry is built would
    // re-enter this initialisation (an abort or a deadlock): it gets an error instead, which the
    // core records as that plugin's outcome (probe-refused, init-failed).
    if (!registry_built.load(std::memory_order_acquire) && building_on_this_thread) [[unlikely]]
        raise<BackendError>("a plugin called back into tinyfin while plugins were being loaded; a "
                            "plugin's entry, probe and init must not use the tinyfin API");
    static Registry registry;
    return registry;
}

void Registry::raise_fatal() const { raise<BackendError>(fatal_error_); }

bool Registry::alive() { return registry_alive.load(std::memory_order_acquire); }

Registry::Registry() {
    struct Building {
        Building() { building_on_this_thread = true; }
        ~Building() {
            building_on_this_thread = false;
            registry_built.store(true, std::memory_order_release);
        }
    } building;
    loaded_ = load_plugins(&host_api);
    registry_alive.store(true, std::memory_order_release);
    std::string env_problems = check_core_env(fallback_is_error_);
    if (!env_problems.empty() && strict_mode()) {
        fatal_error_ = env_problems + " (an error because TINYFIN_STRICT=1)";
        return;
    }

    cpu_ = usable("cpu");
    if (!cpu_) {
        bool found = std::any_of(loaded_.backends.begin(), loaded_.backends.end(),
                                 [](const auto &backend) { return backend->name() == "cpu"; });
        fatal_error_ = "the cpu plugin is not usable (" + why_unusable("cpu") + "); " +
                       (found ? "run tinyfin-info for details"
                              : "run tinyfin-info to see the search path, or set "
                                "TINYFIN_PLUGIN_PATH to the directory holding tinyfin-cpu.so");
        log(TF_LOG_ERROR, fatal_error_);
        return;
    }
    std::string spec = env("TINYFIN_BACKEND");
    bool ok = select(spec.empty() ? "auto" : spec);
    if (strict_mode()) {
        std::lock_guard lock(select_mutex_);
        bool warned = std::any_of(notes_.begin(), notes_.end(),
                                  [](const std::string &note) { return note.rfind("unavailable:", 0) == 0; });
        if (!ok || warned) {
            std::string why;
            for (const std::string &note : notes_)
                if (note.rfind("unavailable:", 0) == 0) why += (why.empty() ? "" : "; ") + note;
            fatal_error_ = "TINYFIN_STRICT=1 and TINYFIN_BACKEND=" + spec +
                           " cannot be honoured: " + (why.empty() ? std::string("no listed backend is usable") : why);
        }
    }
}

Registry::~Registry() {
    registry_alive.store(false, std::memory_order_release);
    // Backends shut down and unload in reverse order of loading.
    while (!loaded_.backends.empty()) loaded_.backends.pop_back();
}

Backend *Registry::usable(std::string_view name) {
    for (const auto &backend : loaded_.backends)
        if (backend->name() == name) return backend->ensure_init() ? backend.get() : nullptr;
    return nullptr;
}

std::string Registry::why_unusable(std::string_view name) {
    for (const auto &backend : loaded_.backends)
        if (backend->name() == name)
            return backend->initialised() ? std::string("usable") : "init failed: " + backend->init_error();
    std::string why;
    for (const PluginRecord &record : loaded_.records)
        if (record.name == name && record.outcome != "shadowed")
            why += (why.empty() ? "" : "; ") + record.outcome + ": " + record.message;
    if (!why.empty()) return why;
    return "no plugin named '" + std::string(name) + "' on the search path";
}

namespace {

std::string mib_text(uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return text;
}

std::string free_memory_text(const Backend &backend) {
    const tf_device_info &d = backend.device(0);
    return backend.name() + ":0 (" + d.name + ") " +
           (d.memory_free == 0 ? std::string("unknown") : mib_text(d.memory_free));
}

}  // namespace

bool fits_memory(const Backend &backend, uint64_t required_bytes) {
    if (required_bytes == 0 || backend.device_count() == 0) return true;
    uint64_t free = backend.device(0).memory_free;
    return free == 0 || free >= required_bytes;
}

std::string describe_free_memory(const Backend &backend) { return free_memory_text(backend); }

bool Registry::select(std::string_view spec) {
    std::vector<std::string> notes;
    Backend *chosen = nullptr;
    bool listed_ok = false;
    std::vector<std::string> names = split_list(spec);
    if (names.empty() || (names.size() == 1 && names[0] == "auto")) {
        std::vector<Backend *> ranked;
        // A backend that declares no priority above cpu's (0) is a peer of cpu, used when named:
        // blas, whose threads would compete with cpu's pool for the cores (docs/plugin-abi.md).
        for (const auto &backend : loaded_.backends) {
            if (backend->name() == "cpu") continue;
            if (backend->table().priority <= 0) {
                notes.push_back("skipped " + backend->name() + ": priority " +
                                std::to_string(backend->table().priority) +
                                " is not above cpu's (0); name it in TINYFIN_BACKEND to use it");
                continue;
            }
            ranked.push_back(backend.get());
        }
        std::stable_sort(ranked.begin(), ranked.end(),
                         [](Backend *a, Backend *b) { return a->table().priority > b->table().priority; });
        for (Backend *backend : ranked) {
            if (!backend->ensure_init()) {
                notes.push_back("skipped " + backend->name() + ": init failed: " + backend->init_error());
                continue;
            }
            if (backend->software_emulated()) {
                notes.push_back("skipped " + backend->name() + ": software-emulated device (" +
                                backend->device(0).name + "); name it in TINYFIN_BACKEND to use it");
                continue;
            }
            if (!fits_memory(*backend, required_bytes_)) {
                notes.push_back("skipped " + backend->name() + ": " + free_memory_text(*backend) + " free, " +
                                mib_text(required_bytes_) + " required");
                continue;
            }
            chosen = backend;
            notes.push_back("auto: " + backend->name() + " has the highest priority (" +
                            std::to_string(backend->table().priority) + ") of the usable backends");
            break;
        }
        listed_ok = true;
    } else {
        for (const std::string &name : names) {
            Backend *backend = usable(name);
            if (!backend) {
                std::string note = "unavailable: " + name + ": " + why_unusable(name);
                log(TF_LOG_WARN, "TINYFIN_BACKEND: " + note.substr(13));
                notes.push_back(note);
                continue;
            }
            if (!fits_memory(*backend, required_bytes_)) {
                notes.push_back("skipped " + name + ": " + free_memory_text(*backend) + " free, " +
                                mib_text(required_bytes_) + " required");
                continue;
            }
            if (!chosen) {
                chosen = backend;
                notes.push_back(name + ": first usable backend in the list");
            }
        }
        listed_ok = chosen != nullptr;
        if (!chosen) notes.push_back("no backend of '" + std::string(spec) + "' is usable");
    }
    if (!chosen) {
        chosen = cpu_;
        notes.push_back("cpu: the fallback, always last");
    }
    std::lock_guard lock(select_mutex_);
    requested_ = std::string(spec);
    notes_ = std::move(notes);
    selected_.store(chosen, std::memory_order_release);
    return listed_ok;
}

Backend &Registry::select_fitting(std::string_view spec, uint64_t required_bytes) {
    required_bytes_ = required_bytes;
    select(spec);
    required_bytes_ = 0;
    return selected();
}

void Registry::restore_selection(Backend &backend, std::string requested) {
    std::lock_guard lock(select_mutex_);
    notes_.push_back("kept " + backend.name() + " (" + requested + "): no backend had the memory required");
    requested_ = std::move(requested);
    selected_.store(&backend, std::memory_order_release);
}

void Registry::selection(std::string &requested, std::vector<std::string> &notes) const {
    std::lock_guard lock(select_mutex_);
    requested = requested_;
    notes = notes_;
}

}  // namespace tinyfin::detail
