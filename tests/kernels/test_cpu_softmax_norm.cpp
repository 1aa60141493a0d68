// softmax, log_softmax, layer_norm and rms_norm against their formulas in double.
// Through the plugin ABI with no core; the harness: cpu_kernel_harness.hpp.
#include "cpu_kernel_harness.hpp"

#include <random>

using namespace cpu_kernel_test;

// ---- softmax, log_softmax -------------------------------------------------------------------

TEST_CASE("softmax and log_softmax: hand values, huge logits, rows sum to 1, any axis") {
    const tf_params_axis last{sizeof(tf_params_axis), 1};
    const TensorDesc x = f32({2, 3}, {0, std::log(2.0f), std::log(5.0f), 1000, 1000, -INFINITY});
    const TensorDesc y = make(TF_DTYPE_F32, {2, 3});
    run_ok(TF_OP_SOFTMAX, {&x}, y, &last);
    check_close(get(y), {0.125, 0.25, 0.625, 0.5, 0.5, 0}, 1e-6);
    run_ok(TF_OP_LOG_SOFTMAX, {&x}, y, &last);
    check_close(get(y), {std::log(0.125), std::log(0.25), std::log(0.625), std::log(0.5), std::log(0.5), -INFINITY},
                1e-6);

    // A row of -inf has no maximum to shift by: NaN, as in torch.
    const TensorDesc all_inf = f32({1, 2}, {-INFINITY, -INFINITY});
    const TensorDesc out = make(TF_DTYPE_F32, {1, 2});
    run_ok(TF_OP_SOFTMAX, {&all_inf}, out, &last);
    CHECK(std::isnan(get(out)[0]));

    // Axis 1 of [3, 4, 5], viewed through a transposed layout.
    const Values v = random_f32(60, 3);
    const TensorDesc xs = strided(TF_DTYPE_F32, {3, 4, 5}, {1, 15, 3}, 0, 60);
    set(xs, v);
    const tf_params_axis mid{sizeof(tf_params_axis), 1};
    const TensorDesc ys = make(TF_DTYPE_F32, {3, 4, 5}), ls = make(TF_DTYPE_F32, {3, 4, 5});
    run_ok(TF_OP_SOFTMAX, {&xs}, ys, &mid);
    run_ok(TF_OP_LOG_SOFTMAX, {&xs}, ls, &mid);
    const Values xv = get(xs), sv = get(ys), lv = get(ls);
    for (int a = 0; a < 3; ++a)
        for (int c = 0; c < 5; ++c) {
            double sum = 0, max = -INFINITY;
            for (int b = 0; b < 4; ++b) max = std::max(max, xv[static_cast<size_t>((a * 4 + b) * 5 + c)]);
            for (int b = 0; b < 4; ++b) sum += std::exp(xv[static_cast<size_t>((a * 4 + b) * 5 + c)] - max);
            double total = 0;
            for (int b = 0; b < 4; ++b) {
                const size_t i = static_cast<size_t>((a * 4 + b) * 5 + c);
                CHECK(sv[i] == doctest::Approx(std::exp(xv[i] - max) / sum).epsilon(1e-6));
                CHECK(lv[i] == doctest::Approx(xv[i] - max - std::log(sum)).epsilon(1e-6));
                total += sv[i];
            }
            CHECK(total == doctest::Approx(1.0).epsilon(1e-6));
        }

    const tf_params_axis bad{sizeof(tf_params_axis), 3};
    CHECK(Call(TF_OP_SOFTMAX, {no_data_desc(TF_DTYPE_F32, {3, 4, 5})}, no_data_desc(TF_DTYPE_F32, {3, 4, 5}), &bad)
              .supports() == 0);
    CHECK(Call(TF_OP_SOFTMAX, {no_data_desc(TF_DTYPE_F32, {3, 4, 5})}, no_data_desc(TF_DTYPE_F32, {3, 4, 5}), &mid)
              .supports() == 1);
    CHECK(Call(TF_OP_SOFTMAX, {no_data_desc(TF_DTYPE_F32, {3, 4, 5})}, no_data_desc(TF_DTYPE_F32, {3, 5, 4}), &mid)
              .supports() == 0);
    CHECK(
        Call(TF_OP_LOG_SOFTMAX, {no_data_desc(TF_DTYPE_I32, {3})}, no_data_desc(TF_DTYPE_I32, {3}), &last).supports() ==
        0);
}

