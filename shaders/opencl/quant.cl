// The ops on block-quantized tensors: the OpenCL C port of shaders/quant.comp (mode 0
// dequantize, 1 embedding_q, 2 matmul_q; see there for the layout of the work and why the
// decoded values match the cpu plugin's reference codec bit for bit). Slots: 0 out, 1 the
// quantized tensor (as bytes), 2 indices (mode 1) or x (mode 2).
TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, QT, 6u)
TF_SPEC(2, uint, DT, 0u)
TF_SPEC(3, uint, OUT_DT, 0u)
TF_SPEC(4, uint, IDX_DT, 3u)
TF_SPEC(5, uint, ROWS, 1u)

typedef struct {
    uint count, chunks, div_m, div_s;
    uint q_base, q_row, out_base, out_row;
    uint x_base, x_row, x_col;
    uint m, n, limit, idx_base, idx_st;
} quant_params;

#define Q8_0 6u
#define Q4_0 7u
#define Q4_1 8u
#define Q5_0 9u
#define Q5_1 10u
#define Q4_K 11u
#define Q5_K 12u
#define Q6_K 13u
#define Q8_K 14u

uint q_word(global uint *q, uint b) {
    uint lo = q[b >> 2u];
    uint shift = (b & 3u) * 8u;
    if (shift == 0u) return lo;
    return (lo >> shift) | (q[(b >> 2u) + 1u] << (32u - shift));
}
uint q_byte(global uint *q, uint b) { return ((global uchar *)q)[b]; }
float q_half(global uint *q, uint b) { return tf_f16_to_f32(((global ushort *)q)[b >> 1u]); }
int sbyte(uint word, uint i) { return (int)(word << (24u - 8u * i)) >> 24; }

uint2 scale_min_k4(global uint *q, uint b, uint s) {
    if (s < 4u) return (uint2)(q_byte(q, b + s) & 63u, q_byte(q, b + s + 4u) & 63u);
    uint hi = q_byte(q, b + s + 4u);
    return (uint2)((hi & 15u) | ((q_byte(q, b + s - 4u) >> 6u) << 4u), (hi >> 4u) | ((q_byte(q, b + s) >> 6u) << 4u));
}

