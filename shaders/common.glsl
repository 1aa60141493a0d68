// The tinyfin shader library: bindings, element access for every dtype the kernels handle,
// conversions with the cpu plugin's rules, and float functions with their edge cases.
// assemble.py places it after the prelude (which defines TF_BINDING) and before each kernel.
//
// Tensors are arrays of 32-bit words whatever their dtype. A kernel addresses an element by its
// element index e (the plugin turns byte offsets into element indices):
//   f32, i32  word e
//   i64       words 2e (low) and 2e + 1 (high), two's complement
//   f16, bf16 half e: bits 16 (e % 2) .. 16 (e % 2) + 15 of word e / 2
//   bool      byte e: bits 8 (e % 4) .. 8 (e % 4) + 7 of word e / 4; any non-zero byte is true
// Values travel between loads, conversions and stores as "raw" uvec2: f32 bits, i32 bits, f16 or
// bf16 bits (16 of them) or a bool (0 or 1) in x with y = 0; an i64 in (x = low, y = high).
// f16 and bf16 are storage only: kernels load them as f32 (exact), compute and accumulate in
// f32, and round once when they store (tf_f32_to_f16, tf_f32_to_bf16: the cpu plugin's rules,
// bit for bit). Conversions are integer code, not packHalf2x16 or the device's 16-bit floats,
// so every driver rounds the same way (and no device feature is needed).

// tf_dtype values from plugin.h.
#define DT_F32 0u
#define DT_F16 1u
#define DT_BF16 2u
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

// ---- 16-bit floats -------------------------------------------------------------------------------

bool tf_is_float(uint dtype) { return dtype == DT_F32 || dtype == DT_F16 || dtype == DT_BF16; }

// Exact: every f16 is an f32 (subnormals become normal f32s); a NaN keeps its payload and comes
// out quiet, as on the cpu plugin (F16C, IEEE 754).
float tf_f16_to_f32(uint h) {
    uint sign = (h & 0x8000u) << 16u;
    uint e = (h >> 10u) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (m << 13u) | (m != 0u ? 0x400000u : 0u));
    if (e == 0u) {
        if (m == 0u) return uintBitsToFloat(sign);
        int lead = findMSB(m);  // m * 2^-24 = 1.f * 2^(lead - 24)
        return uintBitsToFloat(sign | (uint(lead + 103) << 23u) | ((m << uint(23 - lead)) & 0x7fffffu));
    }
    return uintBitsToFloat(sign | ((e + 112u) << 23u) | (m << 13u));
}

float tf_bf16_to_f32(uint h) { return uintBitsToFloat(h << 16u); }

// Round to nearest, ties to even, subnormals kept (no flush); past 65504 rounds to infinity.
// NaN keeps its sign and top payload bits and becomes quiet (never infinity).
uint tf_f32_to_f16(float x) {
    uint b = floatBitsToUint(x);
    uint sign = (b >> 16u) & 0x8000u;
    uint e = (b >> 23u) & 0xffu, m = b & 0x7fffffu;
    if (e == 0xffu) return sign | 0x7c00u | (m != 0u ? 0x200u | (m >> 13u) : 0u);
    if (e > 142u) return sign | 0x7c00u;  // >= 2^16
    if (e >= 113u) {
        // Normal in f16; a carry out of the mantissa steps the exponent, up to infinity.
        uint v = ((e - 112u) << 10u) | (m >> 13u);
        uint rest = m & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (v & 1u) != 0u)) v += 1u;
        return sign | v;
    }
    // Subnormal in f16 (units of 2^-24): the 24-bit significand shifted right by 126 - e.
    uint shift = 126u - e;
    if (e == 0u || shift > 24u) return sign;  // below half the smallest subnormal
    uint mag = m | 0x800000u;
    uint q = mag >> shift;
    uint rest = mag & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rest > half_ || (rest == half_ && (q & 1u) != 0u)) q += 1u;
    return sign | q;  // a carry into 0x400 is the smallest normal, correctly encoded
}

