// tinyfin._C: the compiled half of the tinyfin Python package (python/tinyfin/ is the rest).
#include "bindings.hpp"

PYBIND11_MODULE(_C, m) {
    using namespace tinyfin::python;
    m.doc() = "tinyfin's compiled bindings; import tinyfin, not this module";
    m.attr("__version__") = TF_PYTHON_PACKAGE_VERSION;  // meson.build's project version
    bind_errors(m);
    bind_tensor(m);
    bind_factories(m);
    bind_ops(m);
    bind_nn(m);
    bind_backends(m);
    bind_interop(m);
    bind_amp(m);
    bind_fastpath(m);
    bind_objects(m);
}
