// Every elementwise op: unary and binary math, comparisons, where, cast, strided copy and fill.
// Slot 0 is the output, slots 1..3 the inputs; all share the output's (merged) shape and each
// has its own strides, so broadcasting (stride 0) and any view cost nothing extra.
// Mirrors ew_params in plugins/vulkan/kernels.hpp.
layout(local_size_x = 256) in;

struct ew_params {
    uint op;        // EW_* below
    uint count;     // output elements
    uint rank;      // merged axes, 0..8
    uint packed;    // 1: bool output, contiguous, word-aligned: four elements per invocation
    uint shape[8];
    uint dtype[4];  // per slot
    uint base[4];   // element index of element [0, ..., 0] per slot
    uint strides[32];  // [slot * 8 + axis], in elements
    uint arg[4];    // FILL: raw value in arg[0..1]; CLAMP: f32 bounds in arg[0], arg[1]
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
// Binary ops (two inputs of the output's dtype).
#define EW_ADD 32u
#define EW_SUB 33u
#define EW_MUL 34u
#define EW_DIV 35u
#define EW_POW 36u
#define EW_MAXIMUM 37u
#define EW_MINIMUM 38u
// Comparisons (two inputs of dtype[1]; bool output), in ops.def order: eq ne lt le gt ge.
#define EW_EQ 64u
#define EW_GE 69u
#define EW_WHERE 80u
// Copy with conversion from dtype[1] to dtype[0] (contiguous and cast).
#define EW_COPY 96u
#define EW_FILL 112u

float unary_f32(uint op, float x) {
    switch (op) {
    case EW_NEG: return -x;
    case EW_EXP: return exp(x);
    case EW_RELU: return x < 0.0 ? 0.0 : x;
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
    case EW_CLAMP: {
        if (tf_isnan(x)) return x;
        float v = x < uintBitsToFloat(p.arg[0]) ? uintBitsToFloat(p.arg[0]) : x;
        return v > uintBitsToFloat(p.arg[1]) ? uintBitsToFloat(p.arg[1]) : v;
    }
    }
    return TF_NAN;
}

float binary_f32(uint op, float a, float b) {
    switch (op) {
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    case EW_DIV: return a / b;
    case EW_POW: return tf_pow(a, b);
    case EW_MAXIMUM: return tf_max(a, b);
    case EW_MINIMUM: return tf_min(a, b);
    }
    return TF_NAN;
}

// i32 and i64 ops wrap (two's complement), like the cpu plugin.
uvec2 integer_op(uint op, uint dtype, uvec2 a, uvec2 b) {
    if (dtype == DT_I32) {
        int x = int(a.x), y = int(b.x);
        int r = 0;
        switch (op) {
        case EW_NEG: r = -x; break;
        case EW_RELU: r = x < 0 ? 0 : x; break;
        case EW_ABS: r = x < 0 ? -x : x; break;
        case EW_SQUARE: r = x * x; break;
        case EW_ADD: r = x + y; break;
        case EW_SUB: r = x - y; break;
        case EW_MUL: r = x * y; break;
        case EW_MAXIMUM: r = max(x, y); break;
        case EW_MINIMUM: r = min(x, y); break;
        }
        return uvec2(uint(r), 0u);
    }
    switch (op) {
    case EW_NEG: return i64_neg(a);
    case EW_RELU: return int(a.y) < 0 ? uvec2(0u) : a;
    case EW_ABS: return int(a.y) < 0 ? i64_neg(a) : a;
    case EW_SQUARE: return i64_mul(a, a);
    case EW_ADD: return i64_add(a, b);
    case EW_SUB: return i64_sub(a, b);
    case EW_MUL: return i64_mul(a, b);
    case EW_MAXIMUM: return i64_lt(a, b) ? b : a;
    case EW_MINIMUM: return i64_lt(b, a) ? b : a;
    }
    return uvec2(0u);
}

// eq ne lt le gt ge on two raw values of dtype; NaN compares unequal and unordered.
bool compare(uint which, uint dtype, uvec2 a, uvec2 b) {
    bool less, equal;
    if (dtype == DT_F32) {
        float x = uintBitsToFloat(a.x), y = uintBitsToFloat(b.x);
        if (tf_isnan(x) || tf_isnan(y)) return which == 1u;
        less = x < y;
        equal = x == y;
    } else if (dtype == DT_I64) {
        less = i64_lt(a, b);
        equal = a == b;
    } else if (dtype == DT_I32) {
        less = int(a.x) < int(b.x);
        equal = a.x == b.x;
    } else {
        less = a.x < b.x;
        equal = a.x == b.x;
    }
    switch (which) {
    case 0u: return equal;
    case 1u: return !equal;
    case 2u: return less;
    case 3u: return less || equal;
    case 4u: return !less && !equal;
    }
    return !less;
}

// Element indices of output element i in every slot.
void offsets_of(uint i, out uint off[4]) {
    for (uint k = 0u; k < 4u; ++k) off[k] = p.base[k];
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint size = p.shape[d];
        uint q = i % size;
        i /= size;
        for (uint k = 0u; k < 4u; ++k) off[k] += q * p.strides[k * 8u + uint(d)];
    }
}

// The output value of the element at off, as raw bits of the output's dtype.
uvec2 evaluate(uint off[4]) {
    uint op = p.op;
    uint dt = p.dtype[0];
    if (op < EW_EQ) {
        bool binary = op >= EW_ADD;
        if (dt != DT_F32) {
            uvec2 b = binary ? ld_raw(2u, dt, off[2]) : uvec2(0u);
            return integer_op(op, dt, ld_raw(1u, dt, off[1]), b);
        }
        float a = ld_f32(1u, off[1]);
        float r = binary ? binary_f32(op, a, ld_f32(2u, off[2])) : unary_f32(op, a);
        return uvec2(floatBitsToUint(r), 0u);
    }
    if (op <= EW_GE) {
        uint it = p.dtype[1];
        return uvec2(compare(op - EW_EQ, it, ld_raw(1u, it, off[1]), ld_raw(2u, it, off[2])) ? 1u : 0u, 0u);
    }
    if (op == EW_WHERE) return ld_bool(1u, off[1]) ? ld_raw(2u, dt, off[2]) : ld_raw(3u, dt, off[3]);
    if (op == EW_COPY) return tf_convert(ld_raw(1u, p.dtype[1], off[1]), p.dtype[1], dt);
    return uvec2(p.arg[0], p.arg[1]);  // EW_FILL
}

void main() {
    uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint off[4];
    if (p.packed == 0u) {
        for (uint i = gl_GlobalInvocationID.x; i < p.count; i += step) {
            offsets_of(i, off);
            st_raw(0u, p.dtype[0], off[0], evaluate(off));
        }
        return;
    }
    // Bool output, contiguous, base a multiple of 4: word u holds elements 4u .. 4u + 3.
    uint words = (p.count + 3u) / 4u;
    for (uint u = gl_GlobalInvocationID.x; u < words; u += step) {
        uint first = 4u * u;
        if (first + 4u <= p.count) {
            uint word = 0u;
            for (uint k = 0u; k < 4u; ++k) {
                offsets_of(first + k, off);
                word |= (evaluate(off).x != 0u ? 1u : 0u) << (8u * k);
            }
            tf_t[0].w[(p.base[0] >> 2u) + u] = word;
        } else {
            // The last, partial word: its other bytes may belong to other tensors' elements.
            for (uint i = first; i < p.count; ++i) {
                offsets_of(i, off);
                st_bool(0u, off[0], evaluate(off).x != 0u);
            }
        }
    }
}
