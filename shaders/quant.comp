// The ops on block-quantized tensors (ops.def 65, 67, 68; dtypes.def has each block's fields):
//   mode 0  dequantize   out[r, k] = the value block k / B of q's row r defines for element k
//   mode 1  embedding_q  out[i, k] = dequantized row indices[i] of the table, k < D
//   mode 2  matmul_q     out[m, n] = sum_k x[m, k] w[n, k], w dequantized on the fly
// Every type is decoded in chunks of 32 elements (a whole block of the 32-formats, a sub-block of
// the k-quants), each value computed in f32 exactly as the cpu plugin's reference codec computes
// it (quant_reference.cpp), so dequantize and embedding_q match it bit for bit: the products of
// an f16 scale with a small integer are exact in f32, and `precise` keeps the compiler from
// fusing a rounded product into an add.
// Modes 0 and 1: one invocation per (row, chunk), grid stride. Mode 2: a workgroup computes 32
// weight rows (n) for ROWS rows of x (m): lane l takes weight row l / 8 and every 8th chunk from
// l % 8, accumulates ROWS partial dots in f32, and the workgroup sums the 8 partials per output.
// The quantized tensor is bound as bytes (q_base, q_row in bytes). Slots: 0 out, 1 q or w,
// 2 indices (mode 1) or x (mode 2). Mirrors QuantParams in plugins/gpu/kernels.hpp.
layout(local_size_x = 256) in;

TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, QT, 6u)      // the quantized dtype (tf_dtype: 6 q8_0 .. 14 q8_k)
TF_SPEC(2, uint, DT, 0u)      // modes 0, 1: the output's float dtype; mode 2: x's
TF_SPEC(3, uint, OUT_DT, 0u)  // mode 2: the output's dtype (f32 or x's)
TF_SPEC(4, uint, IDX_DT, 3u)  // mode 1: the indices' dtype (i32 or i64)
TF_SPEC(5, uint, ROWS, 1u)    // mode 2: rows of x per workgroup, 1 or 8

struct quant_params {
    uint count;       // modes 0, 1: rows * chunks
    uint chunks;      // chunks of 32 per row (K / 32)
    uint div_m, div_s;  // chunks as a tf_div divisor
    uint q_base;      // byte of q's (w's) element [0, 0] in slot 1
    uint q_row;       // bytes from one row of q (w) to the next
    uint out_base, out_row;  // element [0, 0] of out, elements between its rows
    uint x_base, x_row, x_col;  // mode 2: x's element [0, 0] and strides (rows, columns)
    uint m, n;        // mode 2: rows of x, rows of w
    uint limit;       // mode 1: rows of the table
    uint idx_base, idx_st;  // mode 1: the indices' first element and stride
};
layout(std430, TF_BINDING(0)) readonly buffer tf_params_block { quant_params tf_p; };
quant_params p;

#define Q8_0 6u
#define Q4_0 7u
#define Q4_1 8u
#define Q5_0 9u
#define Q5_1 10u
#define Q4_K 11u
#define Q5_K 12u
#define Q6_K 13u
#define Q8_K 14u

