// Private to the cpu plugin: what plugin.cpp and the kernel files share. Nothing here crosses
// the ABI; every kernel assumes a descriptor that the kit's check_op and its row accepted.
#pragma once

#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit.hpp>

#include "runtime.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>

namespace tf_cpu {

// Float conversions and arithmetic below rely on IEEE 754 binary32/binary64 (overflow to
// infinity, NaN propagation).
static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559);

// ---- From the plugin kit ------------------------------------------------------------------------

// fail() (err may be NULL: supports() validates through the same code without paying for the
// text), op_name, dtype_name, dtype_size, numel (validate() has ruled out overflow, also of the
// partial products of an empty tensor's sizes) and the rest of include/tinyfin/plugin_kit.hpp.
using namespace tf_kit;

// ---- f16 and bf16 -----------------------------------------------------------------------------

// Storage types of the dtypes C++ has no type for. Wrappers, so overloads and templates tell
// them apart from uint16_t / uint8_t.
struct Half {
    uint16_t bits;
};
struct BFloat16 {
    uint16_t bits;
};
struct Boolean {
    uint8_t value;
};

// Rounds (neg ? -1 : 1) * mag * 2^exp to the nearest value of the binary format with E exponent
// bits and M stored mantissa bits, ties to even; beyond the largest finite value gives infinity.
// Every narrowing conversion goes through here with the exact source value, so a result is
// rounded once: rounding f64 -> f32 -> f16 in two steps can land on the wrong side of a tie.
template <int E, int M>
constexpr uint16_t round_to_format(bool neg, uint64_t mag, int exp) {
    constexpr int bias = (1 << (E - 1)) - 1;
    constexpr int emin = 1 - bias;
    const uint32_t sign = neg ? 1u << (E + M) : 0u;
    if (mag == 0) return static_cast<uint16_t>(sign);
    // The value lies in [2^top, 2^(top+1)); its last kept bit has weight 2^lsb.
    const int top = 63 - std::countl_zero(mag) + exp;
    const int lsb = std::max(top, emin) - M;
    const int shift = lsb - exp;  // low bits of mag that do not fit
    uint64_t q = 0;
    if (shift <= 0) {
        q = mag << -shift;  // exact, q < 2^(M+1)
    } else {
        if (shift > 64) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
        q = shift == 64 ? 0 : mag >> shift;
        const uint64_t rem = shift == 64 ? mag : mag & ((uint64_t{1} << shift) - 1);
        const uint64_t half = uint64_t{1} << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) ++q;
    }
    int e = lsb + M;  // exponent of the leading bit when the result is normal
    if (q >> (M + 1)) {  // rounding carried into the next binade
        q >>= 1;
        ++e;
    }
    if (!(q >> M)) return static_cast<uint16_t>(sign | q);  // subnormal, or the carry made it normal with e == emin
    if (e + bias >= (1 << E) - 1) return static_cast<uint16_t>(sign | ((1u << E) - 1) << M);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(e + bias) << M | (q & ((uint64_t{1} << M) - 1)));
}

// NaN keeps its sign and top payload bits and becomes quiet, so a NaN never turns into infinity.
// The same bits as round_to_format<5, 10> (tests/mixed checks against an independent rounding),
// a few integer operations instead of its loop: every f16/bf16 elementwise kernel stores this way.
inline uint16_t f32_to_f16(float x) {
    const uint32_t b = std::bit_cast<uint32_t>(x);
    const auto sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
    const uint32_t a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to infinity
    if (a >= 0x38800000u) {  // normal in f16: rebias the exponent (127 -> 15), round off 13 bits
        const uint32_t r = a - 0x38000000u;
        return static_cast<uint16_t>(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    // Subnormal or zero in f16: adding 0.5 (whose ulp is f16's quantum 2^-24) rounds |x| to a
    // multiple of 2^-24, ties to even, in the FPU; the low bits are then the f16 encoding.
    const float sum = std::bit_cast<float>(a) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(sum) - 0x3f000000u));
}

