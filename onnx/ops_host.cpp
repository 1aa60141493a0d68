// Data-dependent ops computed on the host: Unique (its output sizes depend on the values; the
// selection is made on the host and the values gathered on the device) and Det (LU factorization
// with row pivoting in double, counted as a fallback off cpu).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "internal.hpp"

namespace tinyfin::onnx::detail {
namespace {

using Ctx = NodeContext;

// Unique's index outputs for rows of `len` values: first occurrences (the output's order),
// each row's output position, each output's count. sorted: rows in ascending lexicographic
// order; otherwise in order of first occurrence.
struct UniqueIndices {
    std::vector<int64_t> first, inverse, counts;
};

template <class T>
UniqueIndices unique_rows(const std::vector<T> &v, int64_t n, int64_t len, bool sorted) {
    auto row_less = [&](int64_t i, int64_t j) {
        return std::lexicographical_compare(v.begin() + i * len, v.begin() + (i + 1) * len, v.begin() + j * len,
                                            v.begin() + (j + 1) * len);
    };
    auto row_equal = [&](int64_t i, int64_t j) {
        return std::equal(v.begin() + i * len, v.begin() + (i + 1) * len, v.begin() + j * len);
    };
    std::vector<int64_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), row_less);
    // Groups of equal rows in sorted order: their first (smallest) index and members.
    std::vector<std::pair<int64_t, std::vector<int64_t>>> groups;
    for (std::size_t k = 0; k < order.size(); ++k) {
        if (k == 0 || !row_equal(order[k - 1], order[k])) groups.push_back({order[k], {}});
        groups.back().second.push_back(order[k]);
    }
    if (!sorted)
        std::stable_sort(groups.begin(), groups.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    UniqueIndices out;
    out.inverse.assign(static_cast<std::size_t>(n), 0);
    for (std::size_t g = 0; g < groups.size(); ++g) {
        out.first.push_back(groups[g].first);
        out.counts.push_back(static_cast<int64_t>(groups[g].second.size()));
        for (int64_t member : groups[g].second) out.inverse[static_cast<std::size_t>(member)] = static_cast<int64_t>(g);
    }
    return out;
}

std::vector<Value> unique(Ctx &ctx) {
    const Tensor &x = ctx.tensor(0);
    const bool sorted = ctx.attr_int("sorted", 1) != 0;
    const bool has_axis = ctx.has_attr("axis");
    const int64_t axis = has_axis ? normalize_axis(ctx.attr_int("axis", 0), x.rank(), ctx) : 0;
    // Rows: the slices along axis (moved first), or every element.
    const Tensor moved = has_axis ? (axis == 0 ? x : x.transpose(0, axis)).contiguous() : x.reshape({x.numel()});
    const int64_t n = moved.rank() == 0 ? 1 : moved.size(0);
    const int64_t len = n == 0 ? 0 : moved.numel() / n;
    const UniqueIndices u = is_float(ctx.input(0).type)
                                ? unique_rows(moved.to(DType::f32).to_vector<float>(), n, len, sorted)
                                : unique_rows(moved.to(DType::i64).to_vector<int64_t>(), n, len, sorted);
    const auto count = static_cast<int64_t>(u.first.size());
    const Tensor first = from_vector(u.first, {count}, ctx.device);
    const Tensor y = has_axis ? take(x, first, axis) : take(x.reshape({x.numel()}), first, 0);
    return {make(y, ctx.input(0).type), make(first, ElementType::int64),
            make(from_vector(u.inverse, {n}, ctx.device), ElementType::int64),
            make(from_vector(u.counts, {count}, ctx.device), ElementType::int64)};
}

// The determinant of an m x m matrix (row-major), by Gaussian elimination with partial pivoting.
double determinant(std::vector<double> a, int64_t m) {
    double det = 1;
    for (int64_t k = 0; k < m; ++k) {
        int64_t pivot = k;
        for (int64_t i = k + 1; i < m; ++i)
            if (std::fabs(a[i * m + k]) > std::fabs(a[pivot * m + k])) pivot = i;
        if (a[pivot * m + k] == 0) return 0;
        if (pivot != k) {
            for (int64_t j = 0; j < m; ++j) std::swap(a[k * m + j], a[pivot * m + j]);
            det = -det;
        }
        det *= a[k * m + k];
        for (int64_t i = k + 1; i < m; ++i) {
            const double f = a[i * m + k] / a[k * m + k];
            for (int64_t j = k; j < m; ++j) a[i * m + j] -= f * a[k * m + j];
        }
    }
    return det;
}

std::vector<Value> det(Ctx &ctx) {
    if (!is_float(ctx.input(0).type)) ctx.invalid("X must be a float tensor");
    const Tensor &x = ctx.tensor(0);
    if (x.rank() < 2 || x.size(-1) != x.size(-2))
        ctx.invalid("X of shape " + shape_str(x.shape()) + " must be [..., M, M]");
    const int64_t m = x.size(-1), count = m == 0 ? 0 : x.numel() / (m * m);
    const Shape batch(x.shape().begin(), x.shape().end() - 2);
    int64_t batches = 1;
    for (int64_t d : batch) batches *= d;
    count_host_fallback(ctx);
    const auto values = x.to(DType::f32).contiguous().to_vector<float>();
    std::vector<float> out(static_cast<std::size_t>(batches), 1.0f);
    for (int64_t b = 0; b < count; ++b)
        out[static_cast<std::size_t>(b)] = static_cast<float>(
            determinant(std::vector<double>(values.begin() + b * m * m, values.begin() + (b + 1) * m * m), m));
    return {make(from_vector(out, batch, ctx.device).to(x.dtype()), ctx.input(0).type)};
}

constexpr OpRow rows[] = {
    {"Unique", 11, 11, unique},
    {"Det", 11, 11, det},
};

}  // namespace

std::span<const OpRow> host_ops() { return rows; }

}  // namespace tinyfin::onnx::detail
