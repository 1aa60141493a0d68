// The elementwise ops: arithmetic with broadcasting and strides, pow, maximum, minimum,
// relu_backward, gelu_backward, comparisons, where, the float unary math, abs, square, clamp.
// Through the plugin ABI with no core; the harness: cpu_kernel_harness.hpp.
#include "cpu_kernel_harness.hpp"

#include <cstring>
#include <random>

using namespace cpu_kernel_test;

// ---- Elementwise ----------------------------------------------------------------------------

TEST_CASE("binary ops broadcast through stride 0, every dtype") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        TensorDesc a = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
        TensorDesc row = make(dt, {3}, {1, 2, 4});
        TensorDesc b = view(row, {2, 3}, {0, 1});  // [3] broadcast along axis 0
        TensorDesc out = make(dt, {2, 3});

        run_ok(TF_OP_ADD, {&a, &b}, out);
        check_values(out, {2, 4, 7, 5, 7, 10});
        run_ok(TF_OP_SUB, {&a, &b}, out);
        check_values(out, {0, 0, -1, 3, 3, 2});
        run_ok(TF_OP_MUL, {&a, &b}, out);
        check_values(out, {1, 4, 12, 4, 10, 24});
        run_ok(TF_OP_DIV, {&a, &b}, out);
        if (is_float(dt))
            check_values(out, {1, 1, 0.75, 4, 2.5, 1.5});
        else
            check_values(out, {1, 1, 0, 4, 2, 1});

        TensorDesc col = make(dt, {2}, {10, 20});
        TensorDesc c = view(col, {2, 3}, {1, 0});  // [2, 1] broadcast along axis 1
        run_ok(TF_OP_ADD, {&a, &c}, out);
        check_values(out, {11, 12, 13, 24, 25, 26});

        TensorDesc scalar = make(dt, {}, {3});
        TensorDesc s = view(scalar, {2, 3}, {0, 0});
        run_ok(TF_OP_SUB, {&s, &a}, out);
        check_values(out, {2, 1, 0, -1, -2, -3});
    }
}

TEST_CASE("elementwise on transposed and strided inputs and outputs") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        // Transposed input: storage [3, 2] seen as [2, 3].
        TensorDesc st = make(dt, {3, 2}, {1, 2, 3, 4, 5, 6});
        TensorDesc t = transposed(st);
        TensorDesc b = make(dt, {2, 3}, {10, 20, 30, 40, 50, 60});
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_ADD, {&t, &b}, out);
        check_values(out, {11, 23, 35, 42, 54, 66});

        // Slice with step 2 from offset 1.
        TensorDesc line = make(dt, {8}, {0, 1, 2, 3, 4, 5, 6, 7});
        TensorDesc odd = view(line, {4}, {2}, 1);
        TensorDesc neg = make(dt, {4});
        run_ok(TF_OP_NEG, {&odd}, neg);
        check_values(neg, {-1, -3, -5, -7});

        // Transposed output: out[i][j] lands at storage[j * 3 + i].
        TensorDesc x = make(dt, {3, 2}, {1, 2, 3, 4, 5, 6});
        TensorDesc out_storage = make(dt, {2, 3});
        TensorDesc out_t = transposed(out_storage);
        run_ok(TF_OP_ADD, {&x, &x}, out_t);
        check_values(out_t, {2, 4, 6, 8, 10, 12});
        check_values(out_storage, {2, 6, 10, 4, 8, 12});

        // Output sliced with step 3 from offset 1: the other bytes stay as they were.
        TensorDesc wide = make(dt, {10});
        TensorDesc every_third = view(wide, {3}, {3}, 1);
        TensorDesc y = make(dt, {3}, {-1, 2, -3});
        run_ok(TF_OP_RELU, {&y}, every_third);
        check_values(every_third, {0, 2, 0});
        CHECK(only_elements_written(every_third));

        // Rank 3, permuted input against a broadcast input.
        TensorDesc cube = make(dt, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
        TensorDesc perm = view(cube, {2, 2, 2}, {1, 4, 2});  // axes (2, 0, 1): p[i][j][k] = cube[j][k][i]
        TensorDesc ones = make(dt, {}, {1});
        TensorDesc bone = view(ones, {2, 2, 2}, {0, 0, 0});
        TensorDesc out3 = make(dt, {2, 2, 2});
        run_ok(TF_OP_MUL, {&perm, &bone}, out3);
        check_values(out3, {0, 2, 4, 6, 1, 3, 5, 7});
    }
}

// Dense f32 + - * / of one layout take a shortcut to the row loop; these layouts sit at its edges.
TEST_CASE("f32 arithmetic on dense operands: size-1 axes, offsets, lengths, misaligned data") {
    const uint32_t ops[] = {TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_DIV};
    auto expect = [](uint32_t op, float x, float y) {
        return op == TF_OP_ADD ? x + y : op == TF_OP_SUB ? x - y : op == TF_OP_MUL ? x * y : x / y;
    };
    for (uint32_t op : ops) {
        CAPTURE(op);
        // A size-1 axis with any stride is still dense; the output sits at an offset in a larger
        // storage and only its elements are written.
        TensorDesc a = make(TF_DTYPE_F32, {2, 3}, {1, 2, 3, 4, 5, 6});
        TensorDesc a3 = view(a, {2, 1, 3}, {3, 99, 1});
        TensorDesc b = make(TF_DTYPE_F32, {2, 1, 3}, {7, 3, 2, 0.5, 8, 4});
        TensorDesc wide = make(TF_DTYPE_F32, {8});
        TensorDesc out = view(wide, {2, 1, 3}, {3, 3, 1}, 1);
        run_ok(op, {&a3, &b}, out);
        const std::vector<double> av = {1, 2, 3, 4, 5, 6}, bv = {7, 3, 2, 0.5, 8, 4};
        std::vector<double> want;
        for (size_t i = 0; i < av.size(); ++i) want.push_back(expect(op, float(av[i]), float(bv[i])));
        check_values(out, want);
        CHECK(only_elements_written(out));

        // Lengths around the vector widths, and data that is not float-aligned (any byte offset).
        for (int64_t n : {1, 15, 16, 17, 1000}) {
            for (uint64_t shift : {uint64_t{0}, uint64_t{2}}) {
                CAPTURE(n);
                CAPTURE(shift);
                const size_t bytes = static_cast<size_t>(n) * sizeof(float) + shift;
                std::vector<char> x(bytes), y(bytes), z(bytes + 4, 0x5a);
                std::vector<float> xs, ys;
                for (int64_t i = 0; i < n; ++i) {
                    xs.push_back(float(i % 13) - 6.5f);
                    ys.push_back(float(i % 7) + 0.25f);
                }
                std::memcpy(x.data() + shift, xs.data(), xs.size() * sizeof(float));
                std::memcpy(y.data() + shift, ys.data(), ys.size() * sizeof(float));
                tf_tensor_desc dx = describe(TF_DTYPE_F32, {n}, {1}, 0), dy = dx, dz = dx;
                dx.offset = dy.offset = dz.offset = shift;
                dx.data = x.data();
                dy.data = y.data();
                dz.data = z.data();
                tf_tensor_desc ins[2] = {dx, dy};
                tf_op_desc desc{sizeof(tf_op_desc), op, 2, 1, ins, &dz, nullptr};
                tf_error err = make_error();
                REQUIRE(P().run(0, &desc, &err) == TF_STATUS_OK);
                for (int64_t i = 0; i < n; ++i) {
                    float got;
                    std::memcpy(&got, z.data() + shift + i * sizeof(float), sizeof got);
                    REQUIRE(f32_bits(got) == f32_bits(expect(op, xs[i], ys[i])));
                }
                CHECK(static_cast<unsigned char>(z[bytes]) == 0x5a);  // nothing past the last element
            }
        }
    }
}

TEST_CASE("elementwise reads only desc.data, never the buffer") {
    std::vector<float> a = {1, 2, 3}, b = {4, 5, 6}, c(3, 0);
    tf_tensor_desc da = describe(TF_DTYPE_F32, {3}, {1}, 0), db = da, dc = da;
    da.data = a.data();
    db.data = b.data();
    dc.data = c.data();  // foreign host memory: buffer stays NULL
    tf_tensor_desc ins[2] = {da, db};
    tf_op_desc op{sizeof(tf_op_desc), TF_OP_ADD, 2, 1, ins, &dc, nullptr};
    tf_error err = make_error();
    REQUIRE(P().supports(0, &op) == 1);
    REQUIRE(P().run(0, &op, &err) == TF_STATUS_OK);
    CHECK(c == std::vector<float>{5, 7, 9});
}

