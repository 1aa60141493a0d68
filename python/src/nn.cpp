// The C++ nn modules, optimizers and TFNN files (include/tinyfin/nn.hpp) for tinyfin.nn and
// tinyfin.optim, which wrap them in Python classes (parameters registered by name, subclassing).
#include "bindings.hpp"

namespace tinyfin::python {

namespace {

using Release = py::gil_scoped_release;

std::pair<int, int> int_pair(py::handle h, const char *what) {
    if (PyLong_Check(h.ptr())) return {h.cast<int>(), h.cast<int>()};
    auto v = h.cast<std::vector<int>>();
    if (v.size() != 2) raise_python("ValueError", std::string(what) + " must be an int or a pair of ints");
    return {v[0], v[1]};
}

}  // namespace

void bind_nn(py::module_ &top) {
    py::module_ m = top.def_submodule("nn", "C++ modules of include/tinyfin/nn.hpp");
    py::class_<nn::Module, std::shared_ptr<nn::Module>>(m, "Module")
        .def("forward", &nn::Module::forward, py::arg("input"), py::call_guard<Release>())
        .def("__call__", &nn::Module::forward, py::arg("input"), py::call_guard<Release>())
        .def("describe", &nn::Module::describe)
        .def("named_parameters", &nn::Module::named_parameters)
        .def("train", &nn::Module::train, py::arg("mode") = true)
        .def("is_training", &nn::Module::is_training)
        .def("to", [](nn::Module &mod, py::object device) {
            Device d = *device_arg(device);
            Release r;
            mod.to(d);
        });
    py::class_<nn::Linear, nn::Module, std::shared_ptr<nn::Linear>>(m, "Linear")
        .def(py::init<int64_t, int64_t, bool, uint64_t>(), py::arg("in_features"), py::arg("out_features"),
             py::arg("bias") = true, py::arg("seed") = 0);
    py::class_<nn::Conv2d, nn::Module, std::shared_ptr<nn::Conv2d>>(m, "Conv2d")
        .def(py::init([](int64_t in, int64_t out, py::object kernel_size, py::object stride, py::object padding,
                         py::object dilation, int groups, bool bias, uint64_t seed) {
                 std::pair<int, int> kernel = int_pair(kernel_size, "kernel_size");
                 Conv2dOptions o;
                 std::tie(o.stride_h, o.stride_w) = int_pair(stride, "stride");
                 std::tie(o.pad_h, o.pad_w) = int_pair(padding, "padding");
                 std::tie(o.dilation_h, o.dilation_w) = int_pair(dilation, "dilation");
                 o.groups = groups;
                 return std::make_shared<nn::Conv2d>(in, out, kernel, o, bias, seed);
             }),
             py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
             py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true,
             py::arg("seed") = 0);
    py::class_<nn::MaxPool2d, nn::Module, std::shared_ptr<nn::MaxPool2d>>(m, "MaxPool2d")
        .def(py::init<int, int, int>(), py::arg("kernel_size"), py::arg("stride") = 0, py::arg("padding") = 0);
    py::class_<nn::ReLU, nn::Module, std::shared_ptr<nn::ReLU>>(m, "ReLU").def(py::init<>());
    py::class_<nn::GELU, nn::Module, std::shared_ptr<nn::GELU>>(m, "GELU").def(py::init<bool>(),
                                                                               py::arg("approximate") = false);
    py::class_<nn::Dropout, nn::Module, std::shared_ptr<nn::Dropout>>(m, "Dropout")
        .def(py::init<double, uint64_t>(), py::arg("p") = 0.5, py::arg("seed") = 0);
    py::class_<nn::Flatten, nn::Module, std::shared_ptr<nn::Flatten>>(m, "Flatten")
        .def(py::init<int, int>(), py::arg("start_dim") = 1, py::arg("end_dim") = -1);

    m.def(
        "save",
        [](const std::string &path, const nn::NamedTensors &tensors) {
            Release r;
            nn::save(path, tensors);
        },
        py::arg("path"), py::arg("tensors"));
    m.def(
        "load_into",
        [](const std::string &path, const nn::NamedTensors &tensors) {
            Release r;
            nn::load(path, tensors);
        },
        py::arg("path"), py::arg("tensors"));
    m.def(
        "load_all",
        [](const std::string &path, py::object device) {
            auto d = device_arg(device);
            Release r;
            return nn::load_all(path, d);
        },
        py::arg("path"), py::arg("device") = py::none());

    m.def(
        "clip_grad_norm",
        [](const std::vector<Tensor> &params, double max_norm) {
            Release r;
            return nn::clip_grad_norm(params, max_norm);
        },
        py::arg("params"), py::arg("max_norm"));
    py::class_<nn::WarmupCosine>(m, "WarmupCosine")
        .def(py::init<double, double, int64_t, int64_t>(), py::arg("max_lr"), py::arg("min_lr"), py::arg("warmup"),
             py::arg("total"))
        .def("__call__", &nn::WarmupCosine::operator(), py::arg("step"))
        .def_readonly("max_lr", &nn::WarmupCosine::max_lr)
        .def_readonly("min_lr", &nn::WarmupCosine::min_lr)
        .def_readonly("warmup", &nn::WarmupCosine::warmup)
        .def_readonly("total", &nn::WarmupCosine::total);

    py::module_ o = top.def_submodule("optim", "C++ optimizers of include/tinyfin/nn.hpp");
    // Python subclasses (tinyfin.optim) define step(); C++ callers (GradScaler::step) reach it
    // through this override.
    struct PyOptimizer : optim::Optimizer {
        using optim::Optimizer::Optimizer;
        void step() override { PYBIND11_OVERRIDE_PURE(void, optim::Optimizer, step, ); }
    };
    py::class_<optim::Optimizer, PyOptimizer>(o, "Optimizer")
        .def(py::init<std::vector<Tensor>, double>(), py::arg("params"), py::arg("lr") = 0.0)
        .def("step", &optim::Optimizer::step, py::call_guard<Release>())
        .def("zero_grad", &optim::Optimizer::zero_grad)
        .def_property("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr)
        .def_property_readonly("params", &optim::Optimizer::params);
    // The fused updates the C++ optimizers run, with the state passed in and returned (an
    // undefined state, None, is created on the first step), for tinyfin.optim's Python classes.
    o.def(
        "_sgd_step",
        [](const Tensor &param, const Tensor &grad, py::object buffer, double lr, double momentum, double weight_decay,
           bool nesterov) {
            Tensor buf = buffer.is_none() ? Tensor() : buffer.cast<Tensor>();
            {
                Release r;
                NoGradGuard no_grad;
                sgd_step_(param, grad, buf, {lr, momentum, weight_decay, nesterov});
            }
            return buf;
        },
        py::arg("param"), py::arg("grad"), py::arg("buffer"), py::arg("lr"), py::arg("momentum"),
        py::arg("weight_decay"), py::arg("nesterov"));
    o.def(
        "_adamw_step",
        [](const Tensor &param, const Tensor &grad, py::object exp_avg, py::object exp_avg_sq, double lr, double beta1,
           double beta2, double eps, double weight_decay, int64_t step) {
            Tensor m = exp_avg.is_none() ? Tensor() : exp_avg.cast<Tensor>();
            Tensor v = exp_avg_sq.is_none() ? Tensor() : exp_avg_sq.cast<Tensor>();
            {
                Release r;
                NoGradGuard no_grad;
                adamw_step_(param, grad, m, v, {lr, beta1, beta2, eps, weight_decay, step});
            }
            return std::make_pair(m, v);
        },
        py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"), py::arg("lr"), py::arg("beta1"),
        py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"), py::arg("step"));
    py::class_<optim::SGD, optim::Optimizer>(o, "SGD").def(
        py::init<std::vector<Tensor>, double, double, double, bool>(), py::arg("params"), py::arg("lr"),
        py::arg("momentum") = 0.0, py::arg("weight_decay") = 0.0, py::arg("nesterov") = false);
    py::class_<optim::AdamW, optim::Optimizer>(o, "AdamW")
        .def(py::init<std::vector<Tensor>, double, std::pair<double, double>, double, double>(), py::arg("params"),
             py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999), py::arg("eps") = 1e-8,
             py::arg("weight_decay") = 0.01);
}

}  // namespace tinyfin::python
