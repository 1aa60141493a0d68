// matmul: [..., M, K] x [..., K, N] -> [..., M, N], batch dims already broadcast by the core
// (stride 0 possible), any strides on all three operands. f32 goes through the packed GEMM
// (kernels_gemm.hpp), whose packing absorbs transposed and strided views. f16 and bf16 are
// converted to f32 (exactly: every f16 and bf16 is an f32) and take the same GEMM, accumulating
// in f32, the result rounded once to the output dtype; bf16 x bf16 takes AVX512-BF16's
// vdpbf16ps instead where the CPU has it (kernels_gemm.hpp, gemm_bf16_dot). A product with few rows
// per B (generation) reads B once in place instead (kernels_matvec.hpp), with the GEMM's bits.
#include "kernels.hpp"
#include "kernels_gemm.hpp"
#include "kernels_matvec.hpp"
#include "packed_weights.hpp"
#include "runtime.hpp"

#include <tinyfin/plugin_kit/rules.hpp>

#include <algorithm>
#include <new>
#include <vector>

namespace tf_cpu {
namespace {

// f32: one GEMM per batch element; a broadcast B whose A and output rows follow each other evenly
// across the batch becomes one GEMM with the batch folded into M. Small products run one batch
// element per task; big ones split inside the GEMM. own_b: b is the op's own operand (not a
// converted copy), so a B in a buffer marked constant is packed once (packed_weights.hpp).
// bias: n floats added to every row of the product in the GEMM's store (matmul_bias).
void matmul_f32(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, bool own_b = false,
                const float *bias = nullptr) {
    const int r = out.rank;
    const int64_t m = out.shape[r - 2], n = out.shape[r - 1], k = a.shape[r - 1];
    if (numel(out) == 0) return;
    const View va = view_of(a), vb = view_of(b), vo = view_of(out);
    constexpr int64_t fs = sizeof(float);
    const int64_t a_row = va.strides[r - 2] / fs, a_col = va.strides[r - 1] / fs;
    const int64_t b_row = vb.strides[r - 2] / fs, b_col = vb.strides[r - 1] / fs;
    const int64_t o_row = vo.strides[r - 2] / fs, o_col = vo.strides[r - 1] / fs;

    struct Batch {
        float *o;
        const float *a, *b;
    };
    std::vector<Batch> items;
    walk<3>(r - 2, out.shape, {vo, va, vb}, [&](char *const *p, int64_t count, const int64_t *step) {
        for (int64_t t = 0; t < count; ++t)
            items.push_back({reinterpret_cast<float *>(p[0] + t * step[0]),
                             reinterpret_cast<const float *>(p[1] + t * step[1]),
                             reinterpret_cast<const float *>(p[2] + t * step[2])});
    });
    const auto batches = static_cast<int64_t>(items.size());

    // One B for every batch element (a weight): packed once when its buffer is marked constant.
    std::shared_ptr<const std::vector<float>> b_packed;
    if (own_b) {
        bool shared = true;
        for (const Batch &it : items) shared = shared && it.b == items[0].b;
        if (shared) b_packed = packed_constant_b(b, items[0].b, k, n, b_row, b_col);
    }
    const float *b_pre = b_packed ? b_packed->data() : nullptr;

    // Output rows must be dense for the GEMM; else a dense temporary per batch element.
    const bool direct = o_col == 1 || n == 1;
    auto one = [&](int64_t t, int64_t rows, int64_t a_rs, int64_t o_rs) {
        const Batch &it = items[static_cast<size_t>(t)];
        const F32Matrix am{it.a, a_rs, a_col}, bm{it.b, b_row, b_col};
        if (direct) {
            gemm_f32(rows, n, k, am, bm, it.o, o_rs, false, b_pre, bias);
            return;
        }
        float *tmp = scratch_floats(k_slot_temp, static_cast<size_t>(rows * n));
        gemm_f32(rows, n, k, am, bm, tmp, n, false, b_pre, bias);
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < n; ++j) it.o[i * o_rs + j * o_col] = tmp[i * n + j];
    };

