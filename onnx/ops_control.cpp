// Control flow: If and Loop run their bodies (subgraph attributes) node by node on the session's
// device. A body reads the enclosing graphs' values by name: the session appends those to the
// node's inputs (implicit_inputs), so they are here as inputs after the ones ONNX defines.
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;
using Env = std::unordered_map<std::string, Value>;

bool has_bodies(const ::onnx::NodeProto &node) {
    return node.domain().empty() && (node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan" ||
                                     node.op_type() == "SequenceMap");
}

// The names g reads that it does not define itself, nested bodies included.
void collect_outer(const ::onnx::GraphProto &g, std::vector<std::string> &out, std::unordered_set<std::string> &seen) {
    std::unordered_set<std::string> local;
    for (const auto &v : g.input()) local.insert(v.name());
    for (const auto &t : g.initializer()) local.insert(t.name());
    for (const auto &node : g.node())
        for (const auto &o : node.output()) local.insert(o);
    auto use = [&](const std::string &name) {
        if (!name.empty() && !local.count(name) && seen.insert(name).second) out.push_back(name);
    };
    for (const auto &node : g.node()) {
        for (const auto &in : node.input()) use(in);
        for (const auto &name : implicit_inputs(node)) use(name);
    }
    for (const auto &v : g.output()) use(v.name());
}

const ::onnx::GraphProto &body(const Ctx &ctx, const char *name) {
    const auto *a = ctx.attribute(name);
    if (a == nullptr || a->type() != ::onnx::AttributeProto::GRAPH) ctx.invalid(std::string("needs the graph ") + name);
    return a->g();
}

// The enclosing graphs' values the node's bodies read: its inputs from `first` on.
Env outer_values(const Ctx &ctx, int first) {
    Env env;
    for (int k = first; k < ctx.node.input_size(); ++k)
        if (ctx.has_input(static_cast<std::size_t>(k))) env[ctx.node.input(k)] = ctx.value(static_cast<std::size_t>(k));
    return env;
}

// The ONNX-defined inputs of a node whose outer values were appended: the count its own
// input list had before (the appended names are its implicit inputs, in order).
int own_inputs(const Ctx &ctx) { return ctx.node.input_size() - static_cast<int>(implicit_inputs(ctx.node).size()); }

// A body made ready to run once per If/Loop node run, not per iteration: its initializers as
// tensors on the device, each node with its implicit inputs appended, its op resolved, its label.
struct PreparedBody {
    struct Node {
        ::onnx::NodeProto proto;
        ResolvedOp op;
        std::string label;
    };
    const ::onnx::GraphProto *graph = nullptr;
    Env constants;
    std::vector<Node> nodes;
};

PreparedBody prepare_body(const Ctx &ctx, const ::onnx::GraphProto &g) {
    PreparedBody b;
    b.graph = &g;
    for (const auto &t : g.initializer()) {
        if (t.data_location() == ::onnx::TensorProto::EXTERNAL) ctx.unsupported("external data inside a body");
        b.constants[t.name()] = tensor_from_proto(t, "", ctx.device, "initializer '" + t.name() + "' of a body");
    }
    for (int i = 0; i < g.node_size(); ++i) {
        ::onnx::NodeProto node = g.node(i);
        std::string label = ctx.label + "/" + (node.name().empty() ? "#" + std::to_string(i) : node.name());
        const ResolvedOp op = resolve_op(node, ctx.opset, label);
        for (const auto &name : implicit_inputs(node)) node.add_input(name);
        b.nodes.push_back({std::move(node), op, std::move(label)});
    }
    return b;
}

