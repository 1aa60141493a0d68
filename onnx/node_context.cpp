// What kernels see of their node: inputs, attributes, errors that name the node; the op table.
#include <array>
#include <cmath>

#include "internal.hpp"

namespace tinyfin::onnx::detail {

std::string NodeContext::where() const {
    return "node '" + label + "' (" + node.op_type() + " version " + std::to_string(version) + ")";
}

const Value &NodeContext::value(std::size_t i) const {
    if (!has_input(i)) invalid("input " + std::to_string(i) + " is required but absent");
    return *inputs[i];
}

const Value &NodeContext::input(std::size_t i) const {
    const Value &v = value(i);
    if (!v.is_tensor())
        invalid("input " + std::to_string(i) + " is a " + value_kind_name(v.kind) + "; " + node.op_type() +
                " takes a tensor there");
    return v;
}

std::vector<int64_t> NodeContext::ints(std::size_t i) const {
    const Tensor &t = tensor(i);
    if (t.dtype() == DType::f32 || t.dtype() == DType::f16 || t.dtype() == DType::bf16)
        invalid("input " + std::to_string(i) + " must be integers, got " + dtype_name(t.dtype()));
    return t.to_vector<int64_t>();
}

std::vector<double> NodeContext::doubles(std::size_t i) const {
    const Tensor &t = tensor(i);
    if (t.dtype() == DType::i32 || t.dtype() == DType::i64 || t.dtype() == DType::boolean) {
        const auto v = t.to_vector<int64_t>();
        return {v.begin(), v.end()};
    }
    const auto v = t.to_vector<float>();
    return {v.begin(), v.end()};
}

const ::onnx::AttributeProto *NodeContext::attribute(const std::string &name) const {
    for (const auto &a : node.attribute())
        if (a.name() == name) return &a;
    return nullptr;
}

int64_t NodeContext::attr_int(const std::string &name, int64_t fallback) const {
    const auto *a = attribute(name);
    if (a == nullptr) return fallback;
    if (a->type() != ::onnx::AttributeProto::INT) invalid("attribute " + name + " must be an int");
    return a->i();
}

double NodeContext::attr_float(const std::string &name, double fallback) const {
    const auto *a = attribute(name);
    if (a == nullptr) return fallback;
    if (a->type() != ::onnx::AttributeProto::FLOAT) invalid("attribute " + name + " must be a float");
    return a->f();
}

std::string NodeContext::attr_string(const std::string &name, const std::string &fallback) const {
    const auto *a = attribute(name);
    if (a == nullptr) return fallback;
    if (a->type() != ::onnx::AttributeProto::STRING) invalid("attribute " + name + " must be a string");
    return a->s();
}

std::vector<int64_t> NodeContext::attr_ints(const std::string &name) const {
    const auto *a = attribute(name);
    if (a == nullptr) return {};
    if (a->type() != ::onnx::AttributeProto::INTS) invalid("attribute " + name + " must be a list of ints");
    return {a->ints().begin(), a->ints().end()};
}

std::vector<float> NodeContext::attr_floats(const std::string &name) const {
    const auto *a = attribute(name);
    if (a == nullptr) return {};
    if (a->type() != ::onnx::AttributeProto::FLOATS) invalid("attribute " + name + " must be a list of floats");
    return {a->floats().begin(), a->floats().end()};
}

void NodeContext::unsupported(const std::string &what) const {
    throw UnsupportedError("UnsupportedError: " + where() + ": " + what);
}

void NodeContext::invalid(const std::string &what) const { throw ModelError("ModelError: " + where() + ": " + what); }

void NodeContext::check_size(const Shape &shape, std::size_t element_bytes) const {
    uint64_t n = element_bytes;
    for (int64_t d : shape) {
        if (d < 0) invalid("negative dimension in " + shape_str(shape));
        if (d != 0 && n > max_tensor_bytes / static_cast<uint64_t>(d))
            invalid("a tensor of shape " + shape_str(shape) + " would pass the limit of " +
                    std::to_string(max_tensor_bytes) + " bytes (SessionOptions::max_tensor_bytes)");
        n *= static_cast<uint64_t>(d);
    }
    if (n > max_tensor_bytes)
        invalid("a tensor of shape " + shape_str(shape) + " would pass the limit of " +
                std::to_string(max_tensor_bytes) + " bytes (SessionOptions::max_tensor_bytes)");
}

int64_t normalize_axis(int64_t axis, int64_t rank, const NodeContext &ctx) {
    if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
        ctx.invalid("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return axis < 0 ? axis + rank : axis;
}

namespace {
thread_local uint64_t host_fallback_count = 0;
}

void count_host_fallback(const NodeContext &ctx) {
    if (ctx.device.backend != "cpu") ++host_fallback_count;
}

uint64_t host_fallbacks() { return host_fallback_count; }

std::array<std::span<const OpRow>, 14> op_families() {
    return {elementwise_ops(), nn_ops(),        layout_ops(),    reduce_ops(),    resize_ops(),
            indexing_ops(),    control_ops(),   quantized_ops(), detection_ops(), random_ops(),
            host_ops(),        recurrent_ops(), spectral_ops(),  sequence_ops()};
}

const OpRow *find_op(const std::string &op_type) {
    for (auto family : op_families())
        for (const OpRow &row : family)
            if (op_type == row.op_type) return &row;
    return nullptr;
}

}  // namespace tinyfin::onnx::detail
