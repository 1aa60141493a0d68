// Reduction reference kernels: sum, mean, max, min and var over the axes in axes_mask; argmax and
// argmin along one axis.
//
// Every output element visits its input elements in row-major order, so results are the same on
// every run and every machine whatever the layouts. Floats accumulate in double and are rounded
// once to the output dtype; integer sums wrap.
//  - f32 sum and mean over a dense input whose reduced axes are a leading and/or a trailing block
//    ([A, C, B] with A and B reduced: full sums, rows, the batch and spatial axes of NCHW) take a
//    vectorized path: each contiguous run of B elements is summed in chunks of k_chunk, each chunk
//    in the fixed double lanes of vector_math.hpp, and the chunk and A sums are added in order. The
//    association depends on the shape only, so results stay the same for every thread count and
//    instruction set; outputs (or the chunks of one long run) are split over the thread pool.
//  - f16 and bf16 sum and mean over dense operands of that shape take the same path on the input
//    staged as f32, each sum rounded once from double to the format.
//  - mean over no elements is 0/0 = NaN, as in torch.
//  - var is two-pass (the mean first, then the squared deviations from it) and divides by
//    max(n - correction, 0): a zero divisor gives inf, or NaN when the deviations are 0 too.
//  - max and min fold maximum_of / minimum_of: NaN propagates (the first NaN met) and -0 < +0.
//  - argmax and argmin give the first index of the extreme (ties: the lowest index); a NaN is the
//    extreme, so the first NaN wins.
#include "kernels.hpp"
#include "kernels_nn.hpp"
#include "vector_math.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <type_traits>
#include <vector>

