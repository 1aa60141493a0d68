// Elementwise reference kernels over any strides: the binary ops (add, sub, mul, div, pow,
// maximum, minimum, relu_backward, gelu_backward), the unary ops and clamp. Inputs arrive broadcast to the
// output's shape (stride 0 on broadcast axes), so every kernel is one walk over the output's
// shape.
//
// Numeric rules:
//  - Integer add, sub, mul, neg, abs, square and pow wrap (two's complement), like torch.
//  - Integer div by zero, MIN / -1 and pow with a negative exponent are errors
//    (INVALID_ARGUMENT), found before any output element is written.
//  - maximum / minimum: a NaN operand gives NaN; -0 < +0 (IEEE 754-2019 maximum, minimum).
//  - relu_backward(dy, x): x <= 0 ? 0 : dy, so a NaN x passes dy (torch's threshold_backward).
//  - gelu_backward(dy, x): dy (Phi(x) + x phi(x)) in double, rounded once (dense f32: the
//    vector_erf.hpp form in f32 lanes, one exp per element, within 2^-21 of the terms' size).
//  - Float math other than + - * / (pow, log, sqrt, rsqrt, sin, cos, tanh, sigmoid, gelu,
//    gelu_tanh, silu, square, erf) is computed in double from the exact input and rounded once
//    to the output dtype (dense f32 erf: kernels_erf.cpp's polynomial form, within half an ulp
//    plus 3e-11 relative of that; dense f32 gelu: the same form in f32 lanes, within 8 ulp;
//    dense f32 tanh, sigmoid and silu: vector_tanh.hpp's f32 lanes, tanh within 2 ulp, sigmoid
//    2.5, silu 3; dense f16/bf16 of these: the f32 lanes' result rounded once).
//    sigmoid, silu, gelu and gelu_tanh use forms without cancellation or
//    overflow for large |x|; at -inf silu, gelu and gelu_tanh give their limit -0 where the
//    formulas give -inf * 0 = NaN.
//  - clamp is min(max(x, min), max): NaN stays NaN, an infinite (or NaN) bound is open, min > max
//    gives max. For integer dtypes the bounds are first rounded inward to integers (ceil(min),
//    floor(max), saturated to the dtype), so the result stays inside [min, max].
#include "kernels.hpp"
#include "vector_math.hpp"

