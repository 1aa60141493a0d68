// The per-op fast path: Tensor's number and comparison slots (a + b, a < b, a += b, -a) and the
// module functions of the binary ops (tinyfin.add(a, b, out=c), ...) as plain CPython entry
// points for the common cases, two tensors or a tensor and a Python number, so that a small op skips pybind11's dispatcher
// (method lookup, overload loop, argument casters with their type-map lookups). Anything else
// (other operand types, other keywords) goes to the pybind11 bindings of tensor.cpp
// and ops.cpp unchanged, so behaviour and errors are theirs. docs/performance.md has the numbers.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace tinyfin::python {

namespace {

using Binary = Tensor (*)(const Tensor &, const Tensor &);
using BinaryOut = void (*)(const Tensor &, const Tensor &, const Tensor &);

PyTypeObject *tensor_type = nullptr;

// The C++ Tensor inside a tinyfin.Tensor object (exact type: pybind11's simple layout, one
// value pointer), or nullptr for anything else.
const Tensor *tensor_of(PyObject *obj) {
    if (Py_TYPE(obj) != tensor_type) return nullptr;
    auto *inst = reinterpret_cast<py::detail::instance *>(obj);
    if (!inst->simple_layout || !inst->simple_holder_constructed) return nullptr;
    return static_cast<const Tensor *>(inst->simple_value_holder[0]);
}

// Sets the Python error for the exception being handled, through the translators every tinyfin
// extension registered (errors.cpp), as pybind11's dispatcher does.
PyObject *raise_current() {
    try {
        throw;
    } catch (py::error_already_set &e) {
        e.restore();
    } catch (...) {
        if (!py::detail::apply_exception_translators(
                py::detail::get_local_internals().registered_exception_translators) &&
            !py::detail::apply_exception_translators(py::detail::get_internals().registered_exception_translators))
            PyErr_SetString(PyExc_SystemError, "tinyfin: an exception escaped the translators");
    }
    return nullptr;
}

template <typename F>
PyObject *guarded(int64_t numel, F &&run) {
    try {
        Tensor out;
        {
            ReleaseFor release(numel);
            out = run();
        }
        return new_tensor_object(std::move(out));
    } catch (...) {
        return raise_current();
    }
}

// A Python int or float operand (not a bool) as a rank-0 tensor of like's dtype on like's
// device, as operand() in tensor.cpp makes it; an undefined tensor for anything else.
Tensor number_like(PyObject *obj, const Tensor &like) {
    if (PyFloat_CheckExact(obj)) return scalar_like(like, PyFloat_AS_DOUBLE(obj));
    if (PyLong_CheckExact(obj)) {
        double v = PyLong_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();  // too large: the bindings raise their own error
            return Tensor();
        }
        return scalar_like(like, v);
    }
    return Tensor();
}

// The operands of a binary op when both are tensors, or one is a tensor and the other a number;
// false for anything else.
bool operands(PyObject *a, PyObject *b, const Tensor *&x, const Tensor *&y, Tensor &number) {
    x = tensor_of(a);
    y = tensor_of(b);
    if (x && y) return true;
    try {
        if (x && (number = number_like(b, *x)).defined()) {
            y = &number;
            return true;
        }
        if (y && (number = number_like(a, *y)).defined()) {
            x = &number;
            return true;
        }
    } catch (...) {
        return false;  // the bindings report it
    }
    return false;
}

int64_t larger(const Tensor &a, const Tensor &b) { return std::max(a.numel(), b.numel()); }

// Operands the fast path leaves alone go to the pybind11 methods (__add__, then the other
// operand's __radd__), as CPython's own slot function would call them; that function cannot be
// reused, since it only calls __add__ while the type's slot is itself.
PyObject *call_method(PyObject *self, const char *name, PyObject *arg) {
    PyObject *method = PyObject_GetAttrString(self, name);
    if (!method) return nullptr;
    PyObject *result = PyObject_CallOneArg(method, arg);
    Py_DECREF(method);
    return result;
}

PyObject *fallback(PyObject *a, PyObject *b, const char *name, const char *rname) {
    if (Py_TYPE(a) == tensor_type) {
        PyObject *r = call_method(a, name, b);
        if (r != Py_NotImplemented) return r;
        Py_DECREF(r);
    }
    if (rname && Py_TYPE(b) == tensor_type && Py_TYPE(a) != tensor_type) return call_method(b, rname, a);
    Py_RETURN_NOTIMPLEMENTED;
}

unaryfunc original_neg;
richcmpfunc original_richcompare;

