// Tiled matrix product C[M, N] = A[M, K] B[K, N] in shared memory, for four ops:
//   mode 0  matmul: A, B and C are strided views, one product per batch element (z)
//   mode 1  conv2d as an implicit GEMM: A = weight [Og, Cg*KH*KW], B = im2col(x), C = y
//   mode 2  conv2d_grad_input: A = weight^T [Cg, Og*KH*KW], B = the dy taps of each input
//           position, C = dx
//   mode 3  conv2d_grad_weight: A = dy [Og, N*OH*OW], B = im2col(x)^T, C = dw
// For convolutions z is the group. Each workgroup (8 x 8 invocations) computes a TM x TN tile of
// C, each invocation ROWS x COLS elements of it (rows ty + 8i, columns tx + 8j); A and B tiles of
// depth 16 go through shared memory. Only the index maps differ between modes. (On lavapipe,
// 8 x 8 blocks ran convolutions 2.5x faster than 16 x 16 invocations with 4 x 4 blocks: fewer
// shared-memory reads per multiply-add.)
// Selectors: MODE; ROWS and COLS (8: 64-row or 64-column tiles; 1: 8 for M or N <= 8, e.g. a
// one-channel input's gradient, a 3x3 one-channel weight gradient); SPLIT (1: the z workgroups also split K into chunks, each writing its
// partial tile to a scratch tensor in slot 0 that the plugin then sums, for products with few
// tiles and a long K such as weight gradients). Divisions of indices by shapes go through tf_div
// with divisors the plugin prepared. DT: f16 and bf16 operands are read as f32 and the sums
// accumulate in f32; C is rounded once (the K-split scratch stays f32 until the final sum). Mirrors gemm_params in plugins/vulkan/kernels.hpp.
layout(local_size_x = 8, local_size_y = 8) in;

TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, ROWS, 8u)
TF_SPEC(2, uint, SPLIT, 0u)
TF_SPEC(3, uint, COLS, 8u)
TF_SPEC(4, uint, DT, 0u)  // the operands' dtype: f32, f16 or bf16 (loaded as f32, accumulated in f32)

#define TM (8u * ROWS)
#define TN (8u * COLS)
#define TK 16u

struct gemm_params {
    uint og;  // output channels per group (modes 1-3)
    uint M;
    uint N;
    uint K;
    // mode 0: batch axes of the output and each operand's strides along them
    uint batch_rank;
    uint a_base;
    uint b_base;
    uint c_base;
    uint batch_shape[6];
    uint a_batch[6];
    uint b_batch[6];
    uint c_batch[6];
    uint a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;  // row and column strides
    // modes 1-3: x [n, c, h, w], weight [o, c / groups, kh, kw], y [n, o, oh, ow]
    uint n, c, h, w;
    uint o, kh, kw, groups;
    uint oh, ow;
    uint splits, k_chunk;  // SPLIT: chunks of K, and the K each one covers (a multiple of 16)
    int stride_h, stride_w, pad_h, pad_w;
    int dil_h, dil_w;
    uint z_count, pad3_;   // SPLIT: z extent without the chunks (batch elements or groups)
    uint x_base, w_base, y_base, pad4_;
    uint x_st[4];  // strides of x (dx in mode 2)
    uint w_st[4];  // strides of the weight (dw in mode 3)
    uint y_st[4];  // strides of y (dy in modes 2 and 3)
    uint cg, pad5_, pad6_, pad7_;  // input channels per group
    // Divisors (tf_div multiplier, shifts): kh * kw, kw, oh * ow, ow, h * w, w, stride_h, stride_w.
    uint div_m[8];
    uint div_s[8];
};
layout(std430, TF_BINDING(0)) readonly buffer tf_params_block { gemm_params tf_p; };
// A private copy, loaded once per invocation: lavapipe turns every buffer read into a gather.
gemm_params p;

shared float s_a[TK][64];  // TM <= 64 rows used
shared float s_b[TK][64];  // TN <= 64 columns used

#define D_TAPS 0
#define D_KW 1
#define D_OPLANE 2
#define D_OW 3
#define D_IPLANE 4
#define D_W 5
#define D_SH 6
#define D_SW 7
uint div_by(uint n, int which) { return tf_div(n, p.div_m[which], p.div_s[which]); }

