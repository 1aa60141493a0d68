// tinyfin's Python extension (tinyfin._C): what the binding files share.
#pragma once

#include <optional>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

namespace tinyfin::python {

namespace py = pybind11;

// Each bind_* adds one area to the module (errors.cpp, tensor.cpp, ops.cpp, nn.cpp,
// backends.cpp, interop.cpp).
void bind_errors(py::module_ &m);
void bind_tensor(py::module_ &m);
void bind_ops(py::module_ &m);
void bind_nn(py::module_ &m);
void bind_backends(py::module_ &m);
void bind_interop(py::module_ &m);
void bind_factories(py::module_ &m);
void bind_amp(py::module_ &m);
// After bind_tensor and bind_ops: the fast path of fastpath.cpp over their operators.
void bind_fastpath(py::module_ &m);
// After bind_tensor: Tensor objects freed onto objects.cpp's free list.
void bind_objects(py::module_ &m);

// A new tinyfin.Tensor owning t (a reused object when one waits, else pybind11's cast).
PyObject *new_tensor_object(Tensor &&t);

// Raises the tinyfin.<kind> Python exception (kind: "DeviceError", "DTypeError", ...).
[[noreturn]] void raise_python(const char *kind, const std::string &message);

// None, a tinyfin.device or a string ("cpu", "vulkan:0") -> a device (nullopt for None).
std::optional<Device> device_arg(py::handle obj);
// None, a tinyfin dtype or a name ("float32") -> a dtype (fallback for None).
DType dtype_arg(py::handle obj, DType fallback);
// A tensor operand: a Tensor as is; a Python number becomes a rank-0 tensor of like's dtype on
// like's device (so `t + 2` keeps t's dtype, as in PyTorch for same-kind scalars).
Tensor operand(py::handle obj, const Tensor &like, const char *op);

// a / b as Python's (and PyTorch's) true division: integer and bool operands divide as float32,
// an integer tensor beside a float one takes its dtype.
Tensor true_div(const Tensor &a, const Tensor &b);
Tensor true_div(const Tensor &a, double b);
Tensor true_div(double a, const Tensor &b);
// One axis or a tuple/list of axes (None: all) -> axes.
std::vector<int> axes_arg(py::handle obj);

// Releases the GIL while an op on about numel elements runs, when that is worth it: below
// release_threshold elements an elementwise op takes a few microseconds, releasing and re-taking
// the GIL costs a good part of that (docs/performance.md), and another Python thread waits no
// longer than the op. Larger ops, matmul and the nn ops always release (docs/python.md, Threads).
constexpr int64_t release_threshold = int64_t{1} << 14;
class ReleaseFor {
public:
    explicit ReleaseFor(int64_t numel) {
        if (numel >= release_threshold) release_.emplace();
    }

private:
    std::optional<py::gil_scoped_release> release_;
};

// Thrown by binding code for bad Python input; translated to tinyfin's classes.
}  // namespace tinyfin::python
