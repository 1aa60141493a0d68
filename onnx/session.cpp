// InferenceSession: load (parse, check, upload, fold) and run (execute nodes in order, free each
// intermediate after its last consumer).
#include <onnx/defs/schema.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "internal.hpp"
#include "tinyfin/extend.hpp"
#include "mapped_file.hpp"

namespace tinyfin::onnx {

using detail::NodeContext;
using detail::OpRow;
using detail::Value;

namespace {

// Every node's op version is checked on its own, so opsets before 7 load where their ops'
// versions are implemented (Elu 6, Not 1...).
constexpr int64_t min_opset = 1;
constexpr int64_t max_opset = 17;

std::string node_label(const ::onnx::NodeProto &node, std::size_t index) {
    return node.name().empty() ? "#" + std::to_string(index) : node.name();
}

// The since-versions of op_type in ONNX's table that fall in [lo, hi].
std::vector<int> since_versions(const std::string &op_type, int lo, int hi) {
    std::set<int> out;
    for (int v = 1; v <= max_opset; ++v) {
        const auto *schema = ::onnx::OpSchemaRegistry::Schema(op_type, v, "");
        if (schema != nullptr && schema->SinceVersion() >= lo && schema->SinceVersion() <= hi)
            out.insert(schema->SinceVersion());
    }
    return {out.begin(), out.end()};
}

std::string join(const std::vector<int> &values) {
    std::string out;
    for (int v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
    return out;
}

TensorInfo info_of(const ::onnx::ValueInfoProto &vi, const char *what) {
    TensorInfo info;
    info.name = vi.name();
    const ::onnx::TypeProto *type = &vi.type();
    auto refuse = [&](const char *kind) {
        throw UnsupportedError(std::string("UnsupportedError: graph ") + what + " '" + vi.name() + "' is " + kind +
                               " (tensors, sequences of tensors and optionals of either are supported)");
    };
    if (type->has_optional_type()) {
        info.optional = true;
        type = &type->optional_type().elem_type();
    }
    if (type->has_sequence_type()) {
        info.kind = ValueKind::sequence;
        type = &type->sequence_type().elem_type();
        if (!type->has_tensor_type()) refuse("a sequence of non-tensors");
    }
    if (type->has_map_type()) refuse("a map");
    if (!type->has_tensor_type()) refuse(type->has_sparse_tensor_type() ? "a sparse tensor" : "not a tensor");
    const auto &tt = type->tensor_type();
    info.type = static_cast<ElementType>(tt.elem_type());
    if (tt.has_shape()) {
        info.has_shape = true;
        for (const auto &d : tt.shape().dim()) {
            info.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
            info.dim_names.push_back(d.has_dim_param() ? d.dim_param() : "");
        }
    }
    return info;
}

bool static_shape(const TensorInfo &info) {
    return info.has_shape && std::all_of(info.shape.begin(), info.shape.end(), [](int64_t d) { return d >= 0; });
}

}  // namespace

struct InferenceSession::Impl {
    SessionOptions options;
    Device device;
    std::vector<TensorInfo> inputs, outputs;
    std::unordered_set<std::string> initializer_inputs;  // graph inputs an initializer defaults
    std::unordered_map<std::string, Value> constants;
    // The nodes left after folding, in execution order, with their op's version and row.
    using Step = detail::Step;
    std::vector<Step> steps;
    // Steps whose outputs follow from the feeds' shapes alone (shape_values.cpp), and their
    // outputs per signature of feed shapes (at most 16 signatures kept; runs on several threads
    // share them under the mutex).
    std::vector<bool> by_signature;
    // Every value a run holds gets a slot at load: the graph's inputs (initializer defaults
    // included) and every step's outputs. A run then reads and writes vectors by index and looks
    // names up only for its feeds and wanted outputs (string-keyed maps cost a hash, an allocation
    // and a free per value, a fifth of a small model's run).
    std::unordered_map<std::string, std::size_t> slot_of;
    struct StepSlots {
        std::vector<std::ptrdiff_t> ins;  // per input: its slot, or -1 (none: a constant or empty)
        std::vector<const Value *> constants;  // per input: the constant read when its slot is empty
        std::vector<std::ptrdiff_t> outs;  // per output: its slot, or -1 for an unused output
        std::vector<std::size_t> frees;  // slots freed once the step has run
    };
    std::vector<StepSlots> step_slots;
    using ShapeValues = std::unordered_map<std::string, Value>;
    std::mutex signature_mutex;
    std::unordered_map<std::string, std::shared_ptr<const ShapeValues>> signature_values;
    LoadReport load;
    RunReport last;

