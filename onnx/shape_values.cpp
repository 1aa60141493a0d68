// Which nodes compute values that depend on the feeds' shapes alone (the Shape -> Gather ->
// Unsqueeze -> Concat -> Reshape arithmetic exporters write for dynamic axes). The session runs
// them once per signature of feed shapes and reuses their outputs (docs/onnx.md, "What run
// does").
//
// A value is known from the signature when it is a constant no feed overrides, the output of
// Shape or Size of a value whose shape is known from the signature, or an output of a
// deterministic node whose inputs are all known from the signature. A value's shape is known
// from the signature when it is a feed (or an overridable initializer), a value known from the
// signature, or an output of an op whose output shapes follow from its inputs' shapes and
// attributes, given that its shape arguments (Reshape's shape, Slice's starts...) are known
// values. Ops outside those lists (NonZero, TopK with a computed k...) end the chain.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

// Ops whose output shapes follow from their inputs' shapes and attributes alone (index values,
// data values and scalars such as Trilu's k or Clip's bounds do not change a shape).
bool shape_from_shapes(const std::string &op) {
    static const char *const ops[] = {"Abs",
                                      "Acos",
                                      "Acosh",
                                      "Add",
                                      "And",
                                      "ArgMax",
                                      "ArgMin",
                                      "Asin",
                                      "Asinh",
                                      "Atan",
                                      "Atanh",
                                      "AveragePool",
                                      "BatchNormalization",
                                      "BitShift",
                                      "Cast",
                                      "CastLike",
                                      "Ceil",
                                      "Celu",
                                      "Clip",
                                      "Concat",
                                      "Conv",
                                      "ConvTranspose",
                                      "Cos",
                                      "Cosh",
                                      "CumSum",
                                      "DepthToSpace",
                                      "Div",
                                      "Dropout",
                                      "Einsum",
                                      "Elu",
                                      "Equal",
                                      "Erf",
                                      "Exp",
                                      "Flatten",
                                      "Floor",
                                      "FusedAttention",
                                      "FusedConvActivation",
                                      "FusedGelu",
                                      "FusedLayerNorm",
                                      "FusedMatMulBias",
                                      "FusedRmsNorm",
                                      "Gather",
                                      "GatherElements",
                                      "GatherND",
                                      "Gemm",
                                      "GlobalAveragePool",
                                      "GlobalMaxPool",
                                      "Greater",
                                      "GreaterOrEqual",
                                      "HardSigmoid",
                                      "HardSwish",
                                      "Hardmax",
                                      "Identity",
                                      "InstanceNormalization",
                                      "IsInf",
                                      "IsNaN",
                                      "LRN",
                                      "LayerNormalization",
                                      "LeakyRelu",
                                      "Less",
                                      "LessOrEqual",
                                      "Log",
                                      "LogSoftmax",
                                      "MatMul",
                                      "Max",
                                      "MaxPool",
                                      "Mean",
                                      "MeanVarianceNormalization",
                                      "Min",
                                      "Mish",
                                      "Mod",
                                      "Mul",
                                      "Neg",
                                      "Not",
                                      "Or",
                                      "PRelu",
                                      "Pow",
                                      "Reciprocal",
                                      "Relu",
                                      "Round",
                                      "Selu",
                                      "Shrink",
                                      "Sigmoid",
                                      "Sign",
                                      "Sin",
                                      "Sinh",
                                      "Softmax",
                                      "Softplus",
                                      "Softsign",
                                      "SpaceToDepth",
                                      "Sqrt",
                                      "Sub",
                                      "Sum",
                                      "Tan",
                                      "Tanh",
                                      "ThresholdedRelu",
                                      "Transpose",
                                      "Trilu",
                                      "Where",
                                      "Xor"};
    return std::any_of(std::begin(ops), std::end(ops), [&](const char *o) { return op == o; });
}

// Ops whose output shapes follow from their inputs' shapes and the values of these inputs.
const std::map<std::string, std::vector<int>> &shape_arguments() {
    static const std::map<std::string, std::vector<int>> args = {
        {"Reshape", {1}},      {"Expand", {1}},          {"Slice", {1, 2, 3, 4}},
        {"Squeeze", {1}},      {"Unsqueeze", {1}},       {"Split", {1}},
        {"Tile", {1}},         {"Pad", {1, 3}},          {"ReduceSum", {1}},
        {"ReduceMean", {1}},   {"ReduceMax", {1}},       {"ReduceMin", {1}},
        {"ReduceProd", {1}},   {"ReduceL1", {1}},        {"ReduceL2", {1}},
        {"ReduceLogSum", {1}}, {"ReduceLogSumExp", {1}}, {"ReduceSumSquare", {1}},
        {"Resize", {1, 2, 3}}, {"Upsample", {1}},        {"OneHot", {1}},
        {"TopK", {1}}};
    return args;
}

}  // namespace

bool is_random_op(const std::string &op) {
    return op.rfind("Random", 0) == 0 || op == "Multinomial" || op == "Bernoulli" || op == "Dropout";
}

std::vector<bool> signature_steps(const std::vector<Step> &steps,
                                  const std::unordered_map<std::string, Value> &constants,
                                  const std::unordered_set<std::string> &overridable) {
    std::vector<bool> flagged(steps.size(), false);
    if (const char *env = std::getenv("TINYFIN_ONNX_FUSE");
        env != nullptr && std::strcmp(env, "1") != 0 &&
        ("," + std::string(env) + ",").find(",shape_values,") == std::string::npos)
        return flagged;
    std::unordered_set<std::string> known_value, known_shape;
    for (const auto &[name, v] : constants)
        if (!overridable.count(name)) known_value.insert(name);
    auto value_known = [&](const std::string &name) { return name.empty() || known_value.count(name) > 0; };
    auto shape_known = [&](const std::string &name) {
        // Feeds and overridable initializers: every value no node produces and no constant holds.
        if (name.empty() || known_value.count(name) || known_shape.count(name)) return true;
        return false;
    };
    // Feeds: values no step produces.
    std::unordered_set<std::string> produced;
    for (const Step &s : steps)
        for (const auto &o : s.node.output()) produced.insert(o);
    for (const Step &s : steps)
        for (const auto &in : s.node.input())
            if (!in.empty() && !produced.count(in) && !known_value.count(in)) known_shape.insert(in);

    for (std::size_t i = 0; i < steps.size(); ++i) {
        const auto &node = steps[i].node;
        const std::string &op = node.op_type();
        bool values = !is_random_op(op) && node.input_size() > 0;
        for (const auto &in : node.input()) values = values && value_known(in);
        if ((op == "Shape" || op == "Size") && node.input_size() == 1) values = shape_known(node.input(0));
        if (values) {
            flagged[i] = true;
            for (const auto &o : node.output())
                if (!o.empty()) known_value.insert(o);
            continue;
        }
        bool shapes = shape_from_shapes(op);
        std::vector<int> args;
        if (auto a = shape_arguments().find(op); a != shape_arguments().end()) {
            shapes = true;
            args = a->second;
        }
        for (int k = 0; shapes && k < node.input_size(); ++k) {
            const bool argument = std::find(args.begin(), args.end(), k) != args.end();
            shapes = argument ? value_known(node.input(k)) : shape_known(node.input(k));
        }
        if (shapes)
            for (const auto &o : node.output())
                if (!o.empty()) known_shape.insert(o);
    }
    return flagged;
}

}  // namespace tinyfin::onnx::detail
