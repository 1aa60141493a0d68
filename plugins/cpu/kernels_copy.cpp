// Copy reference kernels: contiguous (same dtype, any layout to any layout), cast (every pair
// of dtypes) and fill.
//
// Conversion rules (cast and fill):
//  - float -> float: round to nearest, ties to even, once from the exact value; NaN stays NaN.
//  - float -> integer: truncates toward zero like C; saturating where C is undefined: NaN gives
//    0, values beyond the range (infinities included) give the type's min or max.
//  - integer -> float: rounds to nearest even (f16 overflows to infinity past 65519).
//  - integer -> narrower integer: wraps (two's complement), like C++20, numpy and torch.
//  - anything -> bool: x != 0 (NaN is true); bool -> anything: 0 or 1.
//
// Large tensors are split along their first axis over the thread pool (parallel_elementwise):
// every element is written once either way, so the result does not depend on the threads. The
// training step's gradient zeros and layout copies ran on one thread while the other waited.
#include "kernels.hpp"

namespace tf_cpu {
namespace {

template <int64_t Size>
void copy_elements(const tf_tensor_desc &in, const tf_tensor_desc &out) {
    walk<2>(out.rank, out.shape, {view_of(out), view_of(in)}, [](char *const *p, int64_t n, const int64_t *step) {
        if (step[0] == Size && step[1] == Size) {
            std::memcpy(p[0], p[1], static_cast<size_t>(n * Size));
            return;
        }
        for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * step[0], p[1] + i * step[1], Size);
    });
}

template <class S, class D>
void cast(const tf_tensor_desc &in, const tf_tensor_desc &out) {
    walk<2>(out.rank, out.shape, {view_of(out), view_of(in)}, [&](char *const *p, int64_t n, const int64_t *step) {
        // f16/bf16 <-> f32 runs (autocast's casts): the vectorised conversions, the same bits.
        if constexpr (std::is_same_v<S, float> && (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>)) {
            if (step[1] == sizeof(float) && (reinterpret_cast<uintptr_t>(p[1]) & 3) == 0 &&
                store_f32_run(out.dtype, reinterpret_cast<const float *>(p[1]), p[0], step[0], n))
                return;
        }
        if constexpr (std::is_same_v<D, float> && (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>)) {
            if (step[0] == sizeof(float) && (reinterpret_cast<uintptr_t>(p[0]) & 3) == 0 &&
                load_f32_run(in.dtype, p[1], step[1], reinterpret_cast<float *>(p[0]), n))
                return;
        }
        for (int64_t i = 0; i < n; ++i) Traits<D>::store_wide(p[0] + i * step[0], load_wide<S>(p[1] + i * step[1]));
    });
}

tf_status contiguous_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    void (*copy)(const tf_tensor_desc &, const tf_tensor_desc &) = nullptr;
    switch (dtype_size(out.dtype)) {
    case 1: copy = copy_elements<1>; break;
    case 2: copy = copy_elements<2>; break;
    case 4: copy = copy_elements<4>; break;
    case 8: copy = copy_elements<8>; break;
    default: return fail(err, TF_STATUS_UNSUPPORTED, "contiguous: dtype %s not supported", dtype_name(out.dtype));
    }
    parallel_elementwise<2>({&out, &in}, [copy](const auto &d) { copy(*d[1], *d[0]); });
    return TF_STATUS_OK;
}

tf_status cast_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    bool known_out = false;
    const bool known_in = Dtypes::with_any(in.dtype, [&](auto src) {
        known_out = Dtypes::with_any(out.dtype, [&](auto dst) {
            parallel_elementwise<2>({&out, &in},
                                    [](const auto &d) { cast<decltype(src), decltype(dst)>(*d[1], *d[0]); });
        });
    });
    if (!known_in || !known_out)
        return fail(err, TF_STATUS_UNSUPPORTED, "cast: %s to %s not supported", dtype_name(in.dtype),
                    dtype_name(out.dtype));
    return TF_STATUS_OK;
}

tf_status fill_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &out = op.outputs[0];
    const double value = params_of<tf_params_fill>(op).value;
    const bool known = Dtypes::with_any(out.dtype, [&](auto tag) {
        using T = decltype(tag);
        // Encode once, then copy the bytes into every element.
        char bytes[sizeof(T)];
        Traits<T>::store_wide(bytes, value);
        bool zero = true;
        for (char b : bytes) zero = zero && b == 0;
        parallel_elementwise<1>({&out}, [&](const auto &d) {
            walk<1>(d[0]->rank, d[0]->shape, {view_of(*d[0])}, [&](char *const *p, int64_t n, const int64_t *step) {
                if (zero && step[0] == static_cast<int64_t>(sizeof(T))) {
                    std::memset(p[0], 0, static_cast<size_t>(n) * sizeof(T));  // gradients' zeros
                    return;
                }
                for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * step[0], bytes, sizeof(T));
            });
        });
    });
    return dtype_status(known, "fill", out.dtype, err);
}

// ---- Rows -------------------------------------------------------------------------------------------

constexpr HostRow k_rows[] = {
    {TF_OP_CONTIGUOUS, k_any_dtype, contiguous_kernel},
    {TF_OP_CAST, k_any_dtype, cast_kernel},
    {TF_OP_FILL, k_any_dtype, fill_kernel},
};

}  // namespace

std::span<const HostRow> copy_kernels() { return k_rows; }

}  // namespace tf_cpu
