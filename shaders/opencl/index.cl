// Ops that index with integer tensors, and rope: the OpenCL C port of shaders/index.comp
// (mode 0 one_hot, 1 embedding, 2 embedding_backward, 3 rope; see there for rope's exact angle
// in turns). One work-item per element of shape. Indices outside their range are reported and
// their elements left 0. Slots: 0 out, 1 weight / dy / x, 2 indices, labels or rope's
// frequencies.
TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, OUT_DT, 0u)
TF_SPEC(2, uint, IDX_DT, 3u)
TF_SPEC(3, uint, IN_DT, 0u)    // slot 1's float dtype (weight, dy, x): f32, f16 or bf16, read as f32

typedef struct {
    uint pad0_, count, rank, pad1_;
    uint pad2_, limit, interleaved, inverse;
    uint pad5_;
    uint offset_lo, offset_hi, pad3_;
    uint out_base, in_base, idx_base, pad4_;
    uint shape[8], out_st[8], in_st[8], idx_st[8];
    uint div_m[8], div_s[8];
} index_params;

void float_add(global uint *t, uint e, float v) {
    volatile global uint *word = t + e;
    uint old = *word;
    for (;;) {
        uint seen = atomic_cmpxchg(word, old, as_uint(as_float(old) + v));
        if (seen == old) break;
        old = seen;
    }
}

__attribute__((reqd_work_group_size(256, 1, 1)))
kernel void tf_index(const index_params pv, TF_KERNEL_ARGS) {
    TF_SLOTS_INIT;
    const index_params *p = &pv;
    uint step = get_num_groups(0) * 256u;
    uint last = p->rank - 1u;
    for (uint e = get_global_id(0); e < p->count; e += step) {
        uint rest = e;
        uint out_e = p->out_base, in_e = p->in_base, idx_e = p->idx_base;
        uint c_last = 0u, c_prev = 0u;
        for (int d = (int)p->rank - 1; d >= 0; --d) {
            uint next = tf_div(rest, p->div_m[d], p->div_s[d]);
            uint q = rest - next * p->shape[d];
            rest = next;
            out_e += q * p->out_st[d];
            in_e += q * p->in_st[d];
            if ((uint)d == last) c_last = q;
            else idx_e += q * p->idx_st[d];
            if ((uint)d + 1u == last) c_prev = q;
        }
        if (MODE == 3u) {
            uint dim = p->shape[last];
            uint i, partner;
            bool first;
            if (p->interleaved != 0u) {
                i = c_last / 2u;
                first = (c_last & 1u) == 0u;
                partner = first ? c_last + 1u : c_last - 1u;
            } else {
                uint half_ = dim / 2u;
                i = c_last % half_;
                first = c_last < half_;
                partner = first ? c_last + half_ : c_last - half_;
            }
            uint2 pos = i64_add((uint2)(p->offset_lo, p->offset_hi), (uint2)(c_prev, 0u));
            bool negative = (int)pos.y < 0;
            if (negative) pos = i64_neg(pos);
            uint chunks[6] = {pos.x & 0xfffu, (pos.x >> 12u) & 0xfffu, (pos.x >> 24u) | ((pos.y & 0xfu) << 8u),
                              (pos.y >> 4u) & 0xfffu, (pos.y >> 16u) & 0xfffu, pos.y >> 28u};
            float turns = 0.0f;
            for (uint k = 0u; k < 6u; ++k) {
                if (chunks[k] == 0u) continue;
                float scaled = (float)chunks[k] * as_float((127u + 12u * k) << 23u);
                for (uint j = 0u; j < 5u; ++j) {
                    float part = scaled * ld_f32(T[2], p->idx_base + 5u * i + j);
                    turns = tf_fract(turns + tf_fract(part));
                }
            }
            if (negative) turns = -turns;
            turns -= floor(turns + 0.5f);
            float angle = 6.2831853071795865f * turns;
            float cs = cos(angle), sn = sin(angle);
            if (p->inverse != 0u) sn = -sn;
            float x = ld_float(T[1], IN_DT, in_e);
            float y = ld_float(T[1], IN_DT, in_e + (partner - c_last) * p->in_st[last]);
            st_float(T[0], OUT_DT, out_e, first ? x * cs - y * sn : y * sn + x * cs);
            continue;
        }
        int index;
        bool fits = ld_index(T[2], IDX_DT, idx_e, &index);
        bool valid = fits && index >= 0 && (uint)index < p->limit;
        if (!valid) tf_report(TF_STATUS, TF_ERR_INDEX);
        if (MODE == 0u) {
            st_raw(T[0], OUT_DT, out_e, tf_one(OUT_DT, valid && (uint)index == c_last));
        } else if (MODE == 1u) {
            float v = valid ? ld_float(T[1], IN_DT, p->in_base + (uint)index * p->in_st[0] + c_last * p->in_st[1]) : 0.0f;
            st_float(T[0], OUT_DT, out_e, v);
        } else if (valid) {
            // dweight is f32 here (for f16 and bf16 the plugin sums into f32 scratch and casts).
            float_add(T[0], p->out_base + (uint)index * p->out_st[0] + c_last * p->out_st[1], ld_float(T[1], IN_DT, in_e));
        }
    }
}
