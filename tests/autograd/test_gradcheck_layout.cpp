// Finite-difference gradient checks of the layout ops: concat, stack, split,
// pad, narrow, on contiguous and non-contiguous inputs.
#include "gradcheck.hpp"

using namespace tinyfin;
using gradcheck::Input;
using gradcheck::Layout;
using V = std::vector<Tensor>;

TEST_CASE("gradcheck concat and stack") {
    gradcheck::check("concat axis 1",
                     [](const V &x) {
                         return concat({x[0], x[1], x[2]}, 1);
                     },
                     {gradcheck::random({2, 3}, 1), gradcheck::random({2, 1}, 2), gradcheck::random({2, 2}, 3)});
    gradcheck::check("concat axis 0, transposed and strided",
                     [](const V &x) {
                         return concat({x[0], x[1]}, 0);
                     },
                     {gradcheck::random({2, 3}, 4, -1, 1, Layout::transposed),
                      gradcheck::random({3, 3}, 5, -1, 1, Layout::strided)});
    gradcheck::check("concat of one leaf twice",
                     [](const V &x) {
                         return concat({x[0], x[0] * 2.0}, -1);
                     },
                     {gradcheck::random({3, 2}, 6)});
    gradcheck::check("concat with a zero-size piece",
                     [](const V &x) {
                         return concat({x[0], zeros({0, 2}), x[1]});
                     },
                     {gradcheck::random({1, 2}, 7), gradcheck::random({2, 2}, 8)});
    for (int axis : {0, 1, 2})
        gradcheck::check(
            "stack axis " + std::to_string(axis),
            [axis](const V &x) {
                return stack({x[0], x[1]}, axis);
            },
            {gradcheck::random({2, 3}, 10 + axis), gradcheck::random({2, 3}, 20 + axis, -1, 1, Layout::transposed)});
    gradcheck::check("stack of rank-0 leaves",
                     [](const V &x) {
                         return stack({x[0], x[1], x[0]});
                     },
                     {gradcheck::random({}, 30), gradcheck::random({}, 31)});
}

TEST_CASE("gradcheck split, pad, narrow") {
    Tensor w0 = from_vector(std::vector<float>{0.5f, -1.5f, 2}, {3});
    gradcheck::check("split along axis 1, pieces weighted differently",
                     [&](const V &x) {
                         std::vector<Tensor> p = split(x[0], {1, 3, 0, 2}, 1);
                         return add(add(sum(p[0] * 3.0), sum(p[1] * w0)), sum(square(p[3])));
                     },
                     {gradcheck::random({2, 6}, 40)});
    gradcheck::check("split of a transposed leaf",
                     [](const V &x) {
                         return split(x[0], {1, 3}, 1).at(1) * 2.0;
                     },
                     {gradcheck::random({3, 4}, 41, -1, 1, Layout::transposed)});
    gradcheck::check("pad both axes with a value",
                     [](const V &x) {
                         return pad(x[0], {1, 2, 0, 1}, 0.5);
                     },
                     {gradcheck::random({2, 3}, 50)});
    gradcheck::check("pad of a strided leaf",
                     [](const V &x) {
                         return pad(x[0], {0, 0, 2, 1}) * x[1];
                     },
                     {gradcheck::random({3, 2}, 51, -1, 1, Layout::strided), gradcheck::random({5}, 52)});
    gradcheck::check("narrow", [](const V &x) { return narrow(x[0], 1, 1, 2); }, {gradcheck::random({3, 4}, 60)});
    gradcheck::check("narrow with a negative start of a transposed leaf",
                     [](const V &x) { return narrow(x[0], 0, -2, 2); },
                     {gradcheck::random({4, 3}, 61, -1, 1, Layout::transposed)});
}