TEST_CASE("softmax and log_softmax along the last axis (vectorized rows) match double exp") {
    // Row lengths around the 16 lanes and long rows; logits over [-40, 40] so that some
    // exponentials underflow; then rows with -inf entries, a NaN, +inf and all -inf.
    const tf_params_axis last{sizeof(tf_params_axis), 1};
    std::mt19937 rng(21);
    std::uniform_real_distribution<float> pick(-40.0f, 40.0f);
    for (int64_t len : {1, 15, 16, 17, 100, 4099}) {
        CAPTURE(len);
        const int64_t rows = 7;
        Values v(static_cast<size_t>(rows * len));
        for (double &e : v) e = pick(rng);
        v[static_cast<size_t>(len)] = -INFINITY;  // row 1: one -inf
        for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(2 * len + i)] = -INFINITY;  // row 2: all -inf
        v[static_cast<size_t>(3 * len + len / 2)] = NAN;  // row 3: a NaN
        v[static_cast<size_t>(4 * len)] = INFINITY;  // row 4: +inf
        const TensorDesc x = f32({rows, len}, v);
        const TensorDesc y = make(TF_DTYPE_F32, {rows, len}), l = make(TF_DTYPE_F32, {rows, len});
        run_ok(TF_OP_SOFTMAX, {&x}, y, &last);
        run_ok(TF_OP_LOG_SOFTMAX, {&x}, l, &last);
        const Values sv = get(y), lv = get(l), xv = get(x);
        for (int64_t r = 0; r < rows; ++r) {
            CAPTURE(r);
            const double *row = xv.data() + r * len;
            double max = -INFINITY, sum = 0;
            bool nan = false;
            for (int64_t i = 0; i < len; ++i) {
                nan = nan || std::isnan(row[i]);
                max = std::max(max, row[i]);
            }
            for (int64_t i = 0; i < len; ++i) sum += std::exp(row[i] - max);
            for (int64_t i = 0; i < len; ++i) {
                const size_t k = static_cast<size_t>(r * len + i);
                if (std::isinf(max) || nan) {  // all -inf, a +inf maximum, a NaN
                    CHECK((r >= 1 && r <= 4));  // row 1 too when it is a single -inf
                    CHECK(std::isnan(sv[k]));
                    CHECK(std::isnan(lv[k]));
                    continue;
                }
                const double p = std::exp(row[i] - max) / sum, lp = (row[i] - max) - std::log(sum);
                if (p == 0) {  // a -inf logit
                    CHECK(sv[k] == 0);
                    CHECK(lv[k] == -INFINITY);
                    continue;
                }
                // x - max rounded to f32 (relative error 2^-24 |x - max| in the exponential), exp
                // within 2 ulp, one scaling; results below FLT_MIN may flush to 0.
                CHECK(std::fabs(sv[k] - p) <= (4e-7 + 0x1p-24 * std::fabs(row[i] - max)) * p + 0x1p-126);
                if (std::isinf(lp))
                    CHECK(lv[k] == lp);
                else
                    CHECK(std::fabs(lv[k] - lp) <= 2e-7 * std::fabs(lp) + 1e-6);
            }
        }
    }
}

// ---- layer_norm, rms_norm -------------------------------------------------------------------

