// Cases that span the op families: rank-0 and empty tensors, supports() and run() on bad
// descriptors, and the OWN ops in f16 and bf16 against their f32 results.
// Through the plugin ABI with no core; the harness: cpu_kernel_harness.hpp.
#include "cpu_kernel_harness.hpp"

using namespace cpu_kernel_test;

// ---- Rank 0 and empty tensors ---------------------------------------------------------------

TEST_CASE("rank-0 tensors") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        TensorDesc a = make(dt, {}, {2});
        TensorDesc b = make(dt, {}, {4});
        TensorDesc out = make(dt, {});
        run_ok(TF_OP_ADD, {&a, &b}, out);
        check_values(out, {6});
        run_ok(TF_OP_NEG, {&a}, out);
        check_values(out, {-2});
        const tf_params_reduce none = reduce_params(0);
        run_ok(TF_OP_SUM, {&b}, out, &none);
        check_values(out, {4});
        const tf_params_fill f = fill_params(3);
        run_ok(TF_OP_FILL, {}, out, &f);
        check_values(out, {3});
        TensorDesc as_bool = make(TF_DTYPE_BOOL, {});
        run_ok(TF_OP_CAST, {&a}, as_bool);
        check_values(as_bool, {1});
        run_ok(TF_OP_CONTIGUOUS, {&b}, out);
        check_values(out, {4});
    }
    TensorDesc e = make(TF_DTYPE_F32, {}, {0});
    TensorDesc eo = make(TF_DTYPE_F32, {});
    run_ok(TF_OP_EXP, {&e}, eo);
    check_values(eo, {1});
}

TEST_CASE("zero-size tensors: no data needed, sums are 0") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        TensorDesc a = no_data(dt, {0, 3});
        TensorDesc out = no_data(dt, {0, 3});
        run_ok(TF_OP_ADD, {&a, &a}, out);
        run_ok(TF_OP_RELU, {&a}, out);
        run_ok(TF_OP_CONTIGUOUS, {&a}, out);
        TensorDesc other = no_data(dt == TF_DTYPE_F32 ? TF_DTYPE_I64 : TF_DTYPE_F32, {0, 3});
        run_ok(TF_OP_CAST, {&a}, other);
        const tf_params_fill f = fill_params(1);
        run_ok(TF_OP_FILL, {}, out, &f);

        // Summing over an empty axis writes zeros.
        TensorDesc empty = no_data(dt, {2, 0});
        TensorDesc rows = make(dt, {2, 1});
        const tf_params_reduce p = reduce_params(0b10);
        run_ok(TF_OP_SUM, {&empty}, rows, &p);
        check_values(rows, {0, 0});
        TensorDesc empty1 = no_data(dt, {0});
        TensorDesc whole1 = make(dt, {1});
        const tf_params_reduce p1 = reduce_params(1);
        run_ok(TF_OP_SUM, {&empty1}, whole1, &p1);
        check_values(whole1, {0});
        // Keeping the empty axis: nothing to write.
        TensorDesc empty_out = no_data(dt, {1, 0});
        const tf_params_reduce p0 = reduce_params(0b01);
        run_ok(TF_OP_SUM, {&empty}, empty_out, &p0);
    }
    for (int32_t dt : k_float) {
        // K = 0: out is all zeros. M = 0: nothing to do.
        TensorDesc a = no_data(dt, {2, 0});
        TensorDesc b = no_data(dt, {0, 3});
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_MATMUL, {&a, &b}, out);
        check_values(out, {0, 0, 0, 0, 0, 0});
        TensorDesc a0 = no_data(dt, {0, 4});
        TensorDesc b0 = make(dt, {4, 3});
        TensorDesc out0 = no_data(dt, {0, 3});
        run_ok(TF_OP_MATMUL, {&a0, &b0}, out0);
        TensorDesc batch0 = no_data(dt, {0, 2, 3});
        TensorDesc ab0 = no_data(dt, {0, 2, 4});
        TensorDesc bb0 = no_data(dt, {0, 4, 3});
        run_ok(TF_OP_MATMUL, {&ab0, &bb0}, batch0);
    }
}

// ---- Rank 0, zero-size ----------------------------------------------------------------------

