// Ops that work row by row, f32, f16 or bf16 (computed in f32), any strides: the OpenCL C port
// of shaders/rows.comp (mode 0 softmax, 1 log_softmax, 2 layer_norm, 3 rms_norm,
// 4 cross_entropy). One work-item per row; cross_entropy with reduction mean or sum runs one
// group that adds the rows' losses. Slots: 0 y, 1 x, 2 weight or labels, 3 bias.
TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, REDUCED, 0u)
TF_SPEC(2, uint, INNER_FLAT, 1u)
TF_SPEC(3, uint, DT, 0u)  // x, weight, bias and y: f32, f16 or bf16 (f32 inside, y rounded once)

typedef struct {
    uint pad0_, rows, len, outer_rank;
    uint inner_rank, reduction;
    float eps;
    uint label_dtype;
    uint x_base, y_base, w_base, b_base;
    uint label_base, label_stride;
    uint ignore_lo, ignore_hi;
    uint outer_shape[8], x_outer[8], y_outer[8];
    uint inner_shape[8], x_inner[8], y_inner[8], w_inner[8], b_inner[8];
} rows_params;

void row_start(const rows_params *p, uint r, uint *x, uint *y) {
    *x = p->x_base;
    *y = p->y_base;
    for (int d = (int)p->outer_rank - 1; d >= 0; --d) {
        uint q = r % p->outer_shape[d];
        r /= p->outer_shape[d];
        *x += q * p->x_outer[d];
        *y += q * p->y_outer[d];
    }
}

// Offsets of element j within a row: x, y, weight, bias.
uint4 inner(const rows_params *p, uint j) {
    if (INNER_FLAT == 1u) return (uint4)(j * p->x_inner[0], j * p->y_inner[0], j * p->w_inner[0], j * p->b_inner[0]);
    uint4 o = (uint4)(0u);
    for (int d = (int)p->inner_rank - 1; d >= 0; --d) {
        uint q = j % p->inner_shape[d];
        j /= p->inner_shape[d];
        o += q * (uint4)(p->x_inner[d], p->y_inner[d], p->w_inner[d], p->b_inner[d]);
    }
    return o;
}

void softmax_row(const rows_params *p, TF_T T, uint x0, uint y0) {
    float m = -TF_INF;
    for (uint j = 0u; j < p->len; ++j) m = tf_max(m, ld_float(T[1], DT, x0 + inner(p, j).x));
    float s = 0.0f;
    for (uint j = 0u; j < p->len; ++j) s += exp(ld_float(T[1], DT, x0 + inner(p, j).x) - m);
    float log_s = log(s);
    for (uint j = 0u; j < p->len; ++j) {
        uint4 o = inner(p, j);
        float d = ld_float(T[1], DT, x0 + o.x) - m;
        st_float(T[0], DT, y0 + o.y, MODE == 0u ? exp(d) / s : d - log_s);
    }
}

void norm_row(const rows_params *p, TF_T T, uint x0, uint y0) {
    float n = (float)p->len;
    float mean = 0.0f;
    if (MODE == 2u) {
        for (uint j = 0u; j < p->len; ++j) mean += ld_float(T[1], DT, x0 + inner(p, j).x);
        mean /= n;
        if (tf_isinf(mean)) {
            mean = 0.0f;
            for (uint j = 0u; j < p->len; ++j) mean += ld_float(T[1], DT, x0 + inner(p, j).x) / n;
        }
    }
    float squares = 0.0f;
    for (uint j = 0u; j < p->len; ++j) {
        float d = ld_float(T[1], DT, x0 + inner(p, j).x) - mean;
        squares += d * d;
    }
    float scale = 1.0f / sqrt(squares / n + p->eps);
    if (tf_isinf(squares)) {
        float m = 0.0f;
        for (uint j = 0u; j < p->len; ++j) m = max(m, fabs(ld_float(T[1], DT, x0 + inner(p, j).x) - mean));
        float scaled = 0.0f;
        for (uint j = 0u; j < p->len; ++j) {
            float q = (ld_float(T[1], DT, x0 + inner(p, j).x) - mean) / m;
            scaled += q * q;
        }
        scale = 1.0f / (m * sqrt(scaled / n + p->eps / m / m));
    }
    for (uint j = 0u; j < p->len; ++j) {
        uint4 o = inner(p, j);
        float v = (ld_float(T[1], DT, x0 + o.x) - mean) * scale * ld_float(T[2], DT, p->w_base + o.z);
        if (MODE == 2u) v += ld_float(T[3], DT, p->b_base + o.w);
        st_float(T[0], DT, y0 + o.y, v);
    }
}

float row_loss(const rows_params *p, TF_T T, global uint *status, uint r, bool *counted) {
    uint x0, y0;
    row_start(p, r, &x0, &y0);
    uint2 label = ld_raw(T[2], p->label_dtype, p->label_base + r * p->label_stride);
    if (p->label_dtype == DT_I32) label = i64_from_int((int)label.x);
    *counted = false;
    if (eq2(label, (uint2)(p->ignore_lo, p->ignore_hi))) return 0.0f;
    *counted = true;
    if (label.y != 0u || label.x >= p->len) {
        tf_report(status, TF_ERR_INDEX);
        return TF_NAN;
    }
    float m = -TF_INF;
    for (uint j = 0u; j < p->len; ++j) m = tf_max(m, ld_float(T[1], DT, x0 + inner(p, j).x));
    float s = 0.0f;
    for (uint j = 0u; j < p->len; ++j) s += exp(ld_float(T[1], DT, x0 + inner(p, j).x) - m);
    return m + log(s) - ld_float(T[1], DT, x0 + inner(p, label.x).x);
}

__attribute__((reqd_work_group_size(256, 1, 1)))
kernel void tf_rows(const rows_params pv, TF_KERNEL_ARGS) {
    TF_SLOTS_INIT;
    const rows_params *p = &pv;
    local float s_loss[256];
    local uint s_count[256];
    uint step = get_num_groups(0) * 256u;
    if (MODE == 4u && REDUCED == 1u) {
        uint t = get_local_id(0);
        float total = 0.0f;
        uint count = 0u;
        for (uint r = t; r < p->rows; r += 256u) {
            bool counted;
            float loss = row_loss(p, T, TF_STATUS, r, &counted);
            if (counted) {
                total += loss;
                count += 1u;
            }
        }
        s_loss[t] = total;
        s_count[t] = count;
        for (uint half_ = 128u; half_ > 0u; half_ >>= 1u) {
            barrier(CLK_LOCAL_MEM_FENCE);
            if (t < half_) {
                s_loss[t] += s_loss[t + half_];
                s_count[t] += s_count[t + half_];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t == 0u) {
            float v = s_loss[0];
            if (p->reduction == 1u) v = s_count[0] == 0u ? TF_NAN : v / (float)s_count[0];
            st_float(T[0], DT, p->y_base, v);
        }
        return;
    }
    for (uint r = get_global_id(0); r < p->rows; r += step) {
        uint x0, y0;
        row_start(p, r, &x0, &y0);
        if (MODE <= 1u) {
            softmax_row(p, T, x0, y0);
        } else if (MODE <= 3u) {
            norm_row(p, T, x0, y0);
        } else {
            bool counted;
            float loss = row_loss(p, T, TF_STATUS, r, &counted);
            st_float(T[0], DT, y0, loss);
        }
    }
}