TEST_CASE("unary ops, every dtype") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        TensorDesc x = make(dt, {4}, {1, -2, 0, 6});
        TensorDesc out = make(dt, {4});
        run_ok(TF_OP_NEG, {&x}, out);
        check_values(out, {-1, 2, 0, -6});
        run_ok(TF_OP_RELU, {&x}, out);
        check_values(out, {1, 0, 0, 6});
    }
    // neg wraps INT_MIN; relu keeps NaN and -0.
    TensorDesc i = make(TF_DTYPE_I32, {2});
    set_raw<int32_t>(i, {INT32_MIN, INT32_MAX});
    TensorDesc io = make(TF_DTYPE_I32, {2});
    run_ok(TF_OP_NEG, {&i}, io);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{INT32_MIN, -INT32_MAX});
    TensorDesc l = make(TF_DTYPE_I64, {1});
    set_raw<int64_t>(l, {INT64_MIN});
    TensorDesc lo = make(TF_DTYPE_I64, {1});
    run_ok(TF_OP_NEG, {&l}, lo);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{INT64_MIN});

    TensorDesc f = make(TF_DTYPE_F32, {3});
    set_raw<float>(f, {NAN, -0.0f, -INFINITY});
    TensorDesc fo = make(TF_DTYPE_F32, {3});
    run_ok(TF_OP_RELU, {&f}, fo);
    const auto r = get_raw<float>(fo);
    CHECK(std::isnan(r[0]));
    CHECK(f32_bits(r[1]) == 0x80000000u);
    CHECK(r[2] == 0.0f);
}

TEST_CASE("exp, float dtypes") {
    TensorDesc f = make(TF_DTYPE_F32, {5});
    set_raw<float>(f, {0.0f, 1.0f, -INFINITY, INFINITY, NAN});
    TensorDesc fo = make(TF_DTYPE_F32, {5});
    run_ok(TF_OP_EXP, {&f}, fo);
    const auto r = get_raw<float>(fo);
    CHECK(r[0] == 1.0f);
    CHECK(r[1] == doctest::Approx(2.718281828).epsilon(1e-7));
    CHECK(r[2] == 0.0f);
    CHECK(r[3] == INFINITY);
    CHECK(std::isnan(r[4]));

    // e = 2.71828... and e^2 = 7.38905... rounded to the narrow types by hand.
    TensorDesc h = make(TF_DTYPE_F16, {3}, {0, 1, 2});
    TensorDesc ho = make(TF_DTYPE_F16, {3});
    run_ok(TF_OP_EXP, {&h}, ho);
    CHECK(get_raw<uint16_t>(ho) == std::vector<uint16_t>{0x3c00, 0x4170, 0x4764});

    TensorDesc b = make(TF_DTYPE_BF16, {3}, {0, 1, 2});
    TensorDesc bo = make(TF_DTYPE_BF16, {3});
    run_ok(TF_OP_EXP, {&b}, bo);
    CHECK(get_raw<uint16_t>(bo) == std::vector<uint16_t>{0x3f80, 0x402e, 0x40ec});
}

TEST_CASE("exp on a dense f32 tensor is e^x in double rounded once") {
    // The dense f32 path (kernels_erf.cpp, vector_erf.hpp's exp_rounded) across the f32 range:
    // subnormal results, 0 below, inf above FLT_MAX; the same bits as libm's double exp rounded
    // to f32 (cpu-vector-erf sweeps 2 million arguments for the same).
    std::vector<float> x;
    for (int i = 0; i < 4099; ++i) x.push_back(-110.0f + 200.0f * static_cast<float>(i) / 4098.0f);
    TensorDesc f = make(TF_DTYPE_F32, {static_cast<int64_t>(x.size())});
    set_raw<float>(f, x);
    TensorDesc fo = make(TF_DTYPE_F32, {static_cast<int64_t>(x.size())});
    run_ok(TF_OP_EXP, {&f}, fo);
    const auto r = get_raw<float>(fo);
    int bad = 0;
    for (size_t i = 0; i < x.size(); ++i)
        bad += f32_bits(r[i]) != f32_bits(static_cast<float>(std::exp(static_cast<double>(x[i]))));
    CHECK(bad == 0);
    CHECK(r.front() == 0.0f);
    CHECK(r.back() == INFINITY);
}

TEST_CASE("division: integers truncate, floats follow IEEE") {
    for (int32_t dt : {TF_DTYPE_I32, TF_DTYPE_I64}) {
        TensorDesc a = make(dt, {4}, {7, -7, 7, -7});
        TensorDesc b = make(dt, {4}, {2, 2, -2, -2});
        TensorDesc out = make(dt, {4});
        run_ok(TF_OP_DIV, {&a, &b}, out);
        check_values(out, {3, -3, -3, 3});
    }
    TensorDesc a = make(TF_DTYPE_F32, {3}, {1, -1, 0});
    TensorDesc z = make(TF_DTYPE_F32, {3}, {0, 0, 0});
    TensorDesc out = make(TF_DTYPE_F32, {3});
    run_ok(TF_OP_DIV, {&a, &z}, out);
    check_values(out, {INFINITY, -INFINITY, NAN});
}

TEST_CASE("integer division by zero and MIN / -1 fail without touching the output") {
    for (int32_t dt : {TF_DTYPE_I32, TF_DTYPE_I64}) {
        CAPTURE(name_of(dt));
        TensorDesc a = make(dt, {3}, {1, 2, 3});
        TensorDesc b = make(dt, {3}, {1, 0, 1});
        TensorDesc out = make(dt, {3});
        const Call c(TF_OP_DIV, {&a, &b}, out);
        CHECK(c.supports() == 1);
        std::string message;
        CHECK(c.run(&message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("div") == 0);
        CHECK(message.find("division by zero") != std::string::npos);
        CHECK(untouched(out));

        // A zero broadcast through stride 0.
        TensorDesc zero = make(dt, {}, {0});
        TensorDesc bz = view(zero, {3}, {0});
        CHECK(Call(TF_OP_DIV, {&a, &bz}, out).run() == TF_STATUS_INVALID_ARGUMENT);
        CHECK(untouched(out));

        TensorDesc m = make(dt, {2});
        if (dt == TF_DTYPE_I32)
            set_raw<int32_t>(m, {INT32_MIN, 4});
        else
            set_raw<int64_t>(m, {INT64_MIN, 4});
        TensorDesc minus_one = make(dt, {2}, {-1, -1});
        TensorDesc out2 = make(dt, {2});
        const Call overflow(TF_OP_DIV, {&m, &minus_one}, out2);
        CHECK(overflow.run(&message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("div") == 0);
        CHECK(message.find("overflow") != std::string::npos);
        CHECK(untouched(out2));
    }
}

// ---- pow, maximum, minimum ------------------------------------------------------------------

TEST_CASE("pow: float dtypes against std::pow, exponent broadcast through stride 0") {
    const std::vector<double> base = {2, 0.5, -2, 0, 4, -1.5};
    const std::vector<double> exps = {2, -1, 3};
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {2, 3}, base);
        TensorDesc row = make(dt, {3}, exps);
        TensorDesc b = view(row, {2, 3}, {0, 1});  // [3] broadcast along axis 0
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_POW, {&a, &b}, out);
        std::vector<double> expected;
        for (size_t i = 0; i < base.size(); ++i) expected.push_back(std::pow(base[i], exps[i % 3]));
        check_close(out, expected);  // {4, 2, -8, 0, 0.25, -3.375}

        // Fractional exponents and C's special cases (torch follows them): 0^-1 = inf,
        // (-8)^0.5 = NaN, NaN^0 = 1, 1^NaN = 1, (-1)^inf = 1.
        TensorDesc x = make(dt, {7}, {2, 16, 0, -8, NAN, 1, -1});
        TensorDesc y = make(dt, {7}, {0.5, -0.25, -1, 0.5, 0, NAN, INFINITY});
        TensorDesc o = make(dt, {7});
        run_ok(TF_OP_POW, {&x, &y}, o);
        check_close(o, {std::sqrt(2.0), 0.5, INFINITY, NAN, 1, 1, 1});
    }
}

