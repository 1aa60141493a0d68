// The tinyfin kernel library in OpenCL C: element access per dtype, conversions with the cpu
// plugin's rules and float functions with their edge cases. A port of shaders/common.glsl
// (read that file for the why of each function); only what OpenCL spells differently changes:
//   - a tensor is a `global uint *` (the plugin passes the buffer and the word offset of its
//     bound range); helpers take it instead of a slot number,
//   - the status word is a `global uint *` passed to the kernels that report,
//   - selectors (TF_SPEC lines of each kernel) arrive as -D build options,
//   - the program is built with -cl-single-precision-constant (1.0 is a float, as in GLSL) and
//     FP_CONTRACT off (no fused multiply-adds the cpu plugin does not make either).
#pragma OPENCL FP_CONTRACT OFF

// A kernel's selector: TF_SPEC(id, type, NAME, default) at the start of a line. The plugin
// passes -DNAME=value for each (the default when the dispatch leaves it out).
#define TF_SPEC(id, type, name, value)

// tf_dtype values from plugin.h.
#define DT_F32 0u
#define DT_F16 1u
#define DT_BF16 2u
#define DT_I32 3u
#define DT_I64 4u
#define DT_BOOL 5u

#define TF_SLOTS 5
#define TF_ERR_INDEX 1u

// Every kernel's arguments after its params struct: the status word (for kernels that may
// report; the plugin passes a word of its own per reporting dispatch), the five tensor slots
// (slot 0 = output) and the word offset of each slot's bound range.
#define TF_KERNEL_ARGS global uint *tf_status, global uint *tf_b0, global uint *tf_b1, global uint *tf_b2, \
    global uint *tf_b3, global uint *tf_b4, uint8 tf_off
// The slots as an array T[s], in private memory.
#define TF_SLOTS_INIT global uint *T[TF_SLOTS] = {tf_b0 + tf_off.s0, tf_b1 + tf_off.s1, tf_b2 + tf_off.s2, \
    tf_b3 + tf_off.s3, tf_b4 + tf_off.s4}
// The type helpers take the slots array as.
#define TF_T global uint *const *
// This dispatch's status word (word 0, never read, for dispatches that do not report).
#define TF_STATUS (tf_status + tf_off.s5)

void tf_report(global uint *status, uint bits) { atomic_or(status, bits); }

// ---- Element access ----------------------------------------------------------------------------

float ld_f32(global uint *t, uint e) { return as_float(t[e]); }
void st_f32(global uint *t, uint e, float v) { t[e] = as_uint(v); }
int ld_i32(global uint *t, uint e) { return (int)t[e]; }
uint2 ld_i64(global uint *t, uint e) { return (uint2)(t[2u * e], t[2u * e + 1u]); }
void st_i64(global uint *t, uint e, uint2 v) {
    t[2u * e] = v.x;
    t[2u * e + 1u] = v.y;
}
bool ld_bool(global uint *t, uint e) { return ((t[e >> 2u] >> ((e & 3u) * 8u)) & 0xffu) != 0u; }
// One byte of a word other work-items may be writing: clear, then set, both atomically.
void st_bool(global uint *t, uint e, bool v) {
    uint shift = (e & 3u) * 8u;
    atomic_and(t + (e >> 2u), ~(0xffu << shift));
    if (v) atomic_or(t + (e >> 2u), 1u << shift);
}

// ---- 16-bit floats -------------------------------------------------------------------------------
// f16 and bf16 are storage only, as in common.glsl: loaded as f32 (exact), computed and
// accumulated in f32, rounded once on store. The conversions are common.glsl's integer code,
// not vload_half/vstore_half or the device's half type: every driver then rounds the same way
// (nearest, ties to even; NaN quiet with its sign and top payload bits), bit for bit with the
// vulkan, opengl and cpu plugins, and no cl_khr_fp16 is needed. An element is a ushort of the
// tensor's words (byte-addressable stores are core since OpenCL 1.1), so unlike the GLSL kernels
// no atomics are needed to keep the other half of a word.

