// Graph values beyond tensors: sequences of tensors and empty optionals (internal.hpp's Value),
// their sizes and signatures, and their host form (HostValue).
#include "internal.hpp"

namespace tinyfin::onnx {

const char *value_kind_name(ValueKind kind) {
    switch (kind) {
    case ValueKind::tensor: return "tensor";
    case ValueKind::sequence: return "sequence";
    case ValueKind::none: return "none";
    }
    return "unknown";
}

HostValue HostValue::of(HostTensor tensor) {
    HostValue v;
    v.element_type = tensor.type;
    v.tensor = std::move(tensor);
    return v;
}

HostValue HostValue::sequence(ElementType element_type, std::vector<HostTensor> elements) {
    HostValue v;
    v.kind = ValueKind::sequence;
    v.element_type = element_type;
    v.elements = std::move(elements);
    return v;
}

HostValue HostValue::none() {
    HostValue v;
    v.kind = ValueKind::none;
    return v;
}

namespace detail {

Value sequence_value(ElementType type, std::vector<Tensor> elements) {
    Value v;
    v.kind = ValueKind::sequence;
    v.type = type;
    v.elements = std::move(elements);
    return v;
}

Value none_value() {
    Value v;
    v.kind = ValueKind::none;
    return v;
}

uint64_t value_bytes(const Value &value) {
    if (value.is_tensor()) return value.tensor.defined() ? value.tensor.nbytes() : 0;
    uint64_t bytes = 0;
    for (const Tensor &t : value.elements) bytes += t.nbytes();
    return bytes;
}

std::string value_signature(const Value &value) {
    switch (value.kind) {
    case ValueKind::tensor: return shape_str(value.tensor.shape());
    case ValueKind::none: return "none";
    case ValueKind::sequence: break;
    }
    std::string s = "seq(";
    for (const Tensor &t : value.elements) s += shape_str(t.shape());
    return s + ")";
}

Value value_from_host(const HostValue &host, const Device &device) {
    switch (host.kind) {
    case ValueKind::tensor: return value_from_host(host.tensor, device);
    case ValueKind::none: return none_value();
    case ValueKind::sequence: break;
    }
    std::vector<Tensor> elements;
    elements.reserve(host.elements.size());
    for (const HostTensor &e : host.elements) elements.push_back(value_from_host(e, device).tensor);
    return sequence_value(host.element_type, std::move(elements));
}

HostValue host_value_of(const Value &value) {
    switch (value.kind) {
    case ValueKind::tensor: return HostValue::of(value_to_host(value));
    case ValueKind::none: return HostValue::none();
    case ValueKind::sequence: break;
    }
    std::vector<HostTensor> elements;
    elements.reserve(value.elements.size());
    for (const Tensor &t : value.elements) elements.push_back(value_to_host(Value{t, value.type}));
    return HostValue::sequence(value.type, std::move(elements));
}

}  // namespace detail
}  // namespace tinyfin::onnx
