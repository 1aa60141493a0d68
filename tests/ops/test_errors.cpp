// Bad input to the full op set: each case throws the typed exception whose
// message names the op and the offending values, and the process keeps working.
#include "reference.hpp"

using namespace tinyfin;
using doctest::Contains;

namespace {

Tensor i64(std::vector<int64_t> v, const Shape &shape) { return from_vector(v, shape); }

// A small computation that must still work after an error.
void still_working() { CHECK(sum(ones({2, 2}) * 2.0).item<float>() == 8); }

// Runs op and reads its result back: a GPU backend finds a bad index inside its kernel and
// reports it at the next read-back, so the ValueError may come from either step. The message
// names the op; on cpu, where the op itself throws, it names the offending value too.
void check_out_of_range(const std::function<Tensor()> &op, const std::string &name, const std::string &value) {
    std::string what;
    try {
        (void)op().to_vector<float>();
    } catch (const ValueError &e) {
        what = e.what();
    }
    INFO("message: " << what);
    CHECK(what.find(name) != std::string::npos);
    if (default_device().backend == "cpu") CHECK(what.find(" " + value + " ") != std::string::npos);
}

}  // namespace

TEST_CASE("out-of-range embedding indices") {
    Tensor w = ones({5, 3});
    check_out_of_range([&] { return embedding(w, i64({0, 7, 1}, {3})); }, "embedding", "7");
    check_out_of_range([&] { return embedding(w, from_vector(std::vector<int32_t>{-1}, {1})); }, "embedding", "-1");
    check_out_of_range([&] { return embedding(w, i64({5}, {1})); }, "embedding", "5");
    still_working();
    CHECK(embedding(w, i64({4}, {1})).to_vector<float>() == ref::F{1, 1, 1});
}

TEST_CASE("out-of-range labels in cross_entropy and one_hot") {
    Tensor logits = zeros({3, 4});
    check_out_of_range([&] { return cross_entropy(logits, i64({0, 4, 1}, {3})); }, "cross_entropy", "4");
    check_out_of_range(
        [&] {
            return cross_entropy(logits, i64({0, -3, 1}, {3}), Reduction::sum);
        },
        "cross_entropy", "-3");
    check_out_of_range(
        [&] {
            return cross_entropy(logits, i64({0, 1, 9}, {3}), Reduction::none);
        },
        "cross_entropy", "9");
    // -100 is only ignored while it is the ignore_index
    check_out_of_range(
        [&] {
            return cross_entropy(logits, i64({0, -100, 1}, {3}), Reduction::mean, 2);
        },
        "cross_entropy", "-100");
    check_out_of_range([&] { return one_hot(i64({1, 3}, {2}), 3); }, "one_hot", "3");
    check_out_of_range([&] { return one_hot(from_vector(std::vector<int32_t>{-1}, {1}), 3); }, "one_hot", "-1");
    CHECK_THROWS_WITH_AS(one_hot(i64({0}, {1}), 0), Contains("num_classes must be >= 1, got 0"), ValueError);
    still_working();
}

