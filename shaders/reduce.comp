// Reductions over axes (sum, mean, max, min, var) and along one axis (argmax, argmin). The input
// is f32, f16 or bf16 (DT_IN), accumulated in f32; the output (DT_OUT) is rounded once at the end.
// Slot 0 is the output, slot 1 the input. The plugin splits the input's axes into kept axes
// (one output element per position) and reduced axes (walked for each output element), each
// group merged where the strides allow.
// PER_GROUP 0: one invocation walks one output element's inputs (many small reductions);
// PER_GROUP 1: a workgroup shares one output element (few long reductions).
// Mirrors reduce_params in plugins/vulkan/kernels.hpp.
layout(local_size_x = 256) in;

TF_SPEC(0, uint, OP, 0u)         // RD_* below
TF_SPEC(1, uint, PER_GROUP, 0u)
TF_SPEC(2, uint, R_FLAT, 1u)     // 1: at most one reduced axis after merging (no divisions)
TF_SPEC(3, uint, DT_IN, 0u)      // f32, f16, bf16
TF_SPEC(4, uint, DT_OUT, 0u)     // of sum ... var: f32, f16, bf16 (a K-split GEMM sums f32 into its output's)

struct reduce_params {
    uint n_out;       // output elements
    uint n_red;       // input elements per output element
    uint k_rank;      // kept axes
    uint r_rank;      // reduced axes
    uint in_base;
    uint out_base;
    float correction; // var: divisor is max(n_red - correction, 0)
    uint pad_;
    uint k_shape[8];
    uint k_in[8];     // input strides of the kept axes
    uint k_out[8];    // output strides of the kept axes
    uint r_shape[8];
    uint r_in[8];     // input strides of the reduced axes
    uint r_div_m[8];  // r_shape as divisors (tf_div)
    uint r_div_s[8];
};
layout(std430, TF_BINDING(0)) readonly buffer tf_params_block { reduce_params tf_p; };
// A private copy, loaded once per invocation: lavapipe turns every buffer read into a gather.
reduce_params p;

#define RD_SUM 0u
#define RD_MEAN 1u
#define RD_MAX 2u
#define RD_MIN 3u
#define RD_VAR 4u
#define RD_ARGMAX 5u
#define RD_ARGMIN 6u

shared float s_value[256];
shared uint s_index[256];

// Element index in the input of reduced position r of the output element starting at first.
uint input_at(uint first, uint r) {
    if (R_FLAT == 1u) return first + r * p.r_in[0];
    uint e = first;
    for (int d = int(p.r_rank) - 1; d >= 0; --d) {
        uint next = tf_div(r, p.r_div_m[d], p.r_div_s[d]);
        e += (r - next * p.r_shape[d]) * p.r_in[d];
        r = next;
    }
    return e;
}

// Input index of the first reduced element, and output index, of output element o.
void output_at(uint o, out uint in_first, out uint out_e) {
    in_first = p.in_base;
    out_e = p.out_base;
    for (int d = int(p.k_rank) - 1; d >= 0; --d) {
        uint size = p.k_shape[d];
        uint q = o % size;
        o /= size;
        in_first += q * p.k_in[d];
        out_e += q * p.k_out[d];
    }
}

float combine(float a, float b) {
    if (OP == RD_MAX) return tf_max(a, b);
    if (OP == RD_MIN) return tf_min(a, b);
    return a + b;
}

// (value, index) candidate b replaces a: more extreme, the first NaN, or as extreme and earlier.
bool beats(float bv, uint bi, float av, uint ai) {
    bool a_nan = tf_isnan(av), b_nan = tf_isnan(bv);
    if (a_nan || b_nan) return b_nan && (!a_nan || bi < ai);
    if (bv == av) return bi < ai;
    return OP == RD_ARGMAX ? bv > av : bv < av;
}

float divisor() { return max(float(p.n_red) - p.correction, 0.0); }

void finish(uint out_e, float value, uint index) {
    if (OP == RD_ARGMAX || OP == RD_ARGMIN) {
        st_i64(0u, out_e, uvec2(index, 0u));
        return;
    }
    if (OP == RD_MEAN) value = p.n_red == 0u ? TF_NAN : value / float(p.n_red);
    st_float(0u, DT_OUT, out_e, value);
}

// One invocation per output element.
void reduce_serial(uint o) {
    uint first, out_e;
    output_at(o, first, out_e);
    bool arg = OP == RD_ARGMAX || OP == RD_ARGMIN;
    bool extreme = OP == RD_MAX || OP == RD_MIN;
    float acc = 0.0;
    uint index = 0u;
    for (uint r = 0u; r < p.n_red; ++r) {
        float x = ld_float(1u, DT_IN, input_at(first, r));
        if (arg) {
            if (r == 0u || beats(x, r, acc, index)) {
                acc = x;
                index = r;
            }
        } else {
            acc = extreme && r == 0u ? x : combine(acc, x);
        }
    }
    if (OP == RD_VAR) {
        float mean = acc / float(p.n_red);
        float squares = 0.0;
        for (uint r = 0u; r < p.n_red; ++r) {
            float d = ld_float(1u, DT_IN, input_at(first, r)) - mean;
            squares += d * d;
        }
        acc = squares / divisor();
    }
    finish(out_e, acc, index);
}

// Tree reduction of s_value (and s_index for arg ops) into element 0.
void tree(bool arg) {
    for (uint half_ = 128u; half_ > 0u; half_ >>= 1u) {
        barrier();
        uint t = gl_LocalInvocationID.x;
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
    barrier();
}

// A workgroup per output element; threads take every 256th reduced element.
void reduce_group(uint o) {
    uint first, out_e;
    output_at(o, first, out_e);
    uint t = gl_LocalInvocationID.x;
    bool arg = OP == RD_ARGMAX || OP == RD_ARGMIN;
    bool extreme = OP == RD_MAX || OP == RD_MIN;
    // Max, min and arg start from the thread's first element; threads with none take element 0
    // (a duplicate does not change an extreme; for arg ops its index is never smaller).
    uint start = t < p.n_red ? t : 0u;
    float acc = extreme || arg ? ld_float(1u, DT_IN, input_at(first, start)) : 0.0;
    uint index = start;
    for (uint r = t; r < p.n_red; r += 256u) {
        float x = ld_float(1u, DT_IN, input_at(first, r));
        if (arg) {
            if (beats(x, r, acc, index)) {
                acc = x;
                index = r;
            }
        } else if (!(extreme && r == start)) {
            acc = combine(acc, x);
        }
    }
    s_value[t] = acc;
    s_index[t] = index;
    tree(arg);
    float value = s_value[0];
    uint best = s_index[0];
    if (OP == RD_VAR) {
        float mean = value / float(p.n_red);
        float squares = 0.0;
        for (uint r = t; r < p.n_red; r += 256u) {
            float d = ld_float(1u, DT_IN, input_at(first, r)) - mean;
            squares += d * d;
        }
        barrier();
        s_value[t] = squares;
        tree(false);
        value = s_value[0] / divisor();
    }
    if (t == 0u) finish(out_e, value, best);
    barrier();  // s_value is reused by this workgroup's next output element
}

void main() {
    p = tf_p;
    if (PER_GROUP == 0u) {
        uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
        for (uint o = gl_GlobalInvocationID.x; o < p.n_out; o += step) reduce_serial(o);
        return;
    }
    for (uint o = gl_WorkGroupID.x; o < p.n_out; o += gl_NumWorkGroups.x) reduce_group(o);
}
