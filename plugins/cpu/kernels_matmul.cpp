// matmul: [..., M, K] x [..., K, N] -> [..., M, N], batch dims already broadcast by the core
// (stride 0 possible), any strides on all three operands. f32 goes through the packed GEMM
// (kernels_gemm.h), whose packing absorbs transposed and strided views; f16 and bf16 through the
// reference loop below, in f32.
#include "kernels.h"
#include "kernels_gemm.h"
#include "runtime.h"

#include <new>
#include <vector>

namespace tf_cpu {
namespace {

template <class T>
void matmul(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out) {
    using tr = traits<T>;
    const int r = out.rank;
    const int64_t m = out.shape[r - 2], n = out.shape[r - 1], k = a.shape[r - 1];
    if (numel(out) == 0) return;
    const view va = view_of(a), vb = view_of(b), vo = view_of(out);
    const int64_t a_row = va.strides[r - 2], a_col = va.strides[r - 1];
    const int64_t b_row = vb.strides[r - 2], b_col = vb.strides[r - 1];
    const int64_t o_row = vo.strides[r - 2], o_col = vo.strides[r - 1];

    // b is unpacked once per batch into contiguous float rows (a broadcast b only once), so the
    // inner loop below is a unit-stride axpy the compiler vectorises whatever b's layout and dtype.
    size_t b_floats = 0;
    if (__builtin_mul_overflow(static_cast<size_t>(k), static_cast<size_t>(n), &b_floats)) throw std::bad_alloc();
    std::vector<float> b_packed(b_floats), a_row_f(static_cast<size_t>(k)), acc(static_cast<size_t>(n));
    const char *packed_from = nullptr;

    walk<3>(r - 2, out.shape, {vo, va, vb}, [&](char *const *p, int64_t batches, const int64_t *step) {
        for (int64_t t = 0; t < batches; ++t) {
            char *po = p[0] + t * step[0];
            const char *pa = p[1] + t * step[1];
            const char *pb = p[2] + t * step[2];
            if (pb != packed_from || packed_from == nullptr) {
                for (int64_t kk = 0; kk < k; ++kk)
                    for (int64_t j = 0; j < n; ++j)
                        b_packed[kk * n + j] = static_cast<float>(tr::load(pb + kk * b_row + j * b_col));
                packed_from = pb;
            }
            // i-k-j order: each out[i, j] sums a[i, k] * b[k, j] for k = 0, 1, ... in float,
            // the same order on every call.
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t kk = 0; kk < k; ++kk)
                    a_row_f[kk] = static_cast<float>(tr::load(pa + i * a_row + kk * a_col));
                std::fill(acc.begin(), acc.end(), 0.0f);
                for (int64_t kk = 0; kk < k; ++kk) {
                    const float aik = a_row_f[kk];
                    const float *brow = b_packed.data() + kk * n;
                    for (int64_t j = 0; j < n; ++j) acc[j] += aik * brow[j];
                }
                for (int64_t j = 0; j < n; ++j) tr::store(po + i * o_row + j * o_col, acc[j]);
            }
        }
    });
}

// f32: one GEMM per batch element; a broadcast B whose A and output rows follow each other evenly
// across the batch becomes one GEMM with the batch folded into M. Small products run one batch
// element per task; big ones split inside the GEMM.
void matmul_f32(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out) {
    const int r = out.rank;
    const int64_t m = out.shape[r - 2], n = out.shape[r - 1], k = a.shape[r - 1];
    if (numel(out) == 0) return;
    const view va = view_of(a), vb = view_of(b), vo = view_of(out);
    constexpr int64_t fs = sizeof(float);
    const int64_t a_row = va.strides[r - 2] / fs, a_col = va.strides[r - 1] / fs;
    const int64_t b_row = vb.strides[r - 2] / fs, b_col = vb.strides[r - 1] / fs;
    const int64_t o_row = vo.strides[r - 2] / fs, o_col = vo.strides[r - 1] / fs;

    struct batch {
        float *o;
        const float *a, *b;
    };
    std::vector<batch> items;
    walk<3>(r - 2, out.shape, {vo, va, vb}, [&](char *const *p, int64_t count, const int64_t *step) {
        for (int64_t t = 0; t < count; ++t)
            items.push_back({reinterpret_cast<float *>(p[0] + t * step[0]), reinterpret_cast<const float *>(p[1] + t * step[1]),
                             reinterpret_cast<const float *>(p[2] + t * step[2])});
    });
    const auto batches = static_cast<int64_t>(items.size());

    // Output rows must be dense for the GEMM; else a dense temporary per batch element.
    const bool direct = o_col == 1 || n == 1;
    auto one = [&](int64_t t, int64_t rows, int64_t a_rs, int64_t o_rs) {
        const batch &it = items[static_cast<size_t>(t)];
        const f32_matrix am{it.a, a_rs, a_col}, bm{it.b, b_row, b_col};
        if (direct) {
            gemm_f32(rows, n, k, am, bm, it.o, o_rs, false);
            return;
        }
        float *tmp = scratch_floats(k_slot_temp, static_cast<size_t>(rows * n));
        gemm_f32(rows, n, k, am, bm, tmp, n, false);
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < n; ++j) it.o[i * o_rs + j * o_col] = tmp[i * n + j];
    };

    if (batches > 1 && direct) {
        bool fold = true;
        const int64_t a_rs = m > 1 ? a_row : items[1].a - items[0].a;
        const int64_t o_rs = m > 1 ? o_row : items[1].o - items[0].o;
        for (int64_t t = 1; t < batches && fold; ++t) {
            const batch &it = items[static_cast<size_t>(t)];
            fold = it.b == items[0].b && it.a == items[0].a + t * m * a_rs && it.o == items[0].o + t * m * o_rs;
        }
        if (fold && a_rs != 0) {
            one(0, m * batches, a_rs, o_rs);
            return;
        }
    }
    const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    if (batches > 1 && macs < static_cast<double>(k_gemm_parallel_macs)) {
        const int64_t tasks = std::min<int64_t>(batches, split_count(static_cast<int64_t>(macs * batches), k_gemm_parallel_macs / 4));
        const int64_t per = (batches + tasks - 1) / tasks;
        parallel_for((batches + per - 1) / per, [&](int64_t t) {
            for (int64_t i = t * per; i < std::min(batches, (t + 1) * per); ++i) one(i, m, a_row, o_row);
        });
        return;
    }
    for (int64_t t = 0; t < batches; ++t) one(t, m, a_row, o_row);
}

}  // namespace

tf_status run_matmul(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, tf_error *err) {
    if (out.dtype == TF_DTYPE_F32 && a.dtype == TF_DTYPE_F32 && b.dtype == TF_DTYPE_F32) {
        matmul_f32(a, b, out);
        return TF_STATUS_OK;
    }
    const bool known = with_float_dtype(out.dtype, [&](auto tag) { matmul<decltype(tag)>(a, b, out); });
    if (!known) return fail(err, TF_STATUS_UNSUPPORTED, "matmul: dtype %s not supported", dtype_name(out.dtype));
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