// bf16 is f32 with the low 16 bits rounded off (same exponent range, subnormals included), so
// rounding is adding 0x7fff plus the kept lsb: a carry into the exponent is the right result, up
// to infinity. The same bits as round_to_format<8, 7> (tests/kernels checks), without its loop.
inline uint16_t f32_to_bf16(float x) {
    const uint32_t b = std::bit_cast<uint32_t>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);
    return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

// From double directly (fill values): going through float first would round twice.
template <int E, int M>
inline uint16_t f64_to_format(double x) {
    const uint64_t b = std::bit_cast<uint64_t>(x);
    const bool neg = b >> 63;
    const uint64_t e = (b >> 52) & 0x7ff, m = b & 0xfffffffffffffull;
    if (e == 0x7ff) {
        const uint64_t inf = ((1u << E) - 1) << M;
        const uint64_t nan = m ? uint64_t{1} << (M - 1) | m >> (52 - M) : 0;
        return static_cast<uint16_t>(uint64_t{neg} << (E + M) | inf | nan);
    }
    return round_to_format<E, M>(neg, e ? m | uint64_t{1} << 52 : m, (e ? int(e) : 1) - 1075);
}

template <int E, int M>
inline uint16_t i64_to_format(int64_t v) {
    const bool neg = v < 0;
    return round_to_format<E, M>(neg, neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v), 0);
}

// Exact: every f16 is an f32. A NaN keeps its payload and comes out quiet, as F16C's vcvtph2ps
// (the bulk path) and IEEE 754 conversion make it, so every path gives the same bits.
inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    const uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000 | m << 13 | (m ? 0x400000u : 0u));
    if (e == 0) {
        const float v = static_cast<float>(m) * 0x1p-24f;
        return sign ? -v : v;
    }
    return std::bit_cast<float>(sign | (e + 112) << 23 | m << 13);
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

// Runs of n elements (kernels_convert.cpp), bit for bit the scalar conversions above; F16C for
// f16 when the CPU has it.
void f16_run_to_f32(const uint16_t *src, float *dst, int64_t n);
void f32_run_to_f16(const float *src, uint16_t *dst, int64_t n);
void bf16_run_to_f32(const uint16_t *src, float *dst, int64_t n);
void f32_run_to_bf16(const float *src, uint16_t *dst, int64_t n);
// A run of n f16 or bf16 elements `step` bytes apart to dense f32 (and back); false, doing
// nothing, unless dtype is f16 or bf16 and the run is dense (step 2) and aligned, for the
// caller's element loop to take over.
bool load_f32_run(int32_t dtype, const char *src, int64_t step, float *dst, int64_t n);
bool store_f32_run(int32_t dtype, const float *src, char *dst, int64_t step, int64_t n);
// Rounds dense f32 `src` (out's shape, row-major) once into float tensor out, through out's
// strides (kernels_own.cpp).
void store_rounded(const tf_tensor_desc &out, const float *src);

// Float to integer like C: truncates toward zero. Where C is undefined this saturates:
// NaN gives 0, beyond the range gives the nearest limit (infinities included).
template <class I>
inline I saturate_cast(double x) {
    if (std::isnan(x)) return 0;
    const double t = std::trunc(x);
    constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());  // -2^(bits-1), exact
    if (t <= lo) return std::numeric_limits<I>::min();
    if (t >= -lo) return std::numeric_limits<I>::max();
    return static_cast<I>(t);
}

// ---- Element access ---------------------------------------------------------------------------

// Per storage type: compute is the type kernels do arithmetic in (f16/bf16 in float: float's 24
// bits are more than 2*11+2, so rounding a float +,-,*,/ of two f16 or bf16 to the narrow type
// gives the correctly rounded result). wide is what cast goes through: double holds every float
// value exactly, int64_t every integer. Loads and stores use memcpy: offsets are any byte count.
template <class T>
struct Traits;

