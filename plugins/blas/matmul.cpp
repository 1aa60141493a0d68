// matmul f32 as cblas_sgemm calls: [..., M, K] x [..., K, N] -> [..., M, N], batch axes already
// broadcast by the core (stride 0 possible). Transposed views reach sgemm as transpose flags
// and leading dimensions, without copies; layouts sgemm cannot express are left to cpu.
#include "blas.hpp"
#include "kernels.hpp"

#include <algorithm>
#include <climits>
#include <optional>

namespace tf_blas {
namespace {

// Below this many multiply-adds per sgemm call (M * N * K after folding batch axes into M), the
// cpu plugin's kernel can match a BLAS call: leave those to cpu (docs/performance.md,
// "Measurements behind code choices").
constexpr int64_t k_min_work = 16 * 16 * 16;

// One matrix operand as the core describes it: rows x cols with element strides.
struct Matrix {
    int64_t rows, cols, row_stride, col_stride;

    Matrix transposed() const { return {cols, rows, col_stride, row_stride}; }
};

// How sgemm (row-major) reads a matrix: op(X) = X or X^T with leading dimension ld.
struct BlasLayout {
    CBLAS_TRANSPOSE trans;
    blasint ld;
};

bool fits_blasint(int64_t v) { return v >= 0 && v <= INT_MAX; }

// Row-major X with unit column stride (NoTrans), or X^T stored row-major, i.e. unit row stride
// (Trans). The leading dimension must cover a whole row of what is stored; axes of size 1 take
// any stride.
bool layout_of(const Matrix &m, BlasLayout *out) {
    const int64_t rows = m.rows, cols = m.cols;
    int64_t ld = 0;
    if ((m.col_stride == 1 || cols == 1) && (rows == 1 || m.row_stride >= std::max<int64_t>(1, cols))) {
        ld = rows == 1 ? std::max<int64_t>(1, cols) : m.row_stride;
        out->trans = CblasNoTrans;
    } else if ((m.row_stride == 1 || rows == 1) && (cols == 1 || m.col_stride >= std::max<int64_t>(1, rows))) {
        ld = cols == 1 ? std::max<int64_t>(1, rows) : m.col_stride;
        out->trans = CblasTrans;
    } else {
        return false;
    }
    if (!fits_blasint(ld)) return false;
    out->ld = static_cast<blasint>(ld);
    return true;
}

// C must be written row-major (NoTrans).
bool output_layout_of(const Matrix &c, BlasLayout *out) { return layout_of(c, out) && out->trans == CblasNoTrans; }

// One sgemm problem per batch element: C (m x n) = A (m x k) B (k x n), and the batch axes
// still to loop over. When C is stored column-major the plugin computes C^T = B^T A^T instead.
struct GemmPlan {
    Matrix a, b, c;
    BlasLayout la, lb, lc;
    // Swapped: a and b hold B^T and A^T, and the batch strides below are swapped too.
    bool swapped;
    int batch_rank;
    int64_t batch_shape[TF_MAX_RANK];
    int64_t a_step[TF_MAX_RANK], b_step[TF_MAX_RANK], c_step[TF_MAX_RANK];
};

bool layouts_fit(GemmPlan &p) {
    return fits_blasint(p.a.rows) && fits_blasint(p.b.cols) && fits_blasint(p.a.cols) && layout_of(p.a, &p.la) &&
           layout_of(p.b, &p.lb) && output_layout_of(p.c, &p.lc);
}

// Folds the innermost batch axes into M where B is broadcast over them and A and C continue
// row after row (x [B, T, K] @ w [K, N] becomes one [B*T, K] @ [K, N] call).
void fold_batch_into_rows(GemmPlan &p) {
    while (p.batch_rank > 0 && p.la.trans == CblasNoTrans) {
        const int axis = p.batch_rank - 1;
        if (p.b_step[axis] != 0) return;
        GemmPlan folded = p;
        const int64_t size = p.batch_shape[axis];
        if (p.a.rows == 1) {
            // One row per batch element: the batch stride becomes the row stride.
            folded.a.row_stride = p.a_step[axis];
            folded.c.row_stride = p.c_step[axis];
        } else if (p.a_step[axis] != p.a.rows * p.a.row_stride || p.c_step[axis] != p.c.rows * p.c.row_stride) {
            return;
        }
        folded.a.rows *= size;
        folded.c.rows *= size;
        folded.batch_rank = axis;
        if (!layouts_fit(folded) || folded.la.trans != CblasNoTrans) return;
        p = folded;
    }
}

// Everything supports() checks, leading to a plan run() executes; none where sgemm cannot
// run this descriptor or would lose to cpu.
std::optional<GemmPlan> plan_matmul(const tf_op_desc &op) {
    if (op.n_inputs != 2 || op.n_outputs != 1 || !op.inputs || !op.outputs) return std::nullopt;
    const tf_tensor_desc &a = op.inputs[0], &b = op.inputs[1], &c = op.outputs[0];
    const int r = c.rank;
    if (r < 2 || !is_plain_f32(a, r) || !is_plain_f32(b, r) || !is_plain_f32(c, r)) return std::nullopt;
    for (int i = 0; i < r - 2; ++i)
        if (a.shape[i] != c.shape[i] || b.shape[i] != c.shape[i]) return std::nullopt;
    const int64_t m = c.shape[r - 2], n = c.shape[r - 1], k = a.shape[r - 1];
    if (a.shape[r - 2] != m || b.shape[r - 2] != k || b.shape[r - 1] != n) return std::nullopt;
    if (m == 0 || n == 0 || k == 0) return std::nullopt;  // nothing for sgemm to do: cpu's

    GemmPlan p{};
    p.a = {m, k, a.strides[r - 2], a.strides[r - 1]};
    p.b = {k, n, b.strides[r - 2], b.strides[r - 1]};
    p.c = {m, n, c.strides[r - 2], c.strides[r - 1]};
    p.batch_rank = r - 2;
    for (int i = 0; i < r - 2; ++i) {
        p.batch_shape[i] = c.shape[i];
        p.a_step[i] = a.strides[i];
        p.b_step[i] = b.strides[i];
        p.c_step[i] = c.strides[i];
    }
    if (!output_layout_of(p.c, &p.lc)) {
        // C^T = B^T A^T: a column-major C is a row-major C^T.
        GemmPlan t = p;
        t.swapped = true;
        t.a = p.b.transposed();
        t.b = p.a.transposed();
        t.c = p.c.transposed();
        std::copy(p.b_step, p.b_step + p.batch_rank, t.a_step);
        std::copy(p.a_step, p.a_step + p.batch_rank, t.b_step);
        p = t;
    }
    if (!layouts_fit(p)) return std::nullopt;
    fold_batch_into_rows(p);
    int64_t work = 0;
    if (__builtin_mul_overflow(p.a.rows, p.b.cols, &work) || __builtin_mul_overflow(work, p.a.cols, &work) ||
        work < k_min_work)
        return std::nullopt;
    return p;
}

}  // namespace

bool matmul_supported(const tf_op_desc &op) noexcept { return plan_matmul(op).has_value(); }

tf_status matmul_run(const tf_op_desc &op, tf_error *err) {
    const std::optional<GemmPlan> plan = plan_matmul(op);
    if (!plan) return fail(err, TF_STATUS_UNSUPPORTED, "matmul: blas does not support this descriptor");
    const GemmPlan &p = *plan;
    const tf_tensor_desc &a = op.inputs[p.swapped ? 1 : 0], &b = op.inputs[p.swapped ? 0 : 1], &c = op.outputs[0];
    if (!a.data || !b.data || !c.data)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "matmul: a tensor has no host address");
    const float *base_a = f32_data(a), *base_b = f32_data(b);
    float *base_c = f32_data(c);
    const auto m = static_cast<blasint>(p.a.rows), n = static_cast<blasint>(p.b.cols),
               k = static_cast<blasint>(p.a.cols);
    const OpenBlasApi &blas = openblas();
    for (int i = 0; i < p.batch_rank; ++i)
        if (p.batch_shape[i] == 0) return TF_STATUS_OK;

