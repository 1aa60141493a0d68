// Ops that work row by row, f32, f16 or bf16 (computed in f32), any strides: one invocation per row walks the row's elements.
//   mode 0  softmax          y = exp(x - max) / sum(exp(x - max))
//   mode 1  log_softmax      y = x - max - log(sum(exp(x - max)))
//   mode 2  layer_norm       y = (x - mean) / sqrt(var + eps) * weight + bias
//   mode 3  rms_norm         y = x / sqrt(mean(x^2) + eps) * weight
//   mode 4  cross_entropy    loss = logsumexp(x) - x[label]; reduction none writes one loss per
//                            row, mean and sum run one workgroup that adds the rows' losses
// A row is every position of the "outer" axes; its elements are the positions of the "inner"
// axes (the softmax axis, the normalised axes, the classes). Slots: 0 y, 1 x, 2 weight or
// labels, 3 bias. MODE, REDUCED (cross_entropy with reduction mean or sum) and INNER_FLAT (one
// inner axis) are specialization constants. Mirrors rows_params in plugins/vulkan/kernels.hpp.
layout(local_size_x = 256) in;

TF_SPEC(0, uint, MODE, 0u)
TF_SPEC(1, uint, REDUCED, 0u)
TF_SPEC(2, uint, INNER_FLAT, 1u)
TF_SPEC(3, uint, DT, 0u)  // x, weight, bias and y: f32, f16 or bf16 (f32 inside, y rounded once)

struct rows_params {
    uint pad0_;
    uint rows;
    uint len;         // elements per row
    uint outer_rank;
    uint inner_rank;
    uint reduction;   // cross_entropy: tf_reduction (0 none, 1 mean, 2 sum)
    float eps;
    uint label_dtype;
    uint x_base, y_base, w_base, b_base;
    uint label_base, label_stride;
    uint ignore_lo, ignore_hi;  // cross_entropy: ignore_index as two's complement words
    uint outer_shape[8];
    uint x_outer[8];
    uint y_outer[8];
    uint inner_shape[8];
    uint x_inner[8];
    uint y_inner[8];
    uint w_inner[8];
    uint b_inner[8];
};
layout(std430, TF_BINDING(0)) readonly buffer tf_params_block { rows_params tf_p; };
// A private copy, loaded once per invocation: lavapipe turns every buffer read into a gather.
rows_params p;

shared float s_loss[256];
shared uint s_count[256];

// Offsets in x and y of element 0 of row r.
void row_start(uint r, out uint x, out uint y) {
    x = p.x_base;
    y = p.y_base;
    for (int d = int(p.outer_rank) - 1; d >= 0; --d) {
        uint q = r % p.outer_shape[d];
        r /= p.outer_shape[d];
        x += q * p.x_outer[d];
        y += q * p.y_outer[d];
    }
}

// Offsets of element j within a row: x, y, weight, bias.
uvec4 inner(uint j) {
    if (INNER_FLAT == 1u) return uvec4(j * p.x_inner[0], j * p.y_inner[0], j * p.w_inner[0], j * p.b_inner[0]);
    uvec4 o = uvec4(0u);
    for (int d = int(p.inner_rank) - 1; d >= 0; --d) {
        uint q = j % p.inner_shape[d];
        j /= p.inner_shape[d];
        o += q * uvec4(p.x_inner[d], p.y_inner[d], p.w_inner[d], p.b_inner[d]);
    }
    return o;
}

void softmax_row(uint x0, uint y0) {
    float m = -TF_INF;
    for (uint j = 0u; j < p.len; ++j) m = tf_max(m, ld_float(1u, DT, x0 + inner(j).x));
    float s = 0.0;
    for (uint j = 0u; j < p.len; ++j) s += exp(ld_float(1u, DT, x0 + inner(j).x) - m);
    float log_s = log(s);
    for (uint j = 0u; j < p.len; ++j) {
        uvec4 o = inner(j);
        float d = ld_float(1u, DT, x0 + o.x) - m;
        st_float(0u, DT, y0 + o.y, MODE == 0u ? exp(d) / s : d - log_s);
    }
}