#include <numbers>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tf_cpu {
namespace {

// Signed overflow is undefined in C++; integer add/sub/mul/neg wrap like two's complement hardware.
template <class C>
C wrap(std::make_unsigned_t<C> v) {
    return static_cast<C>(v);
}

struct AddFn {
    template <class C>
    C operator()(C a, C b) const {
        if constexpr (std::is_integral_v<C>)
            return wrap<C>(std::make_unsigned_t<C>(a) + std::make_unsigned_t<C>(b));
        else
            return a + b;
    }
};
struct SubFn {
    template <class C>
    C operator()(C a, C b) const {
        if constexpr (std::is_integral_v<C>)
            return wrap<C>(std::make_unsigned_t<C>(a) - std::make_unsigned_t<C>(b));
        else
            return a - b;
    }
};
struct MulFn {
    template <class C>
    C operator()(C a, C b) const {
        if constexpr (std::is_integral_v<C>)
            return wrap<C>(std::make_unsigned_t<C>(a) * std::make_unsigned_t<C>(b));
        else
            return a * b;
    }
};
// Integer operands were checked by check_int_operands before any element is computed.
struct DivFn {
    template <class C>
    C operator()(C a, C b) const {
        return a / b;
    }
};
struct NegFn {
    template <class C>
    C operator()(C a) const {
        if constexpr (std::is_integral_v<C>)
            return wrap<C>(0 - std::make_unsigned_t<C>(a));
        else
            return -a;
    }
};
struct ExpFn {
    float operator()(float a) const { return std::exp(a); }
};
// `a < 0 ? 0 : a` rather than max(a, 0): NaN stays NaN and -0 stays -0.
struct ReluFn {
    template <class C>
    C operator()(C a) const {
        return a < 0 ? C(0) : a;
    }
};
// abs(MIN) wraps to MIN, as in torch.
struct AbsFn {
    template <class C>
    C operator()(C a) const {
        if constexpr (std::is_integral_v<C>) {
            const auto u = std::make_unsigned_t<C>(a);
            return wrap<C>(a < 0 ? 0 - u : u);
        } else {
            return std::fabs(a);
        }
    }
};
// Floats: the exact product in double (48 significant bits), rounded once by the store.
struct SquareFn {
    template <class C>
    auto operator()(C a) const {
        if constexpr (std::is_integral_v<C>)
            return MulFn{}(a, a);
        else
            return static_cast<double>(a) * static_cast<double>(a);
    }
};
struct MaximumFn {
    template <class C>
    C operator()(C a, C b) const {
        return maximum_of(a, b);
    }
};
struct MinimumFn {
    template <class C>
    C operator()(C a, C b) const {
        return minimum_of(a, b);
    }
};
// Integer exponents were checked non-negative by check_int_operands. 0^0 is 1.
struct PowFn {
    template <class C>
    auto operator()(C a, C b) const {
        if constexpr (std::is_integral_v<C>) {
            using U = std::make_unsigned_t<C>;
            U result = 1, base = U(a);
            for (U e = U(b); e != 0; e >>= 1) {
                if (e & 1) result *= base;
                base *= base;
            }
            return wrap<C>(result);
        } else {
            return std::pow(static_cast<double>(a), static_cast<double>(b));
        }
    }
};

// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: neither overflows nor cancels.
double sigmoid(double x) {
    if (x >= 0) return 1 / (1 + std::exp(-x));
    const double e = std::exp(x);
    return e / (1 + e);
}

double silu(double x) { return x == -HUGE_VAL ? -0.0 : x * sigmoid(x); }

// x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2: 1 + erf(...) would cancel to 0 for x below -8.
double gelu(double x) {
    if (x == -HUGE_VAL) return -0.0;
    return 0.5 * x * std::erfc(-x / std::numbers::sqrt2);
}

// gelu's gradient dy (Phi(x) + x phi(x)), the formula as written (NaN at x = +-inf, as the op's
// composition gives); the dense f32 case is vector_erf.hpp's.
struct GeluBackwardFn {
    double operator()(float dy, float x) const {
        constexpr double inv_sqrt_2pi = 0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2;
        const double xd = x;
        const double cdf = 0.5 * std::erfc(-xd / std::numbers::sqrt2);
        const double pdf = inv_sqrt_2pi * std::exp(-0.5 * xd * xd);
        return static_cast<double>(dy) * (cdf + xd * pdf);
    }
};

// 0.5 x (1 + tanh(u)) written as x sigmoid(2u), the same value without 1 + tanh's cancellation.
double gelu_tanh(double x) {
    if (x == -HUGE_VAL) return -0.0;
    constexpr double k = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2 / pi)
    const double u = k * (x + 0.044715 * x * x * x);
    return x * sigmoid(2 * u);
}

// Stores a kernel's result: double results (float math done wide) are rounded once to T.
template <class T, class V>
void put(char *p, V v) {
    if constexpr (std::is_same_v<V, double>)
        Traits<T>::store_wide(p, v);
    else
        Traits<T>::store(p, v);
}

// f16 and bf16 rows in chunks: operands converted to f32 by the vectorised runs of
// kernels_convert.cpp, fn applied in f32 as the element loops do, results rounded back by the
// same runs (or put<T> when fn computes in double). The same bits as the element loops.
template <class T>
constexpr bool is_half = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
constexpr int32_t half_dtype = std::is_same_v<T, Half> ? TF_DTYPE_F16 : TF_DTYPE_BF16;
constexpr int64_t k_half_chunk = 256;

inline bool even_addresses(std::initializer_list<const char *> ps) {
    uintptr_t bits = 0;
    for (const char *q : ps) bits |= reinterpret_cast<uintptr_t>(q);
    return (bits & 1) == 0;
}

