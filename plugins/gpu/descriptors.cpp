// Descriptor helpers shared by the op families.
#include "descriptors.hpp"

#include <algorithm>

namespace tf_gpu {

TensorBinding bind_view(const DeviceCaps &caps, const tf_tensor_desc &t, tf_buffer *buffer, uint64_t storage_offset,
                        uint64_t buffer_size, const char *op, const char *role, uint32_t index) {
    const uint64_t size = element_size(t.dtype);
    if (size == 0) raise(TF_STATUS_UNSUPPORTED, "%s: %s %u has dtype %d", op, role, index, t.dtype);
    uint64_t span = 1;
    for (int i = 0; i < t.rank; ++i) {
        // A tensor without elements is never read or written: its slot stays unbound.
        if (t.shape[i] == 0) return TensorBinding{};
        span += static_cast<uint64_t>(t.shape[i] - 1) * static_cast<uint64_t>(t.strides[i]);
    }
    const uint64_t bytes = span * size;
    if (t.offset % size != 0 || t.offset > buffer_size || bytes > buffer_size - t.offset)
        raise(TF_STATUS_INVALID_ARGUMENT,
              "%s: %s %u (%llu bytes at offset %llu) does not lie inside its buffer of %llu bytes", op, role, index,
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(t.offset),
              static_cast<unsigned long long>(buffer_size));
    const uint64_t absolute = storage_offset + t.offset;
    TensorBinding out;
    out.buffer = buffer;
    out.offset = align_down(absolute, caps.bind_align);
    // Whole words: a bool view may end inside a word (the range stays inside the allocation,
    // whose size the plugins round up to a multiple of 256).
    out.range = align_up(absolute + bytes - out.offset, 4);
    out.base = static_cast<uint32_t>((absolute - out.offset) / size);
    if (out.range > caps.max_binding)
        raise(TF_STATUS_INTERNAL, "%s: %s %u spans %llu bytes, more than one binding may (%llu)", op, role, index,
              static_cast<unsigned long long>(out.range), static_cast<unsigned long long>(caps.max_binding));
    return out;
}

uint64_t element_size(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F32:
    case TF_DTYPE_I32: return 4;
    case TF_DTYPE_F16:
    case TF_DTYPE_BF16: return 2;
    case TF_DTYPE_I64: return 8;
    case TF_DTYPE_BOOL: return 1;
    default: return 0;
    }
}

MergedAxes merge_axes(int rank, const int64_t *shape, const int64_t *const *strides, int tensors) {
    MergedAxes m;
    for (int d = 0; d < rank; ++d) {
        if (shape[d] == 1) continue;
        if (m.rank > 0) {
            // The previous kept axis (outer) absorbs this one when, for every tensor, a step
            // along it equals shape[d] steps along this one.
            const int p = m.rank - 1;
            bool fits = true;
            for (int t = 0; t < tensors; ++t) fits = fits && m.strides[t][p] == strides[t][d] * shape[d];
            if (fits) {
                m.shape[p] *= shape[d];
                for (int t = 0; t < tensors; ++t) m.strides[t][p] = strides[t][d];
                continue;
            }
        }
        m.shape[m.rank] = shape[d];
        for (int t = 0; t < tensors; ++t) m.strides[t][m.rank] = strides[t][d];
        ++m.rank;
    }
    return m;
}

Magic magic_of(uint32_t d) {
    if (d <= 1) return {1, 0};  // tf_div(n, 1, 0) = 0 + (n >> 0) >> 0 = n
    // l = ceil(log2 d); m = floor(2^32 (2^l - d) / d) + 1; n / d = (t + ((n - t) >> 1)) >> (l - 1).
    uint32_t l = 0;
    while ((uint64_t{1} << l) < d) ++l;
    const uint64_t m = ((uint64_t{1} << 32) * ((uint64_t{1} << l) - d)) / d + 1;
    return {static_cast<uint32_t>(m), 1u | (l - 1) << 8};
}

uint32_t groups_for(const DeviceCaps &caps, uint64_t items, uint32_t per_group) {
    const uint64_t need = (items + per_group - 1) / per_group;
    const uint64_t cap = std::min<uint64_t>(caps.max_groups[0], 65535);
    return static_cast<uint32_t>(std::clamp<uint64_t>(need, 1, cap));
}

}  // namespace tf_gpu
