// The cuda plugin's kernels as rows (tinyfin/plugin_kit/kernel_rows.hpp): each op's launch, the
// dtypes it takes and its further limits; supports() and run() are derived from them after the
// op's rule (the kit's check_op). run() adds only that every tensor lies in a buffer of the
// device.
//
// Not supported here (the core runs them on cpu): integer div and pow (their bad operands are
// errors the cpu plugin reports before writing), bf16 matmul and convolutions below sm_80, and
// attention with more than attention_max_keys keys.
#include <cmath>
#include <cstring>
#include <span>

#include "context.hpp"
#include "element.hpp"

namespace tf_cuda {
namespace {

// run() only: the tensor's elements lie inside a buffer of this device.
tf_status check_memory(const char *name, const char *role, uint32_t i, const tf_tensor_desc &t, const Device &device,
                       tf_error *err) {
    const int64_t n = numel(t);
    if (n == 0) return TF_STATUS_OK;
    if (!t.buffer) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u has no buffer", name, role, i);
    if (t.buffer->device != &device)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u lives on cuda:%d, the op runs on cuda:%d", name, role,
                    i, t.buffer->device->index, device.index);
    // One past the last byte. The kit's extent (check_op found it without overflow) gives the
    // first byte of the last element of a plain tensor, the last byte of the last block of a
    // quantized one.
    const uint64_t end = extent_of(t).last_byte + (is_quantized(t.dtype) ? 1 : dtype_size(t.dtype));
    if (end > t.buffer->size)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %s %u reaches byte %llu of a %llu-byte buffer", name, role, i,
                    static_cast<unsigned long long>(end), static_cast<unsigned long long>(t.buffer->size));
    return TF_STATUS_OK;
}

// ---- Launch helpers ------------------------------------------------------------------------------------

// Strided<N> over out's shape for the operands' strides in order.
template <int N>
Strided<N> strided(const tf_tensor_desc &shape_of, std::initializer_list<const tf_tensor_desc *> operands) {
    const int64_t *strides[N];
    int k = 0;
    for (const tf_tensor_desc *t : operands) strides[k++] = t->strides;
    return make_strided<N>(shape_of.rank, shape_of.shape, strides);
}

tf_status launched(tf_error *err, const char *name, cudaError_t e) {
    if (e == cudaSuccess) return TF_STATUS_OK;
    char what[64];
    std::snprintf(what, sizeof what, "%s: kernel launch", name);
    return cuda_fail(err, what, e);
}

PoolArgs pool_args(const tf_op_desc &op) {
    const auto &p = params_of<tf_params_pool2d>(op);
    const bool forward = op.op == TF_OP_MAX_POOL2D || op.op == TF_OP_AVG_POOL2D;
    const tf_tensor_desc &x = forward                              ? op.inputs[0]
                              : op.op == TF_OP_MAX_POOL2D_BACKWARD ? op.inputs[1]
                                                                   : op.outputs[0];
    const tf_tensor_desc &y = forward ? op.outputs[0] : op.inputs[0];
    PoolArgs a{};
    a.n = x.shape[0];
    a.c = x.shape[1];
    a.h = x.shape[2];
    a.w = x.shape[3];
    a.oh = y.shape[2];
    a.ow = y.shape[3];
    for (int i = 0; i < 4; ++i) {
        a.x_strides[i] = x.strides[i];
        a.y_strides[i] = y.strides[i];
        a.dx_strides[i] = forward ? 0 : op.outputs[0].strides[i];
    }
    for (int i = 0; i < 2; ++i) {
        a.kernel[i] = p.kernel[i];
        a.stride[i] = p.stride[i];
        a.padding[i] = p.padding[i];
    }
    a.count_include_pad = p.count_include_pad;
    return a;
}

// What the launches below name: the device's stream, the op's name, its inputs, output 0 and its
// address.
struct Launch {
    cudaStream_t stream;
    const char *name;
    const tf_tensor_desc *in;
    const tf_tensor_desc &out;
    void *y;
};
Launch launch_of(Device &device, const tf_op_desc &op) {
    return {device.stream.get(), op_name(op.op), op.inputs, op.outputs[0], address_of(op.outputs[0])};
}

