// The ops on block-quantized tensors (ops.def 65-68, docs/quantization.md): quantize with the
// reference codecs (quant_reference.cpp), dequantize and embedding_q with the fastest decoder at
// isa_level() (AVX2 or the reference's, the same bits: quant_decode_avx2.cpp), and
// matmul_q. Few activation rows (generation): x's rows encoded to 8-bit activation blocks once,
// then every (x row, weight row) pair as an integer dot (quant_dot*.cpp, AVX2 where isa_level()
// allows), split over the thread pool by blocks of weight rows so each task writes its own
// outputs. Many rows (prefill): the weight decoded to f32 a panel of rows at a time, each panel
// multiplied by the packed f32 GEMM (kernels_gemm.hpp), so a block is unpacked once for all rows
// (docs/performance.md, "Quantized prefill", has the measurements behind the choice).
#include "kernels_gemm.hpp"
#include "kernels_nn.hpp"
#include "prepacked_weights.hpp"
#include "quant_blocks.hpp"
#include "runtime.hpp"

#include <cinttypes>

namespace tf_cpu {
namespace {

using quant::Codec;

// The byte offset (from element [0, ...]) of each row of a quantized tensor: its leading axes'
// indices times their strides, in whole blocks (the kit's check_tensor ensured whole blocks).
std::vector<int64_t> block_row_offsets(const tf_tensor_desc &d) {
    const int64_t block = dtype_block_length(d.dtype);
    const auto bytes = static_cast<int64_t>(dtype_block_bytes(d.dtype));
    int64_t rows = 1;
    for (int i = 0; i + 1 < d.rank; ++i) rows *= d.shape[i];
    std::vector<int64_t> offsets(static_cast<size_t>(rows));
    int64_t idx[TF_MAX_RANK] = {};
    for (int64_t r = 0; r < rows; ++r) {
        int64_t elements = 0;
        for (int i = 0; i + 1 < d.rank; ++i) elements += idx[i] * (d.shape[i] > 1 ? d.strides[i] : 0);
        offsets[static_cast<size_t>(r)] = elements / block * bytes;
        for (int i = d.rank - 2; i >= 0; --i) {
            if (++idx[i] < d.shape[i]) break;
            idx[i] = 0;
        }
    }
    return offsets;
}

int64_t last_axis(const tf_tensor_desc &d) { return d.rank > 0 ? d.shape[d.rank - 1] : 1; }

// row(r) for every r in [0, rows), a task per row when the work is worth splitting (every row
// writes its own outputs), else all on the calling thread.
template <class Row>
void for_rows(int64_t rows, int64_t work_per_row, int64_t grain, Row &&row) {
    if (rows < 2 || split_count(rows * work_per_row, grain) < 2) {
        for (int64_t r = 0; r < rows; ++r) row(r);
        return;
    }
    parallel_for(rows, [&row](int64_t r) { row(r); });
}

}  // namespace

tf_status run_quantize(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &out = op.outputs[0];
    if (numel(out) == 0) return TF_STATUS_OK;
    const Codec &codec = *quant::codec_of(out.dtype);
    const F32Input x(op.inputs[0]);
    const int64_t k = last_axis(out);
    const std::vector<int64_t> rows = block_row_offsets(out);
    char *base = base_of(out);
    const auto n_rows = static_cast<int64_t>(rows.size());
    for_rows(n_rows, k, 1 << 14,
             [&](int64_t r) { codec.encode(x.data() + r * k, base + rows[static_cast<size_t>(r)], k); });
    return TF_STATUS_OK;
}

tf_status run_dequantize(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &in = op.inputs[0];
    if (numel(in) == 0) return TF_STATUS_OK;
    const quant::DecodeRow decode = quant::decode_of(in.dtype, isa_level());
    F32Output y(op.outputs[0]);
    const int64_t k = last_axis(in);
    const std::vector<int64_t> rows = block_row_offsets(in);
    const char *base = base_of(in);
    const auto n_rows = static_cast<int64_t>(rows.size());
    float *dst = y.data();
    for_rows(n_rows, k, 1 << 15, [&](int64_t r) { decode(base + rows[static_cast<size_t>(r)], dst + r * k, k); });
    y.finish();
    return TF_STATUS_OK;
}

tf_status run_embedding_q(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &w = op.inputs[0];
    const std::vector<int64_t> indices = load_indices(op.inputs[1]);
    for (int64_t index : indices)
        if (index < 0 || index >= w.shape[0])
            return fail(err, TF_STATUS_INVALID_ARGUMENT,
                        "embedding_q: index %" PRId64 " is out of range [0, %" PRId64 ")", index, w.shape[0]);
    if (numel(op.outputs[0]) == 0) return TF_STATUS_OK;
    const Codec &codec = *quant::codec_of(w.dtype);
    const int64_t dim = w.shape[1];
    const int64_t row_bytes =
        (w.shape[0] > 1 ? w.strides[0] : dim) / codec.block * static_cast<int64_t>(codec.block_bytes);
    F32Output y(op.outputs[0]);
    const char *table = base_of(w);
    const quant::DecodeRow decode = quant::decode_of(w.dtype, isa_level());
    for (size_t e = 0; e < indices.size(); ++e)
        decode(table + indices[e] * row_bytes, y.data() + static_cast<int64_t>(e) * dim, dim);
    y.finish();
    return TF_STATUS_OK;
}

namespace {

// From this many activation rows on, matmul_q decodes the weight and takes the f32 GEMM.
constexpr int64_t k_prefill_rows = 32;
// Weight rows decoded per panel: the panel (rows x k f32) stays a few MiB.
constexpr int64_t k_panel_elements = int64_t{1} << 20;

// y [m, n] = x [m, k] (dense rows) times the transpose of the weight rows at weights + j *
// row_bytes, each decoded exactly to f32 (the reference codec) once per call.
void matmul_q_gemm(const float *x, int64_t m, int64_t k, const char *weights, int64_t row_bytes, int64_t n,
                   quant::DecodeRow decode, float *y) {
    const int64_t panel = std::clamp<int64_t>(k_panel_elements / k, 16, n);
    float *wf = scratch_floats(k_slot_col, static_cast<size_t>(panel * k));
    for (int64_t j0 = 0; j0 < n; j0 += panel) {
        const int64_t rows = std::min(panel, n - j0);
        for_rows(rows, k, 1 << 15, [&](int64_t r) { decode(weights + (j0 + r) * row_bytes, wf + r * k, k); });
        gemm_f32(m, rows, k, F32Matrix{x, k, 1}, F32Matrix{wf, 1, k}, y + j0, n, false);
    }
}

// The same from a repacked weight (prepacked_weights.hpp): each row unpacked to its GGUF blocks a
// block at a time, then decoded as above.
void matmul_q_gemm_repacked(const float *x, int64_t m, int64_t k, const Prepacked &w, quant::DecodeRow decode,
                            float *y) {
    const int64_t n = w.shape.rows;
    const int64_t panel = std::clamp<int64_t>(k_panel_elements / k, 16, n);
    float *wf = scratch_floats(k_slot_col, static_cast<size_t>(panel * k));
    for (int64_t j0 = 0; j0 < n; j0 += panel) {
        const int64_t rows = std::min(panel, n - j0);
        for_rows(rows, k, 1 << 15, [&](int64_t r) {
            alignas(8) char blocks[2048];  // whole blocks (8-113 of them) at a time
            const int64_t per = static_cast<int64_t>(sizeof blocks / w.shape.block_bytes());
            const int64_t length = w.shape.block_length();
            for (int64_t b0 = 0; b0 < w.shape.blocks; b0 += per) {
                const int64_t count = std::min(per, w.shape.blocks - b0);
                quant::unpack_blocks(w.shape, w.bytes, j0 + r, b0, count, blocks);
                decode(blocks, wf + r * k + b0 * length, count * length);
            }
        });
        gemm_f32(m, rows, k, F32Matrix{x, k, 1}, F32Matrix{wf, 1, k}, y + j0, n, false);
    }
}

// Generation's products with a repacked weight: the activation rows encoded as the row dots take
// them, then a task per two groups of eight rows (each group's eight dots at once over every
// activation row) and one for the plain rows after the groups.
void matmul_q_repacked(const float *x, int64_t m, int64_t k, const Prepacked &w, float *y) {
    const int64_t n = w.shape.rows;
    const quant::ActKind kind = quant::act_kind_of(w.shape.dtype, isa_level());
    const auto act_row = static_cast<int64_t>(quant::act_bytes(kind, k));
    std::vector<char> act(static_cast<size_t>(m * act_row));
    for_rows(m, k, 1 << 14, [&](int64_t r) { quant::quantize_act(kind, x + r * k, act.data() + r * act_row, k); });
    const quant::GroupDotFn group_dot = quant::group_dot_of(w.shape.dtype, isa_level());
    const quant::DotFn dot = quant::dot_of(w.shape.dtype, isa_level());
    constexpr int64_t groups_per_task = 2;
    const int64_t groups = w.shape.groups(), group_tasks = (groups + groups_per_task - 1) / groups_per_task;
    const bool tail = groups * quant::k_group_rows < n;
    parallel_for(group_tasks + (tail ? 1 : 0), [&](int64_t task) {
        if (task == group_tasks) {  // the rows after the last group, plain GGUF rows
            const char *rows = w.bytes + w.shape.tail_offset();
            for (int64_t r = 0; r < m; ++r)
                for (int64_t j = groups * quant::k_group_rows; j < n; ++j)
                    y[r * n + j] =
                        dot(rows + static_cast<size_t>(j - groups * quant::k_group_rows) * w.shape.row_bytes(),
                            act.data() + r * act_row, k);
            return;
        }
        const int64_t first = task * groups_per_task, last = std::min(groups, first + groups_per_task);
        for (int64_t r = 0; r < m; ++r)
            for (int64_t g = first; g < last; ++g)
                group_dot(w.bytes + static_cast<size_t>(g) * w.shape.group_bytes(), act.data() + r * act_row,
                          w.shape.blocks, y + r * n + g * quant::k_group_rows);
    });
}

}  // namespace

tf_status run_matmul_q(const tf_op_desc &op, tf_error *) {
    const tf_tensor_desc &xd = op.inputs[0], &w = op.inputs[1], &out = op.outputs[0];
    if (numel(out) == 0) return TF_STATUS_OK;
    const int64_t k = w.shape[1], n = w.shape[0], m = numel(out) / n;
    F32Output y(out);
    if (k == 0) {
        std::fill(y.data(), y.data() + m * n, 0.0f);
        y.finish();
        return TF_STATUS_OK;
    }
    const F32Input x(xd);
    const int64_t row_bytes =
        (n > 1 ? w.strides[0] : k) / dtype_block_length(w.dtype) * static_cast<int64_t>(dtype_block_bytes(w.dtype));
    const char *weights = base_of(w);
    float *dst = y.data();
    if (const std::shared_ptr<const Prepacked> packed = find_prepacked(w)) {
        if (m >= k_prefill_rows)
            matmul_q_gemm_repacked(x.data(), m, k, *packed, quant::decode_of(w.dtype, isa_level()), dst);
        else
            matmul_q_repacked(x.data(), m, k, *packed, dst);
        y.finish();
        return TF_STATUS_OK;
    }
    if (m >= k_prefill_rows) {
        matmul_q_gemm(x.data(), m, k, weights, row_bytes, n, quant::decode_of(w.dtype, isa_level()), dst);
        y.finish();
        return TF_STATUS_OK;
    }
    const quant::ActKind kind = quant::act_kind_of(w.dtype, isa_level());
    const auto act_row = static_cast<int64_t>(quant::act_bytes(kind, k));
    std::vector<char> act(static_cast<size_t>(m * act_row));
    for_rows(m, k, 1 << 14,
             [&](int64_t r) { quant::quantize_act(kind, x.data() + r * k, act.data() + r * act_row, k); });
    const quant::DotFn dot = quant::dot_of(w.dtype, isa_level());
    // Blocks of weight rows: each task reads its rows once and keeps them in cache over x's rows.
    constexpr int64_t rows_per_task = 16;
    const int64_t tasks = (n + rows_per_task - 1) / rows_per_task;
    parallel_for(tasks, [&](int64_t task) {
        const int64_t first = task * rows_per_task, last = std::min(n, first + rows_per_task);
        for (int64_t r = 0; r < m; ++r) {
            const char *a = act.data() + r * act_row;
            for (int64_t j = first; j < last; ++j) dst[r * n + j] = dot(weights + j * row_bytes, a, k);
        }
    });
    y.finish();
    return TF_STATUS_OK;
}

}  // namespace tf_cpu