// The top half of the f32 bits, rounded to nearest even on the bits (exact across the
// subnormal boundary and into infinity); NaN quiet, sign and top payload kept.
uint tf_f32_to_bf16(float x) {
    uint b = floatBitsToUint(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (b >> 16u) | 0x40u;
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

uint tf_f32_to_half(uint dtype, float x) { return dtype == DT_F16 ? tf_f32_to_f16(x) : tf_f32_to_bf16(x); }

// Half e of a word; element e of a 16-bit tensor.
uint ld_h16(uint s, uint e) { return (tf_t[s].w[e >> 1u] >> ((e & 1u) * 16u)) & 0xffffu; }
// One half of a word whose other half another invocation may be writing: clear, then set, both
// atomically (each half has one writer, so the two steps never undo a neighbour's store).
void st_h16(uint s, uint e, uint bits) {
    uint shift = (e & 1u) * 16u;
    atomicAnd(tf_t[s].w[e >> 1u], ~(0xffffu << shift));
    if (bits != 0u) atomicOr(tf_t[s].w[e >> 1u], bits << shift);
}

// A float element of dtype f32, f16 or bf16, as f32; stores round once to the dtype.
float ld_float(uint s, uint dtype, uint e) {
    if (dtype == DT_F16) return tf_f16_to_f32(ld_h16(s, e));
    if (dtype == DT_BF16) return tf_bf16_to_f32(ld_h16(s, e));
    return ld_f32(s, e);
}
void st_float(uint s, uint dtype, uint e, float v) {
    if (dtype == DT_F32) st_f32(s, e, v);
    else st_h16(s, e, tf_f32_to_half(dtype, v));
}

uvec2 ld_raw(uint s, uint dtype, uint e) {
    if (dtype == DT_I64) return ld_i64(s, e);
    if (dtype == DT_BOOL) return uvec2(ld_bool(s, e) ? 1u : 0u, 0u);
    if (dtype == DT_F16 || dtype == DT_BF16) return uvec2(ld_h16(s, e), 0u);
    return uvec2(tf_t[s].w[e], 0u);
}

void st_raw(uint s, uint dtype, uint e, uvec2 v) {
    if (dtype == DT_I64) st_i64(s, e, v);
    else if (dtype == DT_BOOL) st_bool(s, e, v.x != 0u);
    else if (dtype == DT_F16 || dtype == DT_BF16) st_h16(s, e, v.x);
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

// ---- Inverse trigonometric and hyperbolic functions ----------------------------------------------
// Cephes' single-precision polynomials (a few ulp, relative, also near 0 where the builtins'
// log/sqrt formulas lose digits); NaN outside the domain, the sign of a zero kept.

// asin(a) for a in [0, 1].
float tf_asin_abs(float a) {
    if (a < 1e-4) return a;
    bool big = a > 0.5;
    float z = big ? 0.5 * (1.0 - a) : a * a;
    float s = big ? sqrt(z) : a;
    float r = ((((4.2163199048e-2 * z + 2.4181311049e-2) * z + 4.5470025998e-2) * z + 7.4953002686e-2) * z +
               1.6666752422e-1) * z * s + s;
    return big ? 1.5707963267948966 - (r + r) : r;
}

float tf_asin(float x) {
    if (tf_isnan(x) || abs(x) > 1.0) return TF_NAN;
    float r = tf_asin_abs(abs(x));
    return tf_signbit(x) ? -r : r;
}

float tf_acos(float x) {
    if (tf_isnan(x) || abs(x) > 1.0) return TF_NAN;
    if (x > 0.5) return 2.0 * tf_asin_abs(sqrt(0.5 * (1.0 - x)));
    if (x < -0.5) return 3.1415926535897932 - 2.0 * tf_asin_abs(sqrt(0.5 * (1.0 + x)));
    return 1.5707963267948966 - tf_asin(x);
}

float tf_atan(float x) {
    if (tf_isnan(x)) return x;
    float a = abs(x), y = 0.0, t = a;
    if (a > 2.414213562373095) {
        y = 1.5707963267948966;
        t = -1.0 / a;
    } else if (a > 0.4142135623730950) {
        y = 0.78539816339744831;
        t = (a - 1.0) / (a + 1.0);
    }
    float z = t * t;
    y += (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * t + t;
    return tf_signbit(x) ? -y : y;
}

float tf_asinh(float x) {
    if (tf_isnan(x) || tf_isinf(x)) return x;
    float a = abs(x), r;
    if (a > 1500.0) {
        r = log(a) + 0.69314718055994531;
    } else if (a < 0.5) {
        float z = a * a;
        r = (((2.0122003309e-2 * z - 4.2699340972e-2) * z + 7.4847586088e-2) * z - 1.6666288134e-1) * z * a + a;
    } else {
        r = log(a + sqrt(a * a + 1.0));
    }
    return tf_signbit(x) ? -r : r;
}

float tf_acosh(float x) {
    if (tf_isnan(x) || x < 1.0) return TF_NAN;
    if (tf_isinf(x)) return x;
    if (x > 1500.0) return log(x) + 0.69314718055994531;
    float z = x - 1.0;
    if (z < 0.5)
        return ((((1.7596881071e-3 * z - 7.5272886713e-3) * z + 2.6454905019e-2) * z - 1.1784741703e-1) * z +
                1.4142135263) * sqrt(z);
    return log(x + sqrt(z * (x + 1.0)));
}

float tf_atanh(float x) {
    if (tf_isnan(x)) return x;
    float a = abs(x), r;
    if (a > 1.0) return TF_NAN;
    if (a == 1.0) {
        r = TF_INF;
    } else if (a < 1e-4) {
        r = a;
    } else if (a < 0.5) {
        float z = a * a;
        r = ((((1.81740078349e-1 * z + 8.24370301058e-2) * z + 1.46691431730e-1) * z + 1.99782164500e-1) * z +
             3.33337300303e-1) * z * a + a;
    } else {
        r = 0.5 * log((1.0 + a) / (1.0 - a));
    }
    return tf_signbit(x) ? -r : r;
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

// An integer as f16 or bf16 bits, rounded once from its exact value (nearest, ties to even; f16
// past 65519 is infinity), like the cpu plugin: through f32 first would round twice.
uint tf_i64_to_half(uvec2 v, uint dtype) {
    bool neg = int(v.y) < 0;
    uvec2 m = neg ? i64_neg(v) : v;  // INT64_MIN stays 2^63 as an unsigned magnitude
    if (m == uvec2(0u)) return 0u;
    uint sign = neg ? 0x8000u : 0u;
    // The 32 leading bits from the leading one, a sticky bit standing in for the rest.
    int msb = m.y != 0u ? 32 + findMSB(m.y) : findMSB(m.x);
    uint top;
    if (msb >= 32) {
        int lead = 63 - msb;
        top = lead == 0 ? m.y : (m.y << uint(lead)) | (m.x >> uint(32 - lead));
        uint rest = lead == 0 ? m.x : m.x << uint(lead);
        if (rest != 0u) top |= 1u;
    } else {
        top = m.x << uint(31 - msb);
    }
    uint mbits = dtype == DT_F16 ? 10u : 7u;
    uint shift = 31u - mbits;
    uint q = top >> shift;
    uint rest = top & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rest > half_ || (rest == half_ && (q & 1u) != 0u)) q += 1u;
    if ((q >> (mbits + 1u)) != 0u) {  // the carry reached the next power of two
        q >>= 1u;
        msb += 1;
    }
    uint top_e = dtype == DT_F16 ? 31u : 255u;
    uint biased = uint(msb) + (dtype == DT_F16 ? 15u : 127u);
    if (biased >= top_e) return sign | (top_e << mbits);
    return sign | (biased << mbits) | (q & ((1u << mbits) - 1u));
}

// A raw float value (f32, f16, bf16) as f32.
float tf_raw_to_f32(uvec2 v, uint dtype) {
    if (dtype == DT_F16) return tf_f16_to_f32(v.x);
    if (dtype == DT_BF16) return tf_bf16_to_f32(v.x);
    return uintBitsToFloat(v.x);
}

// A raw value of dtype from as a raw value of dtype to (cast's rules, the cpu plugin's).
uvec2 tf_convert(uvec2 v, uint from, uint to) {
    if (to == DT_BOOL) {
        if (from == DT_F32) return uvec2((v.x & 0x7fffffffu) != 0u ? 1u : 0u, 0u);  // NaN is true
        if (from == DT_F16 || from == DT_BF16) return uvec2((v.x & 0x7fffu) != 0u ? 1u : 0u, 0u);
        return uvec2((v.x | v.y) != 0u ? 1u : 0u, 0u);
    }
    if (from == to) return v;
    bool float_from = tf_is_float(from);
    if (to == DT_F16 || to == DT_BF16) {
        if (float_from) return uvec2(tf_f32_to_half(to, tf_raw_to_f32(v, from)), 0u);  // exact to f32, one rounding
        if (from == DT_BOOL) return uvec2(v.x != 0u ? (to == DT_F16 ? 0x3c00u : 0x3f80u) : 0u, 0u);
        return uvec2(tf_i64_to_half(from == DT_I32 ? i64_from_int(int(v.x)) : v, to), 0u);
    }
    if (to == DT_F32) {
        if (float_from) return uvec2(floatBitsToUint(tf_raw_to_f32(v, from)), 0u);
        if (from == DT_I32) return uvec2(floatBitsToUint(float(int(v.x))), 0u);
        if (from == DT_I64) return uvec2(floatBitsToUint(i64_to_f32(v)), 0u);
        return uvec2(floatBitsToUint(v.x != 0u ? 1.0 : 0.0), 0u);  // bool
    }
    if (to == DT_I32) {
        if (float_from) return uvec2(uint(f32_to_i32(tf_raw_to_f32(v, from))), 0u);
        return uvec2(v.x, 0u);  // i64 wraps; bool is 0 or 1
    }
    // to i64
    if (float_from) return f32_to_i64(tf_raw_to_f32(v, from));
    if (from == DT_I32) return i64_from_int(int(v.x));
    return uvec2(v.x, 0u);
}

// Bits of 0 and 1 in dtype (one_hot's values).
uvec2 tf_one(uint dtype, bool on) {
    if (!on) return uvec2(0u);
    if (dtype == DT_F32) return uvec2(floatBitsToUint(1.0), 0u);
    if (dtype == DT_F16) return uvec2(0x3c00u, 0u);
    if (dtype == DT_BF16) return uvec2(0x3f80u, 0u);
    return uvec2(1u, 0u);
}