// ---- The kernels: each gets a descriptor that check_op and its row accepted ----------------------------

using CudaKernel = tf_status (*)(Device &device, const tf_op_desc &op, tf_error *err);
using CudaAccepts = bool (*)(const Device &device, const tf_op_desc &op);
using CudaRow = KernelRow<CudaKernel, CudaAccepts>;

// BINARY, COMPARE (bool out), WHERE: operands broadcast to out's shape by the core.
template <uint32_t Op>
tf_status binary_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc *in = op.inputs;
    const tf_tensor_desc &out = op.outputs[0];
    return launched(err, op_name(Op),
                    launch_binary(device.stream.get(), Op, out.dtype, strided<3>(out, {&out, &in[0], &in[1]}),
                                  address_of(out), address_of(in[0]), address_of(in[1])));
}

template <uint32_t Op>
tf_status compare_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc *in = op.inputs;
    const tf_tensor_desc &out = op.outputs[0];
    return launched(err, op_name(Op),
                    launch_compare(device.stream.get(), Op, in[0].dtype, strided<3>(out, {&out, &in[0], &in[1]}),
                                   address_of(out), address_of(in[0]), address_of(in[1])));
}

tf_status where_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc *in = op.inputs;
    const tf_tensor_desc &out = op.outputs[0];
    return launched(err, "where",
                    launch_where(device.stream.get(), out.dtype, strided<4>(out, {&out, &in[0], &in[1], &in[2]}),
                                 address_of(out), address_of(in[0]), address_of(in[1]), address_of(in[2])));
}

template <uint32_t Op>
tf_status unary_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &out = op.outputs[0], &in = op.inputs[0];
    ClampBounds bounds{};
    if constexpr (Op == TF_OP_CLAMP) {
        const auto &p = params_of<tf_params_clamp>(op);
        const bool wide = out.dtype == TF_DTYPE_I64;
        bounds.lo = static_cast<float>(p.min);
        bounds.hi = static_cast<float>(p.max);
        bounds.ilo = int_clamp_bound(p.min, true, wide);
        bounds.ihi = int_clamp_bound(p.max, false, wide);
    }
    return launched(err, op_name(Op),
                    launch_unary(device.stream.get(), Op, out.dtype, strided<2>(out, {&out, &in}), address_of(out),
                                 address_of(in), bounds));
}

tf_status fill_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &out = op.outputs[0];
    return launched(err, "fill",
                    launch_fill(device.stream.get(), out.dtype, strided<1>(out, {&out}), address_of(out),
                                fill_bits(out.dtype, params_of<tf_params_fill>(op).value)));
}

// contiguous and cast: a strided copy converting to out's dtype.
tf_status copy_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &out = op.outputs[0], &in = op.inputs[0];
    return launched(err, op_name(op.op),
                    launch_copy(device.stream.get(), out.dtype, in.dtype, strided<2>(out, {&out, &in}), address_of(out),
                                address_of(in)));
}

// sum, mean, max, min, var over the axes of the mask.
template <uint32_t Op>
tf_status reduce_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &out = op.outputs[0], &in = op.inputs[0];
    const uint32_t mask = reduce_axes_mask(op);
    // The output's strides along reduced axes are never used: 0 keeps them out of the sums.
    int64_t out_strides[TF_MAX_RANK] = {};
    for (int i = 0; i < out.rank; ++i) out_strides[i] = (mask >> i & 1) ? 0 : out.strides[i];
    const int64_t *strides[2] = {out_strides, in.strides};
    const RowGeom<2> g = make_rows<2>(in.rank, in.shape, strides, mask);
    const double correction = Op == TF_OP_VAR ? params_of<tf_params_var>(op).correction : 0.0;
    return launched(err, op_name(Op),
                    launch_reduce(device.stream.get(), Op, out.dtype, g, address_of(out), address_of(in), correction));
}

// argmax, argmin along one axis.
template <uint32_t Op>
tf_status arg_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &out = op.outputs[0], &in = op.inputs[0];
    const int32_t axis = params_of<tf_params_axis>(op).axis;
    int64_t out_strides[TF_MAX_RANK] = {};
    for (int i = 0; i < out.rank; ++i) out_strides[i] = i == axis ? 0 : out.strides[i];
    const int64_t *strides[2] = {out_strides, in.strides};
    const RowGeom<2> g = make_rows<2>(in.rank, in.shape, strides, 1u << axis);
    return launched(err, op_name(Op),
                    launch_arg(device.stream.get(), Op, in.dtype, g, address_of(out), address_of(in)));
}

