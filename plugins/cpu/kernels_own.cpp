// The f32 staging the kernels of the OWN ops share (F32Input, F32Output, staging slots) and the
// index and offset helpers of the lookup and window kernels. The ops' descriptor rules are the
// kit's (tinyfin/plugin_kit/rules.hpp).
#include "kernels_nn.hpp"

#include <algorithm>
#include <cstdio>

namespace tf_cpu {
namespace {

// ---- Staging --------------------------------------------------------------------------------

// Dense row-major f32 memory with d's shape, as a walk sees it.
View dense_view(const tf_tensor_desc &d, float *data) {
    View v{reinterpret_cast<char *>(data), {}};
    int64_t stride = static_cast<int64_t>(sizeof(float));
    for (int i = d.rank - 1; i >= 0; --i) {
        v.strides[i] = stride;
        stride *= d.shape[i];
    }
    return v;
}

}  // namespace

bool dense_f32(const tf_tensor_desc &d) {
    if (d.dtype != TF_DTYPE_F32) return false;
    int64_t expect = 1;
    for (int i = d.rank - 1; i >= 0; --i) {
        if (d.shape[i] != 1 && d.strides[i] != expect) return false;
        expect *= d.shape[i];
    }
    return (reinterpret_cast<uintptr_t>(d.data) + d.offset) % alignof(float) == 0;
}

namespace {
// The staging slots this thread holds, one bit each.
thread_local unsigned t_staging_taken = 0;
constexpr int k_staging_slots = k_slot_count - k_slot_stage0;
}  // namespace

StagingSlot::~StagingSlot() {
    if (slot_ >= 0) t_staging_taken &= ~(1u << slot_);
}

float *StagingSlot::floats(size_t floats) {
    for (int i = 0; slot_ < 0 && i < k_staging_slots; ++i)
        if (!(t_staging_taken >> i & 1u)) {
            t_staging_taken |= 1u << i;
            slot_ = i;
        }
    return slot_ < 0 ? nullptr : scratch_floats(static_cast<ScratchSlot>(k_slot_stage0 + slot_), floats);
}

F32Input::F32Input(const tf_tensor_desc &d) : data_(nullptr) {
    if (numel(d) == 0) return;
    if (dense_f32(d)) {
        data_ = reinterpret_cast<const float *>(base_of(d));
        return;
    }
    const auto count = static_cast<size_t>(numel(d));
    float *copy = slot_.floats(count);
    if (!copy) {
        copy_.resize(count);
        copy = copy_.data();
    }
    const View dst = dense_view(d, copy);
    Dtypes::with_float(d.dtype, [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        walk<2>(d.rank, d.shape, {dst, view_of(d)}, [&](char *const *p, int64_t n, const int64_t *step) {
            if (step[0] == sizeof(float) && load_f32_run(d.dtype, p[1], step[1], reinterpret_cast<float *>(p[0]), n))
                return;
            for (int64_t i = 0; i < n; ++i) Traits<float>::store(p[0] + i * step[0], Tr::load(p[1] + i * step[1]));
        });
    });
    data_ = copy;
}

F32Output::F32Output(const tf_tensor_desc &d) : desc_(d), data_(nullptr) {
    if (numel(d) == 0) return;
    if (dense_f32(d)) {
        data_ = reinterpret_cast<float *>(base_of(d));
        return;
    }
    const auto count = static_cast<size_t>(numel(d));
    staged_ = true;
    data_ = slot_.floats(count);
    if (!data_) {
        scratch_.resize(count);
        data_ = scratch_.data();
    }
}

void F32Output::finish() {
    if (staged_) store_rounded(desc_, data_);
}

void store_rounded(const tf_tensor_desc &out, const float *src) {
    const View from = dense_view(out, const_cast<float *>(src));
    Dtypes::with_float(out.dtype, [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        walk<2>(out.rank, out.shape, {view_of(out), from}, [&](char *const *p, int64_t n, const int64_t *step) {
            if (step[1] == sizeof(float) &&
                store_f32_run(out.dtype, reinterpret_cast<const float *>(p[1]), p[0], step[0], n))
                return;
            for (int64_t i = 0; i < n; ++i) Tr::store(p[0] + i * step[0], Traits<float>::load(p[1] + i * step[1]));
        });
    });
}

std::vector<int64_t> load_indices(const tf_tensor_desc &d) {
    std::vector<int64_t> values;
    values.reserve(static_cast<size_t>(numel(d)));
    auto read = [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        walk<1>(d.rank, d.shape, {view_of(d)}, [&](char *const *p, int64_t n, const int64_t *step) {
            for (int64_t i = 0; i < n; ++i) values.push_back(static_cast<int64_t>(Tr::load(p[0] + i * step[0])));
        });
    };
    if (d.dtype == TF_DTYPE_I32) read(int32_t{});
    if (d.dtype == TF_DTYPE_I64) read(int64_t{});
    return values;
}

std::vector<int64_t> leading_offsets(const tf_tensor_desc &d, int axes) {
    const View v = view_of(d);
    int64_t count = 1;
    for (int i = 0; i < axes; ++i) count *= d.shape[i];
    std::vector<int64_t> offsets(static_cast<size_t>(count));
    int64_t idx[TF_MAX_RANK] = {};
    int64_t off = 0;
    for (int64_t e = 0; e < count; ++e) {
        offsets[static_cast<size_t>(e)] = off;
        for (int i = axes - 1; i >= 0; --i) {
            if (++idx[i] < d.shape[i]) {
                off += v.strides[i];
                break;
            }
            off -= v.strides[i] * (d.shape[i] - 1);
            idx[i] = 0;
        }
    }
    return offsets;
}

}  // namespace tf_cpu
