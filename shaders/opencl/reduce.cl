// Reductions over axes (sum, mean, max, min, var) and along one axis (argmax, argmin). The input
// is f32, f16 or bf16 (DT_IN), accumulated in f32; the output (DT_OUT) is rounded once at the end.
// The OpenCL C port of shaders/reduce.comp: slot 0 output, slot 1 input.
// PER_GROUP 0: one work-item per output element; 1: a group of 256 shares one output element.
TF_SPEC(0, uint, OP, 0u)         // RD_* below
TF_SPEC(1, uint, PER_GROUP, 0u)
TF_SPEC(2, uint, R_FLAT, 1u)     // 1: at most one reduced axis after merging
TF_SPEC(3, uint, DT_IN, 0u)      // f32, f16, bf16
TF_SPEC(4, uint, DT_OUT, 0u)     // of sum ... var: f32, f16, bf16 (a K-split GEMM sums f32 into its output's)

typedef struct {
    uint n_out, n_red, k_rank, r_rank;
    uint in_base, out_base;
    float correction;
    uint pad_;
    uint k_shape[8], k_in[8], k_out[8];
    uint r_shape[8], r_in[8];
    uint r_div_m[8], r_div_s[8];
} reduce_params;

#define RD_SUM 0u
#define RD_MEAN 1u
#define RD_MAX 2u
#define RD_MIN 3u
#define RD_VAR 4u
#define RD_ARGMAX 5u
#define RD_ARGMIN 6u
#define IS_ARG (OP == RD_ARGMAX || OP == RD_ARGMIN)
#define IS_EXTREME (OP == RD_MAX || OP == RD_MIN)

uint input_at(const reduce_params *p, uint first, uint r) {
    if (R_FLAT == 1u) return first + r * p->r_in[0];
    uint e = first;
    for (int d = (int)p->r_rank - 1; d >= 0; --d) {
        uint next = tf_div(r, p->r_div_m[d], p->r_div_s[d]);
        e += (r - next * p->r_shape[d]) * p->r_in[d];
        r = next;
    }
    return e;
}

void output_at(const reduce_params *p, uint o, uint *in_first, uint *out_e) {
    *in_first = p->in_base;
    *out_e = p->out_base;
    for (int d = (int)p->k_rank - 1; d >= 0; --d) {
        uint size = p->k_shape[d];
        uint q = o % size;
        o /= size;
        *in_first += q * p->k_in[d];
        *out_e += q * p->k_out[d];
    }
}

float combine(float a, float b) {
    if (OP == RD_MAX) return tf_max(a, b);
    if (OP == RD_MIN) return tf_min(a, b);
    return a + b;
}

bool beats(float bv, uint bi, float av, uint ai) {
    bool a_nan = tf_isnan(av), b_nan = tf_isnan(bv);
    if (a_nan || b_nan) return b_nan && (!a_nan || bi < ai);
    if (bv == av) return bi < ai;
    return OP == RD_ARGMAX ? bv > av : bv < av;
}

float divisor(const reduce_params *p) { return max((float)p->n_red - p->correction, 0.0f); }

void finish(const reduce_params *p, TF_T T, uint out_e, float value, uint index) {
    if (IS_ARG) {
        st_i64(T[0], out_e, (uint2)(index, 0u));
        return;
    }
    if (OP == RD_MEAN) value = p->n_red == 0u ? TF_NAN : value / (float)p->n_red;
    st_float(T[0], DT_OUT, out_e, value);
}

void reduce_serial(const reduce_params *p, TF_T T, uint o) {
    uint first, out_e;
    output_at(p, o, &first, &out_e);
    float acc = 0.0f;
    uint index = 0u;
    for (uint r = 0u; r < p->n_red; ++r) {
        float x = ld_float(T[1], DT_IN, input_at(p, first, r));
        if (IS_ARG) {
            if (r == 0u || beats(x, r, acc, index)) {
                acc = x;
                index = r;
            }
        } else {
            acc = IS_EXTREME && r == 0u ? x : combine(acc, x);
        }
    }
    if (OP == RD_VAR) {
        float mean = acc / (float)p->n_red;
        float squares = 0.0f;
        for (uint r = 0u; r < p->n_red; ++r) {
            float d = ld_float(T[1], DT_IN, input_at(p, first, r)) - mean;
            squares += d * d;
        }
        acc = squares / divisor(p);
    }
    finish(p, T, out_e, acc, index);
}

void tree(local float *s_value, local uint *s_index, bool arg) {
    for (uint half_ = 128u; half_ > 0u; half_ >>= 1u) {
        barrier(CLK_LOCAL_MEM_FENCE);
        uint t = get_local_id(0);
        if (t < half_) {
            if (arg) {
                if (beats(s_value[t + half_], s_index[t + half_], s_value[t], s_index[t])) {
                    s_value[t] = s_value[t + half_];
                    s_index[t] = s_index[t + half_];
                }
            } else {
                s_value[t] = combine(s_value[t], s_value[t + half_]);
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

void reduce_group(const reduce_params *p, TF_T T, uint o, local float *s_value, local uint *s_index) {
    uint first, out_e;
    output_at(p, o, &first, &out_e);
    uint t = get_local_id(0);
    uint start = t < p->n_red ? t : 0u;
    float acc = IS_EXTREME || IS_ARG ? ld_float(T[1], DT_IN, input_at(p, first, start)) : 0.0f;
    uint index = start;
    for (uint r = t; r < p->n_red; r += 256u) {
        float x = ld_float(T[1], DT_IN, input_at(p, first, r));
        if (IS_ARG) {
            if (beats(x, r, acc, index)) {
                acc = x;
                index = r;
            }
        } else if (!(IS_EXTREME && r == start)) {
            acc = combine(acc, x);
        }
    }
    s_value[t] = acc;
    s_index[t] = index;
    tree(s_value, s_index, IS_ARG);
    float value = s_value[0];
    uint best = s_index[0];
    if (OP == RD_VAR) {
        float mean = value / (float)p->n_red;
        float squares = 0.0f;
        for (uint r = t; r < p->n_red; r += 256u) {
            float d = ld_float(T[1], DT_IN, input_at(p, first, r)) - mean;
            squares += d * d;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        s_value[t] = squares;
        tree(s_value, s_index, false);
        value = s_value[0] / divisor(p);
    }
    if (t == 0u) finish(p, T, out_e, value, best);
    barrier(CLK_LOCAL_MEM_FENCE);
}

__attribute__((reqd_work_group_size(256, 1, 1)))
kernel void tf_reduce(const reduce_params pv, TF_KERNEL_ARGS) {
    TF_SLOTS_INIT;
    const reduce_params *p = &pv;
    local float s_value[256];
    local uint s_index[256];
    if (PER_GROUP == 0u) {
        uint step = get_num_groups(0) * 256u;
        for (uint o = get_global_id(0); o < p->n_out; o += step) reduce_serial(p, T, o);
        return;
    }
    for (uint o = get_group_id(0); o < p->n_out; o += get_num_groups(0)) reduce_group(p, T, o, s_value, s_index);
}