template <uint32_t Op>
tf_status pool_run(Device &device, const tf_op_desc &op, tf_error *err) {
    cudaStream_t stream = device.stream.get();
    const tf_tensor_desc *in = op.inputs;
    const tf_tensor_desc &out = op.outputs[0];
    void *y = address_of(out);
    const PoolArgs args = pool_args(op);
    cudaError_t e = cudaSuccess;
    if constexpr (Op == TF_OP_MAX_POOL2D) e = launch_max_pool(stream, out.dtype, args, y, address_of(in[0]));
    if constexpr (Op == TF_OP_MAX_POOL2D_BACKWARD)
        e = launch_max_pool_backward(stream, out.dtype, args, y, address_of(in[0]), address_of(in[1]));
    if constexpr (Op == TF_OP_AVG_POOL2D) e = launch_avg_pool(stream, out.dtype, args, y, address_of(in[0]));
    if constexpr (Op == TF_OP_AVG_POOL2D_BACKWARD)
        e = launch_avg_pool_backward(stream, out.dtype, args, y, address_of(in[0]));
    return launched(err, op_name(Op), e);
}

template <bool Log>
tf_status softmax_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &out = op.outputs[0], &in = op.inputs[0];
    const int64_t *strides[2] = {out.strides, in.strides};
    const RowGeom<2> g = make_rows<2>(in.rank, in.shape, strides, 1u << params_of<tf_params_axis>(op).axis);
    return launched(err, op_name(op.op),
                    launch_softmax(device.stream.get(), Log, out.dtype, g, address_of(out), address_of(in)));
}

// layer_norm (x, weight, bias) and rms_norm (x, weight).
tf_status norm_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc *in = op.inputs;
    const tf_tensor_desc &out = op.outputs[0];
    const int32_t n = params_of<tf_params_norm>(op).n_axes;
    const int r = in[0].rank;
    // weight and bias: strides 0 along the leading axes, their own along the normalised ones.
    int64_t w_strides[TF_MAX_RANK] = {}, b_strides[TF_MAX_RANK] = {};
    for (int i = r - n; i < r; ++i) {
        w_strides[i] = in[1].strides[i - (r - n)];
        if (op.n_inputs > 2) b_strides[i] = in[2].strides[i - (r - n)];
    }
    const int64_t *strides[4] = {out.strides, in[0].strides, w_strides, b_strides};
    const uint32_t mask = ((1u << r) - 1) & ~((1u << (r - n)) - 1);
    const RowGeom<4> g = make_rows<4>(r, in[0].shape, strides, mask);
    return launched(err, op_name(op.op),
                    launch_norm(device.stream.get(), out.dtype, g, address_of(out), address_of(in[0]),
                                address_of(in[1]), op.n_inputs > 2 ? address_of(in[2]) : nullptr,
                                params_of<tf_params_norm>(op).eps));
}

tf_status attention_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const auto [stream, name, in, out, y] = launch_of(device, op);
    const auto &p = params_of<tf_params_attention>(op);
    const tf_tensor_desc &q = in[0], &k = in[1], &v = in[2], &m = in[3];
    const bool masked = !is_absent(m);  // absent: the kernel gets a NULL mask and adds nothing
    const int r = q.rank;
    const int64_t *strides[5] = {out.strides, q.strides, k.strides, v.strides, m.strides};
    const Strided<5> lead = make_strided<5>(r - 2, out.shape, strides);
    AttentionArgs a{};
    a.tq = q.shape[r - 2];
    a.tk = k.shape[r - 2];
    a.d = q.shape[r - 1];
    a.dv = v.shape[r - 1];
    a.q_stride_t = q.strides[r - 2];
    a.q_stride_d = q.strides[r - 1];
    a.k_stride_t = k.strides[r - 2];
    a.k_stride_d = k.strides[r - 1];
    a.v_stride_t = v.strides[r - 2];
    a.v_stride_d = v.strides[r - 1];
    a.mask_stride_q = masked ? m.strides[r - 2] : 0;
    a.mask_stride_k = masked ? m.strides[r - 1] : 0;
    a.out_stride_t = out.strides[r - 2];
    a.out_stride_d = out.strides[r - 1];
    a.scale = static_cast<float>(p.scale);
    a.causal = p.causal;
    return launched(err, name,
                    launch_attention(stream, out.dtype, lead, a, y, address_of(q), address_of(k), address_of(v),
                                     masked ? address_of(m) : nullptr));
}