bool tf_is_float(uint dtype) { return dtype == DT_F32 || dtype == DT_F16 || dtype == DT_BF16; }

float tf_f16_to_f32(uint h) {
    uint sign = (h & 0x8000u) << 16u;
    uint e = (h >> 10u) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return as_float(sign | 0x7f800000u | (m << 13u) | (m != 0u ? 0x400000u : 0u));
    if (e == 0u) {
        if (m == 0u) return as_float(sign);
        int lead = 31 - (int)clz(m);  // m * 2^-24 = 1.f * 2^(lead - 24)
        return as_float(sign | ((uint)(lead + 103) << 23u) | ((m << (uint)(23 - lead)) & 0x7fffffu));
    }
    return as_float(sign | ((e + 112u) << 23u) | (m << 13u));
}

float tf_bf16_to_f32(uint h) { return as_float(h << 16u); }

uint tf_f32_to_f16(float x) {
    uint b = as_uint(x);
    uint sign = (b >> 16u) & 0x8000u;
    uint e = (b >> 23u) & 0xffu, m = b & 0x7fffffu;
    if (e == 0xffu) return sign | 0x7c00u | (m != 0u ? 0x200u | (m >> 13u) : 0u);
    if (e > 142u) return sign | 0x7c00u;
    if (e >= 113u) {
        uint v = ((e - 112u) << 10u) | (m >> 13u);
        uint rest = m & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (v & 1u) != 0u)) v += 1u;
        return sign | v;
    }
    uint shift = 126u - e;
    if (e == 0u || shift > 24u) return sign;
    uint mag = m | 0x800000u;
    uint q = mag >> shift;
    uint rest = mag & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rest > half_ || (rest == half_ && (q & 1u) != 0u)) q += 1u;
    return sign | q;
}

uint tf_f32_to_bf16(float x) {
    uint b = as_uint(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (b >> 16u) | 0x40u;
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

uint tf_f32_to_half(uint dtype, float x) { return dtype == DT_F16 ? tf_f32_to_f16(x) : tf_f32_to_bf16(x); }

uint ld_h16(global uint *t, uint e) { return ((global ushort *)t)[e]; }
void st_h16(global uint *t, uint e, uint bits) { ((global ushort *)t)[e] = (ushort)bits; }

// A float element of dtype f32, f16 or bf16, as f32; stores round once to the dtype.
float ld_float(global uint *t, uint dtype, uint e) {
    if (dtype == DT_F16) return tf_f16_to_f32(ld_h16(t, e));
    if (dtype == DT_BF16) return tf_bf16_to_f32(ld_h16(t, e));
    return ld_f32(t, e);
}
void st_float(global uint *t, uint dtype, uint e, float v) {
    if (dtype == DT_F32) st_f32(t, e, v);
    else st_h16(t, e, tf_f32_to_half(dtype, v));
}

uint2 ld_raw(global uint *t, uint dtype, uint e) {
    if (dtype == DT_I64) return ld_i64(t, e);
    if (dtype == DT_BOOL) return (uint2)(ld_bool(t, e) ? 1u : 0u, 0u);
    if (dtype == DT_F16 || dtype == DT_BF16) return (uint2)(ld_h16(t, e), 0u);
    return (uint2)(t[e], 0u);
}

void st_raw(global uint *t, uint dtype, uint e, uint2 v) {
    if (dtype == DT_I64) st_i64(t, e, v);
    else if (dtype == DT_BOOL) st_bool(t, e, v.x != 0u);
    else if (dtype == DT_F16 || dtype == DT_BF16) st_h16(t, e, v.x);
    else t[e] = v.x;
}

bool eq2(uint2 a, uint2 b) { return a.x == b.x && a.y == b.y; }

// An index stored as i32 or i64; false when it does not fit an int.
bool ld_index(global uint *t, uint dtype, uint e, int *value) {
    if (dtype == DT_I64) {
        uint2 v = ld_i64(t, e);
        *value = (int)v.x;
        return v.y == (uint)(*value >> 31);
    }
    *value = ld_i32(t, e);
    return true;
}

// ---- Division by a divisor known to the host (magic_of in plugins/gpu) ---------------------------

uint tf_div(uint n, uint m, uint s) {
    uint hi = mul_hi(m, n);
    return (hi + ((n - hi) >> (s & 0xffu))) >> (s >> 8u);
}

// ---- Floats --------------------------------------------------------------------------------------

bool tf_isnan(float x) { return (as_uint(x) & 0x7fffffffu) > 0x7f800000u; }
bool tf_isinf(float x) { return (as_uint(x) & 0x7fffffffu) == 0x7f800000u; }
bool tf_signbit(float x) { return (as_uint(x) & 0x80000000u) != 0u; }
#define TF_INF as_float(0x7f800000u)
#define TF_NAN as_float(0x7fc00000u)

float tf_max(float a, float b) {
    if (tf_isnan(a)) return a;
    if (tf_isnan(b)) return b;
    if (a == b) return as_float(as_uint(a) & as_uint(b));
    return a > b ? a : b;
}
float tf_min(float a, float b) {
    if (tf_isnan(a)) return a;
    if (tf_isnan(b)) return b;
    if (a == b) return as_float(as_uint(a) | as_uint(b));
    return a < b ? a : b;
}

// GLSL's fract: x - floor(x).
float tf_fract(float x) { return x - floor(x); }

float tf_expm1(float x) {
    if (fabs(x) < 0.03f) return x * (1.0f + x * (0.5f + x * (1.0f / 6.0f + x * (1.0f / 24.0f))));
    return exp(x) - 1.0f;
}

float tf_erfc(float x) {
    float z = fabs(x);
    float t = 1.0f / (1.0f + 0.5f * z);
    float r = t * exp(-z * z - 1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f +
              t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f +
              t * (-0.82215223f + t * 0.17087277f)))))))));
    return x >= 0.0f ? r : 2.0f - r;
}

