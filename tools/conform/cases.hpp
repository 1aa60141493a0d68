// The cases tinyfin-conform runs: one op call each, with the inputs' values, layouts and params.
// Cases are generated from ops.def: the op's KIND picks the shape family and the params column
// picks the parameter sweep; only the OWN ops have generators of their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tinyfin/plugin.h"
#include "tinyfin/plugin_kit/ops.hpp"
#include "tinyfin/plugin_kit/params.hpp"

namespace conform {

using Shape = std::vector<int64_t>;

// The op's shape/dtype rule, the KIND column of ops.def.
enum class Kind { UNARY, BINARY, REDUCE, MATMUL, COPY, FILL, COMPARE, WHERE, ARG, OWN };

struct OpRow {
    tf_op op;
    const char *name;
    Kind kind;
    int n_inputs;
    int n_outputs;
    // The dtypes column ("FI>F"): the dtype class of each operand, inputs then outputs.
    const char *dtypes;
};

// Every op of ops.def, in id order.
const std::vector<OpRow> &op_rows();
const OpRow &op_row(tf_op op);
const char *kind_name(Kind kind);
// Dtype names, sizes and the dtypes column's classes are the plugin kit's (tinyfin/plugin_kit/ops.hpp):
// conform checks cases by the same rules every plugin uses.
using tf_kit::class_admits;
using tf_kit::dtype_name;
using tf_kit::dtype_size;
using tf_kit::is_float;
using tf_kit::is_quantized;
using tf_kit::operand_class;
// All plain tf_dtype values, f32 first.
const std::vector<int32_t> &all_dtypes();
// The block-quantized dtypes (dtypes.def), q8_0 first; their elements are counted like any
// other's, their bytes in whole blocks of block_bytes (0 for a plain dtype).
const std::vector<int32_t> &quant_dtypes();
std::size_t block_bytes(int32_t dtype);
// The column as docs/ops.md shows it: "float, index -> float".
std::string dtypes_text(const OpRow &row);

// Which values fill an input.
enum class Domain {
    uniform,  // [-2, 2)
    positive,  // [0.1, 4): log, sqrt, rsqrt, pow's base
    exponent,  // [-2, 2) for floats, [0, 4) for integers: pow's exponent
    nonzero,  // |x| in [0.5, 3), random sign: divisors
    ties,  // small integers: comparisons and arg ops see equal values
    specials,  // NaN, +-inf, +-0 and ordinary values mixed
    wide,  // [-60, 60): casts to integers
    boolean,  // 0 or 1
    index,  // integers in [0, limit)
    labels,  // integers in [0, limit), some equal to ignore (cross-entropy)
    unit,  // [-1, 1): asin, acos, atanh
    above_one,  // [1, 6): acosh
    blocks,  // by groups of 32 and 256 elements: zeros, tiny, large, one-signed, outlier, constant (quantize)
};

// A tensor in memory: logical shape and element strides over a storage of storage_elems
// elements, element [0,...,0] at element offset. Gaps in the storage hold poison values.
struct TensorSpec {
    int32_t dtype = TF_DTYPE_F32;
    Shape shape;
    Shape strides;
    int64_t offset = 0;
    int64_t storage_elems = 0;
    Domain domain = Domain::uniform;
    int64_t limit = 0;  // index / labels: values in [0, limit)
    int64_t ignore = 0;  // labels: the ignore_index value sprinkled in
    std::string layout = "contiguous";
    // An in-out output (the optimizer ops' param and state): the op reads it, so it starts
    // with values drawn from `domain` like an input instead of sentinels.
    bool in_out = false;
    // An optional input left out (TF_TENSOR_ABSENT): plugins of ABI 1.1 and later get an absent
    // descriptor, older ones this spec (zeros of the operand's shape), as the core does.
    bool absent = false;

    int64_t numel() const;
};

// The params struct the op's params column names, whichever it is: the kit's storage, sized
// from ops.def (tinyfin/plugin_kit/params.hpp).
using Params = tf_kit::AnyParams;
using tf_kit::sized;

// Hidden, as the kit's AnyParams it holds (the kit is hidden in every binary).
struct __attribute__((visibility("hidden"))) Case {
    tf_op op;
    std::string op_name;
    // Unique within the op: "f32 [3,5] x [1,5] bcast".
    std::string name;
    std::vector<TensorSpec> inputs, outputs;
    Params params;
    bool has_params = false;
    uint64_t seed = 0;

    // op_name + " " + name: what --case matches.
    std::string id() const { return op_name + " " + name; }
    int64_t elements() const;
    int32_t dtype() const;  // the dtype the case is listed under (first float-like operand)
    // Every operand's dtype is in its class of the op's dtypes column: a case the op takes.
    // A case outside the column is one every plugin must refuse (supports() = 0).
    bool in_column() const;
};

// Layout constructors: a spec of dtype and logical shape laid out as named.
TensorSpec contiguous(const Shape &shape, int32_t dtype, Domain domain = Domain::uniform);
// Last two axes stored swapped (rank >= 2).
TensorSpec transposed(const Shape &shape, int32_t dtype, Domain domain = Domain::uniform);
// Axes stored in reverse order (rank >= 2).
TensorSpec permuted(const Shape &shape, int32_t dtype, Domain domain = Domain::uniform);
// Every other element of a wider last axis, starting one element in (rank >= 1).
TensorSpec sliced(const Shape &shape, int32_t dtype, Domain domain = Domain::uniform);
// `from` (aligned right) broadcast to `shape` with stride 0 on the expanded axes.
TensorSpec expanded(const Shape &from, const Shape &shape, int32_t dtype, Domain domain = Domain::uniform);
// An optional input left out, standing for zeros of `shape` (one zero broadcast, strides 0).
TensorSpec absent_input(const Shape &shape, int32_t dtype);
// NCHW logical shape over NHWC storage (rank 4).
TensorSpec channels_last(const Shape &shape, int32_t dtype, Domain domain = Domain::uniform);

// Every case of every op, in ops.def order.
std::vector<Case> all_cases();

std::string shape_text(const Shape &shape);

}  // namespace conform