// One operand of a chunk: a dense run (step 2) converted, or a broadcast value (step 0) repeated.
template <class T>
void load_chunk(const char *p, int64_t step, int64_t i0, int64_t m, float *dst) {
    if (step == 0) {
        std::fill(dst, dst + m, Traits<T>::load(p));
        return;
    }
    load_f32_run(half_dtype<T>, p + i0 * 2, 2, dst, m);
}

template <class T, class R>
void store_chunk(char *o, int64_t i0, int64_t m, const R *r) {
    if constexpr (std::is_same_v<R, float>) {
        store_f32_run(half_dtype<T>, r, o + i0 * 2, 2, m);
    } else {
        for (int64_t i = 0; i < m; ++i) put<T>(o + (i0 + i) * 2, r[i]);
    }
}

// f32 rows of + - * / with unit steps, or one operand's step 0 (a scalar): compiled per
// instruction set (vector_math.hpp), since the baseline SSE2 loop is limited to 16-byte accesses
// where the operands sit in L1 and L2. The same IEEE operation per element on every path.
enum class Arith { add, sub, mul, div };

template <class Fn>
constexpr int arith_code() {
    if constexpr (std::is_same_v<Fn, AddFn>)
        return static_cast<int>(Arith::add);
    else if constexpr (std::is_same_v<Fn, SubFn>)
        return static_cast<int>(Arith::sub);
    else if constexpr (std::is_same_v<Fn, MulFn>)
        return static_cast<int>(Arith::mul);
    else if constexpr (std::is_same_v<Fn, DivFn>)
        return static_cast<int>(Arith::div);
    else
        return -1;
}

template <class Fn>
[[gnu::always_inline]] inline void f32_row(float *o, const float *a, const float *b, int64_t n, int64_t sa, int64_t sb,
                                           Fn fn) {
    if (sa == 1 && sb == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = fn(a[i], b[i]);
    } else if (sa == 1) {
        const float y = b[0];
        for (int64_t i = 0; i < n; ++i) o[i] = fn(a[i], y);
    } else {
        const float x = a[0];
        for (int64_t i = 0; i < n; ++i) o[i] = fn(x, b[i]);
    }
}

[[gnu::always_inline]] inline void f32_arith_row_body(int code, float *o, const float *a, const float *b, int64_t n,
                                                      int64_t sa, int64_t sb) {
    switch (static_cast<Arith>(code)) {
    case Arith::add: f32_row(o, a, b, n, sa, sb, AddFn{}); break;
    case Arith::sub: f32_row(o, a, b, n, sa, sb, SubFn{}); break;
    case Arith::mul: f32_row(o, a, b, n, sa, sb, MulFn{}); break;
    case Arith::div: f32_row(o, a, b, n, sa, sb, DivFn{}); break;
    }
}
TF_CPU_ISA_DISPATCH(f32_arith_row,
                    (int code, float *o, const float *a, const float *b, int64_t n, int64_t sa, int64_t sb),
                    (code, o, a, b, n, sa, sb))