namespace tf_cpu {
namespace {

// Floats accumulate in double, integers in uint64_t (wrapping, then truncated to the output
// type: the same bits as summing in the output type with wraparound).
template <class T>
using Accumulator = std::conditional_t<std::is_same_v<typename Traits<T>::Compute, float>, double, uint64_t>;

// Calls reduce(out_element, each) once per output element (reduced axes have size 1 in the output);
// each(fn) calls fn(input_element) for that output element's inputs in row-major order.
template <class Reduce>
void for_each_output(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask, Reduce &&reduce) {
    int64_t inner_shape[TF_MAX_RANK];
    for (int i = 0; i < in.rank; ++i) inner_shape[i] = (axes_mask >> i & 1) ? in.shape[i] : 1;
    const View in_view = view_of(in);
    walk<2>(out.rank, out.shape, {view_of(out), in_view}, [&](char *const *p, int64_t n, const int64_t *step) {
        for (int64_t i = 0; i < n; ++i) {
            View first = in_view;
            first.base = p[1] + i * step[1];
            auto each = [&](auto &&fn) {
                walk<1>(in.rank, inner_shape, {first}, [&](char *const *q, int64_t m, const int64_t *qstep) {
                    for (int64_t j = 0; j < m; ++j) fn(q[0] + j * qstep[0]);
                });
            };
            reduce(p[0] + i * step[0], each);
        }
    });
}

// The same visits for sum and mean, faster: every output element reads its inputs at the same
// offsets from its own first input, so k_lanes output elements walk those offsets in lockstep,
// each still adding its own inputs in row-major order (the bits do not change). The lanes are
// independent add chains (one chain waits a full add latency per element), and groups of lanes
// spread over the thread pool: a bias gradient, 32 outputs of 50,000 inputs each, is otherwise
// one serial chain on one thread.
constexpr int64_t k_lanes = 8;

// Up to this many output elements are listed up front; more go through for_each_output.
constexpr int64_t k_lockstep_outputs = int64_t{1} << 16;

// acc[g] = the sum, in row-major order, of output element g's inputs; finish(dst, acc) stores it.
template <class T, class Finish>
bool sum_lockstep(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask, Finish finish) {
    using Tr = Traits<T>;
    using Acc = Accumulator<T>;
    const int64_t outputs = numel(out);
    if (outputs < 2 || outputs > k_lockstep_outputs) return false;
    int64_t inner_shape[TF_MAX_RANK];
    for (int i = 0; i < in.rank; ++i) inner_shape[i] = (axes_mask >> i & 1) ? in.shape[i] : 1;
    const View in_view = view_of(in);
    struct Element {
        char *dst;
        const char *first;
    };
    std::vector<Element> elements;
    elements.reserve(static_cast<size_t>(outputs));
    walk<2>(out.rank, out.shape, {view_of(out), in_view}, [&](char *const *p, int64_t n, const int64_t *step) {
        for (int64_t i = 0; i < n; ++i) elements.push_back({p[0] + i * step[0], p[1] + i * step[1]});
    });
    const int64_t groups = (outputs + k_lanes - 1) / k_lanes;
    const int64_t tasks = std::min(groups, split_count(numel(in), int64_t{1} << 15));
    parallel_for(tasks, [&](int64_t t) {
        for (int64_t grp = groups * t / tasks; grp < groups * (t + 1) / tasks; ++grp) {
            const Element *e = elements.data() + grp * k_lanes;
            const int64_t lanes = std::min(k_lanes, outputs - grp * k_lanes);
            Acc acc[k_lanes] = {};
            View first = in_view;
            first.base = const_cast<char *>(e[0].first);
            walk<1>(in.rank, inner_shape, {first}, [&](char *const *q, int64_t m, const int64_t *qstep) {
                const intptr_t off = q[0] - e[0].first;
                if (lanes == k_lanes) {
                    for (int64_t j = 0; j < m; ++j)
                        for (int64_t g = 0; g < k_lanes; ++g)
                            acc[g] += static_cast<Acc>(Tr::load(e[g].first + off + j * qstep[0]));
                    return;
                }
                for (int64_t j = 0; j < m; ++j)
                    for (int64_t g = 0; g < lanes; ++g)
                        acc[g] += static_cast<Acc>(Tr::load(e[g].first + off + j * qstep[0]));
            });
            for (int64_t g = 0; g < lanes; ++g) finish(e[g].dst, acc[g]);
        }
    });
    return true;
}

// Elements reduced into each output element.
int64_t reduced_count(const tf_tensor_desc &in, uint32_t axes_mask) {
    int64_t n = 1;
    for (int i = 0; i < in.rank; ++i)
        if (axes_mask >> i & 1) n *= in.shape[i];
    return n;
}

// ---- Vectorized f32 path ------------------------------------------------------------------------

constexpr int64_t k_chunk = int64_t{1} << 14;

// A dense f32 reduction seen as [A, C, B], A and B reduced and C kept.
struct Blocks {
    int64_t a = 1, c = 1, b = 1;
};

bool as_blocks(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask, Blocks &s) {
    if (numel(in) == 0 || !dense_f32(in) || !dense_f32(out)) return false;
    int group = 0;  // 0: leading reduced axes, 1: kept axes, 2: trailing reduced axes
    for (int i = 0; i < in.rank; ++i) {
        if (in.shape[i] == 1) continue;
        const bool reduced = axes_mask >> i & 1;
        if (group == 0 && !reduced)
            group = 1;
        else if (group == 1 && reduced)
            group = 2;
        else if (group == 2 && !reduced)
            return false;
        (group == 0 ? s.a : group == 1 ? s.c : s.b) *= in.shape[i];
    }
    if (s.c == 1) s = {1, 1, s.a * s.b};  // one contiguous run
    return true;
}

// The lane sum of chunk k of x[0, n).
[[gnu::always_inline]] inline double chunk_sum(const float *x, int64_t n, int64_t k) {
    return vec::sum(x + k * k_chunk, std::min(k_chunk, n - k * k_chunk));
}

// partial[k] = chunk_sum(x, n, k) for chunks [first, last): one run's chunks split over threads.
[[gnu::always_inline]] inline void chunk_sums_body(const float *x, int64_t n, int64_t first, int64_t last,
                                                   double *partial) {
    for (int64_t k = first; k < last; ++k) partial[k] = chunk_sum(x, n, k);
}
TF_CPU_ISA_DISPATCH(chunk_sums, (const float *x, int64_t n, int64_t first, int64_t last, double *partial),
                    (x, n, first, last, partial))

// acc[c - lo] = the sum over a of the chunked lane sums of run (a, c), for kept indices [lo, hi).
[[gnu::always_inline]] inline void block_sums_body(const float *x, Blocks s, int64_t lo, int64_t hi, double *acc) {
    std::fill(acc, acc + (hi - lo), 0.0);
    if (s.b == 1) {  // runs of one element: add rows of the kept block, vectorized along it
        for (int64_t a = 0; a < s.a; ++a) {
            const float *row = x + a * s.c;
            for (int64_t c = lo; c < hi; ++c) acc[c - lo] += static_cast<double>(row[c]);
        }
        return;
    }
    // a outer: the task's runs are read in memory order (a bias gradient's planes are short runs,
    // too short for the prefetcher when each jumps a whole image ahead); every acc[c] still adds
    // its runs in the order of a.
    for (int64_t a = 0; a < s.a; ++a)
        for (int64_t c = lo; c < hi; ++c) {
            const float *run = x + (a * s.c + c) * s.b;
            double total = 0;
            for (int64_t k = 0; k * k_chunk < s.b; ++k) total += chunk_sum(run, s.b, k);
            acc[c - lo] += total;
        }
}
TF_CPU_ISA_DISPATCH(block_sums, (const float *x, Blocks s, int64_t lo, int64_t hi, double *acc), (x, s, lo, hi, acc))

// store(c, (sum of run c) / divisor) for every kept index c of x's blocks, each c once.
template <class Store>
void sum_blocks(const float *x, Blocks s, double divisor, Store store) {
    const int64_t work = s.a * s.b * s.c;
    if (s.c == 1) {
        const int64_t chunks = (s.b + k_chunk - 1) / k_chunk;
        std::vector<double> partial(static_cast<size_t>(chunks));
        const int64_t tasks = std::min(chunks, split_count(work, int64_t{1} << 16));
        parallel_for(tasks, [&](int64_t t) {
            chunk_sums(x, s.b, chunks * t / tasks, chunks * (t + 1) / tasks, partial.data());
        });
        double total = 0;
        for (double p : partial) total += p;
        store(0, total / divisor);
        return;
    }
    const int64_t tasks = std::min(s.c, split_count(work, int64_t{1} << 16));
    parallel_for(tasks, [&](int64_t t) {
        const int64_t lo = s.c * t / tasks, hi = s.c * (t + 1) / tasks;
        std::vector<double> acc(static_cast<size_t>(hi - lo));
        block_sums(x, s, lo, hi, acc.data());
        for (int64_t c = lo; c < hi; ++c) store(c, acc[static_cast<size_t>(c - lo)] / divisor);
    });
}

// var over each row of a dense f32 [C, B] (layer_norm's backward: every token's features): the
// mean, then the squared deviations, each a lane sum in double; out[c] = squares / divisor
// rounded once. Rows are split over the threads.
[[gnu::always_inline]] inline void var_rows_body(const float *x, int64_t len, int64_t lo, int64_t hi, double divisor,
                                                 float *y) {
    for (int64_t c = lo; c < hi; ++c) {
        const float *run = x + c * len;
        const double mean = vec::sum(run, len) / static_cast<double>(len);
        const double squares = vec::lane_sum(len, [&](int64_t i) {
            const double d = static_cast<double>(run[i]) - mean;
            return d * d;
        });
        y[c] = static_cast<float>(squares / divisor);
    }
}
TF_CPU_ISA_DISPATCH(var_rows, (const float *x, int64_t len, int64_t lo, int64_t hi, double divisor, float *y),
                    (x, len, lo, hi, divisor, y))

// ---- max and min on dense f32 ----------------------------------------------------------------
//
// f32 bits as an int32 key ordered as the floats are, -0 below +0 (NaNs beyond the infinities):
// the max (min) key is maximum_of's (minimum_of's) fold of the run's values wherever no NaN is
// among them, and integer max/min vectorize. A run holding a NaN is scanned again for its first
// NaN, which the fold returns.
[[gnu::always_inline]] inline int32_t order_key(float x) {
    const int32_t bits = std::bit_cast<int32_t>(x);
    return bits ^ ((bits >> 31) & 0x7fffffff);
}
[[gnu::always_inline]] inline float from_key(int32_t key) {
    return std::bit_cast<float>(key ^ ((key >> 31) & 0x7fffffff));
}

// keys[c - lo] = the max (Max) or min key over a and b of x's [A, C, B] blocks, nan[c - lo] = 1
// where one of the values is NaN, for kept indices [lo, hi).
template <bool Max>
[[gnu::always_inline]] inline void extreme_keys_body(const float *x, Blocks s, int64_t lo, int64_t hi, int32_t *keys,
                                                     unsigned char *nan) {
    const int32_t start = Max ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max();
    std::fill(keys, keys + (hi - lo), start);
    std::fill(nan, nan + (hi - lo), 0);
    for (int64_t a = 0; a < s.a; ++a) {
        if (s.b == 1) {  // one element a run: along the kept block
            const float *row = x + a * s.c;
            for (int64_t c = lo; c < hi; ++c) {
                const int32_t k = order_key(row[c]);
                keys[c - lo] = Max ? std::max(keys[c - lo], k) : std::min(keys[c - lo], k);
                nan[c - lo] |= row[c] != row[c];
            }
            continue;
        }
        for (int64_t c = lo; c < hi; ++c) {
            const float *run = x + (a * s.c + c) * s.b;
            int32_t key = keys[c - lo];
            unsigned char any = 0;
            for (int64_t j = 0; j < s.b; ++j) {
                const int32_t k = order_key(run[j]);
                key = Max ? std::max(key, k) : std::min(key, k);
                any |= run[j] != run[j];
            }
            keys[c - lo] = key;
            nan[c - lo] |= any;
        }
    }
}
[[gnu::always_inline]] inline void max_keys_body(const float *x, Blocks s, int64_t lo, int64_t hi, int32_t *keys,
                                                 unsigned char *nan) {
    extreme_keys_body<true>(x, s, lo, hi, keys, nan);
}
[[gnu::always_inline]] inline void min_keys_body(const float *x, Blocks s, int64_t lo, int64_t hi, int32_t *keys,
                                                 unsigned char *nan) {
    extreme_keys_body<false>(x, s, lo, hi, keys, nan);
}
TF_CPU_ISA_DISPATCH(max_keys, (const float *x, Blocks s, int64_t lo, int64_t hi, int32_t *keys, unsigned char *nan),
                    (x, s, lo, hi, keys, nan))
TF_CPU_ISA_DISPATCH(min_keys, (const float *x, Blocks s, int64_t lo, int64_t hi, int32_t *keys, unsigned char *nan),
                    (x, s, lo, hi, keys, nan))

// max (Max) or min of dense f32 [A, C, B] blocks (as_blocks) into dense f32 out.
template <bool Max>
bool extreme_f32(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask) {
    Blocks s;
    if (!as_blocks(in, out, axes_mask, s)) return false;
    const float *x = reinterpret_cast<const float *>(base_of(in));
    float *y = reinterpret_cast<float *>(base_of(out));
    const int64_t tasks = std::min(s.c, split_count(s.a * s.b * s.c, int64_t{1} << 16));
    parallel_for(tasks, [&](int64_t t) {
        const int64_t lo = s.c * t / tasks, hi = s.c * (t + 1) / tasks;
        std::vector<int32_t> keys(static_cast<size_t>(hi - lo));
        std::vector<unsigned char> nan(static_cast<size_t>(hi - lo));
        (Max ? max_keys : min_keys)(x, s, lo, hi, keys.data(), nan.data());
        for (int64_t c = lo; c < hi; ++c) {
            y[c] = from_key(keys[static_cast<size_t>(c - lo)]);
            if (!nan[static_cast<size_t>(c - lo)]) continue;
            for (int64_t a = 0, found = 0; a < s.a && !found; ++a)  // the first NaN in (a, b) order
                for (int64_t j = 0; j < s.b && !found; ++j) {
                    const float v = x[(a * s.c + c) * s.b + j];
                    if (v != v) y[c] = v, found = 1;
                }
        }
    });
    return true;
}

// f32 in and out as [A, C, B] blocks (as_blocks): out[c] = (sum of run c) / divisor, rounded once.
bool sum_f32(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask, double divisor) {
    Blocks s;
    if (!as_blocks(in, out, axes_mask, s)) return false;
    float *y = reinterpret_cast<float *>(base_of(out));
    sum_blocks(reinterpret_cast<const float *>(base_of(in)), s, divisor,
               [y](int64_t c, double v) { y[c] = static_cast<float>(v); });
    return true;
}

// f16/bf16 in and out, both dense (a bias gradient under autocast): the input staged as f32, the
// blocks summed as for f32 (the same order, so the same double sums as the f32 op on the
// converted input) and each sum rounded once from double to the format. The element loops
// below read one 16-bit value at a time.
bool sum_half(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask, double divisor) {
    if ((in.dtype != TF_DTYPE_F16 && in.dtype != TF_DTYPE_BF16) || out.dtype != in.dtype || !is_contiguous(in) ||
        !is_contiguous(out) || numel(in) == 0)
        return false;
    tf_tensor_desc fin = in, fout = out;
    fin.dtype = fout.dtype = TF_DTYPE_F32;
    fin.data = fout.data = nullptr;
    fin.offset = fout.offset = 0;
    Blocks s;
    if (!as_blocks(fin, fout, axes_mask, s)) return false;
    const F32Input x(in);
    char *y = base_of(out);
    Dtypes::with_float(out.dtype, [&](auto tag) {
        using Tr = Traits<decltype(tag)>;
        sum_blocks(x.data(), s, divisor, [y](int64_t c, double v) { Tr::store_wide(y + c * 2, v); });
    });
    return true;
}

// ---- Reference path -----------------------------------------------------------------------------

template <class T>
void sum(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask) {
    using Tr = Traits<T>;
    using Acc = Accumulator<T>;
    auto store = [](char *dst, Acc acc) { Tr::store_wide(dst, static_cast<typename Tr::Wide>(acc)); };
    if (sum_lockstep<T>(in, out, axes_mask, store)) return;
    for_each_output(in, out, axes_mask, [](char *dst, auto &&each) {
        Acc acc = 0;
        each([&](const char *x) { acc += static_cast<Acc>(Tr::load(x)); });
        // From the accumulator in one rounding (double -> f16 directly, not via float).
        Tr::store_wide(dst, static_cast<typename Tr::Wide>(acc));
    });
}

template <class T>
void mean(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask) {
    using Tr = Traits<T>;
    const auto n = static_cast<double>(reduced_count(in, axes_mask));
    if (sum_lockstep<T>(in, out, axes_mask, [n](char *dst, double acc) { Tr::store_wide(dst, acc / n); })) return;
    for_each_output(in, out, axes_mask, [n](char *dst, auto &&each) {
        double acc = 0;
        each([&](const char *x) { acc += static_cast<double>(Tr::load(x)); });
        Tr::store_wide(dst, acc / n);
    });
}

template <class T>
void var(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask, double correction) {
    using Tr = Traits<T>;
    const auto n = static_cast<double>(reduced_count(in, axes_mask));
    const double divisor = std::max(n - correction, 0.0);
    for_each_output(in, out, axes_mask, [n, divisor](char *dst, auto &&each) {
        double total = 0;
        each([&](const char *x) { total += static_cast<double>(Tr::load(x)); });
        const double mean = total / n;
        double squares = 0;
        each([&](const char *x) {
            const double d = static_cast<double>(Tr::load(x)) - mean;
            squares += d * d;
        });
        Tr::store_wide(dst, squares / divisor);
    });
}

// Starts from the first element, so no identity value is needed (validate() rules out empty
// reductions for max and min).
template <class T, bool Max>
void extreme(const tf_tensor_desc &in, const tf_tensor_desc &out, uint32_t axes_mask) {
    using Tr = Traits<T>;
    using C = typename Tr::Compute;
    for_each_output(in, out, axes_mask, [](char *dst, auto &&each) {
        bool first = true;
        C acc{};
        each([&](const char *p) {
            const C x = Tr::load(p);
            acc = first ? x : Max ? maximum_of(acc, x) : minimum_of(acc, x);
            first = false;
        });
        Tr::store(dst, acc);
    });
}

// x beats best: strictly more extreme, or the first NaN (a NaN best is never beaten).
template <bool Max, class C>
bool beats(C x, C best) {
    if constexpr (std::is_floating_point_v<C>) {
        if (best != best) return false;
        if (x != x) return true;
    }
    return Max ? x > best : x < best;
}

template <class T, bool Max>
void arg(const tf_tensor_desc &in, const tf_tensor_desc &out, int32_t axis) {
    using Tr = Traits<T>;
    using C = typename Tr::Compute;
    const int64_t n = in.shape[axis];
    const View in_view = view_of(in);
    const int64_t along = in_view.strides[axis];
    walk<2>(out.rank, out.shape, {view_of(out), in_view}, [&](char *const *p, int64_t count, const int64_t *step) {
        for (int64_t i = 0; i < count; ++i) {
            const char *first = p[1] + i * step[1];
            C best = Tr::load(first);
            int64_t index = 0;
            for (int64_t j = 1; j < n; ++j) {
                const C x = Tr::load(first + j * along);
                if (beats<Max>(x, best)) {
                    best = x;
                    index = j;
                }
            }
            Traits<int64_t>::store(p[0] + i * step[0], index);
        }
    });
}

tf_status sum_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    const uint32_t axes_mask = reduce_axes_mask(op);
    if (sum_f32(in, out, axes_mask, 1.0) || sum_half(in, out, axes_mask, 1.0)) return TF_STATUS_OK;
    const bool known = Dtypes::with_numeric(out.dtype, [&](auto tag) { sum<decltype(tag)>(in, out, axes_mask); });
    return dtype_status(known, "sum", out.dtype, err);
}

tf_status mean_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    const uint32_t axes_mask = reduce_axes_mask(op);
    const auto n = static_cast<double>(reduced_count(in, axes_mask));
    if (sum_f32(in, out, axes_mask, n) || sum_half(in, out, axes_mask, n)) return TF_STATUS_OK;
    const bool known = Dtypes::with_float(out.dtype, [&](auto tag) { mean<decltype(tag)>(in, out, axes_mask); });
    return dtype_status(known, "mean", out.dtype, err);
}

