// Ops that index with integer tensors, and rope:
//   mode 0  one_hot             out[..., c] = (labels[...] == c), in out's dtype
//   mode 1  embedding           out[..., d] = weight[indices[...], d]
//   mode 2  embedding_backward  dweight[indices[...], d] += dy[..., d] (the plugin zeroes dweight
//                               in the dispatch before; float adds through compare-and-swap)
//   mode 3  rope                rotates the pairs of x [..., T, D] by (offset + t) theta^(-2i/D)
// One invocation per element of shape (out, or dy in mode 2). Indices outside their range are
// reported and their elements left 0. Slots: 0 out, 1 weight / dy / x, 2 indices or labels, or
// for rope the frequencies in turns, theta^(-2i/D) / 2pi, five f32 chunks of 12 significant bits
// per pair i (their sum is exactly the double the plugin computes, as the cpu plugin does).
// MODE, OUT_DT and IDX_DT are specialization constants. Mirrors index_params in
// plugins/vulkan/kernels.hpp.
layout(local_size_x = 256) in;

TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, OUT_DT, 0u)   // one_hot's output dtype
TF_SPEC(2, uint, IDX_DT, 3u)   // the index tensor's dtype (i32 or i64)
TF_SPEC(3, uint, IN_DT, 0u)    // slot 1's float dtype (weight, dy, x): f32, f16 or bf16, read as f32

struct index_params {
    uint pad0_;
    uint count;
    uint rank;       // of shape; the index tensor has rank - 1 axes
    uint pad1_;
    uint pad2_;
    uint limit;      // classes (one_hot) or rows of the weight (embedding)
    uint interleaved;
    uint inverse;
    uint pad5_;
    uint offset_lo, offset_hi;  // rope position_offset as two's complement words
    uint pad3_;
    uint out_base, in_base, idx_base, pad4_;
    uint shape[8];
    uint out_st[8];
    uint in_st[8];
    uint idx_st[8];
    uint div_m[8];   // shape as tf_div divisors
    uint div_s[8];
};
layout(std430, TF_BINDING(0)) readonly buffer tf_params_block { index_params tf_p; };
// A private copy, loaded once per invocation: lavapipe turns every buffer read into a gather.
index_params p;

void float_add(uint s, uint e, float v) {
    uint old = tf_t[s].w[e];
    for (;;) {
        uint seen = atomicCompSwap(tf_t[s].w[e], old, floatBitsToUint(uintBitsToFloat(old) + v));
        if (seen == old) break;
        old = seen;
    }
}

void main() {
    p = tf_p;
    uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint last = p.rank - 1u;
    for (uint e = gl_GlobalInvocationID.x; e < p.count; e += step) {
        // Coordinates of element e: the last axis, and offsets along the others.
        uint rest = e;
        uint out_e = p.out_base, in_e = p.in_base, idx_e = p.idx_base;
        uint c_last = 0u, c_prev = 0u;
        for (int d = int(p.rank) - 1; d >= 0; --d) {
            uint next = tf_div(rest, p.div_m[d], p.div_s[d]);
            uint q = rest - next * p.shape[d];
            rest = next;
            out_e += q * p.out_st[d];
            in_e += q * p.in_st[d];
            if (uint(d) == last) c_last = q;
            else idx_e += q * p.idx_st[d];
            if (uint(d) + 1u == last) c_prev = q;
        }
        if (MODE == 3u) {
            uint dim = p.shape[last];
            uint i, partner;
            bool first;
            if (p.interleaved != 0u) {
                i = c_last / 2u;
                first = (c_last & 1u) == 0u;
                partner = first ? c_last + 1u : c_last - 1u;
            } else {
                uint half_ = dim / 2u;
                i = c_last % half_;
                first = c_last < half_;
                partner = first ? c_last + half_ : c_last - half_;
            }
            // The angle in turns, reduced mod 1 without forming the large product: with the
            // position cut into 12-bit chunks, each chunk (times a power of two) times each
            // 12-bit frequency chunk is exact in f32, and so is its fractional part. An f32
            // angle, or an f32 frequency times the position, is off by radians past 10^6.
            uvec2 pos = i64_add(uvec2(p.offset_lo, p.offset_hi), uvec2(c_prev, 0u));
            bool negative = int(pos.y) < 0;
            if (negative) pos = i64_neg(pos);
            uint chunks[6] = uint[6](pos.x & 0xfffu, (pos.x >> 12u) & 0xfffu, (pos.x >> 24u) | ((pos.y & 0xfu) << 8u),
                                     (pos.y >> 4u) & 0xfffu, (pos.y >> 16u) & 0xfffu, pos.y >> 28u);
            precise float turns = 0.0;
            for (uint k = 0u; k < 6u; ++k) {
                if (chunks[k] == 0u) continue;
                float scaled = float(chunks[k]) * uintBitsToFloat((127u + 12u * k) << 23u);  // * 2^(12k), exact
                for (uint j = 0u; j < 5u; ++j) {
                    precise float part = scaled * ld_f32(2u, p.idx_base + 5u * i + j);
                    turns = fract(turns + fract(part));
                }
            }
            if (negative) turns = -turns;
            turns -= floor(turns + 0.5);  // [-1/2, 1/2]: cos and sin are most accurate near 0
            float angle = 6.2831853071795865 * turns;
            float cs = cos(angle), sn = sin(angle);
            if (p.inverse != 0u) sn = -sn;
            float x = ld_float(1u, IN_DT, in_e);
            float y = ld_float(1u, IN_DT, in_e + (partner - c_last) * p.in_st[last]);
            st_float(0u, OUT_DT, out_e, first ? x * cs - y * sn : y * sn + x * cs);
            continue;
        }
        int index;
        bool fits = ld_index(2u, IDX_DT, idx_e, index);
        bool valid = fits && index >= 0 && uint(index) < p.limit;
        if (!valid) tf_report(TF_ERR_INDEX);
        if (MODE == 0u) {
            st_raw(0u, OUT_DT, out_e, tf_one(OUT_DT, valid && uint(index) == c_last));
        } else if (MODE == 1u) {
            // in_st[0], in_st[1]: the weight's strides; in_e is unused.
            float v = valid ? ld_float(1u, IN_DT, p.in_base + uint(index) * p.in_st[0] + c_last * p.in_st[1]) : 0.0;
            st_float(0u, OUT_DT, out_e, v);
        } else if (valid) {
            // out_st[0], out_st[1]: dweight's strides; in_e walks dy.
            // dweight is f32 here (for f16 and bf16 the plugin sums into f32 scratch and casts).
            float_add(0u, p.out_base + uint(index) * p.out_st[0] + c_last * p.out_st[1], ld_float(1u, IN_DT, in_e));
        }
    }
}
