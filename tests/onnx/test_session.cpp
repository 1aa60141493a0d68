// The C++ API of libtinyfin-onnx: a model written here with libonnx's protobuf classes, run with
// tensors and host buffers against hand-computed values; typed errors.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "tinyfin/onnx.hpp"

namespace tfo = tinyfin::onnx;
using tinyfin::Tensor;

namespace {

void add_value(::onnx::ValueInfoProto *vi, const std::string &name, std::vector<int64_t> dims,
               const std::string &dim_param = "") {
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    auto *shape = tt->mutable_shape();
    if (!dim_param.empty()) shape->add_dim()->set_dim_param(dim_param);
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

// y = relu(x @ w + b), z = -y; x [batch, 2], w [2, 3].
std::string model_bytes(int64_t opset = 13) {
    ::onnx::ModelProto model;
    model.set_ir_version(8);
    auto *op = model.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    auto *g = model.mutable_graph();
    g->set_name("g");
    add_value(g->add_input(), "x", {2}, "batch");
    add_value(g->add_output(), "y", {3}, "batch");
    add_value(g->add_output(), "z", {3}, "batch");
    auto *w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(::onnx::TensorProto::FLOAT);
    w->add_dims(2);
    w->add_dims(3);
    for (float v : {1.f, -1.f, 2.f, 0.5f, 3.f, -2.f}) w->add_float_data(v);
    auto *b = g->add_initializer();
    b->set_name("b");
    b->set_data_type(::onnx::TensorProto::FLOAT);
    b->add_dims(3);
    const float bias[3] = {0.f, 1.f, -1.f};
    b->set_raw_data(std::string(reinterpret_cast<const char *>(bias), sizeof bias));
    auto node = [&](const char *type, std::vector<std::string> in, std::string out) {
        auto *n = g->add_node();
        n->set_op_type(type);
        n->set_name(out + "_node");
        for (auto &i : in) n->add_input(i);
        n->add_output(out);
    };
    node("MatMul", {"x", "w"}, "xw");
    node("Add", {"xw", "b"}, "pre");
    node("Relu", {"pre"}, "y");
    node("Neg", {"y"}, "z");
    return model.SerializeAsString();
}

}  // namespace

TEST_CASE("onnx: a session loads, describes and runs a model through both run() forms") {
    const std::string bytes = model_bytes();
    auto session = tfo::InferenceSession::from_bytes(bytes.data(), bytes.size(), {.backend = "cpu"});
    REQUIRE(session.get_inputs().size() == 1);
    const auto &in = session.get_inputs()[0];
    CHECK(in.name == "x");
    CHECK(in.type == tfo::ElementType::float32);
    CHECK(in.shape == std::vector<int64_t>{-1, 2});
    CHECK(in.dim_names[0] == "batch");
    CHECK(session.get_outputs().size() == 2);
    CHECK(session.load_report().initializer_bytes == 36);

    // x = [[1, 2], [-1, 0]]: x @ w = [[2, 5, -2], [-1, 1, -2]]; + b = [[2, 6, -3], [-1, 2, -3]].
    const Tensor x = tinyfin::from_vector<float>({1, 2, -1, 0}, {2, 2});
    const auto outs = session.run({"y", "z"}, {{"x", x}});
    CHECK(outs[0].to_vector<float>() == std::vector<float>{2, 6, 0, 0, 2, 0});
    CHECK(outs[1].to_vector<float>() == std::vector<float>{-2, -6, -0.f, -0.f, -2, -0.f});

    tfo::HostTensor host{tfo::ElementType::float32, {1, 2}, {}};
    const float xs[2] = {0, 1};
    host.data.resize(sizeof xs);
    std::memcpy(host.data.data(), xs, sizeof xs);
    const auto hosts = session.run({"y"}, {{"x", host}});
    REQUIRE(hosts.size() == 1);
    CHECK(hosts[0].shape == tinyfin::Shape{1, 3});
    float y[3];
    std::memcpy(y, hosts[0].data.data(), sizeof y);
    CHECK(y[0] == 0.5f);  // 0.5 + 0
    CHECK(y[1] == 4.f);  // 3 + 1
    CHECK(y[2] == 0.f);  // relu(-2 - 1)
}

TEST_CASE("onnx: typed errors") {
    const std::string bytes = model_bytes();
    CHECK_THROWS_AS(tfo::InferenceSession::from_bytes(bytes.data(), bytes.size() / 2), tfo::ModelError);
    const std::string newer = model_bytes(18);
    CHECK_THROWS_AS(tfo::InferenceSession::from_bytes(newer.data(), newer.size()), tfo::UnsupportedError);
    auto session = tfo::InferenceSession::from_bytes(bytes.data(), bytes.size(), {.backend = "cpu"});
    CHECK_THROWS_AS(session.run({}, std::vector<std::pair<std::string, Tensor>>{}), tfo::InputError);
    CHECK_THROWS_AS(session.run({}, {{"x", tinyfin::zeros({2, 3})}}), tfo::InputError);
    CHECK_THROWS_AS(session.run({}, {{"x", tinyfin::zeros({2, 2}, tinyfin::DType::i32)}}), tfo::InputError);
    CHECK_THROWS_AS(tfo::InferenceSession("/nonexistent/model.onnx"), tfo::ModelError);
}

TEST_CASE("onnx: a model file's folder bounds its external data") {
    const auto dir = std::filesystem::temp_directory_path() / ("tinyfin-onnx-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    { std::ofstream(dir / "m.onnx", std::ios::binary) << model_bytes(); }
    tfo::InferenceSession session((dir / "m.onnx").string(), {.backend = "cpu"});
    CHECK(session.get_outputs()[1].name == "z");
    std::filesystem::remove_all(dir);
}

namespace {

// SplitToSequence(x [n, 2]) along axis 0 into rows -> "rows" (a sequence output); SequenceAt(rows, -1)
// -> "last"; OptionalHasElement(o) -> "has" for an optional input "o".
std::string sequence_model_bytes() {
    ::onnx::ModelProto model;
    model.set_ir_version(8);
    auto *op = model.add_opset_import();
    op->set_domain("");
    op->set_version(17);
    auto *g = model.mutable_graph();
    g->set_name("g");
    add_value(g->add_input(), "x", {2}, "n");
    auto *o = g->add_input();
    o->set_name("o");
    auto *ot = o->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type();
    ot->set_elem_type(::onnx::TensorProto::FLOAT);
    auto *rows = g->add_output();
    rows->set_name("rows");
    rows->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
        ::onnx::TensorProto::FLOAT);
    add_value(g->add_output(), "last", {2});
    auto *has = g->add_output();
    has->set_name("has");
    has->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::BOOL);
    auto *minus_one = g->add_initializer();
    minus_one->set_name("minus_one");
    minus_one->set_data_type(::onnx::TensorProto::INT64);
    minus_one->add_int64_data(-1);
    auto node = [&](const char *type, std::vector<std::string> in, std::string out) {
        auto *n = g->add_node();
        n->set_op_type(type);
        for (auto &i : in) n->add_input(i);
        n->add_output(out);
        return n;
    };
    auto *split = node("SplitToSequence", {"x"}, "rows");
    auto *keepdims = split->add_attribute();
    keepdims->set_name("keepdims");
    keepdims->set_type(::onnx::AttributeProto::INT);
    keepdims->set_i(0);
    node("SequenceAt", {"rows", "minus_one"}, "last");
    node("OptionalHasElement", {"o"}, "has");
    return model.SerializeAsString();
}

tfo::HostTensor host_floats(std::vector<float> values, tinyfin::Shape shape) {
    tfo::HostTensor host{tfo::ElementType::float32, std::move(shape), {}};
    host.data.resize(values.size() * sizeof(float));
    std::memcpy(host.data.data(), values.data(), host.data.size());
    return host;
}

std::vector<float> floats_of(const tfo::HostTensor &host) {
    std::vector<float> out(host.data.size() / sizeof(float));
    std::memcpy(out.data(), host.data.data(), host.data.size());
    return out;
}

}  // namespace

