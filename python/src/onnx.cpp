// tinyfin._onnx: libtinyfin-onnx (include/tinyfin/onnx.hpp) for tinyfin.onnx. A module of its own,
// built only when libonnx is found, so that `import tinyfin` never loads protobuf; tinyfin/onnx/
// is the Python half (numpy conversion, ONNX Runtime's names, the onnx.backend implementation).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "tinyfin/onnx.hpp"

namespace py = pybind11;
using namespace tinyfin;

namespace {

// (element type number, shape, bytes) <-> HostTensor: numpy arrays cross as raw buffers, the
// Python half maps dtypes.
onnx::HostTensor host_from(int type, const std::vector<int64_t> &shape, const py::buffer &data) {
    const py::buffer_info info = data.request();
    onnx::HostTensor host;
    host.type = static_cast<onnx::ElementType>(type);
    host.shape = shape;
    const std::size_t bytes = static_cast<std::size_t>(info.size * info.itemsize);
    host.data.resize(bytes);
    if (bytes) std::memcpy(host.data.data(), info.ptr, bytes);
    return host;
}

py::tuple host_to(const onnx::HostTensor &host) {
    return py::make_tuple(static_cast<int>(host.type), host.shape,
                          py::bytes(reinterpret_cast<const char *>(host.data.data()), host.data.size()));
}

// A value crosses as ("tensor", type, shape, bytes), ("sequence", element type, [(type, shape,
// bytes), ...]) or ("none",).
onnx::HostValue value_from(const py::tuple &t) {
    const auto kind = t[0].cast<std::string>();
    if (kind == "none") return onnx::HostValue::none();
    if (kind == "sequence") {
        std::vector<onnx::HostTensor> elements;
        for (const auto &e : t[2].cast<py::list>()) {
            const auto et = e.cast<py::tuple>();
            elements.push_back(
                host_from(et[0].cast<int>(), et[1].cast<std::vector<int64_t>>(), et[2].cast<py::buffer>()));
        }
        return onnx::HostValue::sequence(static_cast<onnx::ElementType>(t[1].cast<int>()), std::move(elements));
    }
    return onnx::HostValue::of(host_from(t[1].cast<int>(), t[2].cast<std::vector<int64_t>>(), t[3].cast<py::buffer>()));
}

py::tuple value_to(const onnx::HostValue &v) {
    switch (v.kind) {
    case onnx::ValueKind::none: return py::make_tuple("none");
    case onnx::ValueKind::sequence: {
        py::list elements;
        for (const auto &e : v.elements) elements.append(host_to(e));
        return py::make_tuple("sequence", static_cast<int>(v.element_type), elements);
    }
    case onnx::ValueKind::tensor: break;
    }
    const py::tuple t = host_to(v.tensor);
    return py::make_tuple("tensor", t[0], t[1], t[2]);
}

py::dict info_dict(const onnx::TensorInfo &info) {
    py::dict d;
    d["kind"] = onnx::value_kind_name(info.kind);
    d["optional"] = info.optional;
    d["name"] = info.name;
    d["type"] = static_cast<int>(info.type);
    d["has_shape"] = info.has_shape;
    d["shape"] = info.shape;
    d["dim_names"] = info.dim_names;
    return d;
}

}  // namespace

