// Elementwise reference kernels: add, sub, mul, div, neg, exp, relu over any strides.
// Inputs arrive broadcast to the output's shape (stride 0 on broadcast axes), so every kernel is
// one walk over the output's shape.
#include "kernels.h"

namespace tf_cpu {
namespace {

// Signed overflow is undefined in C++; integer add/sub/mul/neg wrap like two's complement hardware.
template <class C>
C wrap(std::make_unsigned_t<C> v) {
    return static_cast<C>(v);
}

struct add_fn {
    template <class C> C operator()(C a, C b) const {
        if constexpr (std::is_integral_v<C>) return wrap<C>(std::make_unsigned_t<C>(a) + std::make_unsigned_t<C>(b));
        else return a + b;
    }
};
struct sub_fn {
    template <class C> C operator()(C a, C b) const {
        if constexpr (std::is_integral_v<C>) return wrap<C>(std::make_unsigned_t<C>(a) - std::make_unsigned_t<C>(b));
        else return a - b;
    }
};
struct mul_fn {
    template <class C> C operator()(C a, C b) const {
        if constexpr (std::is_integral_v<C>) return wrap<C>(std::make_unsigned_t<C>(a) * std::make_unsigned_t<C>(b));
        else return a * b;
    }
};
// Integer operands were checked by check_int_div before any element is computed.
struct div_fn {
    template <class C> C operator()(C a, C b) const { return a / b; }
};
struct neg_fn {
    template <class C> C operator()(C a) const {
        if constexpr (std::is_integral_v<C>) return wrap<C>(0 - std::make_unsigned_t<C>(a));
        else return -a;
    }
};
struct exp_fn {
    float operator()(float a) const { return std::exp(a); }
};
// `a < 0 ? 0 : a` rather than max(a, 0): NaN stays NaN and -0 stays -0.
struct relu_fn {
    template <class C> C operator()(C a) const { return a < 0 ? C(0) : a; }
};

template <class T, class Fn>
void binary(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, Fn fn) {
    using tr = traits<T>;
    constexpr int64_t size = sizeof(T);
    walk<3>(out.rank, out.shape, {view_of(out), view_of(a), view_of(b)},
            [&](char *const *p, int64_t n, const int64_t *step) {
                if (step[0] == size && step[1] == size && step[2] == size) {
                    // Constant steps: the compiler vectorises this row for f32 and the ints.
                    for (int64_t i = 0; i < n; ++i)
                        tr::store(p[0] + i * size, fn(tr::load(p[1] + i * size), tr::load(p[2] + i * size)));
                    return;
                }
                for (int64_t i = 0; i < n; ++i)
                    tr::store(p[0] + i * step[0], fn(tr::load(p[1] + i * step[1]), tr::load(p[2] + i * step[2])));
            });
}

template <class T, class Fn>
void unary(const tf_tensor_desc &in, const tf_tensor_desc &out, Fn fn) {
    using tr = traits<T>;
    constexpr int64_t size = sizeof(T);
    walk<2>(out.rank, out.shape, {view_of(out), view_of(in)},
            [&](char *const *p, int64_t n, const int64_t *step) {
                if (step[0] == size && step[1] == size) {
                    for (int64_t i = 0; i < n; ++i) tr::store(p[0] + i * size, fn(tr::load(p[1] + i * size)));
                    return;
                }
                for (int64_t i = 0; i < n; ++i) tr::store(p[0] + i * step[0], fn(tr::load(p[1] + i * step[1])));
            });
}

// Integer division by zero and MIN / -1 trap (SIGFPE) on x86. Scanning every pair first keeps
// the output untouched when the call fails.
template <class I>
tf_status check_int_div(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out,
                        tf_error *err) {
    using tr = traits<I>;
    tf_status status = TF_STATUS_OK;
    I bad_a = 0, bad_b = 0;
    walk<2>(out.rank, out.shape, {view_of(a), view_of(b)},
            [&](char *const *p, int64_t n, const int64_t *step) {
                for (int64_t i = 0; i < n; ++i) {
                    const I x = tr::load(p[0] + i * step[0]), y = tr::load(p[1] + i * step[1]);
                    if (y == 0 || (y == -1 && x == std::numeric_limits<I>::min())) {
                        bad_a = x;
                        bad_b = y;
                        status = TF_STATUS_INVALID_ARGUMENT;
                        return false;
                    }
                }
                return true;
            });
    if (status == TF_STATUS_OK) return status;
    const auto x = static_cast<long long>(bad_a), y = static_cast<long long>(bad_b);
    if (y == 0)
        return fail(err, status, "div: integer division by zero (%lld / 0, %s)", x, dtype_name(out.dtype));
    return fail(err, status, "div: integer overflow (%lld / %lld does not fit %s)", x, y, dtype_name(out.dtype));
}

}  // namespace

tf_status run_binary(uint32_t op, const tf_tensor_desc &a, const tf_tensor_desc &b,
                     const tf_tensor_desc &out, tf_error *err) {
    tf_status status = TF_STATUS_OK;
    const bool known = with_numeric_dtype(out.dtype, [&](auto tag) {
        using T = decltype(tag);
        switch (op) {
        case TF_OP_ADD: binary<T>(a, b, out, add_fn{}); break;
        case TF_OP_SUB: binary<T>(a, b, out, sub_fn{}); break;
        case TF_OP_MUL: binary<T>(a, b, out, mul_fn{}); break;
        case TF_OP_DIV:
            if constexpr (std::is_integral_v<T>) {
                status = check_int_div<T>(a, b, out, err);
                if (status != TF_STATUS_OK) return;
            }
            binary<T>(a, b, out, div_fn{});
            break;
        default:
            status = fail(err, TF_STATUS_UNSUPPORTED, "%s: not a binary op", op_name(op));
        }
    });
    if (!known) return fail(err, TF_STATUS_UNSUPPORTED, "%s: dtype %s not supported", op_name(op), dtype_name(out.dtype));
    return status;
}

tf_status run_unary(uint32_t op, const tf_tensor_desc &in, const tf_tensor_desc &out, tf_error *err) {
    tf_status status = TF_STATUS_OK;
    const bool known = with_numeric_dtype(out.dtype, [&](auto tag) {
        using T = decltype(tag);
        switch (op) {
        case TF_OP_NEG: unary<T>(in, out, neg_fn{}); break;
        case TF_OP_RELU: unary<T>(in, out, relu_fn{}); break;
        case TF_OP_EXP:
            if constexpr (std::is_same_v<typename traits<T>::compute, float>)
                unary<T>(in, out, exp_fn{});
            else
                status = fail(err, TF_STATUS_UNSUPPORTED, "exp: dtype %s not supported", dtype_name(out.dtype));
            break;
        default:
            status = fail(err, TF_STATUS_UNSUPPORTED, "%s: not a unary op", op_name(op));
        }
    });
    if (!known) return fail(err, TF_STATUS_UNSUPPORTED, "%s: dtype %s not supported", op_name(op), dtype_name(out.dtype));
    return status;
}

}  // namespace tf_cpu
