// tinyfin._dist: libtinyfin-dist (include/tinyfin/dist.hpp) for tinyfin.dist. A module of its
// own, built only when MPI is found, so that `import tinyfin` never loads libmpi; tinyfin/dist.py
// is the Python half (init from the launcher, the module-level collectives, the DDP wrapper of a
// Python Module, the sampler).
#include <cstdio>
#include <cstring>
#include <memory>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tinyfin/dist.hpp"

namespace py = pybind11;
using namespace tinyfin;

namespace {

using Release = py::gil_scoped_release;

// The parameters of a Python tinyfin.nn.Module as a C++ nn::Module, so that the C++
// DistributedDataParallel (buckets, grad hooks, weighted average) runs unchanged on them. The
// tensors are the Python module's own handles: hooks and broadcasts act on the same leaves.
class ParameterSet : public nn::Module {
public:
    explicit ParameterSet(const std::vector<std::pair<std::string, Tensor>> &named) {
        tensors_.reserve(named.size());  // register_parameter keeps pointers: no reallocation after
        for (const auto &[name, t] : named) tensors_.push_back(t);
        for (std::size_t i = 0; i < named.size(); ++i) register_parameter(named[i].first, tensors_[i]);
    }
    Tensor forward(const Tensor &) override {
        throw dist::DistError("DistError: the C++ side of tinyfin.dist.DistributedDataParallel has "
                              "no forward; call the Python wrapper, which runs the Python module");
    }
    std::string describe() const override { return "ParameterSet(" + std::to_string(tensors_.size()) + " tensors)"; }

private:
    std::vector<Tensor> tensors_;
};

// Context manager holding DistributedDataParallel::NoSync.
struct NoSyncScope {
    dist::DistributedDataParallel *ddp;
    std::unique_ptr<dist::DistributedDataParallel::NoSync> guard;
};

// The process's Context, finalised on request (tinyfin.dist.finalize, at exit) rather than when
// the last Python reference goes, which may be never during interpreter shutdown.
struct Session {
    std::unique_ptr<dist::Context> context;
    dist::Context &get() const {
        if (!context)
            throw dist::DistError("DistError: tinyfin.dist is finalised; nothing of it works after "
                                  "finalize()");
        return *context;
    }
};

dist::ReduceOp reduce_op(const std::string &name) {
    if (name == "sum") return dist::ReduceOp::sum;
    if (name == "mean" || name == "avg") return dist::ReduceOp::mean;
    if (name == "max") return dist::ReduceOp::max;
    if (name == "min") return dist::ReduceOp::min;
    throw tinyfin::ValueError("ValueError: reduce op must be 'sum', 'mean', 'max' or 'min', got '" + name + "'");
}

}  // namespace