float tf_erf(float x) {
    if (tf_isnan(x)) return x;
    float z = fabs(x);
    if (z < 0.5f) {
        float x2 = x * x;
        return 1.1283791671f * x * (1.0f + x2 * (-1.0f / 3.0f + x2 * (1.0f / 10.0f + x2 * (-1.0f / 42.0f +
               x2 * (1.0f / 216.0f + x2 * (-1.0f / 1320.0f))))));
    }
    float r = 1.0f - tf_erfc(z);
    return x < 0.0f ? -r : r;
}

float tf_tanh(float x) {
    if (tf_isnan(x)) return x;
    float z = fabs(x);
    float r;
    if (z < 0.1f) {
        float x2 = z * z;
        r = z * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f))));
    } else if (z > 9.0f) {
        r = 1.0f;
    } else {
        float e = tf_expm1(2.0f * z);
        r = e / (e + 2.0f);
    }
    return x < 0.0f ? -r : r;
}

float tf_sigmoid(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + exp(-x));
    float e = exp(x);
    return e / (1.0f + e);
}

float tf_log(float x) {
    if (tf_isnan(x) || x < 0.0f) return TF_NAN;
    if (x == 0.0f) return -TF_INF;
    if (tf_isinf(x)) return x;
    return log(x);
}

float tf_sqrt(float x) {
    if (tf_isnan(x) || x < 0.0f) return TF_NAN;
    if (x == 0.0f || tf_isinf(x)) return x;
    return sqrt(x);
}

float tf_rsqrt(float x) {
    if (tf_isnan(x) || x < 0.0f) return TF_NAN;
    if (x == 0.0f) return tf_signbit(x) ? -TF_INF : TF_INF;
    if (tf_isinf(x)) return 0.0f;
    return 1.0f / sqrt(x);
}

bool tf_is_odd_integer(float y) {
    return fabs(y) < 16777216.0f && trunc(y) == y && (y - 2.0f * floor(y * 0.5f)) == 1.0f;
}

