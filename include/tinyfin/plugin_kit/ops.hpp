// The plugin kit's op table and dtypes, generated from ops.def with the TF_OP X-macro: names,
// kinds, arity, params sizes; dtype names, sizes and classes. No plugin re-lists the ops.
#pragma once

#include <tinyfin/plugin_kit/errors.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace tf_kit TF_KIT_HIDDEN {

// ---- Dtypes -------------------------------------------------------------------------------------------

// "f32", "q4_k", ... from dtypes.def; "dtype?" for an unknown value.
constexpr const char *dtype_name(int32_t dtype) noexcept {
    switch (dtype) {
#define TF_DTYPE(id, sym, name, block_length, block_bytes, ggml_type)                                                  \
    case id:                                                                                                           \
        return name;
#include <tinyfin/dtypes.def>
#undef TF_DTYPE
    default: return "dtype?";
    }
}

// Elements per block (dtypes.def): 1 for a plain dtype, 32 or 256 for a block-quantized one; 0 for
// an unknown dtype.
constexpr int64_t dtype_block_length(int32_t dtype) noexcept {
    switch (dtype) {
#define TF_DTYPE(id, sym, name, block_length, block_bytes, ggml_type)                                                  \
    case id:                                                                                                           \
        return block_length;
#include <tinyfin/dtypes.def>
#undef TF_DTYPE
    default: return 0;
    }
}

// Bytes per block (a plain dtype's element size); 0 for an unknown dtype.
constexpr size_t dtype_block_bytes(int32_t dtype) noexcept {
    switch (dtype) {
#define TF_DTYPE(id, sym, name, block_length, block_bytes, ggml_type)                                                  \
    case id:                                                                                                           \
        return block_bytes;
#include <tinyfin/dtypes.def>
#undef TF_DTYPE
    default: return 0;
    }
}

// Whether the dtype is block-quantized (ABI 1.2): addressed in whole blocks, never per element.
constexpr bool is_quantized(int32_t dtype) noexcept { return dtype_block_length(dtype) > 1; }

// Bytes per element of a plain dtype; 0 for a quantized or unknown one (which no per-element
// kernel may take: the 'A' class admits only dtypes with a size).
constexpr size_t dtype_size(int32_t dtype) noexcept {
    return dtype_block_length(dtype) == 1 ? dtype_block_bytes(dtype) : 0;
}

constexpr bool is_float(int32_t d) noexcept { return d == TF_DTYPE_F32 || d == TF_DTYPE_F16 || d == TF_DTYPE_BF16; }
constexpr bool is_index(int32_t d) noexcept { return d == TF_DTYPE_I32 || d == TF_DTYPE_I64; }
constexpr bool is_numeric(int32_t d) noexcept { return is_float(d) || is_index(d); }

// ---- The op table -------------------------------------------------------------------------------------

// The KIND column of ops.def (its shape and dtype rule; docs/plugin-abi.md, "Op kinds"). A kind
// this header does not know yet reads as OWN, so ops.def can grow kinds before plugins do.
enum class OpKind { UNARY, BINARY, REDUCE, MATMUL, COPY, FILL, COMPARE, WHERE, ARG, OWN };

constexpr OpKind kind_named(std::string_view kind) noexcept {
    if (kind == "UNARY") return OpKind::UNARY;
    if (kind == "BINARY") return OpKind::BINARY;
    if (kind == "REDUCE") return OpKind::REDUCE;
    if (kind == "MATMUL") return OpKind::MATMUL;
    if (kind == "COPY") return OpKind::COPY;
    if (kind == "FILL") return OpKind::FILL;
    if (kind == "COMPARE") return OpKind::COMPARE;
    if (kind == "WHERE") return OpKind::WHERE;
    if (kind == "ARG") return OpKind::ARG;
    return OpKind::OWN;
}

// One row of ops.def.
struct OpRule {
    const char *name;
    OpKind kind;
    uint32_t n_inputs;
    uint32_t n_outputs;
    // sizeof the params struct, 0 for tf_params_none (params is then NULL and ignored).
    size_t params_size;
};

