// The optimizer updates adamw_step and sgd_step (ops.def) over dense f32 operands, in place, one
// thread per element. Every operation is an IEEE-rounded intrinsic (__fmul_rn and friends never
// contract into a fused multiply-add; __fsqrt_rn and __fdiv_rn are correctly rounded), so the
// bits equal the cpu plugin's, and the ordinary ops', for the same constants.
#include "device_common.cuh"

namespace tf_cuda {
namespace {

__global__ void adamw_kernel(int64_t n, AdamWArgs a, float *p, const float *g, float *m, float *v) {
    for (int64_t i = global_index(); i < n; i += global_stride()) {
        const float pv = p[i], gv = g[i];
        const float m0 = a.has_state ? m[i] : 0.0f, v0 = a.has_state ? v[i] : 0.0f;
        const float decayed = a.decays ? __fmul_rn(pv, a.c.decay) : pv;
        const float mv = __fadd_rn(__fmul_rn(m0, a.c.beta1), __fmul_rn(gv, a.c.one_minus_beta1));
        const float vv = __fadd_rn(__fmul_rn(v0, a.c.beta2), __fmul_rn(__fmul_rn(gv, gv), a.c.one_minus_beta2));
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vv), a.c.root_bias_correction2), a.c.eps);
        m[i] = mv;
        v[i] = vv;
        p[i] = __fsub_rn(decayed, __fmul_rn(__fdiv_rn(mv, denom), a.c.step_size));
    }
}

__global__ void sgd_kernel(int64_t n, SgdArgs a, float *p, const float *g, float *buf) {
    for (int64_t i = global_index(); i < n; i += global_stride()) {
        const float pv = p[i];
        const float d = a.decays ? __fadd_rn(g[i], __fmul_rn(pv, a.weight_decay)) : g[i];
        const float b = a.has_state ? __fadd_rn(__fmul_rn(buf[i], a.momentum), d) : d;
        const float step = a.nesterov ? __fadd_rn(d, __fmul_rn(b, a.momentum)) : b;
        buf[i] = b;
        p[i] = __fsub_rn(pv, __fmul_rn(step, a.lr));
    }
}

}  // namespace

cudaError_t launch_adamw(cudaStream_t stream, int64_t n, const AdamWArgs &args, float *param, const float *grad,
                         float *exp_avg, float *exp_avg_sq) {
    if (n == 0) return cudaSuccess;
    adamw_kernel<<<blocks_for(n), block_size, 0, stream>>>(n, args, param, grad, exp_avg, exp_avg_sq);
    return cudaGetLastError();
}

cudaError_t launch_sgd(cudaStream_t stream, int64_t n, const SgdArgs &args, float *param, const float *grad,
                       float *momentum_buffer) {
    if (n == 0) return cudaSuccess;
    sgd_kernel<<<blocks_for(n), block_size, 0, stream>>>(n, args, param, grad, momentum_buffer);
    return cudaGetLastError();
}

}  // namespace tf_cuda