    void load_model(const std::byte *data, std::size_t size, const std::string &base_dir);
    void assign_slots();
    void run_node(const Step &step, const std::vector<const Value *> &ins, std::vector<Value> &outs) const;
    std::unordered_map<std::string, Value> execute(std::unordered_map<std::string, Value> env,
                                                   const std::vector<std::string> &wanted);
};

namespace detail {

ResolvedOp resolve_op(const ::onnx::NodeProto &node, int64_t opset, const std::string &label) {
    if (!node.domain().empty() && node.domain() != "ai.onnx")
        throw UnsupportedError("UnsupportedError: node '" + label + "' (" + node.op_type() + ") is in domain '" +
                               node.domain() + "'; only the default domain is supported");
    const auto *schema = ::onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), "");
    if (schema == nullptr)
        throw ModelError("ModelError: node '" + label + "': '" + node.op_type() + "' is not an ONNX op at opset " +
                         std::to_string(opset));
    const int version = schema->SinceVersion();
    const OpRow *row = find_op(node.op_type());
    const std::string where = "node '" + label + "' (" + node.op_type() + " version " + std::to_string(version) + ")";
    if (row == nullptr)
        throw UnsupportedError("UnsupportedError: " + where + ": op " + node.op_type() +
                               " is not implemented (docs/onnx.md lists the " + std::to_string(supported_ops().size()) +
                               " implemented op types)");
    if (version < row->min_version || version > row->max_version)
        throw UnsupportedError("UnsupportedError: " + where + ": version " + std::to_string(version) + " of " +
                               node.op_type() + " is not implemented; implemented versions: " +
                               join(since_versions(node.op_type(), row->min_version, row->max_version)));
    return {row, version};
}

}  // namespace detail

