// Tiled matrix product C[M, N] = A[M, K] B[K, N] in local memory, for four ops (the OpenCL C
// port of shaders/gemm.comp, where the modes and tiles are explained):
//   mode 0 matmul, 1 conv2d (implicit GEMM), 2 conv2d_grad_input, 3 conv2d_grad_weight.
// Groups of 8 x 8 work-items compute (8 ROWS) x (8 COLS) tiles; SPLIT splits K over z into a
// scratch tensor the host then sums (f32 partial sums; C is rounded once to DT at the end).
TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, ROWS, 8u)
TF_SPEC(2, uint, SPLIT, 0u)
TF_SPEC(3, uint, COLS, 8u)
TF_SPEC(4, uint, DT, 0u)  // the operands' dtype: f32, f16 or bf16 (loaded as f32, accumulated in f32)

#define TM (8u * ROWS)
#define TN (8u * COLS)
#define TK 16u

typedef struct {
    uint og, M, N, K;
    uint batch_rank, a_base, b_base, c_base;
    uint batch_shape[6], a_batch[6], b_batch[6], c_batch[6];
    uint a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;
    uint n, c, h, w;
    uint o, kh, kw, groups;
    uint oh, ow, splits, k_chunk;
    int stride_h, stride_w, pad_h, pad_w;
    int dil_h, dil_w;
    uint z_count, pad3_;
    uint x_base, w_base, y_base, pad4_;
    uint x_st[4], w_st[4], y_st[4];
    uint cg, pad5_, pad6_, pad7_;
    uint div_m[8], div_s[8];
} gemm_params;

#define D_TAPS 0
#define D_KW 1
#define D_OPLANE 2
#define D_OW 3
#define D_IPLANE 4
#define D_W 5
#define D_SH 6
#define D_SW 7

#define X_SLOT (MODE == 1u ? 1u : MODE == 2u ? 0u : 2u)

uint div_by(const gemm_params *p, uint n, int which) { return tf_div(n, p->div_m[which], p->div_s[which]); }

uint x_index(const gemm_params *p, uint b, uint ch, uint ih, uint iw) {
    return p->x_base + b * p->x_st[0] + ch * p->x_st[1] + ih * p->x_st[2] + iw * p->x_st[3];
}
uint w_index(const gemm_params *p, uint oc, uint ch, uint r, uint s) {
    return p->w_base + oc * p->w_st[0] + ch * p->w_st[1] + r * p->w_st[2] + s * p->w_st[3];
}
uint y_index(const gemm_params *p, uint b, uint oc, uint r, uint s) {
    return p->y_base + b * p->y_st[0] + oc * p->y_st[1] + r * p->y_st[2] + s * p->y_st[3];
}

float x_tap(const gemm_params *p, TF_T T, uint b, uint ch, uint oy, uint ox, uint r, uint s) {
    int ih = (int)oy * p->stride_h - p->pad_h + (int)r * p->dil_h;
    int iw = (int)ox * p->stride_w - p->pad_w + (int)s * p->dil_w;
    if (ih < 0 || iw < 0 || ih >= (int)p->h || iw >= (int)p->w) return 0.0f;
    return ld_float(T[X_SLOT], DT, x_index(p, b, ch, (uint)ih, (uint)iw));
}

uint3 tap_of(const gemm_params *p, uint k) {
    uint c = div_by(p, k, D_TAPS);
    uint rs = k - c * (p->kh * p->kw);
    uint r = div_by(p, rs, D_KW);
    return (uint3)(c, r, rs - r * p->kw);
}

uint3 position_of(const gemm_params *p, uint n, int plane, int cols, uint plane_size, uint col_size) {
    uint b = div_by(p, n, plane);
    uint q = n - b * plane_size;
    uint y = div_by(p, q, cols);
    return (uint3)(b, y, q - y * col_size);
}

float load_a(const gemm_params *p, TF_T T, uint ga, uint m, uint k, uint z) {
    if (MODE == 0u) return ld_float(T[1], DT, ga + m * p->a_rs + k * p->a_cs);
    if (MODE == 1u) {
        uint3 t = tap_of(p, k);
        return ld_float(T[2], DT, w_index(p, z * p->og + m, t.x, t.y, t.z));
    }
    if (MODE == 2u) {
        uint3 t = tap_of(p, k);
        return ld_float(T[2], DT, w_index(p, z * p->og + t.x, m, t.y, t.z));
    }
    uint3 at = position_of(p, k, D_OPLANE, D_OW, p->oh * p->ow, p->ow);
    return ld_float(T[1], DT, y_index(p, at.x, z * p->og + m, at.y, at.z));
}