TEST_CASE("rank-0 tensors through every new kind") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {}, {3});
        TensorDesc b = make(dt, {}, {2});
        TensorDesc out = make(dt, {});
        run_ok(TF_OP_POW, {&a, &b}, out);
        check_values(out, {9});
        run_ok(TF_OP_MAXIMUM, {&a, &b}, out);
        check_values(out, {3});
        run_ok(TF_OP_MINIMUM, {&a, &b}, out);
        check_values(out, {2});
        run_ok(TF_OP_ABS, {&b}, out);
        check_values(out, {2});
        run_ok(TF_OP_SQUARE, {&a}, out);
        check_values(out, {9});
        const tf_params_clamp c = clamp_params(0, 2.5);
        run_ok(TF_OP_CLAMP, {&a}, out, &c);
        check_values(out, {is_float(dt) ? 2.5 : 2});

        TensorDesc flag = make(TF_DTYPE_BOOL, {});
        for (uint32_t op : k_compare_ops) {
            run_ok(op, {&a, &b}, flag);
            check_values(flag, {compare_on_host(op, 3, 2) ? 1.0 : 0.0});
        }
        set(flag, {0});
        run_ok(TF_OP_WHERE, {&flag, &a, &b}, out);
        check_values(out, {2});

        const tf_params_reduce none = reduce_params(0);
        run_ok(TF_OP_MAX, {&a}, out, &none);
        check_values(out, {3});
        run_ok(TF_OP_MIN, {&a}, out, &none);
        check_values(out, {3});
        if (is_float(dt)) {
            run_ok(TF_OP_MEAN, {&a}, out, &none);
            check_values(out, {3});
            const tf_params_var v0 = var_params(0, 0), v1 = var_params(0, 1);
            run_ok(TF_OP_VAR, {&a}, out, &v0);
            check_values(out, {0});
            run_ok(TF_OP_VAR, {&a}, out, &v1);
            check_values(out, {NAN});
            for (const MathCase &m : k_math) {
                INFO("op ", m.name);
                run_ok(m.op, {&a}, out);
                check_close(out, {m.f(3)});
            }
        }
        // No axis to take: the ABI requires 0 <= axis < rank.
        TensorDesc idx = make(TF_DTYPE_I64, {});
        const tf_params_axis p0 = axis_params(0);
        CHECK(Call(TF_OP_ARGMAX, {&a}, idx, &p0).supports() == 0);
    }
    TensorDesc bl = make(TF_DTYPE_BOOL, {}, {1});
    TensorDesc cond = make(TF_DTYPE_BOOL, {}, {1});
    TensorDesc bo = make(TF_DTYPE_BOOL, {});
    run_ok(TF_OP_WHERE, {&cond, &bl, &cond}, bo);
    check_values(bo, {1});
}

TEST_CASE("zero-size tensors: no data needed, empty means and variances are NaN") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = no_data(dt, {0, 3});
        TensorDesc out = no_data(dt, {0, 3});
        TensorDesc flags = no_data(TF_DTYPE_BOOL, {0, 3});
        const tf_params_clamp c = clamp_params(-1, 1);
        for (uint32_t op : {TF_OP_POW, TF_OP_MAXIMUM, TF_OP_MINIMUM}) run_ok(op, {&a, &a}, out);
        for (uint32_t op : k_compare_ops) run_ok(op, {&a, &a}, flags);
        run_ok(TF_OP_WHERE, {&flags, &a, &a}, out);
        run_ok(TF_OP_ABS, {&a}, out);
        run_ok(TF_OP_SQUARE, {&a}, out);
        run_ok(TF_OP_CLAMP, {&a}, out, &c);
        // Keeping the empty axis: nothing to reduce into.
        TensorDesc kept = no_data(dt, {0, 1});
        const tf_params_reduce p1 = reduce_params(0b10);
        run_ok(TF_OP_MAX, {&a}, kept, &p1);
        run_ok(TF_OP_MIN, {&a}, kept, &p1);
        // Reducing the empty axis: max and min have no value to give.
        TensorDesc cols = make(dt, {1, 3});
        const tf_params_reduce p0 = reduce_params(0b01);
        for (uint32_t op : {TF_OP_MAX, TF_OP_MIN}) {
            const Call refused(op, {&a}, cols, &p0);
            CHECK(refused.supports() == 0);
            std::string message;
            CHECK(refused.run(&message) == TF_STATUS_INVALID_ARGUMENT);
            CHECK(message.find("size 0") != std::string::npos);
            CHECK(untouched(cols));
        }
        if (is_float(dt)) {
            for (const MathCase &m : k_math) run_ok(m.op, {&a}, out);
            run_ok(TF_OP_MEAN, {&a}, cols, &p0);
            check_values(cols, {NAN, NAN, NAN});
            for (double correction : {0.0, 1.0}) {
                const tf_params_var pv = var_params(0b01, correction);
                run_ok(TF_OP_VAR, {&a}, cols, &pv);
                check_values(cols, {NAN, NAN, NAN});
            }
            run_ok(TF_OP_MEAN, {&a}, kept, &p1);
        }
    }
}