void InferenceSession::Impl::load_model(const std::byte *data, std::size_t size, const std::string &base_dir) {
    if (size > static_cast<std::size_t>(INT_MAX))
        throw ModelError("ModelError: the model is " + std::to_string(size) +
                         " bytes, over protobuf's 2 GiB limit: store large tensors as external data");
    ::onnx::ModelProto model;
    if (!model.ParseFromArray(data, static_cast<int>(size)))
        throw ModelError("ModelError: the file is not a valid ONNX protobuf (truncated or corrupt, " +
                         std::to_string(size) + " bytes)");
    if (!model.has_graph()) throw ModelError("ModelError: the model has no graph");

    // Opsets: the default domain within 7..17.
    int64_t opset = -1;
    for (const auto &imp : model.opset_import())
        if (imp.domain().empty() || imp.domain() == "ai.onnx") opset = imp.version();
    for (int i = 0; i < model.graph().node_size(); ++i) {
        const auto &node = model.graph().node(i);
        if (!node.domain().empty() && node.domain() != "ai.onnx")
            throw UnsupportedError("UnsupportedError: node '" + node_label(node, i) + "' (" + node.op_type() +
                                   ") is in domain '" + node.domain() + "'; only the default domain is supported");
    }
    if (opset < 0) throw ModelError("ModelError: the model imports no opset of the default domain");
    if (opset < min_opset || opset > max_opset)
        throw UnsupportedError("UnsupportedError: the model uses opset " + std::to_string(opset) +
                               " of the default domain; supported: " + std::to_string(min_opset) + " through " +
                               std::to_string(max_opset) + " (ONNX 1.12)");
    load.opset = opset;

    const auto &graph = model.graph();
    if (graph.sparse_initializer_size() > 0)
        throw UnsupportedError("UnsupportedError: sparse initializers are not supported");

    // Where each value comes from: a graph input, an initializer or exactly one node output.
    std::unordered_set<std::string> defined;
    for (const auto &init : graph.initializer()) {
        if (init.name().empty()) throw ModelError("ModelError: an initializer has no name");
        if (!defined.insert(init.name()).second)
            throw ModelError("ModelError: initializer '" + init.name() + "' is defined twice");
    }
    for (const auto &in : graph.input()) {
        if (defined.count(in.name())) {
            initializer_inputs.insert(in.name());
        } else {
            defined.insert(in.name());
        }
        inputs.push_back(info_of(in, "input"));
        if (initializer_inputs.count(in.name())) inputs.pop_back();  // an overridable default, not a feed
    }
    const int n = graph.node_size();
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < n; ++i) {
        const auto &node = graph.node(i);
        for (const auto &out : node.output()) {
            if (out.empty()) continue;
            for (const auto &in : node.input())
                if (in == out)
                    throw ModelError("ModelError: node '" + node_label(node, i) + "' (" + node.op_type() + ") has '" +
                                     out + "' as both input and output");
            if (defined.count(out) || producer.count(out))
                throw ModelError("ModelError: value '" + out + "' is defined twice (output of node '" +
                                 node_label(node, i) + "')");
            producer[out] = i;
        }
    }
    // Every input defined somewhere; order the nodes (Kahn), so a cycle is left over. The outer
    // values an If or Loop body reads count as inputs of its node.
    std::vector<std::vector<std::string>> implicit(n);
    for (int i = 0; i < n; ++i) implicit[i] = detail::implicit_inputs(graph.node(i));
    std::vector<int> pending(n, 0);
    std::vector<std::vector<int>> consumers(n);
    for (int i = 0; i < n; ++i) {
        const auto &node = graph.node(i);
        std::vector<std::string> reads(node.input().begin(), node.input().end());
        reads.insert(reads.end(), implicit[i].begin(), implicit[i].end());
        for (const auto &in : reads) {
            if (in.empty()) continue;
            if (auto p = producer.find(in); p != producer.end()) {
                ++pending[i];
                consumers[p->second].push_back(i);
            } else if (!defined.count(in)) {
                throw ModelError("ModelError: input '" + in + "' of node '" + node_label(node, i) + "' (" +
                                 node.op_type() +
                                 ") is not a graph input, an initializer or any node's output (a missing "
                                 "initializer?)");
            }
        }
    }
    std::vector<int> order, ready;
    for (int i = n - 1; i >= 0; --i)
        if (pending[i] == 0) ready.push_back(i);
    while (!ready.empty()) {
        const int i = ready.back();
        ready.pop_back();
        order.push_back(i);
        for (auto c = consumers[i].rbegin(); c != consumers[i].rend(); ++c)
            if (--pending[*c] == 0) ready.push_back(*c);
    }
    if (static_cast<int>(order.size()) != n) {
        for (int i = 0; i < n; ++i)
            if (pending[i] > 0)
                throw ModelError("ModelError: the graph has a cycle through node '" + node_label(graph.node(i), i) +
                                 "' (" + graph.node(i).op_type() + ")");
    }
    for (const auto &out : graph.output()) {
        if (!defined.count(out.name()) && !producer.count(out.name()))
            throw ModelError("ModelError: graph output '" + out.name() + "' is produced by no node");
        outputs.push_back(info_of(out, "output"));
    }

    // Every node's op and version implemented, in If and Loop bodies too; the outer values a body
    // reads become inputs of its node after the ones ONNX defines.
    for (int i : order) {
        auto &node = graph.node(i);
        const detail::ResolvedOp op = detail::resolve_op(node, opset, node_label(node, i));
        detail::check_subgraphs(node, opset);
        steps.push_back({node, op.version, op.row, node_label(node, i)});
        for (const auto &name : implicit[i]) steps.back().node.add_input(name);
    }
    load.nodes = n;

    // libonnx's shape inference: a contradiction is a broken model; inferred static shapes let
    // shape computations fold.
    std::unordered_map<std::string, Shape> static_shapes;
    for (const auto &info : inputs)
        if (static_shape(info)) static_shapes[info.name] = info.shape;
    if (options.shape_inference) {
        // In a child process: libonnx 1.12 crashes on some malformed nodes (docs/security.md).
        detail::InferenceLimits limits;
        limits.max_answer_bytes = std::clamp<std::size_t>(16 * size, limits.max_answer_bytes, std::size_t{1} << 30);
        const ::onnx::GraphProto inferred = detail::infer_shapes_isolated(model, limits);
        for (const auto &vi : inferred.value_info()) {
            if (!vi.type().has_tensor_type()) continue;
            const TensorInfo info = info_of(vi, "value");
            if (static_shape(info)) static_shapes[info.name] = info.shape;
        }
    }

    // Initializers, uploaded once.
    device = options.backend.empty() ? default_device() : Device::parse(options.backend);
    load.backend = device.str();
    for (const auto &init : graph.initializer()) {
        Value v = detail::tensor_from_proto(init, base_dir, device, "initializer '" + init.name() + "'");
        load.initializer_bytes += v.tensor.nbytes();
        constants.emplace(init.name(), std::move(v));
    }
    // Nodes whose attributes and weights can be checked before any run (ops_recurrent.cpp).
    for (const Step &step : steps)
        detail::check_recurrent_at_load(step.node, step.version, step.label, device,
                                        [&](const std::string &name) -> std::optional<Shape> {
                                            if (auto c = constants.find(name); c != constants.end())
                                                return c->second.tensor.shape();
                                            if (auto s = static_shapes.find(name); s != static_shapes.end())
                                                return s->second;
                                            return std::nullopt;
                                        });

    // Folding: a node whose inputs are all constants (or whose only input is a tensor of static
    // shape, for Shape and Size) runs now; its outputs become constants.
    NoGradGuard no_grad;
    std::vector<Step> kept;
    for (Step &step : steps) {
        const auto &node = step.node;
        bool foldable = true;
        std::vector<Value> placeholders;
        placeholders.reserve(node.input_size());
        std::vector<const Value *> ins;
        for (const auto &in : node.input()) {
            if (in.empty()) {
                ins.push_back(nullptr);
                continue;
            }
            if (auto c = constants.find(in); c != constants.end() && !initializer_inputs.count(in)) {
                ins.push_back(&c->second);
                continue;
            }
            auto s = static_shapes.find(in);
            const bool shape_only = node.op_type() == "Shape" || node.op_type() == "Size";
            if (shape_only && s != static_shapes.end()) {
                // A view of one element with the static shape: Shape and Size read only the shape.
                placeholders.push_back({scalar(0, DType::f32, device).expand(s->second), ElementType::float32});
                ins.push_back(&placeholders.back());
                continue;
            }
            foldable = false;
            break;
        }
        if (!foldable || detail::is_random_op(node.op_type())) {
            kept.push_back(std::move(step));
            continue;
        }
        std::vector<Value> outs;
        run_node(step, ins, outs);
        for (int o = 0; o < node.output_size(); ++o) {
            if (node.output(o).empty()) continue;
            // Folded values are read at every run: a view (a folded Transpose of a weight) becomes
            // a dense copy once, so that matmuls read it row-major.
            Value &v = outs[static_cast<std::size_t>(o)];
            if (v.is_tensor()) v.tensor = v.tensor.contiguous();
            constants[node.output(o)] = std::move(v);
        }
        ++load.folded;
    }
    steps = std::move(kept);

    // Gemm with transB over a constant weight (what exporters write for a linear layer): the
    // weight is transposed once here, so that each run multiplies by a row-major [K, N] matrix.
    for (Step &step : steps) {
        auto &node = step.node;
        if (node.op_type() != "Gemm" || node.input_size() < 2) continue;
        const std::string &b = node.input(1);
        auto c = constants.find(b);
        if (c == constants.end() || initializer_inputs.count(b) || c->second.tensor.rank() != 2) continue;
        ::onnx::AttributeProto *trans_b = nullptr;
        for (auto &a : *node.mutable_attribute())
            if (a.name() == "transB" && a.type() == ::onnx::AttributeProto::INT && a.i() != 0) trans_b = &a;
        if (trans_b == nullptr) continue;
        const std::string transposed = b + "\x1f(transposed at load)";
        if (!constants.count(transposed))
            constants[transposed] = Value{c->second.tensor.transpose(0, 1).contiguous(), c->second.type};
        node.set_input(1, transposed);
        trans_b->set_i(0);
    }

    // Load-time rewrites (fusions.cpp) over the folded graph.
    {
        std::unordered_set<std::string> output_names;
        for (const auto &out : outputs) output_names.insert(out.name);
        load.fusions = detail::fuse({steps, constants, initializer_inputs, output_names, device});
    }

    // Constants nothing needs any more (inputs only of folded nodes) are released.
    std::unordered_set<std::string> needed(initializer_inputs.begin(), initializer_inputs.end());
    for (const auto &step : steps)
        for (const auto &in : step.node.input()) needed.insert(in);
    for (const auto &out : outputs) needed.insert(out.name);
    for (auto it = constants.begin(); it != constants.end();)
        it = needed.count(it->first) ? std::next(it) : constants.erase(it);

    // The constants the graph reads are never written again (an initializer a feed may override,
    // or a constant handed out as a graph output, could be): a backend may keep forms prepared
    // from them (the cpu plugin packs a matmul's weight once).
    {
        std::unordered_set<std::string> handed_out;
        for (const auto &out : outputs) handed_out.insert(out.name);
        for (const auto &[name, value] : constants)
            if (!initializer_inputs.count(name) && !handed_out.count(name) && value.tensor.defined())
                mark_constant(value.tensor);
    }
    by_signature = detail::signature_steps(steps, constants, initializer_inputs);
    assign_slots();
}

