// Backend selection, devices, statistics and the tinyfin-info report.
#include "bindings.hpp"

namespace tinyfin::python {

void bind_backends(py::module_ &m) {
    m.def(
        "backend_set", [](const std::string &list) { return set_backend(list); }, py::arg("backends"),
        "Selects backends like TINYFIN_BACKEND (\"auto\" or \"vulkan,blas\"); False when none is usable.");
    m.def(
        "select_backend_for_memory",
        [](uint64_t required_bytes, const std::string &preference) {
            py::gil_scoped_release release;  // may load and initialise plugins
            return select_backend_for_memory(required_bytes, preference);
        },
        py::arg("required_bytes"), py::arg("preference") = "",
        "Selects the best backend (as backend_set(preference)) whose device has required_bytes free;\n"
        "returns its name. Raises OutOfMemoryError naming every device when none fits.");
    m.def("backend_name", &backend_name);
    m.def("default_device", &default_device);
    m.def("available_backends", &available_backends);
    m.def("synchronize", &synchronize, py::call_guard<py::gil_scoped_release>());
    m.def("op_names", &op_names);
    // The same document as `tinyfin-info --json` (the Python layer parses it into a dict).
    m.def("report_json", [] {
        Report r;
        {
            py::gil_scoped_release release;
            r = report();
        }
        return report_json(r);
    });
    // The text `tinyfin-info` prints (python -m tinyfin).
    m.def("report_text", [] {
        Report r;
        {
            py::gil_scoped_release release;
            r = report();
        }
        return report_text(r);
    });
    m.def("stats", [] {
        Stats s = stats();
        py::dict out;
        py::dict backends;
        for (const auto &b : s.backends) {
            py::dict d;
            d["ops"] = b.ops;
            d["bytes_to_device"] = b.bytes_to_device;
            d["bytes_to_host"] = b.bytes_to_host;
            d["allocations"] = b.allocations;
            d["bytes_allocated"] = b.bytes_allocated;
            d["bytes_in_use"] = b.bytes_in_use;
            d["peak_bytes_in_use"] = b.peak_bytes_in_use;
            backends[py::str(b.name)] = d;
        }
        py::dict fallbacks;
        for (const auto &[op, n] : s.fallbacks) fallbacks[py::str(op)] = n;
        out["backends"] = backends;
        out["fallbacks"] = fallbacks;
        out["total_fallbacks"] = s.total_fallbacks;
        return out;
    });
    m.def("reset_stats", &reset_stats);
}

}  // namespace tinyfin::python