template <class T, class Fn>
void binary_rows(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, Fn fn) {
    using Tr = Traits<T>;
    constexpr int64_t size = sizeof(T);
    walk<3>(out.rank, out.shape, {view_of(out), view_of(a), view_of(b)},
            [&](char *const *p, int64_t n, const int64_t *step) {
                if constexpr (std::is_same_v<T, float> && arith_code<Fn>() >= 0) {
                    // Float-aligned rows only (descriptors may carry any byte offset).
                    const bool aligned = (reinterpret_cast<uintptr_t>(p[0]) | reinterpret_cast<uintptr_t>(p[1]) |
                                          reinterpret_cast<uintptr_t>(p[2])) %
                                             alignof(float) ==
                                         0;
                    if (aligned && step[0] == size && (step[1] == size || step[1] == 0) &&
                        (step[2] == size || step[2] == 0) && (step[1] | step[2]) != 0) {
                        f32_arith_row(arith_code<Fn>(), reinterpret_cast<float *>(p[0]),
                                      reinterpret_cast<const float *>(p[1]), reinterpret_cast<const float *>(p[2]), n,
                                      step[1] / size, step[2] / size);
                        return;
                    }
                }
                if constexpr (is_half<T>) {
                    if (step[0] == size && (step[1] == size || step[1] == 0) && (step[2] == size || step[2] == 0) &&
                        even_addresses({p[0], p[1], p[2]})) {
                        using R = decltype(fn(0.0f, 0.0f));
                        float x[k_half_chunk], y[k_half_chunk];
                        R r[k_half_chunk];
                        for (int64_t i0 = 0; i0 < n; i0 += k_half_chunk) {
                            const int64_t m = std::min(k_half_chunk, n - i0);
                            load_chunk<T>(p[1], step[1], i0, m, x);
                            load_chunk<T>(p[2], step[2], i0, m, y);
                            for (int64_t i = 0; i < m; ++i) r[i] = fn(x[i], y[i]);
                            store_chunk<T>(p[0], i0, m, r);
                        }
                        return;
                    }
                }
                if (step[0] == size && step[1] == size && step[2] == size) {
                    // Constant steps: the compiler vectorises this row for f32 and the ints.
                    for (int64_t i = 0; i < n; ++i)
                        put<T>(p[0] + i * size, fn(Tr::load(p[1] + i * size), Tr::load(p[2] + i * size)));
                    return;
                }
                // One operand broadcast along the row (a bias over a plane, a scalar): loaded
                // once, so the row vectorises too.
                if (step[0] == size && step[1] == size && step[2] == 0) {
                    const auto bv = Tr::load(p[2]);
                    for (int64_t i = 0; i < n; ++i) put<T>(p[0] + i * size, fn(Tr::load(p[1] + i * size), bv));
                    return;
                }
                if (step[0] == size && step[1] == 0 && step[2] == size) {
                    const auto av = Tr::load(p[1]);
                    for (int64_t i = 0; i < n; ++i) put<T>(p[0] + i * size, fn(av, Tr::load(p[2] + i * size)));
                    return;
                }
                for (int64_t i = 0; i < n; ++i)
                    put<T>(p[0] + i * step[0], fn(Tr::load(p[1] + i * step[1]), Tr::load(p[2] + i * step[2])));
            });
}

// Whether out is row-major without gaps and a and b have its strides (size-1 axes aside), so
// each of the three is one row. validate() made the shapes equal.
bool one_dense_row(const tf_tensor_desc &out, const tf_tensor_desc &a, const tf_tensor_desc &b) {
    int64_t expect = 1;
    for (int i = out.rank - 1; i >= 0; --i) {
        if (out.shape[i] == 1) continue;
        if (out.strides[i] != expect || a.strides[i] != expect || b.strides[i] != expect) return false;
        expect *= out.shape[i];
    }
    return true;
}

template <class T, class Fn>
void binary(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, Fn fn) {
    // f32 + - * / on dense operands of one layout, the usual small op: straight to the row
    // function binary_rows would reach after the task split and the walk's setup, which cost as
    // much as the 16 additions of a small add. The same function per element, so the same bits.
    if constexpr (std::is_same_v<T, float> && arith_code<Fn>() >= 0) {
        const int64_t n = numel(out);
        if (n > 0 && (n < 2 * k_elementwise_grain || split_count(n, k_elementwise_grain) == 1) &&
            one_dense_row(out, a, b)) {
            char *o = base_of(out);
            const char *x = base_of(a), *y = base_of(b);
            if ((reinterpret_cast<uintptr_t>(o) | reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) %
                    alignof(float) ==
                0) {
                f32_arith_row(arith_code<Fn>(), reinterpret_cast<float *>(o), reinterpret_cast<const float *>(x),
                              reinterpret_cast<const float *>(y), n, 1, 1);
                return;
            }
        }
    }
    parallel_elementwise<3>({&out, &a, &b}, [&](const auto &d) { binary_rows<T>(*d[1], *d[2], *d[0], fn); });
}

