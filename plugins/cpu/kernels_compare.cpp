// Comparison and selection reference kernels: eq, ne, lt, le, gt, ge (two inputs of one dtype,
// bool output) and where (bool condition choosing between a and b). Inputs arrive broadcast to
// the output's shape (stride 0 on broadcast axes).
//
// Comparisons are exact in the inputs' own type: f16 and bf16 widen to float exactly, i64 is
// never rounded through double. NaN compares unequal to everything (ne is true, the others false)
// and -0 == +0, as in IEEE 754. bool inputs compare as 0 < 1.
#include "kernels.hpp"

#include <cstring>
#include <functional>

namespace tf_cpu {
namespace {

template <class T, class Cmp>
void compare_rows(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, Cmp cmp) {
    using Tr = Traits<T>;
    walk<3>(out.rank, out.shape, {view_of(out), view_of(a), view_of(b)},
            [&](char *const *p, int64_t n, const int64_t *step) {
                constexpr int64_t size = sizeof(T);
                auto *out = reinterpret_cast<unsigned char *>(p[0]);
                // Dense rows, and rows against one broadcast value (relu's backward compares
                // with 0): constant steps the compiler vectorises.
                if (step[0] == 1 && step[1] == size && step[2] == size) {
                    for (int64_t i = 0; i < n; ++i) out[i] = cmp(Tr::load(p[1] + i * size), Tr::load(p[2] + i * size));
                    return;
                }
                if (step[0] == 1 && step[1] == size && step[2] == 0) {
                    const auto bv = Tr::load(p[2]);
                    for (int64_t i = 0; i < n; ++i) out[i] = cmp(Tr::load(p[1] + i * size), bv);
                    return;
                }
                for (int64_t i = 0; i < n; ++i)
                    Traits<Boolean>::store(p[0] + i * step[0],
                                           cmp(Tr::load(p[1] + i * step[1]), Tr::load(p[2] + i * step[2])));
            });
}

template <class T, class Cmp>
void compare(const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out, Cmp cmp) {
    parallel_elementwise<3>({&out, &a, &b}, [&](const auto &d) { compare_rows<T>(*d[1], *d[2], *d[0], cmp); });
}

template <int64_t Size, bool ADense, bool BDense>
void select_dense_as(char *const *p, int64_t n) {
    using U = UnsignedOf<Size>;
    const auto *cond = reinterpret_cast<const unsigned char *>(p[1]);
    for (int64_t i = 0; i < n; ++i) {
        // memcpy: the elements are floats (or anything of this size), read as bits.
        U av, bv;
        std::memcpy(&av, p[2] + (ADense ? i * Size : 0), Size);
        std::memcpy(&bv, p[3] + (BDense ? i * Size : 0), Size);
        const U mask = static_cast<U>(0) - static_cast<U>(cond[i] != 0);
        const U v = (av & mask) | (bv & ~mask);
        std::memcpy(p[0] + i * Size, &v, Size);
    }
}

// out[i] = cond[i] ? a[i] : b[i] over a row of n elements, a and b dense or one broadcast value.
template <int64_t Size>
void select_dense(char *const *p, int64_t n, bool a_dense, bool b_dense) {
    if (a_dense && b_dense)
        select_dense_as<Size, true, true>(p, n);
    else if (a_dense)
        select_dense_as<Size, true, false>(p, n);
    else if (b_dense)
        select_dense_as<Size, false, true>(p, n);
    else
        select_dense_as<Size, false, false>(p, n);
}

// Copies the chosen element's bytes, so NaN payloads and signs survive exactly.
template <int64_t Size>
void select_rows(const tf_tensor_desc &cond, const tf_tensor_desc &a, const tf_tensor_desc &b,
                 const tf_tensor_desc &out) {
    walk<4>(out.rank, out.shape, {view_of(out), view_of(cond), view_of(a), view_of(b)},
            [](char *const *p, int64_t n, const int64_t *step) {
                // Dense rows with either value side dense or broadcast (relu's backward picks
                // between the gradient and 0): the elements as integers of their size, selected
                // without branches so the row vectorises. Still the chosen element's bits.
                if (step[0] == Size && step[1] == 1 && (step[2] == Size || step[2] == 0) &&
                    (step[3] == Size || step[3] == 0)) {
                    select_dense<Size>(p, n, step[2] != 0, step[3] != 0);
                    return;
                }
                for (int64_t i = 0; i < n; ++i) {
                    const char *from =
                        Traits<Boolean>::load(p[1] + i * step[1]) ? p[2] + i * step[2] : p[3] + i * step[3];
                    std::memcpy(p[0] + i * step[0], from, Size);
                }
            });
}

template <int64_t Size>
void select(const tf_tensor_desc &cond, const tf_tensor_desc &a, const tf_tensor_desc &b, const tf_tensor_desc &out) {
    parallel_elementwise<4>({&out, &cond, &a, &b},
                            [](const auto &d) { select_rows<Size>(*d[1], *d[2], *d[3], *d[0]); });
}

// bool elements go through load/store, so a non-canonical byte (2, 0xff) comes out as 1.
void select_bool(const tf_tensor_desc &cond, const tf_tensor_desc &a, const tf_tensor_desc &b,
                 const tf_tensor_desc &out) {
    using Tr = Traits<Boolean>;
    walk<4>(out.rank, out.shape, {view_of(out), view_of(cond), view_of(a), view_of(b)},
            [](char *const *p, int64_t n, const int64_t *step) {
                for (int64_t i = 0; i < n; ++i)
                    Tr::store(p[0] + i * step[0],
                              Tr::load(Tr::load(p[1] + i * step[1]) ? p[2] + i * step[2] : p[3] + i * step[3]));
            });
}

// ---- The kernels of the rows ----------------------------------------------------------------------

// A comparison over any plain dtype (the inputs', which share one): bool out.
template <class Cmp>
tf_status compare_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &a = op.inputs[0], &b = op.inputs[1], &out = op.outputs[0];
    const bool known = Dtypes::with_any(a.dtype, [&](auto tag) { compare<decltype(tag)>(a, b, out, Cmp{}); });
    return dtype_status(known, op_name(op.op), a.dtype, err);
}

tf_status where_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &cond = op.inputs[0], &a = op.inputs[1], &b = op.inputs[2], &out = op.outputs[0];
    if (out.dtype == TF_DTYPE_BOOL) {
        select_bool(cond, a, b, out);
        return TF_STATUS_OK;
    }
    switch (dtype_size(out.dtype)) {
    case 2: select<2>(cond, a, b, out); return TF_STATUS_OK;
    case 4: select<4>(cond, a, b, out); return TF_STATUS_OK;
    case 8: select<8>(cond, a, b, out); return TF_STATUS_OK;
    default: return fail(err, TF_STATUS_UNSUPPORTED, "where: dtype %s not supported", dtype_name(out.dtype));
    }
}

// ---- Rows -------------------------------------------------------------------------------------------

constexpr HostRow k_rows[] = {
    {TF_OP_EQ, k_any_dtype, compare_kernel<std::equal_to<>>},
    {TF_OP_NE, k_any_dtype, compare_kernel<std::not_equal_to<>>},
    {TF_OP_LT, k_any_dtype, compare_kernel<std::less<>>},
    {TF_OP_LE, k_any_dtype, compare_kernel<std::less_equal<>>},
    {TF_OP_GT, k_any_dtype, compare_kernel<std::greater<>>},
    {TF_OP_GE, k_any_dtype, compare_kernel<std::greater_equal<>>},
    {TF_OP_WHERE, k_any_dtype, where_kernel},
};

}  // namespace

std::span<const HostRow> compare_kernels() { return k_rows; }

}  // namespace tf_cpu