// ---- Empty tensors of the OWN ops ---------------------------------------------------------

TEST_CASE("empty tensors run without touching memory they do not have") {
    // N = 0 images: nothing to compute; grad_weight of no images is zero.
    const tf_params_conv2d p = conv_params(1, 1, 1, 1, 1, 1, 1);
    const TensorDesc x = make(TF_DTYPE_F32, {0, 2, 4, 4}), w = f32({3, 2, 3, 3}, Values(54, 1.0));
    const TensorDesc y = make(TF_DTYPE_F32, {0, 3, 4, 4}), dw = make(TF_DTYPE_F32, {3, 2, 3, 3});
    run_ok(TF_OP_CONV2D, {&x, &w}, y, &p);
    run_ok(TF_OP_CONV2D_GRAD_WEIGHT, {&y, &x}, dw, &p);
    CHECK(get(dw) == Values(54, 0.0));
    // No indices: embedding_backward still zeroes the table.
    const TensorDesc idx = make(TF_DTYPE_I64, {0}), dy = make(TF_DTYPE_F32, {0, 3}), table = make(TF_DTYPE_F32, {4, 3});
    run_ok(TF_OP_EMBEDDING_BACKWARD, {&dy, &idx}, table, nullptr);
    CHECK(get(table) == Values(12, 0.0));
}

// ---- supports() and run() on bad descriptors --------------------------------------------------

TEST_CASE("supports answers descriptors without memory") {
    // The core asks before any data is on the host: tinyfin-info's op matrix, and whether an op
    // on a device tensor could fall back to cpu. data and buffer are NULL there.
    const tf_params_reduce rp = reduce_params(0b01);
    const tf_params_fill fp = fill_params(0);
    auto bare = [](const Dims &shape) { return no_data(TF_DTYPE_F32, shape); };
    const TensorDesc x = bare({2, 3}), sum_out = bare({1, 3}), b = bare({3, 4}), mm_out = bare({2, 4});
    for (uint32_t op : {TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_DIV}) CHECK(Call(op, {&x, &x}, x).supports() == 1);
    for (uint32_t op : {TF_OP_NEG, TF_OP_EXP, TF_OP_RELU, TF_OP_CONTIGUOUS, TF_OP_CAST})
        CHECK(Call(op, {&x}, x).supports() == 1);
    CHECK(Call(TF_OP_SUM, {&x}, sum_out, &rp).supports() == 1);
    CHECK(Call(TF_OP_MATMUL, {&x, &b}, mm_out).supports() == 1);
    CHECK(Call(TF_OP_FILL, {}, x, &fp).supports() == 1);
}

