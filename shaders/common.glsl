// The tinyfin shader library: bindings, element access for every dtype the kernels handle,
// conversions with the cpu plugin's rules, and float functions with their edge cases.
// assemble.py places it after the prelude (which defines TF_BINDING) and before each kernel.
//
// Tensors are arrays of 32-bit words whatever their dtype. A kernel addresses an element by its
// element index e (the plugin turns byte offsets into element indices):
//   f32, i32  word e
//   i64       words 2e (low) and 2e + 1 (high), two's complement
//   bool      byte e: bits 8 (e % 4) .. 8 (e % 4) + 7 of word e / 4; any non-zero byte is true
// Values travel between loads, conversions and stores as "raw" uvec2: f32 bits, i32 bits or a
// bool (0 or 1) in x with y = 0; an i64 in (x = low, y = high).

// tf_dtype values from plugin.h.
#define DT_F32 0u
#define DT_I32 3u
#define DT_I64 4u
#define DT_BOOL 5u

// Tensor slots bound per dispatch (binding 2).
#define TF_SLOTS 5

// Bits a kernel sets in tf_status[0] when the data breaks the op's contract; the plugin reads
// them after the batch finished and reports the op as failed.
#define TF_ERR_INDEX 1u

layout(std430, TF_BINDING(1)) buffer tf_status_block { uint tf_status[]; };
layout(std430, TF_BINDING(2)) buffer tf_tensor_block { uint w[]; } tf_t[TF_SLOTS];

void tf_report(uint bits) { atomicOr(tf_status[0], bits); }

// ---- Element access ----------------------------------------------------------------------------

float ld_f32(uint s, uint e) { return uintBitsToFloat(tf_t[s].w[e]); }
void st_f32(uint s, uint e, float v) { tf_t[s].w[e] = floatBitsToUint(v); }
int ld_i32(uint s, uint e) { return int(tf_t[s].w[e]); }
void st_i32(uint s, uint e, int v) { tf_t[s].w[e] = uint(v); }
uvec2 ld_i64(uint s, uint e) { return uvec2(tf_t[s].w[2u * e], tf_t[s].w[2u * e + 1u]); }
void st_i64(uint s, uint e, uvec2 v) {
    tf_t[s].w[2u * e] = v.x;
    tf_t[s].w[2u * e + 1u] = v.y;
}
bool ld_bool(uint s, uint e) { return ((tf_t[s].w[e >> 2u] >> ((e & 3u) * 8u)) & 0xffu) != 0u; }
// One byte of a word other invocations may be writing: clear, then set, both atomically.
void st_bool(uint s, uint e, bool v) {
    uint shift = (e & 3u) * 8u;
    atomicAnd(tf_t[s].w[e >> 2u], ~(0xffu << shift));
    if (v) atomicOr(tf_t[s].w[e >> 2u], 1u << shift);
}

uvec2 ld_raw(uint s, uint dtype, uint e) {
    if (dtype == DT_I64) return ld_i64(s, e);
    if (dtype == DT_BOOL) return uvec2(ld_bool(s, e) ? 1u : 0u, 0u);
    return uvec2(tf_t[s].w[e], 0u);
}

void st_raw(uint s, uint dtype, uint e, uvec2 v) {
    if (dtype == DT_I64) st_i64(s, e, v);
    else if (dtype == DT_BOOL) st_bool(s, e, v.x != 0u);
    else tf_t[s].w[e] = v.x;
}

// An index (label, row) stored as i32 or i64; false when it does not fit an int.
bool ld_index(uint s, uint dtype, uint e, out int value) {
    if (dtype == DT_I64) {
        uvec2 v = ld_i64(s, e);
        value = int(v.x);
        return v.y == uint(value >> 31);
    }
    value = ld_i32(s, e);
    return true;
}

// ---- Division by a divisor known to the host ------------------------------------------------------

// n / d for any 32-bit n, with (m, s) from the plugin's magic_of(d) (Granlund & Montgomery's
// multiply-and-shift; s = shift1 | shift2 << 8). Shaders divide element indices by shapes all the
// time, and lavapipe has no vector integer division: this is a multiply and two shifts.
uint tf_div(uint n, uint m, uint s) {
    uint hi, lo;
    umulExtended(m, n, hi, lo);
    return (hi + ((n - hi) >> (s & 0xffu))) >> (s >> 8u);
}

// ---- Floats --------------------------------------------------------------------------------------