// The op's row; false for an id the table does not have (an op newer than the plugin).
constexpr bool find_op_rule(uint32_t op, OpRule *rule) noexcept {
    switch (op) {
#define TF_OP(id, sym, name, kind, n_in, n_out, params, ...)                                                           \
    case id:                                                                                                           \
        *rule = {name, kind_named(#kind), n_in, n_out, std::is_same_v<params, tf_params_none> ? 0 : sizeof(params)};   \
        return true;
#include <tinyfin/ops.def>
#undef TF_OP
    default: return false;
    }
}

// "add", "conv2d", ... from ops.def; "op?" for an unknown id.
constexpr const char *op_name(uint32_t op) noexcept {
    OpRule rule{};
    return find_op_rule(op, &rule) ? rule.name : "op?";
}

constexpr bool input_optional(uint32_t op, uint32_t index) noexcept;  // below, with the dtypes column

// The descriptor's frame against ops.def: struct size, a known op, arity, non-NULL tensor arrays,
// a params struct at least as large as the op's, absent inputs only where ops.def marks them
// optional. On success *rule is the op's row.
inline tf_status check_call(const tf_op_desc *op, OpRule *rule, tf_error *err) noexcept {
    if (!op || op->struct_size < sizeof(tf_op_desc))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: op descriptor missing or smaller than %zu bytes",
                    plugin_name(), sizeof(tf_op_desc));
    if (!find_op_rule(op->op, rule))
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: unknown op id %u", plugin_name(), op->op);
    const char *name = rule->name;
    if (op->n_inputs != rule->n_inputs || op->n_outputs != rule->n_outputs)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: takes %u inputs and %u outputs, got %u and %u", name,
                    rule->n_inputs, rule->n_outputs, op->n_inputs, op->n_outputs);
    if ((op->n_inputs > 0 && !op->inputs) || !op->outputs)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: tensor array is NULL", name);
    if (rule->params_size > 0 && (!op->params || *static_cast<const uint32_t *>(op->params) < rule->params_size))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: params missing or smaller than %zu bytes", name,
                    rule->params_size);
    for (uint32_t i = 0; i < op->n_inputs; ++i)
        if (TF_TENSOR_ABSENT(&op->inputs[i]) && !input_optional(op->op, i))
            return fail(err, TF_STATUS_INVALID_ARGUMENT,
                        "%s: input %u is absent, but ops.def does not mark it optional", name, i);
    return TF_STATUS_OK;
}

// ---- Dtype classes: the dtypes column of ops.def -------------------------------------------------

// Whether a class letter of the dtypes column admits the dtype: A any plain, N numeric (float or
// index), F float, I index, B bool, Q block-quantized. An unknown letter admits nothing.
constexpr bool class_admits(char letter, int32_t dtype) noexcept {
    switch (letter) {
    case 'A': return dtype_size(dtype) != 0;
    case 'N': return is_numeric(dtype);
    case 'F': return is_float(dtype);
    case 'I': return is_index(dtype);
    case 'B': return dtype == TF_DTYPE_BOOL;
    case 'Q': return is_quantized(dtype);
    default: return false;
    }
}

// The op's dtypes column ("FI>F": a class letter per operand, inputs before the '>', outputs
// after); "" for an id the table does not have.
constexpr const char *op_dtypes(uint32_t op) noexcept {
    switch (op) {
#define TF_OP(id, sym, name, kind, n_in, n_out, params, dtypes)                                                        \
    case id:                                                                                                           \
        return dtypes;
#include <tinyfin/ops.def>
#undef TF_OP
    default: return "";
    }
}

// The class letter of operand `index` (inputs first, then outputs); 0 past the last.
constexpr char operand_class(uint32_t op, uint32_t index) noexcept {
    uint32_t at = 0;
    for (const char *c = op_dtypes(op); *c; ++c) {
        if (*c == '>' || *c == '?') continue;
        if (at++ == index) return *c;
    }
    return 0;
}

// Whether input `index` is optional: a '?' follows its letter in the dtypes column ("FFFF?>F").
constexpr bool input_optional(uint32_t op, uint32_t index) noexcept {
    uint32_t at = 0;
    for (const char *c = op_dtypes(op); *c && *c != '>'; ++c) {
        if (*c == '?') continue;
        if (at++ == index) return c[1] == '?';
    }
    return false;
}