    if (batches > 1 && direct) {
        bool fold = true;
        const int64_t a_rs = m > 1 ? a_row : items[1].a - items[0].a;
        const int64_t o_rs = m > 1 ? o_row : items[1].o - items[0].o;
        for (int64_t t = 1; t < batches && fold; ++t) {
            const Batch &it = items[static_cast<size_t>(t)];
            fold = it.b == items[0].b && it.a == items[0].a + t * m * a_rs && it.o == items[0].o + t * m * o_rs;
        }
        if (fold && a_rs != 0) {
            one(0, m * batches, a_rs, o_rs);
            return;
        }
    }
    const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    if (batches > 1 && macs < static_cast<double>(k_gemm_parallel_macs)) {
        const int64_t tasks =
            std::min<int64_t>(batches, split_count(static_cast<int64_t>(macs * batches), k_gemm_parallel_macs / 4));
        const int64_t per = (batches + tasks - 1) / tasks;
        parallel_for((batches + per - 1) / per, [&](int64_t t) {
            for (int64_t i = t * per; i < std::min(batches, (t + 1) * per); ++i) one(i, m, a_row, o_row);
        });
        return;
    }
    for (int64_t t = 0; t < batches; ++t) one(t, m, a_row, o_row);
}

// An f16 or bf16 operand as f32: the elements it addresses, converted once into dense scratch
// memory of `slot` (an axis broadcast with stride 0 stays stride 0, so a broadcast B is converted
// once, not per batch element), described with d's shape. The copy keeps the operand's order in
// memory (axes laid out by d's strides, largest first), so a transposed view (a weight seen as
// W^T, a gradient as g^T) is converted in one sequential pass and stays a transposed view for the
// GEMM's packing, which absorbs it as it does for f32; element by element in logical order it was
// a strided gather. Scratch rather than a fresh vector: the arena keeps its pages between calls,
// where a new 4 MiB vector page-faults every time.
tf_tensor_desc to_f32(const tf_tensor_desc &d, ScratchSlot slot) {
    tf_tensor_desc f = d;
    int64_t shape[TF_MAX_RANK];
    int order[TF_MAX_RANK];
    int axes = 0;
    for (int i = 0; i < d.rank; ++i) {
        const bool broadcast = d.shape[i] > 1 && d.strides[i] == 0;
        shape[i] = broadcast ? 1 : d.shape[i];
        f.strides[i] = 0;
        if (shape[i] != 1) order[axes++] = i;  // 0 included: the walk then visits nothing
    }
    std::stable_sort(order, order + axes, [&](int x, int y) { return d.strides[x] > d.strides[y]; });
    int64_t count = 1;
    for (int j = axes - 1; j >= 0; --j) {
        f.strides[order[j]] = count;
        count *= shape[order[j]];
    }
    float *data = scratch_floats(slot, static_cast<size_t>(count));
    // The walk visits the axes in memory order: the source's innermost run is the row.
    const View src = view_of(d);
    View from{src.base, {}}, dst{reinterpret_cast<char *>(data), {}};
    int64_t walk_shape[TF_MAX_RANK];
    for (int j = 0; j < axes; ++j) {
        walk_shape[j] = shape[order[j]];
        from.strides[j] = src.strides[order[j]];
        dst.strides[j] = f.strides[order[j]] * int64_t{sizeof(float)};
    }
    Dtypes::with_float(d.dtype, [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        walk<2>(axes, walk_shape, {dst, from}, [&](char *const *p, int64_t n, const int64_t *step) {
            if (step[0] == sizeof(float) && load_f32_run(d.dtype, p[1], step[1], reinterpret_cast<float *>(p[0]), n))
                return;
            for (int64_t i = 0; i < n; ++i) Traits<float>::store(p[0] + i * step[0], Tr::load(p[1] + i * step[1]));
        });
    });
    f.dtype = TF_DTYPE_F32;
    f.data = data;
    f.offset = 0;
    return f;
}

// bf16 x bf16 with vdpbf16ps, one product per batch element, into dense f32 c.
void matmul_bf16_dot(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &c) {
    const int r = c.rank;
    const int64_t m = c.shape[r - 2], n = c.shape[r - 1], k = a.shape[r - 1];
    const View va = view_of(a), vb = view_of(b), vc = view_of(c);
    constexpr int64_t hs = 2;
    const BF16Matrix am0{nullptr, va.strides[r - 2] / hs, va.strides[r - 1] / hs};
    const BF16Matrix bm0{nullptr, vb.strides[r - 2] / hs, vb.strides[r - 1] / hs};
    walk<3>(r - 2, c.shape, {vc, va, vb}, [&](char *const *p, int64_t count, const int64_t *step) {
        for (int64_t t = 0; t < count; ++t) {
            BF16Matrix am = am0, bm = bm0;
            am.data = reinterpret_cast<const uint16_t *>(p[1] + t * step[1]);
            bm.data = reinterpret_cast<const uint16_t *>(p[2] + t * step[2]);
            gemm_bf16_dot(m, n, k, am, bm, reinterpret_cast<float *>(p[0] + t * step[0]), n);
        }
    });
}

}  // namespace