TEST_CASE("sqrt of dense f32 (its f32 lanes): the bits of sqrt in double rounded once, over the f32 range") {
    // Every 997th bit pattern: both signs, subnormals, infinities, NaNs with payloads (kept),
    // negative operands (the default NaN); an odd count, so that the scalar tail runs too; as
    // one axis (split over the threads) and as [1, n].
    std::vector<float> x;
    for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 997)
        x.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
    x.resize(x.size() / 2 * 2 + 1);  // an odd count: the last vector is short
    x.back() = -0.0f;
    const Dims shapes[] = {{static_cast<int64_t>(x.size())}, {1, static_cast<int64_t>(x.size())}};
    for (const Dims &shape : shapes) {
        const TensorDesc in = make(TF_DTYPE_F32, shape), out = make(TF_DTYPE_F32, shape);
        set_raw<float>(in, x);
        run_ok(TF_OP_SQRT, {&in}, out);
        const std::vector<float> got = get_raw<float>(out);
        size_t differ = 0;
        for (size_t i = 0; i < x.size(); ++i) {
            const float want = static_cast<float>(std::sqrt(static_cast<double>(x[i])));
            differ += std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want);
        }
        CHECK(differ == 0);
    }
}

TEST_CASE("pow with a scalar exponent of 2 (the square's path): the bits of pow in double rounded once") {
    // f32: squares that round, overflow to inf, underflow to 0 and to subnormals, signed zeros,
    // NaN and infinities, against std::pow in double rounded once; the exponent a broadcast
    // scalar (stride 0 everywhere). 2.5 takes pow itself, checked the same way.
    const std::vector<float> base = {3.1f,  -1.7f, 1e20f,    -2e19f,    1e-25f,   -3e-30f,  1.5e-20f, 0.0f,
                                     -0.0f, NAN,   INFINITY, -INFINITY, 65519.0f, 123.456f, -0.1f,    7.0f};
    const Dims shape = {2, 8};
    const TensorDesc a = make(TF_DTYPE_F32, shape);
    set_raw<float>(a, base);
    for (const float e : {2.0f, 2.5f}) {
        INFO("exponent ", e);
        const TensorDesc scalar = make(TF_DTYPE_F32, {});
        set_raw<float>(scalar, {e});
        const TensorDesc b = view(scalar, shape, {0, 0});
        const TensorDesc out = make(TF_DTYPE_F32, shape);
        run_ok(TF_OP_POW, {&a, &b}, out);
        const std::vector<float> got = get_raw<float>(out);
        for (size_t i = 0; i < base.size(); ++i) {
            INFO("base ", base[i]);
            const float want = static_cast<float>(std::pow(static_cast<double>(base[i]), static_cast<double>(e)));
            if (std::isnan(want))
                CHECK(std::isnan(got[i]));
            else
                CHECK(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want));  // the sign of 0 too
        }
    }
    // f16 and bf16 (and f32 again): a scalar 2 gives the bits of the same exponent given per
    // column (not a scalar: pow per element), overflow, subnormal and underflowing squares included.
    const std::vector<double> small = {3.125, -1.75,   0.0,     -0.0,       NAN, INFINITY, -INFINITY, 255.0,
                                       256.0, 0x1p-10, 0x1p-13, -3.0 / 512, 1.5, -7.0,     0.5,       12.0};
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        const TensorDesc x = make(dt, shape, small);
        const TensorDesc pair = make(dt, {2}, {2.0, 2.0});
        const TensorDesc per_row = view(pair, shape, {1, 0});
        const TensorDesc two = make(dt, {}, {2.0});
        const TensorDesc scalar = view(two, shape, {0, 0});
        const TensorDesc p = make(dt, shape), q = make(dt, shape);
        run_ok(TF_OP_POW, {&x, &per_row}, p);
        run_ok(TF_OP_POW, {&x, &scalar}, q);
        const std::vector<double> pv = get(p), qv = get(q);
        for (size_t i = 0; i < pv.size(); ++i) {
            INFO("base ", small[i]);
            CHECK((std::isnan(pv[i]) ? std::isnan(qv[i]) : std::memcmp(&pv[i], &qv[i], sizeof(double)) == 0));
        }
    }
}

TEST_CASE("pow: integers take non-negative exponents and wrap") {
    for (int32_t dt : {TF_DTYPE_I32, TF_DTYPE_I64}) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {8}, {2, 3, -2, 0, 7, 1, -1, 0});
        TensorDesc b = make(dt, {8}, {10, 3, 3, 0, 0, 31, 5, 5});
        TensorDesc out = make(dt, {8});
        run_ok(TF_OP_POW, {&a, &b}, out);
        check_values(out, {1024, 27, -8, 1, 1, 1, -1, 0});  // 0^0 = 1

        // A negative exponent anywhere (here through a broadcast) fails before any write.
        TensorDesc e = make(dt, {}, {-1});
        TensorDesc be = view(e, {8}, {0});
        TensorDesc out2 = make(dt, {8});
        std::string message;
        CHECK(run_fail(TF_OP_POW, {&a, &be}, out2, nullptr, &message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("pow") == 0);
        CHECK(message.find("negative") != std::string::npos);
        CHECK(untouched(out2));
    }
    // Overflow wraps like repeated multiplication in the dtype: 2^31, 3^21 mod 2^32; 2^63, 3^40 mod 2^64.
    TensorDesc a32 = make(TF_DTYPE_I32, {2}, {2, 3});
    TensorDesc b32 = make(TF_DTYPE_I32, {2}, {31, 21});
    TensorDesc o32 = make(TF_DTYPE_I32, {2});
    run_ok(TF_OP_POW, {&a32, &b32}, o32);
    CHECK(get_raw<int32_t>(o32) == std::vector<int32_t>{INT32_MIN, 1870418611});
    TensorDesc a64 = make(TF_DTYPE_I64, {3}, {2, 3, 3});
    TensorDesc b64 = make(TF_DTYPE_I64, {3}, {63, 40, 39});
    TensorDesc o64 = make(TF_DTYPE_I64, {3});
    run_ok(TF_OP_POW, {&a64, &b64}, o64);
    CHECK(get_raw<int64_t>(o64) == std::vector<int64_t>{INT64_MIN, -6289078614652622815LL, 4052555153018976267LL});

    TensorDesc bl = make(TF_DTYPE_BOOL, {2});
    CHECK(Call(TF_OP_POW, {&bl, &bl}, bl).supports() == 0);
}

TEST_CASE("maximum and minimum: every numeric dtype, strided operands") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {2, 3}, {1, -2, 3, 5, 0, -7});
        TensorDesc b = make(dt, {2, 3}, {2, -3, 3, -7, 0, 8});
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_MAXIMUM, {&a, &b}, out);
        check_values(out, {2, -2, 3, 5, 0, 8});
        run_ok(TF_OP_MINIMUM, {&a, &b}, out);
        check_values(out, {1, -3, 3, -7, 0, -7});

        // Transposed input, broadcast column, transposed output.
        TensorDesc st = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6});
        TensorDesc t = transposed(st);  // [[1, 2, 3], [4, 5, 6]]
        TensorDesc col = make(dt, {2}, {2, 5});
        TensorDesc c = view(col, {2, 3}, {1, 0});
        TensorDesc storage = make(dt, {3, 2});
        TensorDesc out_t = transposed(storage);
        run_ok(TF_OP_MAXIMUM, {&t, &c}, out_t);
        check_values(out_t, {2, 2, 3, 5, 5, 6});
        check_values(storage, {2, 5, 2, 5, 3, 6});
        run_ok(TF_OP_MINIMUM, {&c, &t}, out_t);
        check_values(out_t, {1, 2, 2, 4, 5, 5});
    }
    // i64 compares exactly (2^53 + 1 is not a double).
    TensorDesc a = make(TF_DTYPE_I64, {2});
    TensorDesc b = make(TF_DTYPE_I64, {2});
    set_raw<int64_t>(a, {9007199254740993LL, INT64_MIN});
    set_raw<int64_t>(b, {9007199254740992LL, INT64_MAX});
    TensorDesc out = make(TF_DTYPE_I64, {2});
    run_ok(TF_OP_MAXIMUM, {&a, &b}, out);
    CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{9007199254740993LL, INT64_MAX});
    run_ok(TF_OP_MINIMUM, {&a, &b}, out);
    CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{9007199254740992LL, INT64_MIN});
}

