// A table of bad calls across the API: each throws its own exception type with a message that
// names the problem, and the process keeps working afterwards. Run under ASan/LSan by
// scripts/sanitize, which proves the failed calls leak nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <typeinfo>
#include <vector>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

struct BadCall {
    const char *what;
    std::function<void()> call;
    const std::type_info &expected;
    const char *message_part;
};

template <typename E>
const std::type_info &type() {
    return typeid(E);
}

Tensor f32(const Shape &shape) { return ones(shape); }
Tensor i64(const std::vector<int64_t> &values) { return from_vector(values, {static_cast<int64_t>(values.size())}); }
constexpr int64_t petabyte_floats = int64_t(1) << 48;  // 1 PiB of f32

std::vector<BadCall> bad_calls() {
    Conv2dOptions stride0;
    stride0.stride_h = 0;
    Conv2dOptions groups3;
    groups3.groups = 3;
    Pool2dOptions kernel0;
    kernel0.kernel_h = 0;
    Pool2dOptions big_pad;
    big_pad.pad_h = 2;
    Pool2dOptions huge_pad;  // padding * 2 overflows int (found by the op fuzzer)
    huge_pad.kernel_h = 3;
    huge_pad.pad_h = 1261110808;
    return {
        {"broadcast mismatch",
         [] {
             add(f32({2, 3}), f32({4, 3}));
         },
         type<ShapeError>(), "add: shapes [2,3] and [4,3] cannot broadcast"},
        {"matmul inner sizes",
         [] {
             matmul(f32({2, 3}), f32({4, 5}));
         },
         type<ShapeError>(), "matmul: shapes [2,3] and [4,5] do not match: inner dimensions 3 and 4 differ"},
        {"matmul on a scalar", [] { matmul(scalar(1), f32({2})); }, type<ShapeError>(),
         "matmul: operands must have rank >= 1"},
        {"rank above the limit", [] { zeros(Shape(9, 1)); }, type<ShapeError>(), "rank 9 exceeds the limit of 8"},
        // A 0-d tensor has no axis 0 (the ONNX loader's fuzzer reached shape()[0] through Gather).
        {"size of a 0-d tensor", [] { (void)scalar(1).size(0); }, type<ShapeError>(),
         "size: a 0-d tensor has no axis 0"},
        {"size past the rank",
         [] {
             (void)f32({2, 3}).size(2);
         },
         type<ShapeError>(), "out of range for rank 2"},
        {"negative size",
         [] {
             zeros({2, -1});
         },
         type<ShapeError>(), "negative size"},
        {"element count overflow",
         [] {
             empty({int64_t(1) << 40, int64_t(1) << 40});
         },
         type<ShapeError>(), "more elements than fit"},
        {"byte count overflow", [] { empty({int64_t(1) << 62}); }, type<ShapeError>(),
         "[4611686018427387904] of f32 needs more than 2^64 bytes"},
        {"zero-size axis beside huge ones (strides overflow)",
         [] {
             zeros({0, int64_t(1) << 62, 3});
         },
         type<ShapeError>(), "has strides that do not fit in 64 bits"},
        {"reshape to another count",
         [] {
             f32({2, 3}).reshape({4, 2});
         },
         type<ShapeError>(), "reshape: shape [4,2] has 8 elements, the tensor has 6"},
        {"reshape with two -1",
         [] {
             f32({2, 3}).reshape({-1, -1});
         },
         type<ShapeError>(), "reshape: only one -1 allowed"},
        {"reshape numel overflow",
         [] {
             f32({2}).reshape({int64_t(1) << 62, 8});
         },
         type<ShapeError>(), "reshape: shape [4611686018427387904,8] overflows"},
        {"view of a transposed tensor",
         [] {
             f32({2, 3}).transpose(0, 1).view({6});
         },
         type<ShapeError>(), "cannot be viewed as [6] without a copy"},
        {"transpose axis out of range",
         [] {
             f32({2, 3}).transpose(0, 2);
         },
         type<ShapeError>(), "transpose: axis 2 is out of range for rank 2"},
        {"permute not a permutation",
         [] {
             f32({2, 3}).permute({0, 0});
         },
         type<ShapeError>(), "permute: axis 0 repeated"},
        {"slice step 0", [] { f32({4}).slice(0, 0, 4, 0); }, type<ValueError>(), "slice: step must be positive, got 0"},
        {"expand to an incompatible shape",
         [] {
             f32({2, 3}).expand({4, 3});
         },
         type<ShapeError>(), "expand: shape [2,3] cannot expand to [4,3]"},
        {"narrow past the end", [] { narrow(f32({4}), 0, 2, 5); }, type<ShapeError>(),
         "narrow: [2, 7) is outside axis 0"},
        {"narrow with an overflowing length", [] { narrow(f32({4}), 0, 2, std::numeric_limits<int64_t>::max()); },
         type<ShapeError>(), "narrow: [2, 2^63 and beyond) is outside axis 0"},
        {"dtype mismatch", [] { add(f32({2}), zeros({2}, DType::i32)); }, type<DTypeError>(),
         "add: dtypes f32 and i32 differ"},
        {"exp of integers", [] { exp(zeros({2}, DType::i32)); }, type<DTypeError>(),
         "exp: input 0 is i32, but exp takes f32, f16, bf16 there"},
        {"where with a float condition", [] { where(f32({2}), f32({2}), f32({2})); }, type<DTypeError>(),
         "where: condition must be bool, got f32"},
        {"unknown dtype", [] { zeros({2}, static_cast<DType>(42)); }, type<DTypeError>(), "invalid dtype value 42"},
        {"embedding index out of range",
         [] {
             embedding(f32({4, 3}), i64({0, 4}));
         },
         type<ValueError>(), "embedding: index 4 is out of range [0, 4)"},
        {"embedding negative index",
         [] {
             embedding(f32({4, 3}), i64({-1}));
         },
         type<ValueError>(), "embedding: index -1 is out of range [0, 4)"},
        {"embedding float indices",
         [] {
             embedding(f32({4, 3}), f32({2}));
         },
         type<DTypeError>(), "embedding: indices must be i32 or i64, got f32"},
        {"cross_entropy label out of range",
         [] {
             cross_entropy(f32({2, 3}), i64({0, 3}));
         },
         type<ValueError>(), "label 3 of row 1 is out of range [0, 3)"},
        {"cross_entropy label count",
         [] {
             cross_entropy(f32({2, 3}), i64({0, 1, 2}));
         },
         type<ShapeError>(), "labels must have shape [2] for logits [2,3], got [3]"},
        {"one_hot label out of range",
         [] {
             one_hot(i64({0, 5}), 5);
         },
         type<ValueError>(), "one_hot: label 5 is out of range [0, 5)"},
        {"conv2d channel mismatch",
         [] {
             conv2d(f32({1, 3, 5, 5}), f32({2, 4, 3, 3}));
         },
         type<ShapeError>(), "conv2d: input [1,3,5,5] and weight [2,4,3,3] do not fit groups=1"},
        {"conv2d stride 0",
         [=] {
             conv2d(f32({1, 3, 5, 5}), f32({2, 3, 3, 3}), Tensor(), stride0);
         },
         type<ValueError>(), "conv2d: stride and dilation must be >= 1"},
        {"conv2d groups not dividing channels",
         [=] {
             conv2d(f32({1, 4, 5, 5}), f32({2, 1, 3, 3}), Tensor(), groups3);
         },
         type<ShapeError>(), "do not fit groups=3"},
        {"conv2d kernel larger than the input",
         [] {
             conv2d(f32({1, 1, 2, 2}), f32({1, 1, 3, 3}));
         },
         type<ShapeError>(), "is smaller than the dilated kernel"},
        {"conv2d with an empty kernel",
         [] {
             conv2d(f32({1, 1, 4, 4}), f32({1, 1, 0, 3}));
         },
         type<ShapeError>(), "conv2d: weight [1,1,0,3] has an empty kernel; kernel height and width must be >= 1"},
        {"max_pool2d kernel 0",
         [=] {
             max_pool2d(f32({1, 1, 4, 4}), kernel0);
         },
         type<ValueError>(), "max_pool2d: invalid kernel 0x2"},
        {"max_pool2d of rank 3",
         [] {
             max_pool2d(f32({1, 4, 4}));
         },
         type<ShapeError>(), "max_pool2d: input must have rank 4, got shape [1,4,4]"},
        {"avg_pool2d padding above half the kernel",
         [=] {
             avg_pool2d(f32({1, 1, 4, 4}), big_pad);
         },
         type<ValueError>(), "avg_pool2d: invalid kernel 2x2, stride 2x2, padding 2x0"},
        {"max_pool2d padding whose double overflows int",
         [=] {
             max_pool2d(f32({1, 1, 4, 4}), huge_pad);
         },
         type<ValueError>(), "max_pool2d: invalid kernel 3x2, stride 3x2, padding 1261110808x0"},
        {"softmax axis out of range",
         [] {
             softmax(f32({2, 3}), 2);
         },
         type<ShapeError>(), "softmax: axis 2 is out of range for rank 2"},
        {"layer_norm over more axes than the rank",
         [] {
             layer_norm(f32({2, 3}), 3);
         },
         type<ShapeError>(), "layer_norm: cannot normalise the last 3 axes of shape [2,3]"},
        {"rope of odd width",
         [] {
             rope(f32({2, 3}));
         },
         type<ShapeError>(), "rope: input must be [..., T, D] with D even, got [2,3]"},
        {"attention with mismatched heads",
         [] {
             scaled_dot_product_attention(f32({2, 4, 8}), f32({3, 4, 8}), f32({3, 4, 8}));
         },
         type<ShapeError>(), "scaled_dot_product_attention: shapes [2] and [3] cannot broadcast"},
        {"concat of nothing", [] { concat({}); }, type<ShapeError>(), "concat: needs at least one tensor"},
        {"concat of mismatched shapes",
         [] {
             concat({f32({2, 3}), f32({2, 4})}, 0);
         },
         type<ShapeError>(), "concat: f32[2,4] does not match f32[2,3] outside axis 0"},
        {"split sizes not covering the axis",
         [] {
             split(f32({5}), {2, 2});
         },
         type<ShapeError>(), "split: sizes add up to 4, axis 0 of [5] has 5"},
        {"pad with an odd count",
         [] {
             pad(f32({2, 3}), {1});
         },
         type<ShapeError>(), "pad: needs (before, after) pairs"},
        {"sum over a missing axis",
         [] {
             sum(f32({2, 3}), {2});
         },
         type<ShapeError>(), "sum: axis 2 is out of range for shape [2,3]"},
        {"argmax over a missing axis",
         [] {
             argmax(f32({2, 3}), -3);
         },
         type<ShapeError>(), "argmax: axis -3 is out of range for rank 2"},
        {"moved-from tensor",
         [] {
             Tensor a = f32({2});
             Tensor b = std::move(a);
             (void)a.numel();
         },
         type<DeviceError>(), "the tensor is undefined (default-constructed or moved from)"},
        {"reading a released tensor",
         [] {
             Tensor a = f32({2});
             a = Tensor();
             (void)a.to_vector<float>();
         },
         type<DeviceError>(), "dtype: the tensor is undefined"},
        {"backward twice through a freed graph",
         [] {
             Tensor w = f32({3}).requires_grad_();
             Tensor loss = sum(w * w);
             loss.backward();
             loss.backward();
         },
         type<AutogradError>(), "backward through sum whose graph was already freed"},
        {"backward of a non-scalar without a gradient",
         [] {
             Tensor w = f32({3}).requires_grad_();
             (w * w).backward();
         },
         type<AutogradError>(), "a gradient can be implied only for one-element outputs"},
        {"backward of a tensor without history", [] { f32({1}).backward(); }, type<AutogradError>(),
         "backward: the tensor does not require grad"},
        {"requires_grad on integers", [] { zeros({2}, DType::i32).requires_grad_(); }, type<AutogradError>(),
         "requires_grad_: gradients need a float dtype, got i32"},
        {"1 PiB on cpu",
         [] {
             empty({petabyte_floats}, DType::f32, Device{"cpu", 0});
         },
         type<OutOfMemoryError>(), "cannot allocate 1125899906842624 bytes on cpu"},
        {"read-back size mismatch",
         [] {
             float buffer[3];
             f32({2}).copy_to_host(buffer, sizeof buffer);
         },
         type<ValueError>(), "copy_to_host: destination has 12 bytes, the tensor [2] of f32 has 8"},
        {"item of many elements", [] { (void)f32({2}).item<float>(); }, type<ShapeError>(),
         "item: tensor of shape [2] has 2 elements, expected 1"},
        {"unknown device", [] { (void)Device::parse("nosuch"); }, type<DeviceError>(), "no usable backend 'nosuch'"},
        {"device index out of range",
         [] {
             f32({2}).to(Device{"cpu", 7});
         },
         type<DeviceError>(), "device 'cpu:7' is not available"},
        {"from_vector count mismatch",
         [] {
             from_vector(std::vector<float>{1, 2}, {3});
         },
         type<ShapeError>(), "from_vector: 2 values do not fill shape [3]"},
        {"arange step 0", [] { arange(0.0, 1, 0); }, type<ValueError>(),
         "arange: start, end and step must be finite and step non-zero"},
    };
}