template <class T, class Fn>
void unary_rows(const tf_tensor_desc &in, const tf_tensor_desc &out, Fn fn) {
    using Tr = Traits<T>;
    constexpr int64_t size = sizeof(T);
    walk<2>(out.rank, out.shape, {view_of(out), view_of(in)}, [&](char *const *p, int64_t n, const int64_t *step) {
        if constexpr (is_half<T>) {
            if (step[0] == size && step[1] == size && even_addresses({p[0], p[1]})) {
                using R = decltype(fn(0.0f));
                float x[k_half_chunk];
                R r[k_half_chunk];
                for (int64_t i0 = 0; i0 < n; i0 += k_half_chunk) {
                    const int64_t m = std::min(k_half_chunk, n - i0);
                    load_chunk<T>(p[1], step[1], i0, m, x);
                    for (int64_t i = 0; i < m; ++i) r[i] = fn(x[i]);
                    store_chunk<T>(p[0], i0, m, r);
                }
                return;
            }
        }
        if (step[0] == size && step[1] == size) {
            for (int64_t i = 0; i < n; ++i) put<T>(p[0] + i * size, fn(Tr::load(p[1] + i * size)));
            return;
        }
        for (int64_t i = 0; i < n; ++i) put<T>(p[0] + i * step[0], fn(Tr::load(p[1] + i * step[1])));
    });
}

template <class T, class Fn>
void unary(const tf_tensor_desc &in, const tf_tensor_desc &out, Fn fn) {
    parallel_elementwise<2>({&out, &in}, [&](const auto &d) { unary_rows<T>(*d[1], *d[0], fn); });
}

// relu_backward: dx = x <= 0 ? 0 : dy, a select (no arithmetic), so NaN x passes dy and every
// path gives the same bits.
struct ReluBackwardFn {
    template <class C>
    C operator()(C dy, C x) const {
        return x <= C(0) ? C(0) : dy;
    }
};

// Dense f32 rows, the training step's case, compiled per instruction set like f32_arith_row.
[[gnu::always_inline]] inline void f32_relu_backward_row_body(float *o, const float *dy, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] <= 0.0f ? 0.0f : dy[i];
}
TF_CPU_ISA_DISPATCH(f32_relu_backward_row, (float *o, const float *dy, const float *x, int64_t n), (o, dy, x, n))

template <class T>
void relu_backward(const tf_tensor_desc &dy, const tf_tensor_desc &x, const tf_tensor_desc &out) {
    if constexpr (std::is_same_v<T, float>) {
        if (dense_f32(out) && dense_f32(dy) && dense_f32(x)) {
            parallel_elementwise<3>({&out, &dy, &x}, [](const auto &d) {
                const auto at = [](const tf_tensor_desc &t) { return reinterpret_cast<float *>(base_of(t)); };
                f32_relu_backward_row(at(*d[0]), at(*d[1]), at(*d[2]), numel(*d[0]));
            });
            return;
        }
    }
    binary<T>(dy, x, out, ReluBackwardFn{});
}

// The first pair (x, y) of a and b's elements, in walk order, for which bad(x, y) holds; false
// when there is none. The integer ops scan with it before they write, so the output stays
// untouched when the call fails.
template <class I, class Bad>
bool find_bad_pair(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, Bad bad, I &bad_a,
                   I &bad_b) {
    using Tr = Traits<I>;
    bool found = false;
    walk<2>(out.rank, out.shape, {view_of(a), view_of(b)}, [&](char *const *p, int64_t n, const int64_t *step) {
        for (int64_t i = 0; i < n; ++i) {
            const I x = Tr::load(p[0] + i * step[0]), y = Tr::load(p[1] + i * step[1]);
            if (bad(x, y)) {
                bad_a = x;
                bad_b = y;
                found = true;
                return false;
            }
        }
        return true;
    });
    return found;
}