    // Odometer over the batch axes left after folding.
    int64_t index[TF_MAX_RANK] = {};
    int64_t off_a = 0, off_b = 0, off_c = 0;
    for (;;) {
        blas.sgemm(CblasRowMajor, p.la.trans, p.lb.trans, m, n, k, 1.0f, base_a + off_a, p.la.ld, base_b + off_b,
                   p.lb.ld, 0.0f, base_c + off_c, p.lc.ld);
        int axis = p.batch_rank - 1;
        for (; axis >= 0; --axis) {
            off_a += p.a_step[axis];
            off_b += p.b_step[axis];
            off_c += p.c_step[axis];
            if (++index[axis] < p.batch_shape[axis]) break;
            off_a -= p.a_step[axis] * p.batch_shape[axis];
            off_b -= p.b_step[axis] * p.batch_shape[axis];
            off_c -= p.c_step[axis] * p.batch_shape[axis];
            index[axis] = 0;
        }
        if (axis < 0) return TF_STATUS_OK;
    }
}

namespace {

// matmul_bias's product as a matmul descriptor (x, w broadcast over y's batch axes -> y); the
// caller holds `operands` while the descriptor is used.
tf_op_desc as_matmul(const tf_op_desc &op, tf_tensor_desc (&operands)[2]) {
    operands[0] = op.inputs[0];
    operands[1] = tf_kit::matmul_bias_weight(op);
    tf_op_desc m = op;
    m.op = TF_OP_MATMUL;
    m.inputs = operands;
    m.n_inputs = 2;
    return m;
}

}  // namespace

bool matmul_bias_supported(const tf_op_desc &op) noexcept {
    if (op.n_inputs != 3 || !op.inputs || op.inputs[2].dtype != TF_DTYPE_F32) return false;
    tf_tensor_desc operands[2];
    return matmul_supported(as_matmul(op, operands));
}

tf_status matmul_bias_run(const tf_op_desc &op, tf_error *err) {
    tf_tensor_desc operands[2];
    if (tf_status s = matmul_run(as_matmul(op, operands), err); s != TF_STATUS_OK) return s;
    tf_cpu::add_bias_rows(op.outputs[0], op.inputs[2]);
    return TF_STATUS_OK;
}

}  // namespace tf_blas