// Runs one call and checks what it threw; returns the message for the report.
void check_bad_call(const BadCall &bad) {
    // doctest prints a const char * as a pointer: strings only.
    const std::string what = bad.what;
    INFO(what);
    try {
        bad.call();
        FAIL_CHECK("no exception");
    } catch (const Error &e) {
        const std::string message = e.what();
        INFO("what(): " << message);
        CHECK_MESSAGE(typeid(e) == bad.expected,
                      "threw " << std::string(typeid(e).name()) << ", expected " << std::string(bad.expected.name()));
        CHECK(message.find(bad.message_part) != std::string::npos);
        MESSAGE(std::string(what + " -> " + message));
    } catch (const std::exception &e) {
        FAIL_CHECK("not a tinyfin::Error: " << std::string(e.what()));
    }
}

}  // namespace

TEST_CASE("bad calls throw their own exception with a specific message") {
    std::vector<BadCall> calls = bad_calls();
    CHECK(calls.size() >= 30);
    for (const BadCall &bad : calls) check_bad_call(bad);
    // Still working: a small training step gives the exact gradient.
    Tensor w = from_vector(std::vector<float>{1, 2, 3}, {3}).requires_grad_();
    sum(w * w).backward();
    CHECK(w.grad().to_vector<float>() == std::vector<float>{2, 4, 6});
}

TEST_CASE("a huge slice step is clamped, not overflowed into the strides") {
    Tensor t = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
    Tensor row = t.slice(0, 1, 3, std::numeric_limits<int64_t>::max());
    CHECK(row.shape() == Shape{1, 2});
    CHECK(row.to_vector<float>() == std::vector<float>{3, 4});
}

TEST_CASE("1 PiB on every loaded backend fails cleanly and leaves it usable") {
    for (const std::string &name : available_backends()) {
        INFO(std::string("backend " + name));
        Device device{name, 0};
        CHECK_THROWS_AS(empty({petabyte_floats}, DType::f32, device), OutOfMemoryError);
        Tensor a = ones({4}, DType::f32, device);
        CHECK(sum(a).item<float>() == 4);
    }
}