tf_status var_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    const uint32_t axes_mask = reduce_axes_mask(op);
    const double correction = params_of<tf_params_var>(op).correction;
    if (Blocks s; as_blocks(in, out, axes_mask, s) && s.a == 1 && s.b > 1) {
        const float *x = reinterpret_cast<const float *>(base_of(in));
        float *y = reinterpret_cast<float *>(base_of(out));
        const double divisor = std::max(static_cast<double>(s.b) - correction, 0.0);
        const int64_t tasks = std::min(s.c, split_count(s.c * s.b, int64_t{1} << 15));
        parallel_for(tasks, [&](int64_t t) { var_rows(x, s.b, s.c * t / tasks, s.c * (t + 1) / tasks, divisor, y); });
        return TF_STATUS_OK;
    }
    const bool known =
        Dtypes::with_float(out.dtype, [&](auto tag) { var<decltype(tag)>(in, out, axes_mask, correction); });
    return dtype_status(known, "var", out.dtype, err);
}

// max (Max) and min over the axes; the rule has refused an empty reduction.
template <bool Max>
tf_status extreme_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    const uint32_t axes_mask = reduce_axes_mask(op);
    if (extreme_f32<Max>(in, out, axes_mask)) return TF_STATUS_OK;
    const bool known =
        Dtypes::with_numeric(out.dtype, [&](auto tag) { extreme<decltype(tag), Max>(in, out, axes_mask); });
    return dtype_status(known, op_name(op.op), out.dtype, err);
}