// Runs the body's nodes in order (ONNX requires a body's nodes to be sorted) over env; its outputs.
std::vector<Value> run_body(const Ctx &ctx, const PreparedBody &b, Env env) {
    for (const auto &[name, value] : b.constants) env[name] = value;
    for (const PreparedBody::Node &n : b.nodes) {
        const ::onnx::NodeProto &node = n.proto;
        std::vector<const Value *> ins;
        for (const auto &in : node.input()) {
            if (in.empty()) {
                ins.push_back(nullptr);
                continue;
            }
            auto e = env.find(in);
            if (e == env.end())
                ctx.invalid("a body's node '" + n.label + "' reads '" + in + "', which nothing defines");
            ins.push_back(&e->second);
        }
        NodeContext inner{
            node,   n.op.version, ctx.device, ctx.max_tensor_bytes, ins, static_cast<std::size_t>(node.output_size()),
            n.label};
        inner.opset = ctx.opset;
        std::vector<Value> outs = n.op.row->run(inner);
        for (int o = 0; o < node.output_size(); ++o) {
            if (node.output(o).empty()) continue;
            if (static_cast<std::size_t>(o) >= outs.size()) inner.unsupported("output " + std::to_string(o));
            Value &v = outs[static_cast<std::size_t>(o)];
            if (v.is_tensor() && v.tensor.dtype() != compute_dtype(v.type))
                v.tensor = v.tensor.to(compute_dtype(v.type));
            env[node.output(o)] = std::move(v);
        }
    }
    std::vector<Value> result;
    for (const auto &v : b.graph->output()) {
        auto e = env.find(v.name());
        if (e == env.end()) ctx.invalid("the body's output '" + v.name() + "' is produced by no node");
        result.push_back(e->second);
    }
    return result;
}

std::vector<Value> if_op(Ctx &ctx) {
    const Tensor &cond = ctx.tensor(0);
    if (cond.numel() != 1) ctx.invalid("cond must have one element");
    const bool taken = cond.to(DType::boolean).reshape({}).item<bool>();
    std::vector<Value> outs =
        run_body(ctx, prepare_body(ctx, body(ctx, taken ? "then_branch" : "else_branch")), outer_values(ctx, 1));
    if (outs.size() != ctx.n_outputs)
        ctx.invalid("the branch has " + std::to_string(outs.size()) + " outputs, the node " +
                    std::to_string(ctx.n_outputs));
    return outs;
}

// The most iterations one Loop node runs (a model that loops forever is an error, not a hang).
constexpr int64_t k_max_iterations = int64_t{1} << 20;

