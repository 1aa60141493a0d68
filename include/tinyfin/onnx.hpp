// tinyfin::onnx — running ONNX models on tinyfin's backends (libtinyfin-onnx.so, docs/onnx.md).
//
// Shaped like ONNX Runtime's InferenceSession so that switching is one line:
//
//     tinyfin::onnx::InferenceSession session("model.onnx", {.backend = "vulkan"});
//     for (const auto &input : session.get_inputs()) ...      // names, shapes, element types
//     auto outputs = session.run({}, {{"x", x}});               // all outputs when names are empty
//
// The model is parsed with libonnx's protobuf definitions, checked (opsets 7..17 of the default
// domain, every node's op and version implemented, a graph without cycles or redefinitions,
// external data inside the model's folder), and its initializers are uploaded once to the chosen
// backend. Nodes whose inputs are all known at load (constants, shapes of static tensors) are
// folded then. Each intermediate tensor is freed when its last consumer has run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tinyfin/tinyfin.hpp"

namespace tinyfin::onnx {

// A file or graph that is not a valid ONNX model: truncated or malformed protobuf, a cycle, a
// value defined twice, a missing initializer, external data outside the model's folder, sizes
// that do not match their data.
class ModelError : public Error {
public:
    using Error::Error;
};
// A valid model using what this runtime does not implement: an opset outside 7..17, an op or an
// op version, an attribute value or an element type. The message names the node and what is
// supported.
class UnsupportedError : public Error {
public:
    using Error::Error;
};
// A bad argument to run(): an unknown input or output name, a missing feed, a feed whose element
// type or shape contradicts the model's declaration.
class InputError : public Error {
public:
    using Error::Error;
};

// ONNX's TensorProto.DataType numbers.
enum class ElementType : int32_t {
    undefined = 0,
    float32 = 1,
    uint8 = 2,
    int8 = 3,
    uint16 = 4,
    int16 = 5,
    int32 = 6,
    int64 = 7,
    string = 8,
    boolean = 9,
    float16 = 10,
    float64 = 11,
    uint32 = 12,
    uint64 = 13,
    complex64 = 14,
    complex128 = 15,
    bfloat16 = 16,
};
// "float32", "int8", ... ("unknown(N)" for another number).
std::string element_type_name(ElementType type);
// Bytes of one element (0 for string, undefined and unknown types).
std::size_t element_size(ElementType type);
// The tinyfin dtype a value of this element type is computed in: float64 in f32; int8, uint8,
// int16, uint16 in i32; uint32 and uint64 in i64. Throws UnsupportedError for string and complex.
DType compute_dtype(ElementType type);

// What a graph value is: a tensor, a sequence of tensors (all of one element type; ONNX's
// seq(tensor(...))), or none (an optional without a value). An optional that holds a value is
// that value.
enum class ValueKind : int32_t {
    tensor = 0,
    sequence = 1,
    none = 2,
};
// "tensor", "sequence", "none".
const char *value_kind_name(ValueKind kind);

// A graph input or output as the model declares it.
struct TensorInfo {
    std::string name;
    ElementType type = ElementType::undefined;
    // -1 for a dimension the model leaves open (dim_names says its symbol, if any); an empty
    // shape with has_shape false means the rank is unknown too.
    std::vector<int64_t> shape;
    std::vector<std::string> dim_names;
    bool has_shape = false;
    // sequence: type, shape and dim_names describe each element. optional: the value may be absent
    // (fed and returned as ValueKind::none); kind is what it holds when present.
    ValueKind kind = ValueKind::tensor;
    bool optional = false;
};

// Dense row-major host data of an ONNX element type: what numpy and ONNX Runtime exchange.
struct HostTensor {
    ElementType type = ElementType::float32;
    Shape shape;
    std::vector<std::byte> data;  // numel(shape) * element_size(type) bytes

    int64_t numel() const;
};

// A graph value on the host: a tensor, a sequence of tensors, or none (an empty optional).
struct HostValue {
    ValueKind kind = ValueKind::tensor;
    HostTensor tensor;  // kind tensor
    // kind sequence: its tensors, each of element_type (which an empty sequence carries too).
    std::vector<HostTensor> elements;
    ElementType element_type = ElementType::undefined;

