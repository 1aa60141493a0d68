// Backend selection, statistics and the registry report behind tinyfin-info.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "errors.hpp"
#include "op_samples.hpp"
#include "op_table.hpp"
#include "registry.hpp"

namespace tinyfin {

using namespace detail;

bool set_backend(std::string_view list) { return Registry::checked().select(list); }

namespace {
std::atomic<MixedDevices> mixed_devices_policy{MixedDevices::move};
}  // namespace

void set_mixed_devices(MixedDevices policy) { mixed_devices_policy.store(policy, std::memory_order_relaxed); }
MixedDevices mixed_devices() { return mixed_devices_policy.load(std::memory_order_relaxed); }

std::string select_backend_for_memory(uint64_t required_bytes, std::string_view preference) {
    Registry &registry = Registry::checked();
    // No preference: the current one (set_backend's list, else TINYFIN_BACKEND), so a call after
    // set_backend("vulkan,blas") keeps choosing among vulkan and blas.
    std::string current;
    std::vector<std::string> notes;
    registry.selection(current, notes);
    std::string spec(preference.empty() ? std::string_view(current) : preference);
    if (spec.empty()) spec = "auto";
    Backend &previous = registry.selected();
    Backend &chosen = registry.select_fitting(spec, required_bytes);
    if (fits_memory(chosen, required_bytes)) return chosen.name();
    registry.restore_selection(previous, current);  // a failed call leaves the selection as it was
    std::string devices;
    for (const auto &backend : registry.backends()) {
        if (!backend->initialised() || backend->device_count() == 0) continue;
        devices += (devices.empty() ? "" : "; ") + describe_free_memory(*backend) + " free";
    }
    char need[32];
    std::snprintf(need, sizeof need, "%.1f MiB", static_cast<double>(required_bytes) / (1024.0 * 1024.0));
    raise<OutOfMemoryError>("select_backend_for_memory: no device has the " + std::string(need) +
                            " this program needs (TINYFIN_BACKEND=" + spec + "): " + devices +
                            "; use a smaller model or batch, or free memory on a device");
}

std::string backend_name() { return Registry::checked().selected().name(); }

std::vector<std::string> available_backends() {
    Registry &registry = Registry::checked();
    std::vector<Backend *> usable;
    for (const auto &backend : registry.backends())
        if (backend->name() != "cpu" && backend->ensure_init()) usable.push_back(backend.get());
    std::stable_sort(usable.begin(), usable.end(),
                     [](Backend *a, Backend *b) { return a->table().priority > b->table().priority; });
    std::vector<std::string> names;
    for (Backend *backend : usable) names.push_back(backend->name());
    names.push_back("cpu");
    return names;
}

const tf_plugin *plugin_table(std::string_view backend) {
    Backend *b = Registry::checked().usable(backend);
    return b ? &b->table() : nullptr;
}

void synchronize() {
    for (const auto &backend : Registry::checked().backends()) {
        if (!backend->initialised()) continue;
        for (int d = 0; d < backend->device_count(); ++d) {
            tf_error err = make_error();
            tf_status status = guarded(err, "synchronize", [&] { return backend->table().synchronize(d, &err); });
            if (status != TF_STATUS_OK)
                raise_status(status, "synchronize " + Device{backend->name(), d}.str() + ": " +
                                         error_text(err, "failed without a message"));
        }
    }
}

// ---- Stats ------------------------------------------------------------------------

const Stats::Backend *Stats::backend(std::string_view name) const {
    for (const Backend &b : backends)
        if (b.name == name) return &b;
    return nullptr;
}

uint64_t Stats::fallbacks_of(std::string_view op) const {
    for (const auto &[name, count] : fallbacks)
        if (name == op) return count;
    return 0;
}

Stats stats() {
    Registry &registry = Registry::instance();
    Counters &c = registry.counters();
    Stats out;
    for (const auto &backend : registry.backends()) {
        const auto &b = c.backends[backend->slot()];
        out.backends.push_back({backend->name(), b.ops.load(), b.bytes_to_device.load(), b.bytes_to_host.load(),
                                b.allocations.load(), b.bytes_allocated.load(), b.bytes_in_use.load(),
                                b.peak_bytes_in_use.load()});
    }
    for (std::size_t op = 0; op < op_table.size(); ++op) {
        uint64_t n = c.fallbacks[op].load();
        if (n == 0) continue;
        out.fallbacks.emplace_back(op_table[op].name, n);
        out.total_fallbacks += n;
    }
    return out;
}

void reset_stats() {
    Counters &c = Registry::instance().counters();
    for (auto &b : c.backends) {
        b.ops = 0;
        b.bytes_to_device = 0;
        b.bytes_to_host = 0;
        b.allocations = 0;
        b.bytes_allocated = 0;
        b.peak_bytes_in_use = b.bytes_in_use.load();
    }
    for (auto &f : c.fallbacks) f = 0;
}

// ---- Report ---------------------------------------------------------------------------

std::vector<std::string> op_names() {
    std::vector<std::string> names;
    for (const OpInfo &info : op_table) names.emplace_back(info.name);
    return names;
}

namespace {

const char *kind_name(int32_t kind) {
    switch (kind) {
    case TF_DEVICE_KIND_CPU: return "cpu";
    case TF_DEVICE_KIND_GPU_DISCRETE: return "gpu";
    case TF_DEVICE_KIND_GPU_INTEGRATED: return "integrated-gpu";
    case TF_DEVICE_KIND_GPU_SOFTWARE: return "software-gpu";
    default: return "other";
    }
}

// Does the backend accept a small f32 case of op? The matrix in tinyfin-info and docs.
bool supports_sample(Backend &backend, tf_op op) {
    OpSample sample = make_sample(op);
    if (sample.outputs.empty()) return false;
    tf_op_desc desc = sample.desc(op);
    return guarded_value(backend.name(), "supports", int32_t{0}, [&] { return backend.table().supports(0, &desc); }) !=
           0;
}

void collect_feature(void *user, const char *key, const char *value) {
    auto *features = static_cast<std::vector<std::pair<std::string, std::string>> *>(user);
    if (key) features->emplace_back(key, value ? value : "");
}

// One plugin's record; a loaded backend is initialised to list its devices, features and ops.
PluginReport describe_plugin(const PluginRecord &record) {
    PluginReport p;
    p.path = record.path;
    p.resolved_path = record.resolved_path;
    p.name = record.name;
    p.outcome = record.outcome;
    p.message = record.message;
    p.version = record.version;
    p.abi_version = record.abi_version;
    p.priority = record.priority;
    Backend *backend = record.backend;
    if (!backend) return p;
    if (!backend->ensure_init()) {
        p.outcome = "init-failed";
        p.message = backend->init_error();
        return p;
    }
    p.initialised = true;
    for (int d = 0; d < backend->device_count(); ++d) {
        const tf_device_info &info = backend->device(d);
        p.devices.push_back({info.name, kind_name(info.kind), info.memory_total, info.memory_free, info.uuid,
                             info.host_addressable != 0});
    }
    backend->list_features(collect_feature, &p.features);
    for (std::size_t op = 0; op < op_table.size(); ++op)
        if (supports_sample(*backend, static_cast<tf_op>(op))) p.supported_ops.emplace_back(op_table[op].name);
    return p;
}

}  // namespace

Report report() {
    Registry &registry = Registry::instance();
    Report out;
    out.core_abi_version = TF_ABI_VERSION;
    out.core_version = TF_CORE_VERSION;
    for (const SearchEntry &entry : registry.loaded().search_path)
        out.search_path.push_back({entry.path, entry.origin});
    for (const PluginRecord &record : registry.loaded().records) out.plugins.push_back(describe_plugin(record));
    registry.selection(out.requested, out.selection_notes);
    out.selected = registry.selected_name();
    return out;
}

PluginReport backend_report(std::string_view name) {
    for (const PluginRecord &record : Registry::instance().loaded().records)
        if (record.backend && record.name == name) return describe_plugin(record);
    raise<BackendError>("backend_report: no loaded backend is named '" + std::string(name) +
                        "' (tinyfin-info lists what loaded and why the others did not)");
}

std::vector<std::string> plugin_candidates() { return candidate_files(); }

void configure_plugin_loading(const std::vector<std::string> &only, const std::vector<PluginVerdict> &verdicts) {
    configure_loading(only, verdicts);
}

}  // namespace tinyfin
