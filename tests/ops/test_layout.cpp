// Layout ops against host index arithmetic: concat, stack, split, pad, narrow;
// contiguous, transposed and step-sliced inputs, zero-size pieces, rank 0.
#include "reference.hpp"

using namespace tinyfin;
using ref::D;
using ref::F;

namespace {

// Row-major elements of a host tensor of shape `shape` at coordinates produced by `at`.
D gather(const Shape &out, const std::function<double(const std::vector<int64_t> &)> &at) {
    D r;
    for (int64_t i = 0; i < ref::numel(out); ++i) r.push_back(at(ref::unravel(i, out)));
    return r;
}

int64_t flat(const std::vector<int64_t> &c, const Shape &shape) {
    int64_t f = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) f = f * shape[i] + c[i];
    return f;
}

}  // namespace

TEST_CASE("concat along each axis, of different sizes, with zero-size pieces") {
    F a = ref::values(2 * 3 * 4, 1), b = ref::values(2 * 1 * 4, 2), c = ref::values(2 * 2 * 4, 3);
    Tensor ta = ref::tensor(a, {2, 3, 4}), tb = ref::tensor(b, {2, 1, 4}), tc = ref::tensor(c, {2, 2, 4});
    Tensor empty_piece = zeros({2, 0, 4});
    Tensor out = concat({ta, tb, empty_piece, tc}, 1);
    Shape so{2, 6, 4};
    D want = gather(so, [&](const std::vector<int64_t> &k) {
        int64_t j = k[1];
        if (j < 3) return (double)a[flat({k[0], j, k[2]}, {2, 3, 4})];
        if (j < 4) return (double)b[flat({k[0], j - 3, k[2]}, {2, 1, 4})];
        return (double)c[flat({k[0], j - 4, k[2]}, {2, 2, 4})];
    });
    ref::check_close(out, want, so, 0, 0);
    // axis 0 and a negative axis
    Tensor r0 = concat({ta, ta}, 0);
    CHECK(r0.shape() == Shape{4, 3, 4});
    D twice = ref::to_double(a);
    twice.insert(twice.end(), a.begin(), a.end());
    ref::check_close(r0, twice, {4, 3, 4}, 0, 0);
    Tensor r2 = concat({ta, ta.slice(2, 0, 1)}, -1);
    ref::check_close(r2,
                     gather({2, 3, 5},
                            [&](const std::vector<int64_t> &k) {
                                return (double)a[flat({k[0], k[1], k[2] < 4 ? k[2] : 0}, {2, 3, 4})];
                            }),
                     {2, 3, 5}, 0, 0);
    // one tensor: a copy with the same values
    ref::check_close(concat({ta}, 2), ref::to_double(a), {2, 3, 4}, 0, 0);
    // integer dtype
    Tensor i = concat({from_vector(std::vector<int32_t>{1, 2}, {2}), from_vector(std::vector<int32_t>{3}, {1})});
    CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3});
    CHECK(concat({zeros({0, 2}), zeros({0, 2})}).shape() == Shape{0, 2});
}

TEST_CASE("concat of transposed and step-sliced inputs") {
    F a = ref::values(6, 10), b = ref::values(12, 11);
    Tensor at = ref::tensor(a, {3, 2}).transpose(0, 1);  // [2,3]
    Tensor bs = ref::tensor(b, {2, 6}).slice(1, 1, 6, 2);  // [2,3]: columns 1, 3, 5
    Tensor out = concat({at, bs}, 0);
    D want;
    for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 3; ++c) want.push_back(a[c * 2 + r]);
    for (int r = 0; r < 2; ++r)
        for (int c : {1, 3, 5}) want.push_back(b[r * 6 + c]);
    ref::check_close(out, want, {4, 3}, 0, 0);
    Tensor side = concat({at, bs}, 1);
    D want1;
    for (int r = 0; r < 2; ++r) {
        for (int c = 0; c < 3; ++c) want1.push_back(a[c * 2 + r]);
        for (int c : {1, 3, 5}) want1.push_back(b[r * 6 + c]);
    }
    ref::check_close(side, want1, {2, 6}, 0, 0);
}

TEST_CASE("stack at every position, rank 0, and strided inputs") {
    F a = ref::values(6, 20), b = ref::values(6, 21);
    Tensor ta = ref::tensor(a, {2, 3}), tb = ref::tensor(b, {2, 3});
    for (int axis : {0, 1, 2, -1}) {
        INFO("axis " << axis);
        int ax = axis < 0 ? axis + 3 : axis;
        Shape so{2, 3};
        so.insert(so.begin() + ax, 2);
        D want = gather(so, [&](const std::vector<int64_t> &k) {
            std::vector<int64_t> inner = k;
            int64_t which = inner[ax];
            inner.erase(inner.begin() + ax);
            return (double)(which == 0 ? a : b)[flat(inner, {2, 3})];
        });
        ref::check_close(stack({ta, tb}, axis), want, so, 0, 0);
    }
    ref::check_close(stack({scalar(1), scalar(2), scalar(3)}), D{1, 2, 3}, {3}, 0, 0);
    // a transposed and a step-sliced operand
    Tensor st = stack({ta.transpose(0, 1), ref::tensor(b, {6}).slice(0, 0, 6, 2).reshape({3, 1}).expand({3, 2})});
    D want;
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 2; ++c) want.push_back(a[c * 3 + r]);
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 2; ++c) want.push_back(b[r * 2]);
    ref::check_close(st, want, {2, 3, 2}, 0, 0);
}