// The integer operands of div and pow: division by zero and MIN / -1 trap (SIGFPE) on x86, and
// an integer has no negative powers (torch refuses them too). Scanned before anything is
// written, so the output stays untouched when the call fails. OK at once for floats.
template <class T>
tf_status check_int_operands(uint32_t op, const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out,
                             tf_error *err) {
    if constexpr (std::is_integral_v<T>) {
        T x = 0, y = 0;
        const char *dtype = dtype_name(out.dtype);
        if (op == TF_OP_DIV) {
            const auto traps = [](T p, T q) { return q == 0 || (q == -1 && p == std::numeric_limits<T>::min()); };
            if (!find_bad_pair<T>(a, b, out, traps, x, y)) return TF_STATUS_OK;
            if (y == 0)
                return fail(err, TF_STATUS_INVALID_ARGUMENT, "div: integer division by zero (%lld / 0, %s)",
                            static_cast<long long>(x), dtype);
            return fail(err, TF_STATUS_INVALID_ARGUMENT, "div: integer overflow (%lld / %lld does not fit %s)",
                        static_cast<long long>(x), static_cast<long long>(y), dtype);
        }
        if (!find_bad_pair<T>(
                a, b, out, [](T, T q) { return q < 0; }, x, y))
            return TF_STATUS_OK;
        return fail(err, TF_STATUS_INVALID_ARGUMENT,
                    "pow: negative exponent for an integer dtype (%lld ^ %lld, %s); cast to a float dtype first",
                    static_cast<long long>(x), static_cast<long long>(y), dtype);
    }
    return TF_STATUS_OK;
}

template <class T>
void clamp(const tf_tensor_desc &in, const tf_tensor_desc &out, double min, double max) {
    if constexpr (std::is_integral_v<T>) {
        const T lo = std::isnan(min) ? std::numeric_limits<T>::min() : saturate_cast<T>(std::ceil(min));
        const T hi = std::isnan(max) ? std::numeric_limits<T>::max() : saturate_cast<T>(std::floor(max));
        unary<T>(in, out, [lo, hi](T x) {
            const T v = x < lo ? lo : x;
            return v > hi ? hi : v;  // after the lower bound: min > max gives max, as for floats
        });
    } else {
        unary<T>(in, out, [min, max](float x) {
            double v = x;
            if (v < min) v = min;
            if (v > max) v = max;
            return v;
        });
    }
}

// The float functions computed in double from the exact input, rounded once.
struct LogFn {
    double operator()(double x) const { return std::log(x); }
};
struct SqrtFn {
    double operator()(double x) const { return std::sqrt(x); }
};
struct RsqrtFn {
    double operator()(double x) const { return 1 / std::sqrt(x); }
};
struct SinFn {
    double operator()(double x) const { return std::sin(x); }
};
struct CosFn {
    double operator()(double x) const { return std::cos(x); }
};
struct TanhFn {
    double operator()(double x) const { return std::tanh(x); }
};
struct ErfFn {
    double operator()(double x) const { return std::erf(x); }
};
struct SigmoidFn {
    double operator()(double x) const { return sigmoid(x); }
};
struct SiluFn {
    double operator()(double x) const { return silu(x); }
};
struct GeluFn {
    double operator()(double x) const { return gelu(x); }
};
struct GeluTanhFn {
    double operator()(double x) const { return gelu_tanh(x); }
};
struct AsinFn {
    double operator()(double x) const { return std::asin(x); }
};
struct AcosFn {
    double operator()(double x) const { return std::acos(x); }
};
struct AtanFn {
    double operator()(double x) const { return std::atan(x); }
};
struct AsinhFn {
    double operator()(double x) const { return std::asinh(x); }
};
struct AcoshFn {
    double operator()(double x) const { return std::acosh(x); }
};
struct AtanhFn {
    double operator()(double x) const { return std::atanh(x); }
};

// ---- The kernels of the rows ----------------------------------------------------------------------
// Each gets a descriptor that check_op and its row accepted: inputs broadcast to the output's shape,
// the dtypes of the row's set.

// A binary op over the numeric dtypes.
template <class Fn>
tf_status binary_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &a = op.inputs[0], &b = op.inputs[1], &out = op.outputs[0];
    const bool known = Dtypes::with_numeric(out.dtype, [&](auto tag) { binary<decltype(tag)>(a, b, out, Fn{}); });
    return dtype_status(known, op_name(op.op), out.dtype, err);
}

// Whether every element of b (broadcast to the output) is `value`: a scalar exponent.
template <class T>
bool scalar_equal(const tf_tensor_desc &b, double value) {
    for (int i = 0; i < b.rank; ++i)
        if (b.shape[i] != 1 && b.strides[i] != 0) return false;
    return numel(b) > 0 && static_cast<double>(Traits<T>::load(base_of(b))) == value;
}

