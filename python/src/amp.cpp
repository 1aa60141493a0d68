// Mixed precision for tinyfin.amp: the autocast scope (AutocastGuard) and nn::GradScaler.
#include <memory>

#include "bindings.hpp"

namespace tinyfin::python {

void bind_amp(py::module_ &top) {
    py::module_ m = top.def_submodule("amp", "AutocastGuard and GradScaler (include/tinyfin)");
    // The guard behind tinyfin.autocast: entered and left on one thread, like the C++ RAII guard.
    struct Scope {
        DType dtype;
        bool enabled;
        std::unique_ptr<AutocastGuard> guard;
    };
    py::class_<Scope>(m, "_Autocast")
        .def(py::init([](py::handle dtype, bool enabled) {
                 const DType d = dtype_arg(dtype, DType::bf16);
                 AutocastGuard check(enabled, d);  // a DTypeError now, not at __enter__
                 return Scope{d, enabled, nullptr};
             }),
             py::arg("dtype"), py::arg("enabled") = true)
        .def("__enter__", [](Scope &s) { s.guard = std::make_unique<AutocastGuard>(s.enabled, s.dtype); })
        .def("__exit__", [](Scope &s, py::args) {
            s.guard.reset();
            return false;
        });
    m.def("autocast_dtype", [] { return autocast_dtype(); });
    m.def("autocast_policy", &autocast_policy, py::arg("op"));

    using Scaler = nn::GradScaler;
    py::class_<Scaler>(m, "GradScaler")
        .def(py::init([](double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval,
                         bool enabled) {
                 return Scaler(Scaler::Options{init_scale, growth_factor, backoff_factor, growth_interval, enabled});
             }),
             py::arg("init_scale") = 65536.0, py::arg("growth_factor") = 2.0, py::arg("backoff_factor") = 0.5,
             py::arg("growth_interval") = 2000, py::arg("enabled") = true)
        .def("scale", &Scaler::scale, py::arg("outputs"))
        .def("unscale_", &Scaler::unscale_, py::arg("optimizer"), py::call_guard<py::gil_scoped_release>())
        .def("step", &Scaler::step, py::arg("optimizer"), py::call_guard<py::gil_scoped_release>())
        .def("update", &Scaler::update)
        .def("get_scale", &Scaler::get_scale)
        .def("is_enabled", &Scaler::enabled)
        .def_property_readonly("growth_tracker", &Scaler::growth_tracker)
        .def_property_readonly("found_inf", &Scaler::found_inf)
        .def(
            "_state", [](const Scaler &s, const std::string &prefix) { return s.state_dict(prefix); },
            py::arg("prefix") = "grad_scaler.")
        .def(
            "_load_state",
            [](Scaler &s, const nn::NamedTensors &dict, const std::string &prefix) { s.load_state_dict(dict, prefix); },
            py::arg("dict"), py::arg("prefix") = "grad_scaler.");
}

}  // namespace tinyfin::python