    static HostValue of(HostTensor tensor);
    static HostValue sequence(ElementType element_type, std::vector<HostTensor> elements);
    static HostValue none();
};

struct SessionOptions {
    // Backend to run on ("cpu", "vulkan", ...); empty: tinyfin's current default backend.
    std::string backend;
    // The largest tensor a node may create (ConstantOfShape, Expand, Tile, Range...): a model
    // asking for more is a ModelError before anything is allocated.
    uint64_t max_tensor_bytes = uint64_t{1} << 34;
    // Run libonnx's shape inference at load (strict: a contradiction is a ModelError).
    bool shape_inference = true;
    // Record per node which backend ran it and how many of its ops fell back (last_run().nodes).
    bool profile = false;
};

// What happened at load.
struct LoadReport {
    int64_t opset = 0;  // of the default domain
    int64_t nodes = 0;  // in the graph
    int64_t folded = 0;  // evaluated at load (constants and shape computations)
    uint64_t initializer_bytes = 0;  // uploaded to the backend, once
    std::string backend;
    // Load-time rewrites that fired (docs/onnx.md, "Fusions at load"): name, times.
    std::vector<std::pair<std::string, int64_t>> fusions;
};

// One node of the last run (SessionOptions::profile).
struct NodeRun {
    std::string node;  // its name, or "#index" when unnamed
    std::string op_type;
    std::string backend;  // of its first output
    // tinyfin ops of this node that left the backend for cpu, and computations the node made on
    // the host instead of the session's (non-cpu) device (NonMaxSuppression, Det)
    uint64_t fallbacks = 0;
    double seconds = 0;  // wall time of the node's kernel (on an asynchronous backend: to submit it)
};

struct RunReport {
    // The most bytes of intermediate and output tensors alive at once during the run
    // (initializers and feeds not counted).
    uint64_t peak_bytes = 0;
    int64_t nodes_run = 0;
    uint64_t fallbacks = 0;  // over the whole run (tinyfin::stats() and the nodes' host computations)
    std::vector<NodeRun> nodes;  // with profile only
};

class InferenceSession {
public:
    // Loads and checks the model at path; external data is read from path's folder.
    explicit InferenceSession(const std::string &path, SessionOptions options = {});
    // The same from serialized bytes; external data from base_dir (none allowed when empty).
    static InferenceSession from_bytes(const void *data, std::size_t size, SessionOptions options = {},
                                       const std::string &base_dir = {});
    InferenceSession(InferenceSession &&) noexcept;
    InferenceSession &operator=(InferenceSession &&) noexcept;
    ~InferenceSession();

    const std::vector<TensorInfo> &get_inputs() const;
    const std::vector<TensorInfo> &get_outputs() const;
    const LoadReport &load_report() const;
    // The report of the latest run() of this session.
    const RunReport &last_run() const;

    // Runs the graph. output_names empty: every graph output, in the model's order. Feeds are
    // checked against the declared element types and static dimensions.
    std::vector<HostTensor> run(const std::vector<std::string> &output_names,
                                const std::vector<std::pair<std::string, HostTensor>> &feeds);
    // The same for graphs whose inputs or outputs are sequences or optionals (run() refuses an
    // output that is not a tensor, naming this one).
    std::vector<HostValue> run_values(const std::vector<std::string> &output_names,
                                      const std::vector<std::pair<std::string, HostValue>> &feeds);
    // Tensors in and out (on any device; moved to the session's backend). A feed's dtype must be
    // the compute dtype of its declared element type; outputs are in their compute dtype.
    std::vector<Tensor> run(const std::vector<std::string> &output_names,
                            const std::vector<std::pair<std::string, Tensor>> &feeds);

    struct Impl;

private:
    explicit InferenceSession(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Every op type implemented, with the op versions (since-versions in ONNX's operator table)
// implemented for it, for docs and error messages.
std::vector<std::pair<std::string, std::vector<int>>> supported_ops();

}  // namespace tinyfin::onnx
