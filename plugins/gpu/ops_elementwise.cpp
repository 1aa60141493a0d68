// Elementwise ops on shaders/elementwise.comp: one dispatch each, any strides, broadcasting by
// stride 0, axes merged on the host so contiguous work walks one axis.
#include "ops.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace tf_gpu {

namespace {

// Float to integer like the cpu plugin: truncates; NaN gives 0; out of range saturates.
template <class I>
I saturate(double x) {
    if (std::isnan(x)) return 0;
    const double t = std::trunc(x);
    constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
    if (t <= lo) return std::numeric_limits<I>::min();
    if (t >= -lo) return std::numeric_limits<I>::max();
    return static_cast<I>(t);
}

// A double as f16 (e = 5, m = 10) or bf16 (8, 7) bits, rounded once from the exact value to
// nearest, ties to even (through float first would round twice), subnormals kept, past the
// largest finite value infinity; NaN quiet with its sign and top payload bits. The cpu
// plugin's fill rounds the same way (tests compare the bits).
uint16_t f64_to_half(double x, int e_bits, int m_bits) {
    const uint64_t b = std::bit_cast<uint64_t>(x);
    const uint32_t sign = static_cast<uint32_t>(b >> 63) << (e_bits + m_bits);
    const int exponent = static_cast<int>((b >> 52) & 0x7ff);
    const uint64_t mantissa = b & ((uint64_t{1} << 52) - 1);
    const uint32_t inf = ((1u << e_bits) - 1) << m_bits;
    if (exponent == 0x7ff)
        return static_cast<uint16_t>(
            sign | inf | (mantissa ? 1u << (m_bits - 1) | static_cast<uint32_t>(mantissa >> (52 - m_bits)) : 0));
    if (exponent == 0 && mantissa == 0) return static_cast<uint16_t>(sign);
    // x = sig * 2^(exp2 - 52) with sig < 2^53.
    const uint64_t sig = exponent ? mantissa | uint64_t{1} << 52 : mantissa;
    const int exp2 = exponent ? exponent - 1023 : -1022;
    const int bias = (1 << (e_bits - 1)) - 1;
    const int top = exp2 - 52 + (63 - std::countl_zero(sig));  // weight of the leading bit
    const int lsb = std::max(top, 1 - bias) - m_bits;  // weight of the last kept bit
    const int shift = lsb - (exp2 - 52);  // > 0: double has more bits
    uint64_t q = sig;
    if (shift > 0) {
        if (shift > 54) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
        q = sig >> shift;
        const uint64_t rest = sig & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
        if (rest > half || (rest == half && (q & 1))) ++q;
    } else {
        q = sig << -shift;
    }
    int e = lsb + m_bits;
    if (q >> (m_bits + 1)) {
        q >>= 1;
        ++e;
    }
    if (!(q >> m_bits)) return static_cast<uint16_t>(sign | q);  // subnormal
    if (e + bias >= (1 << e_bits) - 1) return static_cast<uint16_t>(sign | inf);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(e + bias) << m_bits |
                                 (q & ((uint64_t{1} << m_bits) - 1)));
}

// tf_params_fill.value as the raw words of dtype (cast's rules, like the cpu plugin).
void raw_value(double value, int32_t dtype, uint32_t *lo, uint32_t *hi) {
    uint64_t bits = 0;
    switch (dtype) {
    case TF_DTYPE_F32: bits = std::bit_cast<uint32_t>(static_cast<float>(value)); break;
    case TF_DTYPE_F16: bits = f64_to_half(value, 5, 10); break;
    case TF_DTYPE_BF16: bits = f64_to_half(value, 8, 7); break;
    case TF_DTYPE_I32: bits = static_cast<uint32_t>(saturate<int32_t>(value)); break;
    case TF_DTYPE_I64: bits = static_cast<uint64_t>(saturate<int64_t>(value)); break;
    case TF_DTYPE_BOOL: bits = value != 0 ? 1 : 0; break;  // NaN != 0: true
    default: break;
    }
    *lo = static_cast<uint32_t>(bits);
    *hi = static_cast<uint32_t>(bits >> 32);
}