tf_status rope_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const auto [stream, name, in, out, y] = launch_of(device, op);
    const auto &p = params_of<tf_params_rope>(op);
    const int r = in[0].rank;
    const int64_t *strides[2] = {out.strides, in[0].strides};
    const Strided<2> lead = make_strided<2>(r - 2, in[0].shape, strides);
    RopeArgs a{};
    a.t = in[0].shape[r - 2];
    a.d = in[0].shape[r - 1];
    a.x_stride_t = in[0].strides[r - 2];
    a.x_stride_d = in[0].strides[r - 1];
    a.y_stride_t = out.strides[r - 2];
    a.y_stride_d = out.strides[r - 1];
    a.position_offset = p.position_offset;
    a.theta = p.theta;
    a.interleaved = p.interleaved;
    a.inverse = p.inverse;
    return launched(err, name, launch_rope(stream, out.dtype, lead, a, y, address_of(in[0])));
}

// embedding and embedding_backward (zeroed, then scatter-added); a bad index is reported.
template <bool Forward>
tf_status embedding_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const auto [stream, name, in, out, y] = launch_of(device, op);
    constexpr bool forward = Forward;
    const tf_tensor_desc &w = forward ? in[0] : out;
    const tf_tensor_desc &rows = forward ? out : in[0];
    const tf_tensor_desc &idx = in[1];
    int64_t idx_strides[TF_MAX_RANK] = {};
    for (int i = 0; i < idx.rank; ++i) idx_strides[i] = idx.strides[i];
    const int64_t *strides[2] = {rows.strides, idx_strides};
    const RowGeom<2> g = make_rows<2>(rows.rank, rows.shape, strides, 1u << (rows.rank - 1));
    const EmbeddingArgs a{w.shape[0], w.strides[0], w.strides[1]};
    if (forward)
        return launched(err, name,
                        launch_embedding(stream, out.dtype, idx.dtype, g, a, y, address_of(w), address_of(idx),
                                         device.data_error_device));
    if (tf_status s = zero_fill(device, out, err); s != TF_STATUS_OK) return s;
    return launched(err, name,
                    launch_embedding_backward(stream, out.dtype, idx.dtype, g, a, y, address_of(rows), address_of(idx),
                                              device.data_error_device));
}

tf_status cross_entropy_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const auto [stream, name, in, out, y] = launch_of(device, op);
    const auto &p = params_of<tf_params_cross_entropy>(op);
    CrossEntropyArgs a{};
    a.n = in[0].shape[0];
    a.c = in[0].shape[1];
    a.x_stride_n = in[0].strides[0];
    a.x_stride_c = in[0].strides[1];
    a.label_stride = in[1].strides[0];
    a.out_stride = out.rank == 1 ? out.strides[0] : 0;
    a.ignore_index = p.ignore_index;
    a.reduction = p.reduction;
    Scratch scratch;
    if (p.reduction != TF_REDUCTION_NONE)
        if (cudaError_t e = scratch.allocate(device, static_cast<uint64_t>(a.n) * 2 * sizeof(double)); e != cudaSuccess)
            return cuda_fail(err, "cross_entropy: scratch", e);
    return launched(err, name,
                    launch_cross_entropy(stream, out.dtype, in[1].dtype, a, y, address_of(in[0]), address_of(in[1]),
                                         static_cast<double *>(scratch.get()), device.data_error_device));
}

