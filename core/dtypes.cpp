// The dtype helpers of the public API, generated from include/tinyfin/dtypes.def.
#include <array>

#include "errors.hpp"
#include "tensor_impl.hpp"

namespace tinyfin {

using namespace detail;

namespace {

struct DTypeRow {
    const char *name;
    int64_t block_length;
    std::size_t block_bytes;
    int ggml_type;
};

constexpr std::array<DTypeRow, TF_DTYPE_COUNT_> dtype_rows = [] {
    std::array<DTypeRow, TF_DTYPE_COUNT_> rows{};
#define TF_DTYPE(id, sym, name, block_length, block_bytes, ggml_type)                                                  \
    rows[id] = DTypeRow{name, block_length, block_bytes, ggml_type};
#include "tinyfin/dtypes.def"
#undef TF_DTYPE
    return rows;
}();

static_assert(static_cast<int>(DType::q8_k) == TF_DTYPE_Q8_K && static_cast<int>(DType::q8_0) == TF_DTYPE_Q8_0,
              "DType mirrors tf_dtype");

const DTypeRow &row_of(DType dtype) {
    const auto index = static_cast<std::size_t>(dtype);
    if (index >= dtype_rows.size()) raise<DTypeError>("invalid dtype value " + std::to_string(static_cast<int>(dtype)));
    return dtype_rows[index];
}

}  // namespace

const char *dtype_name(DType dtype) {
    const auto index = static_cast<std::size_t>(dtype);
    return index < dtype_rows.size() ? dtype_rows[index].name : "invalid-dtype";
}

std::optional<DType> dtype_named(std::string_view name) {
    for (std::size_t i = 0; i < dtype_rows.size(); ++i)
        if (name == dtype_rows[i].name) return static_cast<DType>(i);
    return std::nullopt;
}

std::size_t dtype_size(DType dtype) {
    const DTypeRow &row = row_of(dtype);
    if (row.block_length != 1)
        raise<DTypeError>(std::string(row.name) + " is block-quantized (" + std::to_string(row.block_bytes) +
                          " bytes per " + std::to_string(row.block_length) +
                          " elements) and has no size per element; use dtype_bytes");
    return row.block_bytes;
}

bool is_quantized(DType dtype) { return row_of(dtype).block_length != 1; }

int64_t dtype_block_length(DType dtype) { return row_of(dtype).block_length; }

std::size_t dtype_block_bytes(DType dtype) { return row_of(dtype).block_bytes; }

int ggml_type_of(DType dtype) { return row_of(dtype).ggml_type; }

std::optional<DType> dtype_from_ggml_type(int ggml_type) {
    for (std::size_t i = 0; i < dtype_rows.size(); ++i)
        if (ggml_type >= 0 && dtype_rows[i].ggml_type == ggml_type) return static_cast<DType>(i);
    return std::nullopt;
}

uint64_t dtype_bytes(DType dtype, const Shape &shape) {
    const DTypeRow &row = row_of(dtype);
    const int64_t numel = checked_numel(shape, "dtype_bytes");
    if (row.block_length != 1) {
        if (shape.empty() || shape.back() % row.block_length != 0)
            raise<ShapeError>(std::string(row.name) + " tensor of shape " + shape_str(shape) +
                              ": the last axis must be a multiple of the block length " +
                              std::to_string(row.block_length));
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel / row.block_length), row.block_bytes, &bytes))
        raise<ShapeError>(shape_str(shape) + " of " + row.name + " needs more than 2^64 bytes");
    return bytes;
}

namespace detail {

void check_quantized_layout(DType dtype, const Shape &shape, const Shape &strides, int64_t offset,
                            std::string_view op) {
    const int64_t block = dtype_block_length(dtype);
    auto refuse = [&](const std::string &why) {
        raise<ShapeError>(std::string(op) + ": a " + dtype_name(dtype) + " tensor is addressed in whole blocks of " +
                          std::to_string(block) + " elements, but the view " + shape_str(shape) + " strides " +
                          shape_str(strides) + " offset " + std::to_string(offset) + " " + why +
                          "; dequantize it first to take other views");
    };
    if (shape.empty()) refuse("has rank 0");
    if (shape.back() % block != 0) refuse("has a last axis that is not a multiple of the block length");
    if (shape.back() > 1 && strides.back() != 1) refuse("is not contiguous along its last axis");
    for (std::size_t i = 0; i + 1 < shape.size(); ++i)
        if (shape[i] > 1 && strides[i] % block != 0) refuse("has a stride that is not a multiple of the block length");
    if (offset % block != 0) refuse("starts inside a block");
}

}  // namespace detail

}  // namespace tinyfin
