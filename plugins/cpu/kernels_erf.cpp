// erf, the exact gelu, its gradient (gelu_backward) and exp on dense f32 tensors, the
// transformer MLP's case: vector_erf.h's call-free forms, compiled per instruction
// set, in place of libm's erf/erfc/expf per element.
// Other dtypes and layouts take the elementwise kernels' double path (kernels_elementwise.cpp).
#include "kernels.h"
#include "vector_math.h"
#include "vector_erf.h"

namespace tf_cpu {
namespace {

[[gnu::always_inline]] inline void f32_erf_row_body(uint32_t op, float *o, const float *x, int64_t n) {
    if (op == TF_OP_GELU) {
        for (int64_t i = 0; i < n; ++i) o[i] = vec::gelu(x[i]);
    } else if (op == TF_OP_ERF) {
        for (int64_t i = 0; i < n; ++i) o[i] = vec::erf(x[i]);
    } else {
        for (int64_t i = 0; i < n; ++i) o[i] = vec::exp_rounded(x[i]);
    }
}
TF_CPU_ISA_DISPATCH(f32_erf_row, (uint32_t op, float *o, const float *x, int64_t n), (op, o, x, n))

[[gnu::always_inline]] inline void f32_gelu_backward_row_body(float *o, const float *dy, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = vec::gelu_backward(dy[i], x[i]);
}
TF_CPU_ISA_DISPATCH(f32_gelu_backward_row, (float *o, const float *dy, const float *x, int64_t n), (o, dy, x, n))

}  // namespace

bool run_f32_erf(uint32_t op, const tf_tensor_desc &in, const tf_tensor_desc &out) {
    if ((op != TF_OP_GELU && op != TF_OP_ERF && op != TF_OP_EXP) || !dense_f32(out) || !dense_f32(in)) return false;
    parallel_elementwise<2>({&out, &in}, [op](const auto &d) {
        const auto at = [](const tf_tensor_desc &t) {
            return reinterpret_cast<float *>(static_cast<char *>(t.data) + t.offset);
        };
        f32_erf_row(op, at(*d[0]), at(*d[1]), numel(*d[0]));
    });
    return true;
}

bool run_f32_gelu_backward(const tf_tensor_desc &dy, const tf_tensor_desc &x, const tf_tensor_desc &out) {
    if (!dense_f32(out) || !dense_f32(dy) || !dense_f32(x)) return false;
    parallel_elementwise<3>({&out, &dy, &x}, [](const auto &d) {
        const auto at = [](const tf_tensor_desc &t) {
            return reinterpret_cast<float *>(static_cast<char *>(t.data) + t.offset);
        };
        f32_gelu_backward_row(at(*d[0]), at(*d[1]), at(*d[2]), numel(*d[0]));
    });
    return true;
}

}  // namespace tf_cpu