std::vector<Value> loop_op(Ctx &ctx) {
    const ::onnx::GraphProto &g = body(ctx, "body");
    const int own = own_inputs(ctx);
    const int carried = own - 2;
    if (carried < 0 || g.input_size() != 2 + carried || g.output_size() < 1 + carried)
        ctx.invalid("the body must take (iteration, cond, the " + std::to_string(std::max(carried, 0)) +
                    " loop-carried values) and return cond and those values first");
    const int scans = g.output_size() - 1 - carried;
    int64_t trips = k_max_iterations;
    if (ctx.has_input(0)) {
        const std::vector<int64_t> m = ctx.ints(0);
        if (m.size() != 1) ctx.invalid("M must have one element");
        trips = m[0];
    }
    bool running = true;
    if (ctx.has_input(1)) {
        const Tensor &c = ctx.tensor(1);
        if (c.numel() != 1) ctx.invalid("cond must have one element");
        running = c.to(DType::boolean).reshape({}).item<bool>();
    }
    std::vector<Value> state;
    for (int j = 0; j < carried; ++j) state.push_back(ctx.value(static_cast<std::size_t>(2 + j)));
    std::vector<std::vector<Tensor>> stacked(static_cast<std::size_t>(scans));
    std::vector<ElementType> scan_types(static_cast<std::size_t>(scans), ElementType::undefined);
    const Env outer = outer_values(ctx, own);
    std::optional<PreparedBody> prepared;  // at the first iteration (a Loop that runs none reads no body)
    int64_t i = 0;
    for (; i < trips && running; ++i) {
        if (i == k_max_iterations)
            ctx.unsupported("a Loop of more than " + std::to_string(k_max_iterations) + " iterations");
        Env env = outer;
        env[g.input(0).name()] = Value{scalar(static_cast<double>(i), DType::i64, ctx.device), ElementType::int64};
        env[g.input(1).name()] = Value{scalar(running ? 1 : 0, DType::boolean, ctx.device), ElementType::boolean};
        for (int j = 0; j < carried; ++j) env[g.input(2 + j).name()] = state[static_cast<std::size_t>(j)];
        if (!prepared) prepared = prepare_body(ctx, g);
        std::vector<Value> outs = run_body(ctx, *prepared, std::move(env));
        if (!outs[0].is_tensor() || outs[0].tensor.numel() != 1)
            ctx.invalid("the body's cond must be a tensor of one element");
        running = outs[0].tensor.to(DType::boolean).reshape({}).item<bool>();
        for (int j = 0; j < carried; ++j) state[static_cast<std::size_t>(j)] = outs[static_cast<std::size_t>(1 + j)];
        for (int k = 0; k < scans; ++k) {
            const Value &v = outs[static_cast<std::size_t>(1 + carried + k)];
            if (!v.is_tensor()) ctx.invalid("scan output " + std::to_string(k) + " of the body must be a tensor");
            stacked[static_cast<std::size_t>(k)].push_back(v.tensor);
            scan_types[static_cast<std::size_t>(k)] = v.type;
        }
    }
    std::vector<Value> result = std::move(state);
    for (int k = 0; k < scans; ++k) {
        if (i == 0) {
            const int at = carried + k;
            if (at < ctx.node.output_size() && !ctx.node.output(at).empty())
                ctx.unsupported("scan outputs of a Loop that runs no iteration");
            result.push_back(make(zeros({0}, DType::f32, ctx.device), ElementType::float32));
            continue;
        }
        result.push_back(make(stack(stacked[static_cast<std::size_t>(k)], 0), scan_types[static_cast<std::size_t>(k)]));
    }
    return result;
}

// SequenceMap (17): the body once per position of the input sequence. Each additional input is
// a sequence (its tensor at that position; it must have the same length) or a tensor (passed
// whole each time); the body's outputs at each position are collected into output sequences.
std::vector<Value> sequence_map(Ctx &ctx) {
    const ::onnx::GraphProto &g = body(ctx, "body");
    const int own = own_inputs(ctx);
    if (g.input_size() != own)
        ctx.invalid("the body takes " + std::to_string(g.input_size()) + " inputs; the node has " +
                    std::to_string(own));
    if (static_cast<std::size_t>(g.output_size()) != ctx.n_outputs)
        ctx.invalid("the body has " + std::to_string(g.output_size()) + " outputs, the node " +
                    std::to_string(ctx.n_outputs));
    const Value &first = ctx.value(0);
    if (first.kind != ValueKind::sequence) ctx.invalid("input 0 must be a sequence");
    const std::size_t n = first.elements.size();
    for (int k = 1; k < own; ++k) {
        const Value &v = ctx.value(static_cast<std::size_t>(k));
        if (v.kind == ValueKind::none) ctx.invalid("input " + std::to_string(k) + " is an empty optional");
        if (v.kind == ValueKind::sequence && v.elements.size() != n)
            ctx.invalid("input " + std::to_string(k) + " is a sequence of " + std::to_string(v.elements.size()) +
                        " tensors, input 0 of " + std::to_string(n));
    }
    std::vector<Value> result;
    for (const auto &out : g.output()) {
        const auto &t = out.type();
        const bool declared = t.has_tensor_type() && t.tensor_type().elem_type() != 0;
        result.push_back(sequence_value(
            declared ? static_cast<ElementType>(t.tensor_type().elem_type()) : ElementType::undefined, {}));
    }
    const Env outer = outer_values(ctx, own);
    std::optional<PreparedBody> prepared;
    for (std::size_t i = 0; i < n; ++i) {
        Env env = outer;
        for (int k = 0; k < own; ++k) {
            const Value &v = ctx.value(static_cast<std::size_t>(k));
            env[g.input(k).name()] = v.kind == ValueKind::sequence ? Value{v.elements[i], v.type} : v;
        }
        if (!prepared) prepared = prepare_body(ctx, g);
        std::vector<Value> outs = run_body(ctx, *prepared, std::move(env));
        for (std::size_t j = 0; j < outs.size(); ++j) {
            Value &seq = result[j];
            if (!outs[j].is_tensor()) ctx.invalid("the body's output " + std::to_string(j) + " must be a tensor");
            if (seq.type == ElementType::undefined) seq.type = outs[j].type;
            if (outs[j].type != seq.type)
                ctx.invalid("the body's output " + std::to_string(j) + " is " + element_type_name(outs[j].type) +
                            ", the output sequence " + element_type_name(seq.type));
            seq.elements.push_back(outs[j].tensor);
        }
    }
    return result;
}

