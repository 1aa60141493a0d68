// The dtypes column of ops.def: the core refuses an operand outside its op's dtype class with a
// DTypeError before any plugin is asked, naming the op (from the table), the operand and the
// dtypes the op takes there.
#include <doctest/doctest.h>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

namespace {

template <class F>
std::string message_of(F f) {
    try {
        f();
    } catch (const DTypeError &e) {
        return e.what();
    }
    return "no DTypeError";
}

}  // namespace

TEST_CASE("dtypes column: float-only, numeric-only ops refuse other dtypes before dispatch") {
    Tensor b = from_vector<bool>({true, false}, {2});
    Tensor i = from_vector<int32_t>({1, 2}, {2});
    CHECK(message_of([&] { exp(i); }) == "DTypeError: exp: input 0 is i32, but exp takes f32, f16, bf16 there");
    CHECK(message_of([&] { sqrt(i); }) == "DTypeError: sqrt: input 0 is i32, but sqrt takes f32, f16, bf16 there");
    CHECK(message_of([&] { relu(b); }) ==
          "DTypeError: relu: input 0 is bool, but relu takes f32, f16, bf16, i32, i64 there");
    CHECK(message_of([&] { add(b, b); }) ==
          "DTypeError: add: input 0 is bool, but add takes f32, f16, bf16, i32, i64 there");
    CHECK(message_of([&] { sum(b); }) ==
          "DTypeError: sum: input 0 is bool, but sum takes f32, f16, bf16, i32, i64 there");
    CHECK(message_of([&] {
              matmul(i.reshape({1, 2}), i.reshape({2, 1}));
          }) == "DTypeError: matmul: input 0 is i32, but matmul takes f32, f16, bf16 there");
    // No fallback was counted: the op never reached a plugin.
    CHECK(stats().total_fallbacks == 0);
}

TEST_CASE("dtypes column: what the classes allow still runs") {
    Tensor i = from_vector<int32_t>({1, -2}, {2});
    CHECK(relu(i).to_vector<int32_t>() == std::vector<int32_t>{1, 0});
    CHECK(sum(i).item<int32_t>() == -1);
    Tensor b = from_vector<bool>({true, false}, {2});
    CHECK(eq(b, b).to_vector<bool>() == std::vector<bool>{true, true});
    CHECK(b.to(DType::f32).to_vector<float>() == std::vector<float>{1, 0});
    CHECK(one_hot(from_vector<int64_t>({1}, {1}), 2, DType::i32).to_vector<int32_t>() == std::vector<int32_t>{0, 1});
}