PYBIND11_MODULE(_dist, m) {
    m.doc() = "libtinyfin-dist for tinyfin.dist; import tinyfin.dist, not this module";
    // tinyfin._C registers Tensor and the core's error translation; this module relies on both.
    py::module_ core = py::module_::import("tinyfin._C");
    py::object base = core.attr("Error");

    auto make = [&m](const char *name, py::handle b1, py::handle b2, const char *doc) {
        std::string qualified = std::string("tinyfin.dist.") + name;
        py::tuple bases = b2 ? py::make_tuple(b1, b2) : py::make_tuple(b1);
        PyObject *cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
        if (!cls) throw py::error_already_set();
        m.add_object(name, py::handle(cls));
        return cls;
    };
    static PyObject *dist_error =
        make("DistError", base, nullptr, "An MPI failure or misuse of tinyfin.dist (also a tinyfin.Error).");
    static PyObject *mismatch_error =
        make("MismatchError", dist_error, PyExc_ValueError,
             "The ranks passed different shapes or dtypes (or model layouts) to one collective.");
    static PyObject *timeout_error = make("TimeoutError", dist_error, PyExc_TimeoutError,
                                          "A collective did not complete within TINYFIN_DIST_TIMEOUT seconds.");
    py::register_exception_translator([](std::exception_ptr p) {
        auto set = [](PyObject *cls, const std::exception &e, const char *prefix) {
            const char *what = e.what();
            std::size_t n = std::strlen(prefix);
            if (std::strncmp(what, prefix, n) == 0) what += n;
            PyErr_SetString(cls, what);
        };
        try {
            if (p) std::rethrow_exception(p);
        } catch (const dist::MismatchError &e) {
            set(mismatch_error, e, "MismatchError: ");
        } catch (const dist::TimeoutError &e) {
            set(timeout_error, e, "TimeoutError: ");
        } catch (const dist::DistError &e) {
            set(dist_error, e, "DistError: ");
        }  // anything else goes on to tinyfin._C's translator
    });

    using C = dist::Context;
    py::class_<Session>(m, "Context", "MPI for this process (one per process).")
        .def(py::init([](double timeout, bool check_shapes) {
                 dist::Options o;
                 o.timeout_seconds = timeout;
                 o.check_shapes = check_shapes;
                 Release r;
                 return Session{std::make_unique<C>(nullptr, nullptr, o)};
             }),
             py::arg("timeout") = 0.0, py::arg("check_shapes") = true)
        .def("_finalize",
             [](Session &s) {
                 Release r;
                 s.context.reset();
             })
        .def_property_readonly("rank", [](const Session &s) { return s.get().rank(); })
        .def_property_readonly("world_size", [](const Session &s) { return s.get().world_size(); })
        .def_property_readonly("local_rank", [](const Session &s) { return s.get().local_rank(); })
        .def_property_readonly("local_size", [](const Session &s) { return s.get().local_size(); })
        .def_property_readonly("launcher", [](const Session &s) { return s.get().launcher(); })
        .def_property_readonly("cuda_aware", [](const Session &s) { return s.get().cuda_aware(); })
        .def_property_readonly("timeout", [](const Session &s) { return s.get().options().timeout_seconds; })
        .def_property(
            "check_shapes", [](const Session &s) { return s.get().options().check_shapes; },
            [](Session &s, bool on) {
                dist::Options o = s.get().options();
                o.check_shapes = on;
                s.get().set_options(o);
            })
        .def(
            "all_reduce",
            [](Session &s, const Tensor &t, const std::string &op) {
                dist::ReduceOp o = reduce_op(op);
                C &c = s.get();
                Release r;
                c.all_reduce(t, o);
            },
            py::arg("tensor"), py::arg("op") = "sum")
        .def(
            "broadcast",
            [](Session &s, const Tensor &t, int src) {
                C &c = s.get();
                Release r;
                c.broadcast(t, src);
            },
            py::arg("tensor"), py::arg("src") = 0)
        .def(
            "all_gather",
            [](Session &s, const Tensor &t) {
                C &c = s.get();
                Release r;
                return c.all_gather(t);
            },
            py::arg("tensor"))
        .def(
            "reduce_scatter",
            [](Session &s, const Tensor &t, const std::string &op) {
                dist::ReduceOp o = reduce_op(op);
                C &c = s.get();
                Release r;
                return c.reduce_scatter(t, o);
            },
            py::arg("tensor"), py::arg("op") = "sum")
        .def("barrier",
             [](Session &s) {
                 C &c = s.get();
                 Release r;
                 c.barrier();
             })
        .def(
            "abort",
            [](Session &s, int code, const std::string &message) {
                std::fflush(nullptr);
                s.get().abort(code, message);
            },
            py::arg("code"), py::arg("message"));

    py::class_<dist::DistributedDataParallel>(m, "DistributedDataParallel")
        .def(py::init([](Session &session, const std::vector<std::pair<std::string, Tensor>> &named,
                         std::size_t bucket_bytes, bool broadcast_parameters) {
                 dist::DDPOptions o;
                 o.bucket_bytes = bucket_bytes;
                 o.broadcast_parameters = broadcast_parameters;
                 auto set = std::make_shared<ParameterSet>(named);
                 dist::Context &ctx = session.get();
                 Release r;
                 return std::make_unique<dist::DistributedDataParallel>(ctx, set, o);
             }),
             py::arg("context"), py::arg("named_parameters"), py::arg("bucket_bytes"),
             py::arg("broadcast_parameters") = true, py::keep_alive<1, 2>())
        .def("set_batch_size", &dist::DistributedDataParallel::set_batch_size, py::arg("local_samples"))
        .def("synchronize_gradients", &dist::DistributedDataParallel::synchronize_gradients, py::call_guard<Release>())
        .def("bucket_layout", &dist::DistributedDataParallel::bucket_layout)
        .def_property_readonly("buckets_started_in_backward",
                               &dist::DistributedDataParallel::buckets_started_in_backward)
        .def("describe", &dist::DistributedDataParallel::describe)
        .def(
            "_no_sync",
            [](dist::DistributedDataParallel &d) {
                return NoSyncScope{&d, nullptr};
            },
            py::keep_alive<0, 1>());

    py::class_<NoSyncScope>(m, "_NoSync")
        .def("__enter__",
             [](NoSyncScope &s) { s.guard = std::make_unique<dist::DistributedDataParallel::NoSync>(*s.ddp); })
        .def("__exit__", [](NoSyncScope &s, py::args) {
            s.guard.reset();
            return false;
        });

    py::class_<dist::ShardedSampler>(m, "ShardedSampler")
        .def(py::init<int64_t, int64_t, int, int, uint64_t, bool>(), py::arg("dataset_size"), py::arg("global_batch"),
             py::arg("world_size"), py::arg("rank"), py::arg("seed"), py::arg("shuffle") = true)
        .def("set_epoch", &dist::ShardedSampler::set_epoch, py::arg("epoch"))
        .def("steps", &dist::ShardedSampler::steps)
        .def(
            "batch",
            [](const dist::ShardedSampler &s, int64_t step) {
                std::vector<int64_t> b = s.batch(step);
                return py::array_t<int64_t>(static_cast<py::ssize_t>(b.size()), b.data());
            },
            py::arg("step"))
        .def("global_batch_size", &dist::ShardedSampler::global_batch_size, py::arg("step"))
        .def("shard_size", &dist::ShardedSampler::shard_size);

    m.def("checksum", &dist::checksum, py::arg("tensors"), py::call_guard<Release>());
    m.def("nccl_version", &dist::nccl_version);
}