// An optional input the caller left out (TF_TENSOR_ABSENT, ABI 1.1): every member zero, no memory.
constexpr bool is_absent(const tf_tensor_desc &t) noexcept { return TF_TENSOR_ABSENT(&t); }

// Every operand's dtype is in its class of the column: what the core checks before dispatch
// (a DTypeError otherwise), so a plugin's supports() starts from it and adds only its own limits.
// An absent optional input has no dtype and passes. check_call must have passed (arity, arrays,
// absent inputs only where optional).
inline bool dtypes_in_column(const tf_op_desc &op) noexcept {
    for (uint32_t i = 0; i < op.n_inputs; ++i)
        if (!is_absent(op.inputs[i]) && !class_admits(operand_class(op.op, i), op.inputs[i].dtype)) return false;
    for (uint32_t i = 0; i < op.n_outputs; ++i)
        if (!class_admits(operand_class(op.op, op.n_inputs + i), op.outputs[i].dtype)) return false;
    return true;
}

// The dtype the op's kernel works in: the first input's for COMPARE and ARG ops and for cast,
// else the output's.
inline int32_t working_dtype(const tf_op_desc &op, OpKind kind) noexcept {
    if (kind == OpKind::COMPARE || kind == OpKind::ARG || op.op == TF_OP_CAST) return op.inputs[0].dtype;
    return op.outputs[0].dtype;
}

// The kind's dtype rule (docs/plugin-abi.md, "Op kinds"): which operands share a dtype and which
// dtypes are fixed. OWN ops: true (their own rules decide).
inline bool dtypes_consistent(const tf_op_desc &op, OpKind kind) noexcept {
    const tf_tensor_desc *in = op.inputs;
    const int32_t out = op.outputs[0].dtype;
    switch (kind) {
    case OpKind::COMPARE: return in[1].dtype == in[0].dtype && out == TF_DTYPE_BOOL;
    case OpKind::WHERE: return in[0].dtype == TF_DTYPE_BOOL && in[1].dtype == out && in[2].dtype == out;
    case OpKind::ARG: return out == TF_DTYPE_I64;
    case OpKind::OWN: return true;
    default:
        if (op.op == TF_OP_CAST) return true;
        for (uint32_t i = 0; i < op.n_inputs; ++i)
            if (!is_absent(in[i]) && in[i].dtype != out) return false;
        return true;
    }
}

// The dtypes tinyfin defines the op on: the column, and the kind's rule of which operands share
// one dtype. A plugin that has kernels for all of them answers supports() with this alone.
inline bool dtypes_defined(const tf_op_desc &op, OpKind kind) noexcept {
    return dtypes_in_column(op) && dtypes_consistent(op, kind);
}

// The op's params struct (check_call has checked its size).
template <class P>
const P &params_of(const tf_op_desc &op) noexcept {
    return *static_cast<const P *>(op.params);
}

// REDUCE ops' axes: var has tf_params_var, the others tf_params_reduce.
inline uint32_t reduce_axes_mask(const tf_op_desc &op) noexcept {
    if (op.op == TF_OP_VAR) return params_of<tf_params_var>(op).axes_mask;
    return params_of<tf_params_reduce>(op).axes_mask;
}

// adamw_step's constants as every f32 kernel computes with them: each rounded once from the
// params' double, in the params' order (a float[8] of a shader's parameters takes them so).
struct AdamwF32 {
    float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, root_bias_correction2, eps, step_size;
};
inline AdamwF32 adamw_f32(const tf_params_adamw_step &k) noexcept {
    return {
        static_cast<float>(k.decay), static_cast<float>(k.beta1),           static_cast<float>(k.one_minus_beta1),
        static_cast<float>(k.beta2), static_cast<float>(k.one_minus_beta2), static_cast<float>(k.root_bias_correction2),
        static_cast<float>(k.eps),   static_cast<float>(k.step_size)};
}

}  // namespace TF_KIT_HIDDEN
