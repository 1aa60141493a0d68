// numpy and DLPack without copies where the memory allows: a host-addressable tensor (cpu, blas)
// is seen by numpy in place, and a numpy array or DLPack tensor in host memory becomes a cpu
// tensor over that memory (Tensor::host_data, from_blob). Everything else is an explicit copy.
#include <cstring>

#include <pybind11/numpy.h>

#include "bindings.hpp"
#include "dlpack.hpp"

namespace tinyfin::python {

namespace {

using Release = py::gil_scoped_release;

py::dtype numpy_dtype(DType d) {
    switch (d) {
    case DType::f32: return py::dtype("float32");
    case DType::f16: return py::dtype("float16");
    case DType::i32: return py::dtype("int32");
    case DType::i64: return py::dtype("int64");
    case DType::boolean: return py::dtype("bool");
    case DType::bf16: raise_python("DTypeError", "numpy has no bfloat16: convert with .to(tinyfin.float32) first");
    default: break;
    }
    raise_python("DTypeError", std::string("numpy has no ") + dtype_name(d) + ": dequantize it first");
}

// numpy dtype -> tinyfin dtype, or nullopt for one tinyfin does not have.
std::optional<DType> tinyfin_dtype(const py::dtype &d) {
    char kind = d.kind();
    auto size = d.itemsize();
    if (kind == 'f' && size == 4) return DType::f32;
    if (kind == 'f' && size == 2) return DType::f16;
    if (kind == 'i' && size == 4) return DType::i32;
    if (kind == 'i' && size == 8) return DType::i64;
    if (kind == 'b' && size == 1) return DType::boolean;
    return std::nullopt;
}

// Hands a Python object's reference back from whichever thread drops the last tensor.
std::function<void()> python_release(PyObject *owned) {
    return [owned] {
        if (!Py_IsInitialized()) return;
        PyGILState_STATE state = PyGILState_Ensure();
        Py_DECREF(owned);
        PyGILState_Release(state);
    };
}

void *host_pointer(const Tensor &t, const char *what) {
    void *p = t.host_data();
    if (!p && t.nbytes() > 0)
        raise_python("DeviceError", std::string(what) + ": the tensor is on " + t.device().str() +
                                        ", whose memory the host cannot address; copy it with .to(\"cpu\") first");
    return p;
}

py::array to_numpy(const Tensor &t) {
    if (t.requires_grad()) raise_python("AutogradError", "numpy(): the tensor requires grad; use t.detach().numpy()");
    py::dtype dt = numpy_dtype(t.dtype());
    void *p = host_pointer(t, "numpy()");
    std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
    std::vector<py::ssize_t> strides;
    for (int64_t s : t.strides()) strides.push_back(s * static_cast<py::ssize_t>(dtype_size(t.dtype())));
    // The capsule owns a handle to the storage: the array keeps the tensor's memory alive.
    py::capsule owner(new Tensor(t), [](void *ptr) { delete static_cast<Tensor *>(ptr); });
    return py::array(dt, shape, strides, p ? p : reinterpret_cast<void *>(64), owner);
}

Tensor from_numpy(const py::array &a) {
    auto dt = tinyfin_dtype(a.dtype());
    if (!dt)
        raise_python("DTypeError", "from_numpy: numpy dtype " + std::string(py::str(a.dtype())) +
                                       " has no tinyfin dtype (float32, float16, int32, int64, bool); "
                                       "use tinyfin.tensor(a), which converts");
    int flags = a.flags();
    bool aligned = flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_;
    bool writeable = flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    py::ssize_t itemsize = a.itemsize();
    Shape shape(a.shape(), a.shape() + a.ndim());
    Shape strides;
    bool layout_ok = aligned && writeable;
    for (py::ssize_t i = 0; i < a.ndim(); ++i) {
        py::ssize_t s = a.strides()[i];
        if (s < 0 || s % itemsize != 0) layout_ok = false;
        strides.push_back(s / itemsize);
    }
    if (!layout_ok) {
        // Negative or odd strides, unaligned or read-only memory: a documented copy.
        py::array c = py::array::ensure(a, py::array::c_style | py::array::forcecast);
        py::array copy = py::array(c.dtype(), std::vector<py::ssize_t>(c.shape(), c.shape() + c.ndim()));
        std::memcpy(copy.mutable_data(), c.data(), static_cast<std::size_t>(c.nbytes()));
        return from_numpy(copy);
    }
    PyObject *owned = a.ptr();
    Py_INCREF(owned);
    return from_blob(const_cast<void *>(a.data()), shape, strides, *dt, python_release(owned));
}

Tensor from_host_array(const py::array &a, DType dtype, py::object device) {
    auto dev = device_arg(device);
    auto dt = tinyfin_dtype(a.dtype());
    if (!dt || *dt != dtype || !(a.flags() & py::array::c_style))
        raise_python("DTypeError", "_from_host: expected a C-contiguous array of the target dtype");
    Shape shape(a.shape(), a.shape() + a.ndim());
    const void *data = a.data();
    Release r;
    return from_host(data, shape, dtype, dev);
}

// ---- DLPack ---------------------------------------------------------------------------------

struct Exported {
    Tensor tensor;
    std::vector<int64_t> shape, strides;
    dlpack::ManagedTensor managed{};
};

dlpack::DataType dlpack_dtype(DType d) {
    switch (d) {
    case DType::f32: return {dlpack::kFloat, 32, 1};
    case DType::f16: return {dlpack::kFloat, 16, 1};
    case DType::bf16: return {dlpack::kBfloat, 16, 1};
    case DType::i32: return {dlpack::kInt, 32, 1};
    case DType::i64: return {dlpack::kInt, 64, 1};
    case DType::boolean: return {dlpack::kBool, 8, 1};
    default: break;
    }
    return {};
}

dlpack::Device dlpack_device(const Tensor &t) {
    Device d = t.device();
    if (d.backend == "cpu" || d.backend == "blas") return {dlpack::kCPU, 0};
    if (d.backend == "cuda") return {dlpack::kCUDA, d.index};
    if (d.backend == "vulkan") return {dlpack::kVulkan, d.index};
    return {dlpack::kExtDev, d.index};
}

py::capsule to_dlpack(const Tensor &t) {
    if (t.requires_grad()) raise_python("AutogradError", "__dlpack__: the tensor requires grad; export t.detach()");
    void *p = host_pointer(t, "__dlpack__");
    auto *e = new Exported{t, t.shape(), t.strides(), {}};
    e->managed.dl_tensor.data = p;
    e->managed.dl_tensor.device = {dlpack::kCPU, 0};
    e->managed.dl_tensor.ndim = t.rank();
    e->managed.dl_tensor.dtype = dlpack_dtype(t.dtype());
    e->managed.dl_tensor.shape = e->shape.data();
    e->managed.dl_tensor.strides = e->strides.data();
    e->managed.dl_tensor.byte_offset = 0;
    e->managed.manager_ctx = e;
    e->managed.deleter = [](dlpack::ManagedTensor *self) { delete static_cast<Exported *>(self->manager_ctx); };
    // A consumer renames the capsule "used_dltensor" and owns the tensor from then on; an unused
    // capsule deletes it.
    PyObject *cap = PyCapsule_New(&e->managed, "dltensor", [](PyObject *capsule) {
        if (PyCapsule_IsValid(capsule, "dltensor")) {
            auto *m = static_cast<dlpack::ManagedTensor *>(PyCapsule_GetPointer(capsule, "dltensor"));
            if (m && m->deleter) m->deleter(m);
        } else {
            PyErr_Clear();
        }
    });
    if (!cap) {
        delete e;
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::capsule>(cap);
}

Tensor from_dlpack(py::object obj) {
    py::object cap = obj;
    if (py::hasattr(obj, "__dlpack__")) {
        if (py::hasattr(obj, "__dlpack_device__")) {
            auto dev = obj.attr("__dlpack_device__")().cast<std::pair<int, int>>();
            if (dev.first != dlpack::kCPU && dev.first != dlpack::kCUDAHost)
                raise_python("DeviceError", "from_dlpack: the producer's memory is on DLPack device type " +
                                                std::to_string(dev.first) +
                                                ", not host memory; move it to the CPU first (e.g. x.cpu())");
        }
        cap = obj.attr("__dlpack__")();
    }
    if (!PyCapsule_IsValid(cap.ptr(), "dltensor"))
        raise_python("ValueError", "from_dlpack: expected an object with __dlpack__ or an unused \"dltensor\" capsule");
    auto *m = static_cast<dlpack::ManagedTensor *>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
    const dlpack::Tensor &dl = m->dl_tensor;
    auto fail = [](const std::string &what) { raise_python("DTypeError", "from_dlpack: " + what); };
    if (dl.device.device_type != dlpack::kCPU && dl.device.device_type != dlpack::kCUDAHost)
        raise_python("DeviceError", "from_dlpack: the tensor is not in host memory (DLPack device type " +
                                        std::to_string(dl.device.device_type) + "); move it to the CPU first");
    if (dl.dtype.lanes != 1) fail("vector dtypes (lanes > 1) are not supported");
    std::optional<DType> dt;
    auto code = dl.dtype.code;
    auto bits = dl.dtype.bits;
    if (code == dlpack::kFloat && bits == 32)
        dt = DType::f32;
    else if (code == dlpack::kFloat && bits == 16)
        dt = DType::f16;
    else if (code == dlpack::kBfloat && bits == 16)
        dt = DType::bf16;
    else if (code == dlpack::kInt && bits == 32)
        dt = DType::i32;
    else if (code == dlpack::kInt && bits == 64)
        dt = DType::i64;
    else if (code == dlpack::kBool && bits == 8)
        dt = DType::boolean;
    if (!dt)
        fail("DLPack dtype code " + std::to_string(code) + " with " + std::to_string(bits) +
             " bits has no tinyfin dtype (float32, float16, bfloat16, int32, int64, bool)");
    Shape shape(dl.shape, dl.shape + dl.ndim);
    Shape strides;
    if (dl.strides) {
        strides.assign(dl.strides, dl.strides + dl.ndim);
    } else {
        strides.resize(dl.ndim);
        int64_t s = 1;
        for (int i = dl.ndim - 1; i >= 0; --i) {
            strides[i] = s;
            s *= shape[i];
        }
    }
    for (int64_t s : strides)
        if (s < 0)
            raise_python("ValueError", "from_dlpack: negative strides; make the producer's tensor contiguous first");
    void *data = static_cast<char *>(dl.data) + dl.byte_offset;
    // From here the capsule is consumed: the deleter runs when the last tinyfin tensor goes.
    PyCapsule_SetName(cap.ptr(), "used_dltensor");
    std::function<void()> release = [m] {
        if (!m->deleter) return;
        if (!Py_IsInitialized()) return;
        PyGILState_STATE state = PyGILState_Ensure();
        m->deleter(m);
        PyGILState_Release(state);
    };
    return from_blob(data, shape, strides, *dt, std::move(release));
}

}  // namespace

void bind_interop(py::module_ &m) {
    m.def("_to_numpy", &to_numpy, py::arg("tensor"));
    m.def("from_numpy", &from_numpy, py::arg("ndarray"),
          "A cpu tensor sharing the array's memory when its layout allows (else a copy).");
    m.def("_from_host", &from_host_array, py::arg("array"), py::arg("dtype"), py::arg("device") = py::none());
    m.def("_to_dlpack", &to_dlpack, py::arg("tensor"));
    m.def("from_dlpack", &from_dlpack, py::arg("ext_tensor"));
    m.def("_dlpack_device", [](const Tensor &t) {
        auto d = dlpack_device(t);
        return py::make_tuple(d.device_type, d.device_id);
    });
    m.def("_host_address", [](const Tensor &t) { return reinterpret_cast<std::uintptr_t>(t.host_data()); });
}

}  // namespace tinyfin::python