// The 4 bytes at byte b of slot 1 (any alignment), little-endian.
uint q_word(uint b) {
    uint lo = tf_t[1].w[b >> 2u];
    uint shift = (b & 3u) * 8u;
    if (shift == 0u) return lo;
    return (lo >> shift) | (tf_t[1].w[(b >> 2u) + 1u] << (32u - shift));
}
uint q_byte(uint b) { return (tf_t[1].w[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu; }
// An f16 at an even byte b, widened exactly.
float q_half(uint b) { return tf_f16_to_f32((tf_t[1].w[b >> 2u] >> ((b & 2u) * 8u)) & 0xffffu); }
// Byte i (0..3) of a word as a signed integer.
int sbyte(uint word, uint i) { return int(word << (24u - 8u * i)) >> 24; }

// The 6-bit scale (x) and minimum (y) of sub-block s of a q4_k/q5_k block whose 12 scale bytes
// start at byte b (ggml's get_scale_min_k4).
uvec2 scale_min_k4(uint b, uint s) {
    if (s < 4u) return uvec2(q_byte(b + s) & 63u, q_byte(b + s + 4u) & 63u);
    uint hi = q_byte(b + s + 4u);
    return uvec2((hi & 15u) | ((q_byte(b + s - 4u) >> 6u) << 4u), (hi >> 4u) | ((q_byte(b + s) >> 6u) << 4u));
}

// Elements 32 c .. 32 c + 31 of the row starting at byte rb.
void decode32(uint rb, uint c, out float v[32]) {
    if (QT == Q8_0) {
        uint b = rb + 34u * c;
        precise float d = q_half(b);
        for (uint i = 0u; i < 8u; ++i) {
            uint word = q_word(b + 2u + 4u * i);
            for (uint j = 0u; j < 4u; ++j) v[4u * i + j] = float(sbyte(word, j)) * d;
        }
    } else if (QT == Q4_0 || QT == Q4_1 || QT == Q5_0 || QT == Q5_1) {
        bool five = QT == Q5_0 || QT == Q5_1, with_min = QT == Q4_1 || QT == Q5_1;
        uint size = QT == Q4_0 ? 18u : QT == Q4_1 ? 20u : QT == Q5_0 ? 22u : 24u;
        uint b = rb + size * c;
        float d = q_half(b);
        float m = with_min ? q_half(b + 2u) : 0.0;
        uint qs = b + (with_min ? 4u : 2u) + (five ? 4u : 0u);
        uint qh = five ? q_word(b + (with_min ? 4u : 2u)) : 0u;
        int offset = with_min ? 0 : five ? 16 : 8;
        for (uint i = 0u; i < 4u; ++i) {
            uint word = q_word(qs + 4u * i);
            for (uint j = 0u; j < 4u; ++j) {
                uint e = 4u * i + j;
                uint byte_ = (word >> (8u * j)) & 0xffu;
                int q0 = int((byte_ & 15u) | (((qh >> e) & 1u) << 4u)) - offset;
                int q1 = int((byte_ >> 4u) | (((qh >> (e + 16u)) & 1u) << 4u)) - offset;
                precise float p0 = float(q0) * d, p1 = float(q1) * d;
                if (with_min) {
                    p0 = p0 + m;
                    p1 = p1 + m;
                }
                v[e] = p0;
                v[e + 16u] = p1;
            }
        }
    } else if (QT == Q4_K || QT == Q5_K) {
        bool five = QT == Q5_K;
        uint b = rb + (five ? 176u : 144u) * (c >> 3u), s = c & 7u;
        uvec2 sm = scale_min_k4(b + 4u, s);
        precise float d1 = q_half(b) * float(sm.x);
        precise float m1 = q_half(b + 2u) * float(sm.y);
        // Sub-blocks 2g and 2g + 1 share the bytes of group g: low and high nibbles.
        uint ql = b + (five ? 48u : 16u) + 32u * (s >> 1u), shift = (s & 1u) * 4u;
        for (uint i = 0u; i < 8u; ++i) {
            uint word = q_word(ql + 4u * i);
            uint high = five ? q_word(b + 16u + 4u * i) : 0u;
            for (uint j = 0u; j < 4u; ++j) {
                uint q = (word >> (8u * j + shift)) & 15u;
                if (five && ((high >> (8u * j + s)) & 1u) != 0u) q += 16u;
                precise float t = d1 * float(q);
                v[4u * i + j] = t - m1;
            }
        }
    } else if (QT == Q6_K) {
        uint b = rb + 210u * (c >> 3u), cb = c & 7u;
        uint h = cb >> 2u, quarter = cb & 3u;
        float d = q_half(b + 208u);
        uint ql = b + 64u * h + (quarter & 1u) * 32u, shift = (quarter >> 1u) * 4u;
        uint qh = b + 128u + 32u * h;
        uint sc = b + 192u + 8u * h + 2u * quarter;
        precise float d0 = d * float(int(q_byte(sc) << 24u) >> 24);
        precise float d1 = d * float(int(q_byte(sc + 1u) << 24u) >> 24);
        for (uint i = 0u; i < 8u; ++i) {
            uint lo = q_word(ql + 4u * i), hi = q_word(qh + 4u * i);
            for (uint j = 0u; j < 4u; ++j) {
                uint l = 4u * i + j;
                int q = int(((lo >> (8u * j + shift)) & 15u) | (((hi >> (8u * j + 2u * quarter)) & 3u) << 4u)) - 32;
                precise float t = (l < 16u ? d0 : d1) * float(q);
                v[l] = t;
            }
        }
    } else {  // Q8_K
        uint b = rb + 292u * (c >> 3u);
        float d = uintBitsToFloat(q_word(b));
        uint qs = b + 4u + 32u * (c & 7u);
        for (uint i = 0u; i < 8u; ++i) {
            uint word = q_word(qs + 4u * i);
            for (uint j = 0u; j < 4u; ++j) {
                precise float t = d * float(sbyte(word, j));
                v[4u * i + j] = t;
            }
        }
    }
}

// 32 values at element e of slot 0: a word (two halves) at a time when the lane owns it.
void store32(uint e, float v[32]) {
    if (DT == DT_F32) {
        for (uint i = 0u; i < 32u; ++i) st_f32(0u, e + i, v[i]);
    } else if ((e & 1u) == 0u) {
        for (uint i = 0u; i < 16u; ++i)
            tf_t[0].w[(e >> 1u) + i] = tf_f32_to_half(DT, v[2u * i]) | (tf_f32_to_half(DT, v[2u * i + 1u]) << 16u);
    } else {
        for (uint i = 0u; i < 32u; ++i) st_h16(0u, e + i, tf_f32_to_half(DT, v[i]));
    }
}

shared float partial[256 * 8];

void matmul() {
    uint lane = gl_LocalInvocationID.x;
    uint row = gl_WorkGroupID.x * 32u + lane / 8u;
    uint first = lane % 8u;
    uint m0 = gl_WorkGroupID.y * ROWS;
    float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    if (row < p.n) {
        uint rb = p.q_base + row * p.q_row;
        float v[32];
        for (uint c = first; c < p.chunks; c += 8u) {
            decode32(rb, c, v);
            for (uint r = 0u; r < ROWS; ++r) {
                if (m0 + r >= p.m) break;
                uint xe = p.x_base + (m0 + r) * p.x_row + 32u * c * p.x_col;
                float sum = 0.0;
                for (uint i = 0u; i < 32u; ++i) sum += v[i] * ld_float(2u, DT, xe + i * p.x_col);
                acc[r] += sum;
            }
        }
    }
    for (uint r = 0u; r < ROWS; ++r) partial[lane * ROWS + r] = acc[r];
    barrier();
    // Output (row l / 8's tile row, x row r): lane = 8 * (its weight row) + r sums the 8 lanes'
    // partials of its weight row.
    for (uint o = lane; o < 32u * ROWS; o += 256u) {
        uint j = o / ROWS, r = o % ROWS;
        uint n = gl_WorkGroupID.x * 32u + j, mm = m0 + r;
        if (n >= p.n || mm >= p.m) continue;
        float sum = 0.0;
        for (uint t = 0u; t < 8u; ++t) sum += partial[(8u * j + t) * ROWS + r];
        st_float(0u, OUT_DT, p.out_base + mm * p.out_row + n, sum);
    }
}

void main() {
    p = tf_p;
    if (MODE == 2u) {
        matmul();
        return;
    }
    uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint u = gl_GlobalInvocationID.x; u < p.count; u += step) {
        uint r = tf_div(u, p.div_m, p.div_s), c = u - r * p.chunks;
        float v[32];
        uint src = r;
        bool valid = true;
        if (MODE == 1u) {
            int index;
            bool fits = ld_index(2u, IDX_DT, p.idx_base + r * p.idx_st, index);
            valid = fits && index >= 0 && uint(index) < p.limit;
            if (!valid && c == 0u) tf_report(TF_ERR_INDEX);
            src = valid ? uint(index) : 0u;
        }
        if (valid) {
            decode32(p.q_base + src * p.q_row, c, v);
        } else {
            for (uint i = 0u; i < 32u; ++i) v[i] = 0.0;
        }
        store32(p.out_base + r * p.out_row + 32u * c, v);
    }
}