// argmax (Max) and argmin along the axis; the rule has checked the axis and refused an empty one.
template <bool Max>
tf_status arg_kernel(const tf_op_desc &op, tf_error *err) {
    const tf_tensor_desc &in = op.inputs[0], &out = op.outputs[0];
    const int32_t axis = params_of<tf_params_axis>(op).axis;
    const bool known = Dtypes::with_numeric(in.dtype, [&](auto tag) { arg<decltype(tag), Max>(in, out, axis); });
    return dtype_status(known, op_name(op.op), in.dtype, err);
}

// ---- Rows -------------------------------------------------------------------------------------------

constexpr HostRow k_rows[] = {
    {TF_OP_SUM, k_numeric_dtypes, sum_kernel},
    {TF_OP_MEAN, k_float_dtypes, mean_kernel},
    {TF_OP_VAR, k_float_dtypes, var_kernel},
    {TF_OP_MAX, k_numeric_dtypes, extreme_kernel<true>},
    {TF_OP_MIN, k_numeric_dtypes, extreme_kernel<false>},
    {TF_OP_ARGMAX, k_numeric_dtypes, arg_kernel<true>},
    {TF_OP_ARGMIN, k_numeric_dtypes, arg_kernel<false>},
};

}  // namespace

std::span<const HostRow> reduce_kernels() { return k_rows; }

}  // namespace tf_cpu