void decode32(global uint *q, uint rb, uint c, float *v) {
    if (QT == Q8_0) {
        uint b = rb + 34u * c;
        float d = q_half(q, b);
        for (uint i = 0u; i < 8u; ++i) {
            uint word = q_word(q, b + 2u + 4u * i);
            for (uint j = 0u; j < 4u; ++j) v[4u * i + j] = (float)sbyte(word, j) * d;
        }
    } else if (QT == Q4_0 || QT == Q4_1 || QT == Q5_0 || QT == Q5_1) {
        bool five = QT == Q5_0 || QT == Q5_1, with_min = QT == Q4_1 || QT == Q5_1;
        uint size = QT == Q4_0 ? 18u : QT == Q4_1 ? 20u : QT == Q5_0 ? 22u : 24u;
        uint b = rb + size * c;
        float d = q_half(q, b);
        float m = with_min ? q_half(q, b + 2u) : 0.0f;
        uint qs = b + (with_min ? 4u : 2u) + (five ? 4u : 0u);
        uint qh = five ? q_word(q, b + (with_min ? 4u : 2u)) : 0u;
        int offset = with_min ? 0 : five ? 16 : 8;
        for (uint i = 0u; i < 4u; ++i) {
            uint word = q_word(q, qs + 4u * i);
            for (uint j = 0u; j < 4u; ++j) {
                uint e = 4u * i + j;
                uint byte_ = (word >> (8u * j)) & 0xffu;
                int q0 = (int)((byte_ & 15u) | (((qh >> e) & 1u) << 4u)) - offset;
                int q1 = (int)((byte_ >> 4u) | (((qh >> (e + 16u)) & 1u) << 4u)) - offset;
                float p0 = (float)q0 * d, p1 = (float)q1 * d;
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
        uint2 sm = scale_min_k4(q, b + 4u, s);
        float d1 = q_half(q, b) * (float)sm.x;
        float m1 = q_half(q, b + 2u) * (float)sm.y;
        uint ql = b + (five ? 48u : 16u) + 32u * (s >> 1u), shift = (s & 1u) * 4u;
        for (uint i = 0u; i < 8u; ++i) {
            uint word = q_word(q, ql + 4u * i);
            uint high = five ? q_word(q, b + 16u + 4u * i) : 0u;
            for (uint j = 0u; j < 4u; ++j) {
                uint qv = (word >> (8u * j + shift)) & 15u;
                if (five && ((high >> (8u * j + s)) & 1u) != 0u) qv += 16u;
                float t = d1 * (float)qv;
                v[4u * i + j] = t - m1;
            }
        }
    } else if (QT == Q6_K) {
        uint b = rb + 210u * (c >> 3u), cb = c & 7u;
        uint h = cb >> 2u, quarter = cb & 3u;
        float d = q_half(q, b + 208u);
        uint ql = b + 64u * h + (quarter & 1u) * 32u, shift = (quarter >> 1u) * 4u;
        uint qh = b + 128u + 32u * h;
        uint sc = b + 192u + 8u * h + 2u * quarter;
        float d0 = d * (float)((int)(q_byte(q, sc) << 24u) >> 24);
        float d1 = d * (float)((int)(q_byte(q, sc + 1u) << 24u) >> 24);
        for (uint i = 0u; i < 8u; ++i) {
            uint lo = q_word(q, ql + 4u * i), hi = q_word(q, qh + 4u * i);
            for (uint j = 0u; j < 4u; ++j) {
                uint l = 4u * i + j;
                int qv = (int)(((lo >> (8u * j + shift)) & 15u) | (((hi >> (8u * j + 2u * quarter)) & 3u) << 4u)) - 32;
                v[l] = (l < 16u ? d0 : d1) * (float)qv;
            }
        }
    } else {  // Q8_K
        uint b = rb + 292u * (c >> 3u);
        float d = as_float(q_word(q, b));
        uint qs = b + 4u + 32u * (c & 7u);
        for (uint i = 0u; i < 8u; ++i) {
            uint word = q_word(q, qs + 4u * i);
            for (uint j = 0u; j < 4u; ++j) v[4u * i + j] = d * (float)sbyte(word, j);
        }
    }
}

void store32(global uint *out, uint e, const float *v) {
    if (DT == DT_F32) {
        for (uint i = 0u; i < 32u; ++i) st_f32(out, e + i, v[i]);
    } else {
        for (uint i = 0u; i < 32u; ++i) st_h16(out, e + i, tf_f32_to_half(DT, v[i]));
    }
}

__attribute__((reqd_work_group_size(256, 1, 1)))
kernel void tf_quant(const quant_params pv, TF_KERNEL_ARGS) {
    TF_SLOTS_INIT;
    const quant_params *p = &pv;
    local float partial[256 * 8];
    if (MODE == 2u) {
        uint lane = get_local_id(0);
        uint row = get_group_id(0) * 32u + lane / 8u;
        uint first = lane % 8u;
        uint m0 = get_group_id(1) * ROWS;
        float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (row < p->n) {
            uint rb = p->q_base + row * p->q_row;
            float v[32];
            for (uint c = first; c < p->chunks; c += 8u) {
                decode32(T[1], rb, c, v);
                for (uint r = 0u; r < ROWS; ++r) {
                    if (m0 + r >= p->m) break;
                    uint xe = p->x_base + (m0 + r) * p->x_row + 32u * c * p->x_col;
                    float sum = 0.0f;
                    for (uint i = 0u; i < 32u; ++i) sum += v[i] * ld_float(T[2], DT, xe + i * p->x_col);
                    acc[r] += sum;
                }
            }
        }
        for (uint r = 0u; r < ROWS; ++r) partial[lane * ROWS + r] = acc[r];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint o = lane; o < 32u * ROWS; o += 256u) {
            uint j = o / ROWS, r = o % ROWS;
            uint n = get_group_id(0) * 32u + j, mm = m0 + r;
            if (n >= p->n || mm >= p->m) continue;
            float sum = 0.0f;
            for (uint t = 0u; t < 8u; ++t) sum += partial[(8u * j + t) * ROWS + r];
            st_float(T[0], OUT_DT, p->out_base + mm * p->out_row + n, sum);
        }
        return;
    }
    uint step = get_num_groups(0) * 256u;
    for (uint u = get_global_id(0); u < p->count; u += step) {
        uint r = tf_div(u, p->div_m, p->div_s), c = u - r * p->chunks;
        float v[32];
        uint src = r;
        bool valid = true;
        if (MODE == 1u) {
            int index;
            bool fits = ld_index(T[2], IDX_DT, p->idx_base + r * p->idx_st, &index);
            valid = fits && index >= 0 && (uint)index < p->limit;
            if (!valid && c == 0u) tf_report(TF_STATUS, TF_ERR_INDEX);
            src = valid ? (uint)index : 0u;
        }
        if (valid) {
            decode32(T[1], p->q_base + src * p->q_row, c, v);
        } else {
            for (uint i = 0u; i < 32u; ++i) v[i] = 0.0f;
        }
        store32(T[0], p->out_base + r * p->out_row + 32u * c, v);
    }
}
