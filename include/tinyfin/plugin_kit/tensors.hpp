// The plugin kit's tensor descriptor helpers: the one extent bound every plugin applies, the
// per-tensor check (dtype, rank, sizes, strides, overflow-checked extent), shapes, density and
// contiguity, and shape text for messages.
#pragma once

#include <tinyfin/plugin_kit/ops.hpp>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <utility>

namespace tf_kit TF_KIT_HIDDEN {

// The largest byte offset of a tensor's last element any plugin accepts: kernels walk tensors
// with int64_t byte and element arithmetic. One bound for every plugin (a device may refuse
// less for its own limits, such as a binding's size, but never more).
constexpr uint64_t max_extent = static_cast<uint64_t>(INT64_MAX);

// What a tensor spans: its element count and the byte offset (from buffer byte 0, the
// descriptor's offset included) of its last element.
struct Extent {
    int64_t count = 0;
    uint64_t last_byte = 0;
    // The sizes' product, or the byte reach, does not fit (or exceeds max_extent).
    bool overflow = false;
    // Some size is 0: nothing is addressed whatever the strides.
    bool empty = false;
};

// The extent of t (dtype, rank, sizes and strides already known valid), overflow-checked. The
// product of the non-zero sizes must fit int64_t even for an empty tensor: kernels multiply sizes
// in axis order, and must not overflow before reaching the zero.
inline Extent extent_of(const tf_tensor_desc &t) noexcept {
    Extent e;
    // A quantized tensor's reach counts elements, then whole blocks (check_tensor has checked
    // that it addresses whole blocks).
    const bool blocks = is_quantized(t.dtype);
    const auto size = static_cast<uint64_t>(blocks ? 1 : dtype_size(t.dtype));
    int64_t count = 1;
    uint64_t last = t.offset;
    bool sizes_overflow = false, reach_overflow = false;
    for (int i = 0; i < t.rank; ++i) {
        if (t.shape[i] == 0) {
            e.empty = true;
            continue;
        }
        uint64_t reach = 0;
        sizes_overflow |= __builtin_mul_overflow(t.shape[i], count, &count);
        reach_overflow |=
            __builtin_mul_overflow(static_cast<uint64_t>(t.shape[i] - 1), static_cast<uint64_t>(t.strides[i]), &reach);
        reach_overflow |= __builtin_mul_overflow(reach, size, &reach);
        reach_overflow |= __builtin_add_overflow(last, reach, &last);
    }
    e.count = e.empty ? 0 : count;
    if (blocks) {
        // last - offset is the last element's index; its block ends block_bytes - 1 further on.
        const uint64_t block = static_cast<uint64_t>(dtype_block_length(t.dtype));
        const uint64_t last_block = (last - t.offset) / block;
        uint64_t span = 0;
        reach_overflow |= __builtin_mul_overflow(last_block + 1, dtype_block_bytes(t.dtype), &span);
        reach_overflow |= __builtin_add_overflow(t.offset, span - 1, &last);
    }
    e.last_byte = last;
    // An empty tensor addresses nothing: only its sizes' product matters.
    e.overflow = sizes_overflow || (!e.empty && (reach_overflow || last > max_extent));
    return e;
}

// A quantized tensor's layout addresses whole blocks (tf_tensor_desc in plugin.h): rank >= 1, the
// last axis a multiple of the block length with stride 1, other strides multiples of it, the byte
// offset a multiple of the block's bytes.
inline bool whole_blocks(const tf_tensor_desc &t) noexcept {
    const int64_t block = dtype_block_length(t.dtype);
    if (t.rank < 1 || t.shape[t.rank - 1] % block != 0) return false;
    if (t.shape[t.rank - 1] > 1 && t.strides[t.rank - 1] != 1) return false;
    for (int i = 0; i + 1 < t.rank; ++i)
        if (t.shape[i] > 1 && t.strides[i] % block != 0) return false;
    return t.offset % dtype_block_bytes(t.dtype) == 0;
}

// One tensor on its own: a struct as large as this header's, a known dtype, a rank within
// TF_MAX_RANK, sizes and strides >= 0, an extent within max_extent; with need_data, a host
// address whenever it has elements. role and index name it in the message ("input 1").
inline tf_status check_tensor(const char *op, const char *role, uint32_t index, const tf_tensor_desc &t, bool need_data,
                              tf_error *err) noexcept {
    if (t.struct_size < sizeof(tf_tensor_desc))
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u descriptor has struct_size %u, need %zu", op, role,
                    index, t.struct_size, sizeof(tf_tensor_desc));
    if (dtype_block_length(t.dtype) == 0)
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: %s %u has unknown dtype %d", op, role, index, t.dtype);
    if (is_quantized(t.dtype) && !whole_blocks(t))
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "%s: %s %u is %s but does not address whole blocks (last axis a multiple of %lld with "
                    "stride 1, other strides and the offset at block boundaries)",
                    op, role, index, dtype_name(t.dtype), static_cast<long long>(dtype_block_length(t.dtype)));
    if (t.rank < 0 || t.rank > TF_MAX_RANK)
        return fail(err, TF_STATUS_UNSUPPORTED, "%s: %s %u has rank %d (max %d)", op, role, index, t.rank, TF_MAX_RANK);
    for (int i = 0; i < t.rank; ++i)
        if (t.shape[i] < 0 || t.strides[i] < 0)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u axis %d has size %lld and stride %lld", op, role,
                        index, i, static_cast<long long>(t.shape[i]), static_cast<long long>(t.strides[i]));
    const Extent e = extent_of(t);
    if (e.overflow)
        return fail(
            err, TF_STATUS_INVALID_ARGUMENT,
            "%s: %s %u is too large to address (its last byte lies beyond %llu or its sizes' product overflows)", op,
            role, index, static_cast<unsigned long long>(max_extent));
    if (need_data && e.count > 0 && !t.data)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u has %lld elements but no host address", op, role, index,
                    static_cast<long long>(e.count));
    return TF_STATUS_OK;
}