TEST_CASE("maximum and minimum: NaN propagates from either side, -0 < +0") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {4}, {NAN, 1, NAN, -INFINITY});
        TensorDesc b = make(dt, {4}, {1, NAN, NAN, NAN});
        TensorDesc out = make(dt, {4});
        run_ok(TF_OP_MAXIMUM, {&a, &b}, out);
        check_values(out, {NAN, NAN, NAN, NAN});
        run_ok(TF_OP_MINIMUM, {&a, &b}, out);
        check_values(out, {NAN, NAN, NAN, NAN});
    }
    TensorDesc a = make(TF_DTYPE_F32, {2});
    TensorDesc b = make(TF_DTYPE_F32, {2});
    set_raw<float>(a, {-0.0f, 0.0f});
    set_raw<float>(b, {0.0f, -0.0f});
    TensorDesc out = make(TF_DTYPE_F32, {2});
    run_ok(TF_OP_MAXIMUM, {&a, &b}, out);
    CHECK(get_raw<uint32_t>(out) == std::vector<uint32_t>{0, 0});
    run_ok(TF_OP_MINIMUM, {&a, &b}, out);
    CHECK(get_raw<uint32_t>(out) == std::vector<uint32_t>{0x80000000u, 0x80000000u});
}

// ---- relu_backward --------------------------------------------------------------------------

TEST_CASE("relu_backward: dy where x > 0, every numeric dtype, strided and broadcast operands") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        // Dense: negative gradients pass where x > 0; x <= 0 stops any gradient.
        const TensorDesc grads = make(dt, {6}, {1, -2, 3, 5, 7, -7}), inputs = make(dt, {6}, {2, -3, 0, -1, 4, 1});
        const TensorDesc out = make(dt, {6});
        run_ok(TF_OP_RELU_BACKWARD, {&grads, &inputs}, out);
        check_values(out, {1, 0, 0, 0, 7, -7});
        // dy transposed ([[1, 2, 3], [4, 5, 6]]), x one row broadcast over both, output transposed.
        const TensorDesc dy_storage = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6}), x_row = make(dt, {3}, {1, 0, -1});
        const TensorDesc storage = make(dt, {3, 2});
        const TensorDesc dy = transposed(dy_storage), x = view(x_row, {2, 3}, {0, 1}), out_t = transposed(storage);
        run_ok(TF_OP_RELU_BACKWARD, {&dy, &x}, out_t);
        check_values(out_t, {1, 0, 0, 4, 0, 0});
        check_values(storage, {1, 4, 0, 0, 0, 0});
    }
}

TEST_CASE("relu_backward: NaN x passes dy, x = -0 gives +0, NaN dy stops at x <= 0") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc dy = make(dt, {5}, {NAN, 2, 3, NAN, INFINITY});
        TensorDesc x = make(dt, {5}, {-1, NAN, 0, 1, INFINITY});
        TensorDesc out = make(dt, {5});
        run_ok(TF_OP_RELU_BACKWARD, {&dy, &x}, out);
        check_values(out, {0, 2, 0, NAN, INFINITY});
    }
    TensorDesc dy = make(TF_DTYPE_F32, {3});
    TensorDesc x = make(TF_DTYPE_F32, {3});
    set_raw<float>(dy, {5.0f, -0.0f, -0.0f});
    set_raw<float>(x, {-0.0f, 1.0f, -1.0f});
    TensorDesc out = make(TF_DTYPE_F32, {3});
    run_ok(TF_OP_RELU_BACKWARD, {&dy, &x}, out);
    CHECK(get_raw<uint32_t>(out) == std::vector<uint32_t>{0, 0x80000000u, 0});
}

TEST_CASE("relu_backward: dense f32 (the vector rows, threaded when large) against the rule") {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{3} << 16}) {
        INFO("n = ", n);
        std::vector<float> dyv(static_cast<size_t>(n)), xv(static_cast<size_t>(n)), want(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            dyv[i] = u(rng);
            xv[i] = i % 7 == 0 ? 0.0f : i % 11 == 0 ? NAN : u(rng);
            want[i] = xv[i] <= 0 ? 0.0f : dyv[i];
        }
        // A leading axis of 4 lets the threaded split cut the rows.
        const Dims shape = n % 4 == 0 ? Dims{4, n / 4} : Dims{n};
        TensorDesc dy = make(TF_DTYPE_F32, shape), x = make(TF_DTYPE_F32, shape), out = make(TF_DTYPE_F32, shape);
        set_raw<float>(dy, dyv);
        set_raw<float>(x, xv);
        run_ok(TF_OP_RELU_BACKWARD, {&dy, &x}, out);
        const std::vector<float> got = get_raw<float>(out);
        bool same = true;
        for (int64_t i = 0; i < n; ++i) same &= std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]);
        CHECK(same);
    }
}

// ---- gelu_backward --------------------------------------------------------------------------

namespace {

// dy (Phi(x) + x phi(x)) in long double from <cmath>, written independently of the plugin.
double gelu_grad_reference(double dy, double x) {
    const long double xl = x;
    const long double cdf = 0.5L * std::erfc(-xl / std::sqrt(2.0L));
    const long double pdf = std::exp(-0.5L * xl * xl) / std::sqrt(2.0L * 3.14159265358979323846264338327950288L);
    return static_cast<double>(static_cast<long double>(dy) * (cdf + xl * pdf));
}

}  // namespace

TEST_CASE("gelu_backward: float dtypes against <cmath>, strided and broadcast operands") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        // Dense, across gelu's range: the root of Phi + x phi near -0.75, the tails, 0.
        const std::vector<double> xs = {-6, -3, -0.75, -0.5, 0, 0.25, 1, 2.5, 8};
        const std::vector<double> dys = {1, -2, 3, 0.5, -1, 4, -0.25, 1.5, 2};
        const auto n = static_cast<int64_t>(xs.size());
        TensorDesc dy = make(dt, {n}, dys), x = make(dt, {n}, xs), out = make(dt, {n});
        run_ok(TF_OP_GELU_BACKWARD, {&dy, &x}, out);
        const std::vector<double> dyq = get(dy), xq = get(x);  // the inputs as the dtype holds them
        // Within the dtype's tolerance, or 2^-21 of the terms' size |dy| (1 + |x| phi(x)) (the f32
        // lanes' accuracy; near x = -0.75 Phi and x phi cancel).
        const std::vector<double> got = get(out);
        for (int64_t i = 0; i < n; ++i) {
            INFO("x = ", xq[i]);
            const double want = gelu_grad_reference(dyq[i], xq[i]);
            const double terms =
                std::fabs(dyq[i]) * (1 + std::fabs(xq[i]) * std::exp(-0.5 * xq[i] * xq[i]) / std::sqrt(2 * M_PI));
            CHECK(std::fabs(got[i] - want) <= std::max(tolerance(dt, want), terms * 0x1p-21));
        }

        // dy transposed ([[1, 2, 3], [4, 5, 6]]), x one row broadcast over both, output transposed.
        const TensorDesc dy_storage = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6}), x_row = make(dt, {3}, {-1, 0.5, 2});
        const TensorDesc storage = make(dt, {3, 2});
        const TensorDesc dyt = transposed(dy_storage), xb = view(x_row, {2, 3}, {0, 1}), out_t = transposed(storage);
        run_ok(TF_OP_GELU_BACKWARD, {&dyt, &xb}, out_t);
        const std::vector<double> row = get(x_row);
        std::vector<double> want_t;
        for (int r = 0; r < 2; ++r)
            for (int c = 0; c < 3; ++c) want_t.push_back(gelu_grad_reference(1 + 3 * r + c, row[c]));
        check_close(out_t, want_t);
    }
    // Integers are outside the op's dtypes column: refused, nothing written.
    TensorDesc a = make(TF_DTYPE_I32, {2}, {1, 2}), b = make(TF_DTYPE_I32, {2}, {1, 2}), o = make(TF_DTYPE_I32, {2});
    std::string message;
    CHECK(run_fail(TF_OP_GELU_BACKWARD, {&a, &b}, o, nullptr, &message) != TF_STATUS_OK);
    CHECK(untouched(o));
}

