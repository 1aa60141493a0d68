// attention: out[..., i, :] = softmax(q_i k^T * scale + mask_i [+ causal]) v, f32, f16 or bf16
// (computed in f32, out rounded once), any strides.
// The OpenCL C port of shaders/attention.comp: one group of 64 work-items per query row, the
// row's Tk scores in local memory. Slots: 0 out, 1 q, 2 k, 3 v, 4 mask (read only when has_mask).
TF_SPEC(0, uint, DT, 0u)  // every operand: f32, f16 or bf16 (scores, softmax and sums in f32)

#define TF_MAX_KEYS 2048u

typedef struct {
    uint rows, tq, tk, d;
    uint dv, causal;
    float scale;
    uint batch_rank;
    uint base[5];
    uint pad_[3];
    uint batch_shape[6];
    uint batch_st[30];
    uint row_st[5];
    uint col_st[5];
    uint has_mask;  // 0: the mask is absent (slot 4 is bound to q and never read)
    uint pad1_;
} attention_params;

float group_reduce(local float *s_red, float v, bool is_max) {
    uint t = get_local_id(0);
    s_red[t] = v;
    for (uint half_ = 32u; half_ > 0u; half_ >>= 1u) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t < half_) s_red[t] = is_max ? tf_max(s_red[t], s_red[t + half_]) : s_red[t] + s_red[t + half_];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = s_red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

__attribute__((reqd_work_group_size(64, 1, 1)))
kernel void tf_attention(const attention_params pv, TF_KERNEL_ARGS) {
    TF_SLOTS_INIT;
    const attention_params *p = &pv;
    local float s_score[TF_MAX_KEYS];
    local float s_red[64];
    uint t = get_local_id(0);
    for (uint row = get_group_id(0); row < p->rows; row += get_num_groups(0)) {
        uint i = row % p->tq;
        uint rest = row / p->tq;
        uint at[5];
        for (uint s = 0u; s < 5u; ++s) at[s] = p->base[s];
        for (int d = (int)p->batch_rank - 1; d >= 0; --d) {
            uint q = rest % p->batch_shape[d];
            rest /= p->batch_shape[d];
            for (uint s = 0u; s < 5u; ++s) at[s] += q * p->batch_st[s * 6u + (uint)d];
        }
        uint q_row = at[1] + i * p->row_st[1];
        uint m_row = at[4] + i * p->row_st[4];
        int last_visible = (int)i + (int)p->tk - (int)p->tq;

        float local_max = -TF_INF;
        for (uint j = t; j < p->tk; j += 64u) {
            float dot_ = 0.0f;
            uint k_row = at[2] + j * p->row_st[2];
            for (uint e = 0u; e < p->d; ++e)
                dot_ += ld_float(T[1], DT, q_row + e * p->col_st[1]) * ld_float(T[2], DT, k_row + e * p->col_st[2]);
            float score = dot_ * p->scale;
            if (p->has_mask != 0u) score += ld_float(T[4], DT, m_row + j * p->col_st[4]);
            if (p->causal != 0u && (int)j > last_visible) score = -TF_INF;
            s_score[j] = score;
            local_max = tf_max(local_max, score);
        }
        float m = group_reduce(s_red, local_max, true);
        float local_sum = 0.0f;
        for (uint j = t; j < p->tk; j += 64u) {
            float e = exp(s_score[j] - m);
            s_score[j] = e;
            local_sum += e;
        }
        float total = group_reduce(s_red, local_sum, false);
        for (uint c = t; c < p->dv; c += 64u) {
            float acc = 0.0f;
            for (uint j = 0u; j < p->tk; ++j) acc += s_score[j] * ld_float(T[3], DT, at[3] + j * p->row_st[3] + c * p->col_st[3]);
            st_float(T[0], DT, at[0] + i * p->row_st[0] + c * p->col_st[0], acc / total);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}