// Slots: the output is 0; the inputs follow the op's order in ops.def.
uint x_slot() { return MODE == 1u ? 1u : MODE == 2u ? 0u : 2u; }
uint w_slot() { return MODE == 3u ? 0u : 2u; }
uint y_slot() { return MODE == 1u ? 0u : 1u; }

uint x_index(uint b, uint ch, uint ih, uint iw) {
    return p.x_base + b * p.x_st[0] + ch * p.x_st[1] + ih * p.x_st[2] + iw * p.x_st[3];
}
uint w_index(uint oc, uint ch, uint r, uint s) {
    return p.w_base + oc * p.w_st[0] + ch * p.w_st[1] + r * p.w_st[2] + s * p.w_st[3];
}
uint y_index(uint b, uint oc, uint r, uint s) {
    return p.y_base + b * p.y_st[0] + oc * p.y_st[1] + r * p.y_st[2] + s * p.y_st[3];
}

// x at output position (oy, ox) and kernel tap (r, s) of channel ch in image b; 0 in the padding.
float x_tap(uint b, uint ch, uint oy, uint ox, uint r, uint s) {
    int ih = int(oy) * p.stride_h - p.pad_h + int(r) * p.dil_h;
    int iw = int(ox) * p.stride_w - p.pad_w + int(s) * p.dil_w;
    if (ih < 0 || iw < 0 || ih >= int(p.h) || iw >= int(p.w)) return 0.0;
    return ld_float(x_slot(), DT, x_index(b, ch, uint(ih), uint(iw)));
}

// Per-workgroup offsets of mode 0's batch element.
uint g_a, g_b, g_c;

// Kernel tap k (c, r, s) of a weight row: c = k / taps, r = (k % taps) / kw, s = k % kw.
uvec3 tap_of(uint k) {
    uint c = div_by(k, D_TAPS);
    uint rs = k - c * (p.kh * p.kw);
    uint r = div_by(rs, D_KW);
    return uvec3(c, r, rs - r * p.kw);
}

// Position n of an [N, rows, cols] plane walk: (image, row, column).
uvec3 position_of(uint n, int plane, int cols, uint plane_size, uint col_size) {
    uint b = div_by(n, plane);
    uint q = n - b * plane_size;
    uint y = div_by(q, cols);
    return uvec3(b, y, q - y * col_size);
}

float load_a(uint m, uint k, uint z) {
    if (MODE == 0u) return ld_float(1u, DT, g_a + m * p.a_rs + k * p.a_cs);
    if (MODE == 1u) {
        uvec3 t = tap_of(k);
        return ld_float(2u, DT, w_index(z * p.og + m, t.x, t.y, t.z));
    }
    if (MODE == 2u) {
        uvec3 t = tap_of(k);  // t.x is the output channel within the group
        return ld_float(2u, DT, w_index(z * p.og + t.x, m, t.y, t.z));
    }
    uvec3 at = position_of(k, D_OPLANE, D_OW, p.oh * p.ow, p.ow);
    return ld_float(1u, DT, y_index(at.x, z * p.og + m, at.y, at.z));
}

float load_b(uint k, uint n, uint z) {
    if (MODE == 0u) return ld_float(2u, DT, g_b + k * p.b_rs + n * p.b_cs);
    if (MODE == 1u) {
        uvec3 t = tap_of(k);
        uvec3 at = position_of(n, D_OPLANE, D_OW, p.oh * p.ow, p.ow);
        return x_tap(at.x, z * p.cg + t.x, at.y, at.z, t.y, t.z);
    }
    if (MODE == 2u) {
        // The dy tap that input position (ih, iw) of image b receives from weight tap (r, s).
        uvec3 t = tap_of(k);
        uvec3 at = position_of(n, D_IPLANE, D_W, p.h * p.w, p.w);
        int th = int(at.y) + p.pad_h - int(t.y) * p.dil_h;
        int tw = int(at.z) + p.pad_w - int(t.z) * p.dil_w;
        if (th < 0 || tw < 0) return 0.0;
        uint oy = div_by(uint(th), D_SH), ox = div_by(uint(tw), D_SW);
        if (oy * uint(p.stride_h) != uint(th) || ox * uint(p.stride_w) != uint(tw) || oy >= p.oh || ox >= p.ow) return 0.0;
        return ld_float(1u, DT, y_index(at.x, z * p.og + t.x, oy, ox));
    }
    uvec3 at = position_of(k, D_OPLANE, D_OW, p.oh * p.ow, p.ow);
    uvec3 t = tap_of(n);
    return x_tap(at.x, z * p.cg + t.x, at.y, at.z, t.y, t.z);
}

