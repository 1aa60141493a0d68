// The out= forms of the binary ops and comparisons (add(a, b, out)): the same values as the
// allocating forms, into any view with distinct elements, with typed errors for a wrong shape,
// dtype or device, numpy's semantics when out shares memory with an input, and no autograd.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;
using F = std::vector<float>;

namespace {

struct BinaryOp {
    const char *name;
    Tensor (*allocating)(const Tensor &, const Tensor &);
    void (*into)(const Tensor &, const Tensor &, const Tensor &);
};

// Every op with an out= form, from the header's own list.
#define TEST_OUT_OP(fn, SYM)                                                                                           \
    BinaryOp{#fn, static_cast<Tensor (*)(const Tensor &, const Tensor &)>(&tinyfin::fn),                               \
             static_cast<void (*)(const Tensor &, const Tensor &, const Tensor &)>(&tinyfin::fn)},
const std::vector<BinaryOp> out_ops = {TINYFIN_BINARY_OUT_OPS(TEST_OUT_OP)};
#undef TEST_OUT_OP

bool is_comparison(const BinaryOp &op) {
    const std::string name = op.name;
    return name == "eq" || name == "ne" || name == "lt" || name == "le" || name == "gt" || name == "ge";
}

// Values as f32 whatever the dtype, for comparing results.
F values(const Tensor &t) { return t.to(DType::f32).to_vector<float>(); }

Device cpu() { return Device::parse("cpu"); }

}  // namespace

TEST_CASE("the out= list covers the binary ops and comparisons") {
    std::vector<std::string> names;
    for (const BinaryOp &op : out_ops) names.push_back(op.name);
    for (const char *expected : {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt",
                                 "ge", "relu_backward", "gelu_backward"})
        CHECK(std::find(names.begin(), names.end(), expected) != names.end());
    CHECK(names.size() == 15);
}

TEST_CASE("out= gives the allocating form's values, broadcasting included") {
    // Positive bases keep pow real; some equal elements exercise the comparisons' ties.
    Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    const std::vector<std::pair<Tensor, Tensor>> pairs = {
        {a, from_vector<float>({6, 2, 4, 3, 5, 1}, {2, 3})},  // same shapes
        {a, from_vector<float>({2, 2, 0.5f}, {3})},  // a row
        {from_vector<float>({3, 1}, {2, 1}), a},  // a column on the left
        {from_vector<float>({1, 2}, {2, 1}), from_vector<float>({2, 1, 3}, {1, 3})},  // both
        {a, scalar(3)},  // rank 0
        {scalar(2), scalar(5)},
    };
    for (const BinaryOp &op : out_ops) {
        for (const auto &pair : pairs) {
            const auto &[x, y] = pair;
            CAPTURE(op.name);
            const std::string x_shape = shape_str(x.shape()), y_shape = shape_str(y.shape());
            CAPTURE(x_shape);  // not the bindings: clang 14 cannot capture them
            CAPTURE(y_shape);
            Tensor expected = op.allocating(x, y);
            Tensor out = full(expected.shape(), -7, expected.dtype());
            op.into(x, y, out);
            CHECK(out.dtype() == (is_comparison(op) ? DType::boolean : DType::f32));
            CHECK(values(out) == values(expected));
        }
    }
}

TEST_CASE("out= with integer operands") {
    Tensor a = from_vector<int32_t>({7, -3, 10}, {3}), b = from_vector<int32_t>({2, 4, 10}, {3});
    Tensor out = empty({3}, DType::i32);
    add(a, b, out);
    CHECK(out.to_vector<int32_t>() == std::vector<int32_t>{9, 1, 20});
    Tensor mask = empty({3}, DType::boolean);
    ge(a, b, mask);
    CHECK(mask.to_vector<bool>() == std::vector<bool>{true, false, true});
}