float load_b(const gemm_params *p, TF_T T, uint gb, uint k, uint n, uint z) {
    if (MODE == 0u) return ld_float(T[2], DT, gb + k * p->b_rs + n * p->b_cs);
    if (MODE == 1u) {
        uint3 t = tap_of(p, k);
        uint3 at = position_of(p, n, D_OPLANE, D_OW, p->oh * p->ow, p->ow);
        return x_tap(p, T, at.x, z * p->cg + t.x, at.y, at.z, t.y, t.z);
    }
    if (MODE == 2u) {
        uint3 t = tap_of(p, k);
        uint3 at = position_of(p, n, D_IPLANE, D_W, p->h * p->w, p->w);
        int th = (int)at.y + p->pad_h - (int)t.y * p->dil_h;
        int tw = (int)at.z + p->pad_w - (int)t.z * p->dil_w;
        if (th < 0 || tw < 0) return 0.0f;
        uint oy = div_by(p, (uint)th, D_SH), ox = div_by(p, (uint)tw, D_SW);
        if (oy * (uint)p->stride_h != (uint)th || ox * (uint)p->stride_w != (uint)tw || oy >= p->oh || ox >= p->ow)
            return 0.0f;
        return ld_float(T[1], DT, y_index(p, at.x, z * p->og + t.x, oy, ox));
    }
    uint3 at = position_of(p, k, D_OPLANE, D_OW, p->oh * p->ow, p->ow);
    uint3 t = tap_of(p, n);
    return x_tap(p, T, at.x, z * p->cg + t.x, at.y, at.z, t.y, t.z);
}

void store_c(const gemm_params *p, TF_T T, uint gc, uint m, uint n, uint z, float v) {
    if (MODE == 0u) {
        st_float(T[0], DT, gc + m * p->c_rs + n * p->c_cs, v);
    } else if (MODE == 1u) {
        uint3 at = position_of(p, n, D_OPLANE, D_OW, p->oh * p->ow, p->ow);
        st_float(T[0], DT, y_index(p, at.x, z * p->og + m, at.y, at.z), v);
    } else if (MODE == 2u) {
        uint3 at = position_of(p, n, D_IPLANE, D_W, p->h * p->w, p->w);
        st_float(T[0], DT, x_index(p, at.x, z * p->cg + m, at.y, at.z), v);
    } else {
        uint3 t = tap_of(p, n);
        st_float(T[0], DT, w_index(p, z * p->og + m, t.x, t.y, t.z), v);
    }
}

__attribute__((reqd_work_group_size(8, 8, 1)))
kernel void tf_gemm(const gemm_params pv, TF_KERNEL_ARGS) {
    TF_SLOTS_INIT;
    const gemm_params *p = &pv;
    local float s_a[TK][64];
    local float s_b[TK][64];
    uint tx = get_local_id(0), ty = get_local_id(1);
    uint tid = ty * 8u + tx;
    uint z = get_group_id(2), chunk = 0u;
    uint k_begin = 0u, k_end = p->K;
    if (SPLIT == 1u) {
        chunk = z % p->splits;
        z /= p->splits;
        k_begin = chunk * p->k_chunk;
        k_end = min(p->K, k_begin + p->k_chunk);
    }
    uint ga = p->a_base, gb = p->b_base, gc = p->c_base;
    uint rest = z;
    for (int d = (int)p->batch_rank - 1; d >= 0; --d) {
        uint q = rest % p->batch_shape[d];
        rest /= p->batch_shape[d];
        ga += q * p->a_batch[d];
        gb += q * p->b_batch[d];
        gc += q * p->c_batch[d];
    }
    for (uint row0 = get_group_id(1) * TM; row0 < p->M; row0 += get_num_groups(1) * TM) {
    for (uint col0 = get_group_id(0) * TN; col0 < p->N; col0 += get_num_groups(0) * TN) {
        float acc[ROWS][COLS];
        for (uint i = 0u; i < ROWS; ++i)
            for (uint j = 0u; j < COLS; ++j) acc[i][j] = 0.0f;
        for (uint k0 = k_begin; k0 < k_end; k0 += TK) {
            for (uint l = 0u; l < 2u * ROWS; ++l) {
                uint e = tid + 64u * l;
                uint r = e / TK, kk = e % TK;
                uint m = row0 + r, k = k0 + kk;
                s_a[kk][r] = m < p->M && k < k_end ? load_a(p, T, ga, m, k, z) : 0.0f;
            }
            for (uint l = 0u; l < 2u * COLS; ++l) {
                uint e = tid + 64u * l;
                uint kb = e / TN, c = e % TN;
                uint n = col0 + c, k = k0 + kb;
                s_b[kb][c] = k < k_end && n < p->N ? load_b(p, T, gb, k, n, z) : 0.0f;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            for (uint kk = 0u; kk < TK; ++kk) {
                float a[ROWS], b[COLS];
                for (uint i = 0u; i < ROWS; ++i) a[i] = s_a[kk][ty + 8u * i];
                for (uint j = 0u; j < COLS; ++j) b[j] = s_b[kk][tx + 8u * j];
                for (uint i = 0u; i < ROWS; ++i)
                    for (uint j = 0u; j < COLS; ++j) acc[i][j] += a[i] * b[j];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        for (uint i = 0u; i < ROWS; ++i) {
            uint m = row0 + ty + 8u * i;
            if (m >= p->M) continue;
            for (uint j = 0u; j < COLS; ++j) {
                uint n = col0 + tx + 8u * j;
                if (n >= p->N) continue;
                if (SPLIT == 1u) st_f32(T[0], p->c_base + ((chunk * p->z_count + z) * p->M + m) * p->N + n, acc[i][j]);
                else store_c(p, T, gc, m, n, z, acc[i][j]);
            }
        }
    }
    }
}