void record(KernelDevice &dev, const tf_op_desc &op, uint32_t code, const uint32_t arg[4]) {
    const tf_tensor_desc &out = op.outputs[0];
    const int64_t count = numel(out);
    if (count == 0) return;
    const char *name = op_name(op.op);
    const uint32_t n = 1 + op.n_inputs;
    TensorBinding bindings[4];
    const int64_t *strides[4] = {out.strides};
    bindings[0] = dev.bind(out, name, "output", 0);
    for (uint32_t i = 0; i < op.n_inputs; ++i) {
        bindings[1 + i] = dev.bind(op.inputs[i], name, "input", i);
        strides[1 + i] = op.inputs[i].strides;
    }
    const MergedAxes axes = merge_axes(out.rank, out.shape, strides, static_cast<int>(n));

    EwParams p{};
    p.count = static_cast<uint32_t>(count);
    p.rank = static_cast<uint32_t>(axes.rank);
    for (int d = 0; d < axes.rank; ++d) {
        p.shape[d] = static_cast<uint32_t>(axes.shape[d]);
        const Magic divisor = magic_of(p.shape[d]);
        p.div_m[d] = divisor.m;
        p.div_s[d] = divisor.s;
        for (uint32_t t = 0; t < n; ++t) p.strides[t * 8 + d] = static_cast<uint32_t>(axes.strides[t][d]);
    }
    for (uint32_t t = 0; t < n; ++t) p.base[t] = bindings[t].base;
    for (int i = 0; i < 4; ++i) p.arg[i] = arg[i];
    // The inputs' dtype: the compared or converted one; where's a and b (the output's).
    const int32_t in_dtype = op.op == TF_OP_WHERE ? out.dtype : op.n_inputs > 0 ? op.inputs[0].dtype : out.dtype;
    // The merged rank is a selector (0 and 1 share the loop-free variant); a contiguous bool,
    // f16 or bf16 output starting on a word boundary is written a word at a time (4 or 2
    // elements) instead of through atomics on words shared with neighbours.
    const int rank = std::max(axes.rank, 1);
    const uint32_t per_word = out.dtype == TF_DTYPE_BOOL ? 4 : element_size(out.dtype) == 2 ? 2 : 0;
    const uint32_t packed =
        per_word != 0 && rank == 1 && (axes.rank == 0 || axes.strides[0][0] == 1) && p.base[0] % per_word == 0
            ? per_word
            : 0;
    const uint64_t items = packed ? (static_cast<uint64_t>(count) + packed - 1) / packed : static_cast<uint64_t>(count);
    dev.dispatch({key_of(Shader::elementwise, code, out.dtype, in_dtype, rank, packed),
                  &p,
                  sizeof p,
                  bindings,
                  n,
                  {groups_for(dev.caps(), items, 256), 1, 1}});
}

// Ops whose kernel needs no values beyond the operands: the shader's op code is the row's.
template <uint32_t Code>
void run_plain(KernelDevice &dev, const tf_op_desc &op) {
    const uint32_t arg[4] = {0, 0, 0, 0};
    record(dev, op, Code, arg);
}

void run_clamp(KernelDevice &dev, const tf_op_desc &op) {
    const auto &clamp = tf_kit::params_of<tf_params_clamp>(op);
    // Comparing x with the bound rounded to f32 picks the same side as comparing in double.
    const uint32_t arg[4] = {std::bit_cast<uint32_t>(static_cast<float>(clamp.min)),
                             std::bit_cast<uint32_t>(static_cast<float>(clamp.max)), 0, 0};
    record(dev, op, EW_CLAMP, arg);
}

void run_fill(KernelDevice &dev, const tf_op_desc &op) {
    uint32_t arg[4] = {0, 0, 0, 0};
    raw_value(tf_kit::params_of<tf_params_fill>(op).value, op.outputs[0].dtype, &arg[0], &arg[1]);
    record(dev, op, EW_FILL, arg);
}

constexpr KernelRow row(uint32_t op, KernelRun run, tf_kit::DtypeSet dtypes = tf_kit::k_any_dtype) {
    return kernel_row(op, Shader::elementwise, dtypes, run);
}

