// The ops on block-quantized tensors: quantize, dequantize, matmul_q, embedding_q
// (docs/quantization.md). Not recorded by autograd: quantized tensors are inference weights.
#include "ops_common.hpp"

namespace tinyfin {

using namespace detail;

namespace {

void require_quantized(const Tensor &t, const char *op, const char *what) {
    if (!is_quantized(t.dtype()))
        raise<DTypeError>(std::string(op) + ": " + what + " must be block-quantized (q8_0 .. q8_k), got " +
                          dtype_name(t.dtype()));
}

void require_float(DType dtype, const char *op, const char *what) {
    if (!is_float(dtype))
        raise<DTypeError>(std::string(op) + ": " + what + " must be f32, f16 or bf16, got " + dtype_name(dtype));
}

}  // namespace

Tensor quantize(const Tensor &x, DType dtype) {
    const char *op = op_info(TF_OP_QUANTIZE).name;
    impl_of(x, op);
    require_float(x.dtype(), op, "the input");
    if (!is_quantized(dtype))
        raise<DTypeError>(std::string(op) + ": the target dtype must be block-quantized (q8_0 .. q8_k), got " +
                          dtype_name(dtype));
    // dtype_bytes checks that the last axis is whole blocks.
    dtype_bytes(dtype, x.shape());
    Tensor out = empty_like_device(x, x.shape(), dtype);
    if (out.numel() > 0) dispatch(TF_OP_QUANTIZE, {x}, {out});
    return out;
}

Tensor dequantize(const Tensor &q, DType dtype) {
    const char *op = op_info(TF_OP_DEQUANTIZE).name;
    impl_of(q, op);
    require_quantized(q, op, "the input");
    require_float(dtype, op, "the output dtype");
    Tensor out = empty_like_device(q, q.shape(), dtype);
    if (out.numel() > 0) dispatch(TF_OP_DEQUANTIZE, {q}, {out});
    return out;
}

Tensor matmul_q(const Tensor &x, const Tensor &w, std::optional<DType> out_dtype) {
    const char *op = op_info(TF_OP_MATMUL_Q).name;
    impl_of(x, op);
    impl_of(w, op);
    require_float(x.dtype(), op, "x");
    require_quantized(w, op, "the weight");
    const DType dtype = out_dtype.value_or(x.dtype());
    if (dtype != DType::f32 && dtype != x.dtype())
        raise<DTypeError>(std::string(op) + ": the output dtype must be f32 or x's (" + dtype_name(x.dtype()) +
                          "), got " + dtype_name(dtype));
    if (w.rank() != 2 || x.rank() < 1 || x.size(-1) != w.size(1))
        raise<ShapeError>(std::string(op) + ": x " + shape_str(x.shape()) + " times the transpose of w " +
                          shape_str(w.shape()) + " needs w of rank 2 [N, K] and x [..., K]");
    Shape shape = x.shape();
    shape.back() = w.size(0);
    Tensor a = x, b = w;
    place_together({&a, &b}, op);
    Tensor out = empty_like_device(b, shape, dtype);
    if (out.numel() > 0) dispatch(TF_OP_MATMUL_Q, {a, b}, {out});
    return out;
}

uint64_t prepack_weight(const Tensor &w) {
    const TensorImpl &t = impl_of(w, "prepack_weight");
    const Storage &storage = *t.storage;
    auto prepack = reinterpret_cast<tf_weight_prepack_fn>(storage.backend->get_proc("weight_prepack"));
    if (!prepack) return 0;
    tf_tensor_desc desc;
    describe_tensor(t, desc);
    uint64_t bytes = 0;
    tf_error err = make_error();
    const tf_status status =
        guarded(err, "weight_prepack", [&] { return prepack(storage.device, &desc, &bytes, &err); });
    if (status != TF_STATUS_OK)
        raise_status(status, "prepack_weight on " + w.device().str() + ": " +
                                 error_text(err, "weight_prepack failed without a message"));
    return bytes;
}

Tensor embedding_q(const Tensor &weight, const Tensor &indices, DType dtype) {
    const char *op = op_info(TF_OP_EMBEDDING_Q).name;
    impl_of(weight, op);
    impl_of(indices, op);
    require_quantized(weight, op, "the weight");
    require_float(dtype, op, "the output dtype");
    if (weight.rank() != 2)
        raise<ShapeError>(std::string(op) + ": the weight must be [V, D], got " + shape_str(weight.shape()));
    if (!is_integer(indices.dtype()))
        raise<DTypeError>(std::string(op) + ": indices must be i32 or i64, got " + dtype_name(indices.dtype()));
    Shape shape = indices.shape();
    shape.push_back(weight.size(1));
    Tensor w = weight, idx = indices;
    place_together({&w, &idx}, op);
    Tensor out = empty_like_device(w, shape, dtype);
    if (out.numel() > 0) dispatch(TF_OP_EMBEDDING_Q, {w, idx}, {out});
    return out;
}

}  // namespace tinyfin