TEST_CASE("split into views of the given sizes, zero-size pieces included") {
    Tensor x = arange(0.0, 24).reshape({4, 6});
    std::vector<Tensor> pieces = split(x, {1, 0, 2, 3}, 1);
    REQUIRE(pieces.size() == 4);
    CHECK(pieces[0].shape() == Shape{4, 1});
    CHECK(pieces[1].shape() == Shape{4, 0});
    CHECK(pieces[2].to_vector<float>() == F{1, 2, 7, 8, 13, 14, 19, 20});
    CHECK(pieces[3].to_vector<float>() == F{3, 4, 5, 9, 10, 11, 15, 16, 17, 21, 22, 23});
    for (const Tensor &p : pieces) CHECK(p.shares_storage(x));
    std::vector<Tensor> rows = split(x, {3, 1});
    CHECK(rows[1].to_vector<float>() == F{18, 19, 20, 21, 22, 23});
    // a transposed input split along its last axis
    std::vector<Tensor> cols = split(x.transpose(0, 1), {2, 2}, -1);  // [6,4] -> 2 x [6,2]
    CHECK(cols[1].to_vector<float>() == F{12, 18, 13, 19, 14, 20, 15, 21, 16, 22, 17, 23});
    CHECK(split(zeros({0, 2}), {0}).at(0).shape() == Shape{0, 2});
}

TEST_CASE("pad with a value on leading axes, strided inputs and integers") {
    F v = ref::values(6, 30);
    Tensor x = ref::tensor(v, {2, 3});
    Tensor p = pad(x, {1, 0, 2, 1}, -7);
    Shape so{3, 6};
    D want = gather(so, [&](const std::vector<int64_t> &k) {
        int64_t r = k[0] - 1, c = k[1] - 2;
        return r >= 0 && r < 2 && c >= 0 && c < 3 ? (double)v[r * 3 + c] : -7.0;
    });
    ref::check_close(p, want, so, 0, 0);
    // only the first axis
    ref::check_close(
        pad(x, {0, 2}),
        gather({4, 3}, [&](const std::vector<int64_t> &k) { return k[0] < 2 ? (double)v[k[0] * 3 + k[1]] : 0.0; }),
        {4, 3}, 0, 0);
    // no padding at all is a copy
    ref::check_close(pad(x, {}), ref::to_double(v), {2, 3}, 0, 0);
    // transposed input
    Tensor pt = pad(x.transpose(0, 1), {0, 1, 1, 0}, 0.5);  // [3,2] -> [4,3]
    ref::check_close(pt,
                     gather({4, 3},
                            [&](const std::vector<int64_t> &k) {
                                int64_t r = k[0], c = k[1] - 1;
                                return r < 3 && c >= 0 ? (double)v[c * 3 + r] : 0.5;
                            }),
                     {4, 3}, 0, 0);
    // step-sliced input
    Tensor ps = pad(arange(0.0, 6).slice(0, 1, 6, 2), {2, 1});  // 1 3 5
    CHECK(ps.to_vector<float>() == F{0, 0, 1, 3, 5, 0});
    Tensor pi = pad(from_vector(std::vector<int32_t>{4, 5}, {2}), {1, 1}, 9);
    CHECK(pi.to_vector<int32_t>() == std::vector<int32_t>{9, 4, 5, 9});
    CHECK(pad(zeros({0, 2}), {1, 1}).to_vector<float>() == F{0, 0, 0, 0});
    CHECK(pad(scalar(3), {}).item<float>() == 3);
}

TEST_CASE("narrow is a view with negative starts and zero length") {
    Tensor x = arange(0.0, 12).reshape({3, 4});
    Tensor n = narrow(x, 1, 1, 2);
    CHECK(n.shares_storage(x));
    CHECK(n.to_vector<float>() == F{1, 2, 5, 6, 9, 10});
    CHECK(narrow(x, 0, -1, 1).to_vector<float>() == F{8, 9, 10, 11});
    CHECK(narrow(x, -1, 3, 0).shape() == Shape{3, 0});
    CHECK(narrow(x.transpose(0, 1), 0, 2, 2).to_vector<float>() == F{2, 6, 10, 3, 7, 11});
    CHECK(narrow(x.slice(1, 0, 4, 2), 1, 1, 1).to_vector<float>() == F{2, 6, 10});
}