float tf_pow(float x, float y) {
    if (y == 0.0f || x == 1.0f) return 1.0f;
    if (tf_isnan(x) || tf_isnan(y)) return TF_NAN;
    bool y_int = tf_isinf(y) || trunc(y) == y;
    bool y_odd = !tf_isinf(y) && tf_is_odd_integer(fabs(y));
    if (tf_isinf(y)) {
        float m = fabs(x);
        if (m == 1.0f) return 1.0f;
        return (m > 1.0f) == (y > 0.0f) ? TF_INF : 0.0f;
    }
    if (x == 0.0f) {
        if (y < 0.0f) return y_odd ? (tf_signbit(x) ? -TF_INF : TF_INF) : TF_INF;
        return y_odd ? x : 0.0f;
    }
    if (tf_isinf(x)) {
        float r = y > 0.0f ? TF_INF : 0.0f;
        return x < 0.0f && y_odd ? -r : r;
    }
    if (x < 0.0f && !y_int) return TF_NAN;
    if (y == 1.0f) return x;
    if (y == 2.0f) return x * x;
    if (y == -1.0f) return 1.0f / x;
    float r = exp2(y * log2(fabs(x)));
    return x < 0.0f && y_odd ? -r : r;
}

// ---- Inverse trigonometric and hyperbolic functions ----------------------------------------------
// Cephes' single-precision polynomials (a few ulp, relative, also near 0 where the builtins'
// log/sqrt formulas lose digits); NaN outside the domain, the sign of a zero kept.

// asin(a) for a in [0, 1].
float tf_asin_abs(float a) {
    if (a < 1e-4f) return a;
    bool big = a > 0.5f;
    float z = big ? 0.5f * (1.0f - a) : a * a;
    float s = big ? sqrt(z) : a;
    float r = ((((4.2163199048e-2f * z + 2.4181311049e-2f) * z + 4.5470025998e-2f) * z + 7.4953002686e-2f) * z +
               1.6666752422e-1f) * z * s + s;
    return big ? 1.5707963267948966f - (r + r) : r;
}

float tf_asin(float x) {
    if (tf_isnan(x) || fabs(x) > 1.0f) return TF_NAN;
    float r = tf_asin_abs(fabs(x));
    return tf_signbit(x) ? -r : r;
}

float tf_acos(float x) {
    if (tf_isnan(x) || fabs(x) > 1.0f) return TF_NAN;
    if (x > 0.5f) return 2.0f * tf_asin_abs(sqrt(0.5f * (1.0f - x)));
    if (x < -0.5f) return 3.1415926535897932f - 2.0f * tf_asin_abs(sqrt(0.5f * (1.0f + x)));
    return 1.5707963267948966f - tf_asin(x);
}

float tf_atan(float x) {
    if (tf_isnan(x)) return x;
    float a = fabs(x), y = 0.0f, t = a;
    if (a > 2.414213562373095f) {
        y = 1.5707963267948966f;
        t = -1.0f / a;
    } else if (a > 0.4142135623730950f) {
        y = 0.78539816339744831f;
        t = (a - 1.0f) / (a + 1.0f);
    }
    float z = t * t;
    y += (((8.05374449538e-2f * z - 1.38776856032e-1f) * z + 1.99777106478e-1f) * z - 3.33329491539e-1f) * z * t + t;
    return tf_signbit(x) ? -y : y;
}

float tf_asinh(float x) {
    if (tf_isnan(x) || tf_isinf(x)) return x;
    float a = fabs(x), r;
    if (a > 1500.0f) {
        r = log(a) + 0.69314718055994531f;
    } else if (a < 0.5f) {
        float z = a * a;
        r = (((2.0122003309e-2f * z - 4.2699340972e-2f) * z + 7.4847586088e-2f) * z - 1.6666288134e-1f) * z * a + a;
    } else {
        r = log(a + sqrt(a * a + 1.0f));
    }
    return tf_signbit(x) ? -r : r;
}

