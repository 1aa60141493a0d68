// report() as text: what `tinyfin-info` prints and `python -m tinyfin` prints, from one place.
#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "build_facts.h"
#include "tinyfin/plugin.h"
#include "tinyfin/tinyfin.hpp"

namespace tinyfin {

namespace {

std::string abi_text(uint32_t v) { return std::to_string(TF_ABI_MAJOR(v)) + "." + std::to_string(TF_ABI_MINOR(v)); }

std::string mib(uint64_t bytes) {
    if (bytes == 0) return "unknown";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return buf;
}

// printf onto the end of out.
__attribute__((format(printf, 2, 3))) void append(std::string &out, const char *format, ...) {
    va_list args;
    va_start(args, format);
    va_list again;
    va_copy(again, args);
    const int n = std::vsnprintf(nullptr, 0, format, args);
    va_end(args);
    if (n > 0) {
        const std::size_t at = out.size();
        out.resize(at + static_cast<std::size_t>(n) + 1);
        std::vsnprintf(out.data() + at, static_cast<std::size_t>(n) + 1, format, again);
        out.resize(at + static_cast<std::size_t>(n));
    }
    va_end(again);
}

}  // namespace

std::string report_text(const Report &r) {
    std::string out;
    append(out, "tinyfin %s (plugin ABI %s)\n\n", r.core_version.c_str(), abi_text(r.core_abi_version).c_str());
    append(out, "Search path:\n");
    if (r.search_path.empty()) append(out, "  (empty)\n");
    for (const auto &dir : r.search_path) append(out, "  %-60s [%s]\n", dir.path.c_str(), dir.origin.c_str());

    append(out, "\nPlugins:\n");
    if (r.plugins.empty()) append(out, "  (none found)\n");
    for (const auto &p : r.plugins) {
        append(out, "  %s\n", p.path.c_str());
        if (p.resolved_path != p.path) append(out, "    resolves to %s\n", p.resolved_path.c_str());
        append(out, "    outcome: %s%s%s\n", p.outcome.c_str(), p.message.empty() ? "" : ": ", p.message.c_str());
        if (p.name.empty()) continue;
        append(out, "    backend: %s  version %s  ABI %s  priority %d\n", p.name.c_str(), p.version.c_str(),
               p.abi_version ? abi_text(p.abi_version).c_str() : "?", p.priority);
        for (std::size_t d = 0; d < p.devices.size(); ++d) {
            const auto &dev = p.devices[d];
            append(out, "    device %s:%zu: %s [%s] memory %s total, %s free%s%s\n", p.name.c_str(), d,
                   dev.name.c_str(), dev.kind.c_str(), mib(dev.memory_total).c_str(), mib(dev.memory_free).c_str(),
                   dev.uuid.empty() ? "" : ", id ", dev.uuid.c_str());
        }
        for (const auto &[key, value] : p.features) append(out, "    feature %s = %s\n", key.c_str(), value.c_str());
    }

    append(out, "\nSelection: TINYFIN_BACKEND=%s -> %s\n", r.requested.c_str(),
           r.selected.empty() ? "(none)" : r.selected.c_str());
    for (const auto &note : r.selection_notes) append(out, "  %s\n", note.c_str());
    // Build facts from meson (docs/distributed.md): libtinyfin-dist needs MPI; NCCL is only
    // detected, no collective runs on it yet.
    append(out, "\nDistributed: libtinyfin-dist %s; NCCL %s\n",
           TF_BUILD_DIST ? "built (MPI)" : "not built (no MPI found)",
           TF_BUILD_NCCL ? "found at build (libnccl, nccl.h), not used by any collective yet" : "not found at build");

    // The dtype table (dtypes.def): the quantized dtypes' blocks and ggml type numbers.
    append(out, "\nDtypes (block length, bytes per block, ggml type):\n");
    for (int d = 0; d < TF_DTYPE_COUNT_; ++d) {
        const auto dtype = static_cast<DType>(d);
        append(out, "  %-5s %4lld %4zu %3d%s\n", dtype_name(dtype), static_cast<long long>(dtype_block_length(dtype)),
               dtype_block_bytes(dtype), ggml_type_of(dtype), is_quantized(dtype) ? "  block-quantized" : "");
    }

    // The op matrix: one row per op of ops.def, one column per usable backend.
    std::vector<const PluginReport *> usable;
    for (const auto &p : r.plugins)
        if (p.initialised) usable.push_back(&p);
    append(out, "\nOps (x = supported for f32 on device 0; other cases fall back to cpu):\n");
    // Columns as wide as the longest op and backend names, so every mark sits under its name.
    int op_width = 2;
    for (const std::string &op : op_names()) op_width = std::max(op_width, int(op.size()));
    std::vector<int> widths;
    for (const auto *p : usable) widths.push_back(std::max(8, int(p->name.size())));
    append(out, "  %-*s", op_width, "op");
    for (std::size_t c = 0; c < usable.size(); ++c) append(out, " %-*s", widths[c], usable[c]->name.c_str());
    append(out, "\n");
    for (const std::string &op : op_names()) {
        append(out, "  %-*s", op_width, op.c_str());
        for (std::size_t c = 0; c < usable.size(); ++c) {
            const bool yes = std::find(usable[c]->supported_ops.begin(), usable[c]->supported_ops.end(), op) !=
                             usable[c]->supported_ops.end();
            append(out, " %-*s", widths[c], yes ? "x" : ".");
        }
        append(out, "\n");
    }
    return out;
}

}  // namespace tinyfin