struct Names {
    const char *name, *rname;
};
constexpr Names add_names{"__add__", "__radd__"}, sub_names{"__sub__", "__rsub__"}, mul_names{"__mul__", "__rmul__"},
    div_names{"__truediv__", "__rtruediv__"}, matmul_names{"__matmul__", "__rmatmul__"},
    iadd_names{"__iadd__", nullptr}, isub_names{"__isub__", nullptr}, imul_names{"__imul__", nullptr},
    idiv_names{"__itruediv__", nullptr};

bool number_value(PyObject *obj, double &v) {
    if (PyFloat_CheckExact(obj)) {
        v = PyFloat_AS_DOUBLE(obj);
        return true;
    }
    if (!PyLong_CheckExact(obj)) return false;
    v = PyLong_AsDouble(obj);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();  // too large: the bindings raise their own error
        return false;
    }
    return true;
}

using TensorNumber = Tensor (*)(const Tensor &, double);
using NumberTensor = Tensor (*)(double, const Tensor &);

// a + 1.0 and 1.0 + a go to the core's number overloads, which reuse cached rank-0 constants of
// the tensor's dtype (the bindings' operand() makes a new one each call).
template <Binary fn, TensorNumber tn, NumberTensor nt, const Names *names>
PyObject *number_slot(PyObject *a, PyObject *b) {
    const Tensor *x = tensor_of(a), *y = tensor_of(b);
    if (x && y) return guarded(larger(*x, *y), [&] { return fn(*x, *y); });
    double v;
    if (x && number_value(b, v)) return guarded(x->numel(), [&] { return tn(*x, v); });
    if (y && number_value(a, v)) return guarded(y->numel(), [&] { return nt(v, *y); });
    return fallback(a, b, names->name, names->rname);
}

// matmul's work grows faster than its operands: it always releases the GIL.
PyObject *matmul_slot(PyObject *a, PyObject *b) {
    const Tensor *x = tensor_of(a), *y = tensor_of(b);
    if (!x || !y) return fallback(a, b, matmul_names.name, matmul_names.rname);
    return guarded(release_threshold, [&] { return matmul(*x, *y); });
}

// x op= y through the out= form; the bindings' method takes the cases it cannot do: autograd
// recording the write, and true division of an integer tensor (an error).
template <BinaryOut fn, const Names *names, bool true_division = false>
PyObject *inplace_slot(PyObject *a, PyObject *b) {
    const Tensor *x, *y;
    Tensor number;
    if (!tensor_of(a) || !operands(a, b, x, y, number)) return fallback(a, b, names->name, nullptr);
    if ((grad_enabled() && (x->requires_grad() || y->requires_grad())) ||
        (true_division && x->dtype() != DType::f32 && x->dtype() != DType::f16 && x->dtype() != DType::bf16))
        return fallback(a, b, names->name, nullptr);
    try {
        {
            ReleaseFor release(larger(*x, *y));
            fn(*x, *y, *x);
        }
        Py_INCREF(a);
        return a;
    } catch (...) {
        return raise_current();
    }
}

PyObject *negative_slot(PyObject *a) {
    const Tensor *x = tensor_of(a);
    if (!x) return original_neg(a);
    return guarded(x->numel(), [&] { return neg(*x); });
}

// x OP v for a number v and an integer or bool tensor: the C++ scalar forms, which compare with
// v's exact value (x < 0.5 is x <= 0), where v converted to x's dtype would be truncated.
PyObject *compare_number(const Tensor &x, double v, int op) {
    return guarded(x.numel(), [&] {
        switch (op) {
        case Py_LT: return lt(x, v);
        case Py_LE: return le(x, v);
        case Py_EQ: return eq(x, v);
        case Py_NE: return ne(x, v);
        case Py_GT: return gt(x, v);
        default: return ge(x, v);
        }
    });
}

PyObject *richcompare_slot(PyObject *a, PyObject *b, int op) {
    const Tensor *x, *y;
    Tensor number;
    if (!operands(a, b, x, y, number)) return original_richcompare(a, b, op);
    if (number.defined()) {
        const bool number_first = x == &number;
        const Tensor &t = number_first ? *y : *x;
        PyObject *v = number_first ? a : b;
        if (t.dtype() != DType::f32 && t.dtype() != DType::f16 && t.dtype() != DType::bf16) {
            static const int mirrored[] = {Py_GT, Py_GE, Py_EQ, Py_NE, Py_LT, Py_LE};  // Py_LT = 0 ... Py_GE = 5
            return compare_number(t, PyFloat_CheckExact(v) ? PyFloat_AS_DOUBLE(v) : PyLong_AsDouble(v),
                                  number_first ? mirrored[op] : op);
        }
    }
    return guarded(larger(*x, *y), [&] {
        switch (op) {
        case Py_LT: return lt(*x, *y);
        case Py_LE: return le(*x, *y);
        case Py_EQ: return eq(*x, *y);
        case Py_NE: return ne(*x, *y);
        case Py_GT: return gt(*x, *y);
        default: return ge(*x, *y);
        }
    });
}