TEST_CASE("gelu, tanh, erf and gelu_backward on a [1, T, C] activation: split over the flat range, "
          "the same bits for 1, 2 and 3 threads, within 8 ulp of long double") {
    // One row on the first axis: the threads split the flat range (kernels_erf.cpp), bounds on
    // 64-element blocks; a length that is not a multiple of the block or the vector.
    const int64_t t = 37, c = 250, n = t * c;  // 9250: a tail past gelu_avx2.cpp's last block
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> u(-4, 4), wide(-16, 16);  // wide: gelu's far tails
    std::vector<float> xv(static_cast<size_t>(n)), dyv(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        xv[static_cast<size_t>(i)] = i % 5 == 0 ? wide(rng) : u(rng);
        dyv[static_cast<size_t>(i)] = u(rng);
    }
    struct Case {
        uint32_t op;
        const char *name;
    };
    const Case cases[] = {
        {TF_OP_GELU, "gelu"}, {TF_OP_TANH, "tanh"}, {TF_OP_ERF, "erf"}, {TF_OP_GELU_BACKWARD, "gelu_backward"}};
    std::vector<std::vector<uint32_t>> first(std::size(cases));
    for (const char *threads : {"1", "2", "3"}) {
        P().shutdown();
        setenv("TINYFIN_THREADS", threads, 1);
        tf_error err{};
        err.struct_size = sizeof err;
        REQUIRE(P().init(&err) == TF_STATUS_OK);
        for (size_t k = 0; k < std::size(cases); ++k) {
            INFO(cases[k].name, " with ", threads, " threads");
            TensorDesc x = make(TF_DTYPE_F32, {1, t, c}), dy = make(TF_DTYPE_F32, {1, t, c}),
                       out = make(TF_DTYPE_F32, {1, t, c});
            set_raw<float>(x, xv);
            set_raw<float>(dy, dyv);
            if (cases[k].op == TF_OP_GELU_BACKWARD)
                run_ok(TF_OP_GELU_BACKWARD, {&dy, &x}, out);
            else
                run_ok(cases[k].op, {&x}, out);
            const std::vector<float> got = get_raw<float>(out);
            std::vector<uint32_t> bits(got.size());
            int64_t far = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                bits[i] = std::bit_cast<uint32_t>(got[i]);
                const long double xl = xv[i];
                long double want = 0;
                switch (cases[k].op) {
                case TF_OP_GELU: want = xl * 0.5L * std::erfc(-xl / std::sqrt(2.0L)); break;
                case TF_OP_TANH: want = std::tanh(xl); break;
                case TF_OP_ERF: want = std::erf(xl); break;
                default: want = gelu_grad_reference(dyv[i], xv[i]); break;
                }
                // gelu_backward's terms cancel near x = -0.75: measured against their size.
                const long double size = cases[k].op == TF_OP_GELU_BACKWARD
                                             ? std::fabs(static_cast<long double>(dyv[i])) * 2
                                             : std::fabs(want);
                far += std::fabs(got[i] - want) > 8 * std::max(size, 1e-30L) * 0x1p-24L;
            }
            CHECK(far == 0);
            if (first[k].empty())
                first[k] = bits;
            else
                CHECK(bits == first[k]);
        }
    }
    P().shutdown();
    unsetenv("TINYFIN_THREADS");
    tf_error err{};
    err.struct_size = sizeof err;
    REQUIRE(P().init(&err) == TF_STATUS_OK);
}

TEST_CASE("gelu_backward: NaN stays NaN, +-inf give NaN (inf * 0), the tails give 0 and dy") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc dy = make(dt, {7}, {1, 1, 1, 2, 2, NAN, 3});
        TensorDesc x = make(dt, {7}, {NAN, INFINITY, -INFINITY, -30, 30, 1, 0});
        TensorDesc out = make(dt, {7});
        run_ok(TF_OP_GELU_BACKWARD, {&dy, &x}, out);
        check_values(out, {NAN, NAN, NAN, 0, 2, NAN, 1.5});
    }
}

TEST_CASE("gelu_backward: dense f32 (the vector rows, threaded when large) within 2^-21 of the terms' size") {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1, 1), wide(-20, 20);
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{3} << 16}) {
        INFO("n = ", n);
        std::vector<float> dyv(static_cast<size_t>(n)), xv(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            dyv[i] = u(rng);
            xv[i] = i % 5 == 0 ? wide(rng) : 4 * u(rng);
        }
        const Dims shape = n % 4 == 0 ? Dims{4, n / 4} : Dims{n};
        TensorDesc dy = make(TF_DTYPE_F32, shape), x = make(TF_DTYPE_F32, shape), out = make(TF_DTYPE_F32, shape);
        set_raw<float>(dy, dyv);
        set_raw<float>(x, xv);
        run_ok(TF_OP_GELU_BACKWARD, {&dy, &x}, out);
        const std::vector<float> got = get_raw<float>(out);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double want = gelu_grad_reference(dyv[i], xv[i]);
            // The f32 lanes' accuracy (vector_erf.hpp) measured against the size of the terms,
            // |dy| (1 + |x| phi(x)): they cancel near x = -0.75.
            const double pdf = std::exp(-0.5 * xv[i] * xv[i]) / std::sqrt(2 * M_PI);
            const double scale = std::fabs(dyv[i]) * (1 + std::fabs(xv[i]) * pdf) * 0x1p-21;
            bad += std::fabs(got[i] - want) > std::max(tolerance(TF_DTYPE_F32, want), scale);
        }
        CHECK(bad == 0);
    }
}

// ---- Comparisons and where ------------------------------------------------------------------

TEST_CASE("comparisons: six ops, every dtype, bool output") {
    for (int32_t dt : k_all) {
        INFO("dtype ", name_of(dt));
        const bool boolean = dt == TF_DTYPE_BOOL;
        const std::vector<double> av =
            boolean ? std::vector<double>{0, 0, 1, 1} : std::vector<double>{-1, 2, 2, 5, 0, 3};
        const std::vector<double> bv =
            boolean ? std::vector<double>{0, 1, 0, 1} : std::vector<double>{2, 2, -1, 5, 0, -4};
        const auto n = static_cast<int64_t>(av.size());
        TensorDesc a = make(dt, {n}, av);
        TensorDesc b = make(dt, {n}, bv);
        TensorDesc out = make(TF_DTYPE_BOOL, {n});
        for (uint32_t op : k_compare_ops) {
            CAPTURE(op);
            run_ok(op, {&a, &b}, out);
            std::vector<double> expected;
            for (size_t i = 0; i < av.size(); ++i) expected.push_back(compare_on_host(op, av[i], bv[i]));
            check_values(out, expected);
            CHECK(get_raw<uint8_t>(out) == std::vector<uint8_t>(expected.begin(), expected.end()));  // 0 or 1 bytes
        }
    }
}

TEST_CASE("comparisons: broadcast scalar, transposed input and output") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc st = make(dt, {3, 2}, {1, 4, 2, 5, 3, 6});
        TensorDesc t = transposed(st);  // [[1, 2, 3], [4, 5, 6]]
        TensorDesc two = make(dt, {}, {3});
        TensorDesc s = view(two, {2, 3}, {0, 0});
        TensorDesc storage = make(TF_DTYPE_BOOL, {3, 2});
        TensorDesc out_t = transposed(storage);
        run_ok(TF_OP_LT, {&t, &s}, out_t);
        check_values(out_t, {1, 1, 0, 0, 0, 0});
        check_values(storage, {1, 0, 1, 0, 0, 0});
        run_ok(TF_OP_GE, {&s, &t}, out_t);
        check_values(out_t, {1, 1, 1, 0, 0, 0});

        // Output every other byte of a wider buffer.
        TensorDesc wide = make(TF_DTYPE_BOOL, {12});
        TensorDesc gaps = view(wide, {2, 3}, {6, 2}, 1);
        run_ok(TF_OP_EQ, {&t, &s}, gaps);
        check_values(gaps, {0, 0, 1, 0, 0, 0});
        CHECK(only_elements_written(gaps));
    }
}