// From the bits: compilers may fold x != x away.
bool tf_isnan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }
bool tf_isinf(float x) { return (floatBitsToUint(x) & 0x7fffffffu) == 0x7f800000u; }
bool tf_signbit(float x) { return (floatBitsToUint(x) & 0x80000000u) != 0u; }
#define TF_INF uintBitsToFloat(0x7f800000u)
#define TF_NAN uintBitsToFloat(0x7fc00000u)

// IEEE 754-2019 maximum/minimum: a NaN operand wins (a's first), -0 < +0.
float tf_max(float a, float b) {
    if (tf_isnan(a)) return a;
    if (tf_isnan(b)) return b;
    if (a == b) return uintBitsToFloat(floatBitsToUint(a) & floatBitsToUint(b));
    return a > b ? a : b;
}
float tf_min(float a, float b) {
    if (tf_isnan(a)) return a;
    if (tf_isnan(b)) return b;
    if (a == b) return uintBitsToFloat(floatBitsToUint(a) | floatBitsToUint(b));
    return a < b ? a : b;
}

// exp(x) - 1 without cancellation near 0.
float tf_expm1(float x) {
    if (abs(x) < 0.03) return x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0))));
    return exp(x) - 1.0;
}

// erfc with relative error below 1.2e-7 (Numerical Recipes' erfcc), any x.
float tf_erfc(float x) {
    float z = abs(x);
    float t = 1.0 / (1.0 + 0.5 * z);
    float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
              t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
              t * (-0.82215223 + t * 0.17087277)))))))));
    return x >= 0.0 ? r : 2.0 - r;
}

float tf_erf(float x) {
    if (tf_isnan(x)) return x;
    float z = abs(x);
    if (z < 0.5) {
        // Taylor series: relative error below 1e-8 on |x| < 0.5.
        float x2 = x * x;
        return 1.1283791671 * x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (1.0 / 10.0 + x2 * (-1.0 / 42.0 +
               x2 * (1.0 / 216.0 + x2 * (-1.0 / 1320.0))))));
    }
    float r = 1.0 - tf_erfc(z);
    return x < 0.0 ? -r : r;
}

float tf_tanh(float x) {
    if (tf_isnan(x)) return x;
    float z = abs(x);
    float r;
    if (z < 0.1) {
        float x2 = z * z;
        r = z * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
    } else if (z > 9.0) {
        r = 1.0;
    } else {
        float e = tf_expm1(2.0 * z);
        r = e / (e + 2.0);
    }
    return x < 0.0 ? -r : r;
}

// 1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) below: no overflow, no cancellation.
float tf_sigmoid(float x) {
    if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
    float e = exp(x);
    return e / (1.0 + e);
}

float tf_log(float x) {
    if (tf_isnan(x) || x < 0.0) return TF_NAN;
    if (x == 0.0) return -TF_INF;
    if (tf_isinf(x)) return x;
    return log(x);
}

float tf_sqrt(float x) {
    if (tf_isnan(x) || x < 0.0) return TF_NAN;
    if (x == 0.0 || tf_isinf(x)) return x;
    return sqrt(x);
}

// 1 / sqrt(x) with C's edge cases: +-0 gives +-inf, +inf gives 0.
float tf_rsqrt(float x) {
    if (tf_isnan(x) || x < 0.0) return TF_NAN;
    if (x == 0.0) return tf_signbit(x) ? -TF_INF : TF_INF;
    if (tf_isinf(x)) return 0.0;
    return 1.0 / sqrt(x);
}

bool tf_is_odd_integer(float y) {
    return abs(y) < 16777216.0 && trunc(y) == y && mod(y, 2.0) == 1.0;
}

// C's pow, special cases included; exp2(y log2 |x|) elsewhere, exact for y = 1, 2, -1.
float tf_pow(float x, float y) {
    if (y == 0.0 || x == 1.0) return 1.0;
    if (tf_isnan(x) || tf_isnan(y)) return TF_NAN;
    bool y_int = tf_isinf(y) || trunc(y) == y;
    bool y_odd = !tf_isinf(y) && tf_is_odd_integer(abs(y));
    if (tf_isinf(y)) {
        float m = abs(x);
        if (m == 1.0) return 1.0;
        return (m > 1.0) == (y > 0.0) ? TF_INF : 0.0;
    }
    if (x == 0.0) {
        if (y < 0.0) return y_odd ? (tf_signbit(x) ? -TF_INF : TF_INF) : TF_INF;
        return y_odd ? x : 0.0;
    }
    if (tf_isinf(x)) {
        float r = y > 0.0 ? TF_INF : 0.0;
        return x < 0.0 && y_odd ? -r : r;
    }
    if (x < 0.0 && !y_int) return TF_NAN;
    if (y == 1.0) return x;
    if (y == 2.0) return x * x;
    if (y == -1.0) return 1.0 / x;
    float r = exp2(y * log2(abs(x)));
    return x < 0.0 && y_odd ? -r : r;
}