void InferenceSession::Impl::assign_slots() {
    const auto add = [&](const std::string &name) { slot_of.emplace(name, slot_of.size()); };
    for (const auto &info : inputs) add(info.name);
    for (const auto &name : initializer_inputs) add(name);
    for (const auto &step : steps)
        for (const auto &out : step.node.output())
            if (!out.empty()) add(out);
    step_slots.clear();
    for (const auto &step : steps) {
        StepSlots ss;
        for (const auto &in : step.node.input()) {
            const auto slot = in.empty() ? slot_of.end() : slot_of.find(in);
            const auto c = in.empty() ? constants.end() : constants.find(in);
            ss.ins.push_back(slot == slot_of.end() ? -1 : static_cast<std::ptrdiff_t>(slot->second));
            ss.constants.push_back(c == constants.end() ? nullptr : &c->second);
        }
        for (const auto &out : step.node.output())
            ss.outs.push_back(out.empty() ? -1 : static_cast<std::ptrdiff_t>(slot_of.at(out)));
        step_slots.push_back(std::move(ss));
    }
    // Each value's last consumer frees it (graph outputs and constants stay); an output no one
    // reads is freed right after its node.
    std::vector<char> kept(slot_of.size(), 0);
    for (const auto &out : outputs)
        if (auto slot = slot_of.find(out.name); slot != slot_of.end()) kept[slot->second] = 1;
    std::vector<std::ptrdiff_t> last_use(slot_of.size(), -1);
    for (std::size_t i = 0; i < steps.size(); ++i)
        for (std::size_t k = 0; k < step_slots[i].ins.size(); ++k)
            if (const std::ptrdiff_t slot = step_slots[i].ins[k]; slot >= 0 && !step_slots[i].constants[k])
                last_use[static_cast<std::size_t>(slot)] = static_cast<std::ptrdiff_t>(i);
    for (std::size_t i = 0; i < steps.size(); ++i)
        for (const std::ptrdiff_t slot : step_slots[i].outs)
            if (slot >= 0 && last_use[static_cast<std::size_t>(slot)] < 0)
                last_use[static_cast<std::size_t>(slot)] = static_cast<std::ptrdiff_t>(i);
    for (std::size_t slot = 0; slot < slot_of.size(); ++slot)
        if (!kept[slot] && last_use[slot] >= 0)
            step_slots[static_cast<std::size_t>(last_use[slot])].frees.push_back(slot);
}

