// The cuda plugin's index arithmetic (plugins/cuda/geometry.hpp), on the host: the kernels run the
// same __host__ __device__ functions, so every layout the plugin collapses is checked here against
// a plain row-major walk, without a GPU.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "geometry.hpp"

using tf_cuda::make_rows;
using tf_cuda::make_strided;
using tf_cuda::offsets_of;
using tf_cuda::RowGeom;
using tf_cuda::Strided;

namespace {

// Element offset of the row-major linear index i in a tensor of shape and strides.
int64_t reference_offset(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides, int64_t i) {
    int64_t off = 0;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        off += (i % shape[d]) * strides[d];
        i /= shape[d];
    }
    return off;
}

int64_t count_of(const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

std::vector<int64_t> dense_strides(const std::vector<int64_t> &shape) {
    std::vector<int64_t> s(shape.size());
    int64_t step = 1;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        s[d] = step;
        step *= shape[d];
    }
    return s;
}

// Checks every element of a 2-operand walk against the reference.
void check_walk(const std::vector<int64_t> &shape, const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
    const int64_t *strides[2] = {a.data(), b.data()};
    const Strided<2> g = make_strided<2>(static_cast<int>(shape.size()), shape.data(), strides);
    REQUIRE(g.count == count_of(shape));
    REQUIRE(g.rank >= 1);
    for (int64_t i = 0; i < g.count; ++i) {
        int64_t off[2];
        offsets_of(g, i, off);
        REQUIRE(off[0] == reference_offset(shape, a, i));
        REQUIRE(off[1] == reference_offset(shape, b, i));
    }
}

}  // namespace

TEST_CASE("geometry: dense tensors collapse to one axis") {
    const std::vector<int64_t> shape{2, 3, 4, 5};
    const auto s = dense_strides(shape);
    const int64_t *strides[2] = {s.data(), s.data()};
    const Strided<2> g = make_strided<2>(4, shape.data(), strides);
    CHECK(g.rank == 1);
    CHECK(g.count == 120);
    CHECK(g.strides[0][0] == 1);
    check_walk(shape, s, s);
}

TEST_CASE("geometry: rank 0 and size-1 axes") {
    const Strided<1> scalar = make_strided<1>(0, nullptr, nullptr);
    CHECK(scalar.rank == 1);
    CHECK(scalar.count == 1);
    int64_t off[1];
    offsets_of(scalar, 0, off);
    CHECK(off[0] == 0);
    // Strides of size-1 axes are anything (even huge): never read.
    check_walk({1, 3, 1, 2}, {999999, 2, 77, 1}, {0, 1, 5, 3});
}

TEST_CASE("geometry: empty shapes have no elements") {
    const std::vector<int64_t> shape{3, 0, 2};
    const auto s = dense_strides(shape);
    const int64_t *strides[1] = {s.data()};
    CHECK(make_strided<1>(3, shape.data(), strides).count == 0);
}

TEST_CASE("geometry: transposes, broadcasts and slices") {
    check_walk({4, 3}, {1, 4}, {3, 1});  // transposed input
    check_walk({2, 3, 4}, {12, 4, 1}, {0, 1, 0});  // bias broadcast over batch and width
    check_walk({2, 3, 4}, {12, 4, 1}, {24, 8, 2});  // every other element
    check_walk({5, 1, 7}, {7, 7, 1}, {0, 0, 0});  // scalar broadcast
    check_walk({2, 2, 2, 2, 2, 2, 2, 2}, dense_strides({2, 2, 2, 2, 2, 2, 2, 2}),
               {1, 2, 4, 8, 16, 32, 64, 128});  // rank 8, fully reversed strides
}

TEST_CASE("geometry: random layouts") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
        const int rank = static_cast<int>(rng() % 9);
        std::vector<int64_t> shape(rank), a(rank), b(rank);
        for (int d = 0; d < rank; ++d) {
            shape[d] = 1 + rng() % 3;
            a[d] = rng() % 4 == 0 ? 0 : 1 + rng() % 40;
            b[d] = rng() % 4 == 0 ? 0 : 1 + rng() % 40;
        }
        if (trial % 3 == 0) a = dense_strides(shape);
        check_walk(shape, a, b);
    }
}

TEST_CASE("geometry: rows and columns split by a mask") {
    // x [2, 3, 4, 5] reduced over axes 1 and 3: rows (2, 4), columns (3, 5).
    const std::vector<int64_t> shape{2, 3, 4, 5};
    const auto in = dense_strides(shape);
    const std::vector<int64_t> out{4, 0, 1, 0};  // the output [2, 1, 4, 1] with 0 on reduced axes
    const int64_t *strides[2] = {out.data(), in.data()};
    const RowGeom<2> g = make_rows<2>(4, shape.data(), strides, 0b1010);
    REQUIRE(g.rows.count == 8);
    REQUIRE(g.cols.count == 15);
    for (int64_t r = 0; r < g.rows.count; ++r) {
        int64_t base[2];
        offsets_of(g.rows, r, base);
        const int64_t i0 = r / 4, i2 = r % 4;
        CHECK(base[0] == i0 * 4 + i2);
        for (int64_t c = 0; c < g.cols.count; ++c) {
            int64_t col[2];
            offsets_of(g.cols, c, col);
            const int64_t i1 = c / 5, i3 = c % 5;
            CHECK(col[0] == 0);
            CHECK(base[1] + col[1] == ((i0 * 3 + i1) * 4 + i2) * 5 + i3);
        }
    }
}

TEST_CASE("geometry: no rows or no columns") {
    const std::vector<int64_t> shape{6, 7};
    const auto s = dense_strides(shape);
    const int64_t *strides[1] = {s.data()};
    const RowGeom<1> all = make_rows<1>(2, shape.data(), strides, 0b11);
    CHECK(all.rows.count == 1);
    CHECK(all.cols.count == 42);
    CHECK(all.cols.rank == 1);  // dense columns merge
    const RowGeom<1> none = make_rows<1>(2, shape.data(), strides, 0);
    CHECK(none.rows.count == 42);
    CHECK(none.cols.count == 1);
}
