// Scans along one axis: cumsum, inclusive or exclusive, forwards or in reverse, any strides. The
// OpenCL C port of shaders/scan.comp: slot 0 y, slot 1 x; one work-item walks one line. f32, f16
// and bf16 (DT) are summed in f32 and each output rounded once; i32 and i64 wrap.
TF_SPEC(0, uint, DT, 0u)  // x and y: f32, f16, bf16, i32, i64

typedef struct {
    uint lines, n, rank, flags;
    uint x_base, y_base, x_step, y_step;
    uint shape[8], x_strides[8], y_strides[8];
} scan_params;

#define SCAN_EXCLUSIVE 1u
#define SCAN_REVERSE 2u

void scan_line(const scan_params *p, TF_T T, uint line) {
    uint x = p->x_base, y = p->y_base;
    for (int d = (int)p->rank - 1; d >= 0; --d) {
        uint q = line % p->shape[d];
        line /= p->shape[d];
        x += q * p->x_strides[d];
        y += q * p->y_strides[d];
    }
    bool exclusive = (p->flags & SCAN_EXCLUSIVE) != 0u;
    bool reverse = (p->flags & SCAN_REVERSE) != 0u;
    float acc = 0.0f;
    uint2 wide = (uint2)(0u, 0u);  // i32 in x (uint adds wrap), i64 as two words
    for (uint k = 0u; k < p->n; ++k) {
        uint i = reverse ? p->n - 1u - k : k;
        uint xe = x + i * p->x_step, ye = y + i * p->y_step;
        if (DT == DT_I64) {
            uint2 v = ld_i64(T[1], xe);
            if (!exclusive) wide = i64_add(wide, v);
            st_i64(T[0], ye, wide);
            if (exclusive) wide = i64_add(wide, v);
        } else if (DT == DT_I32) {
            uint v = T[1][xe];
            if (!exclusive) wide.x += v;
            T[0][ye] = wide.x;
            if (exclusive) wide.x += v;
        } else {
            float v = ld_float(T[1], DT, xe);
            if (!exclusive) acc += v;
            st_float(T[0], DT, ye, acc);
            if (exclusive) acc += v;
        }
    }
}

__attribute__((reqd_work_group_size(256, 1, 1)))
kernel void tf_scan(const scan_params pv, TF_KERNEL_ARGS) {
    TF_SLOTS_INIT;
    const scan_params *p = &pv;
    uint step = get_num_groups(0) * 256u;
    for (uint line = get_global_id(0); line < p->lines; line += step) scan_line(p, T, line);
}
