// Every elementwise op: unary and binary math, comparisons, where, cast, strided copy and fill.
// The OpenCL C port of shaders/elementwise.comp (same selectors, same ew_params, same results):
// slot 0 is the output, slots 1..3 the inputs, each with its own strides over the output's
// merged shape. 256 work-items per group, grid-stride loop.
TF_SPEC(0, uint, OP, 0u)      // EW_* below
TF_SPEC(1, uint, DT_OUT, 0u)  // the output's dtype
TF_SPEC(2, uint, DT_IN, 0u)   // the inputs' dtype (where: of a and b)
TF_SPEC(3, uint, RANK, 1u)    // merged axes, 1..8; rank 1: element i at base + i * stride
TF_SPEC(4, uint, PACKED, 0u)  // 4 (bool) or 2 (f16, bf16): output contiguous and word-aligned, a
                              // word of PACKED elements per work-item; 0: an element each

typedef struct {
    uint count, rank, pad0_, pad1_;
    uint shape[8];
    uint div_m[8], div_s[8];
    uint base[4];
    uint strides[32];  // [slot * 8 + axis]
    uint arg[4];       // FILL: raw value in arg[0..1]; CLAMP: f32 bounds
} ew_params;

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
#define EW_ADD 32u
#define EW_SUB 33u
#define EW_MUL 34u
#define EW_DIV 35u
#define EW_POW 36u
#define EW_MAXIMUM 37u
#define EW_MINIMUM 38u
#define EW_RELU_BACKWARD 39u
#define EW_GELU_BACKWARD 40u
#define EW_EQ 64u
#define EW_NE 65u
#define EW_LT 66u
#define EW_LE 67u
#define EW_GT 68u
#define EW_GE 69u
#define EW_WHERE 80u
#define EW_COPY 96u
#define EW_FILL 112u

#define N_IN (OP == EW_FILL ? 0u : OP < EW_ADD ? 1u : OP == EW_WHERE ? 3u : OP == EW_COPY ? 1u : 2u)

float unary_f32(float x, uint2 arg) {
    switch (OP) {
    case EW_NEG: return -x;
    case EW_EXP: return exp(x);
    case EW_RELU: return tf_isnan(x) ? x : x < 0.0f ? 0.0f : x;
    case EW_ABS: return fabs(x);
    case EW_LOG: return tf_log(x);
    case EW_SQRT: return tf_sqrt(x);
    case EW_RSQRT: return tf_rsqrt(x);
    case EW_SIN: return sin(x);
    case EW_COS: return cos(x);
    case EW_TANH: return tf_tanh(x);
    case EW_SIGMOID: return tf_sigmoid(x);
    case EW_GELU:
        if (tf_isinf(x)) return x > 0.0f ? x : -0.0f;
        return 0.5f * x * tf_erfc(-x * 0.70710678118654752f);
    case EW_GELU_TANH: {
        if (tf_isinf(x)) return x > 0.0f ? x : -0.0f;
        float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
        return x * tf_sigmoid(2.0f * u);
    }
    case EW_SILU: return tf_isinf(x) ? (x > 0.0f ? x : -0.0f) : x * tf_sigmoid(x);
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
        float lo = as_float(arg.x), hi = as_float(arg.y);
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
    case EW_RELU_BACKWARD: return b > 0.0f || tf_isnan(b) ? a : 0.0f;
    // dy (Phi(x) + x phi(x)) as written: NaN at x = +-inf (inf * 0), as on cpu.
    case EW_GELU_BACKWARD:
        return a * (0.5f * tf_erfc(-b * 0.70710678118654752f) + b * (0.39894228040143268f * exp(-0.5f * b * b)));
    }
    return TF_NAN;
}

// i32 and i64 ops wrap (two's complement), like the cpu plugin.
uint2 integer_op(uint2 a, uint2 b) {
    if (DT_OUT == DT_I32) {
        int x = (int)a.x, y = (int)b.x;
        int r = 0;
        switch (OP) {
        case EW_NEG: r = (int)(0u - a.x); break;
        case EW_RELU: r = x < 0 ? 0 : x; break;
        case EW_ABS: r = x < 0 ? (int)(0u - a.x) : x; break;
        case EW_SQUARE: r = (int)(a.x * a.x); break;
        case EW_ADD: r = (int)(a.x + b.x); break;
        case EW_SUB: r = (int)(a.x - b.x); break;
        case EW_MUL: r = (int)(a.x * b.x); break;
        case EW_MAXIMUM: r = max(x, y); break;
        case EW_MINIMUM: r = min(x, y); break;
        case EW_RELU_BACKWARD: r = y <= 0 ? 0 : x; break;
        }
        return (uint2)((uint)r, 0u);
    }
    switch (OP) {
    case EW_NEG: return i64_neg(a);
    case EW_RELU: return (int)a.y < 0 ? (uint2)(0u, 0u) : a;
    case EW_ABS: return (int)a.y < 0 ? i64_neg(a) : a;
    case EW_SQUARE: return i64_mul(a, a);
    case EW_ADD: return i64_add(a, b);
    case EW_SUB: return i64_sub(a, b);
    case EW_MUL: return i64_mul(a, b);
    case EW_MAXIMUM: return i64_lt(a, b) ? b : a;
    case EW_MINIMUM: return i64_lt(b, a) ? b : a;
    case EW_RELU_BACKWARD: return (int)b.y < 0 || eq2(b, (uint2)(0u, 0u)) ? (uint2)(0u, 0u) : a;
    }
    return (uint2)(0u, 0u);
}