TEST_CASE("layer_norm and rms_norm match their formulas over 1 and 2 axes") {
    const Values xv = random_f32(2 * 3 * 4, 11);
    for (int n_axes : {1, 2}) {
        INFO("n_axes ", n_axes);
        const Dims s = n_axes == 1 ? Dims{4} : Dims{3, 4};
        const int64_t len = count_of(s), rows = 24 / len;
        const Values wv = random_f32(static_cast<size_t>(len), 12), bv = random_f32(static_cast<size_t>(len), 13);
        // x viewed through a layout with the first two axes swapped.
        const TensorDesc x = strided(TF_DTYPE_F32, {2, 3, 4}, {4, 8, 1}, 0, 24);
        set(x, xv);
        const TensorDesc w = f32(s, wv), b = f32(s, bv);
        const TensorDesc y = make(TF_DTYPE_F32, {2, 3, 4}), r = make(TF_DTYPE_F32, {2, 3, 4});
        const tf_params_norm p{sizeof(tf_params_norm), n_axes, 1e-5};
        run_ok(TF_OP_LAYER_NORM, {&x, &w, &b}, y, &p);
        run_ok(TF_OP_RMS_NORM, {&x, &w}, r, &p);
        Values y_ref, r_ref;
        for (int64_t row = 0; row < rows; ++row) {
            double mean = 0, var = 0, sq = 0;
            for (int64_t i = 0; i < len; ++i) mean += xv[static_cast<size_t>(row * len + i)] / static_cast<double>(len);
            for (int64_t i = 0; i < len; ++i) {
                const double v = xv[static_cast<size_t>(row * len + i)];
                var += (v - mean) * (v - mean) / static_cast<double>(len);
                sq += v * v / static_cast<double>(len);
            }
            for (int64_t i = 0; i < len; ++i) {
                const double v = xv[static_cast<size_t>(row * len + i)];
                y_ref.push_back((v - mean) / std::sqrt(var + 1e-5) * wv[static_cast<size_t>(i)] +
                                bv[static_cast<size_t>(i)]);
                r_ref.push_back(v / std::sqrt(sq + 1e-5) * wv[static_cast<size_t>(i)]);
            }
        }
        check_close(get(y), y_ref, 1e-5);
        check_close(get(r), r_ref, 1e-5);
    }
    // Rows whose mean is far larger than their spread (1000 + 0.01 noise; a transformer's
    // residual stream can look like that): x - mean must keep its relative accuracy, which a mean
    // rounded to f32 would lose (an error of up to 3e-5 against a spread of 6e-3). Rows of 64
    // and 37 (the kernel's lanes and a tail).
    for (const int64_t len : {64, 37}) {
        INFO("len ", len);
        const int64_t rows = 3;
        Values xv = random_f32(static_cast<size_t>(rows * len), 14);
        for (double &v : xv) v = static_cast<float>(1000.0 + 0.01 * v);
        const Values wv = random_f32(static_cast<size_t>(len), 15), bv = random_f32(static_cast<size_t>(len), 16);
        const TensorDesc x = f32({rows, len}, xv), w = f32({len}, wv), b = f32({len}, bv);
        const TensorDesc y = make(TF_DTYPE_F32, {rows, len});
        const tf_params_norm p{sizeof(tf_params_norm), 1, 1e-12};
        run_ok(TF_OP_LAYER_NORM, {&x, &w, &b}, y, &p);
        Values y_ref;
        for (int64_t row = 0; row < rows; ++row) {
            double mean = 0, var = 0;
            for (int64_t i = 0; i < len; ++i) mean += xv[static_cast<size_t>(row * len + i)] / static_cast<double>(len);
            for (int64_t i = 0; i < len; ++i) {
                const double v = xv[static_cast<size_t>(row * len + i)] - mean;
                var += v * v / static_cast<double>(len);
            }
            for (int64_t i = 0; i < len; ++i)
                y_ref.push_back((xv[static_cast<size_t>(row * len + i)] - mean) / std::sqrt(var + 1e-12) *
                                    wv[static_cast<size_t>(i)] +
                                bv[static_cast<size_t>(i)]);
        }
        check_close(get(y), y_ref, 1e-5);
    }
    const tf_params_norm p{sizeof(tf_params_norm), 1, 1e-5};
    const tf_params_norm three{sizeof(tf_params_norm), 3, 1e-5};
    const auto x = no_data_desc(TF_DTYPE_F32, {2, 4}), s = no_data_desc(TF_DTYPE_F32, {4});
    CHECK(Call(TF_OP_LAYER_NORM, {x, s, s}, x, &p).supports() == 1);
    CHECK(Call(TF_OP_RMS_NORM, {x, s}, x, &p).supports() == 1);
    CHECK(Call(TF_OP_LAYER_NORM, {x, s, no_data_desc(TF_DTYPE_F32, {2})}, x, &p).supports() == 0);
    CHECK(Call(TF_OP_RMS_NORM, {x, no_data_desc(TF_DTYPE_F32, {2, 4})}, x, &p).supports() == 0);
    CHECK(Call(TF_OP_RMS_NORM, {x, s}, x, &three).supports() == 0);
    CHECK(Call(TF_OP_RMS_NORM, {x, s}, x, nullptr).supports() == 0);
}