void InferenceSession::Impl::run_node(const Step &step, const std::vector<const Value *> &ins,
                                      std::vector<Value> &outs) const {
    NodeContext ctx{step.node, step.version,
                    device,    options.max_tensor_bytes,
                    ins,       static_cast<std::size_t>(step.node.output_size()),
                    step.label};
    ctx.opset = load.opset;
    try {
        outs = step.row->run(ctx);
    } catch (const Error &) {
        throw;
    } catch (const std::exception &e) {
        throw ModelError("ModelError: " + ctx.where() + ": " + e.what());
    }
    for (int o = 0; o < step.node.output_size(); ++o) {
        if (step.node.output(o).empty()) continue;
        if (static_cast<std::size_t>(o) >= outs.size()) ctx.unsupported("output " + std::to_string(o));
        Value &v = outs[static_cast<std::size_t>(o)];
        if (!v.is_tensor()) continue;
        const DType want = compute_dtype(v.type);
        if (v.tensor.dtype() != want) v.tensor = v.tensor.to(want);
    }
}

std::unordered_map<std::string, Value> InferenceSession::Impl::execute(std::unordered_map<std::string, Value> env,
                                                                       const std::vector<std::string> &wanted) {
    NoGradGuard no_grad;
    last = RunReport{};
    const uint64_t fallbacks_before = stats().total_fallbacks + detail::host_fallbacks();
    uint64_t live = 0;
    // The run's values by slot (assign_slots), whether each holds one, and the bytes of each live
    // node output.
    std::vector<Value> slots(slot_of.size());
    std::vector<char> present(slot_of.size(), 0);
    std::vector<uint64_t> produced(slot_of.size(), 0);
    const auto put = [&](const std::string &name, Value value) {
        if (auto slot = slot_of.find(name); slot != slot_of.end()) {
            slots[slot->second] = std::move(value);
            present[slot->second] = 1;
        }
    };
    auto release = [&](std::size_t index) {
        for (std::size_t slot : step_slots[index].frees) {
            live -= produced[slot];
            produced[slot] = 0;
            slots[slot] = Value{};
            present[slot] = 0;
        }
    };
    // Shape arithmetic computed once per signature of feed shapes: its values are reused; a run
    // that completes with a new signature stores them.
    std::shared_ptr<const ShapeValues> cached;
    ShapeValues recorded;
    ShapeValues *record = nullptr;
    std::string key;
    if (std::find(by_signature.begin(), by_signature.end(), true) != by_signature.end()) {
        std::vector<std::string> parts;
        for (const auto &[name, v] : env) parts.push_back(name + detail::value_signature(v));
        std::sort(parts.begin(), parts.end());
        for (const auto &p : parts) key += p + '\x1f';
        {
            std::lock_guard<std::mutex> lock(signature_mutex);
            if (auto c = signature_values.find(key); c != signature_values.end()) cached = c->second;
        }
        if (cached == nullptr) record = &recorded;
    }
    for (auto &[name, v] : env) put(name, std::move(v));
    if (cached != nullptr)
        for (const auto &[name, v] : *cached) put(name, v);
    std::vector<const Value *> ins;
    std::vector<Value> outs;
    for (std::size_t index = 0; index < steps.size(); ++index) {
        const Step &step = steps[index];
        const StepSlots &ss = step_slots[index];
        if (cached != nullptr && by_signature[index] &&
            std::all_of(step.node.output().begin(), step.node.output().end(),
                        [&](const std::string &o) { return o.empty() || cached->count(o); })) {
            release(index);
            continue;
        }
        ins.clear();
        for (int i = 0; i < step.node.input_size(); ++i) {
            const std::ptrdiff_t slot = ss.ins[static_cast<std::size_t>(i)];
            if (step.node.input(i).empty()) {
                ins.push_back(nullptr);
            } else if (slot >= 0 && present[static_cast<std::size_t>(slot)]) {
                ins.push_back(&slots[static_cast<std::size_t>(slot)]);
            } else if (const Value *c = ss.constants[static_cast<std::size_t>(i)]) {
                ins.push_back(c);
            } else {
                throw ModelError("ModelError: node '" + step.label + "' needs '" + step.node.input(i) +
                                 "', which nothing produced");
            }
        }
        const uint64_t node_fallbacks = options.profile ? stats().total_fallbacks + detail::host_fallbacks() : 0;
        const auto node_start = std::chrono::steady_clock::now();
        run_node(step, ins, outs);
        const double node_seconds =
            options.profile ? std::chrono::duration<double>(std::chrono::steady_clock::now() - node_start).count() : 0;
        ++last.nodes_run;
        for (int o = 0; o < step.node.output_size(); ++o) {
            const std::ptrdiff_t slot = ss.outs[static_cast<std::size_t>(o)];
            if (slot < 0) continue;
            const auto at = static_cast<std::size_t>(slot);
            const uint64_t bytes = detail::value_bytes(outs[static_cast<std::size_t>(o)]);
            live += bytes - produced[at];
            produced[at] = bytes;
            slots[at] = std::move(outs[static_cast<std::size_t>(o)]);
            present[at] = 1;
            if (record != nullptr && by_signature[index] && bytes <= (uint64_t{1} << 20))
                (*record)[step.node.output(o)] = slots[at];
        }
        last.peak_bytes = std::max(last.peak_bytes, live);
        if (options.profile) {
            NodeRun report{step.label, step.node.op_type(), "",
                           stats().total_fallbacks + detail::host_fallbacks() - node_fallbacks, node_seconds};
            for (const std::ptrdiff_t slot : ss.outs)
                if (slot >= 0 && present[static_cast<std::size_t>(slot)] &&
                    slots[static_cast<std::size_t>(slot)].is_tensor()) {
                    report.backend = slots[static_cast<std::size_t>(slot)].tensor.device().str();
                    break;
                }
            last.nodes.push_back(std::move(report));
        }
        release(index);
    }
    if (record != nullptr) {
        std::lock_guard<std::mutex> lock(signature_mutex);
        if (signature_values.size() >= 16) signature_values.clear();
        signature_values[key] = std::make_shared<const ShapeValues>(std::move(recorded));
    }
    last.fallbacks = stats().total_fallbacks + detail::host_fallbacks() - fallbacks_before;
    std::unordered_map<std::string, Value> result;
    for (const auto &name : wanted) {
        if (auto slot = slot_of.find(name); slot != slot_of.end() && present[slot->second]) {
            result[name] = slots[slot->second];
        } else if (auto c = constants.find(name); c != constants.end()) {
            result[name] = c->second;
        }
    }
    return result;
}

