// Every elementwise op: unary and binary math, comparisons, where, cast, strided copy and fill.
// Slot 0 is the output, slots 1..3 the inputs; all share the output's (merged) shape and each
// has its own strides, so broadcasting (stride 0) and any view cost nothing extra.
// The op and dtypes are specialization constants: one small pipeline per (op, dtypes, layout)
// in use, instead of one kernel branching on them (lavapipe runs every branch of a kernel under
// masks). Mirrors ew_params and ew_spec in plugins/vulkan/kernels.hpp.
layout(local_size_x = 256) in;

TF_SPEC(0, uint, OP, 0u)      // EW_* below
TF_SPEC(1, uint, DT_OUT, 0u)  // the output's dtype
TF_SPEC(2, uint, DT_IN, 0u)   // the inputs' dtype (where: of a and b)
TF_SPEC(3, uint, RANK, 1u)    // merged axes, 1..8 (0 is sent as 1); rank 1: element i at base + i * stride
TF_SPEC(4, uint, PACKED, 0u)  // 4 (bool) or 2 (f16, bf16): output contiguous and word-aligned, a
                              // word of PACKED elements per invocation; 0: an element each

struct ew_params {
    uint count;       // output elements
    uint rank;        // merged axes, 0..8 (the RANK selector decides the walk)
    uint pad0_, pad1_;
    uint shape[8];
    uint div_m[8];    // shape[d] as a divisor (tf_div)
    uint div_s[8];
    uint base[4];     // element index of element [0, ..., 0] per slot
    uint strides[32]; // [slot * 8 + axis], in elements
    uint arg[4];      // FILL: raw value in arg[0..1]; CLAMP: f32 bounds in arg[0], arg[1]
};
layout(std430, TF_BINDING(0)) readonly buffer tf_params_block { ew_params p; };

// Unary ops (one input).
#define EW_NEG 0u
#define EW_EXP 1u
#define EW_RELU 2u
#define EW_ABS 3u
#define EW_LOG 4u
#define EW_SQRT 5u
#define EW_RSQRT 6u
#define EW_SIN 7u
#define EW_COS 8u
#define EW_TANH 9u
#define EW_SIGMOID 10u
#define EW_GELU 11u
#define EW_GELU_TANH 12u
#define EW_SILU 13u
#define EW_SQUARE 14u
#define EW_ERF 15u
#define EW_CLAMP 16u
#define EW_ASIN 17u
#define EW_ACOS 18u
#define EW_ATAN 19u
#define EW_ASINH 20u
#define EW_ACOSH 21u
#define EW_ATANH 22u
// Float ops (f32, f16, bf16) compute in f32 and round once to the output's dtype.
// Binary ops (two inputs of the output's dtype).
#define EW_ADD 32u
#define EW_SUB 33u
#define EW_MUL 34u
#define EW_DIV 35u
#define EW_POW 36u
#define EW_MAXIMUM 37u
#define EW_MINIMUM 38u
#define EW_RELU_BACKWARD 39u  // a = dy, b = x
#define EW_GELU_BACKWARD 40u  // a = dy, b = x
// Comparisons (two inputs of DT_IN; bool output), in ops.def order: eq ne lt le gt ge.
#define EW_EQ 64u
#define EW_NE 65u
#define EW_LT 66u
#define EW_LE 67u
#define EW_GT 68u
#define EW_GE 69u
#define EW_WHERE 80u
// Copy with conversion from DT_IN to DT_OUT (contiguous and cast).
#define EW_COPY 96u
#define EW_FILL 112u

// FILL's raw value, CLAMP's bounds: read once (see load_layout).
uvec2 g_arg;

// Inputs the op reads.
const uint N_IN = OP == EW_FILL ? 0u : OP < EW_ADD ? 1u : OP == EW_WHERE ? 3u : OP == EW_COPY ? 1u : 2u;

