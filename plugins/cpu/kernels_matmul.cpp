// Matmul reference kernel: [..., M, K] x [..., K, N] -> [..., M, N], batch dims already broadcast
// by the core (stride 0 possible), any strides on all three operands.
#include "kernels.h"

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

}  // namespace

tf_status run_matmul(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, tf_error *err) {
    const bool known = with_float_dtype(out.dtype, [&](auto tag) { matmul<decltype(tag)>(a, b, out); });
    if (!known) return fail(err, TF_STATUS_UNSUPPORTED, "matmul: dtype %s not supported", dtype_name(out.dtype));
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
