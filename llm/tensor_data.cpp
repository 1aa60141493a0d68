// The tensor-type table and checked size arithmetic (tensor_data.hpp).
#include <array>
#include <string>

#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/tensor_data.hpp>

namespace tinyfin::llm {

namespace {

// Block geometry of ggml's types (ggml.c's type_traits); dtype only where tinyfin has one (the
// block-quantized ones are bit for bit GGUF's layout: include/tinyfin/dtypes.def).
constexpr TensorTypeInfo kTypes[] = {
    {TensorType::f32, "F32", 1, 4, DType::f32},        {TensorType::f16, "F16", 1, 2, DType::f16},
    {TensorType::q4_0, "Q4_0", 32, 18, DType::q4_0},   {TensorType::q4_1, "Q4_1", 32, 20, DType::q4_1},
    {TensorType::q5_0, "Q5_0", 32, 22, DType::q5_0},   {TensorType::q5_1, "Q5_1", 32, 24, DType::q5_1},
    {TensorType::q8_0, "Q8_0", 32, 34, DType::q8_0},   {TensorType::q8_1, "Q8_1", 32, 36, std::nullopt},
    {TensorType::q2_k, "Q2_K", 256, 84, std::nullopt}, {TensorType::q3_k, "Q3_K", 256, 110, std::nullopt},
    {TensorType::q4_k, "Q4_K", 256, 144, DType::q4_k}, {TensorType::q5_k, "Q5_K", 256, 176, DType::q5_k},
    {TensorType::q6_k, "Q6_K", 256, 210, DType::q6_k}, {TensorType::q8_k, "Q8_K", 256, 292, DType::q8_k},
    {TensorType::i8, "I8", 1, 1, std::nullopt},        {TensorType::i16, "I16", 1, 2, std::nullopt},
    {TensorType::i32, "I32", 1, 4, DType::i32},        {TensorType::i64, "I64", 1, 8, DType::i64},
    {TensorType::f64, "F64", 1, 8, std::nullopt},      {TensorType::bf16, "BF16", 1, 2, DType::bf16},
};

constexpr int64_t kSizeLimit = int64_t{1} << 62;

}  // namespace

const TensorTypeInfo *tensor_type_info(uint32_t id) {
    for (const auto &row : kTypes)
        if (static_cast<uint32_t>(row.type) == id) return &row;
    return nullptr;
}

const TensorTypeInfo &tensor_type_info(TensorType type) { return *tensor_type_info(static_cast<uint32_t>(type)); }

int64_t checked_element_count(std::span<const int64_t> dims, std::string_view what) {
    int64_t n = 1;
    for (int64_t d : dims) {
        if (d < 0 || d >= kSizeLimit)
            throw FormatError("FormatError: " + std::string(what) + ": dimension " + std::to_string(d) +
                              " is out of range");
        if (d != 0 && n > kSizeLimit / d)
            throw FormatError("FormatError: " + std::string(what) + ": the product of its dimensions overflows");
        n *= d;
    }
    return n;
}

uint64_t checked_byte_size(TensorType type, int64_t elements, std::string_view what) {
    const TensorTypeInfo &info = tensor_type_info(type);
    if (elements % info.block_elements != 0)
        throw FormatError("FormatError: " + std::string(what) + ": " + std::to_string(elements) + " elements of " +
                          info.name + " are not a whole number of " + std::to_string(info.block_elements) +
                          "-element blocks");
    const uint64_t blocks = static_cast<uint64_t>(elements) / info.block_elements;
    if (blocks > static_cast<uint64_t>(kSizeLimit) / info.block_bytes)
        throw FormatError("FormatError: " + std::string(what) + ": byte size overflows");
    return blocks * info.block_bytes;
}

}  // namespace tinyfin::llm