// Integer division and powers stay on cpu, which reports a zero divisor or a negative exponent;
// the shader clamps floats only.
constexpr tf_kit::DtypeSet floats = tf_kit::k_float_dtypes;

constexpr KernelRow k_rows[] = {
    row(TF_OP_NEG, run_plain<EW_NEG>),
    row(TF_OP_EXP, run_plain<EW_EXP>),
    row(TF_OP_RELU, run_plain<EW_RELU>),
    row(TF_OP_ABS, run_plain<EW_ABS>),
    row(TF_OP_LOG, run_plain<EW_LOG>),
    row(TF_OP_SQRT, run_plain<EW_SQRT>),
    row(TF_OP_RSQRT, run_plain<EW_RSQRT>),
    row(TF_OP_SIN, run_plain<EW_SIN>),
    row(TF_OP_COS, run_plain<EW_COS>),
    row(TF_OP_TANH, run_plain<EW_TANH>),
    row(TF_OP_SIGMOID, run_plain<EW_SIGMOID>),
    row(TF_OP_GELU, run_plain<EW_GELU>),
    row(TF_OP_GELU_TANH, run_plain<EW_GELU_TANH>),
    row(TF_OP_SILU, run_plain<EW_SILU>),
    row(TF_OP_SQUARE, run_plain<EW_SQUARE>),
    row(TF_OP_ERF, run_plain<EW_ERF>),
    row(TF_OP_CLAMP, run_clamp, floats),
    row(TF_OP_ADD, run_plain<EW_ADD>),
    row(TF_OP_SUB, run_plain<EW_SUB>),
    row(TF_OP_MUL, run_plain<EW_MUL>),
    row(TF_OP_DIV, run_plain<EW_DIV>, floats),
    row(TF_OP_POW, run_plain<EW_POW>, floats),
    row(TF_OP_MAXIMUM, run_plain<EW_MAXIMUM>),
    row(TF_OP_MINIMUM, run_plain<EW_MINIMUM>),
    row(TF_OP_RELU_BACKWARD, run_plain<EW_RELU_BACKWARD>),
    row(TF_OP_GELU_BACKWARD, run_plain<EW_GELU_BACKWARD>, floats),
    row(TF_OP_EQ, run_plain<EW_EQ>),
    row(TF_OP_NE, run_plain<EW_NE>),
    row(TF_OP_LT, run_plain<EW_LT>),
    row(TF_OP_LE, run_plain<EW_LE>),
    row(TF_OP_GT, run_plain<EW_GT>),
    row(TF_OP_GE, run_plain<EW_GE>),
    row(TF_OP_WHERE, run_plain<EW_WHERE>),
    row(TF_OP_CONTIGUOUS, run_plain<EW_COPY>),
    row(TF_OP_CAST, run_plain<EW_COPY>),
    row(TF_OP_FILL, run_fill),
    row(TF_OP_ASIN, run_plain<EW_ASIN>),
    row(TF_OP_ACOS, run_plain<EW_ACOS>),
    row(TF_OP_ATAN, run_plain<EW_ATAN>),
    row(TF_OP_ASINH, run_plain<EW_ASINH>),
    row(TF_OP_ACOSH, run_plain<EW_ACOSH>),
    row(TF_OP_ATANH, run_plain<EW_ATANH>),
};

}  // namespace

std::span<const KernelRow> elementwise_kernels() { return k_rows; }

void record_fill(KernelDevice &dev, const tf_tensor_desc &out, uint32_t lo, uint32_t hi) {
    const uint32_t arg[4] = {lo, hi, 0, 0};
    record(dev, step_desc(TF_OP_FILL, nullptr, out), EW_FILL, arg);
}

void record_cast(KernelDevice &dev, const tf_tensor_desc &in, const tf_tensor_desc &out) {
    const uint32_t arg[4] = {0, 0, 0, 0};
    record(dev, step_desc(TF_OP_CAST, &in, out), EW_COPY, arg);
}

}  // namespace tf_gpu