TEST_CASE("bad conv2d parameters, groups and shapes") {
    Tensor x = ones({1, 3, 5, 5}), w = ones({2, 3, 3, 3});
    Conv2dOptions o;
    o.stride_h = 0;
    CHECK_THROWS_WITH_AS(conv2d(x, w, Tensor(), o), Contains("conv2d: stride and dilation must be >= 1"), ValueError);
    CHECK_THROWS_WITH_AS(conv2d(x, w, Tensor(), o), Contains("stride 0x1"), ValueError);
    o = {};
    o.pad_w = -1;
    CHECK_THROWS_WITH_AS(conv2d(x, w, Tensor(), o), Contains("padding 0x-1"), ValueError);
    o = {};
    o.dilation_w = 0;
    CHECK_THROWS_AS(conv2d(x, w, Tensor(), o), ValueError);
    o = {};
    o.groups = 0;
    CHECK_THROWS_WITH_AS(conv2d(x, w, Tensor(), o), Contains("groups 0"), ValueError);
    o.groups = 2;  // C = 3 is not divisible by 2
    CHECK_THROWS_WITH_AS(conv2d(ones({1, 3, 5, 5}), ones({2, 1, 3, 3}), Tensor(), o), Contains("groups=2"), ShapeError);
    // O = 3 not divisible by groups 2
    CHECK_THROWS_AS(conv2d(ones({1, 4, 5, 5}), ones({3, 2, 3, 3}), Tensor(), o), ShapeError);
    // channel mismatch without groups
    CHECK_THROWS_WITH_AS(conv2d(ones({1, 4, 5, 5}), w), Contains("[1,4,5,5]"), ShapeError);
    // a kernel larger than the padded input
    CHECK_THROWS_WITH_AS(conv2d(ones({1, 3, 2, 2}), w), Contains("smaller than the dilated kernel"), ShapeError);
    o = {};
    o.dilation_h = 3;  // span 7 > 5
    CHECK_THROWS_AS(conv2d(x, w, Tensor(), o), ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(ones({3, 5, 5}), w), Contains("conv2d: input must have rank 4"), ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, ones({2, 3, 3})), Contains("weight must have rank 4"), ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, w, ones({3})), Contains("bias must have shape [2], got [3]"), ShapeError);
    CHECK_THROWS_WITH_AS(conv2d(x, ones({2, 3, 3, 3}, DType::i32)), Contains("dtypes f32 and i32"), DTypeError);
    CHECK_THROWS_AS(conv2d(ones({1, 3, 5, 5}, DType::i32), ones({2, 3, 3, 3}, DType::i32)), DTypeError);
    still_working();
    CHECK(conv2d(x, w).shape() == Shape{1, 2, 3, 3});
}

