// erf, the exact gelu, its gradient (gelu_backward) and exp on dense f32 tensors, the
// transformer MLP's case: vector_erf.hpp's call-free forms, compiled per instruction
// set, in place of libm's erf/erfc/expf per element. tanh, sigmoid, silu (a recurrent layer's
// gates, SwiGLU) and gelu's tanh form (GPT-2's MLP) the same way with vector_tanh.hpp's f32 forms,
// also on f32 rows that are dense along the last axis.
// Dense f16 and bf16 tensors (an MLP under autocast) take the same rows on chunks converted to
// f32, the f32 results rounded once to the format: the f32 op on the same inputs, rounded once
// (docs/numerics.md), where libm's double functions per element made bf16 gelu and its gradient
// the largest cost of char_gpt's bf16 step (docs/performance.md).
// Other dtypes and layouts take the elementwise kernels' double path (kernels_elementwise.cpp).
#include "kernels.hpp"
#include "vector_math.hpp"
#include "vector_erf.hpp"
#include "vector_tanh.hpp"

#include <algorithm>
#include <array>

namespace tf_cpu {
namespace {

[[gnu::always_inline]] inline void f32_erf_row_vectorized_body(uint32_t op, float *o, const float *x, int64_t n) {
    if (op == TF_OP_GELU) {
        for (int64_t i = 0; i < n; ++i) o[i] = vec::gelu(x[i]);
    } else if (op == TF_OP_TANH) {
        for (int64_t i = 0; i < n; ++i) o[i] = vec::tanh(x[i]);
    } else if (op == TF_OP_SIGMOID) {
        for (int64_t i = 0; i < n; ++i) o[i] = vec::sigmoid(x[i]);
    } else if (op == TF_OP_SILU) {
        for (int64_t i = 0; i < n; ++i) o[i] = vec::silu(x[i]);
    } else if (op == TF_OP_GELU_TANH) {
        for (int64_t i = 0; i < n; ++i) o[i] = vec::gelu_tanh(x[i]);
    } else if (op == TF_OP_ERF) {
        for (int64_t i = 0; i < n; ++i) o[i] = vec::erf(x[i]);
    } else {
        for (int64_t i = 0; i < n; ++i) o[i] = vec::exp_rounded(x[i]);
    }
}
TF_CPU_ISA_DISPATCH(f32_erf_row_vectorized, (uint32_t op, float *o, const float *x, int64_t n), (op, o, x, n))

// gelu on AVX2 takes gelu_avx2.cpp's interleaved intrinsics (the same arithmetic).
void f32_erf_row(uint32_t op, float *o, const float *x, int64_t n) {
#if defined(__x86_64__)
    if (op == TF_OP_GELU && isa_level() == 1) return gelu_row_avx2(o, x, n);
#endif
    f32_erf_row_vectorized(op, o, x, n);
}

[[gnu::always_inline]] inline void f32_gelu_backward_row_body(float *o, const float *dy, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = vec::gelu_backward(dy[i], x[i]);
}
TF_CPU_ISA_DISPATCH(f32_gelu_backward_row, (float *o, const float *dy, const float *x, int64_t n), (o, dy, x, n))

// A dense, even-aligned f16/bf16 tensor's first element; null for anything else.
const uint16_t *dense_half(const tf_tensor_desc &d, int32_t dtype) {
    if (d.dtype != dtype || (dtype != TF_DTYPE_F16 && dtype != TF_DTYPE_BF16)) return nullptr;
    int64_t expect = 1;
    for (int i = d.rank - 1; i >= 0; --i) {
        if (d.shape[i] != 1 && d.strides[i] != expect) return nullptr;
        expect *= d.shape[i];
    }
    const uintptr_t at = reinterpret_cast<uintptr_t>(d.data) + d.offset;
    return at % 2 == 0 ? reinterpret_cast<const uint16_t *>(at) : nullptr;
}

// Chunks of f16/bf16 elements staged through f32 on the stack (L1-sized), so that each element
// is converted, computed and rounded while it is in cache.
constexpr int64_t k_chunk = 512;

// row(o, inputs, m) on chunks of n elements of the operands (dtype, dense), results stored to out.
template <size_t N, class Row>
void half_chunks(int32_t dtype, uint16_t *out, const std::array<const uint16_t *, N> &in, int64_t n, Row row) {
    float x[N][k_chunk], r[k_chunk];
    for (int64_t i0 = 0; i0 < n; i0 += k_chunk) {
        const int64_t m = std::min(k_chunk, n - i0);
        for (size_t j = 0; j < N; ++j) load_f32_run(dtype, reinterpret_cast<const char *>(in[j] + i0), 2, x[j], m);
        row(r, x, m);
        store_f32_run(dtype, r, reinterpret_cast<char *>(out + i0), 2, m);
    }
}

bool run_half_erf(uint32_t op, const tf_tensor_desc &in, const tf_tensor_desc &out) {
    if (!dense_half(out, out.dtype) || !dense_half(in, out.dtype)) return false;
    parallel_elementwise<2>({&out, &in}, [op](const auto &d) {
        const int32_t dtype = d[0]->dtype;
        half_chunks<1>(dtype, const_cast<uint16_t *>(dense_half(*d[0], dtype)), {dense_half(*d[1], dtype)},
                       numel(*d[0]), [op](float *r, float(*x)[k_chunk], int64_t m) { f32_erf_row(op, r, x[0], m); });
    });
    return true;
}

bool run_half_gelu_backward(const tf_tensor_desc &dy, const tf_tensor_desc &x, const tf_tensor_desc &out) {
    if (!dense_half(out, out.dtype) || !dense_half(dy, out.dtype) || !dense_half(x, out.dtype)) return false;
    parallel_elementwise<3>({&out, &dy, &x}, [](const auto &d) {
        const int32_t dtype = d[0]->dtype;
        half_chunks<2>(dtype, const_cast<uint16_t *>(dense_half(*d[0], dtype)),
                       {dense_half(*d[1], dtype), dense_half(*d[2], dtype)}, numel(*d[0]),
                       [](float *r, float(*x)[k_chunk], int64_t m) { f32_gelu_backward_row(r, x[0], x[1], m); });
    });
    return true;
}

// tanh, sigmoid, silu and gelu_tanh on f32 operands whose last axis is dense (a recurrent layer's gates are
// column slices of one product): each row through the row kernel, as a dense tensor's.
bool run_row_logistic(uint32_t op, const tf_tensor_desc &in, const tf_tensor_desc &out) {
    if (op != TF_OP_TANH && op != TF_OP_SIGMOID && op != TF_OP_SILU && op != TF_OP_GELU_TANH) return false;
    if (in.dtype != TF_DTYPE_F32 || out.dtype != TF_DTYPE_F32 || out.rank < 2) return false;
    const int last = out.rank - 1;
    if (out.shape[last] < 2 || in.strides[last] != 1 || out.strides[last] != 1) return false;
    const auto aligned = [](const tf_tensor_desc &d) { return reinterpret_cast<uintptr_t>(base_of(d)) % 4 == 0; };
    if (!aligned(in) || !aligned(out)) return false;
    parallel_elementwise<2>({&out, &in}, [op](const auto &d) {
        const int64_t n = d[0]->shape[d[0]->rank - 1];
        walk<2>(d[0]->rank - 1, d[0]->shape, {view_of(*d[0]), view_of(*d[1])},
                [op, n](char *const *p, int64_t rows, const int64_t *step) {
                    for (int64_t i = 0; i < rows; ++i)
                        f32_erf_row(op, reinterpret_cast<float *>(p[0] + i * step[0]),
                                    reinterpret_cast<const float *>(p[1] + i * step[1]), n);
                });
    });
    return true;
}

// A dense f32 tensor's elements split into tasks over their flat range, not over the first axis
// (a transformer's [1, T, C] activation has one row there): each element costs tens of vector
// operations (gelu ~4 ns on Zen 1), so 4096 of them are worth a task (bert's [1, 128, 256]
// gelu: 8 tasks of ~16 us, 130 us on one thread). Task bounds fall on 64-element blocks; every
// element is computed by the same row code wherever it falls, so the thread count never changes
// a result.
constexpr int64_t k_flat_grain = 4096;

template <class Rows>
void parallel_flat(int64_t n, Rows rows) {
    const int64_t blocks = (n + 63) / 64;
    const int64_t tasks = std::min(blocks, split_count(n, k_flat_grain));
    if (tasks <= 1) return rows(0, n);
    parallel_for(tasks, [&](int64_t t) { rows(blocks * t / tasks * 64, std::min(n, blocks * (t + 1) / tasks * 64)); });
}

}  // namespace

bool run_vector_erf(uint32_t op, const tf_tensor_desc &in, const tf_tensor_desc &out) {
    if (op != TF_OP_GELU && op != TF_OP_ERF && op != TF_OP_EXP && op != TF_OP_TANH && op != TF_OP_SIGMOID &&
        op != TF_OP_SILU && op != TF_OP_GELU_TANH)
        return false;
    if (run_half_erf(op, in, out)) return true;
    if (!dense_f32(out) || !dense_f32(in)) return run_row_logistic(op, in, out);
    float *o = reinterpret_cast<float *>(base_of(out));
    const float *x = reinterpret_cast<const float *>(base_of(in));
    parallel_flat(numel(out), [&](int64_t lo, int64_t hi) { f32_erf_row(op, o + lo, x + lo, hi - lo); });
    return true;
}

bool run_vector_gelu_backward(const tf_tensor_desc &dy, const tf_tensor_desc &x, const tf_tensor_desc &out) {
    if (run_half_gelu_backward(dy, x, out)) return true;
    if (!dense_f32(out) || !dense_f32(dy) || !dense_f32(x)) return false;
    float *o = reinterpret_cast<float *>(base_of(out));
    const float *g = reinterpret_cast<const float *>(base_of(dy)), *xs = reinterpret_cast<const float *>(base_of(x));
    parallel_flat(numel(out), [&](int64_t lo, int64_t hi) { f32_gelu_backward_row(o + lo, g + lo, xs + lo, hi - lo); });
    return true;
}

}  // namespace tf_cpu