TEST_CASE("out= writes into strided views and leaves the other elements alone") {
    Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor b = from_vector<float>({10, 20, 30}, {3});

    SUBCASE("a transposed view") {
        Tensor base = full({3, 2}, -1);
        Tensor out = base.transpose(0, 1);  // [2,3] over [3,2] storage
        CHECK_FALSE(out.is_contiguous());
        add(a, b, out);
        CHECK(values(out) == F{11, 22, 33, 14, 25, 36});
        CHECK(values(base) == F{11, 14, 22, 25, 33, 36});
    }
    SUBCASE("every other element of a row") {
        Tensor base = full({2, 6}, -1);
        Tensor out = base.slice(1, 1, 6, 2);  // columns 1, 3, 5
        mul(a, b, out);
        CHECK(values(out) == F{10, 40, 90, 40, 100, 180});
        CHECK(values(base) == F{-1, 10, -1, 40, -1, 90, -1, 40, -1, 100, -1, 180});
    }
    SUBCASE("a comparison into a slice of a bool tensor") {
        Tensor base = zeros({4}, DType::boolean);
        lt(from_vector<float>({1, 5}, {2}), from_vector<float>({2, 2}, {2}), base.slice(0, 1, 3));
        CHECK(base.to_vector<bool>() == std::vector<bool>{false, true, false, false});
    }
    SUBCASE("a zero-size out") {
        Tensor out = empty({0, 3});
        add(empty({0, 3}), b, out);
        CHECK(out.numel() == 0);
    }
}

TEST_CASE("out= refuses a wrong shape, dtype or device with typed errors") {
    Tensor a = zeros({2, 3}), b = zeros({3});
    CHECK_THROWS_WITH_AS(add(a, b, zeros({3})),
                         "ShapeError: add: out has shape [3] but [2,3] and [3] broadcast to [2,3]; "
                         "pass an out of that shape",
                         ShapeError);
    // out is never resized and never broadcast, even when the values would fit.
    CHECK_THROWS_AS(add(a, b, zeros({1, 2, 3})), ShapeError);
    CHECK_THROWS_AS(sub(zeros({3}), zeros({3}), zeros({1, 3})), ShapeError);
    // The inputs' own mismatch keeps the allocating form's message.
    CHECK_THROWS_WITH_AS(mul(zeros({2}), zeros({3}), zeros({2})),
                         doctest::Contains("mul: shapes [2] and [3] cannot broadcast"), ShapeError);

    CHECK_THROWS_WITH_AS(add(a, b, zeros({2, 3}, DType::i32)),
                         "DTypeError: add: out is i32 but the result of f32 operands is f32; pass an "
                         "out of dtype f32",
                         DTypeError);
    CHECK_THROWS_WITH_AS(eq(a, b, zeros({2, 3})), doctest::Contains("pass an out of dtype bool"), DTypeError);
    CHECK_THROWS_WITH_AS(add(a, zeros({3}, DType::i32), zeros({2, 3})),
                         doctest::Contains("add: dtypes f32 and i32 differ"), DTypeError);

    CHECK_THROWS_WITH_AS(add(a, b, Tensor()), doctest::Contains("add: the tensor is undefined"), DeviceError);
    CHECK_THROWS_WITH_AS(add(a, b, zeros({1, 3}).expand({2, 3})),
                         doctest::Contains("add: out (shape [2,3], strides [0,1]) repeats elements"), ValueError);
}

TEST_CASE("out= on another device than its inputs is a DeviceError") {
    std::vector<std::string> names = available_backends();
    std::string other;
    for (const std::string &name : names)
        if (name != "cpu") other = name;
    if (other.empty()) {
        MESSAGE("only cpu is loaded: nothing to mismatch");
        return;
    }
    Device there = Device::parse(other);
    Tensor a = ones({3}, DType::f32, cpu()), b = ones({3}, DType::f32, cpu());
    const std::string expected =
        "add: out is on " + there.str() + ", a on cpu and b on cpu; the out= form runs on out's device";
    CHECK_THROWS_WITH_AS(add(a, b, zeros({3}, DType::f32, there)), doctest::Contains(expected.c_str()), DeviceError);
    CHECK_THROWS_AS(add(a, ones({3}, DType::f32, there), zeros({3}, DType::f32, cpu())), DeviceError);
}