TEST_CASE("bad pooling parameters") {
    Tensor x = ones({1, 1, 4, 4});
    CHECK_THROWS_WITH_AS(max_pool2d(x, {0, 2}), Contains("max_pool2d: invalid kernel 0x2"), ValueError);
    CHECK_THROWS_WITH_AS(avg_pool2d(x, {2, 2, 0, 0, 2, 0}), Contains("padding 2x0"), ValueError);
    CHECK_THROWS_AS(avg_pool2d(x, {2, 2, -1, 1}), ValueError);
    CHECK_THROWS_WITH_AS(max_pool2d(ones({1, 1, 2, 2}), {3, 3}),
                         Contains("input [1,1,2,2] with padding 0 is smaller than the window of 3 positions"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(avg_pool2d(ones({1, 1, 2, 2}), {3, 3}), Contains("smaller than the"), ShapeError);
    CHECK_THROWS_WITH_AS(max_pool2d(ones({4, 4})), Contains("max_pool2d: input must have rank 4"), ShapeError);
    still_working();
}

TEST_CASE("mismatched shapes name the op and the shapes") {
    CHECK_THROWS_WITH_AS(pow(ones({2}), ones({3})), Contains("pow: shapes [2] and [3] cannot broadcast"), ShapeError);
    CHECK_THROWS_WITH_AS(maximum(ones({2, 3}), ones({2})), Contains("maximum: shapes [2,3] and [2]"), ShapeError);
    CHECK_THROWS_WITH_AS(lt(ones({4}), ones({3})), Contains("lt: shapes"), ShapeError);
    Tensor yes = ones({2}, DType::boolean);
    CHECK_THROWS_WITH_AS(where(yes, ones({3}), ones({1})), Contains("where: shapes"), ShapeError);
    CHECK_THROWS_WITH_AS(layer_norm(ones({2, 3}), 1, ones({4})),
                         Contains("layer_norm: weight must have shape [3], got [4]"), ShapeError);
    CHECK_THROWS_WITH_AS(layer_norm(ones({2, 3}), 3), Contains("last 3 axes of shape [2,3]"), ShapeError);
    CHECK_THROWS_WITH_AS(rms_norm(ones({2, 3}), 1, ones({2})), Contains("rms_norm: weight"), ShapeError);
    CHECK_THROWS_WITH_AS(rope(ones({2, 3}), 100), Contains("rope: input must be [..., T, D] with D even, got [2,3]"),
                         ShapeError);
    CHECK_THROWS_AS(rope(ones({4}), 100), ShapeError);
    CHECK_THROWS_WITH_AS(scaled_dot_product_attention(ones({2, 3, 4}), ones({2, 5, 3}), ones({2, 5, 4})),
                         Contains("scaled_dot_product_attention: shapes q [2,3,4], k [2,5,3]"), ShapeError);
    CHECK_THROWS_AS(scaled_dot_product_attention(ones({2, 3, 4}), ones({2, 5, 4}), ones({2, 4, 4})), ShapeError);
    CHECK_THROWS_AS(scaled_dot_product_attention(ones({2, 3, 4}), ones({3, 5, 4}), ones({3, 5, 4})), ShapeError);
    CHECK_THROWS_AS(scaled_dot_product_attention(ones({3, 4}), ones({3, 4}), ones({3, 4}), ones({2, 3})), ShapeError);
    CHECK_THROWS_WITH_AS(cross_entropy(ones({3, 4}), i64({0, 1}, {2})), Contains("labels must have shape [3]"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(cross_entropy(ones({4}), i64({0}, {1})), Contains("cross_entropy: logits must have rank 2"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(embedding(ones({5}), i64({0}, {1})), Contains("embedding: weight must have rank 2"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(concat({ones({2, 3}), ones({2, 4})}, 0), Contains("concat: f32[2,4] does not match f32[2,3]"),
                         ShapeError);
    CHECK_THROWS_AS(concat({ones({2, 3}), ones({2, 3, 1})}, 0), ShapeError);
    CHECK_THROWS_AS(concat({}, 0), ShapeError);
    CHECK_THROWS_WITH_AS(stack({ones({2}), ones({3})}), Contains("stack: shapes [2] and [3] differ"), ShapeError);
    CHECK_THROWS_WITH_AS(split(ones({5}), {2, 2}), Contains("split: sizes add up to 4"), ShapeError);
    CHECK_THROWS_AS(split(ones({5}), {6, -1}), ShapeError);
    CHECK_THROWS_WITH_AS(pad(ones({2}), {1, 1, 1, 1}), Contains("pad: needs (before, after) pairs for at most 1 axes"),
                         ShapeError);
    CHECK_THROWS_AS(pad(ones({2}), {1}), ShapeError);
    CHECK_THROWS_WITH_AS(pad(ones({2}), {-1, 0}), Contains("negative padding on axis 0"), ShapeError);
    CHECK_THROWS_WITH_AS(narrow(ones({4}), 0, 2, 3), Contains("narrow: [2, 5) is outside axis 0 of shape [4]"),
                         ShapeError);
    CHECK_THROWS_AS(narrow(ones({4}), 1, 0, 1), ShapeError);
    still_working();
}

TEST_CASE("axes out of range and empty reductions") {
    CHECK_THROWS_WITH_AS(softmax(ones({2, 3}), 2), Contains("softmax: axis 2 is out of range for rank 2"), ShapeError);
    CHECK_THROWS_AS(log_softmax(scalar(1)), ShapeError);
    CHECK_THROWS_WITH_AS(argmax(ones({2, 3}), -3), Contains("argmax: axis -3"), ShapeError);
    CHECK_THROWS_WITH_AS(argmin(zeros({2, 0}), 1), Contains("argmin: axis 1 of shape [2,0] is empty"), ShapeError);
    CHECK_THROWS_AS(argmax(scalar(1), 0), ShapeError);
    CHECK_THROWS_WITH_AS(mean(ones({2, 3}), {5}), Contains("mean: axis 5 is out of range for shape [2,3]"), ShapeError);
    CHECK_THROWS_WITH_AS(var(ones({2, 3}), {1, -1}), Contains("var: axis -1 repeated"), ShapeError);
    CHECK_THROWS_WITH_AS(max(zeros({0, 3})), Contains("max: cannot reduce an empty tensor of shape [0,3] over axis 0"),
                         ShapeError);
    CHECK_THROWS_AS(min(zeros({0, 3}), {0}), ShapeError);
    still_working();
}

TEST_CASE("wrong dtypes") {
    CHECK_THROWS_WITH_AS(pow(ones({2}), ones({2}, DType::i32)), Contains("pow: dtypes f32 and i32 differ"), DTypeError);
    CHECK_THROWS_WITH_AS(eq(ones({2}), ones({2}, DType::i64)), Contains("eq: dtypes f32 and i64"), DTypeError);
    CHECK_THROWS_WITH_AS(where(ones({2}), ones({2}), ones({2})), Contains("where: condition must be bool, got f32"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(where(ones({2}, DType::boolean), ones({2}), ones({2}, DType::i32)),
                         Contains("where: dtypes f32 and i32 differ"), DTypeError);
    CHECK_THROWS_WITH_AS(embedding(ones({4, 2}), ones({2})), Contains("embedding: indices must be i32 or i64, got f32"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(cross_entropy(ones({2, 3}), ones({2})), Contains("cross_entropy: labels must be i32 or i64"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(cross_entropy(ones({2, 3}, DType::i32), i64({0, 1}, {2})),
                         Contains("cross_entropy: needs a float tensor, got i32"), DTypeError);
    CHECK_THROWS_WITH_AS(one_hot(ones({2}), 3), Contains("one_hot: labels must be i32 or i64, got f32"), DTypeError);
    CHECK_THROWS_WITH_AS(softmax(ones({3}, DType::i32)), Contains("softmax: needs a float tensor, got i32"),
                         DTypeError);
    CHECK_THROWS_AS(layer_norm(ones({3}, DType::i64), 1), DTypeError);
    CHECK_THROWS_AS(rms_norm(ones({3}, DType::boolean), 1), DTypeError);
    CHECK_THROWS_AS(rope(ones({2, 4}, DType::i32)), DTypeError);
    CHECK_THROWS_WITH_AS(layer_norm(ones({2, 3}), 1, ones({3}, DType::i32)), Contains("layer_norm: dtypes"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(
        scaled_dot_product_attention(ones({2, 3}), ones({2, 3}), ones({2, 3}), ones({2, 2}, DType::i32)),
        Contains("mask dtype i32 differs from q's f32"), DTypeError);
    CHECK_THROWS_AS(scaled_dot_product_attention(ones({2, 3}), ones({2, 3}, DType::i32), ones({2, 3})), DTypeError);
    CHECK_THROWS_WITH_AS(matmul(ones({2, 2}), ones({2, 2}, DType::i32)), Contains("matmul: dtypes f32 and i32"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(concat({ones({2}), ones({2}, DType::i32)}), Contains("concat: i32[2] does not match f32[2]"),
                         ShapeError);
    still_working();
}

TEST_CASE("bad scalar parameters") {
    CHECK_THROWS_WITH_AS(clamp(ones({2}), 1, -1), Contains("clamp: bounds [1.000000, -1.000000] are not an interval"),
                         ValueError);
    CHECK_THROWS_AS(clamp(ones({2}), NAN, 1), ValueError);
    CHECK_THROWS_WITH_AS(rope(ones({2, 4}), 0), Contains("rope: theta must be positive"), ValueError);
    CHECK_THROWS_AS(rope(ones({2, 4}), -5), ValueError);
    still_working();
    CHECK(clamp(ones({2}), 0, 0.5).to_vector<float>() == ref::F{0.5f, 0.5f});
}