TEST_CASE("supports says no to wrong dtypes, arity, params and layouts") {
    TensorDesc f = make(TF_DTYPE_F32, {2, 2}, {1, 2, 3, 4});
    TensorDesc h = make(TF_DTYPE_F16, {2, 2});
    TensorDesc i = make(TF_DTYPE_I32, {2, 2});
    TensorDesc l = make(TF_DTYPE_I64, {2, 2});
    TensorDesc bl = make(TF_DTYPE_BOOL, {2, 2});
    TensorDesc f1 = make(TF_DTYPE_F32, {2, 1});
    const tf_params_reduce p = reduce_params(0b10);
    const tf_params_fill fp = fill_params(1);

    SUBCASE("dtypes") {
        CHECK(Call(TF_OP_ADD, {&f, &f}, f).supports() == 1);
        CHECK(Call(TF_OP_ADD, {&f, &h}, f).supports() == 0);
        CHECK(Call(TF_OP_ADD, {&f, &f}, h).supports() == 0);
        CHECK(Call(TF_OP_ADD, {&bl, &bl}, bl).supports() == 0);
        CHECK(Call(TF_OP_EXP, {&i}, i).supports() == 0);
        CHECK(Call(TF_OP_EXP, {&bl}, bl).supports() == 0);
        CHECK(Call(TF_OP_NEG, {&bl}, bl).supports() == 0);
        CHECK(Call(TF_OP_RELU, {&f}, h).supports() == 0);
        TensorDesc b1 = make(TF_DTYPE_BOOL, {2, 1});
        CHECK(Call(TF_OP_SUM, {&bl}, b1, &p).supports() == 0);
        CHECK(Call(TF_OP_SUM, {&f}, f1, &p).supports() == 1);
        CHECK(Call(TF_OP_MATMUL, {&i, &i}, i).supports() == 0);
        CHECK(Call(TF_OP_MATMUL, {&l, &l}, l).supports() == 0);
        CHECK(Call(TF_OP_MATMUL, {&f, &h}, f).supports() == 0);
        CHECK(Call(TF_OP_CONTIGUOUS, {&f}, h).supports() == 0);
        CHECK(Call(TF_OP_CAST, {&f}, bl).supports() == 1);
        TensorDesc bad = f;
        bad.d.dtype = TF_DTYPE_COUNT_;
        CHECK(Call(TF_OP_CAST, {&bad}, f).supports() == 0);
        CHECK(Call(TF_OP_FILL, {}, bad, &fp).supports() == 0);
        bad.d.dtype = -1;
        CHECK(Call(TF_OP_CONTIGUOUS, {&bad}, bad).supports() == 0);
    }
    SUBCASE("arity") {
        CHECK(Call(TF_OP_ADD, {&f}, f).supports() == 0);
        CHECK(Call(TF_OP_ADD, {&f, &f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_NEG, {&f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_FILL, {&f}, f, &fp).supports() == 0);
        Call no_out(TF_OP_ADD, {&f, &f}, f);
        no_out.op.n_outputs = 0;
        CHECK(no_out.supports() == 0);
        Call null_inputs(TF_OP_ADD, {&f, &f}, f);
        null_inputs.op.inputs = nullptr;
        CHECK(null_inputs.supports() == 0);
    }
    SUBCASE("params") {
        CHECK(Call(TF_OP_SUM, {&f}, f1, nullptr).supports() == 0);
        CHECK(Call(TF_OP_FILL, {}, f, nullptr).supports() == 0);
        tf_params_reduce small = p;
        small.struct_size = 4;
        CHECK(Call(TF_OP_SUM, {&f}, f1, &small).supports() == 0);
        tf_params_fill small_fill = fp;
        small_fill.struct_size = sizeof(uint32_t);
        CHECK(Call(TF_OP_FILL, {}, f, &small_fill).supports() == 0);
        const tf_params_reduce beyond = reduce_params(0b110);  // axis 2 of a rank-2 tensor
        CHECK(Call(TF_OP_SUM, {&f}, f1, &beyond).supports() == 0);
        CHECK(Call(TF_OP_SUM, {&f}, f, &p).supports() == 0);  // axis 1 not reduced in the output
    }
    SUBCASE("descriptors") {
        Call c(TF_OP_ADD, {&f, &f}, f);
        REQUIRE(c.supports() == 1);
        CHECK(P().supports(1, &c.op) == 0);
        CHECK(P().supports(0, nullptr) == 0);
        c.op.struct_size = 8;
        CHECK(c.supports() == 0);
        c.op.struct_size = sizeof c.op;
        c.op.op = TF_OP_COUNT_;
        CHECK(c.supports() == 0);
        c.op.op = 999;
        CHECK(c.supports() == 0);
        c.op.op = TF_OP_ADD;

        c.inputs[0].rank = TF_MAX_RANK + 1;
        CHECK(c.supports() == 0);
        c.inputs[0].rank = -1;
        CHECK(c.supports() == 0);
        c.inputs[0] = f.d;
        c.inputs[0].shape[1] = -2;
        CHECK(c.supports() == 0);
        c.inputs[0] = f.d;
        c.inputs[0].strides[0] = -1;
        CHECK(c.supports() == 0);
        c.inputs[0] = f.d;
        c.inputs[0].struct_size = 0;
        CHECK(c.supports() == 0);
        c.inputs[0] = f.d;
        c.inputs[0].data = nullptr;  // elements but no host address: a question supports() answers
        CHECK(c.supports() == 1);  // (the core asks before data is on the host), run() refuses
        std::string message;
        CHECK(c.run(&message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("no host address") != std::string::npos);
        c.inputs[0] = f.d;
        c.inputs[0].shape[0] = INT64_MAX;  // shape mismatch and an unaddressable extent
        CHECK(c.supports() == 0);
        c.inputs[0] = f.d;
        REQUIRE(c.supports() == 1);

        TensorDesc wrong_shape = make(TF_DTYPE_F32, {2, 3});
        CHECK(Call(TF_OP_ADD, {&f, &wrong_shape}, f).supports() == 0);
        CHECK(Call(TF_OP_NEG, {&wrong_shape}, f).supports() == 0);
        TensorDesc r1 = make(TF_DTYPE_F32, {4});
        CHECK(Call(TF_OP_ADD, {&f, &r1}, f).supports() == 0);  // not broadcast to the output rank
        CHECK(Call(TF_OP_MATMUL, {&f, &wrong_shape}, f).supports() == 0);  // [2,2] x [2,3] -> [2,2]
        CHECK(Call(TF_OP_MATMUL, {&wrong_shape, &f}, f).supports() == 0);  // K mismatch
        CHECK(Call(TF_OP_MATMUL, {&r1, &r1}, r1).supports() == 0);  // rank 1
        // Any stride on a size-1 axis, even one that would overflow as a byte count.
        TensorDesc row = make(TF_DTYPE_F32, {1, 3}, {1, 2, 3});
        TensorDesc odd_row = view(row, {1, 3}, {INT64_MAX, 1});
        TensorDesc row_out = make(TF_DTYPE_F32, {1, 3});
        run_ok(TF_OP_ADD, {&odd_row, &odd_row}, row_out);
        check_values(row_out, {2, 4, 6});
        TensorDesc r9 = make(TF_DTYPE_F32, {1, 1, 1, 1, 1, 1, 1, 1});
        CHECK(Call(TF_OP_ADD, {&r9, &r9}, r9).supports() == 1);  // rank TF_MAX_RANK is fine
    }
    SUBCASE("run rejects what supports rejects, with a message naming the op") {
        std::string message;
        CHECK(Call(TF_OP_EXP, {&i}, i).run(&message) == TF_STATUS_UNSUPPORTED);
        CHECK(message.find("exp") == 0);
        CHECK(message.find("i32") != std::string::npos);
        CHECK(Call(TF_OP_SUM, {&f}, f1, nullptr).run(&message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("sum") == 0);
        Call c(TF_OP_ADD, {&f, &f}, f);
        c.op.op = 999;
        CHECK(c.run(&message) == TF_STATUS_UNSUPPORTED);
        CHECK(message.find("999") != std::string::npos);
        tf_error err = make_error();
        CHECK(P().run(0, nullptr, &err) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(P().run(0, nullptr, nullptr) == TF_STATUS_INVALID_ARGUMENT);  // err is optional
    }
}

// ---- supports() -----------------------------------------------------------------------------

TEST_CASE("supports answers descriptors without memory for every new op") {
    const tf_params_reduce rp = reduce_params(0b01);
    const tf_params_var vp = var_params(0b01, 1);
    const tf_params_axis ap = axis_params(1);
    const tf_params_clamp cp = clamp_params(-1, 1);
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        const TensorDesc x = no_data(dt, {2, 3}), reduced = no_data(dt, {1, 3});
        const TensorDesc flags = no_data(TF_DTYPE_BOOL, {2, 3}), index = no_data(TF_DTYPE_I64, {2, 1});
        for (uint32_t op : {TF_OP_POW, TF_OP_MAXIMUM, TF_OP_MINIMUM}) CHECK(Call(op, {&x, &x}, x).supports() == 1);
        for (uint32_t op : k_compare_ops) CHECK(Call(op, {&x, &x}, flags).supports() == 1);
        CHECK(Call(TF_OP_WHERE, {&flags, &x, &x}, x).supports() == 1);
        for (const MathCase &m : k_math) CHECK(Call(m.op, {&x}, x).supports() == 1);
        CHECK(Call(TF_OP_ABS, {&x}, x).supports() == 1);
        CHECK(Call(TF_OP_SQUARE, {&x}, x).supports() == 1);
        CHECK(Call(TF_OP_CLAMP, {&x}, x, &cp).supports() == 1);
        for (uint32_t op : {TF_OP_MEAN, TF_OP_MAX, TF_OP_MIN}) CHECK(Call(op, {&x}, reduced, &rp).supports() == 1);
        CHECK(Call(TF_OP_VAR, {&x}, reduced, &vp).supports() == 1);
        CHECK(Call(TF_OP_ARGMAX, {&x}, index, &ap).supports() == 1);
        CHECK(Call(TF_OP_ARGMIN, {&x}, index, &ap).supports() == 1);
    }
    // run() needs the data supports() did without.
    const TensorDesc x = no_data(TF_DTYPE_F32, {2, 3});
    std::string message;
    CHECK(Call(TF_OP_LOG, {&x}, x).run(&message) == TF_STATUS_INVALID_ARGUMENT);
    CHECK(message.find("no host address") != std::string::npos);
}

TEST_CASE("supports says no to wrong dtypes") {
    const TensorDesc f = no_data(TF_DTYPE_F32, {2, 2}), h = no_data(TF_DTYPE_F16, {2, 2});
    const TensorDesc i = no_data(TF_DTYPE_I32, {2, 2}), l = no_data(TF_DTYPE_I64, {2, 2});
    const TensorDesc bl = no_data(TF_DTYPE_BOOL, {2, 2});
    const TensorDesc f_row = no_data(TF_DTYPE_F32, {1, 2}), i_row = no_data(TF_DTYPE_I32, {1, 2});
    const TensorDesc b_row = no_data(TF_DTYPE_BOOL, {1, 2}), l_col = no_data(TF_DTYPE_I64, {2, 1});
    const TensorDesc i_col = no_data(TF_DTYPE_I32, {2, 1}), f_col = no_data(TF_DTYPE_F32, {2, 1});
    const tf_params_reduce rp = reduce_params(0b01);
    const tf_params_var vp = var_params(0b01, 1);
    const tf_params_axis ap = axis_params(1);
    const tf_params_clamp cp = clamp_params(-1, 1);

    // Binary: one dtype throughout; pow, maximum, minimum numeric only.
    for (uint32_t op : {TF_OP_POW, TF_OP_MAXIMUM, TF_OP_MINIMUM}) {
        CAPTURE(op);
        CHECK(Call(op, {&i, &i}, i).supports() == 1);
        CHECK(Call(op, {&l, &l}, l).supports() == 1);
        CHECK(Call(op, {&f, &h}, f).supports() == 0);
        CHECK(Call(op, {&f, &f}, h).supports() == 0);
        CHECK(Call(op, {&bl, &bl}, bl).supports() == 0);
    }
    // Comparisons: inputs of one dtype (bool too), bool output.
    for (uint32_t op : k_compare_ops) {
        CAPTURE(op);
        for (const TensorDesc *t : {&f, &h, &i, &l, &bl}) CHECK(Call(op, {t, t}, bl).supports() == 1);
        CHECK(Call(op, {&f, &h}, bl).supports() == 0);
        CHECK(Call(op, {&i, &l}, bl).supports() == 0);
        CHECK(Call(op, {&f, &f}, f).supports() == 0);
        CHECK(Call(op, {&i, &i}, i).supports() == 0);
    }
    // where: bool condition, a, b and out of one dtype (any).
    for (const TensorDesc *t : {&f, &h, &i, &l, &bl}) CHECK(Call(TF_OP_WHERE, {&bl, t, t}, *t).supports() == 1);
    CHECK(Call(TF_OP_WHERE, {&i, &f, &f}, f).supports() == 0);
    CHECK(Call(TF_OP_WHERE, {&f, &f, &f}, f).supports() == 0);
    CHECK(Call(TF_OP_WHERE, {&bl, &f, &h}, f).supports() == 0);
    CHECK(Call(TF_OP_WHERE, {&bl, &f, &f}, h).supports() == 0);
    CHECK(Call(TF_OP_WHERE, {&bl, &i, &i}, l).supports() == 0);
    // Unary: float math refuses integers and bool; abs, square, clamp take integers; dtype kept.
    for (const MathCase &m : k_math) {
        INFO("op ", m.name);
        CHECK(Call(m.op, {&i}, i).supports() == 0);
        CHECK(Call(m.op, {&l}, l).supports() == 0);
        CHECK(Call(m.op, {&bl}, bl).supports() == 0);
        CHECK(Call(m.op, {&f}, h).supports() == 0);
    }
    CHECK(Call(TF_OP_ABS, {&l}, l).supports() == 1);
    CHECK(Call(TF_OP_SQUARE, {&i}, i).supports() == 1);
    CHECK(Call(TF_OP_CLAMP, {&i}, i, &cp).supports() == 1);
    CHECK(Call(TF_OP_ABS, {&f}, i).supports() == 0);
    CHECK(Call(TF_OP_CLAMP, {&f}, h, &cp).supports() == 0);
    // Reductions: mean and var float only; max and min numeric; output dtype = input dtype.
    CHECK(Call(TF_OP_MEAN, {&i}, i_row, &rp).supports() == 0);
    CHECK(Call(TF_OP_VAR, {&i}, i_row, &vp).supports() == 0);
    CHECK(Call(TF_OP_MAX, {&i}, i_row, &rp).supports() == 1);
    CHECK(Call(TF_OP_MIN, {&bl}, b_row, &rp).supports() == 0);
    CHECK(Call(TF_OP_MAX, {&f}, i_row, &rp).supports() == 0);
    CHECK(Call(TF_OP_MEAN, {&f}, f_row, &rp).supports() == 1);
    // arg: numeric input, i64 output.
    CHECK(Call(TF_OP_ARGMAX, {&i}, l_col, &ap).supports() == 1);
    CHECK(Call(TF_OP_ARGMAX, {&bl}, l_col, &ap).supports() == 0);
    CHECK(Call(TF_OP_ARGMIN, {&f}, i_col, &ap).supports() == 0);
    CHECK(Call(TF_OP_ARGMIN, {&f}, f_col, &ap).supports() == 0);
}

TEST_CASE("supports says no to wrong arity, params and shapes") {
    const TensorDesc f = no_data(TF_DTYPE_F32, {2, 3}), bl = no_data(TF_DTYPE_BOOL, {2, 3});
    const TensorDesc f_row = no_data(TF_DTYPE_F32, {1, 3}), l_col = no_data(TF_DTYPE_I64, {2, 1});
    const tf_params_reduce rp = reduce_params(0b01);
    const tf_params_var vp = var_params(0b01, 1);
    const tf_params_axis ap = axis_params(1);
    const tf_params_clamp cp = clamp_params(-1, 1);

    SUBCASE("arity") {
        CHECK(Call(TF_OP_POW, {&f}, f).supports() == 0);
        CHECK(Call(TF_OP_MAXIMUM, {&f, &f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_EQ, {&f}, bl).supports() == 0);
        CHECK(Call(TF_OP_WHERE, {&bl, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_WHERE, {&bl, &f, &f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_SIGMOID, {&f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_ARGMAX, {&f, &f}, l_col, &ap).supports() == 0);
        Call no_out(TF_OP_WHERE, {&bl, &f, &f}, f);
        no_out.op.n_outputs = 2;
        CHECK(no_out.supports() == 0);
    }
    SUBCASE("params: NULL, too small, out of range") {
        CHECK(Call(TF_OP_CLAMP, {&f}, f, nullptr).supports() == 0);
        CHECK(Call(TF_OP_MEAN, {&f}, f_row, nullptr).supports() == 0);
        CHECK(Call(TF_OP_VAR, {&f}, f_row, nullptr).supports() == 0);
        CHECK(Call(TF_OP_ARGMAX, {&f}, l_col, nullptr).supports() == 0);
        tf_params_clamp small_clamp = cp;
        small_clamp.struct_size = offsetof(tf_params_clamp, max);  // no max member
        CHECK(Call(TF_OP_CLAMP, {&f}, f, &small_clamp).supports() == 0);
        // A tf_params_reduce is too small to be a tf_params_var.
        tf_params_var small_var = vp;
        small_var.struct_size = sizeof(tf_params_reduce);
        CHECK(Call(TF_OP_VAR, {&f}, f_row, &small_var).supports() == 0);
        CHECK(Call(TF_OP_VAR, {&f}, f_row, &rp).supports() == 0);
        tf_params_axis small_axis = ap;
        small_axis.struct_size = 4;
        CHECK(Call(TF_OP_ARGMAX, {&f}, l_col, &small_axis).supports() == 0);
        for (int32_t axis : {-1, 2, 1000}) {
            const tf_params_axis bad = axis_params(axis);
            CHECK(Call(TF_OP_ARGMIN, {&f}, l_col, &bad).supports() == 0);
        }
        const tf_params_var beyond = var_params(0b100, 1);
        CHECK(Call(TF_OP_VAR, {&f}, f_row, &beyond).supports() == 0);
    }
    SUBCASE("shapes") {
        const TensorDesc f23 = no_data(TF_DTYPE_F32, {3, 2}), b32 = no_data(TF_DTYPE_BOOL, {3, 2});
        CHECK(Call(TF_OP_POW, {&f, &f23}, f).supports() == 0);
        CHECK(Call(TF_OP_LT, {&f, &f}, b32).supports() == 0);
        CHECK(Call(TF_OP_WHERE, {&b32, &f, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_WHERE, {&bl, &f23, &f}, f).supports() == 0);
        CHECK(Call(TF_OP_TANH, {&f23}, f).supports() == 0);
        CHECK(Call(TF_OP_MEAN, {&f}, f, &rp).supports() == 0);  // axis 0 not reduced in the output
        const TensorDesc l_row = no_data(TF_DTYPE_I64, {1, 3}), l_flat = no_data(TF_DTYPE_I64, {2});
        CHECK(Call(TF_OP_ARGMAX, {&f}, l_row, &ap).supports() == 0);  // size 1 on the wrong axis
        CHECK(Call(TF_OP_ARGMAX, {&f}, l_flat, &ap).supports() == 0);  // axis dropped: not the ABI's shape
        CHECK(Call(TF_OP_ARGMAX, {&f}, l_col, &ap).supports() == 1);
    }
}

// ---- The OWN ops in f16 and bf16 ------------------------------------------------------------

TEST_CASE("f16 and bf16 inputs give the f32 results rounded once") {
    // Inputs are multiples of 1/8 in [-2, 2], exact in all three dtypes; each narrow result must
    // be within one rounding of the f32 result.
    const Values x = random_values(4 * 6, 61), w = random_values(6, 62), b = random_values(6, 63);
    const Values q = random_values(2 * 3 * 4, 64), k = random_values(2 * 5 * 4, 65), v = random_values(2 * 5 * 2, 66);
    const Values mask = random_values(2 * 3 * 5, 67);
    const tf_params_axis axis{sizeof(tf_params_axis), 1};
    const tf_params_norm norm{sizeof(tf_params_norm), 1, 1e-5};
    const tf_params_rope rope{sizeof(tf_params_rope), 1, 0, 10000.0, 3};
    const tf_params_attention att{sizeof(tf_params_attention), 1, 0, 0.5};
    const tf_params_cross_entropy ce{sizeof(tf_params_cross_entropy), TF_REDUCTION_NONE, -100};
    const TensorDesc labels = make(TF_DTYPE_I64, {4}, {5, 0, 2, 3});
    // All results of one dtype, in a fixed order.
    auto run_all = [&](int32_t dtype) {
        Values all;
        auto append = [&](const TensorDesc &t) {
            const Values got = get(t);
            all.insert(all.end(), got.begin(), got.end());
        };
        const TensorDesc xt = make(dtype, {4, 6}, x), wt = make(dtype, {6}, w), bt = make(dtype, {6}, b);
        const TensorDesc out = make(dtype, {4, 6});
        for (uint32_t op : {TF_OP_SOFTMAX, TF_OP_LOG_SOFTMAX}) {
            run_ok(op, {&xt}, out, &axis);
            append(out);
        }
        run_ok(TF_OP_LAYER_NORM, {&xt, &wt, &bt}, out, &norm);
        append(out);
        run_ok(TF_OP_RMS_NORM, {&xt, &wt}, out, &norm);
        append(out);
        run_ok(TF_OP_ROPE, {&xt}, out, &rope);
        append(out);
        const TensorDesc qt = make(dtype, {2, 3, 4}, q), kt = make(dtype, {2, 5, 4}, k), vt = make(dtype, {2, 5, 2}, v),
                         mt = make(dtype, {2, 3, 5}, mask), ot = make(dtype, {2, 3, 2});
        run_ok(TF_OP_ATTENTION, {&qt, &kt, &vt, &mt}, ot, &att);
        append(ot);
        const TensorDesc loss = make(dtype, {4});
        run_ok(TF_OP_CROSS_ENTROPY, {&xt, &labels}, loss, &ce);
        append(loss);
        const TensorDesc dw = make(dtype, {6, 6});
        run_ok(TF_OP_EMBEDDING_BACKWARD, {&xt, &labels}, dw, nullptr);
        append(dw);
        return all;
    };
    const Values reference = run_all(TF_DTYPE_F32);
    check_close(run_all(TF_DTYPE_F16), reference, 1.0 / 1024);
    check_close(run_all(TF_DTYPE_BF16), reference, 1.0 / 128);
}