// Scan (versions 9-16): the body runs once per slice of the scan inputs along their scan axes
// (each forward or reverse), carrying N state values; its K per-iteration outputs stack along
// the scan output axes (reversed where asked). Version 8 has a leading batch axis on every input
// and output, the scan axis after it, and optional per-batch sequence_lens: each batch entry runs
// on its own, its scan outputs zero past its length.
struct ScanPlan {
    int states = 0, scan_inputs = 0, scan_outputs = 0;
    std::vector<int64_t> in_axes, in_reverse, out_axes, out_reverse;
};

ScanPlan scan_plan(const Ctx &ctx, const ::onnx::GraphProto &g, int data_inputs, bool batched) {
    ScanPlan p;
    p.scan_inputs = static_cast<int>(ctx.attr_int("num_scan_inputs", -1));
    if (p.scan_inputs < 1 || p.scan_inputs > data_inputs)
        ctx.invalid("attribute num_scan_inputs must be in 1.." + std::to_string(data_inputs));
    p.states = data_inputs - p.scan_inputs;
    if (g.input_size() != data_inputs || g.output_size() < p.states)
        ctx.invalid("the body must take the " + std::to_string(p.states) + " state values and " +
                    std::to_string(p.scan_inputs) + " scan slices, and return the states first");
    p.scan_outputs = g.output_size() - p.states;
    auto list = [&](const char *name, int n, int64_t fallback) {
        std::vector<int64_t> v = ctx.attr_ints(name);
        if (v.empty()) v.assign(static_cast<std::size_t>(n), fallback);
        if (static_cast<int>(v.size()) != n)
            ctx.invalid(std::string("attribute ") + name + " must have " + std::to_string(n) + " entries");
        return v;
    };
    p.in_reverse = list(batched ? "directions" : "scan_input_directions", p.scan_inputs, 0);
    p.in_axes = batched ? std::vector<int64_t>(static_cast<std::size_t>(p.scan_inputs), 0)
                        : list("scan_input_axes", p.scan_inputs, 0);
    p.out_axes = batched ? std::vector<int64_t>(static_cast<std::size_t>(p.scan_outputs), 0)
                         : list("scan_output_axes", p.scan_outputs, 0);
    p.out_reverse = batched ? std::vector<int64_t>(static_cast<std::size_t>(p.scan_outputs), 0)
                            : list("scan_output_directions", p.scan_outputs, 0);
    return p;
}

