// Views share storage and never copy; reshape copies only when it must.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;
using F = std::vector<float>;

static bool same_storage(const Tensor &a, const Tensor &b) { return a.shares_storage(b); }

TEST_CASE("reshape and view of a contiguous tensor share storage") {
    Tensor a = arange(0.0, 6);
    Tensor b = a.view({2, 3});
    CHECK(b.shape() == Shape{2, 3});
    CHECK(b.strides() == Shape{3, 1});
    CHECK(same_storage(a, b));
    CHECK(a.reshape({3, -1}).shape() == Shape{3, 2});
    CHECK(a.reshape({1, 6, 1}).strides()[1] == 1);
    CHECK(scalar(2).reshape({1, 1}).shape() == Shape{1, 1});
    CHECK(arange(0.0, 1).reshape({}).rank() == 0);
    CHECK_THROWS_AS(a.reshape({4, -1}), ShapeError);
    CHECK_THROWS_AS(a.reshape({-1, -1}), ShapeError);
    CHECK_THROWS_AS(a.view({7}), ShapeError);
}

TEST_CASE("transpose and permute swap strides without copying") {
    Tensor a = arange(0.0, 24).reshape({2, 3, 4});
    Tensor p = a.permute({2, 0, 1});
    CHECK(p.shape() == Shape{4, 2, 3});
    CHECK(p.strides() == Shape{1, 12, 4});
    CHECK(same_storage(a, p));
    CHECK(a.transpose(-1, 0).shape() == Shape{4, 3, 2});
    CHECK(p.contiguous().to_vector<float>()[1] == 4);  // p[0,0,1] = a[0,1,0]
    CHECK_THROWS_AS(a.permute({0, 0, 1}), ShapeError);
    CHECK_THROWS_AS(a.permute({0, 1}), ShapeError);
    CHECK_THROWS_AS(a.transpose(0, 3), ShapeError);
}

