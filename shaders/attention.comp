// attention: out[..., i, :] = softmax(q_i k^T * scale + mask_i [+ causal]) v, f32, f16 or bf16
// (computed in f32, out rounded once), any strides.
// One workgroup per query row: the row's Tk scores live in shared memory (Tk <= TF_MAX_KEYS,
// checked by the plugin), the invocations split the keys, then the output columns.
// Slots: 0 out, 1 q, 2 k, 3 v, 4 mask (expanded to [..., Tq, Tk]; read only when has_mask).
// Mirrors attention_params in plugins/vulkan/kernels.hpp.
layout(local_size_x = 64) in;

TF_SPEC(0, uint, DT, 0u)  // every operand: f32, f16 or bf16 (scores, softmax and sums in f32)

#define TF_MAX_KEYS 2048u

struct attention_params {
    uint rows;       // batch elements x Tq
    uint tq, tk, d;
    uint dv;
    uint causal;
    float scale;
    uint batch_rank;
    uint base[5];    // per slot
    uint pad_[3];
    uint batch_shape[6];
    uint batch_st[30];  // [slot * 6 + axis]
    uint row_st[5];     // stride of the Tq (out, q, mask) or Tk (k, v) axis per slot
    uint col_st[5];     // stride of the last axis per slot
    uint has_mask;      // 0: the mask is absent (slot 4 is bound to q and never read)
    uint pad1_;
};
layout(std430, TF_BINDING(0)) readonly buffer tf_params_block { attention_params tf_p; };
// A private copy, loaded once per invocation: lavapipe turns every buffer read into a gather.
attention_params p;

shared float s_score[TF_MAX_KEYS];
shared float s_red[64];

float group_reduce(float v, bool is_max) {
    uint t = gl_LocalInvocationID.x;
    s_red[t] = v;
    for (uint half_ = 32u; half_ > 0u; half_ >>= 1u) {
        barrier();
        if (t < half_) s_red[t] = is_max ? tf_max(s_red[t], s_red[t + half_]) : s_red[t] + s_red[t + half_];
    }
    barrier();
    float r = s_red[0];
    barrier();
    return r;
}

void main() {
    p = tf_p;
    uint t = gl_LocalInvocationID.x;
    for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
        uint i = row % p.tq;
        uint rest = row / p.tq;
        uint at[5];
        for (uint s = 0u; s < 5u; ++s) at[s] = p.base[s];
        for (int d = int(p.batch_rank) - 1; d >= 0; --d) {
            uint q = rest % p.batch_shape[d];
            rest /= p.batch_shape[d];
            for (uint s = 0u; s < 5u; ++s) at[s] += q * p.batch_st[s * 6u + uint(d)];
        }
        uint q_row = at[1] + i * p.row_st[1];
        uint m_row = at[4] + i * p.row_st[4];
        int last_visible = int(i) + int(p.tk) - int(p.tq);

        float local_max = -TF_INF;
        for (uint j = t; j < p.tk; j += 64u) {
            float dot_ = 0.0;
            uint k_row = at[2] + j * p.row_st[2];
            for (uint e = 0u; e < p.d; ++e)
                dot_ += ld_float(1u, DT, q_row + e * p.col_st[1]) * ld_float(2u, DT, k_row + e * p.col_st[2]);
            float score = dot_ * p.scale;
            if (p.has_mask != 0u) score += ld_float(4u, DT, m_row + j * p.col_st[4]);
            if (p.causal != 0u && int(j) > last_visible) score = -TF_INF;
            s_score[j] = score;
            local_max = tf_max(local_max, score);
        }
        float m = group_reduce(local_max, true);
        float local_sum = 0.0;
        for (uint j = t; j < p.tk; j += 64u) {
            float e = exp(s_score[j] - m);
            s_score[j] = e;
            local_sum += e;
        }
        float total = group_reduce(local_sum, false);  // its barriers publish s_score too
        for (uint c = t; c < p.dv; c += 64u) {
            float acc = 0.0;
            for (uint j = 0u; j < p.tk; ++j) acc += s_score[j] * ld_float(3u, DT, at[3] + j * p.row_st[3] + c * p.col_st[3]);
            st_float(0u, DT, at[0] + i * p.row_st[0] + c * p.col_st[0], acc / total);
        }
        barrier();  // s_score is rewritten for the next row
    }
}