tf_status run_matmul(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, tf_error *err) {
    if (out.dtype == TF_DTYPE_F32 && a.dtype == TF_DTYPE_F32 && b.dtype == TF_DTYPE_F32) {
        if (!matmul_rows_prepacked(a, b, out, nullptr) && !matmul_skinny(a, b, out)) matmul_f32(a, b, out, true);
        return TF_STATUS_OK;
    }
    if (out.dtype != TF_DTYPE_F16 && out.dtype != TF_DTYPE_BF16)
        return fail(err, TF_STATUS_UNSUPPORTED, "matmul: dtype %s not supported", dtype_name(out.dtype));
    if (numel(out) == 0 || matmul_skinny(a, b, out)) return TF_STATUS_OK;
    // The f32 result in dense scratch (matmul_f32 uses k_slot_temp only for an output that is
    // not dense, which this one is), the operands in two more slots.
    tf_tensor_desc c = out;
    c.dtype = TF_DTYPE_F32;
    c.data = scratch_floats(k_slot_temp, static_cast<size_t>(numel(out)));
    c.offset = 0;
    int64_t stride = 1;
    for (int i = out.rank - 1; i >= 0; --i) {
        c.strides[i] = stride;
        stride *= out.shape[i];
    }
    if (out.dtype == TF_DTYPE_BF16 && bf16_dot_level() > 0 && (reinterpret_cast<uintptr_t>(a.data) & 1) == 0 &&
        (reinterpret_cast<uintptr_t>(b.data) & 1) == 0 && a.offset % 2 == 0 && b.offset % 2 == 0) {
        matmul_bf16_dot(a, b, c);
    } else {
        matmul_f32(to_f32(a, k_slot_col), to_f32(b, k_slot_temp2), c);
    }
    store_rounded(out, static_cast<const float *>(c.data));
    return TF_STATUS_OK;
}

void add_bias_rows(const tf_tensor_desc &y, const tf_tensor_desc &bias) {
    const int r = y.rank;
    tf_tensor_desc b = y;  // bias broadcast to y's shape
    b.dtype = bias.dtype;
    b.data = bias.data;
    b.offset = bias.offset;
    for (int i = 0; i < r; ++i) b.strides[i] = i == r - 1 ? bias.strides[0] : 0;
    Dtypes::with_float(y.dtype, [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        walk<2>(r, y.shape, {view_of(y), view_of(b)}, [&](char *const *p, int64_t n, const int64_t *step) {
            for (int64_t i = 0; i < n; ++i) {
                char *o = p[0] + i * step[0];
                Tr::store(o, Tr::load(o) + Tr::load(p[1] + i * step[1]));
            }
        });
    });
}

namespace {

tf_status matmul_kernel(const tf_op_desc &op, tf_error *err) {
    return run_matmul(op.inputs[0], op.inputs[1], op.outputs[0], err);
}

// matmul_bias: the product exactly as matmul computes it (the same paths, so the same bits), then
// the bias: on the packed f32 GEMM added to each tile as it is stored; after the other paths
// (a few rows, f16/bf16 rounded first), as add would.
tf_status matmul_bias_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &x = op.inputs[0], &bias = op.inputs[2], &y = op.outputs[0];
    const tf_tensor_desc w = tf_kit::matmul_bias_weight(op);
    if (numel(y) == 0) return TF_STATUS_OK;
    if (y.dtype == TF_DTYPE_F32 && x.dtype == TF_DTYPE_F32 && w.dtype == TF_DTYPE_F32 && bias.dtype == TF_DTYPE_F32) {
        const int64_t n = bias.shape[0];
        const float *b = reinterpret_cast<const float *>(base_of(bias));
        std::vector<float> dense;
        if (bias.strides[0] != 1 && n > 1) {  // a strided or broadcast bias, made dense
            dense.resize(static_cast<size_t>(n));
            for (int64_t j = 0; j < n; ++j) dense[static_cast<size_t>(j)] = b[j * bias.strides[0]];
            b = dense.data();
        }
        if (matmul_rows_prepacked(x, w, y, b)) return TF_STATUS_OK;
        if (!matmul_skinny(x, w, y)) {
            matmul_f32(x, w, y, true, b);
            return TF_STATUS_OK;
        }
        add_bias_rows(y, bias);
        return TF_STATUS_OK;
    }
    if (tf_status s = run_matmul(x, w, y, err); s != TF_STATUS_OK) return s;
    add_bias_rows(y, bias);
    return TF_STATUS_OK;
}

constexpr HostRow k_rows[] = {{TF_OP_MATMUL, k_float_dtypes, matmul_kernel},
                              {TF_OP_MATMUL_BIAS, k_float_dtypes, matmul_bias_kernel}};

}  // namespace

std::span<const HostRow> matmul_kernels() { return k_rows; }

}  // namespace tf_cpu