// tinyfin.add(a, b) / tinyfin.add(a, b, out=c) and the other binary ops with out=.
struct FastFunction {
    Binary fn;
    BinaryOut out_fn;
    PyObject *fallback;  // the pybind11 function it replaces
    std::string doc;
    PyMethodDef def;
};

PyObject *fast_function(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    auto &f = *static_cast<FastFunction *>(PyCapsule_GetPointer(self, nullptr));
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *out = nullptr;
    if (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "out") == 0) out = args[nargs];
    const Tensor *x = nargs == 2 ? tensor_of(args[0]) : nullptr;
    const Tensor *y = nargs == 2 ? tensor_of(args[1]) : nullptr;
    const Tensor *o = out && out != Py_None ? tensor_of(out) : nullptr;
    if (!x || !y || (nkw && !out) || (out && out != Py_None && !o))
        return PyObject_Vectorcall(f.fallback, args, static_cast<size_t>(nargs), kwnames);
    if (!o) return guarded(larger(*x, *y), [&] { return f.fn(*x, *y); });
    try {
        {
            ReleaseFor release(o->numel());
            f.out_fn(*x, *y, *o);
        }
        Py_INCREF(out);
        return out;
    } catch (...) {
        return raise_current();
    }
}

}  // namespace

void bind_fastpath(py::module_ &m) {
    py::object cls = m.attr("Tensor");
    tensor_type = reinterpret_cast<PyTypeObject *>(cls.ptr());
    PyNumberMethods *nb = tensor_type->tp_as_number;
    original_neg = nb->nb_negative;
    original_richcompare = tensor_type->tp_richcompare;
    if (!original_neg || !original_richcompare)
        throw std::runtime_error("tinyfin._C: Tensor lacks an operator slot the fast path wraps");
    nb->nb_add = number_slot<&add, &add, &add, &add_names>;
    nb->nb_subtract = number_slot<&sub, &sub, &sub, &sub_names>;
    nb->nb_multiply = number_slot<&mul, &mul, &mul, &mul_names>;
    nb->nb_true_divide = number_slot<&true_div, &true_div, &true_div, &div_names>;
    nb->nb_matrix_multiply = matmul_slot;
    nb->nb_inplace_add = inplace_slot<&add, &iadd_names>;
    nb->nb_inplace_subtract = inplace_slot<&sub, &isub_names>;
    nb->nb_inplace_multiply = inplace_slot<&mul, &imul_names>;
    nb->nb_inplace_true_divide = inplace_slot<&div, &idiv_names, true>;
    nb->nb_negative = negative_slot;
    tensor_type->tp_richcompare = richcompare_slot;
    PyType_Modified(tensor_type);

    // The module functions: one FastFunction per op, alive as long as the process (capsules
    // without destructors point into this static table).
    static std::vector<std::unique_ptr<FastFunction>> table;
#define TF_FAST(fn, SYM)                                                                                               \
    table.push_back(std::make_unique<FastFunction>(                                                                    \
        FastFunction{static_cast<Binary>(&tinyfin::fn), static_cast<BinaryOut>(&tinyfin::fn), nullptr, {}, {}}));
    TINYFIN_BINARY_OUT_OPS(TF_FAST)
#undef TF_FAST
    std::size_t k = 0;
#define TF_NAME(fn, SYM) names[k++] = #fn;
    std::array<const char *, 64> names{};
    TINYFIN_BINARY_OUT_OPS(TF_NAME)
#undef TF_NAME
    for (std::size_t i = 0; i < table.size(); ++i) {
        FastFunction &f = *table[i];
        py::object original = m.attr(names[i]);
        f.doc = py::str(original.attr("__doc__"));
        f.fallback = original.release().ptr();
        f.def = {names[i], reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_function)),
                 METH_FASTCALL | METH_KEYWORDS, f.doc.c_str()};
        py::object self = py::reinterpret_steal<py::object>(PyCapsule_New(&f, nullptr, nullptr));
        if (!self) throw py::error_already_set();
        PyObject *fn = PyCFunction_NewEx(&f.def, self.ptr(), m.attr("__name__").ptr());
        if (!fn) throw py::error_already_set();
        m.attr(names[i]) = py::reinterpret_steal<py::object>(fn);
    }
}

}  // namespace tinyfin::python