tf_status one_hot_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const auto [stream, name, in, out, y] = launch_of(device, op);
    const tf_tensor_desc &labels = in[0];
    int64_t label_strides[TF_MAX_RANK] = {};
    for (int i = 0; i < labels.rank; ++i) label_strides[i] = labels.strides[i];
    const int64_t *strides[2] = {out.strides, label_strides};
    const RowGeom<2> g = make_rows<2>(out.rank, out.shape, strides, 1u << (out.rank - 1));
    return launched(err, name,
                    launch_one_hot(stream, out.dtype, labels.dtype, g, params_of<tf_params_one_hot>(op).num_classes,
                                   fill_bits(out.dtype, 1.0), y, address_of(labels), device.data_error_device));
}

// cumsum along one axis (the column of the row geometry).
tf_status cumsum_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &out = op.outputs[0], &in = op.inputs[0];
    const auto &p = params_of<tf_params_cumsum>(op);
    const int64_t *strides[2] = {out.strides, in.strides};
    const RowGeom<2> g = make_rows<2>(in.rank, in.shape, strides, 1u << p.axis);
    return launched(err, "cumsum",
                    launch_cumsum(device.stream.get(), out.dtype, g, address_of(out), address_of(in), p.exclusive != 0,
                                  p.reverse != 0));
}

tf_status adamw_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const auto [stream, name, in, out, y] = launch_of(device, op);
    const auto &p = params_of<tf_params_adamw_step>(op);
    const AdamWArgs a{tf_kit::adamw_f32(p), p.has_state, p.decays};
    return launched(
        err, name,
        launch_adamw(stream, numel(out), a, static_cast<float *>(y), static_cast<const float *>(address_of(in[0])),
                     static_cast<float *>(address_of(op.outputs[1])), static_cast<float *>(address_of(op.outputs[2]))));
}

tf_status sgd_run(Device &device, const tf_op_desc &op, tf_error *err) {
    const auto [stream, name, in, out, y] = launch_of(device, op);
    const auto &p = params_of<tf_params_sgd_step>(op);
    const SgdArgs a{p.has_state,
                    p.decays,
                    p.nesterov,
                    static_cast<float>(p.lr),
                    static_cast<float>(p.momentum),
                    static_cast<float>(p.weight_decay)};
    return launched(err, name,
                    launch_sgd(stream, numel(out), a, static_cast<float *>(y),
                               static_cast<const float *>(address_of(in[0])),
                               static_cast<float *>(address_of(op.outputs[1]))));
}

// ---- Further limits -------------------------------------------------------------------------------------

// cuBLAS and cuDNN run bf16 on sm_80 and newer only.
bool bf16_ok(const Device &device, const tf_op_desc &op) {
    return op.outputs[0].dtype != TF_DTYPE_BF16 || device.capability >= 80;
}
// A layout cuBLAS takes without a copy.
bool matmul_accepts(const Device &device, const tf_op_desc &op) {
    return bf16_ok(device, op) && matmul_supported(device, op);
}
// Shapes within cuDNN's int limits.
bool conv_accepts(const Device &device, const tf_op_desc &op) {
    return bf16_ok(device, op) && conv_supported(device, op);
}
bool attention_accepts(const Device &, const tf_op_desc &op) {
    const tf_tensor_desc &k = op.inputs[1];
    return k.shape[k.rank - 2] <= attention_max_keys;
}
// The optimizer kernels walk every operand as one dense f32 run.
bool optimizer_accepts(const Device &, const tf_op_desc &op) {
    for (uint32_t i = 0; i < op.n_outputs; ++i)
        if (!is_contiguous(op.outputs[i])) return false;
    return is_contiguous(op.inputs[0]);
}

// ---- The table --------------------------------------------------------------------------------------------

constexpr DtypeSet any = k_any_dtype;
// Integer div and pow: their bad operands (a zero divisor, a negative exponent) are errors the cpu
// plugin reports before writing. The OWN ops' kernels compute in f32 (f16 and bf16 loaded as f32).
constexpr DtypeSet floats = k_float_dtypes;

