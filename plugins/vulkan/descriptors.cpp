// Descriptor helpers shared by the op families.
#include "kernels.hpp"

#include <algorithm>

namespace tf_vk {

int64_t numel(const tf_tensor_desc &t) {
    int64_t n = 1;
    for (int i = 0; i < t.rank; ++i) n *= t.shape[i];
    return n;
}

uint64_t element_size(int32_t dtype) {
    switch (dtype) {
    case TF_DTYPE_F32: case TF_DTYPE_I32: return 4;
    case TF_DTYPE_I64: return 8;
    case TF_DTYPE_BOOL: return 1;
    default: return 0;
    }
}

bool same_shape(const tf_tensor_desc &a, const tf_tensor_desc &b) {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)
        if (a.shape[i] != b.shape[i]) return false;
    return true;
}

merged_axes merge_axes(int rank, const int64_t *shape, const int64_t *const *strides, int tensors) {
    merged_axes m;
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

magic magic_of(uint32_t d) {
    if (d <= 1) return {1, 0};  // tf_div(n, 1, 0) = 0 + (n >> 0) >> 0 = n
    // l = ceil(log2 d); m = floor(2^32 (2^l - d) / d) + 1; n / d = (t + ((n - t) >> 1)) >> (l - 1).
    uint32_t l = 0;
    while ((uint64_t{1} << l) < d) ++l;
    const uint64_t m = ((uint64_t{1} << 32) * ((uint64_t{1} << l) - d)) / d + 1;
    return {static_cast<uint32_t>(m), 1u | (l - 1) << 8};
}

uint32_t groups_for(const device_caps &caps, uint64_t items, uint32_t per_group) {
    const uint64_t need = (items + per_group - 1) / per_group;
    const uint64_t cap = std::min<uint64_t>(caps.max_groups[0], 65535);
    return static_cast<uint32_t>(std::clamp<uint64_t>(need, 1, cap));
}

const char *op_name(uint32_t op) noexcept {
    switch (op) {
#define TF_OP(id, sym, name, kind, n_in, n_out, params) case id: return name;
#include <tinyfin/ops.def>
#undef TF_OP
    default: return "op?";
    }
}

}  // namespace tf_vk
