// The optimizer updates of ops.def, in place over dense f32 operands:
//   mode 0  adamw_step  slots 0 param, 1 grad, 2 exp_avg, 3 exp_avg_sq
//   mode 1  sgd_step    slots 0 param, 1 grad, 2 momentum_buffer
// One invocation per element, grid-stride. The operations are ops.def's, in its order; `precise`
// keeps each one rounded on its own (no fused multiply-add), as the ordinary ops are. MODE,
// HAS_STATE, DECAYS and NESTEROV are specialization constants. Mirrors optim_params in
// host/kernels.hpp.
layout(local_size_x = 256) in;

TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, HAS_STATE, 0u)
TF_SPEC(2, uint, DECAYS, 0u)
TF_SPEC(3, uint, NESTEROV, 0u)

struct optim_params {
    uint count;
    uint base0, base1, base2, base3;
    uint pad0_, pad1_, pad2_;
    // adamw: decay, beta1, 1 - beta1, beta2, 1 - beta2, sqrt(bias correction 2), eps, step size
    // sgd:   lr, momentum, weight_decay
    float k[8];
};
layout(std430, TF_BINDING(0)) readonly buffer tf_params_block { optim_params tf_p; };
// A private copy, loaded once per invocation: lavapipe turns every buffer read into a gather.
optim_params p;

void main() {
    p = tf_p;
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += gl_NumWorkGroups.x * 256u) {
        precise float param = ld_f32(0u, p.base0 + i);
        precise float g = ld_f32(1u, p.base1 + i);
        if (MODE == 0u) {
            precise float m = HAS_STATE != 0u ? ld_f32(2u, p.base2 + i) : 0.0;
            precise float v = HAS_STATE != 0u ? ld_f32(3u, p.base3 + i) : 0.0;
            precise float decayed = DECAYS != 0u ? param * p.k[0] : param;
            precise float m1 = m * p.k[1] + g * p.k[2];
            precise float v1 = v * p.k[3] + (g * g) * p.k[4];
            precise float denom = tf_sqrt(v1) / p.k[5] + p.k[6];
            st_f32(2u, p.base2 + i, m1);
            st_f32(3u, p.base3 + i, v1);
            st_f32(0u, p.base0 + i, decayed - (m1 / denom) * p.k[7]);
        } else {
            precise float d = DECAYS != 0u ? g + param * p.k[2] : g;
            precise float buf = HAS_STATE != 0u ? ld_f32(2u, p.base2 + i) * p.k[1] + d : d;
            precise float step = NESTEROV != 0u ? d + buf * p.k[1] : buf;
            st_f32(2u, p.base2 + i, buf);
            st_f32(0u, p.base0 + i, param - step * p.k[0]);
        }
    }
}
