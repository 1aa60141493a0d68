// Per-op facts generated from ops.def: name, kind, arity, params size.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tinyfin/plugin.h"

namespace tinyfin::detail {

// The shape/dtype rule an op follows (the KIND column of ops.def).
enum class OpKind { UNARY, BINARY, REDUCE, MATMUL, COPY, FILL, COMPARE, WHERE, ARG, OWN };

// Most operands an op has (inputs and outputs together).
inline constexpr int max_op_operands = 8;

struct OpInfo {
    const char *name;
    OpKind kind;
    int n_inputs;
    int n_outputs;
    // sizeof the params struct, 0 for tf_params_none (params pointer is NULL).
    std::size_t params_size;
    // The dtypes column: per operand (inputs, then outputs), bit d set when tf_dtype d is allowed.
    std::array<uint16_t, max_op_operands> dtypes;
    // The column's text, for messages ("FI>F").
    const char *dtype_classes;
    // Bit i set: input i is optional ('?' after its letter), so the op layer may leave it out.
    uint32_t optional_inputs;
};

// Bits of the tf_dtypes a class letter of the dtypes column allows; 0 for an unknown letter.
constexpr uint16_t dtype_class_mask(char letter) {
    static_assert(TF_DTYPE_COUNT_ <= 16, "dtype masks are 16 bits wide");
    constexpr uint16_t f = 1u << TF_DTYPE_F32 | 1u << TF_DTYPE_F16 | 1u << TF_DTYPE_BF16;
    constexpr uint16_t i = 1u << TF_DTYPE_I32 | 1u << TF_DTYPE_I64;
    constexpr uint16_t q = [] {
        uint16_t bits = 0;
#define TF_DTYPE(id, sym, name, block_length, block_bytes, ggml_type)                                                  \
    if (block_length > 1) bits |= 1u << id;
#include "tinyfin/dtypes.def"
#undef TF_DTYPE
        return bits;
    }();
    switch (letter) {
    case 'A': return f | i | 1u << TF_DTYPE_BOOL;
    case 'N': return f | i;
    case 'F': return f;
    case 'I': return i;
    case 'B': return 1u << TF_DTYPE_BOOL;
    case 'Q': return q;
    default: return 0;
    }
}

// The masks of a dtypes column; a malformed column (an unknown letter, no '>', a count that
// differs from the arity) leaves a zero mask that op_table_dense below rejects at compile time.
constexpr std::array<uint16_t, max_op_operands> parse_dtype_classes(const char *text, int n_in, int n_out) {
    std::array<uint16_t, max_op_operands> masks{};
    int operand = 0, inputs = -1;
    for (const char *c = text; *c; ++c) {
        if (*c == '>') {
            inputs = operand;
            continue;
        }
        // An optional input's marker; parse_optional_inputs reads it (a misplaced one fails there).
        if (*c == '?') continue;
        if (operand == max_op_operands) return {};
        masks[static_cast<std::size_t>(operand++)] = dtype_class_mask(*c);
    }
    if (inputs != n_in || operand != n_in + n_out) return {};
    return masks;
}

// The inputs a dtypes column marks optional ('?' right after an input's letter), as bits; a '?'
// anywhere else (first, doubled, after the '>') gives the invalid value ~0u that
// op_optional_marks_valid below rejects at compile time.
constexpr uint32_t parse_optional_inputs(const char *text) {
    uint32_t bits = 0;
    int operand = 0;
    bool outputs = false, after_letter = false;
    for (const char *c = text; *c; ++c) {
        if (*c == '>') {
            outputs = true;
            after_letter = false;
        } else if (*c == '?') {
            if (outputs || !after_letter) return ~0u;
            bits |= 1u << (operand - 1);
            after_letter = false;
        } else {
            ++operand;
            after_letter = true;
        }
    }
    return bits;
}

template <typename P>
constexpr std::size_t params_size_of() {
    if constexpr (std::is_same_v<P, tf_params_none>)
        return 0;
    else
        return sizeof(P);
}

inline constexpr std::array<OpInfo, TF_OP_COUNT_> op_table = [] {
    std::array<OpInfo, TF_OP_COUNT_> table{};
#define TF_OP(id, sym, name, kind, n_in, n_out, params, dtypes)                                                        \
    table[id] = OpInfo{name,                                                                                           \
                       OpKind::kind,                                                                                   \
                       n_in,                                                                                           \
                       n_out,                                                                                          \
                       params_size_of<params>(),                                                                       \
                       parse_dtype_classes(dtypes, n_in, n_out),                                                       \
                       dtypes,                                                                                         \
                       parse_optional_inputs(dtypes)};
#include "tinyfin/ops.def"
#undef TF_OP
    return table;
}();

// Ids must be dense 0..N-1 with the highest last: a gap or a duplicate leaves an empty slot.
inline constexpr bool op_table_dense = [] {
    for (const OpInfo &info : op_table)
        if (info.name == nullptr) return false;
    return true;
}();
static_assert(op_table_dense, "ops.def: ids must be dense, unique and the last entry the highest");

// Every operand has a class: the dtypes column names each of them with a known letter.
inline constexpr bool op_dtypes_complete = [] {
    for (const OpInfo &info : op_table)
        for (int i = 0; i < info.n_inputs + info.n_outputs; ++i)
            if (info.dtypes[static_cast<std::size_t>(i)] == 0) return false;
    return true;
}();
static_assert(op_dtypes_complete, "ops.def: a dtypes column has an unknown letter or the wrong operand count");

inline constexpr bool op_optional_marks_valid = [] {
    for (const OpInfo &info : op_table)
        if (info.optional_inputs == ~0u) return false;
    return true;
}();
static_assert(op_optional_marks_valid, "ops.def: a '?' in a dtypes column must follow an input's letter");

inline const OpInfo &op_info(tf_op op) { return op_table[static_cast<std::size_t>(op)]; }

}  // namespace tinyfin::detail