// pow on floats. A scalar exponent of 2 (x ** 2 in exported models: variances, norms) is square:
// the exact square rounded once, which is pow's double result rounded once, without a libm call
// per element.
tf_status float_pow_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &a = op.inputs[0], &b = op.inputs[1], &out = op.outputs[0];
    const bool known = Dtypes::with_float(out.dtype, [&](auto tag) {
        using T = decltype(tag);
        if (scalar_equal<T>(b, 2.0))
            unary<T>(a, out, SquareFn{});
        else
            binary<T>(a, b, out, PowFn{});
    });
    return dtype_status(known, "pow", out.dtype, err);
}

// div and pow on integers: the operands scanned first (check_int_operands), then the op.
template <class Fn>
tf_status checked_int_binary_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &a = op.inputs[0], &b = op.inputs[1], &out = op.outputs[0];
    tf_status status = TF_STATUS_OK;
    const bool known = Dtypes::with_index(out.dtype, [&](auto tag) {
        using T = decltype(tag);
        if ((status = check_int_operands<T>(op.op, a, b, out, err)) == TF_STATUS_OK) binary<T>(a, b, out, Fn{});
    });
    return known ? status : dtype_status(known, op_name(op.op), out.dtype, err);
}

tf_status relu_backward_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &dy = op.inputs[0], &x = op.inputs[1], &out = op.outputs[0];
    const bool known = Dtypes::with_numeric(out.dtype, [&](auto tag) { relu_backward<decltype(tag)>(dy, x, out); });
    return dtype_status(known, "relu_backward", out.dtype, err);
}

tf_status gelu_backward_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &dy = op.inputs[0], &x = op.inputs[1], &out = op.outputs[0];
    if (run_vector_gelu_backward(dy, x, out)) return TF_STATUS_OK;
    const bool known =
        Dtypes::with_float(out.dtype, [&](auto tag) { binary<decltype(tag)>(dy, x, out, GeluBackwardFn{}); });
    return dtype_status(known, "gelu_backward", out.dtype, err);
}

// A unary op over the numeric dtypes.
template <class Fn>
tf_status unary_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    const bool known = Dtypes::with_numeric(out.dtype, [&](auto tag) { unary<decltype(tag)>(in, out, Fn{}); });
    return dtype_status(known, op_name(op.op), out.dtype, err);
}

// sqrt of dense f32 in f32 lanes. IEEE sqrt is correctly rounded in f32 and in double, and the
// double root rounded to f32 is the f32 root (53 >= 2 * 24 + 2 bits), NaN payloads and the
// default NaN of a negative operand included: the double path's bits. The instructions, not
// sqrtf: without -fno-math-errno a sqrtf loop keeps a call for errno and does not vectorize.
#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] void f32_sqrt_row_avx2(float *o, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
    for (; i < n; ++i) _mm_store_ss(o + i, _mm_sqrt_ss(_mm_load_ss(x + i)));
}
void f32_sqrt_row_sse(float *o, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(o + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
    for (; i < n; ++i) _mm_store_ss(o + i, _mm_sqrt_ss(_mm_load_ss(x + i)));
}
#endif

bool run_f32_sqrt(const tf_tensor_desc &in, const tf_tensor_desc &out) {
#if defined(__x86_64__)
    if (!dense_f32(in) || !dense_f32(out)) return false;
    const auto row = isa_level() >= 1 ? f32_sqrt_row_avx2 : f32_sqrt_row_sse;
    parallel_elementwise<2>({&out, &in}, [row](const auto &d) {
        row(reinterpret_cast<float *>(base_of(*d[0])), reinterpret_cast<const float *>(base_of(*d[1])), numel(*d[0]));
    });
    return true;
#else
    (void)in, (void)out;
    return false;
#endif
}

// A float function; exp, erf, gelu, gelu_tanh, tanh, sigmoid and silu take the vector form on dense operands
// (kernels_erf.cpp), sqrt its f32 lanes.
template <class Fn>
tf_status float_unary_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    if (run_vector_erf(op.op, in, out)) return TF_STATUS_OK;
    if constexpr (std::is_same_v<Fn, SqrtFn>)
        if (run_f32_sqrt(in, out)) return TF_STATUS_OK;
    const bool known = Dtypes::with_float(out.dtype, [&](auto tag) { unary<decltype(tag)>(in, out, Fn{}); });
    return dtype_status(known, op_name(op.op), out.dtype, err);
}