TEST_CASE("comparisons and where on dense rows against one broadcast value (the vectorised rows)") {
    // 37 elements: past any vector width, with a remainder; the broadcast side on either hand.
    const size_t n = 37;
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        std::vector<double> av(n);
        for (size_t i = 0; i < n; ++i) av[i] = static_cast<double>(static_cast<int>(i * 7 % 11) - 5);
        TensorDesc a = make(dt, {n}, av);
        TensorDesc zero = make(dt, {}, {0});
        TensorDesc z = view(zero, {static_cast<int64_t>(n)}, {0});
        TensorDesc out = make(TF_DTYPE_BOOL, {n});
        for (uint32_t op : k_compare_ops) {
            CAPTURE(op);
            run_ok(op, {&a, &z}, out);
            std::vector<double> expected;
            for (double v : av) expected.push_back(compare_on_host(op, v, 0));
            check_values(out, expected);
            CHECK(get_raw<uint8_t>(out) == std::vector<uint8_t>(expected.begin(), expected.end()));
        }

        // where(a > 0, g, 0) and where(a > 0, 0, g), relu's backward and its mirror.
        std::vector<double> gv(n);
        for (size_t i = 0; i < n; ++i) gv[i] = static_cast<double>(i % 5) + 1;
        TensorDesc g = make(dt, {n}, gv);
        TensorDesc cond = make(TF_DTYPE_BOOL, {n});
        run_ok(TF_OP_GT, {&a, &z}, cond);
        TensorDesc picked = make(dt, {n});
        run_ok(TF_OP_WHERE, {&cond, &g, &z}, picked);
        std::vector<double> expected;
        for (size_t i = 0; i < n; ++i) expected.push_back(av[i] > 0 ? gv[i] : 0);
        check_values(picked, expected);
        run_ok(TF_OP_WHERE, {&cond, &z, &g}, picked);
        expected.clear();
        for (size_t i = 0; i < n; ++i) expected.push_back(av[i] > 0 ? 0 : gv[i]);
        check_values(picked, expected);
    }
    // Bits survive the branch-free select: a NaN payload and -0 against a broadcast NaN.
    TensorDesc cond = make(TF_DTYPE_BOOL, {5});
    set_raw<uint8_t>(cond, {1, 0, 9, 0, 1});  // 9 reads as true
    TensorDesc f = make(TF_DTYPE_F32, {5});
    set_raw<uint32_t>(f, {0x7fc00123u, 0x3f800000u, 0x80000000u, 0x3f800000u, 0x00000001u});
    TensorDesc nan = make(TF_DTYPE_F32, {1});
    set_raw<uint32_t>(nan, {0xffc00042u});
    TensorDesc s = view(nan, {5}, {0});
    TensorDesc fo = make(TF_DTYPE_F32, {5});
    run_ok(TF_OP_WHERE, {&cond, &f, &s}, fo);
    CHECK(get_raw<uint32_t>(fo) ==
          std::vector<uint32_t>{0x7fc00123u, 0xffc00042u, 0x80000000u, 0xffc00042u, 0x00000001u});
}

TEST_CASE("comparisons: NaN is unordered, -0 == +0, i64 exact, stray bool bytes") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc a = make(dt, {4}, {NAN, NAN, 1, -0.0});
        TensorDesc b = make(dt, {4}, {NAN, 1, NAN, 0});
        TensorDesc out = make(TF_DTYPE_BOOL, {4});
        const std::map<uint32_t, std::vector<double>> expected = {
            {TF_OP_EQ, {0, 0, 0, 1}}, {TF_OP_NE, {1, 1, 1, 0}}, {TF_OP_LT, {0, 0, 0, 0}},
            {TF_OP_LE, {0, 0, 0, 1}}, {TF_OP_GT, {0, 0, 0, 0}}, {TF_OP_GE, {0, 0, 0, 1}},
        };
        for (const auto &entry : expected) {
            const auto &[op, values] = entry;
            CAPTURE(entry.first);  // not a binding: clang 14 cannot capture one
            run_ok(op, {&a, &b}, out);
            check_values(out, values);
        }
    }
    TensorDesc a = make(TF_DTYPE_I64, {2});
    TensorDesc b = make(TF_DTYPE_I64, {2});
    set_raw<int64_t>(a, {9007199254740993LL, 9007199254740992LL});
    set_raw<int64_t>(b, {9007199254740992LL, 9007199254740993LL});
    TensorDesc out = make(TF_DTYPE_BOOL, {2});
    run_ok(TF_OP_EQ, {&a, &b}, out);
    check_values(out, {0, 0});
    run_ok(TF_OP_LT, {&a, &b}, out);
    check_values(out, {0, 1});

    TensorDesc x = make(TF_DTYPE_BOOL, {2});
    TensorDesc y = make(TF_DTYPE_BOOL, {2});
    set_raw<uint8_t>(x, {2, 0});
    set_raw<uint8_t>(y, {1, 0});
    run_ok(TF_OP_EQ, {&x, &y}, out);
    check_values(out, {1, 1});  // any non-zero byte is true
}

TEST_CASE("where: every dtype, broadcast condition and operand, transposed output") {
    for (int32_t dt : k_all) {
        INFO("dtype ", name_of(dt));
        const bool boolean = dt == TF_DTYPE_BOOL;
        TensorDesc cond_row = make(TF_DTYPE_BOOL, {3}, {1, 0, 1});
        TensorDesc cond = view(cond_row, {2, 3}, {0, 1});
        const std::vector<double> av =
            boolean ? std::vector<double>{1, 1, 0, 1, 1, 0} : std::vector<double>{1, 2, 3, 4, 5, 6};
        const double bv = boolean ? 0 : -1;
        TensorDesc a = make(dt, {2, 3}, av);
        TensorDesc scalar = make(dt, {}, {bv});
        TensorDesc b = view(scalar, {2, 3}, {0, 0});
        TensorDesc storage = make(dt, {3, 2});
        TensorDesc out_t = transposed(storage);
        run_ok(TF_OP_WHERE, {&cond, &a, &b}, out_t);
        std::vector<double> expected;
        for (size_t i = 0; i < av.size(); ++i) expected.push_back(i % 3 != 1 ? av[i] : bv);
        check_values(out_t, expected);

        // Strided output with gaps, condition and operands swapped in role.
        TensorDesc wide = make(dt, {13});
        TensorDesc gaps = view(wide, {2, 3}, {6, 2}, 1);
        run_ok(TF_OP_WHERE, {&cond, &b, &a}, gaps);
        expected.clear();
        for (size_t i = 0; i < av.size(); ++i) expected.push_back(i % 3 != 1 ? bv : av[i]);
        check_values(gaps, expected);
        CHECK(only_elements_written(gaps));
    }
}

TEST_CASE("where: copies elements bit for bit, normalises stray bool bytes") {
    TensorDesc cond = make(TF_DTYPE_BOOL, {3});
    set_raw<uint8_t>(cond, {1, 7, 0});  // 7 reads as true
    TensorDesc f = make(TF_DTYPE_F32, {3});
    TensorDesc g = make(TF_DTYPE_F32, {3});
    set_raw<uint32_t>(f, {0x7fc00123u, 0x80000000u, 0x7f800001u});  // NaN payload, -0, signalling NaN
    set_raw<uint32_t>(g, {0x3f800000u, 0x3f800000u, 0xffc00042u});
    TensorDesc fo = make(TF_DTYPE_F32, {3});
    run_ok(TF_OP_WHERE, {&cond, &f, &g}, fo);
    CHECK(get_raw<uint32_t>(fo) == std::vector<uint32_t>{0x7fc00123u, 0x80000000u, 0xffc00042u});

    for (int32_t dt : {TF_DTYPE_F16, TF_DTYPE_BF16}) {
        TensorDesc h = make(dt, {3});
        TensorDesc k = make(dt, {3});
        set_raw<uint16_t>(h, {0x7d01, 0x8000, 0x0001});
        set_raw<uint16_t>(k, {0x0000, 0x0000, 0xfd55});
        TensorDesc ho = make(dt, {3});
        run_ok(TF_OP_WHERE, {&cond, &h, &k}, ho);
        CHECK(get_raw<uint16_t>(ho) == std::vector<uint16_t>{0x7d01, 0x8000, 0xfd55});
    }

    TensorDesc x = make(TF_DTYPE_BOOL, {3});
    TensorDesc y = make(TF_DTYPE_BOOL, {3});
    set_raw<uint8_t>(x, {2, 5, 0});
    set_raw<uint8_t>(y, {0, 0, 3});
    TensorDesc bo = make(TF_DTYPE_BOOL, {3});
    run_ok(TF_OP_WHERE, {&cond, &x, &y}, bo);
    CHECK(get_raw<uint8_t>(bo) == std::vector<uint8_t>{1, 1, 1});

    TensorDesc i = make(TF_DTYPE_I64, {3});
    TensorDesc j = make(TF_DTYPE_I64, {3});
    set_raw<int64_t>(i, {INT64_MIN, 9007199254740993LL, 1});
    set_raw<int64_t>(j, {0, 0, INT64_MAX});
    TensorDesc io = make(TF_DTYPE_I64, {3});
    run_ok(TF_OP_WHERE, {&cond, &i, &j}, io);
    CHECK(get_raw<int64_t>(io) == std::vector<int64_t>{INT64_MIN, 9007199254740993LL, INT64_MAX});
}

