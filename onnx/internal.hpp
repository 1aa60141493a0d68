// Shared by the files of libtinyfin-onnx: values, the node context kernels see, the op table.
#pragma once

#include <onnx/onnx_pb.h>

#include <chrono>
#include <functional>
#include <optional>
#include <cstdint>
#include <array>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tinyfin/onnx.hpp"

namespace tinyfin::onnx::detail {

// A value of the graph. A tensor: its data in the compute dtype (compute_dtype(type)) and the ONNX
// element type it stands for, so that outputs leave in the type the model declares. A sequence:
// its tensors in `elements`, each of element type `type` (`tensor` undefined). None: an optional
// without a value (an optional with one is that value).
struct Value {
    Value() = default;
    Value(Tensor t, ElementType element_type) : tensor(std::move(t)), type(element_type) {}

    Tensor tensor;
    ElementType type = ElementType::undefined;
    ValueKind kind = ValueKind::tensor;
    std::vector<Tensor> elements;

    bool is_tensor() const { return kind == ValueKind::tensor; }
};
Value sequence_value(ElementType type, std::vector<Tensor> elements);
Value none_value();
// Bytes a value holds on its device (a sequence: its elements').
uint64_t value_bytes(const Value &value);
// Its kind, element type and shapes, for the per-signature cache key and messages.
std::string value_signature(const Value &value);

// What a kernel sees of its node.
struct NodeContext {
    const ::onnx::NodeProto &node;
    int version;  // the op's since-version under the model's opset
    Device device;
    uint64_t max_tensor_bytes;
    std::vector<const Value *> inputs;  // nullptr for an absent optional input
    std::size_t n_outputs;
    std::string label;  // the node's name, or "#index" when unnamed
    int64_t opset = 0;  // the model's opset of the default domain (If and Loop bodies resolve theirs)

