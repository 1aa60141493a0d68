// tinyfin's C++ exceptions as Python classes that also subclass the matching built-in, so
// `except ValueError` catches a tinyfin.ShapeError the way Python code expects.
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "bindings.hpp"

namespace tinyfin::python {

namespace {

// tinyfin.<name> -> class object; filled once at import (the module keeps them alive).
std::map<std::string, PyObject *> &classes() {
    static std::map<std::string, PyObject *> map;
    return map;
}

PyObject *make_class(py::module_ &m, const char *name, PyObject *base1, PyObject *base2, const char *doc) {
    std::string qualified = std::string("tinyfin.") + name;
    py::tuple bases = base2 ? py::make_tuple(py::handle(base1), py::handle(base2)) : py::make_tuple(py::handle(base1));
    PyObject *cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
    if (!cls) throw py::error_already_set();
    m.add_object(name, py::handle(cls));
    classes()[name] = cls;
    return cls;
}

// what() starts with "ClassName: "; Python prints the class itself, so the prefix goes.
const char *without_prefix(const char *what, const char *name) {
    std::size_t n = std::strlen(name);
    if (std::strncmp(what, name, n) == 0 && what[n] == ':' && what[n + 1] == ' ') return what + n + 2;
    return what;
}

// The core's messages name C++ spellings; Python users read the Python ones.
std::string in_python_terms(std::string text) {
    static const std::pair<const char *, const char *> spellings[] = {
        {"NoGradGuard", "tinyfin.no_grad()"},
        {"retain_graph=true", "retain_graph=True"},
        {"DType::", "tinyfin."},
    };
    for (const auto &[cpp, python] : spellings) {
        std::size_t n = std::strlen(cpp);
        for (std::size_t at = text.find(cpp); at != std::string::npos; at = text.find(cpp, at + std::strlen(python)))
            text.replace(at, n, python);
    }
    return text;
}

void set(const char *name, const std::exception &e) {
    PyErr_SetString(classes().at(name), in_python_terms(without_prefix(e.what(), name)).c_str());
}

}  // namespace

void raise_python(const char *kind, const std::string &message) {
    PyErr_SetString(classes().at(kind), message.c_str());
    throw py::error_already_set();
}

void bind_errors(py::module_ &m) {
    PyObject *base =
        make_class(m, "Error", PyExc_RuntimeError, nullptr, "Base of every tinyfin error (also a RuntimeError).");
    make_class(m, "ShapeError", base, PyExc_ValueError, "Shapes, ranks or axes that do not fit the op.");
    make_class(m, "DTypeError", base, PyExc_TypeError, "A dtype the op does not accept.");
    make_class(m, "ValueError", base, PyExc_ValueError, "An index, label or parameter value out of range.");
    make_class(m, "DeviceError", base, PyExc_RuntimeError,
               "A device that does not exist, or data that is not where the call needs it.");
    make_class(m, "BackendError", base, PyExc_RuntimeError, "Backend selection or plugin loading failed.");
    make_class(m, "FallbackError", base, PyExc_RuntimeError,
               "An op had to leave its device while TINYFIN_FALLBACK=error.");
    make_class(m, "OutOfMemoryError", base, PyExc_MemoryError, "Host or device memory is exhausted.");
    make_class(m, "PluginError", base, PyExc_RuntimeError, "A plugin failed while running an op.");
    make_class(m, "AutogradError", base, PyExc_RuntimeError, "Misuse of autograd.");

    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const ShapeError &e) {
            set("ShapeError", e);
        } catch (const DTypeError &e) {
            set("DTypeError", e);
        } catch (const tinyfin::ValueError &e) {
            set("ValueError", e);
        } catch (const DeviceError &e) {
            set("DeviceError", e);
        } catch (const BackendError &e) {
            set("BackendError", e);
        } catch (const FallbackError &e) {
            set("FallbackError", e);
        } catch (const OutOfMemoryError &e) {
            set("OutOfMemoryError", e);
        } catch (const PluginError &e) {
            set("PluginError", e);
        } catch (const AutogradError &e) {
            set("AutogradError", e);
        } catch (const Error &e) {
            set("Error", e);
        }
    });
}

}  // namespace tinyfin::python