// ---- Unary ----------------------------------------------------------------------------------

TEST_CASE("float unary math against <cmath>, strided input and output") {
    const std::vector<double> xs = {-3, -1.5, -0.5, -0.0, 0, 0.25, 1, 2.5, 4};
    const auto n = static_cast<int64_t>(xs.size());
    for (int32_t dt : k_float) {
        for (const MathCase &m : k_math) {
            INFO("dtype ", name_of(dt));
            INFO("op ", m.name);
            TensorDesc in_storage = make(dt, {2 * n});
            TensorDesc in = view(in_storage, {n}, {2}, 1);
            set(in, xs);
            TensorDesc out_storage = make(dt, {2 * n + 1});
            TensorDesc out = view(out_storage, {n}, {2}, 0);
            run_ok(m.op, {&in}, out, nullptr);
            std::vector<double> expected;
            for (double x : xs) expected.push_back(m.f(x));
            check_close(out, expected);
            CHECK(only_elements_written(out));
        }
    }
    // Signs the formulas fix: rsqrt(-0) = -inf, sqrt(-0) = -0, log(-0) = -inf.
    TensorDesc z = make(TF_DTYPE_F32, {}, {-0.0});
    TensorDesc o = make(TF_DTYPE_F32, {});
    run_ok(TF_OP_RSQRT, {&z}, o);
    CHECK(get_raw<float>(o)[0] == -INFINITY);
    run_ok(TF_OP_SQRT, {&z}, o);
    CHECK(get_raw<uint32_t>(o)[0] == 0x80000000u);
}

TEST_CASE("float unary math keeps NaN and handles infinities") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc x = make(dt, {3}, {NAN, INFINITY, -INFINITY});
        TensorDesc out = make(dt, {3});
        const std::map<uint32_t, std::vector<double>> expected = {
            {TF_OP_EXP, {NAN, INFINITY, 0}},  {TF_OP_LOG, {NAN, INFINITY, NAN}}, {TF_OP_SQRT, {NAN, INFINITY, NAN}},
            {TF_OP_RSQRT, {NAN, 0, NAN}},     {TF_OP_SIN, {NAN, NAN, NAN}},      {TF_OP_COS, {NAN, NAN, NAN}},
            {TF_OP_TANH, {NAN, 1, -1}},       {TF_OP_ERF, {NAN, 1, -1}},         {TF_OP_SIGMOID, {NAN, 1, 0}},
            {TF_OP_SILU, {NAN, INFINITY, 0}}, {TF_OP_GELU, {NAN, INFINITY, 0}},  {TF_OP_GELU_TANH, {NAN, INFINITY, 0}},
        };
        for (const auto &entry : expected) {
            const auto &[op, values] = entry;
            CAPTURE(entry.first);  // not a binding: clang 14 cannot capture one
            run_ok(op, {&x}, out);
            check_values(out, values);
        }
    }
}

TEST_CASE("sigmoid, silu, gelu and gelu_tanh stay accurate for large |x|") {
    for (int32_t dt : {TF_DTYPE_F32, TF_DTYPE_BF16}) {  // f16 cannot hold these inputs
        INFO("dtype ", name_of(dt));
        const std::vector<double> xs = {-1000, -100, -10, -5, 5, 10, 100, 1000};
        TensorDesc x = make(dt, {8}, xs);
        TensorDesc out = make(dt, {8});
        std::vector<double> sig, silu;
        for (double v : xs) {
            sig.push_back(1 / (1 + std::exp(-v)));  // fine in double for these: no inf / inf
            silu.push_back(v / (1 + std::exp(-v)));
        }
        run_ok(TF_OP_SIGMOID, {&x}, out);
        check_close(out, sig);  // sigmoid(-100) = 3.7e-44: an f32 subnormal, not 0
        run_ok(TF_OP_SILU, {&x}, out);
        check_close(out, silu);

        // x Phi(x) by hand: Phi(-10) = 7.6198530241605e-24, Phi(-5) = 2.8665157187919e-7.
        // 0.5 x (1 + erf(x / sqrt 2)) cancels to 0 below x = -8 in double; the kernel must not.
        run_ok(TF_OP_GELU, {&x}, out);
        check_close(out, {-0.0, -0.0, -7.6198530241605e-23, -1.4332578593960e-6, 4.9999985667421, 10, 100, 1000});

        // gelu_tanh(x) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3): 1 + tanh(u)
        // cancels for x = -10, this form does not.
        std::vector<double> gt;
        for (double v : xs) {
            const double u = std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v);
            gt.push_back(u < 0 ? v * std::exp(2 * u) / (1 + std::exp(2 * u)) : v / (1 + std::exp(-2 * u)));
        }
        run_ok(TF_OP_GELU_TANH, {&x}, out);
        check_close(out, gt);
        CHECK(get(out)[2] < 0);  // -1.1e-37, not 0
    }
}

TEST_CASE("abs and square: floats and integers") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc st = make(dt, {3, 2}, {-3, 7, 2, -1, 0, -12});
        TensorDesc x = transposed(st);  // [[-3, 2, 0], [7, -1, -12]]
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_ABS, {&x}, out);
        check_values(out, {3, 2, 0, 7, 1, 12});
        run_ok(TF_OP_SQUARE, {&x}, out);
        check_values(out, {9, 4, 0, 49, 1, 144});
    }
    // Integers wrap: abs(MIN) = MIN; 46341^2 and 3037000500^2 overflow.
    TensorDesc i = make(TF_DTYPE_I32, {4});
    set_raw<int32_t>(i, {INT32_MIN, -5, 65536, 46341});
    TensorDesc io = make(TF_DTYPE_I32, {4});
    run_ok(TF_OP_ABS, {&i}, io);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{INT32_MIN, 5, 65536, 46341});
    run_ok(TF_OP_SQUARE, {&i}, io);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{0, 25, 0, -2147479015});
    TensorDesc l = make(TF_DTYPE_I64, {2});
    set_raw<int64_t>(l, {INT64_MIN, 3037000500LL});
    TensorDesc lo = make(TF_DTYPE_I64, {2});
    run_ok(TF_OP_ABS, {&l}, lo);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{INT64_MIN, 3037000500LL});
    run_ok(TF_OP_SQUARE, {&l}, lo);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{0, -9223372036709301616LL});

    // Floats: abs clears the sign of -0, -inf and NaN; square rounds once and overflows to inf.
    TensorDesc f = make(TF_DTYPE_F32, {3});
    set_raw<float>(f, {-0.0f, -INFINITY, -NAN});
    TensorDesc fo = make(TF_DTYPE_F32, {3});
    run_ok(TF_OP_ABS, {&f}, fo);
    const auto r = get_raw<float>(fo);
    CHECK(f32_bits(r[0]) == 0);
    CHECK(r[1] == INFINITY);
    CHECK(std::isnan(r[2]));
    CHECK(!std::signbit(r[2]));
    run_ok(TF_OP_SQUARE, {&f}, fo);
    check_values(fo, {0, INFINITY, NAN});

    TensorDesc h = make(TF_DTYPE_F16, {2}, {300, 0.5});
    TensorDesc ho = make(TF_DTYPE_F16, {2});
    run_ok(TF_OP_SQUARE, {&h}, ho);
    check_values(ho, {INFINITY, 0.25});  // 90000 > 65504
    TensorDesc b = make(TF_DTYPE_BF16, {2}, {1.0078125, 3});  // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 -> 1 + 2^-6
    TensorDesc bo = make(TF_DTYPE_BF16, {2});
    run_ok(TF_OP_SQUARE, {&b}, bo);
    check_values(bo, {1.015625, 9});

    TensorDesc bl = make(TF_DTYPE_BOOL, {2});
    CHECK(Call(TF_OP_ABS, {&bl}, bl).supports() == 0);
    CHECK(Call(TF_OP_SQUARE, {&bl}, bl).supports() == 0);
}

