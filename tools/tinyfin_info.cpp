// tinyfin-info: what was searched, what loaded (and why anything did not),
// which backend is selected, and which ops each backend supports.
//
//   tinyfin-info [--json]
//
// The JSON schema is documented in docs/tinyfin-info.md. Exit status 0 when
// the cpu plugin is usable, 1 otherwise.
#include <cstdio>
#include <cstring>
#include <string>

#include "tinyfin/plugin.h"
#include "tinyfin/tinyfin.hpp"

namespace {

std::string abi_text(uint32_t v) {
    return std::to_string(TF_ABI_MAJOR(v)) + "." + std::to_string(TF_ABI_MINOR(v));
}

std::string json_string(const std::string &text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    return out + "\"";
}

std::string json_list(const std::vector<std::string> &items) {
    std::string out = "[";
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_string(items[i]);
    return out + "]";
}

std::string mib(uint64_t bytes) {
    if (bytes == 0) return "unknown";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return buf;
}

bool cpu_usable(const tinyfin::Report &r) {
    for (const auto &p : r.plugins)
        if (p.name == "cpu" && p.outcome == "loaded") return true;
    return false;
}

void print_json(const tinyfin::Report &r) {
    std::printf("{\n  \"schema\": \"tinyfin-info/1\",\n");
    std::printf("  \"core\": {\"version\": %s, \"abi\": %s},\n", json_string(r.core_version).c_str(),
                json_string(abi_text(r.core_abi_version)).c_str());
    std::printf("  \"search_path\": [");
    for (std::size_t i = 0; i < r.search_path.size(); ++i)
        std::printf("%s\n    {\"path\": %s, \"origin\": %s}", i ? "," : "",
                    json_string(r.search_path[i].path).c_str(),
                    json_string(r.search_path[i].origin).c_str());
    std::printf("\n  ],\n  \"plugins\": [");
    for (std::size_t i = 0; i < r.plugins.size(); ++i) {
        const auto &p = r.plugins[i];
        std::printf("%s\n    {\"path\": %s, \"resolved_path\": %s, \"name\": %s, \"outcome\": %s, "
                    "\"message\": %s, \"version\": %s, \"abi\": %s, \"priority\": %d, "
                    "\"initialised\": %s,\n     \"devices\": [",
                    i ? "," : "", json_string(p.path).c_str(), json_string(p.resolved_path).c_str(),
                    json_string(p.name).c_str(), json_string(p.outcome).c_str(),
                    json_string(p.message).c_str(), json_string(p.version).c_str(),
                    json_string(p.abi_version ? abi_text(p.abi_version) : "").c_str(), p.priority,
                    p.initialised ? "true" : "false");
        for (std::size_t d = 0; d < p.devices.size(); ++d) {
            const auto &dev = p.devices[d];
            std::printf("%s{\"name\": %s, \"kind\": %s, \"memory_total\": %llu, \"memory_free\": %llu, "
                        "\"uuid\": %s, \"host_addressable\": %s}",
                        d ? ", " : "", json_string(dev.name).c_str(), json_string(dev.kind).c_str(),
                        (unsigned long long)dev.memory_total, (unsigned long long)dev.memory_free,
                        json_string(dev.uuid).c_str(), dev.host_addressable ? "true" : "false");
        }
        std::printf("],\n     \"features\": {");
        for (std::size_t f = 0; f < p.features.size(); ++f)
            std::printf("%s%s: %s", f ? ", " : "", json_string(p.features[f].first).c_str(),
                        json_string(p.features[f].second).c_str());
        std::printf("},\n     \"supported_ops\": %s}", json_list(p.supported_ops).c_str());
    }
    std::printf("\n  ],\n  \"selection\": {\"requested\": %s, \"selected\": %s, \"notes\": %s},\n",
                json_string(r.requested).c_str(), json_string(r.selected).c_str(),
                json_list(r.selection_notes).c_str());
    std::printf("  \"ops\": %s\n}\n", json_list(tinyfin::op_names()).c_str());
}

void print_human(const tinyfin::Report &r) {
    std::printf("tinyfin %s (plugin ABI %s)\n\n", r.core_version.c_str(),
                abi_text(r.core_abi_version).c_str());
    std::printf("Search path:\n");
    if (r.search_path.empty()) std::printf("  (empty)\n");
    for (const auto &dir : r.search_path)
        std::printf("  %-60s [%s]\n", dir.path.c_str(), dir.origin.c_str());

    std::printf("\nPlugins:\n");
    if (r.plugins.empty()) std::printf("  (none found)\n");
    for (const auto &p : r.plugins) {
        std::printf("  %s\n", p.path.c_str());
        if (p.resolved_path != p.path) std::printf("    resolves to %s\n", p.resolved_path.c_str());
        std::printf("    outcome: %s%s%s\n", p.outcome.c_str(), p.message.empty() ? "" : ": ",
                    p.message.c_str());
        if (p.name.empty()) continue;
        std::printf("    backend: %s  version %s  ABI %s  priority %d\n", p.name.c_str(),
                    p.version.c_str(), p.abi_version ? abi_text(p.abi_version).c_str() : "?",
                    p.priority);
        for (std::size_t d = 0; d < p.devices.size(); ++d) {
            const auto &dev = p.devices[d];
            std::printf("    device %s:%zu: %s [%s] memory %s total, %s free%s%s\n", p.name.c_str(), d,
                        dev.name.c_str(), dev.kind.c_str(), mib(dev.memory_total).c_str(),
                        mib(dev.memory_free).c_str(), dev.uuid.empty() ? "" : ", id ",
                        dev.uuid.c_str());
        }
        for (const auto &[key, value] : p.features)
            std::printf("    feature %s = %s\n", key.c_str(), value.c_str());
    }

    std::printf("\nSelection: TINYFIN_BACKEND=%s -> %s\n", r.requested.c_str(),
                r.selected.empty() ? "(none)" : r.selected.c_str());
    for (const auto &note : r.selection_notes) std::printf("  %s\n", note.c_str());

    // The op matrix: one row per op of ops.def, one column per usable backend.
    std::vector<const tinyfin::PluginReport *> usable;
    for (const auto &p : r.plugins)
        if (p.initialised) usable.push_back(&p);
    std::printf("\nOps (x = supported for f32 on device 0; other cases fall back to cpu):\n");
    std::printf("  %-14s", "op");
    for (const auto *p : usable) std::printf(" %-8s", p->name.c_str());
    std::printf("\n");
    for (const std::string &op : tinyfin::op_names()) {
        std::printf("  %-14s", op.c_str());
        for (const auto *p : usable) {
            bool yes = false;
            for (const auto &s : p->supported_ops) yes = yes || s == op;
            std::printf(" %-8s", yes ? "x" : ".");
        }
        std::printf("\n");
    }
}

} // namespace

int main(int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            std::printf("usage: tinyfin-info [--json]\n"
                        "Lists the plugin search path, every candidate plugin and what happened to\n"
                        "it, the devices and features of loaded backends, the backend that\n"
                        "TINYFIN_BACKEND selects, and the op support matrix.\n");
            return 0;
        } else {
            std::fprintf(stderr, "tinyfin-info: unknown argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    try {
        tinyfin::Report r = tinyfin::report();
        if (json) print_json(r);
        else print_human(r);
        if (!cpu_usable(r)) {
            std::fprintf(stderr,
                         "tinyfin-info: the cpu plugin is not usable, so no op can run; check the "
                         "search path above or set TINYFIN_PLUGIN_PATH to the directory holding "
                         "tinyfin-cpu.so\n");
            return 1;
        }
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "tinyfin-info: %s\n", e.what());
        return 1;
    }
}