// Types stored as themselves (float and the integers): load and store copy the bytes.
template <class T, class W>
struct PlainTraits {
    using Compute = T;
    using Wide = W;
    static T load(const char *p) {
        T v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    static void store(char *p, T v) { std::memcpy(p, &v, sizeof v); }
};

template <>
struct Traits<float> : PlainTraits<float, double> {
    static void store_wide(char *p, double v) { store(p, static_cast<float>(v)); }
    static void store_wide(char *p, int64_t v) { store(p, static_cast<float>(v)); }  // one rounding
};

// The 16-bit floats: their bits in memory, float to compute in; E exponent and M mantissa bits.
template <int E, int M, float (*ToF32)(uint16_t), uint16_t (*FromF32)(float)>
struct Float16Traits {
    using Compute = float;
    using Wide = double;
    using Bits = PlainTraits<uint16_t, int64_t>;
    static float load(const char *p) { return ToF32(Bits::load(p)); }
    static void store(char *p, float v) { Bits::store(p, FromF32(v)); }
    static void store_wide(char *p, double v) { Bits::store(p, f64_to_format<E, M>(v)); }
    static void store_wide(char *p, int64_t v) { Bits::store(p, i64_to_format<E, M>(v)); }
};
template <>
struct Traits<Half> : Float16Traits<5, 10, f16_to_f32, f32_to_f16> {};
template <>
struct Traits<BFloat16> : Float16Traits<8, 7, bf16_to_f32, f32_to_bf16> {};

template <class I>
struct IntTraits : PlainTraits<I, int64_t> {
    using PlainTraits<I, int64_t>::store;
    static void store_wide(char *p, double v) { store(p, saturate_cast<I>(v)); }
    // Integer narrowing wraps (two's complement, as C++20 defines it), like numpy and torch.
    static void store_wide(char *p, int64_t v) { store(p, static_cast<I>(v)); }
};
template <>
struct Traits<int32_t> : IntTraits<int32_t> {};
template <>
struct Traits<int64_t> : IntTraits<int64_t> {};

template <>
struct Traits<Boolean> {
    using Compute = uint8_t;
    using Wide = int64_t;
    // Any non-zero byte reads as true, so a sloppy producer cannot leak values other than 0/1.
    static uint8_t load(const char *p) { return *reinterpret_cast<const unsigned char *>(p) != 0; }
    static void store(char *p, uint8_t v) { *reinterpret_cast<unsigned char *>(p) = v != 0; }
    static void store_wide(char *p, double v) { store(p, v != 0); }  // NaN != 0: true, as in C
    static void store_wide(char *p, int64_t v) { store(p, v != 0); }
};

template <class T>
inline typename Traits<T>::Wide load_wide(const char *p) {
    return static_cast<typename Traits<T>::Wide>(Traits<T>::load(p));
}

// The dtype switch over cpu's storage types (tinyfin/plugin_kit/dtypes.hpp): Dtypes::with_float,
// with_index, with_numeric, with_any, with_bits.
using Dtypes = DtypeSwitch<Half, BFloat16, Boolean>;

// The status of a dtype switch (Dtypes above): OK when it ran the kernel (known), else
// UNSUPPORTED naming what and the dtype.
inline tf_status dtype_status(bool known, const char *what, int32_t dtype, tf_error *err) {
    if (known) return TF_STATUS_OK;
    return fail(err, TF_STATUS_UNSUPPORTED, "%s: dtype %s not supported", what, dtype_name(dtype));
}

// ---- Strided walks ----------------------------------------------------------------------------

// The address of element [0, ...] of d, by integer arithmetic: an empty tensor may carry a NULL
// data pointer or any offset (it is never dereferenced), where the pointer addition would be
// undefined behaviour.
inline char *base_of(const tf_tensor_desc &d) {
    return reinterpret_cast<char *>(reinterpret_cast<uintptr_t>(d.data) + d.offset);
}

// A tensor as a walk sees it: the address of element [0,...,0] and per-axis strides in bytes.
struct View {
    char *base;
    int64_t strides[TF_MAX_RANK];
};

// A size-1 axis gets stride 0: its element stride can be any value (validation bounds only the
// strides of longer axes), and scaling a huge one to bytes would overflow. A tensor with no
// elements may carry any strides and offset at all (validation skips them; a view of a
// zero-length axis can point before its buffer) and is never walked, so its base address and
// byte strides wrap as integers instead of overflowing as pointers.
inline View view_of(const tf_tensor_desc &d) {
    View v{d.data ? base_of(d) : nullptr, {}};
    const auto size = static_cast<uint64_t>(dtype_size(d.dtype));
    for (int i = 0; i < d.rank; ++i)
        v.strides[i] = d.shape[i] > 1 ? static_cast<int64_t>(static_cast<uint64_t>(d.strides[i]) * size) : 0;
    return v;
}

// Visits every element of shape (rank axes) in row-major order, one innermost row at a time:
// row(ptrs, n, steps) gets each operand's address of the row's first element, the row length
// and each operand's byte step along the row. Axes that are contiguous in every operand are
// merged first, so a contiguous tensor is one long row and the row loop is where time goes.
// Does nothing when shape has no elements; rank 0 is one row of one element. When row returns
// bool, false stops the walk.
template <size_t N, class Row>
void walk(int rank, const int64_t *shape, const std::array<View, N> &views, Row &&row) {
    int64_t dims[TF_MAX_RANK];
    int64_t strides[N][TF_MAX_RANK];
    int r = 0;
    for (int axis = 0; axis < rank; ++axis) {
        if (shape[axis] == 0) return;
        if (shape[axis] == 1) continue;
        bool merge = r > 0;
        for (size_t k = 0; k < N && merge; ++k)  // unsigned: stride * size may pass INT64_MAX, not UINT64_MAX
            merge = static_cast<uint64_t>(strides[k][r - 1]) ==
                    static_cast<uint64_t>(views[k].strides[axis]) * static_cast<uint64_t>(shape[axis]);
        if (merge) {
            dims[r - 1] *= shape[axis];
            for (size_t k = 0; k < N; ++k) strides[k][r - 1] = views[k].strides[axis];
            continue;
        }
        dims[r] = shape[axis];
        for (size_t k = 0; k < N; ++k) strides[k][r] = views[k].strides[axis];
        ++r;
    }
    if (r == 0) {
        dims[0] = 1;
        for (size_t k = 0; k < N; ++k) strides[k][0] = 0;
        r = 1;
    }

    const int64_t n = dims[r - 1];
    int64_t steps[N];
    for (size_t k = 0; k < N; ++k) steps[k] = strides[k][r - 1];
    // Offsets, not pointers, and integer address arithmetic: stepping back at the end of an
    // axis or offsetting a NULL base of an empty operand never does undefined pointer arithmetic.
    int64_t idx[TF_MAX_RANK] = {};
    int64_t off[N] = {};
    std::array<char *, N> ptrs;
    for (;;) {
        for (size_t k = 0; k < N; ++k)
            ptrs[k] =
                reinterpret_cast<char *>(reinterpret_cast<uintptr_t>(views[k].base) + static_cast<uintptr_t>(off[k]));
        if constexpr (std::is_same_v<decltype(row(ptrs.data(), n, steps)), bool>) {
            if (!row(ptrs.data(), n, steps)) return;
        } else {
            row(ptrs.data(), n, steps);
        }
        int axis = r - 2;
        for (; axis >= 0; --axis) {
            if (++idx[axis] < dims[axis]) {
                for (size_t k = 0; k < N; ++k) off[k] += strides[k][axis];
                break;
            }
            // Back to index 0: (dims - 1) * stride is inside the validated extent, dims * stride may not be.
            for (size_t k = 0; k < N; ++k) off[k] -= strides[k][axis] * (dims[axis] - 1);
            idx[axis] = 0;
        }
        if (axis < 0) return;
    }
}

// ---- Kernel tables (one per kernel file) ------------------------------------------------------

// The elementwise-kind files declare their kernels as rows (tinyfin/plugin_kit/kernel_rows.hpp)
// beside them (the kernels are templates private to each file); plugin.cpp's table lists these
// and the OWN ops' kernels (kernels_nn.hpp). Elementwise (kernels_elementwise.cpp): the binary
// and unary ops and clamp; compare: eq, ne, lt, le, gt, ge, where; reduce: sum, mean, var, max, min,
// argmax, argmin; matmul; copy: contiguous, cast, fill. The OWN ops' families are in kernels_nn.hpp.
std::span<const HostRow> elementwise_kernels();
std::span<const HostRow> compare_kernels();
std::span<const HostRow> reduce_kernels();
std::span<const HostRow> matmul_kernels();
std::span<const HostRow> copy_kernels();

// kernels_erf.cpp: gelu, erf, exp, tanh, sigmoid and silu when in and out are dense f32, or dense
// f16/bf16 of one dtype (computed in f32, rounded once), and tanh, sigmoid and silu on f32 rows dense
// along the last axis; false (nothing done) otherwise.
bool run_vector_erf(uint32_t op, const tf_tensor_desc &in, const tf_tensor_desc &out);
// gelu_avx2.cpp (x86-64 only): o[i] = gelu(x[i]) for i < n, vec::gelu's arithmetic in AVX2 + FMA
// intrinsics; only when isa_level() is AVX2.
void gelu_row_avx2(float *o, const float *x, int64_t n);
// kernels_erf.cpp: gelu_backward when dy, x and out are dense and all f32, f16 or bf16 (as
// run_vector_erf); false (nothing done) otherwise.
bool run_vector_gelu_backward(const tf_tensor_desc &dy, const tf_tensor_desc &x, const tf_tensor_desc &out);
// kernels_matmul.cpp: [..., M, K] x [..., K, N] -> [..., M, N] in f32, f16 or bf16.
tf_status run_matmul(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, tf_error *err);
// kernels_matmul.cpp: matmul_bias's bias added to a stored product y [..., M, N]: y = y + bias[j],
// each sum rounded once to y's dtype (add's operation; the blas plugin's sgemm rows use it too).
void add_bias_rows(const tf_tensor_desc &y, const tf_tensor_desc &bias);
// kernels_own.cpp: f32, row-major without gaps (size-1 axes may have any stride), at a
// float-aligned address.
bool dense_f32(const tf_tensor_desc &d);
// Runs an elementwise kernel, run(descs) with descs[0] the output, over slices of the output's
// first axis on the thread pool when the output is big enough (operands of the same rank, size 1
// or the output's size on that axis). Every element is computed by the same code whichever
// slice it falls in, so the result does not depend on the thread count.
// Elements per task of an elementwise kernel: below twice this it runs on the calling thread.
constexpr int64_t k_elementwise_grain = int64_t{1} << 16;

template <size_t N, class Run>
void parallel_elementwise(const std::array<const tf_tensor_desc *, N> &descs, Run &&run) {
    const tf_tensor_desc &out = *descs[0];
    const int64_t rows = out.rank > 0 ? out.shape[0] : 1;
    const int64_t tasks = rows > 1 ? std::min(rows, split_count(numel(out), k_elementwise_grain)) : 1;
    if (tasks <= 1) {
        run(descs);
        return;
    }
    parallel_for(tasks, [&](int64_t t) {
        const int64_t lo = rows * t / tasks, hi = rows * (t + 1) / tasks;
        std::array<tf_tensor_desc, N> part;
        std::array<const tf_tensor_desc *, N> ptrs;
        for (size_t i = 0; i < N; ++i) {
            part[i] = *descs[i];
            if (part[i].rank > 0 && part[i].shape[0] == rows) {
                part[i].offset += static_cast<uint64_t>(lo * part[i].strides[0]) * dtype_size(part[i].dtype);
                part[i].shape[0] = hi - lo;
            }
            ptrs[i] = &part[i];
        }
        run(ptrs);
    });
}

}  // namespace tf_cpu
