// 2-D pooling over [N, C, H, W] -> [N, C, OH, OW], f32, f16 or bf16, any strides: the OpenCL C
// port of shaders/pool2d.comp (mode 0 max, 1 max backward, 2 avg, 3 avg backward). Forward modes run one
// work-item per output element, backward ones one per input element. Slots: 0 output;
// mode 1: 1 dy, 2 x; modes 0, 2, 3: 1 input.
TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, DT, 0u)  // f32, f16 or bf16 (computed in f32, rounded once on store)

typedef struct {
    uint pad0_, count, n, c;
    uint h, w, oh, ow;
    int kh, kw, sh, sw;
    int ph, pw;
    uint include_pad, pad_;
    uint x_base, y_base, dy_base, out_base;
    uint x_st[4], y_st[4], out_st[4];
    uint div_m[4], div_s[4];
} pool_params;

uint x_at(const pool_params *p, uint b, uint ch, int i, int j) {
    return p->x_base + b * p->x_st[0] + ch * p->x_st[1] + (uint)i * p->x_st[2] + (uint)j * p->x_st[3];
}

int window_argmax(const pool_params *p, global uint *x, uint b, uint ch, int oy, int ox) {
    float best = -TF_INF;
    int where_ = -1;
    for (int r = 0; r < p->kh; ++r) {
        int i = oy * p->sh - p->ph + r;
        if (i < 0 || i >= (int)p->h) continue;
        for (int s = 0; s < p->kw; ++s) {
            int j = ox * p->sw - p->pw + s;
            if (j < 0 || j >= (int)p->w) continue;
            float v = ld_float(x, DT, x_at(p, b, ch, i, j));
            if (where_ < 0 || (!tf_isnan(best) && (tf_isnan(v) || v > best))) {
                best = v;
                where_ = i * (int)p->w + j;
            }
        }
    }
    return where_;
}

float divisor(const pool_params *p, int oy, int ox) {
    if (p->include_pad != 0u) return (float)(p->kh * p->kw);
    int i0 = max(oy * p->sh - p->ph, 0), i1 = min(oy * p->sh - p->ph + p->kh, (int)p->h);
    int j0 = max(ox * p->sw - p->pw, 0), j1 = min(ox * p->sw - p->pw + p->kw, (int)p->w);
    return (float)((i1 - i0) * (j1 - j0));
}

void unravel(const pool_params *p, uint e, uint rows, uint cols, uint *b, uint *ch, int *i, int *j) {
    uint q = tf_div(e, p->div_m[0], p->div_s[0]);
    *j = (int)(e - q * cols);
    e = q;
    q = tf_div(e, p->div_m[1], p->div_s[1]);
    *i = (int)(e - q * rows);
    e = q;
    *b = tf_div(e, p->div_m[2], p->div_s[2]);
    *ch = e - *b * p->c;
}

__attribute__((reqd_work_group_size(256, 1, 1)))
kernel void tf_pool2d(const pool_params pv, TF_KERNEL_ARGS) {
    TF_SLOTS_INIT;
    const pool_params *p = &pv;
    uint step = get_num_groups(0) * 256u;
    for (uint e = get_global_id(0); e < p->count; e += step) {
        uint b, ch;
        int i, j;
        if (MODE == 0u || MODE == 2u) {
            unravel(p, e, p->oh, p->ow, &b, &ch, &i, &j);
            float v;
            if (MODE == 0u) {
                int at = window_argmax(p, T[1], b, ch, i, j);
                v = ld_float(T[1], DT, x_at(p, b, ch, at / (int)p->w, at % (int)p->w));
            } else {
                v = 0.0f;
                for (int r = 0; r < p->kh; ++r) {
                    int y = i * p->sh - p->ph + r;
                    if (y < 0 || y >= (int)p->h) continue;
                    for (int s = 0; s < p->kw; ++s) {
                        int x = j * p->sw - p->pw + s;
                        if (x >= 0 && x < (int)p->w) v += ld_float(T[1], DT, x_at(p, b, ch, y, x));
                    }
                }
                v /= divisor(p, i, j);
            }
            st_float(T[0], DT, p->out_base + b * p->out_st[0] + ch * p->out_st[1] + (uint)i * p->out_st[2] +
                             (uint)j * p->out_st[3], v);
            continue;
        }
        unravel(p, e, p->h, p->w, &b, &ch, &i, &j);
        int lo_y = i + p->ph - p->kh + 1, lo_x = j + p->pw - p->kw + 1;
        int oy0 = lo_y <= 0 ? 0 : (lo_y + p->sh - 1) / p->sh;
        int oy1 = min((i + p->ph) / p->sh, (int)p->oh - 1);
        int ox0 = lo_x <= 0 ? 0 : (lo_x + p->sw - 1) / p->sw;
        int ox1 = min((j + p->pw) / p->sw, (int)p->ow - 1);
        float g = 0.0f;
        for (int oy = oy0; oy <= oy1; ++oy) {
            for (int ox = ox0; ox <= ox1; ++ox) {
                uint dy_e = p->dy_base + b * p->y_st[0] + ch * p->y_st[1] + (uint)oy * p->y_st[2] + (uint)ox * p->y_st[3];
                if (MODE == 1u) {
                    if (window_argmax(p, T[2], b, ch, oy, ox) == i * (int)p->w + j) g += ld_float(T[1], DT, dy_e);
                } else {
                    g += ld_float(T[1], DT, dy_e) / divisor(p, oy, ox);
                }
            }
        }
        st_float(T[0], DT, p->out_base + b * p->out_st[0] + ch * p->out_st[1] + (uint)i * p->out_st[2] + (uint)j * p->out_st[3], g);
    }
}