TEST_CASE("onnx: sequences and optionals through run_values") {
    const std::string bytes = sequence_model_bytes();
    auto session = tfo::InferenceSession::from_bytes(bytes.data(), bytes.size(), {.backend = "cpu"});
    REQUIRE(session.get_inputs().size() == 2);
    CHECK(session.get_inputs()[1].optional);
    CHECK(session.get_inputs()[1].kind == tfo::ValueKind::tensor);
    CHECK(session.get_outputs()[0].kind == tfo::ValueKind::sequence);
    CHECK(session.get_outputs()[0].type == tfo::ElementType::float32);

    const auto x = tfo::HostValue::of(host_floats({1, 2, 3, 4, 5, 6}, {3, 2}));
    auto outs = session.run_values({}, {{"x", x}, {"o", tfo::HostValue::of(host_floats({7}, {1}))}});
    REQUIRE(outs.size() == 3);
    REQUIRE(outs[0].kind == tfo::ValueKind::sequence);
    REQUIRE(outs[0].elements.size() == 3);
    CHECK(outs[0].elements[1].shape == tinyfin::Shape{2});  // keepdims 0: the split axis dropped
    CHECK(floats_of(outs[0].elements[1]) == std::vector<float>{3, 4});
    CHECK(floats_of(outs[1].tensor) == std::vector<float>{5, 6});
    CHECK(outs[2].tensor.data.at(0) == std::byte{1});

    outs = session.run_values({"has"}, {{"x", x}, {"o", tfo::HostValue::none()}});
    CHECK(outs[0].tensor.data.at(0) == std::byte{0});
    outs = session.run_values({"has"}, {{"x", x}});  // an optional input left out: none
    CHECK(outs[0].tensor.data.at(0) == std::byte{0});

    // run() hands out tensors only; a sequence where a tensor is declared, and none for a
    // required input, are InputErrors.
    CHECK_THROWS_AS(session.run({"rows"}, {{"x", x.tensor}}), tfo::InputError);
    CHECK(session.run({"last"}, {{"x", x.tensor}}).size() == 1);
    CHECK_THROWS_AS(session.run_values({}, {{"x", tfo::HostValue::sequence(tfo::ElementType::float32, {})}}),
                    tfo::InputError);
    CHECK_THROWS_AS(session.run_values({}, {{"x", tfo::HostValue::none()}}), tfo::InputError);
}