InferenceSession::InferenceSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

InferenceSession::InferenceSession(const std::string &path, SessionOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
    detail::MappedFile file(path);
    std::string dir = file.real_path();
    dir = dir.substr(0, dir.find_last_of('/'));
    if (dir.empty()) dir = "/";
    impl_->load_model(file.data(), file.size(), dir);
}

InferenceSession InferenceSession::from_bytes(const void *data, std::size_t size, SessionOptions options,
                                              const std::string &base_dir) {
    auto impl = std::make_unique<Impl>();
    impl->options = std::move(options);
    impl->load_model(static_cast<const std::byte *>(data), size, base_dir);
    return InferenceSession(std::move(impl));
}

InferenceSession::InferenceSession(InferenceSession &&) noexcept = default;
InferenceSession &InferenceSession::operator=(InferenceSession &&) noexcept = default;
InferenceSession::~InferenceSession() = default;

const std::vector<TensorInfo> &InferenceSession::get_inputs() const { return impl_->inputs; }
const std::vector<TensorInfo> &InferenceSession::get_outputs() const { return impl_->outputs; }
const LoadReport &InferenceSession::load_report() const { return impl_->load; }
const RunReport &InferenceSession::last_run() const { return impl_->last; }

namespace {

const TensorInfo &declared_input(const std::vector<TensorInfo> &inputs, const std::string &name) {
    for (const auto &info : inputs)
        if (info.name == name) return info;
    std::string names;
    for (const auto &info : inputs) names += (names.empty() ? "'" : ", '") + info.name + "'";
    throw InputError("InputError: '" + name + "' is not an input of the model (inputs: " + names + ")");
}

void check_shape(const TensorInfo &info, const Shape &shape) {
    if (!info.has_shape) return;
    bool ok = info.shape.size() == shape.size();
    for (std::size_t i = 0; ok && i < shape.size(); ++i) ok = info.shape[i] < 0 || info.shape[i] == shape[i];
    if (!ok) {
        Shape declared(info.shape.begin(), info.shape.end());
        throw InputError("InputError: input '" + info.name + "' has shape " + shape_str(shape) +
                         "; the model declares " + shape_str(declared) + " (-1: any size)");
    }
}

std::vector<std::string> wanted_outputs(const std::vector<TensorInfo> &outputs, const std::vector<std::string> &names) {
    if (!names.empty()) {
        for (const auto &name : names) {
            bool found = false;
            for (const auto &info : outputs) found = found || info.name == name;
            if (!found) throw InputError("InputError: '" + name + "' is not an output of the model");
        }
        return names;
    }
    std::vector<std::string> all;
    for (const auto &info : outputs) all.push_back(info.name);
    return all;
}

// Every declared input fed; an optional one left out is fed none.
void check_complete(const std::vector<TensorInfo> &inputs, std::unordered_map<std::string, Value> &env) {
    for (const auto &info : inputs) {
        if (env.count(info.name)) continue;
        if (!info.optional) throw InputError("InputError: no feed for input '" + info.name + "'");
        env[info.name] = detail::none_value();
    }
}

std::string declared_kind(const TensorInfo &info) {
    std::string kind = info.kind == ValueKind::sequence ? "a sequence of " + element_type_name(info.type)
                                                        : "a " + element_type_name(info.type) + " tensor";
    return info.optional ? "an optional of " + kind.substr(2) : kind;
}

// A host feed checked against its declaration and moved to the device.
Value feed_value(const TensorInfo &info, const HostValue &host, const Device &device) {
    auto refuse = [&](const std::string &got) {
        throw InputError("InputError: input '" + info.name + "' is " + declared_kind(info) + ", got " + got);
    };
    auto check_tensor = [&](const HostTensor &t) {
        if (t.type != info.type) refuse("a " + element_type_name(t.type) + " tensor");
        check_shape(info, t.shape);
    };
    switch (host.kind) {
    case ValueKind::none:
        if (!info.optional) refuse("none");
        break;
    case ValueKind::sequence:
        if (info.kind != ValueKind::sequence) refuse("a sequence");
        if (host.element_type != info.type) refuse("a sequence of " + element_type_name(host.element_type));
        for (const auto &e : host.elements) check_tensor(e);
        break;
    case ValueKind::tensor:
        if (info.kind != ValueKind::tensor) refuse("a tensor");
        check_tensor(host.tensor);
        break;
    default:
        throw InputError("InputError: input '" + info.name + "': unknown value kind " +
                         std::to_string(static_cast<int>(host.kind)));
    }
    return detail::value_from_host(host, device);
}

// A value run() returns: a tensor (run_values is the way to sequences and optionals).
const Value &tensor_output(const std::string &name, const Value &value) {
    if (!value.is_tensor())
        throw InputError("InputError: output '" + name + "' is a " + std::string(value_kind_name(value.kind)) +
                         ", not a tensor: use run_values");
    return value;
}

}  // namespace

