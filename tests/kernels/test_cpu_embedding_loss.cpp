// embedding and its backward, cross_entropy, one_hot.
// Through the plugin ABI with no core; the harness: cpu_kernel_harness.hpp.
#include "cpu_kernel_harness.hpp"

using namespace cpu_kernel_test;

// ---- embedding ------------------------------------------------------------------------------

TEST_CASE("embedding gathers rows, and its backward adds repeated indices") {
    Values table;
    for (int r = 0; r < 10; ++r)
        for (int c = 0; c < 3; ++c) table.push_back(r * 10 + c);
    const TensorDesc w = f32({10, 3}, table);
    for (int32_t idx_dtype : {TF_DTYPE_I32, TF_DTYPE_I64}) {
        const TensorDesc idx = make(idx_dtype, {2, 2}, {3, 0, 3, 9});
        const TensorDesc out = make(TF_DTYPE_F32, {2, 2, 3});
        run_ok(TF_OP_EMBEDDING, {&w, &idx}, out, nullptr);
        CHECK(get(out) == Values{30, 31, 32, 0, 1, 2, 30, 31, 32, 90, 91, 92});

        const TensorDesc dy = f32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
        const TensorDesc dw = make(TF_DTYPE_F32, {10, 3});
        run_ok(TF_OP_EMBEDDING_BACKWARD, {&dy, &idx}, dw, nullptr);
        Values expected(30, 0);
        for (int j = 0; j < 3; ++j) {
            expected[static_cast<size_t>(3 * 3 + j)] = (1 + j) + (7 + j);
            expected[static_cast<size_t>(0 * 3 + j)] = 4 + j;
            expected[static_cast<size_t>(9 * 3 + j)] = 10 + j;
        }
        CHECK(get(dw) == expected);
    }

    // An i64 table is copied bit for bit; the output may be strided.
    const TensorDesc wi = make(TF_DTYPE_I64, {3, 2});
    const int64_t big[] = {INT64_MIN, 1, 2, 3, INT64_MAX, -7};
    std::memcpy(wi.mem->data, big, sizeof big);
    const TensorDesc idx = make(TF_DTYPE_I32, {2}, {2, 0});
    const TensorDesc oi = strided(TF_DTYPE_I64, {2, 2}, {1, 2}, 0, 4);
    run_ok(TF_OP_EMBEDDING, {&wi, &idx}, oi, nullptr);
    int64_t got[4];
    std::memcpy(got, oi.mem->data, sizeof got);
    CHECK(got[0] == INT64_MAX);
    CHECK(got[1] == INT64_MIN);
    CHECK(got[2] == -7);
    CHECK(got[3] == 1);

    // Out of range: nothing written, the index and the range named.
    const TensorDesc bad = make(TF_DTYPE_I64, {3}, {1, 12, 2});
    const TensorDesc out = make(TF_DTYPE_F32, {3, 3});
    CHECK(run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_EMBEDDING, {&w, &bad}, out) ==
          "embedding: index 12 is out of range [0, 10)");
    CHECK(untouched(out));
    const TensorDesc negative = make(TF_DTYPE_I32, {1}, {-1});
    const TensorDesc out1 = make(TF_DTYPE_F32, {1, 3});
    CHECK(contains(run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_EMBEDDING, {&w, &negative}, out1), "index -1"));
    const TensorDesc dy = f32({3, 3}, Values(9, 1.0));
    const TensorDesc dw = make(TF_DTYPE_F32, {10, 3});
    CHECK(run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_EMBEDDING_BACKWARD, {&dy, &bad}, dw) ==
          "embedding_backward: index 12 is out of range [0, 10)");
    CHECK(untouched(dw));

    CHECK(Call(TF_OP_EMBEDDING, {no_data_desc(TF_DTYPE_F32, {5, 3}), no_data_desc(TF_DTYPE_I64, {2})},
               no_data_desc(TF_DTYPE_F32, {2, 3}), nullptr)
              .supports() == 1);
    CHECK(Call(TF_OP_EMBEDDING, {no_data_desc(TF_DTYPE_F32, {5, 3}), no_data_desc(TF_DTYPE_F32, {2})},
               no_data_desc(TF_DTYPE_F32, {2, 3}), nullptr)
              .supports() == 0);
    CHECK(Call(TF_OP_EMBEDDING, {no_data_desc(TF_DTYPE_F32, {5, 3}), no_data_desc(TF_DTYPE_I64, {2})},
               no_data_desc(TF_DTYPE_F32, {2, 4}), nullptr)
              .supports() == 0);
    CHECK(Call(TF_OP_EMBEDDING_BACKWARD, {no_data_desc(TF_DTYPE_F32, {2, 3}), no_data_desc(TF_DTYPE_I64, {2})},
               no_data_desc(TF_DTYPE_F32, {5, 3}), nullptr)
              .supports() == 1);
    CHECK(Call(TF_OP_EMBEDDING_BACKWARD, {no_data_desc(TF_DTYPE_F32, {2, 3}), no_data_desc(TF_DTYPE_I64, {3})},
               no_data_desc(TF_DTYPE_F32, {5, 3}), nullptr)
              .supports() == 0);
}

