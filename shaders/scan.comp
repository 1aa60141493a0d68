// Scans along one axis: cumsum, inclusive or exclusive (from 0), forwards or in reverse, any
// strides. A line is every position of the other axes; one invocation walks one line. f32, f16
// and bf16 (DT) are summed in f32 and each output rounded once to DT; i32 and i64 wrap (two's
// complement) like the cpu plugin's add. Slot 0 y, slot 1 x. Mirrors ScanParams in
// plugins/gpu/kernel_params.hpp.
layout(local_size_x = 256) in;

TF_SPEC(0, uint, DT, 0u)  // x and y: f32, f16, bf16, i32, i64

struct scan_params {
    uint lines;       // positions of the other axes
    uint n;           // elements along the axis
    uint rank;        // the other axes, merged
    uint flags;       // SCAN_* below
    uint x_base, y_base;
    uint x_step, y_step;  // strides along the axis
    uint shape[8];    // the other axes
    uint x_strides[8];
    uint y_strides[8];
};
layout(std430, TF_BINDING(0)) readonly buffer tf_params_block { scan_params tf_p; };
// A private copy, loaded once per invocation: lavapipe turns every buffer read into a gather.
scan_params p;

#define SCAN_EXCLUSIVE 1u
#define SCAN_REVERSE 2u

void scan_line(uint line) {
    uint x = p.x_base, y = p.y_base;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint q = line % p.shape[d];
        line /= p.shape[d];
        x += q * p.x_strides[d];
        y += q * p.y_strides[d];
    }
    bool exclusive = (p.flags & SCAN_EXCLUSIVE) != 0u;
    bool reverse = (p.flags & SCAN_REVERSE) != 0u;
    float acc = 0.0;
    uvec2 wide = uvec2(0u);  // i32 in x (uint adds wrap), i64 as two words
    for (uint k = 0u; k < p.n; ++k) {
        uint i = reverse ? p.n - 1u - k : k;
        uint xe = x + i * p.x_step, ye = y + i * p.y_step;
        if (DT == DT_I64) {
            uvec2 v = ld_i64(1u, xe);
            if (!exclusive) wide = i64_add(wide, v);
            st_i64(0u, ye, wide);
            if (exclusive) wide = i64_add(wide, v);
        } else if (DT == DT_I32) {
            uint v = uint(ld_i32(1u, xe));
            if (!exclusive) wide.x += v;
            st_i32(0u, ye, int(wide.x));
            if (exclusive) wide.x += v;
        } else {
            float v = ld_float(1u, DT, xe);
            if (!exclusive) acc += v;
            st_float(0u, DT, ye, acc);
            if (exclusive) acc += v;
        }
    }
}

void main() {
    p = tf_p;
    uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint line = gl_GlobalInvocationID.x; line < p.lines; line += step) scan_line(line);
}