// One scan over states and scan inputs (no batch axis): final states and stacked scan outputs.
std::vector<Value> scan_once(const Ctx &ctx, const PreparedBody &body, const ScanPlan &p, const Env &outer,
                             std::vector<Value> state, std::vector<Value> inputs, int64_t steps_limit) {
    const ::onnx::GraphProto &g = *body.graph;
    int64_t steps = -1;
    for (int k = 0; k < p.scan_inputs; ++k) {
        Value &v = inputs[static_cast<std::size_t>(k)];
        const int64_t axis = normalize_axis(p.in_axes[static_cast<std::size_t>(k)], v.tensor.rank(), ctx);
        if (axis != 0) v.tensor = v.tensor.transpose(0, axis);  // the scan axis first
        if (steps >= 0 && v.tensor.size(0) != steps)
            ctx.invalid("the scan inputs have different lengths along their scan axes");
        steps = v.tensor.size(0);
    }
    if (steps_limit >= 0) steps = std::min(steps, steps_limit);
    if (steps > k_max_iterations) ctx.unsupported("a Scan of more than " + std::to_string(k_max_iterations) + " steps");
    std::vector<std::vector<Tensor>> stacked(static_cast<std::size_t>(p.scan_outputs));
    std::vector<ElementType> out_types(static_cast<std::size_t>(p.scan_outputs), ElementType::float32);
    for (int64_t t = 0; t < steps; ++t) {
        Env env = outer;
        for (int j = 0; j < p.states; ++j) env[g.input(j).name()] = state[static_cast<std::size_t>(j)];
        for (int k = 0; k < p.scan_inputs; ++k) {
            const Value &v = inputs[static_cast<std::size_t>(k)];
            const int64_t at = p.in_reverse[static_cast<std::size_t>(k)] != 0 ? steps - 1 - t : t;
            Shape inner(v.tensor.shape().begin() + 1, v.tensor.shape().end());
            env[g.input(p.states + k).name()] = Value{v.tensor.slice(0, at, at + 1).reshape(inner), v.type};
        }
        std::vector<Value> outs = run_body(ctx, body, std::move(env));
        for (int j = 0; j < p.states; ++j) state[static_cast<std::size_t>(j)] = outs[static_cast<std::size_t>(j)];
        for (int k = 0; k < p.scan_outputs; ++k) {
            const Value &v = outs[static_cast<std::size_t>(p.states + k)];
            if (!v.is_tensor()) ctx.invalid("scan output " + std::to_string(k) + " of the body must be a tensor");
            stacked[static_cast<std::size_t>(k)].push_back(v.tensor);
            out_types[static_cast<std::size_t>(k)] = v.type;
        }
    }
    std::vector<Value> result = std::move(state);
    for (int k = 0; k < p.scan_outputs; ++k) {
        auto &parts = stacked[static_cast<std::size_t>(k)];
        if (parts.empty()) ctx.unsupported("scan outputs of a Scan that runs no step");
        if (p.out_reverse[static_cast<std::size_t>(k)] != 0) std::reverse(parts.begin(), parts.end());
        Tensor y = stack(parts, 0);
        const int64_t axis = normalize_axis(p.out_axes[static_cast<std::size_t>(k)], y.rank(), ctx);
        if (axis != 0) {
            std::vector<int64_t> perm;
            for (int64_t a = 1; a <= axis; ++a) perm.push_back(a);
            perm.push_back(0);
            for (int64_t a = axis + 1; a < y.rank(); ++a) perm.push_back(a);
            y = y.permute(perm);
        }
        result.push_back(make(y.contiguous(), out_types[static_cast<std::size_t>(k)]));
    }
    return result;
}

