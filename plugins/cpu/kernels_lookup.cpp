// Ops indexed by integer tensors: embedding, embedding_backward and one_hot.
//
// Every index is checked before anything is written: one outside [0, V) (or [0, num_classes))
// fails the whole call with INVALID_ARGUMENT naming the index and the range.
//  - embedding copies weight rows (any dtype, bit for bit) to the output rows.
//  - embedding_backward zeroes dweight, then adds dy's rows into it in index order (repeated
//    indices accumulate), in f32, rounded once to dweight's dtype.
//  - one_hot writes 1 at the label's class and 0 elsewhere, in the output's dtype.
#include "kernels_nn.hpp"

#include <cinttypes>

namespace tf_cpu {
namespace {

tf_status check_range(const char *name, const char *what, const std::vector<int64_t> &indices, int64_t limit,
                      tf_error *err) {
    for (int64_t index : indices)
        if (index < 0 || index >= limit)
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %" PRId64 " is out of range [0, %" PRId64 ")", name,
                        what, index, limit);
    return TF_STATUS_OK;
}

}  // namespace

tf_status run_embedding(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &weight = op.inputs[0], &out = op.outputs[0];
    const std::vector<int64_t> indices = load_indices(op.inputs[1]);
    if (tf_status s = check_range("embedding", "index", indices, weight.shape[0], err); s != TF_STATUS_OK) return s;
    if (numel(out) == 0) return TF_STATUS_OK;
    const int64_t dim = weight.shape[1];
    const auto size = static_cast<size_t>(dtype_size(weight.dtype));
    const View wv = view_of(weight), ov = view_of(out);
    const int64_t w_col = wv.strides[1], o_col = ov.strides[out.rank - 1];
    const std::vector<int64_t> rows = leading_offsets(out, out.rank - 1);
    const char *table = base_of(weight);
    char *dst_base = base_of(out);
    // Rows dense in both (the usual table and output): one copy per row, not one per element.
    const bool dense_rows = w_col == static_cast<int64_t>(size) && o_col == static_cast<int64_t>(size);
    for (size_t e = 0; e < indices.size(); ++e) {
        const char *src = table + indices[e] * wv.strides[0];
        char *dst = dst_base + rows[e];
        if (dense_rows) {
            std::memcpy(dst, src, static_cast<size_t>(dim) * size);
            continue;
        }
        for (int64_t j = 0; j < dim; ++j) std::memcpy(dst + j * o_col, src + j * w_col, size);
    }
    return TF_STATUS_OK;
}

tf_status run_embedding_backward(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &dyd = op.inputs[0], &dwd = op.outputs[0];
    const std::vector<int64_t> indices = load_indices(op.inputs[1]);
    if (tf_status s = check_range("embedding_backward", "index", indices, dwd.shape[0], err); s != TF_STATUS_OK)
        return s;
    if (numel(dwd) == 0) return TF_STATUS_OK;
    const int64_t dim = dwd.shape[1];
    const F32Input dy(dyd);
    F32Output dw(dwd);
    std::fill(dw.data(), dw.data() + numel(dwd), 0.0f);
    for (size_t e = 0; e < indices.size(); ++e) {
        const float *src = dy.data() + static_cast<int64_t>(e) * dim;
        float *dst = dw.data() + indices[e] * dim;
        for (int64_t j = 0; j < dim; ++j) dst[j] += src[j];
    }
    dw.finish();
    return TF_STATUS_OK;
}

tf_status run_one_hot(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &out = op.outputs[0];
    const int64_t classes = static_cast<const tf_params_one_hot *>(op.params)->num_classes;
    const std::vector<int64_t> labels = load_indices(op.inputs[0]);
    if (tf_status s = check_range("one_hot", "label", labels, classes, err); s != TF_STATUS_OK) return s;
    if (numel(out) == 0) return TF_STATUS_OK;
    const int64_t col = view_of(out).strides[out.rank - 1];
    const std::vector<int64_t> rows = leading_offsets(out, out.rank - 1);
    char *base = base_of(out);
    Dtypes::with_any(out.dtype, [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        for (size_t e = 0; e < labels.size(); ++e)
            for (int64_t c = 0; c < classes; ++c) Tr::store_wide(base + rows[e] + c * col, int64_t{c == labels[e]});
    });
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
