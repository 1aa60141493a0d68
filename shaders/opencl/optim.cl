// The optimizer updates of ops.def in place over dense f32 operands: the OpenCL C port of
// shaders/optim.comp (see there for the order of the operations, which is ops.def's).
//   mode 0  adamw_step  slots 0 param, 1 grad, 2 exp_avg, 3 exp_avg_sq
//   mode 1  sgd_step    slots 0 param, 1 grad, 2 momentum_buffer
// One work-item per element, grid-stride. FP_CONTRACT is off (common.cl), so each operation is
// rounded on its own as GLSL's `precise` makes it there.
TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, HAS_STATE, 0u)
TF_SPEC(2, uint, DECAYS, 0u)
TF_SPEC(3, uint, NESTEROV, 0u)

typedef struct {
    uint count;
    uint base0, base1, base2, base3;
    uint pad0_, pad1_, pad2_;
    // adamw: decay, beta1, 1 - beta1, beta2, 1 - beta2, sqrt(bias correction 2), eps, step size
    // sgd:   lr, momentum, weight_decay
    float k[8];
} optim_params;

__attribute__((reqd_work_group_size(256, 1, 1)))
kernel void tf_optim(const optim_params pv, TF_KERNEL_ARGS) {
    TF_SLOTS_INIT;
    const optim_params *p = &pv;
    uint step = get_num_groups(0) * 256u;
    for (uint i = get_global_id(0); i < p->count; i += step) {
        float param = ld_f32(T[0], p->base0 + i);
        float g = ld_f32(T[1], p->base1 + i);
        if (MODE == 0u) {
            float m = HAS_STATE != 0u ? ld_f32(T[2], p->base2 + i) : 0.0f;
            float v = HAS_STATE != 0u ? ld_f32(T[3], p->base3 + i) : 0.0f;
            float decayed = DECAYS != 0u ? param * p->k[0] : param;
            float m1 = m * p->k[1] + g * p->k[2];
            float v1 = v * p->k[3] + (g * g) * p->k[4];
            float denom = tf_sqrt(v1) / p->k[5] + p->k[6];
            st_f32(T[2], p->base2 + i, m1);
            st_f32(T[3], p->base3 + i, v1);
            st_f32(T[0], p->base0 + i, decayed - (m1 / denom) * p->k[7]);
        } else {
            float d = DECAYS != 0u ? g + param * p->k[2] : g;
            float buf = HAS_STATE != 0u ? ld_f32(T[2], p->base2 + i) * p->k[1] + d : d;
            float s = NESTEROV != 0u ? d + buf * p->k[1] : buf;
            st_f32(T[2], p->base2 + i, buf);
            st_f32(T[0], p->base0 + i, param - s * p->k[0]);
        }
    }
}