TEST_CASE("view of a transposed tensor is refused, reshape copies") {
    Tensor t = arange(0.0, 6).reshape({2, 3}).transpose(0, 1);  // [3,2]
    CHECK_THROWS_WITH_AS(t.view({6}), doctest::Contains("without a copy"), ShapeError);
    Tensor r = t.reshape({6});
    CHECK_FALSE(same_storage(r, t));
    CHECK(r.to_vector<float>() == F{0, 3, 1, 4, 2, 5});
    // splitting an axis of a transposed tensor is still a view
    Tensor s = arange(0.0, 12).reshape({3, 4}).transpose(0, 1).reshape({2, 2, 3});
    CHECK(s.to_vector<float>() == F{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
}

TEST_CASE("slice with start, end, step and negative bounds") {
    Tensor a = arange(0.0, 10);
    CHECK(a.slice(0, 2, 5).to_vector<float>() == F{2, 3, 4});
    CHECK(a.slice(0, -3, 10).to_vector<float>() == F{7, 8, 9});
    CHECK(a.slice(0, 1, -1, 3).to_vector<float>() == F{1, 4, 7});
    CHECK(a.slice(0, 8, 2).numel() == 0);  // empty, not an error
    CHECK(a.slice(0, 0, 100).numel() == 10);
    CHECK(same_storage(a, a.slice(0, 2, 5)));
    Tensor m = arange(0.0, 12).reshape({3, 4}).slice(1, 1, 3);  // columns 1,2
    CHECK(m.shape() == Shape{3, 2});
    CHECK(m.offset() == 1);
    CHECK(m.contiguous().to_vector<float>() == F{1, 2, 5, 6, 9, 10});
    CHECK_THROWS_AS(a.slice(0, 0, 5, 0), ValueError);
    CHECK_THROWS_AS(scalar(1).slice(0, 0, 1), ShapeError);
}

TEST_CASE("expand broadcasts with stride 0") {
    Tensor a = arange(0.0, 3).reshape({3, 1});
    Tensor e = a.expand({2, 3, 4});
    CHECK(e.shape() == Shape{2, 3, 4});
    CHECK(e.strides() == Shape{0, 1, 0});
    CHECK(same_storage(a, e));
    CHECK(sum(e).item<float>() == 2 * 4 * (0 + 1 + 2));
    CHECK(a.expand({-1, 5}).shape() == Shape{3, 5});
    CHECK_THROWS_AS(a.expand({4, 1}), ShapeError);
    CHECK_THROWS_AS(a.expand({3}), ShapeError);
}

TEST_CASE("views keep the storage alive after the base is gone") {
    Tensor v;
    {
        Tensor base = arange(0.0, 4);
        v = base.slice(0, 2, 4);
    }
    CHECK(v.to_vector<float>() == F{2, 3});
}

// assign_ from a view of its own storage reads the whole source before writing, as the out=
// forms do: in place on a GPU or in cpu's parallel row loop, an element-by-element copy would
// read elements it had already overwritten. Sizes from 1e3 to ~1e5, where the backends showed
// it, each checked against the same copy done on the host.
TEST_CASE("assign_ from an overlapping source acts as if the source were read first") {
    for (const std::string &name : available_backends()) {
        const Device device{name, 0};
        for (int64_t n : {1000, 65536, 100003}) {
            CAPTURE(name);
            CAPTURE(n);
            F host(static_cast<std::size_t>(n));
            for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 997) - 400.0f;
            const auto fresh = [&] { return from_vector(host, {n}, device); };
            const int64_t half = n / 2;
            const auto m = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
            F want;

            {
                INFO("shifted right by one");
                Tensor a = fresh();
                a.slice(0, 1, n).assign_(a.slice(0, 0, n - 1));
                want = host;
                for (int64_t i = 1; i < n; ++i) want[i] = host[i - 1];
                CHECK(a.to_vector<float>() == want);
            }
            {
                INFO("shifted left by one");
                Tensor a = fresh();
                a.slice(0, 0, n - 1).assign_(a.slice(0, 1, n));
                want = host;
                for (int64_t i = 0; i + 1 < n; ++i) want[i] = host[i + 1];
                CHECK(a.to_vector<float>() == want);
            }
            {
                INFO("the upper half from the even elements");
                Tensor a = fresh();
                a.slice(0, half, 2 * half).assign_(a.slice(0, 0, 2 * half, 2));
                want = host;
                for (int64_t i = 0; i < half; ++i) want[half + i] = host[2 * i];
                CHECK(a.to_vector<float>() == want);
            }
            {
                INFO("a square matrix from its own transpose");
                F square(host.begin(), host.begin() + m * m);
                Tensor a = from_vector(square, {m, m}, device);
                a.assign_(a.transpose(0, 1));
                want.assign(square.size(), 0);
                for (int64_t i = 0; i < m; ++i)
                    for (int64_t j = 0; j < m; ++j) want[i * m + j] = square[j * m + i];
                CHECK(a.to_vector<float>() == want);
            }
            {
                INFO("every column from the first row, broadcast across the columns");
                // a[i][j] = a[0][i]: row 0 is written while other rows still need its values.
                F square(host.begin(), host.begin() + m * m);
                Tensor a = from_vector(square, {m, m}, device);
                a.assign_(a.slice(0, 0, 1).transpose(0, 1));
                want.assign(square.size(), 0);
                for (int64_t i = 0; i < m; ++i)
                    for (int64_t j = 0; j < m; ++j) want[i * m + j] = square[i];
                CHECK(a.to_vector<float>() == want);
            }
            {
                INFO("a shifted source of another dtype");
                Tensor a = fresh();
                a.slice(0, 1, n).assign_(a.slice(0, 0, n - 1).to(DType::i32));
                want = host;
                for (int64_t i = 1; i < n; ++i) want[i] = host[i - 1];
                CHECK(a.to_vector<float>() == want);
            }
        }
    }
}
