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
    return node.domain().empty() && (node.op_type() == "If" || node.op_type() == "Loop");
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
        if (ctx.has_input(static_cast<std::size_t>(k))) env[ctx.node.input(k)] = ctx.input(static_cast<std::size_t>(k));
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
            if (v.tensor.dtype() != compute_dtype(v.type)) v.tensor = v.tensor.to(compute_dtype(v.type));
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
    for (int j = 0; j < carried; ++j) state.push_back(ctx.input(static_cast<std::size_t>(2 + j)));
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
        if (outs[0].tensor.numel() != 1) ctx.invalid("the body's cond must have one element");
        running = outs[0].tensor.to(DType::boolean).reshape({}).item<bool>();
        for (int j = 0; j < carried; ++j) state[static_cast<std::size_t>(j)] = outs[static_cast<std::size_t>(1 + j)];
        for (int k = 0; k < scans; ++k) {
            const Value &v = outs[static_cast<std::size_t>(1 + carried + k)];
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

constexpr OpRow k_rows[] = {
    {"If", 1, 16, if_op},
    {"Loop", 11, 16, loop_op},
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
