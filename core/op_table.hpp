// Per-op facts generated from ops.def: name, kind, arity, params size.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>

#include "tinyfin/plugin.h"

namespace tinyfin::detail {

// The shape/dtype rule an op follows (the KIND column of ops.def).
enum class OpKind { UNARY, BINARY, REDUCE, MATMUL, COPY, FILL, COMPARE, WHERE, ARG, OWN };

struct OpInfo {
    const char *name;
    OpKind kind;
    int n_inputs;
    int n_outputs;
    // sizeof the params struct, 0 for tf_params_none (params pointer is NULL).
    std::size_t params_size;
};

template <typename P> constexpr std::size_t params_size_of() {
    if constexpr (std::is_same_v<P, tf_params_none>) return 0;
    else return sizeof(P);
}

inline constexpr std::array<OpInfo, TF_OP_COUNT_> op_table = [] {
    std::array<OpInfo, TF_OP_COUNT_> table{};
#define TF_OP(id, sym, name, kind, n_in, n_out, params) \
    table[id] = OpInfo{name, OpKind::kind, n_in, n_out, params_size_of<params>()};
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

inline const OpInfo &op_info(tf_op op) { return op_table[static_cast<std::size_t>(op)]; }

} // namespace tinyfin::detail
