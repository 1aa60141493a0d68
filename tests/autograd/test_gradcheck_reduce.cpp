// Finite-difference gradient checks of the reductions (sum, mean, max, min,
// var) over axes with and without keepdim, and of matmul (1-D, 2-D, batched
// with broadcast batch dims, non-contiguous operands).
#include "gradcheck.hpp"

using namespace tinyfin;
using gradcheck::Input;
using gradcheck::Layout;
using V = std::vector<Tensor>;

namespace {

const std::vector<std::vector<int>> axis_sets{{}, {0}, {2}, {-2}, {0, 2}, {0, 1, 2}};

std::string axes_str(const std::vector<int> &axes) { return shape_str(Shape(axes.begin(), axes.end())); }

}  // namespace

TEST_CASE("gradcheck sum, mean and var over axes, keepdim or not") {
    uint64_t seed = 300;
    for (const auto &axes : axis_sets)
        for (bool keepdim : {false, true}) {
            std::string where = " axes " + axes_str(axes) + (keepdim ? " keepdim" : "");
            Input in = gradcheck::random({2, 3, 4}, seed++);
            gradcheck::check("sum" + where, [&](const V &x) { return sum(x[0], axes, keepdim); }, {in});
            gradcheck::check("mean" + where, [&](const V &x) { return mean(x[0], axes, keepdim); }, {in});
            gradcheck::check("var correction 1" + where, [&](const V &x) { return var(x[0], axes, 1, keepdim); }, {in});
            gradcheck::check("var correction 0" + where, [&](const V &x) { return var(x[0], axes, 0, keepdim); }, {in});
        }
    gradcheck::check("sum of a transposed leaf", [](const V &x) { return sum(x[0], {1}); },
                     {gradcheck::random({3, 4}, 320, -1, 1, Layout::transposed)});
    gradcheck::check("mean of a strided leaf", [](const V &x) { return mean(x[0], {0}, true); },
                     {gradcheck::random({3, 4}, 321, -1, 1, Layout::strided)});
    gradcheck::check("var of a transposed leaf", [](const V &x) { return var(x[0], {-1}); },
                     {gradcheck::random({3, 4}, 322, -1, 1, Layout::transposed)});
    gradcheck::check("sum of a rank-0 leaf", [](const V &x) { return sum(x[0]) * x[0]; }, {gradcheck::random({}, 323)});
}

TEST_CASE("gradcheck max and min over axes (no ties)") {
    uint64_t seed = 400;
    for (const auto &axes : axis_sets)
        for (bool keepdim : {false, true}) {
            std::string where = " axes " + axes_str(axes) + (keepdim ? " keepdim" : "");
            Input in = gradcheck::spaced({2, 3, 4}, seed++);
            gradcheck::check("max" + where, [&](const V &x) { return max(x[0], axes, keepdim); }, {in});
            gradcheck::check("min" + where, [&](const V &x) { return min(x[0], axes, keepdim); }, {in});
        }
    gradcheck::check("max of a transposed leaf", [](const V &x) { return max(x[0], {0}); },
                     {gradcheck::spaced({3, 4}, 420, 0.05, Layout::transposed)});
    gradcheck::check("min of a strided leaf", [](const V &x) { return min(x[0], {1}); },
                     {gradcheck::spaced({3, 4}, 421, 0.05, Layout::strided)});
}

TEST_CASE("gradcheck matmul: 1-D, 2-D, batched broadcast, non-contiguous") {
    auto mm = [](const V &x) { return matmul(x[0], x[1]); };
    gradcheck::check("matmul [4] . [4]", mm, {gradcheck::random({4}, 500), gradcheck::random({4}, 501)});
    gradcheck::check("matmul [3] x [3,4]", mm, {gradcheck::random({3}, 502), gradcheck::random({3, 4}, 503)});
    gradcheck::check("matmul [2,3] x [3]", mm, {gradcheck::random({2, 3}, 504), gradcheck::random({3}, 505)});
    gradcheck::check("matmul [3,4] x [4,2]", mm, {gradcheck::random({3, 4}, 506), gradcheck::random({4, 2}, 507)});
    gradcheck::check("matmul [2,1,3,4] x [3,4,2]", mm,
                     {gradcheck::random({2, 1, 3, 4}, 508), gradcheck::random({3, 4, 2}, 509)});
    gradcheck::check("matmul [2,3,4] x [4,2] (batch broadcast)", mm,
                     {gradcheck::random({2, 3, 4}, 510), gradcheck::random({4, 2}, 511)});
    gradcheck::check("matmul [3] x [2,3,4]", mm, {gradcheck::random({3}, 512), gradcheck::random({2, 3, 4}, 513)});
    gradcheck::check("matmul [2,3,4] x [4]", mm, {gradcheck::random({2, 3, 4}, 514), gradcheck::random({4}, 515)});
    gradcheck::check("matmul transposed x strided", mm,
                     {gradcheck::random({3, 4}, 516, -1, 1, Layout::transposed),
                      gradcheck::random({4, 3}, 517, -1, 1, Layout::strided)});
    gradcheck::check("matmul of permuted batches",
                     [](const V &x) {
                         return matmul(x[0].permute({1, 0, 2}), x[1]);
                     },
                     {gradcheck::random({3, 2, 4}, 518), gradcheck::random({2, 4, 3}, 519)});
    gradcheck::check("matmul x x^T (one leaf on both sides)",
                     [](const V &x) { return matmul(x[0], x[0].transpose(0, 1)); }, {gradcheck::random({3, 4}, 520)});
}