float tf_acosh(float x) {
    if (tf_isnan(x) || x < 1.0f) return TF_NAN;
    if (tf_isinf(x)) return x;
    if (x > 1500.0f) return log(x) + 0.69314718055994531f;
    float z = x - 1.0f;
    if (z < 0.5f)
        return ((((1.7596881071e-3f * z - 7.5272886713e-3f) * z + 2.6454905019e-2f) * z - 1.1784741703e-1f) * z +
                1.4142135263f) * sqrt(z);
    return log(x + sqrt(z * (x + 1.0f)));
}

float tf_atanh(float x) {
    if (tf_isnan(x)) return x;
    float a = fabs(x), r;
    if (a > 1.0f) return TF_NAN;
    if (a == 1.0f) {
        r = TF_INF;
    } else if (a < 1e-4f) {
        r = a;
    } else if (a < 0.5f) {
        float z = a * a;
        r = ((((1.81740078349e-1f * z + 8.24370301058e-2f) * z + 1.46691431730e-1f) * z + 1.99782164500e-1f) * z +
             3.33337300303e-1f) * z * a + a;
    } else {
        r = 0.5f * log((1.0f + a) / (1.0f - a));
    }
    return tf_signbit(x) ? -r : r;
}

// ---- 64-bit integers as uint2 (x low, y high) ---------------------------------------------------

uint2 i64_neg(uint2 v) {
    uint lo = ~v.x + 1u;
    uint carry = lo < ~v.x ? 1u : 0u;
    return (uint2)(lo, ~v.y + carry);
}
uint2 i64_add(uint2 a, uint2 b) {
    uint lo = a.x + b.x;
    uint carry = lo < a.x ? 1u : 0u;
    return (uint2)(lo, a.y + b.y + carry);
}
uint2 i64_sub(uint2 a, uint2 b) { return i64_add(a, i64_neg(b)); }
uint2 i64_mul(uint2 a, uint2 b) {
    return (uint2)(a.x * b.x, mul_hi(a.x, b.x) + a.x * b.y + a.y * b.x);
}
bool i64_lt(uint2 a, uint2 b) { return (int)a.y < (int)b.y || (a.y == b.y && a.x < b.x); }
uint2 i64_from_int(int v) { return (uint2)((uint)v, v < 0 ? 0xffffffffu : 0u); }

float i64_to_f32(uint2 v) {
    bool neg = (int)v.y < 0;
    uint2 m = neg ? i64_neg(v) : v;
    if (m.y == 0u) return neg ? -(float)m.x : (float)m.x;
    int lead = (int)clz(m.y);
    uint top = lead == 0 ? m.y : (m.y << (uint)lead) | (m.x >> (uint)(32 - lead));
    uint rest = lead == 0 ? m.x : m.x << (uint)lead;
    if (rest != 0u) top |= 1u;
    float r = (float)top * exp2((float)(32 - lead));
    return neg ? -r : r;
}

uint2 f32_to_i64(float x) {
    if (tf_isnan(x)) return (uint2)(0u, 0u);
    float t = trunc(x);
    if (t >= 9223372036854775808.0f) return (uint2)(0xffffffffu, 0x7fffffffu);
    if (t <= -9223372036854775808.0f) return (uint2)(0u, 0x80000000u);
    float a = fabs(t);
    float hi = floor(a * (1.0f / 4294967296.0f));
    uint2 m = (uint2)((uint)(a - hi * 4294967296.0f), (uint)hi);
    return t < 0.0f ? i64_neg(m) : m;
}

int f32_to_i32(float x) {
    if (tf_isnan(x)) return 0;
    float t = trunc(x);
    if (t >= 2147483648.0f) return 2147483647;
    if (t <= -2147483648.0f) return -2147483647 - 1;
    return (int)t;
}

