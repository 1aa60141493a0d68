// tinyfin.Tensor objects: made and freed without pybind11's per-object work where possible.
//
// pybind11 makes each Tensor object with a heap-allocated C++ value, an entry in its registry of
// live instances (a hash map keyed by that value's address) and a type lookup by typeid, and
// undoes all of it when the object dies: for a 16-element op that was a fifth of the call
// (docs/performance.md). A dying tinyfin.Tensor of the exact type, in the plain state pybind11
// leaves it in (owned value, no weak references, no keep-alive patients), instead drops its C++
// tensor and waits on a free list with its value and registry entry intact; a new result takes
// one from there and only moves the tensor in, as CPython's own float and tuple free lists do.
// The list is a plain array under the GIL (every caller holds it) and is emptied at exit.
#include <array>

#include "bindings.hpp"

namespace tinyfin::python {

namespace {

PyTypeObject *tensor_type = nullptr;
destructor original_dealloc = nullptr;

// Enough for the temporaries of a Python expression or a small loop body; objects beyond it are
// freed as pybind11 frees them.
constexpr std::size_t free_capacity = 64;
std::array<PyObject *, free_capacity> free_objects;
std::size_t free_count = 0;
// Zero after exit's drain: objects that die later are freed at once.
std::size_t free_limit = free_capacity;

py::detail::instance *instance_of(PyObject *obj) { return reinterpret_cast<py::detail::instance *>(obj); }

// An object in the state new_tensor_object() can reuse: exact type, pybind11's simple layout with
// its value owned, constructed and registered, nothing else attached.
bool reusable(PyObject *obj) {
    const py::detail::instance *inst = instance_of(obj);
    return Py_TYPE(obj) == tensor_type && inst->simple_layout && inst->owned && inst->simple_holder_constructed &&
           inst->simple_instance_registered && !inst->weakrefs && !inst->has_patients;
}

Tensor &value_of(PyObject *obj) { return *static_cast<Tensor *>(instance_of(obj)->simple_value_holder[0]); }

void tensor_dealloc(PyObject *self) {
    if (free_count >= free_limit || !reusable(self)) {
        original_dealloc(self);
        return;
    }
    {
        // The tensor's storage may run Python code when it goes (a numpy array it borrowed is
        // released): keep a pending exception, as pybind11's dealloc does.
        py::error_scope keep;
        Tensor dropped = std::move(value_of(self));
    }
    // That code may have filled the list meanwhile.
    if (free_count >= free_limit) {
        original_dealloc(self);
        return;
    }
    free_objects[free_count++] = self;
}

// At exit, while pybind11's registry still exists: the waiting objects are freed for real.
void drain() {
    free_limit = 0;
    while (free_count > 0) original_dealloc(free_objects[--free_count]);
}

}  // namespace

PyObject *new_tensor_object(Tensor &&t) {
    if (free_count > 0) {
        PyObject *obj = free_objects[--free_count];
        _Py_NewReference(obj);
        value_of(obj) = std::move(t);
        return obj;
    }
    static const py::detail::type_info *info = py::detail::get_type_info(typeid(Tensor));
    auto move = [](const void *p) -> void * {
        return new Tensor(std::move(*const_cast<Tensor *>(static_cast<const Tensor *>(p))));
    };
    return py::detail::type_caster_generic::cast(&t, py::return_value_policy::move, nullptr, info, nullptr, +move)
        .ptr();
}

void bind_objects(py::module_ &m) {
    tensor_type = reinterpret_cast<PyTypeObject *>(m.attr("Tensor").ptr());
    // Tensor keeps no __dict__ (no py::dynamic_attr) and is no GC type: a reused object carries
    // nothing over from its previous life but its empty value.
    if (tensor_type->tp_dictoffset != 0 || PyType_IS_GC(tensor_type))
        throw std::runtime_error("tinyfin._C: Tensor has a __dict__ or takes part in GC; "
                                 "objects.cpp cannot reuse its objects");
    original_dealloc = tensor_type->tp_dealloc;
    tensor_type->tp_dealloc = tensor_dealloc;
    PyType_Modified(tensor_type);
    py::module_::import("atexit").attr("register")(py::cpp_function(&drain));
}

}  // namespace tinyfin::python