    // "node 'name' (Op version N)", for messages.
    std::string where() const;
    std::size_t n_inputs() const { return inputs.size(); }
    bool has_input(std::size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
    // Input i, which must be present and a tensor (ModelError naming the node otherwise).
    const Value &input(std::size_t i) const;
    // Input i of any kind (sequence ops, Identity, control flow), which must be present.
    const Value &value(std::size_t i) const;
    const Tensor &tensor(std::size_t i) const { return input(i).tensor; }
    // Input i's elements read to the host as integers / doubles (shape arguments: axes, pads...).
    std::vector<int64_t> ints(std::size_t i) const;
    std::vector<double> doubles(std::size_t i) const;

    const ::onnx::AttributeProto *attribute(const std::string &name) const;
    int64_t attr_int(const std::string &name, int64_t fallback) const;
    double attr_float(const std::string &name, double fallback) const;
    std::string attr_string(const std::string &name, const std::string &fallback) const;
    std::vector<int64_t> attr_ints(const std::string &name) const;
    std::vector<float> attr_floats(const std::string &name) const;
    bool has_attr(const std::string &name) const { return attribute(name) != nullptr; }

    // Errors naming the node.
    [[noreturn]] void unsupported(const std::string &what) const;
    [[noreturn]] void invalid(const std::string &what) const;
    // Throws ModelError when a tensor of `shape` and element size would pass max_tensor_bytes.
    void check_size(const Shape &shape, std::size_t element_bytes) const;
};

using Kernel = std::vector<Value> (*)(NodeContext &);

// One row of the op table: an op type, the range of its since-versions implemented, the kernel.
struct OpRow {
    const char *op_type;
    int min_version;
    int max_version;
    Kernel run;
};

// The rows of each family (ops_*.cpp).
std::span<const OpRow> elementwise_ops();
std::span<const OpRow> nn_ops();
std::span<const OpRow> layout_ops();
std::span<const OpRow> reduce_ops();
std::span<const OpRow> resize_ops();
std::span<const OpRow> indexing_ops();
std::span<const OpRow> control_ops();
std::span<const OpRow> quantized_ops();
std::span<const OpRow> detection_ops();
std::span<const OpRow> random_ops();
std::span<const OpRow> host_ops();
std::span<const OpRow> recurrent_ops();
std::span<const OpRow> spectral_ops();
std::span<const OpRow> sequence_ops();

// Every family above, once: the op table find_op searches and supported_ops lists.
std::array<std::span<const OpRow>, 14> op_families();

// The row for op_type, nullptr when none.
const OpRow *find_op(const std::string &op_type);

// A node's op table row and since-version under opset; UnsupportedError (ModelError for an op
// ONNX does not define) naming the node otherwise.
struct ResolvedOp {
    const OpRow *row;
    int version;
};
ResolvedOp resolve_op(const ::onnx::NodeProto &node, int64_t opset, const std::string &label);

// The values of the enclosing graphs that an If or Loop node's bodies read (nested bodies
// included), in first-use order; empty for every other node (ops_control.cpp). The session
// appends them to the node's inputs, so that ordering, freeing and folding see them.
std::vector<std::string> implicit_inputs(const ::onnx::NodeProto &node);
// Every node of an If or Loop node's bodies resolves (resolve_op), recursively.
void check_subgraphs(const ::onnx::NodeProto &node, int64_t opset);

// RNN, GRU and LSTM nodes checked at load (ops_recurrent.cpp): their attributes (hidden_size,
// direction, layout, activations with alpha/beta, clip) and the shapes of W, R, B and P where
// shape_of knows them (constants, static shapes); a ModelError naming the node and the attribute
// or input, UnsupportedError for what is not implemented. Other nodes pass.
void check_recurrent_at_load(const ::onnx::NodeProto &node, int version, const std::string &label, const Device &device,
                             const std::function<std::optional<Shape>(const std::string &)> &shape_of);

// A node the session executes: the node (as loaded, or rewritten by a fusion), its op's
// since-version, its op table row, its label, and the values whose last consumer it is.
struct Step {
    ::onnx::NodeProto node;
    int version;
    const OpRow *row;
    std::string label;
};

// The graph as the load-time rewrites (fusions.cpp) see it after folding.
struct FusionGraph {
    std::vector<Step> &steps;
    std::unordered_map<std::string, Value> &constants;
    // Constants a feed may override (initializers that are also graph inputs): never folded.
    const std::unordered_set<std::string> &overridable;
    // Graph outputs: a fusion never hides one inside a fused node.
    const std::unordered_set<std::string> &outputs;
    Device device;
};

// Rewrites matched patterns into fused nodes (docs/onnx.md, "Fusions at load"): returns how
// many times each fusion fired, by name. TINYFIN_ONNX_FUSE=0 turns every fusion off; a
// comma-separated list of names runs only those.
std::vector<std::pair<std::string, int64_t>> fuse(FusionGraph graph);

// Per step: whether its outputs follow from the shapes of the feeds alone (constants no feed
// overrides, Shape and Size of tensors whose shapes do, deterministic ops on such values), so
// that one run per signature of feed shapes computes them for every later run with it
// (shape_values.cpp). All false under TINYFIN_ONNX_FUSE=0, or a list without "shape_values".
std::vector<bool> signature_steps(const std::vector<Step> &steps,
                                  const std::unordered_map<std::string, Value> &constants,
                                  const std::unordered_set<std::string> &overridable);

// Ops whose outputs are drawn at random (RandomUniform..., Bernoulli, Dropout): never folded at
// load nor kept per signature.
bool is_random_op(const std::string &op);

// A TensorProto's data as a Value on device (external data read below base_dir).
Value tensor_from_proto(const ::onnx::TensorProto &proto, const std::string &base_dir, const Device &device,
                        const std::string &what);
// Host bytes of an element type as a Value on device (converted to the compute dtype).
Value value_from_host(const HostTensor &host, const Device &device);
HostTensor value_to_host(const Value &value);
// Any kind of value, to and from the host (a sequence's element types checked by the caller:
// session.cpp's feed_value checks every feed against its declaration first).
Value value_from_host(const HostValue &host, const Device &device);
HostValue host_value_of(const Value &value);

// libonnx's strict shape inference on model in a child process (shape_inference.cpp): the
// value_info it inferred, or a ModelError for a contradiction, a crash, a hang past timeout or
// an answer over max_answer_bytes. model is changed only in the child.
struct InferenceLimits {
    std::chrono::seconds timeout{120};
    std::size_t max_answer_bytes = std::size_t{64} << 20;
};
::onnx::GraphProto infer_shapes_isolated(::onnx::ModelProto &model, const InferenceLimits &limits);

// Helpers the kernels share.
// ONNX Conv (ops_nn.cpp), plus input `residual` when the node has it (-1: none), followed by
// `activation` (clip: minimum(maximum(., min), max)): one conv2d_activation where the
// convolution is 2-D (or 1-D).
std::vector<Value> conv_with_activation(NodeContext &ctx, Conv2dActivation activation, double min, double max,
                                        int residual = -1);
Value make(Tensor tensor, ElementType type);
// The element type a compute dtype stands for by default.
ElementType element_type_of(DType dtype);
// Elements of x at integer indices (any shape, in range) along axis:
// x.shape[:axis] + indices.shape + x.shape[axis+1:] (numpy.take).
Tensor take(const Tensor &x, const Tensor &indices, int64_t axis);
// GatherElements: out[i...] = x[i... with idx[i...] on axis]; idx (int64, in range) has x's rank.
Tensor gather_along(const Tensor &x, const Tensor &idx, int64_t axis, const Device &device);
int64_t normalize_axis(int64_t axis, int64_t rank, const NodeContext &ctx);
bool is_float(ElementType type);
// Exact floor of a float tensor; half-to-even rounding (ops_elementwise.cpp).
Tensor floor_of(const Tensor &x);
Tensor round_half_even(const Tensor &x);
// Records that a node computed on the host what the session's device did not (counted in
// RunReport::fallbacks when that device is not cpu); host_fallbacks() is this thread's total.
void count_host_fallback(const NodeContext &ctx);
uint64_t host_fallbacks();

}  // namespace tinyfin::onnx::detail
