// attention: out = softmax(q k^T * scale + mask [+ causal]) v, one batch element at a time,
// the two products as GEMMs (kernels_gemm.hpp) in f32.
//
//  - scores are (q k^T)[i, j] * scale + mask[i, j] in f32, the same operations the core's
//    backward rule recomputes them with; causal hides key j from query i when
//    j > i + (Tk - Tq) (score -inf).
//  - the softmax is max-shifted, exp in f32 (vector_math.hpp's), sums in double (its lanes), one
//    f32 reciprocal of the sum per row (as the softmax kernel).
//  - batch elements run as tasks on the thread pool.
//  - a query row that sees no key (every score -inf: all hidden by causal or the mask, or Tk = 0)
//    gives NaN, as torch's math attention and softmax over all -inf do; the core's backward rule,
//    which goes through softmax, agrees.
//  - the mask arrives broadcast (stride 0 on broadcast axes) and is read through its strides;
//    absent (TF_TENSOR_ABSENT), nothing is added to the scores and nothing is read.
#include "attention_blocks.hpp"
#include "kernels_gemm.hpp"
#include "kernels_nn.hpp"
#include "vector_math.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

namespace tf_cpu {

void load_matrix(const tf_tensor_desc &d, int64_t offset, int64_t rows, int64_t cols, float *dst) {
    const View v = view_of(d);
    const auto *base = reinterpret_cast<const char *>(reinterpret_cast<uintptr_t>(d.data) + d.offset + offset);
    const int64_t rs = v.strides[d.rank - 2], cs = v.strides[d.rank - 1];
    if (d.dtype == TF_DTYPE_F32 && rows > 0 && cols > 0) {
        // The transformer's cases: a head's columns of the qkv projection (rows of unit stride)
        // and a broadcast constant mask (both strides 0), copied or filled without a load per
        // element (docs/performance.md).
        if (cs == static_cast<int64_t>(sizeof(float))) {
            for (int64_t i = 0; i < rows; ++i)
                std::memcpy(dst + i * cols, base + i * rs, static_cast<size_t>(cols) * sizeof(float));
            return;
        }
        if (rs == 0 && cs == 0) {
            float value;
            std::memcpy(&value, base, sizeof value);
            std::fill(dst, dst + rows * cols, value);
            return;
        }
    }
    Dtypes::with_float(d.dtype, [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        for (int64_t i = 0; i < rows; ++i) {
            // f16/bf16 rows (autocast's q, k, v): the vectorised conversions, the same values.
            if (load_f32_run(d.dtype, base + i * rs, cs, dst + i * cols, cols)) continue;
            for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = Tr::load(base + i * rs + j * cs);
        }
    });
}

void store_matrix(const tf_tensor_desc &d, int64_t offset, int64_t rows, int64_t cols, const float *src) {
    const View v = view_of(d);
    auto *base = reinterpret_cast<char *>(reinterpret_cast<uintptr_t>(d.data) + d.offset + offset);
    const int64_t rs = v.strides[d.rank - 2], cs = v.strides[d.rank - 1];
    if (d.dtype == TF_DTYPE_F32 && cs == static_cast<int64_t>(sizeof(float))) {
        for (int64_t i = 0; i < rows; ++i)
            std::memcpy(base + i * rs, src + i * cols, static_cast<size_t>(cols) * sizeof(float));
        return;
    }
    Dtypes::with_float(d.dtype, [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        for (int64_t i = 0; i < rows; ++i) {
            if (store_f32_run(d.dtype, src + i * cols, base + i * rs, cs, cols)) continue;
            for (int64_t j = 0; j < cols; ++j) Tr::store(base + i * rs + j * cs, src[i * cols + j]);
        }
    });
}

namespace {

[[gnu::always_inline]] inline void probabilities_body(float *__restrict scores, const float *__restrict mask,
                                                      int64_t mask_stride, int64_t tq, int64_t tk, bool causal,
                                                      float scale, char *__restrict blind) {
    for (int64_t i = 0; i < tq; ++i) {
        float *__restrict row = scores + i * tk;
        // Keys [0, seen) are visible to query i; causal hides the rest (exp gives 0 there).
        const int64_t seen = causal ? std::clamp<int64_t>(i + tk - tq + 1, 0, tk) : tk;
        if (mask) {
            const float *__restrict mrow = mask + i * mask_stride;
            for (int64_t j = 0; j < seen; ++j) row[j] = row[j] * scale + mrow[j];
        } else {
            for (int64_t j = 0; j < seen; ++j) row[j] = row[j] * scale;
        }
        const float max = vec::max(row, seen);
        const bool none = max == -INFINITY;
        blind[i] = none;
        if (none) {
            std::fill(row, row + tk, NAN);  // softmax over no finite score
            continue;
        }
        // vector_math.hpp's exp (within 2 ulp, no call per element), lane sums in double and one
        // reciprocal per row, as the softmax kernel normalises (kernels_softmax.cpp): each pass a
        // loop GCC vectorizes (a division per element in double was 3x the softmax's time).
        for (int64_t j = 0; j < seen; ++j) row[j] = vec::exp_nonpositive(row[j] - max);
        std::fill(row + seen, row + tk, 0.0f);
        const float inv = static_cast<float>(1.0 / vec::sum(row, seen));
        for (int64_t j = 0; j < seen; ++j) row[j] *= inv;
    }
}

// Compiled per instruction set (vector_math.hpp), so the row loops use the widest registers.
TF_CPU_ISA_DISPATCH(probabilities,
                    (float *scores, const float *mask, int64_t mask_stride, int64_t tq, int64_t tk, bool causal,
                     float scale, char *blind),
                    (scores, mask, mask_stride, tq, tk, causal, scale, blind))

size_t floats(int64_t rows, int64_t cols) { return static_cast<size_t>(rows) * static_cast<size_t>(cols); }

}  // namespace

void attention_probabilities(float *scores, const float *mask, int64_t mask_stride, int64_t tq, int64_t tk, bool causal,
                             float scale, char *blind) {
#if defined(__x86_64__)
    if (isa_level() == 1) return attention_probabilities_avx2(scores, mask, mask_stride, tq, tk, causal, scale, blind);
#endif
    probabilities(scores, mask, mask_stride, tq, tk, causal, scale, blind);
}

AttentionOperands attention_operands(const tf_op_desc &op) {
    const tf_tensor_desc &qd = op.inputs[0], &kd = op.inputs[1], &vd = op.inputs[2], &md = op.inputs[3];
    const auto &p = *static_cast<const tf_params_attention *>(op.params);
    const int r = qd.rank;
    const bool masked = !is_absent(md);
    return {qd.shape[r - 2],
            qd.shape[r - 1],
            kd.shape[r - 2],
            vd.shape[r - 1],
            static_cast<float>(p.scale),
            p.causal != 0,
            masked,
            leading_offsets(qd, r - 2),
            leading_offsets(kd, r - 2),
            leading_offsets(vd, r - 2),
            masked ? leading_offsets(md, r - 2) : std::vector<int64_t>()};
}

tf_status run_attention(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &qd = op.inputs[0], &kd = op.inputs[1], &vd = op.inputs[2], &md = op.inputs[3];
    const tf_tensor_desc &od = op.outputs[0];
    if (numel(od) == 0) return TF_STATUS_OK;
    const AttentionOperands a = attention_operands(op);
    const int64_t tq = a.tq, d = a.d, tk = a.tk, dv = a.dv;
    const float scale = a.scale;
    const bool masked = a.masked;
    const std::vector<int64_t> at_o = leading_offsets(od, qd.rank - 2);
    // One task per batch element (batch x heads of them in a transformer): each has its own
    // scratch and writes its own output block, so the result does not depend on the threads.
    // f32 operands are read in place (a head's columns of the qkv projection: rows of unit
    // stride) and an f32 output written in place; the scores' scratch is not cleared (the GEMM
    // writes it); a mask with rows of unit stride (HF's [B, 1, 1, Tk], broadcast over the query
    // rows) is read in place through its row stride (docs/performance.md).
    parallel_for(static_cast<int64_t>(at_o.size()), [&](int64_t task) {
        const auto b = static_cast<size_t>(task);
        std::vector<float> sq, sk, sv, so, smask;
        const auto scores = std::make_unique_for_overwrite<float[]>(floats(tq, tk));
        std::vector<char> blind(static_cast<size_t>(tq));  // rows that see no key
        const F32Matrix q = input_matrix(qd, a.at_q[b], tq, d, sq), k = input_matrix(kd, a.at_k[b], tk, d, sk),
                        v = input_matrix(vd, a.at_v[b], tk, dv, sv);
        const OutputBlock out(od, at_o[b], tq, dv, so);
        const float *mask = nullptr;
        int64_t mask_stride = tk;
        if (masked) {
            const View mv = view_of(md);
            const auto size = static_cast<int64_t>(sizeof(float));
            if (md.dtype == TF_DTYPE_F32 && mv.strides[md.rank - 1] == size && mv.strides[md.rank - 2] % size == 0) {
                mask = reinterpret_cast<const float *>(mv.base + a.at_m[b]);
                mask_stride = mv.strides[md.rank - 2] / size;
            } else {
                smask.resize(floats(tq, tk));
                load_matrix(md, a.at_m[b], tq, tk, smask.data());
                mask = smask.data();
            }
        }
        const F32Matrix kt{k.data, k.col_stride, k.row_stride};
        // Causal: query rows in blocks, each block's products over the keys its last row sees
        // only (the hidden upper triangle of q k^T is never read, p's zeros there add nothing):
        // 24 rows a block cut a 64 x 64 head's products by a third. Every computed element is
        // the GEMM's same sequence of operations (it does not depend on the product's size).
        const int64_t block = a.causal ? 24 : std::max<int64_t>(tq, 1);
        const auto keys_of = [&](int64_t r0, int64_t rows) {
            return a.causal ? std::clamp<int64_t>(r0 + rows + tk - tq, 0, tk) : tk;
        };
        const auto from_row = [](const F32Matrix &m, int64_t r0) {
            return F32Matrix{m.data ? m.data + r0 * m.row_stride : nullptr, m.row_stride, m.col_stride};
        };
        for (int64_t r0 = 0; r0 < tq; r0 += block) {
            const int64_t rows = std::min(block, tq - r0);
            product(rows, keys_of(r0, rows), d, from_row(q, r0), kt, scores.get() + r0 * tk, tk);  // q k^T
        }
        attention_probabilities(scores.get(), mask, mask_stride, tq, tk, a.causal, scale, blind.data());
        for (int64_t r0 = 0; r0 < tq; r0 += block) {
            const int64_t rows = std::min(block, tq - r0);
            product(rows, dv, keys_of(r0, rows), {scores.get() + r0 * tk, tk, 1}, v, out.data() + r0 * out.ld(),
                    out.ld());
        }
        for (int64_t i = 0; i < tq; ++i)
            if (blind[static_cast<size_t>(i)])
                std::fill(out.data() + i * out.ld(), out.data() + i * out.ld() + dv, NAN);
        out.finish();
    });
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