TEST_CASE("clamp: both bounds, open bounds, NaN, min > max") {
    const std::vector<double> xs = {-5, -1, 0, 0.5, 3, NAN, -INFINITY, INFINITY};
    struct Row {
        double min, max;
        std::vector<double> expected;
    };
    const Row rows[] = {
        {-1, 2, {-1, -1, 0, 0.5, 2, NAN, -1, 2}},
        {-INFINITY, 1, {-5, -1, 0, 0.5, 1, NAN, -INFINITY, 1}},
        {0, INFINITY, {0, 0, 0, 0.5, 3, NAN, 0, INFINITY}},
        {-INFINITY, INFINITY, xs},
        {2, 1, {1, 1, 1, 1, 1, NAN, 1, 1}},  // min(max(x, 2), 1)
    };
    for (int32_t dt : k_float) {
        for (const Row &r : rows) {
            INFO("dtype ", name_of(dt));
            CAPTURE(r.min);
            CAPTURE(r.max);
            TensorDesc x = make(dt, {8}, xs);
            TensorDesc storage = make(dt, {16});
            TensorDesc out = view(storage, {8}, {2}, 1);
            const tf_params_clamp p = clamp_params(r.min, r.max);
            run_ok(TF_OP_CLAMP, {&x}, out, &p);
            check_values(out, r.expected);
            CHECK(only_elements_written(out));
        }
    }
    // A bound the dtype cannot hold is rounded with the result: 0.1 in f16 is 0x2e66.
    TensorDesc h = make(TF_DTYPE_F16, {2}, {0, 1});
    TensorDesc ho = make(TF_DTYPE_F16, {2});
    const tf_params_clamp tenth = clamp_params(0.1, 0.5);
    run_ok(TF_OP_CLAMP, {&h}, ho, &tenth);
    CHECK(get_raw<uint16_t>(ho) == std::vector<uint16_t>{0x2e66, 0x3800});
}

TEST_CASE("clamp: integers, bounds rounded inward and saturated") {
    TensorDesc i = make(TF_DTYPE_I32, {7});
    set_raw<int32_t>(i, {-5, -1, 0, 1, 3, INT32_MIN, INT32_MAX});
    TensorDesc io = make(TF_DTYPE_I32, {7});
    const tf_params_clamp frac = clamp_params(-1.5, 2.5);  // [-1, 2]
    run_ok(TF_OP_CLAMP, {&i}, io, &frac);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{-1, -1, 0, 1, 2, -1, 2});
    const tf_params_clamp open = clamp_params(-INFINITY, INFINITY);
    run_ok(TF_OP_CLAMP, {&i}, io, &open);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{-5, -1, 0, 1, 3, INT32_MIN, INT32_MAX});
    const tf_params_clamp huge = clamp_params(-1e30, 1e30);  // beyond i32: no effect
    run_ok(TF_OP_CLAMP, {&i}, io, &huge);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{-5, -1, 0, 1, 3, INT32_MIN, INT32_MAX});
    const tf_params_clamp upper = clamp_params(-INFINITY, 0);
    run_ok(TF_OP_CLAMP, {&i}, io, &upper);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{-5, -1, 0, 0, 0, INT32_MIN, 0});
    const tf_params_clamp positive = clamp_params(0.5, 2.5);  // [1, 2], not [0, 2]
    run_ok(TF_OP_CLAMP, {&i}, io, &positive);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{1, 1, 1, 1, 2, 1, 2});
    const tf_params_clamp negative = clamp_params(-INFINITY, -0.5);  // at most -1, not 0
    run_ok(TF_OP_CLAMP, {&i}, io, &negative);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{-5, -1, -1, -1, -1, INT32_MIN, -1});

    TensorDesc l = make(TF_DTYPE_I64, {3});
    set_raw<int64_t>(l, {INT64_MIN, 9007199254740993LL, INT64_MAX});
    TensorDesc lo = make(TF_DTYPE_I64, {3});
    const tf_params_clamp lower = clamp_params(9007199254740992.0, INFINITY);
    run_ok(TF_OP_CLAMP, {&l}, lo, &lower);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{9007199254740992LL, 9007199254740993LL, INT64_MAX});
    const tf_params_clamp above = clamp_params(1e30, INFINITY);  // saturates to INT64_MAX
    run_ok(TF_OP_CLAMP, {&l}, lo, &above);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{INT64_MAX, INT64_MAX, INT64_MAX});

    TensorDesc bl = make(TF_DTYPE_BOOL, {2});
    CHECK(Call(TF_OP_CLAMP, {&bl}, bl, &open).supports() == 0);
}

TEST_CASE("f32 tanh, sigmoid and silu: within their ulp bounds, dense and on row-dense slices alike") {
    // The kernel's f32 lanes (docs/numerics.md: tanh 2 ulp, sigmoid 2.5, silu 3) at the level
    // the process runs under, against long double references: arguments from subnormal to past
    // the clamps, both signs; then the same arguments as a column slice of a wider matrix (a gate
    // of a recurrent layer's product) give the same bits as the dense tensor.
    std::vector<double> xs;
    std::mt19937 rng(37);
    std::uniform_real_distribution<double> pick(-1, 1);
    for (int i = 0; i < 16 * 96; ++i) {
        const double mag = std::pow(2.0, 140 * std::fabs(pick(rng)) - 135);  // 2^-135 .. 2^5 (and 2^7 below)
        const float x = static_cast<float>(i % 97 == 0 ? 120 * pick(rng) : std::copysign(mag, pick(rng)));
        xs.push_back(x);
    }
    const auto ulps = [](double got, long double exact) {
        const float nearest = static_cast<float>(exact);
        const float next = std::nextafter(nearest, nearest < 0 ? -INFINITY : INFINITY);
        return static_cast<double>(std::fabs(got - exact) / std::fabs(static_cast<long double>(next) - nearest));
    };
    const auto sigmoid_ref = [](long double x) {
        return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
    };
    struct Fn {
        uint32_t op;
        const char *name;
        double bound;
    };
    for (const Fn &f : {Fn{TF_OP_TANH, "tanh", 2}, Fn{TF_OP_SIGMOID, "sigmoid", 2.5}, Fn{TF_OP_SILU, "silu", 3}}) {
        INFO("op ", f.name);
        TensorDesc x = make(TF_DTYPE_F32, {16, 96}, xs);
        TensorDesc out = make(TF_DTYPE_F32, {16, 96});
        run_ok(f.op, {&x}, out);
        const auto got = get(out);
        double worst = 0;
        for (size_t i = 0; i < xs.size(); ++i) {
            const long double v = xs[i];
            const long double exact = f.op == TF_OP_TANH      ? std::tanh(v)
                                      : f.op == TF_OP_SIGMOID ? sigmoid_ref(v)
                                                              : v * sigmoid_ref(v);
            worst = std::max(worst, ulps(got[i], exact));
        }
        INFO("worst ", worst, " ulp");
        CHECK(worst <= f.bound);
        // Columns 16..111 of a [16, 128] matrix.
        TensorDesc wide = make(TF_DTYPE_F32, {16, 128});
        TensorDesc slice = view(wide, {16, 96}, {128, 1}, 16);
        set(slice, xs);
        TensorDesc out2 = make(TF_DTYPE_F32, {16, 96});
        run_ok(f.op, {&slice}, out2);
        CHECK(get_raw<uint32_t>(out2) == get_raw<uint32_t>(out));
    }
}
