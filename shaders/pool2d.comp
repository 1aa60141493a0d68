// 2-D pooling over [N, C, H, W] -> [N, C, OH, OW], f32, f16 or bf16, any strides:
//   mode 0  max_pool2d: the window's maximum; padding is -inf, the first NaN wins
//   mode 1  max_pool2d_backward: dx gathers dy from every window whose first maximum it is
//   mode 2  avg_pool2d
//   mode 3  avg_pool2d_backward: dx gathers dy / divisor from every window it lies in
// Forward modes run one invocation per output element, backward ones one per input element,
// so nothing is written twice. Slots: 0 output; mode 1: 1 dy, 2 x; modes 0, 2, 3: 1 input.
// MODE is a specialization constant. Mirrors pool_params in plugins/vulkan/kernels.hpp.
layout(local_size_x = 256) in;

TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, DT, 0u)  // f32, f16 or bf16 (computed in f32, rounded once on store)

struct pool_params {
    uint pad0_;
    uint count;  // elements of the output tensor
    uint n, c;
    uint h, w, oh, ow;
    int kh, kw, sh, sw;
    int ph, pw;
    uint include_pad;
    uint pad_;
    uint x_base, y_base, dy_base, out_base;
    uint x_st[4];   // the [N, C, H, W] input (x, or dx's shape in mode 3: unused)
    uint y_st[4];   // the [N, C, OH, OW] tensor read in backward modes (dy)
    uint out_st[4];
    // The walked tensor's columns, rows and channels as tf_div divisors (m, then s).
    uint div_m[4];
    uint div_s[4];
};
layout(std430, TF_BINDING(0)) readonly buffer tf_params_block { pool_params tf_p; };
// A private copy, loaded once per invocation: lavapipe turns every buffer read into a gather.
pool_params p;

uint x_at(uint b, uint ch, int i, int j) {
    return p.x_base + b * p.x_st[0] + ch * p.x_st[1] + uint(i) * p.x_st[2] + uint(j) * p.x_st[3];
}

// Position (flattened i * W + j) of the first maximum of window (oy, ox).
int window_argmax(uint slot, uint b, uint ch, int oy, int ox) {
    float best = -TF_INF;
    int where_ = -1;
    for (int r = 0; r < p.kh; ++r) {
        int i = oy * p.sh - p.ph + r;
        if (i < 0 || i >= int(p.h)) continue;
        for (int s = 0; s < p.kw; ++s) {
            int j = ox * p.sw - p.pw + s;
            if (j < 0 || j >= int(p.w)) continue;
            float v = ld_float(slot, DT, x_at(b, ch, i, j));
            if (where_ < 0 || (!tf_isnan(best) && (tf_isnan(v) || v > best))) {
                best = v;
                where_ = i * int(p.w) + j;
            }
        }
    }
    return where_;
}

float divisor(int oy, int ox) {
    if (p.include_pad != 0u) return float(p.kh * p.kw);
    int i0 = max(oy * p.sh - p.ph, 0), i1 = min(oy * p.sh - p.ph + p.kh, int(p.h));
    int j0 = max(ox * p.sw - p.pw, 0), j1 = min(ox * p.sw - p.pw + p.kw, int(p.w));
    return float((i1 - i0) * (j1 - j0));
}

// The [N, C, *, *] coordinates of element e of the walked tensor (rows x cols spatially).
void unravel(uint e, uint rows, uint cols, out uint b, out uint ch, out int i, out int j) {
    uint q = tf_div(e, p.div_m[0], p.div_s[0]);
    j = int(e - q * cols);
    e = q;
    q = tf_div(e, p.div_m[1], p.div_s[1]);
    i = int(e - q * rows);
    e = q;
    b = tf_div(e, p.div_m[2], p.div_s[2]);
    ch = e - b * p.c;
}

void main() {
    p = tf_p;
    uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint e = gl_GlobalInvocationID.x; e < p.count; e += step) {
        uint b, ch;
        int i, j;
        if (MODE == 0u || MODE == 2u) {
            unravel(e, p.oh, p.ow, b, ch, i, j);
            float v;
            if (MODE == 0u) {
                int at = window_argmax(1u, b, ch, i, j);
                v = ld_float(1u, DT, x_at(b, ch, at / int(p.w), at % int(p.w)));
            } else {
                v = 0.0;
                for (int r = 0; r < p.kh; ++r) {
                    int y = i * p.sh - p.ph + r;
                    if (y < 0 || y >= int(p.h)) continue;
                    for (int s = 0; s < p.kw; ++s) {
                        int x = j * p.sw - p.pw + s;
                        if (x >= 0 && x < int(p.w)) v += ld_float(1u, DT, x_at(b, ch, y, x));
                    }
                }
                v /= divisor(i, j);
            }
            st_float(0u, DT, p.out_base + b * p.out_st[0] + ch * p.out_st[1] + uint(i) * p.out_st[2] +
                           uint(j) * p.out_st[3], v);
            continue;
        }
        // Backward: windows (oy, ox) with oy * sh - ph <= i < oy * sh - ph + kh, same for x.
        unravel(e, p.h, p.w, b, ch, i, j);
        // ceil((i + ph - kh + 1) / sh) .. floor((i + ph) / sh), clipped to the output.
        int lo_y = i + p.ph - p.kh + 1, lo_x = j + p.pw - p.kw + 1;
        int oy0 = lo_y <= 0 ? 0 : (lo_y + p.sh - 1) / p.sh;
        int oy1 = min((i + p.ph) / p.sh, int(p.oh) - 1);
        int ox0 = lo_x <= 0 ? 0 : (lo_x + p.sw - 1) / p.sw;
        int ox1 = min((j + p.pw) / p.sw, int(p.ow) - 1);
        uint dy_slot = 1u;
        float g = 0.0;
        for (int oy = oy0; oy <= oy1; ++oy) {
            for (int ox = ox0; ox <= ox1; ++ox) {
                uint dy_e = p.dy_base + b * p.y_st[0] + ch * p.y_st[1] + uint(oy) * p.y_st[2] +
                            uint(ox) * p.y_st[3];
                if (MODE == 1u) {
                    if (window_argmax(2u, b, ch, oy, ox) == i * int(p.w) + j) g += ld_float(dy_slot, DT, dy_e);
                } else {
                    g += ld_float(dy_slot, DT, dy_e) / divisor(oy, ox);
                }
            }
        }
        st_float(0u, DT, p.out_base + b * p.out_st[0] + ch * p.out_st[1] + uint(i) * p.out_st[2] +
                       uint(j) * p.out_st[3], g);
    }
}
