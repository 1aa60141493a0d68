// report() as JSON: the document `tinyfin-info --json` prints and tinyfin.info() parses.
#include <cstdio>

#include "tinyfin/plugin.h"
#include "tinyfin/tinyfin.hpp"

namespace tinyfin {

namespace {

std::string abi_text(uint32_t v) { return std::to_string(TF_ABI_MAJOR(v)) + "." + std::to_string(TF_ABI_MINOR(v)); }

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

std::string boolean(bool value) { return value ? "true" : "false"; }

}  // namespace

std::string report_json(const Report &r) {
    std::string out = "{\n  \"schema\": \"tinyfin-info/1\",\n";
    out += "  \"core\": {\"version\": " + json_string(r.core_version) +
           ", \"abi\": " + json_string(abi_text(r.core_abi_version)) + "},\n";
    out += "  \"search_path\": [";
    for (std::size_t i = 0; i < r.search_path.size(); ++i)
        out += std::string(i ? "," : "") + "\n    {\"path\": " + json_string(r.search_path[i].path) +
               ", \"origin\": " + json_string(r.search_path[i].origin) + "}";
    out += "\n  ],\n  \"plugins\": [";
    for (std::size_t i = 0; i < r.plugins.size(); ++i) {
        const auto &p = r.plugins[i];
        out += std::string(i ? "," : "") + "\n    {\"path\": " + json_string(p.path) +
               ", \"resolved_path\": " + json_string(p.resolved_path) + ", \"name\": " + json_string(p.name) +
               ", \"outcome\": " + json_string(p.outcome) + ", \"message\": " + json_string(p.message) +
               ", \"version\": " + json_string(p.version) +
               ", \"abi\": " + json_string(p.abi_version ? abi_text(p.abi_version) : "") +
               ", \"priority\": " + std::to_string(p.priority) + ", \"initialised\": " + boolean(p.initialised) +
               ",\n     \"devices\": [";
        for (std::size_t d = 0; d < p.devices.size(); ++d) {
            const auto &dev = p.devices[d];
            out += std::string(d ? ", " : "") + "{\"name\": " + json_string(dev.name) +
                   ", \"kind\": " + json_string(dev.kind) + ", \"memory_total\": " + std::to_string(dev.memory_total) +
                   ", \"memory_free\": " + std::to_string(dev.memory_free) + ", \"uuid\": " + json_string(dev.uuid) +
                   ", \"host_addressable\": " + boolean(dev.host_addressable) + "}";
        }
        out += "],\n     \"features\": {";
        for (std::size_t f = 0; f < p.features.size(); ++f)
            out += std::string(f ? ", " : "") + json_string(p.features[f].first) + ": " +
                   json_string(p.features[f].second);
        out += "},\n     \"supported_ops\": " + json_list(p.supported_ops) + "}";
    }
    out += "\n  ],\n  \"selection\": {\"requested\": " + json_string(r.requested) +
           ", \"selected\": " + json_string(r.selected) + ", \"notes\": " + json_list(r.selection_notes) + "},\n";
    out += "  \"ops\": " + json_list(op_names()) + "\n}\n";
    return out;
}

}  // namespace tinyfin
