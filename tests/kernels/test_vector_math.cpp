// The cpu plugin's vectorizable helpers (plugins/cpu/vector_math.hpp) on their own: exp against
// the correctly rounded double exp over the whole f32 range, exp_nonpositive against exp and the
// double exp over every sign of argument it takes, and the lane sums and maximum.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "vector_math.hpp"

namespace {

// Distance in units in the last place of the f32 nearest to `exact`.
double ulps(float got, double exact) {
    const float nearest = static_cast<float>(exact);
    const float next = std::nextafter(nearest, INFINITY);
    return std::fabs(static_cast<double>(got) - exact) / (static_cast<double>(next) - static_cast<double>(nearest));
}

}  // namespace

TEST_CASE("vec::exp is within 2 ulp over the normal range and exact at the edges") {
    double worst = 0;
    float worst_x = 0;
    // Every 389th bit pattern of either sign in [-87.3, 88.3]: about 8 million arguments, dense
    // near 0 as the floats are.
    for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 389) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
        if (!(x >= -87.3f && x <= 88.3f)) continue;
        const double u = ulps(tf_cpu::vec::exp(x), std::exp(static_cast<double>(x)));
        if (u > worst) {
            worst = u;
            worst_x = x;
        }
    }
    INFO("worst ", worst, " ulp at x = ", worst_x);
    CHECK(worst <= 2.0);
    CHECK(tf_cpu::vec::exp(0.0f) == 1.0f);
    CHECK(tf_cpu::vec::exp(-INFINITY) == 0.0f);
    CHECK(tf_cpu::vec::exp(-88.0f) == 0.0f);  // below FLT_MIN: flushed
    CHECK(tf_cpu::vec::exp(-1000.0f) == 0.0f);
    CHECK(tf_cpu::vec::exp(INFINITY) == INFINITY);
    CHECK(tf_cpu::vec::exp(88.5f) == INFINITY);
    CHECK(std::isfinite(tf_cpu::vec::exp(88.37f)));
    CHECK(ulps(tf_cpu::vec::exp(88.37f), std::exp(static_cast<double>(88.37f))) <= 2.0);
    CHECK(std::isnan(tf_cpu::vec::exp(NAN)));
    CHECK(std::isnan(tf_cpu::vec::exp(-NAN)));
}

TEST_CASE("vec::exp_nonpositive is exp's value for every x <= 0 and within 2 ulp of e^x") {
    double worst = 0;
    float worst_x = 0;
    // Every 97th negative bit pattern: the whole negative range, subnormal arguments to -NaN.
    for (uint64_t bits = 0x80000000u; bits <= 0xffffffffu; bits += 97) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
        const float got = tf_cpu::vec::exp_nonpositive(x), want = tf_cpu::vec::exp(x);
        if (std::isnan(x)) {
            REQUIRE(std::isnan(got));
            continue;
        }
        REQUIRE(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want));
        if (x >= -87.3f) {
            const double u = ulps(got, std::exp(static_cast<double>(x)));
            if (u > worst) {
                worst = u;
                worst_x = x;
            }
        }
    }
    INFO("worst ", worst, " ulp at x = ", worst_x);
    CHECK(worst <= 2.0);
    CHECK(tf_cpu::vec::exp_nonpositive(0.0f) == 1.0f);
    CHECK(tf_cpu::vec::exp_nonpositive(-0.0f) == 1.0f);
    CHECK(tf_cpu::vec::exp_nonpositive(-INFINITY) == 0.0f);
    CHECK(tf_cpu::vec::exp_nonpositive(-88.0f) == 0.0f);  // below FLT_MIN: flushed, as exp
    CHECK(tf_cpu::vec::exp_nonpositive(-3.0e38f) == 0.0f);
    CHECK(tf_cpu::vec::exp_nonpositive(-87.3f) > 0.0f);
    CHECK(std::isnan(tf_cpu::vec::exp_nonpositive(NAN)));
    CHECK(std::isnan(tf_cpu::vec::exp_nonpositive(-NAN)));
}

TEST_CASE("vec::sum adds in double lanes, vec::max skips NaN like std::max") {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
    for (int64_t n : {0, 1, 15, 16, 17, 31, 1000, 100003}) {
        CAPTURE(n);
        std::vector<float> x(static_cast<size_t>(n));
        long double exact = 0;
        double magnitude = 0;
        float max = -INFINITY;
        for (float &v : x) {
            v = pick(rng);
            exact += v;
            magnitude += std::fabs(v);
            max = std::max(max, v);
        }
        CHECK(std::fabs(tf_cpu::vec::sum(x.data(), n) - static_cast<double>(exact)) <= 1e-15 * magnitude + 1e-300);
        CHECK(tf_cpu::vec::max(x.data(), n) == max);
    }
    const float with_nan[] = {1, NAN, 3, -2};
    CHECK(tf_cpu::vec::max(with_nan, 4) == 3.0f);
    CHECK(std::isnan(tf_cpu::vec::sum(with_nan, 4)));
    CHECK(tf_cpu::vec::max(with_nan, 0) == -INFINITY);
}