// An integer as f16 or bf16 bits, rounded once from its exact value (common.glsl).
uint tf_i64_to_half(uint2 v, uint dtype) {
    bool neg = (int)v.y < 0;
    uint2 m = neg ? i64_neg(v) : v;
    if (m.x == 0u && m.y == 0u) return 0u;
    uint sign = neg ? 0x8000u : 0u;
    int msb = m.y != 0u ? 63 - (int)clz(m.y) : 31 - (int)clz(m.x);
    uint top;
    if (msb >= 32) {
        int lead = 63 - msb;
        top = lead == 0 ? m.y : (m.y << (uint)lead) | (m.x >> (uint)(32 - lead));
        uint rest = lead == 0 ? m.x : m.x << (uint)lead;
        if (rest != 0u) top |= 1u;
    } else {
        top = m.x << (uint)(31 - msb);
    }
    uint mbits = dtype == DT_F16 ? 10u : 7u;
    uint shift = 31u - mbits;
    uint q = top >> shift;
    uint rest = top & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rest > half_ || (rest == half_ && (q & 1u) != 0u)) q += 1u;
    if ((q >> (mbits + 1u)) != 0u) {
        q >>= 1u;
        msb += 1;
    }
    uint top_e = dtype == DT_F16 ? 31u : 255u;
    uint biased = (uint)msb + (dtype == DT_F16 ? 15u : 127u);
    if (biased >= top_e) return sign | (top_e << mbits);
    return sign | (biased << mbits) | (q & ((1u << mbits) - 1u));
}

// A raw float value (f32, f16, bf16) as f32.
float tf_raw_to_f32(uint2 v, uint dtype) {
    if (dtype == DT_F16) return tf_f16_to_f32(v.x);
    if (dtype == DT_BF16) return tf_bf16_to_f32(v.x);
    return as_float(v.x);
}

// A raw value of dtype from as a raw value of dtype to (cast's rules, the cpu plugin's).
uint2 tf_convert(uint2 v, uint from, uint to) {
    if (to == DT_BOOL) {
        if (from == DT_F32) return (uint2)((v.x & 0x7fffffffu) != 0u ? 1u : 0u, 0u);
        if (from == DT_F16 || from == DT_BF16) return (uint2)((v.x & 0x7fffu) != 0u ? 1u : 0u, 0u);
        return (uint2)((v.x | v.y) != 0u ? 1u : 0u, 0u);
    }
    if (from == to) return v;
    bool float_from = tf_is_float(from);
    if (to == DT_F16 || to == DT_BF16) {
        if (float_from) return (uint2)(tf_f32_to_half(to, tf_raw_to_f32(v, from)), 0u);
        if (from == DT_BOOL) return (uint2)(v.x != 0u ? (to == DT_F16 ? 0x3c00u : 0x3f80u) : 0u, 0u);
        return (uint2)(tf_i64_to_half(from == DT_I32 ? i64_from_int((int)v.x) : v, to), 0u);
    }
    if (to == DT_F32) {
        if (float_from) return (uint2)(as_uint(tf_raw_to_f32(v, from)), 0u);
        if (from == DT_I32) return (uint2)(as_uint((float)(int)v.x), 0u);
        if (from == DT_I64) return (uint2)(as_uint(i64_to_f32(v)), 0u);
        return (uint2)(as_uint(v.x != 0u ? 1.0f : 0.0f), 0u);
    }
    if (to == DT_I32) {
        if (float_from) return (uint2)((uint)f32_to_i32(tf_raw_to_f32(v, from)), 0u);
        return (uint2)(v.x, 0u);
    }
    if (float_from) return f32_to_i64(tf_raw_to_f32(v, from));
    if (from == DT_I32) return i64_from_int((int)v.x);
    return (uint2)(v.x, 0u);
}

// Bits of 0 and 1 in dtype (one_hot's values).
uint2 tf_one(uint dtype, bool on) {
    if (!on) return (uint2)(0u, 0u);
    if (dtype == DT_F32) return (uint2)(as_uint(1.0f), 0u);
    if (dtype == DT_F16) return (uint2)(0x3c00u, 0u);
    if (dtype == DT_BF16) return (uint2)(0x3f80u, 0u);
    return (uint2)(1u, 0u);
}