PYBIND11_MODULE(_onnx, m) {
    m.doc() = "libtinyfin-onnx for tinyfin.onnx; import tinyfin.onnx, not this module";
    // tinyfin._C registers Tensor (run_tensors takes and returns tinyfin tensors).
    py::module_::import("tinyfin._C");
    static py::exception<onnx::ModelError> model_error(m, "ModelError", PyExc_ValueError);
    static py::exception<onnx::UnsupportedError> unsupported_error(m, "UnsupportedError", PyExc_NotImplementedError);
    static py::exception<onnx::InputError> input_error(m, "InputError", PyExc_ValueError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const onnx::ModelError &e) {
            model_error(e.what());
        } catch (const onnx::UnsupportedError &e) {
            unsupported_error(e.what());
        } catch (const onnx::InputError &e) {
            input_error(e.what());
        }
    });

    py::class_<onnx::InferenceSession>(m, "Session")
        .def(py::init([](const std::string &path, const std::string &backend, bool profile, bool shape_inference,
                         uint64_t max_tensor_bytes) {
                 py::gil_scoped_release release;
                 return onnx::InferenceSession(path, {backend, max_tensor_bytes, shape_inference, profile});
             }),
             py::arg("path"), py::arg("backend"), py::arg("profile"), py::arg("shape_inference"),
             py::arg("max_tensor_bytes"))
        .def_static(
            "from_bytes",
            [](const py::bytes &data, const std::string &backend, bool profile, bool shape_inference,
               uint64_t max_tensor_bytes, const std::string &base_dir) {
                const std::string bytes = data;
                py::gil_scoped_release release;
                return onnx::InferenceSession::from_bytes(
                    bytes.data(), bytes.size(), {backend, max_tensor_bytes, shape_inference, profile}, base_dir);
            },
            py::arg("data"), py::arg("backend"), py::arg("profile"), py::arg("shape_inference"),
            py::arg("max_tensor_bytes"), py::arg("base_dir"))
        .def("inputs",
             [](const onnx::InferenceSession &s) {
                 py::list out;
                 for (const auto &info : s.get_inputs()) out.append(info_dict(info));
                 return out;
             })
        .def("outputs",
             [](const onnx::InferenceSession &s) {
                 py::list out;
                 for (const auto &info : s.get_outputs()) out.append(info_dict(info));
                 return out;
             })
        .def("load_report",
             [](const onnx::InferenceSession &s) {
                 const auto &r = s.load_report();
                 py::dict d;
                 d["opset"] = r.opset;
                 d["nodes"] = r.nodes;
                 d["folded"] = r.folded;
                 d["initializer_bytes"] = r.initializer_bytes;
                 d["backend"] = r.backend;
                 py::dict fusions;
                 for (const auto &[name, count] : r.fusions) fusions[py::str(name)] = count;
                 d["fusions"] = fusions;
                 return d;
             })
        .def("last_run",
             [](const onnx::InferenceSession &s) {
                 const auto &r = s.last_run();
                 py::dict d;
                 d["peak_bytes"] = r.peak_bytes;
                 d["nodes_run"] = r.nodes_run;
                 d["fallbacks"] = r.fallbacks;
                 py::list nodes;
                 for (const auto &n : r.nodes) {
                     py::dict nd;
                     nd["node"] = n.node;
                     nd["op_type"] = n.op_type;
                     nd["backend"] = n.backend;
                     nd["fallbacks"] = n.fallbacks;
                     nd["seconds"] = n.seconds;
                     nodes.append(nd);
                 }
                 d["nodes"] = nodes;
                 return d;
             })
        .def("run",
             [](onnx::InferenceSession &s, const std::vector<std::string> &names, const py::list &feeds) {
                 std::vector<std::pair<std::string, onnx::HostValue>> values;
                 for (const auto &item : feeds) {
                     const auto t = item.cast<py::tuple>();
                     values.emplace_back(t[0].cast<std::string>(), value_from(t[1].cast<py::tuple>()));
                 }
                 std::vector<onnx::HostValue> outs;
                 {
                     py::gil_scoped_release release;
                     outs = s.run_values(names, values);
                 }
                 py::list result;
                 for (const auto &o : outs) result.append(value_to(o));
                 return result;
             })
        .def("run_tensors",
             // tinyfin tensors in and out, on the session's device: no host copies on the way.
             [](onnx::InferenceSession &s, const std::vector<std::string> &names,
                const std::vector<std::pair<std::string, Tensor>> &feeds) {
                 py::gil_scoped_release release;
                 return s.run(names, feeds);
             });

    m.def("supported_ops", &onnx::supported_ops);
}
