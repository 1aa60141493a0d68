// tinyfin.Tensor: properties, views and indexing, operators, autograd; dtypes and devices.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "bindings.hpp"
#include "tinyfin/extend.hpp"

namespace tinyfin::python {

namespace {

using Release = py::gil_scoped_release;

const char *python_dtype_name(DType d) {
    switch (d) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::boolean: return "bool";
    default: break;
    }
    return dtype_name(d);  // the block-quantized dtypes have no torch name
}

bool is_float(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

int64_t normalise_axis(int64_t axis, int64_t rank, const char *op) {
    if (axis < -rank || axis >= rank)
        raise_python("ShapeError", std::string(op) + ": dim " + std::to_string(axis) +
                                       " is out of range for a tensor of rank " + std::to_string(rank));
    return axis < 0 ? axis + rank : axis;
}

// Shape arguments given as t.reshape(2, 3) or t.reshape((2, 3)).
Shape shape_args(const py::args &args, const char *op) {
    py::handle src = args;
    if (args.size() == 1 && (py::isinstance<py::tuple>(args[0]) || py::isinstance<py::list>(args[0]))) src = args[0];
    Shape shape;
    for (py::handle h : src) {
        if (!PyLong_Check(h.ptr()) || PyBool_Check(h.ptr()))
            raise_python("ValueError", std::string(op) + ": sizes must be integers, got " +
                                           std::string(py::str(py::type::handle_of(h).attr("__name__"))));
        shape.push_back(h.cast<int64_t>());
    }
    return shape;
}

// Indexing: ints pick (and drop) an axis, slices keep it with a step > 0, None adds an axis of
// size 1, ... stands for the axes not named. Every result is a view.
Tensor index(const Tensor &t, py::handle key) {
    std::vector<py::handle> items;
    if (py::isinstance<py::tuple>(key)) {
        for (py::handle h : py::reinterpret_borrow<py::tuple>(key)) items.push_back(h);
    } else {
        items.push_back(key);
    }
    int64_t named = 0;
    int ellipses = 0;
    for (py::handle h : items) {
        if (h.ptr() == Py_Ellipsis)
            ++ellipses;
        else if (!h.is_none())
            ++named;
    }
    if (ellipses > 1) raise_python("ValueError", "index: at most one ... (Ellipsis) is allowed");
    int64_t rank = t.rank();
    if (named > rank)
        raise_python("ShapeError",
                     "index: " + std::to_string(named) + " indices for a tensor of rank " + std::to_string(rank));
    Tensor out = t;
    Shape final_shape;  // the result's shape after ints drop and None adds axes
    int64_t axis = 0;  // the axis of `out` the next item applies to
    for (py::handle h : items) {
        if (h.ptr() == Py_Ellipsis) {
            int64_t skip = rank - named;
            for (int64_t k = 0; k < skip; ++k) final_shape.push_back(out.shape()[axis++]);
        } else if (h.is_none()) {
            final_shape.push_back(1);
        } else if (PySlice_Check(h.ptr())) {
            Py_ssize_t start, stop, step;
            if (PySlice_Unpack(h.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
            if (step <= 0)
                raise_python("ValueError", "index: slice step must be positive (got " + std::to_string(step) +
                                               "): tinyfin views have no negative strides, so a negative step "
                                               "cannot be a view as in numpy (PyTorch refuses it too); "
                                               "tinyfin.flip(x, dim) gives the reversed copy, x[index_list] "
                                               "any other order");
            int64_t n = out.shape()[axis];
            Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
            int64_t begin = len > 0 ? start : 0;
            int64_t end = len > 0 ? start + (len - 1) * step + 1 : 0;
            out = out.slice(static_cast<int>(axis), begin, end, step);
            final_shape.push_back(out.shape()[axis]);
            ++axis;
        } else if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
            int64_t i = h.cast<int64_t>();
            int64_t n = out.shape()[axis];
            if (i < -n || i >= n)
                raise_python("ValueError", "index " + std::to_string(i) + " is out of range for dim " +
                                               std::to_string(axis) + " of size " + std::to_string(n));
            if (i < 0) i += n;
            out = out.slice(static_cast<int>(axis), i, i + 1, 1);
            ++axis;
        } else {
            raise_python("DTypeError", "index: only integers, slices, None and ... make views, got " +
                                           std::string(py::str(py::type::handle_of(h).attr("__name__"))));
        }
    }
    for (; axis < rank; ++axis) final_shape.push_back(out.shape()[axis]);
    if (final_shape != out.shape()) out = out.view(final_shape);
    return out;
}

// An index item other than an int, a slice, None or ...: an index list, array or tensor, or a
// bool mask (numpy's advanced indexing), which tinyfin/_indexing.py handles as a gathered copy.
bool advanced(py::handle key) {
    auto basic = [](py::handle h) {
        return h.is_none() || h.ptr() == Py_Ellipsis || PySlice_Check(h.ptr()) ||
               (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()));
    };
    if (!PyTuple_Check(key.ptr())) return !basic(key);
    for (py::handle h : py::reinterpret_borrow<py::tuple>(key))
        if (!basic(h)) return true;
    return false;
}

py::object indexing(const char *name) { return py::module_::import("tinyfin._indexing").attr(name); }

Tensor binary(const Tensor &a, py::handle b, Tensor (*fn)(const Tensor &, const Tensor &), const char *op) {
    Tensor rhs = operand(b, a, op);
    ReleaseFor release(std::max(a.numel(), rhs.numel()));
    return fn(a, rhs);
}

Tensor rbinary(const Tensor &b, py::handle a, Tensor (*fn)(const Tensor &, const Tensor &), const char *op) {
    Tensor lhs = operand(a, b, op);
    ReleaseFor release(std::max(lhs.numel(), b.numel()));
    return fn(lhs, b);
}

// A copy with history (PyTorch's clone): the copy is recorded as a write of x when grad mode is on.
Tensor clone(const Tensor &x) {
    Tensor out = empty(x.shape(), x.dtype(), x.device());
    out.assign_(x);
    return out;
}

// x op= y: writes into x's elements, so every view of x sees it. Without autograd recording it
// is the out= form; with it, op(x, y) is written back with assign_, which records the write
// (x's history, or its base's, becomes op's). op reads a copy of x when its rule may save x.
Tensor &inplace(Tensor &a, py::handle b, Tensor (*fn)(const Tensor &, const Tensor &),
                void (*into)(const Tensor &, const Tensor &, const Tensor &), const char *op) {
    Tensor rhs = operand(b, a, op);
    if (fn == static_cast<Tensor (*)(const Tensor &, const Tensor &)>(&div) && !is_float(a.dtype()))
        raise_python("DTypeError", std::string(op) + ": true division of a " + python_dtype_name(a.dtype()) +
                                       " tensor gives floats, which cannot be written into it; use "
                                       "x = x / y, or x.div_(y) on a float tensor");
    ReleaseFor release(std::max(a.numel(), rhs.numel()));
    if (!grad_enabled() || !(a.requires_grad() || rhs.requires_grad())) {
        into(a, rhs, a);
        return a;
    }
    if (a.requires_grad() && a.is_leaf())
        throw AutogradError(std::string(op) +
                            ": a leaf tensor that requires grad is written in place while grad mode is on, "
                            "which would lose its gradient; update parameters under NoGradGuard, or write into "
                            "a clone()");
    const bool saves_input = fn != static_cast<Tensor (*)(const Tensor &, const Tensor &)>(&add) &&
                             fn != static_cast<Tensor (*)(const Tensor &, const Tensor &)>(&sub);
    Tensor result = fn(saves_input ? clone(a) : a, rhs);
    a.assign_(result);
    return a;
}

#define TINYFIN_INPLACE(fn)                                                                                            \
    static_cast<Tensor (*)(const Tensor &, const Tensor &)>(&fn),                                                      \
        static_cast<void (*)(const Tensor &, const Tensor &, const Tensor &)>(&fn)

}  // namespace

Tensor true_div(const Tensor &a, const Tensor &b) {
    const bool fa = is_float(a.dtype()), fb = is_float(b.dtype());
    if (fa && fb) return div(a, b);
    DType d = fa ? a.dtype() : fb ? b.dtype() : DType::f32;
    return div(fa ? a : a.to(d), fb ? b : b.to(d));
}
Tensor true_div(const Tensor &a, double b) { return div(is_float(a.dtype()) ? a : a.to(DType::f32), b); }
Tensor true_div(double a, const Tensor &b) { return div(a, is_float(b.dtype()) ? b : b.to(DType::f32)); }

std::optional<Device> device_arg(py::handle obj) {
    if (obj.is_none()) return std::nullopt;
    if (py::isinstance<Device>(obj)) return obj.cast<Device>();
    if (py::isinstance<py::str>(obj)) return Device::parse(obj.cast<std::string>());
    raise_python("DeviceError", "device must be a string such as \"cpu\" or \"vulkan:0\" or a tinyfin.device, got " +
                                    std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

DType dtype_arg(py::handle obj, DType fallback) {
    if (obj.is_none()) return fallback;
    if (py::isinstance<DType>(obj)) return obj.cast<DType>();
    if (py::isinstance<py::str>(obj)) {
        std::string name = obj.cast<std::string>();
        for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean})
            if (name == python_dtype_name(d) || name == dtype_name(d)) return d;
        if (std::optional<DType> q = dtype_named(name)) return *q;
        raise_python("DTypeError",
                     "unknown dtype \"" + name + "\" (float32, float16, bfloat16, int32, int64, bool, q8_0 .. q8_k)");
    }
    raise_python("DTypeError", "dtype must be a tinyfin dtype such as tinyfin.float32, got " +
                                   std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

Tensor operand(py::handle obj, const Tensor &like, const char *op) {
    if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
    if (PyFloat_Check(obj.ptr()) || PyLong_Check(obj.ptr())) {
        double v = PyFloat_Check(obj.ptr()) ? PyFloat_AsDouble(obj.ptr()) : obj.cast<double>();
        return scalar_like(like, v);
    }
    raise_python("DTypeError", std::string(op) + ": expected a tinyfin.Tensor or a number, got " +
                                   std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

std::vector<int> axes_arg(py::handle obj) {
    std::vector<int> axes;
    if (obj.is_none()) return axes;
    if (PyLong_Check(obj.ptr()) && !PyBool_Check(obj.ptr())) return {obj.cast<int>()};
    if (py::isinstance<py::tuple>(obj) || py::isinstance<py::list>(obj)) {
        for (py::handle h : obj) {
            if (!PyLong_Check(h.ptr()) || PyBool_Check(h.ptr()))
                raise_python("ValueError", "dim must be an integer or a tuple of integers");
            axes.push_back(h.cast<int>());
        }
        return axes;
    }
    raise_python("ValueError", "dim must be an integer, a tuple of integers or None, got " +
                                   std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

void bind_tensor(py::module_ &m) {
    py::enum_<DType>(m, "dtype", "A tensor element type (tinyfin.float32, ...).")
        .value("float32", DType::f32)
        .value("float16", DType::f16)
        .value("bfloat16", DType::bf16)
        .value("int32", DType::i32)
        .value("int64", DType::i64)
        .value("bool", DType::boolean)
        // ggml's block-quantized formats (docs/quantization.md): weights for matmul_q and embedding_q.
        .value("q8_0", DType::q8_0)
        .value("q4_0", DType::q4_0)
        .value("q4_1", DType::q4_1)
        .value("q5_0", DType::q5_0)
        .value("q5_1", DType::q5_1)
        .value("q4_k", DType::q4_k)
        .value("q5_k", DType::q5_k)
        .value("q6_k", DType::q6_k)
        .value("q8_k", DType::q8_k)
        .def("__repr__", [](DType d) { return std::string("tinyfin.") + python_dtype_name(d); })
        .def("__str__", [](DType d) { return std::string("tinyfin.") + python_dtype_name(d); })
        .def_property_readonly("is_floating_point", [](DType d) { return is_float(d); })
        .def_property_readonly("itemsize", [](DType d) { return dtype_size(d); });

    py::class_<Device>(m, "device", "A device of a loaded backend: tinyfin.device(\"vulkan:0\").")
        .def(py::init([](const std::string &text) { return Device::parse(text); }), py::arg("spec"))
        .def(py::init(
                 [](const std::string &type, int index) { return Device::parse(type + ":" + std::to_string(index)); }),
             py::arg("type"), py::arg("index"))
        .def_property_readonly("type", [](const Device &d) { return d.backend; })
        .def_property_readonly("index", [](const Device &d) { return d.index; })
        .def("__str__", &Device::str)
        .def("__repr__",
             [](const Device &d) { return "device(type='" + d.backend + "', index=" + std::to_string(d.index) + ")"; })
        .def("__eq__",
             [](const Device &a, py::handle b) {
                 if (py::isinstance<Device>(b)) return a == b.cast<Device>();
                 if (py::isinstance<py::str>(b)) {
                     std::string s = b.cast<std::string>();
                     return s == a.str() || (s == a.backend && a.index == 0);
                 }
                 return false;
             })
        .def("__hash__", [](const Device &d) { return py::hash(py::str(d.str())); });

    // Tensor.grad_fn: PyTorch's names (MulBackward, AccumulateGrad) over the op's name in the core.
    py::class_<GradFn>(m, "GradFn", "The autograd node that recorded a tensor (Tensor.grad_fn).")
        .def("name",
             [](const GradFn &f) {
                 std::string op = f.name(), out;
                 if (op == "accumulate_grad") return std::string("AccumulateGrad");
                 bool upper = true;
                 for (char c : op) {
                     if (c == '_') {
                         upper = true;
                         continue;
                     }
                     out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
                     upper = false;
                 }
                 return out + "Backward";
             })
        .def_property_readonly("op", &GradFn::name)
        .def_property_readonly("next_functions",
                               [](const GradFn &f) {
                                   py::list out;
                                   for (const GradFn &n : f.next())
                                       out.append(py::make_tuple(n.defined() ? py::cast(n) : py::none(), 0));
                                   return py::tuple(out);
                               })
        .def("__eq__", [](const GradFn &a, const GradFn &b) { return a.id() == b.id(); })
        .def("__hash__", [](const GradFn &a) { return reinterpret_cast<std::intptr_t>(a.id()); })
        .def("__repr__", [](py::object self) {
            return "<" + self.attr("name")().cast<std::string>() + " (tinyfin op '" +
                   self.attr("op").cast<std::string>() + "')>";
        });

    py::class_<Tensor> t(m, "Tensor", "A view of refcounted storage on one device (see docs/python.md).");
    t.def_property_readonly("shape",
                            [](const Tensor &x) {
                                const Shape &s = x.shape();
                                py::tuple out(s.size());
                                for (std::size_t i = 0; i < s.size(); ++i) out[i] = py::int_(s[i]);
                                return out;
                            })
        .def(
            "size",
            [](const Tensor &x, py::object dim) -> py::object {
                if (dim.is_none()) {
                    py::tuple out(x.shape().size());
                    for (std::size_t i = 0; i < x.shape().size(); ++i) out[i] = py::int_(x.shape()[i]);
                    return out;
                }
                return py::int_(x.shape()[normalise_axis(dim.cast<int64_t>(), x.rank(), "size")]);
            },
            py::arg("dim") = py::none())
        .def("stride", [](const Tensor &x) { return py::tuple(py::cast(x.strides())); })
        .def_property_readonly("dtype", &Tensor::dtype)
        .def_property_readonly("device", &Tensor::device)
        .def_property_readonly("ndim", &Tensor::rank)
        .def("dim", &Tensor::rank)
        .def("numel", &Tensor::numel)
        .def("__len__",
             [](const Tensor &x) {
                 if (x.rank() == 0)
                     raise_python("DTypeError", "len() of a rank-0 tensor (to hand a tensor to PyTorch, use "
                                                "torch.from_dlpack(t) or torch.as_tensor(t.numpy()))");
                 return x.shape()[0];
             })
        .def_property_readonly("nbytes", &Tensor::nbytes)
        .def("element_size", [](const Tensor &x) { return dtype_size(x.dtype()); })
        .def("is_contiguous", &Tensor::is_contiguous)
        .def("is_floating_point", [](const Tensor &x) { return is_float(x.dtype()); })
        .def("shares_storage", &Tensor::shares_storage)
        .def("item",
             [](const Tensor &x) -> py::object {
                 if (x.numel() != 1)
                     raise_python("ShapeError", "item: tensor of shape " + shape_str(x.shape()) + " has " +
                                                    std::to_string(x.numel()) + " elements, expected 1");
                 if (x.dtype() == DType::boolean) return py::bool_(x.item<bool>());
                 if (x.dtype() == DType::i32 || x.dtype() == DType::i64) return py::int_(x.item<int64_t>());
                 return py::float_(x.item<float>());
             })
        .def("__bool__",
             [](const Tensor &x) {
                 if (x.numel() != 1)
                     raise_python("ValueError",
                                  "the truth value of a tensor with " + std::to_string(x.numel()) +
                                      " elements is ambiguous (use .any()/.all() or compare one element)");
                 return x.to(DType::f32).item<float>() != 0.0f;
             })
        .def("__float__", [](const Tensor &x) { return static_cast<double>(x.to(DType::f32).item<float>()); })
        .def("__int__", [](const Tensor &x) { return x.to(DType::i64).item<int64_t>(); })
        .def("__index__",
             [](const Tensor &x) {
                 if (x.dtype() != DType::i32 && x.dtype() != DType::i64)
                     raise_python("DTypeError", "only integer tensors of one element can be used as an index");
                 return x.item<int64_t>();
             })
        // Conversions.
        .def(
            "to",
            [](const Tensor &x, py::object target, py::object dtype) {
                Tensor out = x;
                if (py::isinstance<Tensor>(target)) {  // x.to(other): other's device and dtype
                    const Tensor &other = target.cast<const Tensor &>();
                    Release r;
                    out = out.to(other.device()).to(other.dtype());
                } else if (!target.is_none()) {
                    if (py::isinstance<DType>(target)) {
                        DType d = target.cast<DType>();
                        Release r;
                        out = out.to(d);
                    } else {
                        Device dev = *device_arg(target);
                        Release r;
                        out = out.to(dev);
                    }
                }
                if (!dtype.is_none()) {
                    DType d = dtype_arg(dtype, out.dtype());
                    Release r;
                    out = out.to(d);
                }
                return out;
            },
            py::arg("device") = py::none(), py::arg("dtype") = py::none())
        .def("cpu",
             [](const Tensor &x) {
                 Release r;
                 return x.to(Device{});
             })
        .def("float",
             [](const Tensor &x) {
                 Release r;
                 return x.to(DType::f32);
             })
        .def("half",
             [](const Tensor &x) {
                 Release r;
                 return x.to(DType::f16);
             })
        .def("bfloat16",
             [](const Tensor &x) {
                 Release r;
                 return x.to(DType::bf16);
             })
        .def("int",
             [](const Tensor &x) {
                 Release r;
                 return x.to(DType::i32);
             })
        .def("long",
             [](const Tensor &x) {
                 Release r;
                 return x.to(DType::i64);
             })
        .def("bool",
             [](const Tensor &x) {
                 Release r;
                 return x.to(DType::boolean);
             })
        .def("type",
             [](const Tensor &x, py::object dtype) {
                 DType d = dtype_arg(dtype, x.dtype());
                 Release r;
                 return x.to(d);
             })
        .def("contiguous", &Tensor::contiguous, py::call_guard<Release>())
        .def("clone",
             [](const Tensor &x) {
                 Release r;
                 return clone(x);
             })
        // Views.
        .def("reshape",
             [](const Tensor &x, py::args args) {
                 Shape s = shape_args(args, "reshape");
                 Release r;
                 return x.reshape(s);
             })
        .def("view",
             [](const Tensor &x, py::args args) {
                 Shape s = shape_args(args, "view");
                 Release r;
                 return x.view(s);
             })
        .def("expand",
             [](const Tensor &x, py::args args) {
                 Shape s = shape_args(args, "expand");
                 Release r;
                 return x.expand(s);
             })
        .def("permute",
             [](const Tensor &x, py::args args) {
                 Shape s = shape_args(args, "permute");
                 std::vector<int> axes(s.begin(), s.end());
                 Release r;
                 return x.permute(axes);
             })
        .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"), py::call_guard<Release>())
        .def_property_readonly("T",
                               [](const Tensor &x) {
                                   std::vector<int> axes;
                                   for (int i = x.rank() - 1; i >= 0; --i) axes.push_back(i);
                                   return x.permute(axes);
                               })
        .def_property_readonly("mT",
                               [](const Tensor &x) {
                                   if (x.rank() < 2) raise_python("ShapeError", "mT needs a tensor of rank 2 or more");
                                   return x.transpose(-2, -1);
                               })
        .def(
            "squeeze",
            [](const Tensor &x, py::object dim) {
                Shape s;
                std::vector<int> axes = axes_arg(dim);
                std::vector<bool> drop(x.rank(), false);
                if (axes.empty() && dim.is_none()) {
                    for (int i = 0; i < x.rank(); ++i) drop[i] = x.shape()[i] == 1;
                } else {
                    for (int a : axes) {
                        int64_t k = normalise_axis(a, x.rank(), "squeeze");
                        drop[k] = x.shape()[k] == 1;
                    }
                }
                for (int i = 0; i < x.rank(); ++i)
                    if (!drop[i]) s.push_back(x.shape()[i]);
                return x.view(s);
            },
            py::arg("dim") = py::none())
        .def(
            "unsqueeze",
            [](const Tensor &x, int64_t dim) {
                int64_t k = normalise_axis(dim, x.rank() + 1, "unsqueeze");
                Shape s = x.shape();
                s.insert(s.begin() + k, 1);
                return x.view(s);
            },
            py::arg("dim"))
        .def(
            "flatten",
            [](const Tensor &x, int64_t start_dim, int64_t end_dim) {
                if (x.rank() == 0) return x.reshape({1});
                int64_t a = normalise_axis(start_dim, x.rank(), "flatten");
                int64_t b = normalise_axis(end_dim, x.rank(), "flatten");
                if (a > b) raise_python("ValueError", "flatten: start_dim comes after end_dim");
                Shape s(x.shape().begin(), x.shape().begin() + a);
                int64_t n = 1;
                for (int64_t i = a; i <= b; ++i) n *= x.shape()[i];
                s.push_back(n);
                s.insert(s.end(), x.shape().begin() + b + 1, x.shape().end());
                Release r;
                return x.reshape(s);
            },
            py::arg("start_dim") = 0, py::arg("end_dim") = -1)
        .def(
            "narrow",
            [](const Tensor &x, int dim, int64_t start, int64_t length) {
                Release r;
                return narrow(x, dim, start, length);
            },
            py::arg("dim"), py::arg("start"), py::arg("length"))
        .def("__getitem__",
             [](const Tensor &x, py::handle key) -> py::object {
                 if (advanced(key)) return indexing("_advanced_getitem")(x, key);
                 return py::cast(index(x, key));
             })
        .def("__setitem__",
             [](const Tensor &x, py::handle key, py::handle value) {
                 if (advanced(key)) {
                     indexing("_advanced_setitem")(x, key, value);
                     return;
                 }
                 Tensor view = index(x, key);
                 Tensor src = operand(value, view, "__setitem__");
                 Release r;
                 view.assign_(src);
             })
        // Operators; numbers on either side take the tensor's dtype.
        .def(
            "__add__", [](const Tensor &a, py::handle b) { return binary(a, b, &add, "add"); }, py::is_operator())
        .def(
            "__radd__", [](const Tensor &a, py::handle b) { return rbinary(a, b, &add, "add"); }, py::is_operator())
        .def(
            "__sub__", [](const Tensor &a, py::handle b) { return binary(a, b, &sub, "sub"); }, py::is_operator())
        .def(
            "__rsub__", [](const Tensor &a, py::handle b) { return rbinary(a, b, &sub, "sub"); }, py::is_operator())
        .def(
            "__mul__", [](const Tensor &a, py::handle b) { return binary(a, b, &mul, "mul"); }, py::is_operator())
        .def(
            "__rmul__", [](const Tensor &a, py::handle b) { return rbinary(a, b, &mul, "mul"); }, py::is_operator())
        .def(
            "__truediv__", [](const Tensor &a, py::handle b) { return binary(a, b, &true_div, "div"); },
            py::is_operator())
        .def(
            "__rtruediv__", [](const Tensor &a, py::handle b) { return rbinary(a, b, &true_div, "div"); },
            py::is_operator())
        .def(
            "__pow__", [](const Tensor &a, py::handle b) { return binary(a, b, &pow, "pow"); }, py::is_operator())
        .def(
            "__rpow__", [](const Tensor &a, py::handle b) { return rbinary(a, b, &pow, "pow"); }, py::is_operator())
        .def(
            "__matmul__",
            [](const Tensor &a, const Tensor &b) {
                Release r;
                return matmul(a, b);
            },
            py::is_operator())
        .def(
            "__rmatmul__",
            [](const Tensor &a, const Tensor &b) {
                Release r;
                return matmul(b, a);
            },
            py::is_operator())
        .def("__neg__",
             [](const Tensor &a) {
                 Release r;
                 return neg(a);
             })
        .def("__pos__", [](const Tensor &a) { return a; })
        .def("__abs__",
             [](const Tensor &a) {
                 Release r;
                 return abs(a);
             })
        .def(
            "__eq__", [](const Tensor &a, py::handle b) { return binary(a, b, &eq, "eq"); }, py::is_operator())
        .def(
            "__ne__", [](const Tensor &a, py::handle b) { return binary(a, b, &ne, "ne"); }, py::is_operator())
        .def(
            "__lt__", [](const Tensor &a, py::handle b) { return binary(a, b, &lt, "lt"); }, py::is_operator())
        .def(
            "__le__", [](const Tensor &a, py::handle b) { return binary(a, b, &le, "le"); }, py::is_operator())
        .def(
            "__gt__", [](const Tensor &a, py::handle b) { return binary(a, b, &gt, "gt"); }, py::is_operator())
        .def(
            "__ge__", [](const Tensor &a, py::handle b) { return binary(a, b, &ge, "ge"); }, py::is_operator())
        .def(
            "__iadd__", [](Tensor &a, py::handle b) -> Tensor & { return inplace(a, b, TINYFIN_INPLACE(add), "add_"); },
            py::is_operator())
        .def(
            "__isub__", [](Tensor &a, py::handle b) -> Tensor & { return inplace(a, b, TINYFIN_INPLACE(sub), "sub_"); },
            py::is_operator())
        .def(
            "__imul__", [](Tensor &a, py::handle b) -> Tensor & { return inplace(a, b, TINYFIN_INPLACE(mul), "mul_"); },
            py::is_operator())
        .def(
            "__itruediv__",
            [](Tensor &a, py::handle b) -> Tensor & { return inplace(a, b, TINYFIN_INPLACE(div), "div_"); },
            py::is_operator())
        .def(
            "__ipow__", [](Tensor &a, py::handle b) -> Tensor & { return inplace(a, b, TINYFIN_INPLACE(pow), "pow_"); },
            py::is_operator())
        .def("add_", [](Tensor &a, py::handle b) -> Tensor & { return inplace(a, b, TINYFIN_INPLACE(add), "add_"); })
        .def("sub_", [](Tensor &a, py::handle b) -> Tensor & { return inplace(a, b, TINYFIN_INPLACE(sub), "sub_"); })
        .def("mul_", [](Tensor &a, py::handle b) -> Tensor & { return inplace(a, b, TINYFIN_INPLACE(mul), "mul_"); })
        .def("div_", [](Tensor &a, py::handle b) -> Tensor & { return inplace(a, b, TINYFIN_INPLACE(div), "div_"); })
        .def("pow_", [](Tensor &a, py::handle b) -> Tensor & { return inplace(a, b, TINYFIN_INPLACE(pow), "pow_"); })
        .def("copy_",
             [](Tensor &a, py::handle b) -> Tensor & {
                 Tensor src = operand(b, a, "copy_");
                 Release r;
                 if (src.device() != a.device()) src = src.to(a.device());
                 a.assign_(src);
                 return a;
             })
        .def(
            "fill_",
            [](Tensor &a, double v) -> Tensor & {
                Release r;
                a.assign_(scalar_like(a, v));
                return a;
            },
            py::arg("value"))
        .def("zero_",
             [](Tensor &a) -> Tensor & {
                 Release r;
                 a.assign_(scalar_like(a, 0));
                 return a;
             })
        .def("__hash__", [](const Tensor &a) { return reinterpret_cast<std::intptr_t>(a.impl()); })
        // Autograd.
        .def_property("requires_grad", &Tensor::requires_grad, [](Tensor &a, bool on) { a.requires_grad_(on); })
        .def(
            "requires_grad_", [](Tensor &a, bool on) -> Tensor & { return a.requires_grad_(on); },
            py::arg("requires_grad") = true)
        .def_property_readonly("is_leaf", &Tensor::is_leaf)
        .def_property_readonly("grad_fn",
                               [](const Tensor &a) -> py::object {
                                   GradFn f = grad_fn(a);
                                   return f.defined() ? py::cast(f) : py::none();
                               })
        .def("retain_grad", [](const Tensor &a) { retain_grad(a); })
        .def_property(
            "grad",
            [](const Tensor &a) -> py::object {
                Tensor g = a.grad();
                if (!g.defined()) return py::none();
                return py::cast(g);
            },
            [](Tensor &a, py::object g) {
                if (g.is_none())
                    a.zero_grad();
                else
                    a.set_grad(g.cast<Tensor>());
            })
        .def(
            "backward",
            [](const Tensor &a, py::object gradient, bool retain_graph) {
                Tensor g = gradient.is_none() ? Tensor() : operand(gradient, a, "backward");
                Release r;
                a.backward(g, retain_graph);
            },
            py::arg("gradient") = py::none(), py::arg("retain_graph") = false)
        .def("detach", &Tensor::detach)
        .def_property_readonly("_version", &Tensor::version)
        .def_property("data", &Tensor::detach,
                      [](Tensor &a, const Tensor &data) {
                          Release r;
                          a.set_data(data.detach());
                      })
        .def("_set_data",
             [](Tensor &a, const Tensor &data) {
                 Release r;
                 a.set_data(data.detach());
             })
        .def("detach_", [](Tensor &a) -> Tensor & {
            a = a.detach();
            return a;
        });

    m.def("is_grad_enabled", &grad_enabled);
    m.def("_set_grad_enabled", &set_grad_enabled, py::arg("mode"));
    m.def(
        "set_mixed_devices",
        [](const std::string &policy) {
            if (policy != "strict" && policy != "move")
                raise_python("ValueError",
                             "set_mixed_devices: policy must be \"strict\" or \"move\", got \"" + policy + "\"");
            set_mixed_devices(policy == "strict" ? MixedDevices::strict : MixedDevices::move);
        },
        py::arg("policy"));
    m.def("get_mixed_devices", [] { return mixed_devices() == MixedDevices::strict ? "strict" : "move"; });
    // Context manager behind tinyfin.no_grad (thread-local like the C++ guard).
    struct NoGrad {
        std::unique_ptr<NoGradGuard> guard;
    };
    py::class_<NoGrad>(m, "_NoGrad")
        .def(py::init<>())
        .def("__enter__", [](NoGrad &g) { g.guard = std::make_unique<NoGradGuard>(); })
        .def("__exit__", [](NoGrad &g, py::args) {
            g.guard.reset();
            return false;
        });
}

}  // namespace tinyfin::python