// ---- 64-bit integers as uvec2 -------------------------------------------------------------------

uvec2 i64_neg(uvec2 v) {
    uint carry;
    uint lo = uaddCarry(~v.x, 1u, carry);
    return uvec2(lo, ~v.y + carry);
}
uvec2 i64_add(uvec2 a, uvec2 b) {
    uint carry;
    uint lo = uaddCarry(a.x, b.x, carry);
    return uvec2(lo, a.y + b.y + carry);
}
uvec2 i64_sub(uvec2 a, uvec2 b) { return i64_add(a, i64_neg(b)); }
// The low 64 bits of the product (two's complement wraps like the cpu plugin).
uvec2 i64_mul(uvec2 a, uvec2 b) {
    uint hi, lo;
    umulExtended(a.x, b.x, hi, lo);
    return uvec2(lo, hi + a.x * b.y + a.y * b.x);
}
bool i64_lt(uvec2 a, uvec2 b) { return int(a.y) < int(b.y) || (a.y == b.y && a.x < b.x); }
uvec2 i64_from_int(int v) { return uvec2(uint(v), v < 0 ? 0xffffffffu : 0u); }

// One rounding from the exact value, like the cpu plugin: the 32 leading bits (a sticky bit
// standing in for the rest) convert exactly as far as float's rounding is concerned.
float i64_to_f32(uvec2 v) {
    bool neg = int(v.y) < 0;
    uvec2 m = neg ? i64_neg(v) : v;  // INT64_MIN stays 2^63 as an unsigned magnitude
    if (m.y == 0u) return neg ? -float(m.x) : float(m.x);
    int lead = 31 - findMSB(m.y);  // leading zeros of the high word
    uint top = lead == 0 ? m.y : (m.y << uint(lead)) | (m.x >> uint(32 - lead));
    uint rest = lead == 0 ? m.x : m.x << uint(lead);
    if (rest != 0u) top |= 1u;
    float r = float(top) * exp2(float(32 - lead));
    return neg ? -r : r;
}

// Truncates toward zero; NaN gives 0, beyond the range saturates (the cpu plugin's rules).
uvec2 f32_to_i64(float x) {
    if (tf_isnan(x)) return uvec2(0u);
    float t = trunc(x);
    if (t >= 9223372036854775808.0) return uvec2(0xffffffffu, 0x7fffffffu);
    if (t <= -9223372036854775808.0) return uvec2(0u, 0x80000000u);
    float a = abs(t);
    float hi = floor(a * (1.0 / 4294967296.0));
    uvec2 m = uvec2(uint(a - hi * 4294967296.0), uint(hi));
    return t < 0.0 ? i64_neg(m) : m;
}

int f32_to_i32(float x) {
    if (tf_isnan(x)) return 0;
    float t = trunc(x);
    if (t >= 2147483648.0) return 2147483647;
    if (t <= -2147483648.0) return -2147483647 - 1;
    return int(t);
}

// A raw value of dtype from as a raw value of dtype to (cast's rules).
uvec2 tf_convert(uvec2 v, uint from, uint to) {
    if (to == DT_BOOL) {
        if (from == DT_F32) return uvec2((v.x & 0x7fffffffu) != 0u ? 1u : 0u, 0u);  // NaN is true
        return uvec2((v.x | v.y) != 0u ? 1u : 0u, 0u);
    }
    if (from == to) return v;
    if (to == DT_F32) {
        if (from == DT_I32) return uvec2(floatBitsToUint(float(int(v.x))), 0u);
        if (from == DT_I64) return uvec2(floatBitsToUint(i64_to_f32(v)), 0u);
        return uvec2(floatBitsToUint(v.x != 0u ? 1.0 : 0.0), 0u);  // bool
    }
    if (to == DT_I32) {
        if (from == DT_F32) return uvec2(uint(f32_to_i32(uintBitsToFloat(v.x))), 0u);
        return uvec2(v.x, 0u);  // i64 wraps; bool is 0 or 1
    }
    // to i64
    if (from == DT_F32) return f32_to_i64(uintBitsToFloat(v.x));
    if (from == DT_I32) return i64_from_int(int(v.x));
    return uvec2(v.x, 0u);
}

// Bits of 0 and 1 in dtype (one_hot's values).
uvec2 tf_one(uint dtype, bool on) {
    if (!on) return uvec2(0u);
    return dtype == DT_F32 ? uvec2(floatBitsToUint(1.0), 0u) : uvec2(1u, 0u);
}