// ---- cross_entropy --------------------------------------------------------------------------

TEST_CASE("cross_entropy: each reduction, ignore_index, huge logits, bad labels") {
    const Values lv = {1, 2, 3, 0, 0, 0, 1000, 0, -1000, -1, 5, 2};
    const TensorDesc logits = f32({4, 3}, lv);
    const TensorDesc labels = make(TF_DTYPE_I64, {4}, {2, 1, 0, -100});
    auto row_loss = [&](int r, int label) {
        double max = -INFINITY, sum = 0;
        for (int c = 0; c < 3; ++c) max = std::max(max, lv[static_cast<size_t>(r * 3 + c)]);
        for (int c = 0; c < 3; ++c) sum += std::exp(lv[static_cast<size_t>(r * 3 + c)] - max);
        return max + std::log(sum) - lv[static_cast<size_t>(r * 3 + label)];
    };
    const double l0 = row_loss(0, 2), l1 = row_loss(1, 1), l2 = row_loss(2, 0);
    CHECK(l1 == doctest::Approx(std::log(3.0)));

    const tf_params_cross_entropy none{sizeof(tf_params_cross_entropy), TF_REDUCTION_NONE, -100};
    const TensorDesc per_row = make(TF_DTYPE_F32, {4});
    run_ok(TF_OP_CROSS_ENTROPY, {&logits, &labels}, per_row, &none);
    check_close(get(per_row), {l0, l1, l2, 0}, 1e-6);

    const TensorDesc scalar = make(TF_DTYPE_F32, {});
    const tf_params_cross_entropy sum{sizeof(tf_params_cross_entropy), TF_REDUCTION_SUM, -100};
    run_ok(TF_OP_CROSS_ENTROPY, {&logits, &labels}, scalar, &sum);
    check_close(get(scalar), {l0 + l1 + l2}, 1e-6);
    const tf_params_cross_entropy mean{sizeof(tf_params_cross_entropy), TF_REDUCTION_MEAN, -100};
    run_ok(TF_OP_CROSS_ENTROPY, {&logits, &labels}, scalar, &mean);
    check_close(get(scalar), {(l0 + l1 + l2) / 3}, 1e-6);

    // i32 labels, and every row ignored: mean is NaN, sum is 0.
    const TensorDesc ignored = make(TF_DTYPE_I32, {4}, {7, 7, 7, 7});
    const tf_params_cross_entropy mean7{sizeof(tf_params_cross_entropy), TF_REDUCTION_MEAN, 7};
    run_ok(TF_OP_CROSS_ENTROPY, {&logits, &ignored}, scalar, &mean7);
    CHECK(std::isnan(get(scalar)[0]));
    const tf_params_cross_entropy sum7{sizeof(tf_params_cross_entropy), TF_REDUCTION_SUM, 7};
    run_ok(TF_OP_CROSS_ENTROPY, {&logits, &ignored}, scalar, &sum7);
    CHECK(get(scalar) == Values{0});

    // Labels outside [0, C) that are not ignore_index: nothing written.
    const TensorDesc bad = make(TF_DTYPE_I64, {4}, {0, 3, 1, 1});
    const TensorDesc fresh = make(TF_DTYPE_F32, {});
    const std::string message =
        run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_CROSS_ENTROPY, {&logits, &bad}, fresh, &mean);
    CHECK(contains(message, "cross_entropy"));
    CHECK(contains(message, "label 3"));
    CHECK(contains(message, "[0, 3)"));
    CHECK(untouched(fresh));
    const TensorDesc negative = make(TF_DTYPE_I64, {4}, {0, -1, 1, 1});
    CHECK(contains(run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_CROSS_ENTROPY, {&logits, &negative}, fresh, &mean),
                   "label -1"));

    const auto ld = no_data_desc(TF_DTYPE_F32, {2, 3}), yd = no_data_desc(TF_DTYPE_I64, {2});
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, yd}, no_data_desc(TF_DTYPE_F32, {}), &mean).supports() == 1);
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, yd}, no_data_desc(TF_DTYPE_F32, {2}), &none).supports() == 1);
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, yd}, no_data_desc(TF_DTYPE_F32, {2}), &mean).supports() == 0);
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, yd}, no_data_desc(TF_DTYPE_F32, {}), &none).supports() == 0);
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, no_data_desc(TF_DTYPE_I64, {3})}, no_data_desc(TF_DTYPE_F32, {}), &mean)
              .supports() == 0);
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, no_data_desc(TF_DTYPE_F32, {2})}, no_data_desc(TF_DTYPE_F32, {}), &mean)
              .supports() == 0);
    const tf_params_cross_entropy bad_reduction{sizeof(tf_params_cross_entropy), 3, -100};
    CHECK(Call(TF_OP_CROSS_ENTROPY, {ld, yd}, no_data_desc(TF_DTYPE_F32, {}), &bad_reduction).supports() == 0);
}

