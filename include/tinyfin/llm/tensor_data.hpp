// What a model file says about one tensor, and the table of element types both formats share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <tinyfin/tinyfin.hpp>

namespace tinyfin::llm {

// Storage types of tensors in model files. The values of the GGUF ones are ggml's type ids, so a
// GGUF type id indexes this table directly. Block-quantized types carry their block geometry so
// that sizes are checked; the nine tinyfin has as dtypes (Q8_0 .. Q8_K) load as they are, the
// others (Q8_1, Q2_K, Q3_K, integer types) are a ConfigError when a model needs them.
enum class TensorType : uint32_t {
    f32 = 0,
    f16 = 1,
    q4_0 = 2,
    q4_1 = 3,
    q5_0 = 6,
    q5_1 = 7,
    q8_0 = 8,
    q8_1 = 9,
    q2_k = 10,
    q3_k = 11,
    q4_k = 12,
    q5_k = 13,
    q6_k = 14,
    q8_k = 15,
    i8 = 24,
    i16 = 25,
    i32 = 26,
    i64 = 27,
    f64 = 28,
    bf16 = 30,
};

struct TensorTypeInfo {
    TensorType type;
    const char *name;  // GGUF's spelling ("F32", "BF16", "Q4_K")
    uint32_t block_elements;  // elements per block (1 for plain types)
    uint32_t block_bytes;  // bytes per block
    std::optional<DType> dtype;  // the tinyfin dtype it loads as, when it loads without conversion
};

// The row of a type, or nullptr for an id no table row has.
const TensorTypeInfo *tensor_type_info(uint32_t id);
const TensorTypeInfo &tensor_type_info(TensorType type);

// One tensor inside a mapped file: bytes checked to lie inside the file and to hold exactly
// the shape's elements. shape is row-major (numpy's order; GGUF's ne reversed).
struct TensorData {
    std::string name;
    TensorType type = TensorType::f32;
    Shape shape;
    std::span<const std::byte> bytes;
};

// Product of dims, checked: each dim in [0, 2^62), the product below 2^62; FormatError naming
// `what` otherwise.
int64_t checked_element_count(std::span<const int64_t> dims, std::string_view what);
// Bytes of `elements` elements of `type`: elements must be a multiple of the block size.
uint64_t checked_byte_size(TensorType type, int64_t elements, std::string_view what);

}  // namespace tinyfin::llm