TEST_CASE("out may share memory with an input: the result is as if computed first") {
    SUBCASE("in place, out is a") {
        Tensor x = from_vector<float>({1, 2, 3}, {3});
        add(x, from_vector<float>({10, 20, 30}, {3}), x);
        CHECK(values(x) == F{11, 22, 33});
    }
    SUBCASE("all three the same tensor") {
        Tensor x = from_vector<float>({1, 2, 3}, {3});
        mul(x, x, x);
        CHECK(values(x) == F{1, 4, 9});
    }
    SUBCASE("out is b, with a broadcast") {
        Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2});
        sub(from_vector<float>({10, 100}, {2}), x, x);
        CHECK(values(x) == F{9, 98, 7, 96});
    }
    SUBCASE("a shifted view of out") {
        // In order, element by element, x[i+1] = x[i] * 10 would smear x[0] along the row.
        Tensor x = arange(1.0, 6);  // 1 2 3 4 5
        mul(x.slice(0, 0, 4), scalar(10), x.slice(0, 1, 5));
        CHECK(values(x) == F{1, 10, 20, 30, 40});
    }
    SUBCASE("the transpose of out") {
        Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2});
        add(x.transpose(0, 1), x, x);
        CHECK(values(x) == F{2, 5, 5, 8});
    }
    SUBCASE("a comparison into a bool input") {
        Tensor m = from_vector<float>({1, 0, 1}, {3}).to(DType::boolean);
        ne(m, from_vector<float>({1, 1, 1}, {3}).to(DType::boolean), m);
        CHECK(m.to_vector<bool>() == std::vector<bool>{false, true, false});
    }
    SUBCASE("disjoint parts of one storage need no copy and stay disjoint") {
        Tensor x = arange(0.0, 6);  // 0..5
        add(x.slice(0, 0, 2), x.slice(0, 2, 4), x.slice(0, 4, 6));
        CHECK(values(x) == F{0, 1, 2, 3, 2, 4});
    }
}

TEST_CASE("out= records no autograd history and refuses inputs that need it") {
    Tensor w = ones({3}).requires_grad_();
    Tensor x = from_vector<float>({1, 2, 3}, {3});
    Tensor out = zeros({3});
    CHECK_THROWS_WITH_AS(add(w, x, out),
                         "AutogradError: add: the out= form records no autograd history and a "
                         "requires grad; call add(a, b) to get a gradient, or run it under NoGradGuard",
                         AutogradError);
    CHECK_THROWS_WITH_AS(mul(x, w, out), doctest::Contains("and b requires grad"), AutogradError);
    CHECK_THROWS_WITH_AS(add(x, x, w), doctest::Contains("and out requires grad"), AutogradError);
    CHECK(values(out) == F{0, 0, 0});  // refused before writing

    SUBCASE("under NoGradGuard it runs, e.g. an in-place parameter update") {
        NoGradGuard no_grad;
        sub(w, x, w);
        CHECK(values(w) == F{0, -1, -2});
        CHECK(w.requires_grad());
        CHECK(w.is_leaf());
        add(w, x, out);
        CHECK_FALSE(out.requires_grad());
    }
    SUBCASE("a result of a recorded op is refused as out while grad mode is on") {
        Tensor y = w * 2.0;
        CHECK_THROWS_AS(add(x, x, y), AutogradError);
    }
}

TEST_CASE("out= allocates nothing and runs one op") {
    Tensor a = ones({16}, DType::f32, cpu()), b = ones({16}, DType::f32, cpu());
    Tensor out = empty({16}, DType::f32, cpu());
    add(a, b, out);  // warm
    reset_stats();
    for (int i = 0; i < 5; ++i) add(a, b, out);
    Stats s = stats();
    const Stats::Backend *on_cpu = s.backend("cpu");
    REQUIRE(on_cpu != nullptr);
    CHECK(on_cpu->ops == 5);
    CHECK(on_cpu->allocations == 0);
    CHECK(values(out) == F(16, 2.f));
}

TEST_CASE("the allocating forms keep their behaviour on the equal-shape fast path") {
    // Equal shapes on two devices still meet on one; strided equal shapes still read strides.
    Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
    CHECK(values(add(a.transpose(0, 1), a)) == F{2, 5, 5, 8});
    for (const std::string &name : available_backends()) {
        Tensor there = a.to(Device::parse(name));
        CAPTURE(name);
        CHECK(values(add(there, a.to(cpu()))) == F{2, 4, 6, 8});
        CHECK(values(lt(there, a.to(cpu()).transpose(0, 1))) == F{0, 1, 0, 0});
    }
}
