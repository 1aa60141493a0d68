// attention_backward: the gradients of attention (kernels_attention.cpp) with respect to q, k and
// v, one batch element at a time, every product a GEMM (kernels_gemm.hpp) in f32:
//
//   P  = softmax(q k^T * scale + mask [+ causal])   attention_probabilities(), as the forward
//   dv = P^T dy,   dP = dy v^T,   dS = P (dP - rowsum(dP P)) * scale
//   dq = dS k,     dk = dS^T q
//
// the products and row operations of the core's composition (matmul, softmax, mul, sum, sub) in
// one pass over each [Tq, Tk] block instead of about twenty dispatched ops over the whole score
// tensor. Row sums are in double, as the forward's are. A query row that sees no key has NaN
// probabilities, so the gradients it reaches are NaN, as through the composition.
//
// f32 operands are read in place through their strides (the transformer's q, k and v are a head's
// columns of one projection) and f32 outputs with rows of unit stride are written in place; other
// dtypes go through dense f32 blocks (load_matrix, store_matrix). An absent mask adds nothing.
#include "attention_blocks.hpp"
#include "kernels_gemm.hpp"
#include "kernels_nn.hpp"
#include "vector_math.hpp"

#include <algorithm>
#include <vector>

namespace tf_cpu {
namespace {

size_t floats(int64_t rows, int64_t cols) { return static_cast<size_t>(rows) * static_cast<size_t>(cols); }

// dS = P (dP - rowsum(dP P)) * scale over [rows, len] blocks, dP in place; the row sums in
// double lanes (vector_math.hpp), as the forward's softmax sums are.
[[gnu::always_inline]] inline void score_gradients_body(const float *probs, float *dprobs, int64_t rows, int64_t len,
                                                        float scale) {
    for (int64_t i = 0; i < rows; ++i) {
        const float *p = probs + i * len;
        float *g = dprobs + i * len;
        const auto s = static_cast<float>(
            vec::lane_sum(len, [&](int64_t j) { return static_cast<double>(g[j]) * static_cast<double>(p[j]); }));
        for (int64_t j = 0; j < len; ++j) g[j] = p[j] * (g[j] - s) * scale;
    }
}

TF_CPU_ISA_DISPATCH(score_gradients, (const float *probs, float *dprobs, int64_t rows, int64_t len, float scale),
                    (probs, dprobs, rows, len, scale))

}  // namespace

tf_status run_attention_backward(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &qd = op.inputs[0], &kd = op.inputs[1], &vd = op.inputs[2], &md = op.inputs[3],
                         &gd = op.inputs[4];
    const tf_tensor_desc &dqd = op.outputs[0], &dkd = op.outputs[1], &dvd = op.outputs[2];
    const AttentionOperands a = attention_operands(op);
    const int64_t tq = a.tq, d = a.d, tk = a.tk, dvn = a.dv;
    const float scale = a.scale;
    const bool masked = a.masked;
    const int r = qd.rank;
    const std::vector<int64_t> at_g = leading_offsets(gd, r - 2), at_dq = leading_offsets(dqd, r - 2),
                               at_dk = leading_offsets(dkd, r - 2), at_dv = leading_offsets(dvd, r - 2);
    // One task per batch element: each has its own scratch and writes its own blocks, so the
    // result does not depend on the threads.
    parallel_for(static_cast<int64_t>(a.at_q.size()), [&](int64_t task) {
        const auto b = static_cast<size_t>(task);
        std::vector<float> sq, sk, sv, sg, sdq, sdk, sdv, mask(masked ? floats(tq, tk) : 0);
        std::vector<float> probs(floats(tq, tk)), dprobs(floats(tq, tk));
        std::vector<char> blind(static_cast<size_t>(tq));
        const F32Matrix q = input_matrix(qd, a.at_q[b], tq, d, sq), k = input_matrix(kd, a.at_k[b], tk, d, sk),
                        v = input_matrix(vd, a.at_v[b], tk, dvn, sv), g = input_matrix(gd, at_g[b], tq, dvn, sg);
        const OutputBlock dq(dqd, at_dq[b], tq, d, sdq), dk(dkd, at_dk[b], tk, d, sdk), dv(dvd, at_dv[b], tk, dvn, sdv);
        if (masked) load_matrix(md, a.at_m[b], tq, tk, mask.data());
        const F32Matrix kt{k.data, k.col_stride, k.row_stride}, vt{v.data, v.col_stride, v.row_stride};
        product(tq, tk, d, q, kt, probs.data(), tk);  // q k^T
        attention_probabilities(probs.data(), masked ? mask.data() : nullptr, tk, tq, tk, a.causal, scale,
                                blind.data());
        product(tk, dvn, tq, {probs.data(), 1, tk}, g, dv.data(), dv.ld());  // P^T dy
        product(tq, tk, dvn, g, vt, dprobs.data(), tk);  // dy v^T
        score_gradients(probs.data(), dprobs.data(), tq, tk, scale);  // dS, in dprobs
        product(tq, d, tk, {dprobs.data(), tk, 1}, k, dq.data(), dq.ld());  // dS k
        product(tk, d, tq, {dprobs.data(), 1, tk}, q, dk.data(), dk.ld());  // dS^T q
        dq.finish();
        dk.finish();
        dv.finish();
    });
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
