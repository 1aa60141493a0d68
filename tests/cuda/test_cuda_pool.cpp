// The cuda plugin's pooling arithmetic (plugins/cuda/pool.hpp, the functions its kernels run per
// element), on the host against plain scatter-style references: forward max and average, and the
// gathered backward ops against "each window adds its gradient to its first maximum / spreads it
// over its elements". Random shapes, kernels, strides, paddings and layouts; ties and NaN.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "pool.hpp"

using namespace tf_cuda;

namespace {

struct Config {
    PoolArgs args;
    std::vector<float> x, dy;
};

// Dense NCHW strides, or NHWC (channels last) when channels_last.
void strides_of(int64_t c, int64_t h, int64_t w, bool channels_last, int64_t (&s)[4]) {
    if (channels_last) {
        s[1] = 1;
        s[3] = c;
        s[2] = w * c;
        s[0] = h * w * c;
    } else {
        s[3] = 1;
        s[2] = w;
        s[1] = h * w;
        s[0] = c * h * w;
    }
}

Config random_config(std::mt19937 &rng) {
    Config cfg;
    PoolArgs &a = cfg.args;
    a = PoolArgs{};
    a.n = 1 + rng() % 2;
    a.c = 1 + rng() % 3;
    for (int i = 0; i < 2; ++i) {
        a.kernel[i] = 1 + static_cast<int>(rng() % 3);
        a.stride[i] = 1 + static_cast<int>(rng() % 3);
        a.padding[i] = static_cast<int>(rng() % (a.kernel[i] / 2 + 1));
    }
    a.h = a.kernel[0] + rng() % 6;
    a.w = a.kernel[1] + rng() % 6;
    a.oh = (a.h + 2 * a.padding[0] - a.kernel[0]) / a.stride[0] + 1;
    a.ow = (a.w + 2 * a.padding[1] - a.kernel[1]) / a.stride[1] + 1;
    a.count_include_pad = static_cast<int32_t>(rng() % 2);
    strides_of(a.c, a.h, a.w, rng() % 2, a.x_strides);
    strides_of(a.c, a.oh, a.ow, rng() % 2, a.y_strides);
    strides_of(a.c, a.h, a.w, rng() % 2, a.dx_strides);
    // Small integers: many ties, so "first maximum" matters; now and then a NaN.
    cfg.x.resize(static_cast<size_t>(a.n * a.c * a.h * a.w));
    for (float &v : cfg.x) v = rng() % 50 == 0 ? NAN : static_cast<float>(static_cast<int>(rng() % 5) - 2);
    cfg.dy.resize(static_cast<size_t>(a.n * a.c * a.oh * a.ow));
    for (float &v : cfg.dy) v = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 4;
    return cfg;
}

bool same(float a, float b) {
    return (std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= 1e-5f * (1 + std::fabs(b));
}

}  // namespace

TEST_CASE("pool: forward and gathered backward against scatter references") {
    std::mt19937 rng(21);
    for (int trial = 0; trial < 500; ++trial) {
        const Config cfg = random_config(rng);
        const PoolArgs &a = cfg.args;
        CAPTURE(trial);
        const int64_t size_x = a.n * a.c * a.h * a.w;
        std::vector<float> want_max_dx(static_cast<size_t>(size_x), 0.f), want_avg_dx(static_cast<size_t>(size_x), 0.f);
        for (int64_t n = 0; n < a.n; ++n)
            for (int64_t c = 0; c < a.c; ++c)
                for (int64_t oy = 0; oy < a.oh; ++oy)
                    for (int64_t ox = 0; ox < a.ow; ++ox) {
                        // Reference window walk.
                        float best = 0, sum = 0;
                        int64_t at = -1, count = 0;
                        for (int ky = 0; ky < a.kernel[0]; ++ky)
                            for (int kx = 0; kx < a.kernel[1]; ++kx) {
                                const int64_t y = oy * a.stride[0] - a.padding[0] + ky;
                                const int64_t x = ox * a.stride[1] - a.padding[1] + kx;
                                if (y < 0 || y >= a.h || x < 0 || x >= a.w) continue;
                                const int64_t off = offset4(a.x_strides, n, c, y, x);
                                const float v = cfg.x[static_cast<size_t>(off)];
                                ++count;
                                sum += v;
                                if (at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
                                    best = v;
                                    at = offset4(a.dx_strides, n, c, y, x);
                                }
                            }
                        REQUIRE(at >= 0);  // padding <= kernel / 2: every window sees an element
                        const float divisor = a.count_include_pad ? static_cast<float>(a.kernel[0] * a.kernel[1])
                                                                  : static_cast<float>(count);
                        REQUIRE(same(max_pool_at(a, cfg.x.data(), n, c, oy, ox), best));
                        REQUIRE(same(avg_pool_at(a, cfg.x.data(), n, c, oy, ox), sum / divisor));
                        const float g = cfg.dy[static_cast<size_t>(offset4(a.y_strides, n, c, oy, ox))];
                        want_max_dx[static_cast<size_t>(at)] += g;
                        for (int ky = 0; ky < a.kernel[0]; ++ky)
                            for (int kx = 0; kx < a.kernel[1]; ++kx) {
                                const int64_t y = oy * a.stride[0] - a.padding[0] + ky;
                                const int64_t x = ox * a.stride[1] - a.padding[1] + kx;
                                if (y < 0 || y >= a.h || x < 0 || x >= a.w) continue;
                                want_avg_dx[static_cast<size_t>(offset4(a.dx_strides, n, c, y, x))] += g / divisor;
                            }
                    }
        for (int64_t n = 0; n < a.n; ++n)
            for (int64_t c = 0; c < a.c; ++c)
                for (int64_t y = 0; y < a.h; ++y)
                    for (int64_t x = 0; x < a.w; ++x) {
                        const auto at = static_cast<size_t>(offset4(a.dx_strides, n, c, y, x));
                        REQUIRE(same(max_pool_grad_at(a, cfg.dy.data(), cfg.x.data(), n, c, y, x), want_max_dx[at]));
                        REQUIRE(same(avg_pool_grad_at(a, cfg.dy.data(), n, c, y, x), want_avg_dx[at]));
                    }
    }
}

TEST_CASE("pool: covering windows") {
    // kernel 3, stride 2, padding 1 over 7 inputs: 4 windows starting at padded 0, 2, 4, 6.
    int64_t lo = 0, hi = 0;
    covering(0, 1, 3, 2, 4, &lo, &hi);  // padded 1: window 0
    CHECK(lo == 0);
    CHECK(hi == 0);
    covering(1, 1, 3, 2, 4, &lo, &hi);  // padded 2: windows 0 and 1
    CHECK(lo == 0);
    CHECK(hi == 1);
    covering(6, 1, 3, 2, 4, &lo, &hi);  // padded 7: window 3
    CHECK(lo == 3);
    CHECK(hi == 3);
    covering(4, 0, 2, 2, 2, &lo, &hi);  // no padding, 5 inputs, 2 windows: input 4 is in none
    CHECK(lo > hi);
}