// Every input (but absent optional ones) and the outputs through check_tensor.
inline tf_status check_tensors(const char *op_name, const tf_op_desc &op, bool need_data, tf_error *err) noexcept {
    for (uint32_t i = 0; i < op.n_inputs; ++i) {
        // An absent optional input has no tensor to check (check_call refuses one elsewhere).
        if (is_absent(op.inputs[i]) && input_optional(op.op, i)) continue;
        if (tf_status s = check_tensor(op_name, "input", i, op.inputs[i], need_data, err); s != TF_STATUS_OK) return s;
    }
    for (uint32_t i = 0; i < op.n_outputs; ++i)
        if (tf_status s = check_tensor(op_name, "output", i, op.outputs[i], need_data, err); s != TF_STATUS_OK)
            return s;
    return TF_STATUS_OK;
}

// Number of elements; 1 for rank 0. Only for tensors check_tensor accepted.
inline int64_t numel(const tf_tensor_desc &t) noexcept {
    int64_t n = 1;
    for (int i = 0; i < t.rank; ++i) n *= t.shape[i];
    return n;
}

inline bool same_shape(const tf_tensor_desc &a, const tf_tensor_desc &b) noexcept {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)
        if (a.shape[i] != b.shape[i]) return false;
    return true;
}

inline bool shape_is(const tf_tensor_desc &t, std::initializer_list<int64_t> shape) noexcept {
    if (t.rank != static_cast<int32_t>(shape.size())) return false;
    int i = 0;
    for (int64_t s : shape)
        if (t.shape[i++] != s) return false;
    return true;
}

// Row-major with no gaps (size-1 axes may have any stride).
inline bool is_contiguous(const tf_tensor_desc &t) noexcept {
    int64_t expected = 1;
    for (int i = t.rank - 1; i >= 0; --i) {
        if (t.shape[i] != 1 && t.strides[i] != expected) return false;
        expected *= t.shape[i];
    }
    return true;
}

// Every element of the view has an address of its own (no broadcast or overlapping axes): an
// output must, or parallel writers would race. Only for tensors check_tensor accepted.
inline bool is_dense(const tf_tensor_desc &t) noexcept {
    int order[TF_MAX_RANK];
    int n = 0;
    for (int i = 0; i < t.rank; ++i) {
        if (t.shape[i] == 0) return true;
        if (t.shape[i] > 1) order[n++] = i;
    }
    for (int j = 1; j < n; ++j)  // insertion sort by stride: at most 8 axes
        for (int k = j; k > 0 && t.strides[order[k]] < t.strides[order[k - 1]]; --k) std::swap(order[k], order[k - 1]);
    int64_t reach = 1;  // elements spanned by the axes visited so far
    for (int j = 0; j < n; ++j) {
        const int i = order[j];
        if (t.strides[i] < reach) return false;
        reach = t.strides[i] * (t.shape[i] - 1) + reach;
    }
    return true;
}

// The elementwise kinds' broadcast, done by the core: every input has the output's shape (a
// broadcast axis has stride 0).
inline bool broadcast_to_output(const tf_op_desc &op) noexcept {
    for (uint32_t i = 0; i < op.n_inputs; ++i)
        if (!same_shape(op.inputs[i], op.outputs[0])) return false;
    return true;
}

// "[2, 3, 4]", for messages.
struct ShapeText {
    char text[TF_MAX_RANK * 22 + 3];
};

inline ShapeText shape_of(const tf_tensor_desc &t) noexcept {
    ShapeText s{};
    size_t used = static_cast<size_t>(std::snprintf(s.text, sizeof s.text, "["));
    for (int i = 0; i < t.rank && i < TF_MAX_RANK && used < sizeof s.text; ++i)
        used += static_cast<size_t>(std::snprintf(s.text + used, sizeof s.text - used, i ? ", %lld" : "%lld",
                                                  static_cast<long long>(t.shape[i])));
    if (used < sizeof s.text) std::snprintf(s.text + used, sizeof s.text - used, "]");
    return s;
}

}  // namespace TF_KIT_HIDDEN