tf_status clamp_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    const auto &p = params_of<tf_params_clamp>(op);
    const bool known = Dtypes::with_numeric(out.dtype, [&](auto tag) { clamp<decltype(tag)>(in, out, p.min, p.max); });
    return dtype_status(known, "clamp", out.dtype, err);
}

// ---- Rows -------------------------------------------------------------------------------------------

constexpr HostRow k_rows[] = {
    {TF_OP_ADD, k_numeric_dtypes, binary_kernel<AddFn>},
    {TF_OP_SUB, k_numeric_dtypes, binary_kernel<SubFn>},
    {TF_OP_MUL, k_numeric_dtypes, binary_kernel<MulFn>},
    {TF_OP_DIV, k_float_dtypes, binary_kernel<DivFn>},
    {TF_OP_DIV, k_index_dtypes, checked_int_binary_kernel<DivFn>},
    {TF_OP_POW, k_float_dtypes, float_pow_kernel},
    {TF_OP_POW, k_index_dtypes, checked_int_binary_kernel<PowFn>},
    {TF_OP_MAXIMUM, k_numeric_dtypes, binary_kernel<MaximumFn>},
    {TF_OP_MINIMUM, k_numeric_dtypes, binary_kernel<MinimumFn>},
    {TF_OP_RELU_BACKWARD, k_numeric_dtypes, relu_backward_kernel},
    {TF_OP_GELU_BACKWARD, k_float_dtypes, gelu_backward_kernel},
    {TF_OP_NEG, k_numeric_dtypes, unary_kernel<NegFn>},
    {TF_OP_RELU, k_numeric_dtypes, unary_kernel<ReluFn>},
    {TF_OP_ABS, k_numeric_dtypes, unary_kernel<AbsFn>},
    {TF_OP_SQUARE, k_numeric_dtypes, unary_kernel<SquareFn>},
    {TF_OP_CLAMP, k_numeric_dtypes, clamp_kernel},
    {TF_OP_EXP, k_float_dtypes, float_unary_kernel<ExpFn>},
    {TF_OP_LOG, k_float_dtypes, float_unary_kernel<LogFn>},
    {TF_OP_SQRT, k_float_dtypes, float_unary_kernel<SqrtFn>},
    {TF_OP_RSQRT, k_float_dtypes, float_unary_kernel<RsqrtFn>},
    {TF_OP_SIN, k_float_dtypes, float_unary_kernel<SinFn>},
    {TF_OP_COS, k_float_dtypes, float_unary_kernel<CosFn>},
    {TF_OP_TANH, k_float_dtypes, float_unary_kernel<TanhFn>},
    {TF_OP_ERF, k_float_dtypes, float_unary_kernel<ErfFn>},
    {TF_OP_SIGMOID, k_float_dtypes, float_unary_kernel<SigmoidFn>},
    {TF_OP_SILU, k_float_dtypes, float_unary_kernel<SiluFn>},
    {TF_OP_GELU, k_float_dtypes, float_unary_kernel<GeluFn>},
    {TF_OP_GELU_TANH, k_float_dtypes, float_unary_kernel<GeluTanhFn>},
    {TF_OP_ASIN, k_float_dtypes, float_unary_kernel<AsinFn>},
    {TF_OP_ACOS, k_float_dtypes, float_unary_kernel<AcosFn>},
    {TF_OP_ATAN, k_float_dtypes, float_unary_kernel<AtanFn>},
    {TF_OP_ASINH, k_float_dtypes, float_unary_kernel<AsinhFn>},
    {TF_OP_ACOSH, k_float_dtypes, float_unary_kernel<AcoshFn>},
    {TF_OP_ATANH, k_float_dtypes, float_unary_kernel<AtanhFn>},
};

}  // namespace

std::span<const HostRow> elementwise_kernels() { return k_rows; }

}  // namespace tf_cpu
