// The process-wide registry: loaded plugins, backend selection, counters.
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "loader.hpp"

namespace tinyfin::detail {

// Counters behind tinyfin::stats(). Relaxed atomics: they are statistics, not synchronisation.
struct Counters {
    struct PerBackend {
        std::atomic<uint64_t> ops{0}, bytes_to_device{0}, bytes_to_host{0}, allocations{0}, bytes_allocated{0};
        // Bytes of storages alive now, and the most alive at once since reset_stats().
        std::atomic<uint64_t> bytes_in_use{0}, peak_bytes_in_use{0};
    };
    std::array<PerBackend, max_backends> backends;
    std::array<std::atomic<uint64_t>, TF_OP_COUNT_> fallbacks{};
    std::array<std::atomic<bool>, TF_OP_COUNT_> fallback_logged{};
};

// One more storage of nbytes alive on a backend: allocations, bytes allocated, in use and peak.
inline void count_allocation(Counters::PerBackend &counters, uint64_t nbytes) {
    counters.allocations.fetch_add(1, std::memory_order_relaxed);
    counters.bytes_allocated.fetch_add(nbytes, std::memory_order_relaxed);
    uint64_t live = counters.bytes_in_use.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
    uint64_t peak = counters.peak_bytes_in_use.load(std::memory_order_relaxed);
    while (live > peak && !counters.peak_bytes_in_use.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
}

// Whether device 0 of an initialised backend reports at least required_bytes free (0 free: the
// plugin does not know, which fits); and "name:0 (device) N MiB" for messages.
bool fits_memory(const Backend &backend, uint64_t required_bytes);
std::string describe_free_memory(const Backend &backend);

class Registry {
public:
    // Loads plugins on first call and applies TINYFIN_BACKEND. Throws BackendError only when
    // called from a plugin's entry, probe or init while it does so (docs/plugin-abi.md R10a).
    static Registry &instance();
    // instance(), but throws BackendError when TINYFIN_STRICT=1 selection failed or cpu is unusable.
    static Registry &checked() {
        Registry &registry = instance();
        if (!registry.fatal_error_.empty()) [[unlikely]]
            registry.raise_fatal();
        return registry;
    }
    // False once the registry is destroyed at exit: late tensor destructors skip plugin calls.
    static bool alive();

    ~Registry();

    // A loaded backend by name, initialised; nullptr when absent or init failed.
    Backend *usable(std::string_view name);
    // The cpu backend (always usable once checked() succeeded).
    Backend &cpu() { return *cpu_; }
    Backend &selected() { return *selected_.load(std::memory_order_acquire); }
    // "" when nothing is selected (the cpu plugin is missing).
    std::string selected_name() const {
        Backend *b = selected_.load(std::memory_order_acquire);
        return b ? b->name() : std::string();
    }

    // Applies a TINYFIN_BACKEND-style list; false when none of its names is usable.
    bool select(std::string_view spec);
    // select() among the backends whose device 0 reports at least required_bytes free (a
    // device that reports 0, i.e. does not know, counts as fitting); cpu stays the last resort.
    // Returns the chosen backend, whether or not it fits.
    Backend &select_fitting(std::string_view spec, uint64_t required_bytes);
    // Puts a selection back (after select_fitting found nothing that fits): backend and the list
    // it came from, keeping the failed attempt's notes, plus one saying the selection was kept.
    void restore_selection(Backend &backend, std::string requested);
    bool fallback_is_error() const { return fallback_is_error_; }

    const LoadResult &loaded() const { return loaded_; }
    const std::vector<std::unique_ptr<Backend>> &backends() const { return loaded_.backends; }
    Counters &counters() { return counters_; }

    // Snapshot of the selection explanation.
    void selection(std::string &requested, std::vector<std::string> &notes) const;

private:
    Registry();
    [[noreturn]] void raise_fatal() const;
    // Why a name is not usable, from the load records.
    std::string why_unusable(std::string_view name);

    LoadResult loaded_;
    Backend *cpu_ = nullptr;
    std::atomic<Backend *> selected_{nullptr};
    mutable std::mutex select_mutex_;
    // select()'s memory filter; 0 while select_fitting() is not running.
    uint64_t required_bytes_ = 0;
    std::string requested_;
    std::vector<std::string> notes_;
    std::string fatal_error_;
    bool fallback_is_error_ = false;
    Counters counters_;
};

}  // namespace tinyfin::detail