std::vector<HostValue> InferenceSession::run_values(const std::vector<std::string> &output_names,
                                                    const std::vector<std::pair<std::string, HostValue>> &feeds) {
    std::unordered_map<std::string, Value> env;
    for (const auto &[name, host] : feeds) {
        if (impl_->initializer_inputs.count(name)) {
            if (host.kind != ValueKind::tensor)
                throw InputError("InputError: input '" + name + "' (an initializer's default) takes a tensor");
            env[name] = detail::value_from_host(host.tensor, impl_->device);
            continue;
        }
        env[name] = feed_value(declared_input(impl_->inputs, name), host, impl_->device);
    }
    check_complete(impl_->inputs, env);
    const auto wanted = wanted_outputs(impl_->outputs, output_names);
    auto result = impl_->execute(std::move(env), wanted);
    std::vector<HostValue> out;
    for (const auto &name : wanted) out.push_back(detail::host_value_of(result.at(name)));
    return out;
}

std::vector<HostTensor> InferenceSession::run(const std::vector<std::string> &output_names,
                                              const std::vector<std::pair<std::string, HostTensor>> &feeds) {
    std::vector<std::pair<std::string, HostValue>> values;
    values.reserve(feeds.size());
    for (const auto &[name, host] : feeds) values.emplace_back(name, HostValue::of(host));
    const auto wanted = wanted_outputs(impl_->outputs, output_names);
    for (const auto &name : wanted)
        for (const auto &info : impl_->outputs)
            if (info.name == name && (info.kind != ValueKind::tensor || info.optional))
                throw InputError("InputError: output '" + name + "' is " + declared_kind(info) +
                                 ", not a tensor: use run_values");
    std::vector<HostTensor> out;
    for (auto &v : run_values(output_names, values)) {
        if (v.kind != ValueKind::tensor) throw InputError("InputError: an output is not a tensor: use run_values");
        out.push_back(std::move(v.tensor));
    }
    return out;
}