// ---- one_hot --------------------------------------------------------------------------------

TEST_CASE("one_hot into float, integer and bool outputs; out-of-range labels fail") {
    const tf_params_one_hot p{sizeof(tf_params_one_hot), 3};
    const TensorDesc labels = make(TF_DTYPE_I32, {2, 2}, {0, 2, 1, 2});
    const Values expected = {1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1};
    for (int32_t dtype : {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_I64, TF_DTYPE_BOOL}) {
        INFO("dtype ", dtype);
        const TensorDesc out = make(dtype, {2, 2, 3});
        run_ok(TF_OP_ONE_HOT, {&labels}, out, &p);
        CHECK(get(out) == expected);
    }
    const TensorDesc labels64 = make(TF_DTYPE_I64, {3}, {2, 1, 0});
    const TensorDesc strided_out = strided(TF_DTYPE_F32, {3, 3}, {1, 3}, 0, 9);  // transposed
    run_ok(TF_OP_ONE_HOT, {&labels64}, strided_out, &p);
    CHECK(get(strided_out) == Values{0, 0, 1, 0, 1, 0, 1, 0, 0});

    const TensorDesc bad = make(TF_DTYPE_I64, {2}, {1, 3});
    const TensorDesc out = make(TF_DTYPE_F32, {2, 3});
    CHECK(run_fails(TF_STATUS_INVALID_ARGUMENT, TF_OP_ONE_HOT, {&bad}, out, &p) ==
          "one_hot: label 3 is out of range [0, 3)");
    CHECK(untouched(out));

    CHECK(Call(TF_OP_ONE_HOT, {no_data_desc(TF_DTYPE_I64, {2})}, no_data_desc(TF_DTYPE_F32, {2, 3}), &p).supports() ==
          1);
    CHECK(Call(TF_OP_ONE_HOT, {no_data_desc(TF_DTYPE_I64, {2})}, no_data_desc(TF_DTYPE_F32, {2, 4}), &p).supports() ==
          0);
    CHECK(Call(TF_OP_ONE_HOT, {no_data_desc(TF_DTYPE_F32, {2})}, no_data_desc(TF_DTYPE_F32, {2, 3}), &p).supports() ==
          0);
    const tf_params_one_hot zero{sizeof(tf_params_one_hot), 0};
    CHECK(
        Call(TF_OP_ONE_HOT, {no_data_desc(TF_DTYPE_I64, {2})}, no_data_desc(TF_DTYPE_F32, {2, 0}), &zero).supports() ==
        0);
}