bool compare(uint2 a, uint2 b) {
    bool less, equal;
    if (tf_is_float(DT_IN)) {
        float x = tf_raw_to_f32(a, DT_IN), y = tf_raw_to_f32(b, DT_IN);  // exact
        if (tf_isnan(x) || tf_isnan(y)) return OP == EW_NE;
        less = x < y;
        equal = x == y;
    } else if (DT_IN == DT_I64) {
        less = i64_lt(a, b);
        equal = eq2(a, b);
    } else if (DT_IN == DT_I32) {
        less = (int)a.x < (int)b.x;
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
    return !less;
}

uint2 evaluate(TF_T T, uint o1, uint o2, uint o3, uint2 arg) {
    if (OP < EW_EQ) {
        bool binary = OP >= EW_ADD;
        if (!tf_is_float(DT_OUT))
            return integer_op(ld_raw(T[1], DT_OUT, o1), binary ? ld_raw(T[2], DT_OUT, o2) : (uint2)(0u, 0u));
        // f16 and bf16 compute in f32 and round once to the output's dtype.
        float a = ld_float(T[1], DT_OUT, o1);
        float r = binary ? binary_f32(a, ld_float(T[2], DT_OUT, o2)) : unary_f32(a, arg);
        return (uint2)(DT_OUT == DT_F32 ? as_uint(r) : tf_f32_to_half(DT_OUT, r), 0u);
    }
    if (OP <= EW_GE) return (uint2)(compare(ld_raw(T[1], DT_IN, o1), ld_raw(T[2], DT_IN, o2)) ? 1u : 0u, 0u);
    if (OP == EW_WHERE) return ld_bool(T[1], o1) ? ld_raw(T[2], DT_IN, o2) : ld_raw(T[3], DT_IN, o3);
    if (OP == EW_COPY) return tf_convert(ld_raw(T[1], DT_IN, o1), DT_IN, DT_OUT);
    return arg;  // EW_FILL
}

// Element indices of output element i in slots 0..3.
uint4 offsets_of(const ew_params *p, uint i) {
    uint4 base = (uint4)(p->base[0], p->base[1], p->base[2], p->base[3]);
    if (RANK == 1u)
        return base + i * (uint4)(p->strides[0], p->strides[8], p->strides[16], p->strides[24]);
    uint off[4] = {base.s0, base.s1, base.s2, base.s3};
    for (int d = (int)RANK - 1; d >= 0; --d) {
        uint next = tf_div(i, p->div_m[d], p->div_s[d]);
        uint q = i - next * p->shape[d];
        i = next;
        for (uint k = 0u; k <= N_IN; ++k) off[k] += q * p->strides[k * 8u + (uint)d];
    }
    return (uint4)(off[0], off[1], off[2], off[3]);
}

__attribute__((reqd_work_group_size(256, 1, 1)))
kernel void tf_elementwise(const ew_params pv, TF_KERNEL_ARGS) {
    TF_SLOTS_INIT;
    const ew_params *p = &pv;
    uint step = get_num_groups(0) * 256u;
    uint count = p->count;
    uint2 arg = (uint2)(p->arg[0], p->arg[1]);
    if (PACKED == 0u) {
        for (uint i = get_global_id(0); i < count; i += step) {
            uint4 off = offsets_of(p, i);
            st_raw(T[0], DT_OUT, off.x, evaluate(T, off.y, off.z, off.w, arg));
        }
        return;
    }
    // Output contiguous, base a multiple of PACKED: word u holds elements PACKED u .. PACKED u +
    // PACKED - 1 (bytes of a bool, halves of an f16 or bf16), written with one plain store.
    uint words = (count + PACKED - 1u) / PACKED;
    uint bits = 32u / PACKED;
    for (uint u = get_global_id(0); u < words; u += step) {
        uint first = PACKED * u;
        if (first + PACKED <= count) {
            uint word = 0u;
            for (uint k = 0u; k < PACKED; ++k) {
                uint4 off = offsets_of(p, first + k);
                uint v = evaluate(T, off.y, off.z, off.w, arg).x;
                word |= (PACKED == 4u ? (v != 0u ? 1u : 0u) : v) << (bits * k);
            }
            T[0][p->base[0] / PACKED + u] = word;
        } else {
            // The last, partial word: its other elements may belong to other tensors.
            for (uint i = first; i < count; ++i) {
                uint4 off = offsets_of(p, i);
                st_raw(T[0], DT_OUT, off.x, evaluate(T, off.y, off.z, off.w, arg));
            }
        }
    }
}
