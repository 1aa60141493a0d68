// e^r near 0 by its Taylor polynomial, the core of the branch-free exp functions of vector_math.hpp
// (f32, degree 7) and vector_erf.hpp (double, degree 11; f32, degree 8). Private to the cpu plugin.
#pragma once

#include <cstdint>
#include <utility>

namespace tf_cpu::vec {

constexpr int64_t factorial(int k) { return k <= 1 ? 1 : k * factorial(k - 1); }

// The sum of r^k / k! for k = 0..Degree in Horner's form, each coefficient T(1) / T(k!) (k! is
// exact in float up to 13!, in double up to 22!). Unrolled by the fold, so a loop calling it
// vectorizes.
template <int Degree, class T, int... K>
[[gnu::always_inline]] inline T exp_taylor(T r, std::integer_sequence<int, K...>) {
    T p = T(1) / static_cast<T>(factorial(Degree));
    ((p = p * r + T(1) / static_cast<T>(factorial(Degree - 1 - K))), ...);
    return p;
}

template <int Degree, class T>
[[gnu::always_inline]] inline T exp_taylor(T r) {
    return exp_taylor<Degree>(r, std::make_integer_sequence<int, Degree>{});
}

}  // namespace tf_cpu::vec
