// Tensor factories: zeros, ones, full, empty, arange, rand, randn and tensors from host buffers.
#include "bindings.hpp"

#include <pybind11/numpy.h>

namespace tinyfin::python {

namespace {
using Release = py::gil_scoped_release;
}

void bind_factories(py::module_ &m) {
    m.def("_empty", [](const Shape &shape, py::object dtype, py::object device) {
        DType d = dtype_arg(dtype, DType::f32);
        auto dev = device_arg(device);
        Release r;
        return empty(shape, d, dev);
    });
    m.def("_full", [](const Shape &shape, double value, py::object dtype, py::object device) {
        DType d = dtype_arg(dtype, DType::f32);
        auto dev = device_arg(device);
        Release r;
        return full(shape, value, d, dev);
    });
    m.def("_arange", [](double start, double end, double step, py::object dtype, py::object device) {
        DType d = dtype_arg(dtype, DType::f32);
        auto dev = device_arg(device);
        Release r;
        return arange(start, end, step, d, dev);
    });
    m.def("_rand", [](const Shape &shape, uint64_t seed, py::object device) {
        auto dev = device_arg(device);
        Release r;
        return rand(shape, seed, dev);
    });
    m.def("_randn", [](const Shape &shape, uint64_t seed, py::object device) {
        auto dev = device_arg(device);
        Release r;
        return randn(shape, seed, dev);
    });
    m.def("mix_seed", &nn::mix_seed);
    m.def(
        "permutation",
        [](int64_t n, uint64_t seed, int epoch) {
            std::vector<int64_t> perm = nn::permutation(n, seed, epoch);
            return py::array_t<int64_t>(static_cast<py::ssize_t>(perm.size()), perm.data());
        },
        py::arg("n"), py::arg("seed"), py::arg("epoch"));
}

}  // namespace tinyfin::python