std::vector<Value> scan_op(Ctx &ctx) {
    const ::onnx::GraphProto &g = body(ctx, "body");
    const bool batched = ctx.version == 8;
    const int own = own_inputs(ctx);
    const int first = batched ? 1 : 0;  // version 8's sequence_lens
    const ScanPlan p = scan_plan(ctx, g, own - first, batched);
    const Env outer = outer_values(ctx, own);
    const PreparedBody prepared = prepare_body(ctx, g);
    std::vector<Value> data;
    for (int i = first; i < own; ++i) data.push_back(ctx.input(static_cast<std::size_t>(i)));
    if (!batched)
        return scan_once(ctx, prepared, p, outer, {data.begin(), data.begin() + p.states},
                         {data.begin() + p.states, data.end()}, -1);
    // Version 8: the batch axis 0 on every input; the scan axis is 1.
    const int64_t batch = data.empty() ? 0 : data[0].tensor.size(0);
    for (const Value &v : data)
        if (v.tensor.rank() < 1 || v.tensor.size(0) != batch) ctx.invalid("every input must share batch axis 0");
    std::vector<int64_t> lens;
    if (ctx.has_input(0)) {
        lens = ctx.ints(0);
        if (static_cast<int64_t>(lens.size()) != batch) ctx.invalid("sequence_lens must have one entry per batch");
    }
    std::vector<std::vector<Tensor>> per_output;
    std::vector<ElementType> types;
    for (int64_t b = 0; b < batch; ++b) {
        std::vector<Value> state, inputs;
        for (int i = 0; i < static_cast<int>(data.size()); ++i) {
            const Tensor &t = data[static_cast<std::size_t>(i)].tensor;
            Shape inner(t.shape().begin() + 1, t.shape().end());
            Value v{t.slice(0, b, b + 1).reshape(inner), data[static_cast<std::size_t>(i)].type};
            (i < p.states ? state : inputs).push_back(std::move(v));
        }
        const int64_t full = inputs[0].tensor.rank() > 0 ? inputs[0].tensor.size(0) : 0;
        int64_t len = full;
        if (!lens.empty()) {
            len = lens[static_cast<std::size_t>(b)];
            if (len < 1 || len > full) ctx.invalid("sequence_lens entries must be in 1.." + std::to_string(full));
            // Each entry scans its own first len elements (reverse inputs from its own last element).
            for (Value &v : inputs) v.tensor = v.tensor.slice(0, 0, len);
        }
        std::vector<Value> outs = scan_once(ctx, prepared, p, outer, std::move(state), std::move(inputs), len);
        per_output.resize(outs.size());
        types.resize(outs.size());
        for (std::size_t o = 0; o < outs.size(); ++o) {
            Tensor t = outs[o].tensor;
            if (static_cast<int>(o) >= p.states && len < full) {  // zeros past the sequence's length
                Shape pad = t.shape();
                pad[0] = full - len;
                t = concat({t, zeros(pad, t.dtype(), ctx.device)}, 0);
            }
            per_output[o].push_back(t);
            types[o] = outs[o].type;
        }
    }
    std::vector<Value> result;
    for (std::size_t o = 0; o < per_output.size(); ++o) result.push_back(make(stack(per_output[o], 0), types[o]));
    return result;
}

constexpr OpRow k_rows[] = {
    {"If", 1, 16, if_op},
    {"Loop", 11, 16, loop_op},
    {"Scan", 8, 16, scan_op},
    {"SequenceMap", 17, 17, sequence_map},
};

}  // namespace

std::vector<std::string> implicit_inputs(const ::onnx::NodeProto &node) {
    std::vector<std::string> out;
    if (!has_bodies(node)) return out;
    std::unordered_set<std::string> seen;
    for (const auto &a : node.attribute()) {
        if (a.type() == ::onnx::AttributeProto::GRAPH) collect_outer(a.g(), out, seen);
        for (const auto &g : a.graphs()) collect_outer(g, out, seen);
    }
    return out;
}

void check_subgraphs(const ::onnx::NodeProto &node, int64_t opset) {
    if (!has_bodies(node)) return;
    for (const auto &a : node.attribute()) {
        if (a.type() != ::onnx::AttributeProto::GRAPH) continue;
        for (int i = 0; i < a.g().node_size(); ++i) {
            const auto &inner = a.g().node(i);
            const std::string label = (node.name().empty() ? node.op_type() : node.name()) + "/" + a.name() + "/" +
                                      (inner.name().empty() ? "#" + std::to_string(i) : inner.name());
            resolve_op(inner, opset, label);
            check_subgraphs(inner, opset);
        }
    }
}

std::span<const OpRow> control_ops() { return k_rows; }

}  // namespace tinyfin::onnx::detail
