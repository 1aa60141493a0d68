// cumsum (ONNX CumSum, torch.cumsum): values against a float64 host scan and hand-computed sums,
// every axis with exclusive and reverse, strided inputs, f16/bf16 rounded once, integer wrap,
// errors, and the gradient against central differences.
#include <cstdint>
#include <limits>

#include "../autograd/gradcheck.hpp"
#include "reference.hpp"

using namespace tinyfin;
using ref::D;
using ref::F;

namespace {

// The scan along axis of a row-major host tensor, in double.
D cumsum_ref(const D &x, const Shape &shape, int axis, bool exclusive, bool reverse) {
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= shape[i];
    for (std::size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
    const int64_t n = shape[axis];
    D y(x.size());
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
            double acc = 0;
            for (int64_t k = 0; k < n; ++k) {
                const int64_t at = (o * n + (reverse ? n - 1 - k : k)) * inner + i;
                if (!exclusive) acc += x[at];
                y[at] = acc;
                if (exclusive) acc += x[at];
            }
        }
    return y;
}

}  // namespace

TEST_CASE("cumsum: hand-computed sums, inclusive and exclusive, forward and reverse") {
    const Tensor x = from_vector(F{1, 2, 3, 4}, {4});
    CHECK(cumsum(x, 0).to_vector<float>() == F{1, 3, 6, 10});
    CHECK(cumsum(x, 0, true).to_vector<float>() == F{0, 1, 3, 6});
    CHECK(cumsum(x, 0, false, true).to_vector<float>() == F{10, 9, 7, 4});
    CHECK(cumsum(x, -1, true, true).to_vector<float>() == F{9, 7, 4, 0});
    const Tensor m = from_vector(F{1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(cumsum(m, 0).to_vector<float>() == F{1, 2, 3, 5, 7, 9});
    CHECK(cumsum(m, 1).to_vector<float>() == F{1, 3, 6, 4, 9, 15});
}

TEST_CASE("cumsum: every axis and flag against a float64 scan, contiguous and strided") {
    const Shape shape{2, 3, 5};
    const F v = ref::values(30, 7);
    const D want_in = ref::to_double(v);
    for (int axis = 0; axis < 3; ++axis)
        for (int flags = 0; flags < 4; ++flags) {
            const bool exclusive = flags & 1, reverse = flags & 2;
            INFO("axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
            const D want = cumsum_ref(want_in, shape, axis, exclusive, reverse);
            ref::check_close(cumsum(ref::tensor(v, shape), axis, exclusive, reverse), want, shape, 1e-6, 1e-6);
            // The same values through a transposed view: strides the kernel must follow.
            const Tensor t = ref::tensor(v, shape).transpose(0, 2).contiguous().transpose(0, 2);
            REQUIRE(!t.is_contiguous());
            ref::check_close(cumsum(t, axis - 3, exclusive, reverse), want, shape, 1e-6, 1e-6);
        }
}

TEST_CASE("cumsum: f16 and bf16 are summed exactly and rounded once") {
    const Shape shape{3, 17};
    const F v = ref::values(51, 11);
    for (const ref::Half &half : ref::halves) {
        auto [x, exact_in] = ref::half_input(v, shape, half.dtype);
        const Tensor y = cumsum(x, 1);
        CHECK(y.dtype() == half.dtype);
        // Once-rounded: within half an ulp of the exact sum of the (already rounded) inputs.
        ref::check_close(y, cumsum_ref(exact_in, shape, 1, false, false), shape, half.tol / 4, half.tol / 4);
    }
}

TEST_CASE("cumsum: integers are exact and wrap like add") {
    const Tensor a = from_vector(std::vector<int32_t>{std::numeric_limits<int32_t>::max(), 1, 5}, {3});
    CHECK(cumsum(a, 0).to_vector<int32_t>() == std::vector<int32_t>{std::numeric_limits<int32_t>::max(),
                                                                    std::numeric_limits<int32_t>::min(),
                                                                    std::numeric_limits<int32_t>::min() + 5});
    const Tensor b = from_vector(std::vector<int64_t>{3, -1, 4, -1, 5}, {5});
    CHECK(cumsum(b, 0, true, true).to_vector<int64_t>() == std::vector<int64_t>{7, 8, 4, 5, 0});
    CHECK(cumsum(b, 0).dtype() == DType::i64);
}

TEST_CASE("cumsum: rank 0, empty axes and errors") {
    const Tensor s = from_vector(F{2.5f}, {});
    CHECK(cumsum(s, 0).to_vector<float>() == F{2.5f});
    CHECK(cumsum(s, -1, true).to_vector<float>() == F{0});
    CHECK(cumsum(zeros({2, 0, 3}), 1).shape() == Shape{2, 0, 3});
    CHECK(cumsum(zeros({2, 0, 3}), 2).numel() == 0);
    CHECK_THROWS_AS(cumsum(from_vector(F{1, 2}, {2}), 1), ShapeError);
    CHECK_THROWS_AS(cumsum(s, 1), ShapeError);
    CHECK_THROWS_AS(cumsum(cast(from_vector(F{1, 0}, {2}), DType::boolean), 0), DTypeError);
}

TEST_CASE("cumsum: gradient against central differences") {
    using V = std::vector<Tensor>;
    for (int flags = 0; flags < 4; ++flags) {
        const bool exclusive = flags & 1, reverse = flags & 2;
        for (int axis : {0, 1, -1}) {
            const std::string where =
                " axis " + std::to_string(axis) + (exclusive ? " exclusive" : "") + (reverse ? " reverse" : "");
            gradcheck::check("cumsum" + where, [&](const V &x) { return cumsum(x[0], axis, exclusive, reverse); },
                             {gradcheck::random({3, 4, 2}, 17 + flags)});
        }
    }
    gradcheck::Input t = gradcheck::random({4, 5}, 23);
    t.layout = gradcheck::Layout::transposed;
    gradcheck::check("cumsum transposed", [](const V &x) { return cumsum(x[0], 1); }, {t});
}