float unary_f32(float x) {
    switch (OP) {
    case EW_NEG: return -x;
    case EW_EXP: return exp(x);
    // NaN stays NaN: a compiler may turn the plain select into max(x, 0), which drops NaN.
    case EW_RELU: return tf_isnan(x) ? x : x < 0.0 ? 0.0 : x;
    case EW_ABS: return abs(x);
    case EW_LOG: return tf_log(x);
    case EW_SQRT: return tf_sqrt(x);
    case EW_RSQRT: return tf_rsqrt(x);
    case EW_SIN: return sin(x);
    case EW_COS: return cos(x);
    case EW_TANH: return tf_tanh(x);
    case EW_SIGMOID: return tf_sigmoid(x);
    case EW_GELU:
        if (tf_isinf(x)) return x > 0.0 ? x : -0.0;
        return 0.5 * x * tf_erfc(-x * 0.70710678118654752);
    case EW_GELU_TANH: {
        if (tf_isinf(x)) return x > 0.0 ? x : -0.0;
        float u = 0.79788456080286536 * (x + 0.044715 * x * x * x);
        return x * tf_sigmoid(2.0 * u);
    }
    case EW_SILU: return tf_isinf(x) ? (x > 0.0 ? x : -0.0) : x * tf_sigmoid(x);
    case EW_SQUARE: return x * x;
    case EW_ERF: return tf_erf(x);
    case EW_ASIN: return tf_asin(x);
    case EW_ACOS: return tf_acos(x);
    case EW_ATAN: return tf_atan(x);
    case EW_ASINH: return tf_asinh(x);
    case EW_ACOSH: return tf_acosh(x);
    case EW_ATANH: return tf_atanh(x);
    case EW_CLAMP: {
        if (tf_isnan(x)) return x;
        float lo = uintBitsToFloat(g_arg.x), hi = uintBitsToFloat(g_arg.y);
        float v = x < lo ? lo : x;
        return v > hi ? hi : v;
    }
    }
    return TF_NAN;
}

float binary_f32(float a, float b) {
    switch (OP) {
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    case EW_DIV: return a / b;
    case EW_POW: return tf_pow(a, b);
    case EW_MAXIMUM: return tf_max(a, b);
    case EW_MINIMUM: return tf_min(a, b);
    // dy where x > 0 or x is NaN (the cpu plugin's x <= 0 ? 0 : dy), NaN tested by its bits.
    case EW_RELU_BACKWARD: return b > 0.0 || tf_isnan(b) ? a : 0.0;
    // dy (Phi(x) + x phi(x)) as written: NaN at x = +-inf (inf * 0), as on cpu.
    case EW_GELU_BACKWARD:
        return a * (0.5 * tf_erfc(-b * 0.70710678118654752) + b * (0.39894228040143268 * exp(-0.5 * b * b)));
    }
    return TF_NAN;
}

// i32 and i64 ops wrap (two's complement), like the cpu plugin.
uvec2 integer_op(uvec2 a, uvec2 b) {
    if (DT_OUT == DT_I32) {
        int x = int(a.x), y = int(b.x);
        int r = 0;
        switch (OP) {
        case EW_NEG: r = -x; break;
        case EW_RELU: r = x < 0 ? 0 : x; break;
        case EW_ABS: r = x < 0 ? -x : x; break;
        case EW_SQUARE: r = x * x; break;
        case EW_ADD: r = x + y; break;
        case EW_SUB: r = x - y; break;
        case EW_MUL: r = x * y; break;
        case EW_MAXIMUM: r = max(x, y); break;
        case EW_MINIMUM: r = min(x, y); break;
        case EW_RELU_BACKWARD: r = y <= 0 ? 0 : x; break;
        }
        return uvec2(uint(r), 0u);
    }
    switch (OP) {
    case EW_NEG: return i64_neg(a);
    case EW_RELU: return int(a.y) < 0 ? uvec2(0u) : a;
    case EW_ABS: return int(a.y) < 0 ? i64_neg(a) : a;
    case EW_SQUARE: return i64_mul(a, a);
    case EW_ADD: return i64_add(a, b);
    case EW_SUB: return i64_sub(a, b);
    case EW_MUL: return i64_mul(a, b);
    case EW_MAXIMUM: return i64_lt(a, b) ? b : a;
    case EW_MINIMUM: return i64_lt(b, a) ? b : a;
    case EW_RELU_BACKWARD: return int(b.y) < 0 || b == uvec2(0u) ? uvec2(0u) : a;
    }
    return uvec2(0u);
}

// eq ne lt le gt ge on two raw values of DT_IN; NaN compares unequal and unordered.
bool compare(uvec2 a, uvec2 b) {
    bool less, equal;
    if (tf_is_float(DT_IN)) {
        float x = tf_raw_to_f32(a, DT_IN), y = tf_raw_to_f32(b, DT_IN);  // exact
        if (tf_isnan(x) || tf_isnan(y)) return OP == EW_NE;
        less = x < y;
        equal = x == y;
    } else if (DT_IN == DT_I64) {
        less = i64_lt(a, b);
        equal = a == b;
    } else if (DT_IN == DT_I32) {
        less = int(a.x) < int(b.x);
        equal = a.x == b.x;
    } else {
        less = a.x < b.x;
        equal = a.x == b.x;
    }
    switch (OP) {
    case EW_EQ: return equal;
    case EW_NE: return !equal;
    case EW_LT: return less;
    case EW_LE: return less || equal;
    case EW_GT: return !less && !equal;
    }
    return !less;  // EW_GE
}