constexpr CudaRow k_kernels[] = {
    {TF_OP_ADD, any, binary_run<TF_OP_ADD>},
    {TF_OP_SUB, any, binary_run<TF_OP_SUB>},
    {TF_OP_MUL, any, binary_run<TF_OP_MUL>},
    {TF_OP_DIV, floats, binary_run<TF_OP_DIV>},
    {TF_OP_POW, floats, binary_run<TF_OP_POW>},
    {TF_OP_MAXIMUM, any, binary_run<TF_OP_MAXIMUM>},
    {TF_OP_MINIMUM, any, binary_run<TF_OP_MINIMUM>},
    {TF_OP_RELU_BACKWARD, any, binary_run<TF_OP_RELU_BACKWARD>},
    {TF_OP_GELU_BACKWARD, any, binary_run<TF_OP_GELU_BACKWARD>},
    {TF_OP_NEG, any, unary_run<TF_OP_NEG>},
    {TF_OP_EXP, any, unary_run<TF_OP_EXP>},
    {TF_OP_RELU, any, unary_run<TF_OP_RELU>},
    {TF_OP_ABS, any, unary_run<TF_OP_ABS>},
    {TF_OP_LOG, any, unary_run<TF_OP_LOG>},
    {TF_OP_SQRT, any, unary_run<TF_OP_SQRT>},
    {TF_OP_RSQRT, any, unary_run<TF_OP_RSQRT>},
    {TF_OP_SIN, any, unary_run<TF_OP_SIN>},
    {TF_OP_COS, any, unary_run<TF_OP_COS>},
    {TF_OP_TANH, any, unary_run<TF_OP_TANH>},
    {TF_OP_SIGMOID, any, unary_run<TF_OP_SIGMOID>},
    {TF_OP_GELU, any, unary_run<TF_OP_GELU>},
    {TF_OP_GELU_TANH, any, unary_run<TF_OP_GELU_TANH>},
    {TF_OP_SILU, any, unary_run<TF_OP_SILU>},
    {TF_OP_SQUARE, any, unary_run<TF_OP_SQUARE>},
    {TF_OP_ERF, any, unary_run<TF_OP_ERF>},
    {TF_OP_ASIN, any, unary_run<TF_OP_ASIN>},
    {TF_OP_ACOS, any, unary_run<TF_OP_ACOS>},
    {TF_OP_ATAN, any, unary_run<TF_OP_ATAN>},
    {TF_OP_ASINH, any, unary_run<TF_OP_ASINH>},
    {TF_OP_ACOSH, any, unary_run<TF_OP_ACOSH>},
    {TF_OP_ATANH, any, unary_run<TF_OP_ATANH>},
    {TF_OP_CLAMP, any, unary_run<TF_OP_CLAMP>},
    {TF_OP_EQ, any, compare_run<TF_OP_EQ>},
    {TF_OP_NE, any, compare_run<TF_OP_NE>},
    {TF_OP_LT, any, compare_run<TF_OP_LT>},
    {TF_OP_LE, any, compare_run<TF_OP_LE>},
    {TF_OP_GT, any, compare_run<TF_OP_GT>},
    {TF_OP_GE, any, compare_run<TF_OP_GE>},
    {TF_OP_WHERE, any, where_run},
    {TF_OP_CONTIGUOUS, any, copy_run},
    {TF_OP_CAST, any, copy_run},
    {TF_OP_FILL, any, fill_run},
    {TF_OP_SUM, any, reduce_run<TF_OP_SUM>},
    {TF_OP_MEAN, any, reduce_run<TF_OP_MEAN>},
    {TF_OP_MAX, any, reduce_run<TF_OP_MAX>},
    {TF_OP_MIN, any, reduce_run<TF_OP_MIN>},
    {TF_OP_VAR, any, reduce_run<TF_OP_VAR>},
    {TF_OP_ARGMAX, any, arg_run<TF_OP_ARGMAX>},
    {TF_OP_ARGMIN, any, arg_run<TF_OP_ARGMIN>},
    {TF_OP_MATMUL, any, matmul_run, matmul_accepts},
    {TF_OP_CONV2D, any, conv_run<TF_OP_CONV2D>, conv_accepts},
    {TF_OP_CONV2D_GRAD_INPUT, any, conv_run<TF_OP_CONV2D_GRAD_INPUT>, conv_accepts},
    {TF_OP_CONV2D_GRAD_WEIGHT, any, conv_run<TF_OP_CONV2D_GRAD_WEIGHT>, conv_accepts},
    {TF_OP_MAX_POOL2D, any, pool_run<TF_OP_MAX_POOL2D>},
    {TF_OP_MAX_POOL2D_BACKWARD, any, pool_run<TF_OP_MAX_POOL2D_BACKWARD>},
    {TF_OP_AVG_POOL2D, any, pool_run<TF_OP_AVG_POOL2D>},
    {TF_OP_AVG_POOL2D_BACKWARD, any, pool_run<TF_OP_AVG_POOL2D_BACKWARD>},
    {TF_OP_SOFTMAX, any, softmax_run<false>},
    {TF_OP_LOG_SOFTMAX, any, softmax_run<true>},
    {TF_OP_LAYER_NORM, any, norm_run},
    {TF_OP_RMS_NORM, any, norm_run},
    {TF_OP_ATTENTION, any, attention_run, attention_accepts},
    {TF_OP_ROPE, any, rope_run},
    {TF_OP_EMBEDDING, any, embedding_run<true>},
    {TF_OP_EMBEDDING_BACKWARD, any, embedding_run<false>},
    {TF_OP_CROSS_ENTROPY, any, cross_entropy_run},
    {TF_OP_ONE_HOT, any, one_hot_run},
    {TF_OP_CUMSUM, any, cumsum_run},
    // The quantized ops (quant.cpp): the working dtype is the float output's; every quantized
    // dtype of dtypes.def, any layout the rules admit. quantize has no row: it runs on cpu.
    {TF_OP_DEQUANTIZE, floats, dequantize_run},
    {TF_OP_EMBEDDING_Q, floats, embedding_q_run},
    {TF_OP_MATMUL_Q, floats, matmul_q_run},
    {TF_OP_ADAMW_STEP, k_f32, adamw_run, optimizer_accepts},
    {TF_OP_SGD_STEP, k_f32, sgd_run, optimizer_accepts},
};