std::vector<Tensor> InferenceSession::run(const std::vector<std::string> &output_names,
                                          const std::vector<std::pair<std::string, Tensor>> &feeds) {
    std::unordered_map<std::string, Value> env;
    for (const auto &[name, tensor] : feeds) {
        ElementType type = detail::element_type_of(tensor.dtype());
        if (!impl_->initializer_inputs.count(name)) {
            const TensorInfo &info = declared_input(impl_->inputs, name);
            if (info.kind != ValueKind::tensor)
                throw InputError("InputError: input '" + name + "' is " + declared_kind(info) + ": use run_values");
            if (tensor.dtype() != compute_dtype(info.type))
                throw InputError("InputError: input '" + name + "' (" + element_type_name(info.type) +
                                 ") takes a tensor of dtype " + dtype_name(compute_dtype(info.type)) + ", got " +
                                 dtype_name(tensor.dtype()));
            check_shape(info, tensor.shape());
            type = info.type;
        }
        env[name] = Value{tensor.to(impl_->device), type};
    }
    check_complete(impl_->inputs, env);
    const auto wanted = wanted_outputs(impl_->outputs, output_names);
    auto result = impl_->execute(std::move(env), wanted);
    std::vector<Tensor> out;
    for (const auto &name : wanted) out.push_back(tensor_output(name, result.at(name)).tensor);
    return out;
}

std::vector<std::pair<std::string, std::vector<int>>> supported_ops() {
    std::vector<std::pair<std::string, std::vector<int>>> out;
    for (auto family : detail::op_families())
        for (const OpRow &row : family)
            out.emplace_back(row.op_type, since_versions(row.op_type, row.min_version, row.max_version));
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace tinyfin::onnx