// The output value of the element whose inputs sit at o1, o2, o3, as raw bits of DT_OUT.
uvec2 evaluate(uint o1, uint o2, uint o3) {
    if (OP < EW_EQ) {
        bool binary = OP >= EW_ADD;
        if (!tf_is_float(DT_OUT)) return integer_op(ld_raw(1u, DT_OUT, o1), binary ? ld_raw(2u, DT_OUT, o2) : uvec2(0u));
        float a = ld_float(1u, DT_OUT, o1);
        float r = binary ? binary_f32(a, ld_float(2u, DT_OUT, o2)) : unary_f32(a);
        return uvec2(DT_OUT == DT_F32 ? floatBitsToUint(r) : tf_f32_to_half(DT_OUT, r), 0u);
    }
    if (OP <= EW_GE) return uvec2(compare(ld_raw(1u, DT_IN, o1), ld_raw(2u, DT_IN, o2)) ? 1u : 0u, 0u);
    if (OP == EW_WHERE) return ld_bool(1u, o1) ? ld_raw(2u, DT_IN, o2) : ld_raw(3u, DT_IN, o3);
    if (OP == EW_COPY) return tf_convert(ld_raw(1u, DT_IN, o1), DT_IN, DT_OUT);
    return g_arg;  // EW_FILL
}

// The layout the element loop reads, in registers: the kernel reads the buffer once.
uint g_base[4], g_step[4], g_shape[8], g_div_m[8], g_div_s[8], g_strides[32];

void load_layout() {
    g_arg = uvec2(p.arg[0], p.arg[1]);
    for (uint k = 0u; k < 4u; ++k) {
        g_base[k] = p.base[k];
        g_step[k] = p.strides[k * 8u];
    }
    if (RANK == 1u) return;
    for (uint d = 0u; d < 8u; ++d) {
        g_shape[d] = p.shape[d];
        g_div_m[d] = p.div_m[d];
        g_div_s[d] = p.div_s[d];
        for (uint k = 0u; k <= N_IN; ++k) g_strides[k * 8u + d] = p.strides[k * 8u + d];
    }
}

// Element indices of output element i in slots 0..3.
uvec4 offsets_of(uint i) {
    if (RANK == 1u) return uvec4(g_base[0], g_base[1], g_base[2], g_base[3]) + i * uvec4(g_step[0], g_step[1], g_step[2], g_step[3]);
    uvec4 off = uvec4(g_base[0], g_base[1], g_base[2], g_base[3]);
    for (int d = int(RANK) - 1; d >= 0; --d) {
        uint next = tf_div(i, g_div_m[d], g_div_s[d]);
        uint q = i - next * g_shape[d];
        i = next;
        for (uint k = 0u; k <= N_IN; ++k) off[k] += q * g_strides[k * 8u + uint(d)];
    }
    return off;
}

void main() {
    uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint count = p.count;
    load_layout();
    if (PACKED == 0u) {
        for (uint i = gl_GlobalInvocationID.x; i < count; i += step) {
            uvec4 off = offsets_of(i);
            st_raw(0u, DT_OUT, off.x, evaluate(off.y, off.z, off.w));
        }
        return;
    }
    // Output contiguous, base a multiple of PACKED: word u holds elements PACKED u .. PACKED u +
    // PACKED - 1 (bytes of a bool, halves of an f16 or bf16), written with one plain store.
    uint words = (count + PACKED - 1u) / PACKED;
    uint bits = 32u / PACKED;
    for (uint u = gl_GlobalInvocationID.x; u < words; u += step) {
        uint first = PACKED * u;
        if (first + PACKED <= count) {
            uint word = 0u;
            for (uint k = 0u; k < PACKED; ++k) {
                uvec4 off = offsets_of(first + k);
                uint v = evaluate(off.y, off.z, off.w).x;
                word |= (PACKED == 4u ? (v != 0u ? 1u : 0u) : v) << (bits * k);
            }
            tf_t[0].w[g_base[0] / PACKED + u] = word;
        } else {
            // The last, partial word: its other elements may belong to other tensors.
            for (uint i = first; i < count; ++i) {
                uvec4 off = offsets_of(i);
                st_raw(0u, DT_OUT, off.x, evaluate(off.y, off.z, off.w));
            }
        }
    }
}