std::span<const CudaRow> kernels() { return k_kernels; }

// A UNARY or BINARY row only for an op element.hpp computes (k_elementwise_ops).
constexpr bool rows_compute_their_elementwise_ops() {
    for (const CudaRow &row : k_kernels) {
        OpRule rule{};
        find_op_rule(row.op, &rule);
        if ((rule.kind == OpKind::UNARY || rule.kind == OpKind::BINARY) && !implements_elementwise(row.op))
            return false;
    }
    return true;
}
static_assert(rows_compute_their_elementwise_ops());

}  // namespace

tf_status zero_fill(Device &device, const tf_tensor_desc &t, tf_error *err) {
    return launched(err, "zero fill", launch_fill(device.stream.get(), t.dtype, strided<1>(t, {&t}), address_of(t), 0));
}

int32_t CudaPlugin::supports(int32_t index, const tf_op_desc *op) {
    return guarded_answer([&] {
        Context *context = g_context;
        if (!context || index < 0 || static_cast<size_t>(index) >= context->devices.size()) return false;
        return rows_support(kernels(), op, *context->devices[static_cast<size_t>(index)]);
    });
}

tf_status CudaPlugin::run(int32_t index, const tf_op_desc *op, tf_error *err) {
    const char *name = op && op->struct_size >= sizeof(tf_op_desc) ? op_name(op->op) : "run";
    return guarded(err, name, [&]() -> tf_status {
        Device *device = device_at(index, err);
        if (!device) return TF_STATUS_INVALID_ARGUMENT;
        // run() only gets what supports() accepted, but a bad descriptor must never crash.
        const CudaRow *row = nullptr;
        if (tf_status s = kernel_to_run(kernels(), op, false, err, &row, *device); s != TF_STATUS_OK) return s;
        for (uint32_t i = 0; i < op->n_inputs; ++i) {
            if (is_absent(op->inputs[i])) continue;  // an optional input left out: no memory (check_op allowed it)
            if (tf_status s = check_memory(name, "input", i, op->inputs[i], *device, err); s != TF_STATUS_OK) return s;
        }
        for (uint32_t i = 0; i < op->n_outputs; ++i)
            if (tf_status s = check_memory(name, "output", i, op->outputs[i], *device, err); s != TF_STATUS_OK)
                return s;
        std::lock_guard lock(device->mutex);
        if (cudaError_t e = make_current(*device); e != cudaSuccess) return cuda_fail(err, "run: cudaSetDevice", e);
        return row->run(*device, *op, err);
    });
}

}  // namespace tf_cuda
