// matmul through the ABI: float dtypes, strides, broadcast batches, against a triple loop
// (the packed GEMM behind it: test_cpu_gemm.cpp).
// Through the plugin ABI with no core; the harness: cpu_kernel_harness.hpp.
#include "cpu_kernel_harness.hpp"

using namespace cpu_kernel_test;

// ---- matmul ---------------------------------------------------------------------------------

TEST_CASE("matmul, float dtypes, any strides") {
    // [[1, 2, 3], [4, 5, 6]] x [[7, 8], [9, 10], [11, 12]] = [[58, 64], [139, 154]]
    for (int32_t dt : k_float) {
        CAPTURE(name_of(dt));
        TensorDesc a = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
        TensorDesc b = make(dt, {3, 2}, {7, 8, 9, 10, 11, 12});
        TensorDesc out = make(dt, {2, 2});
        run_ok(TF_OP_MATMUL, {&a, &b}, out);
        check_values(out, {58, 64, 139, 154});

        TensorDesc a_storage = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6});
        TensorDesc at = transposed(a_storage);
        TensorDesc b_storage = make(dt, {2, 3}, {7, 9, 11, 8, 10, 12});
        TensorDesc bt = transposed(b_storage);
        TensorDesc out_storage = make(dt, {2, 2});
        TensorDesc out_t = transposed(out_storage);
        run_ok(TF_OP_MATMUL, {&at, &bt}, out_t);
        check_values(out_t, {58, 64, 139, 154});
        check_values(out_storage, {58, 139, 64, 154});

        // b sliced with step 2 along both axes out of a [6, 4] storage.
        TensorDesc big = make(dt, {6, 4});
        set(big, {7, 0, 8, 0, 0, 0, 0, 0, 9, 0, 10, 0, 0, 0, 0, 0, 11, 0, 12, 0, 0, 0, 0, 0});
        TensorDesc bs = view(big, {3, 2}, {8, 2});
        run_ok(TF_OP_MATMUL, {&a, &bs}, out);
        check_values(out, {58, 64, 139, 154});

        // [1, 3] x [3, 1]
        TensorDesc r = make(dt, {1, 3}, {1, 2, 3});
        TensorDesc c = make(dt, {3, 1}, {7, 9, 11});
        TensorDesc dot = make(dt, {1, 1});
        run_ok(TF_OP_MATMUL, {&r, &c}, dot);
        check_values(dot, {58});
    }
}

TEST_CASE("batched matmul with broadcast batch axes") {
    for (int32_t dt : k_float) {
        CAPTURE(name_of(dt));
        // Batch 1 of a picks rows of b: [0, 1, 0] -> b[1], [1, 0, 1] -> b[0] + b[2].
        TensorDesc a = make(dt, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 0, 1});
        TensorDesc b_one = make(dt, {3, 2}, {7, 8, 9, 10, 11, 12});
        TensorDesc b = view(b_one, {2, 3, 2}, {0, 2, 1});
        TensorDesc out = make(dt, {2, 2, 2});
        run_ok(TF_OP_MATMUL, {&a, &b}, out);
        check_values(out, {58, 64, 139, 154, 9, 10, 18, 20});

        // The other way round: a broadcast, b batched (batch 1 picks the first two columns of a).
        TensorDesc a_one = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
        TensorDesc ab = view(a_one, {2, 2, 3}, {0, 3, 1});
        TensorDesc b2 = make(dt, {2, 3, 2}, {7, 8, 9, 10, 11, 12, 1, 0, 0, 1, 0, 0});
        run_ok(TF_OP_MATMUL, {&ab, &b2}, out);
        check_values(out, {58, 64, 139, 154, 1, 2, 4, 5});

        // Rank 4 with a transposed output batch layout: out [2, 1, 2, 2] stored batch-minor.
        TensorDesc a4 = view(a, {2, 1, 2, 3}, {6, 6, 3, 1});
        TensorDesc b4 = view(b_one, {2, 1, 3, 2}, {0, 0, 2, 1});
        TensorDesc out_storage = make(dt, {2, 2, 2});
        TensorDesc out4 = view(out_storage, {2, 1, 2, 2}, {1, 2, 4, 2});
        run_ok(TF_OP_MATMUL, {&a4, &b4}, out4);
        check_values(out4, {58, 64, 139, 154, 9, 10, 18, 20});
        check_values(out_storage, {58, 9, 64, 10, 139, 18, 154, 20});
    }
}

TEST_CASE("matmul against a plain triple loop on a larger shape") {
    const int m = 37, k = 53, n = 41;
    TensorDesc a = make(TF_DTYPE_F32, {m, k});
    TensorDesc b = make(TF_DTYPE_F32, {k, n});
    std::vector<float> va(m * k), vb(k * n);
    for (int i = 0; i < m * k; ++i) va[i] = static_cast<float>((i * 7) % 11 - 5);
    for (int i = 0; i < k * n; ++i) vb[i] = static_cast<float>((i * 5) % 13 - 6);
    set_raw(a, va);
    set_raw(b, vb);
    TensorDesc out = make(TF_DTYPE_F32, {m, n});
    run_ok(TF_OP_MATMUL, {&a, &b}, out);
    const auto got = get_raw<float>(out);
    int wrong = 0;
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            double ref = 0;  // small integers: every partial sum is exact in f32
            for (int kk = 0; kk < k; ++kk) ref += double(va[i * k + kk]) * vb[kk * n + j];
            wrong += got[i * n + j] != static_cast<float>(ref);
        }
    CHECK(wrong == 0);
}