void norm_row(uint x0, uint y0) {
    float n = float(p.len);
    float mean = 0.0;
    if (MODE == 2u) {
        for (uint j = 0u; j < p.len; ++j) mean += ld_float(1u, DT, x0 + inner(j).x);
        mean /= n;
        // A sum past f32's range (|x| near 1e38): add the elements divided by n instead.
        if (tf_isinf(mean)) {
            mean = 0.0;
            for (uint j = 0u; j < p.len; ++j) mean += ld_float(1u, DT, x0 + inner(j).x) / n;
        }
    }
    float squares = 0.0;
    for (uint j = 0u; j < p.len; ++j) {
        float d = ld_float(1u, DT, x0 + inner(j).x) - mean;
        squares += d * d;
    }
    float scale = 1.0 / sqrt(squares / n + p.eps);
    if (tf_isinf(squares)) {
        // Squares of |x - mean| past ~1.8e19 overflow f32 (cpu sums them in double): scale the
        // row by its largest |x - mean| m first; 1 / sqrt(var + eps) = 1 / (m sqrt(var / m^2 + eps / m^2)).
        float m = 0.0;
        for (uint j = 0u; j < p.len; ++j) m = max(m, abs(ld_float(1u, DT, x0 + inner(j).x) - mean));
        float scaled = 0.0;
        for (uint j = 0u; j < p.len; ++j) {
            float q = (ld_float(1u, DT, x0 + inner(j).x) - mean) / m;
            scaled += q * q;
        }
        scale = 1.0 / (m * sqrt(scaled / n + p.eps / m / m));
    }
    for (uint j = 0u; j < p.len; ++j) {
        uvec4 o = inner(j);
        float v = (ld_float(1u, DT, x0 + o.x) - mean) * scale * ld_float(2u, DT, p.w_base + o.z);
        if (MODE == 2u) v += ld_float(3u, DT, p.b_base + o.w);
        st_float(0u, DT, y0 + o.y, v);
    }
}

// Loss of row r; counted is false for an ignored label. A label outside [0, len) is reported and
// its loss is NaN, counted, so a reduced loss is NaN too.
float row_loss(uint r, out bool counted) {
    uint x0, y0;
    row_start(r, x0, y0);
    uvec2 label = ld_raw(2u, p.label_dtype, p.label_base + r * p.label_stride);
    if (p.label_dtype == DT_I32) label = i64_from_int(int(label.x));
    counted = false;
    if (label == uvec2(p.ignore_lo, p.ignore_hi)) return 0.0;
    counted = true;
    if (label.y != 0u || label.x >= p.len) {
        tf_report(TF_ERR_INDEX);
        return TF_NAN;
    }
    float m = -TF_INF;
    for (uint j = 0u; j < p.len; ++j) m = tf_max(m, ld_float(1u, DT, x0 + inner(j).x));
    float s = 0.0;
    for (uint j = 0u; j < p.len; ++j) s += exp(ld_float(1u, DT, x0 + inner(j).x) - m);
    return m + log(s) - ld_float(1u, DT, x0 + inner(label.x).x);
}

void main() {
    p = tf_p;
    uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (MODE == 4u && REDUCED == 1u) {
        // One workgroup: each invocation adds every 256th row, then a tree adds the invocations.
        uint t = gl_LocalInvocationID.x;
        float total = 0.0;
        uint count = 0u;
        for (uint r = t; r < p.rows; r += 256u) {
            bool counted;
            float loss = row_loss(r, counted);
            if (counted) {
                total += loss;
                count += 1u;
            }
        }
        s_loss[t] = total;
        s_count[t] = count;
        for (uint half_ = 128u; half_ > 0u; half_ >>= 1u) {
            barrier();
            if (t < half_) {
                s_loss[t] += s_loss[t + half_];
                s_count[t] += s_count[t + half_];
            }
        }
        barrier();
        if (t == 0u) {
            float v = s_loss[0];
            if (p.reduction == 1u) v = s_count[0] == 0u ? TF_NAN : v / float(s_count[0]);
            st_float(0u, DT, p.y_base, v);
        }
        return;
    }
    for (uint r = gl_GlobalInvocationID.x; r < p.rows; r += step) {
        uint x0, y0;
        row_start(r, x0, y0);
        if (MODE <= 1u) {
            softmax_row(x0, y0);
        } else if (MODE <= 3u) {
            norm_row(x0, y0);
        } else {
            bool counted;
            float loss = row_loss(r, counted);
            st_float(0u, DT, y0, loss);
        }
    }
}