void store_c(uint m, uint n, uint z, float v) {
    if (MODE == 0u) {
        st_float(0u, DT, g_c + m * p.c_rs + n * p.c_cs, v);
    } else if (MODE == 1u) {
        uvec3 at = position_of(n, D_OPLANE, D_OW, p.oh * p.ow, p.ow);
        st_float(0u, DT, y_index(at.x, z * p.og + m, at.y, at.z), v);
    } else if (MODE == 2u) {
        uvec3 at = position_of(n, D_IPLANE, D_W, p.h * p.w, p.w);
        st_float(0u, DT, x_index(at.x, z * p.cg + m, at.y, at.z), v);
    } else {
        uvec3 t = tap_of(n);
        st_float(0u, DT, w_index(z * p.og + m, t.x, t.y, t.z), v);
    }
}

void main() {
    p = tf_p;
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint tid = ty * 8u + tx;
    uint z = gl_WorkGroupID.z, chunk = 0u;
    uint k_begin = 0u, k_end = p.K;
    if (SPLIT == 1u) {
        chunk = z % p.splits;
        z /= p.splits;
        k_begin = chunk * p.k_chunk;
        k_end = min(p.K, k_begin + p.k_chunk);
    }

    g_a = p.a_base;
    g_b = p.b_base;
    g_c = p.c_base;
    uint rest = z;
    for (int d = int(p.batch_rank) - 1; d >= 0; --d) {
        uint q = rest % p.batch_shape[d];
        rest /= p.batch_shape[d];
        g_a += q * p.a_batch[d];
        g_b += q * p.b_batch[d];
        g_c += q * p.c_batch[d];
    }

    // Tiles beyond the grid (more than 65535 along x or y) are taken with a workgroup stride.
    for (uint row0 = gl_WorkGroupID.y * TM; row0 < p.M; row0 += gl_NumWorkGroups.y * TM) {
    for (uint col0 = gl_WorkGroupID.x * TN; col0 < p.N; col0 += gl_NumWorkGroups.x * TN) {
    float acc[ROWS][COLS];
    for (uint i = 0u; i < ROWS; ++i)
        for (uint j = 0u; j < COLS; ++j) acc[i][j] = 0.0;

    for (uint k0 = k_begin; k0 < k_end; k0 += TK) {
        for (uint l = 0u; l < 2u * ROWS; ++l) {
            uint e = tid + 64u * l;
            uint r = e / TK, kk = e % TK;  // A tile: TM rows x TK columns
            uint m = row0 + r, k = k0 + kk;
            s_a[kk][r] = m < p.M && k < k_end ? load_a(m, k, z) : 0.0;
        }
        for (uint l = 0u; l < 2u * COLS; ++l) {
            uint e = tid + 64u * l;
            uint kb = e / TN, c = e % TN;  // B tile: TK rows x TN columns
            uint n = col0 + c, k = k0 + kb;
            s_b[kb][c] = k < k_end && n < p.N ? load_b(k, n, z) : 0.0;
        }
        barrier();
        for (uint kk = 0u; kk < TK; ++kk) {
            float a[ROWS], b[COLS];
            for (uint i = 0u; i < ROWS; ++i) a[i] = s_a[kk][ty + 8u * i];
            for (uint j = 0u; j < COLS; ++j) b[j] = s_b[kk][tx + 8u * j];
            for (uint i = 0u; i < ROWS; ++i)
                for (uint j = 0u; j < COLS; ++j) acc[i][j] += a[i] * b[j];
        }
        barrier();
    }

    for (uint i = 0u; i < ROWS; ++i) {
        uint m = row0 + ty + 8u * i;
        if (m >= p.M) continue;
        for (uint j = 0u; j < COLS; ++j) {
            uint n = col0 + tx + 8u * j;
            if (n >= p.N) continue;
            // SPLIT: the scratch tensor is [splits, z_count, M, N], contiguous.
            if (SPLIT == 1u) st_f32(0u, p.c_base + ((chunk * p.z_count + z) * p.M + m) * p.N + n, acc[i][j]);
            else store_c(m, n, z, acc[i][j]);
        }
    }
    }  // col0
    }  // row0
}
