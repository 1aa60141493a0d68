// f16 and bf16 conversions, cast between every pair of dtypes, contiguous and fill.
// Through the plugin ABI with no core; the harness: cpu_kernel_harness.hpp.
#include "cpu_kernel_harness.hpp"

using namespace cpu_kernel_test;

// ---- f16 / bf16 conversions -----------------------------------------------------------------

TEST_CASE("f32 -> f16 rounds to nearest even on known bit patterns") {
    struct Row {
        uint32_t f32;
        uint16_t f16;
    };
    const Row rows[] = {
        {0x3f800000, 0x3c00},  // 1
        {0xc0000000, 0xc000},  // -2
        {0x00000000, 0x0000},  // 0
        {0x80000000, 0x8000},  // -0
        {0x477fe000, 0x7bff},  // 65504, the largest f16
        {0x477fef00, 0x7bff},  // 65519: below the midpoint to infinity
        {0x477ff000, 0x7c00},  // 65520: the midpoint, ties to even = infinity
        {0x49742400, 0x7c00},  // 1e6
        {0x7f800000, 0x7c00},  // inf
        {0xff800000, 0xfc00},  // -inf
        {0x33800000, 0x0001},  // 2^-24, the smallest subnormal
        {0x33000000, 0x0000},  // 2^-25: tie between 0 and 2^-24, to even
        {0x33400000, 0x0001},  // 1.5 * 2^-25
        {0x387fc000, 0x03ff},  // 1023 * 2^-24, the largest subnormal
        {0x38800000, 0x0400},  // 2^-14, the smallest normal
        {0x3f801000, 0x3c00},  // 1 + 2^-11: tie, to even (down)
        {0x3f803000, 0x3c02},  // 1 + 3 * 2^-11: tie, to even (up)
        {0x3f801001, 0x3c01},  // just above the tie
        {0x3dcccccd, 0x2e66},  // 0.1f
        {0x7fc00000, 0x7e00},  // quiet NaN
        {0xffc00000, 0xfe00},  // negative quiet NaN keeps its sign
        {0x7f800001, 0x7e00},  // signalling NaN stays NaN (quietened), not infinity
    };
    const size_t n = std::size(rows);
    TensorDesc in = make(TF_DTYPE_F32, {static_cast<int64_t>(n)});
    TensorDesc out = make(TF_DTYPE_F16, {static_cast<int64_t>(n)});
    std::vector<uint32_t> src;
    for (const Row &r : rows) src.push_back(r.f32);
    set_raw(in, src);
    run_ok(TF_OP_CAST, {&in}, out);
    const auto got = get_raw<uint16_t>(out);
    for (size_t i = 0; i < n; ++i) {
        INFO("f32 ", hex(rows[i].f32), " -> got ", hex(got[i]), ", expected ", hex(rows[i].f16));
        CHECK(got[i] == rows[i].f16);
    }
}

TEST_CASE("f32 -> bf16 rounds to nearest even on known bit patterns") {
    struct Row {
        uint32_t f32;
        uint16_t bf16;
    };
    const Row rows[] = {
        {0x3f800000, 0x3f80},  // 1
        {0x3f808000, 0x3f80},  // 1 + 2^-8: tie, to even (down)
        {0x3f818000, 0x3f82},  // tie, to even (up)
        {0x3f808001, 0x3f81},  // just above the tie
        {0x7f7fffff, 0x7f80},  // FLT_MAX rounds up to infinity
        {0x7f7f7fff, 0x7f7f}, {0x00000001, 0x0000},  // smallest f32 subnormal
        {0x00008000, 0x0000},  // tie, to even
        {0x00018000, 0x0002}, {0x80000000, 0x8000},  // -0
        {0x7f800000, 0x7f80},  // inf
        {0x7fc00000, 0x7fc0},  // quiet NaN
        {0xffc00001, 0xffc0},  // negative NaN
        {0x7f800001, 0x7fc0},  // signalling NaN stays NaN
    };
    const size_t n = std::size(rows);
    TensorDesc in = make(TF_DTYPE_F32, {static_cast<int64_t>(n)});
    TensorDesc out = make(TF_DTYPE_BF16, {static_cast<int64_t>(n)});
    std::vector<uint32_t> src;
    for (const Row &r : rows) src.push_back(r.f32);
    set_raw(in, src);
    run_ok(TF_OP_CAST, {&in}, out);
    const auto got = get_raw<uint16_t>(out);
    for (size_t i = 0; i < n; ++i) {
        INFO("f32 ", hex(rows[i].f32), " -> got ", hex(got[i]), ", expected ", hex(rows[i].bf16));
        CHECK(got[i] == rows[i].bf16);
    }
}

TEST_CASE("every f16 and bf16 pattern widens to f32 exactly and comes back unchanged") {
    for (int32_t dtype : {TF_DTYPE_F16, TF_DTYPE_BF16}) {
        CAPTURE(name_of(dtype));
        TensorDesc narrow = make(dtype, {0x10000});
        TensorDesc wide = make(TF_DTYPE_F32, {0x10000});
        TensorDesc back = make(dtype, {0x10000});
        std::vector<uint16_t> all(0x10000);
        for (uint32_t b = 0; b < 0x10000; ++b) all[b] = static_cast<uint16_t>(b);
        set_raw(narrow, all);
        run_ok(TF_OP_CAST, {&narrow}, wide);
        run_ok(TF_OP_CAST, {&wide}, back);
        const auto widened = get_raw<uint32_t>(wide);
        const auto returned = get_raw<uint16_t>(back);
        const uint16_t quiet = dtype == TF_DTYPE_F16 ? 0x0200 : 0x0040;
        int wrong = 0;
        for (uint32_t b = 0; b < 0x10000; ++b) {
            const double expected =
                dtype == TF_DTYPE_F16 ? half_value(static_cast<uint16_t>(b)) : bf16_value(static_cast<uint16_t>(b));
            const float got = bits_f32(widened[b]);
            bool ok;
            if (std::isnan(expected))
                ok = std::isnan(got) && std::signbit(got) == std::signbit(expected) && returned[b] == (b | quiet);
            else
                ok = static_cast<double>(got) == expected && std::signbit(got) == std::signbit(expected) &&
                     returned[b] == b;
            if (!ok && ++wrong <= 5)
                FAIL_CHECK("pattern ", hex(b), " -> f32 ", hex(widened[b]), " -> ", hex(returned[b]));
        }
        CHECK(wrong == 0);
    }
}

TEST_CASE("f16 <-> bf16 casts round once") {
    TensorDesc h = make(TF_DTYPE_F16, {3});
    TensorDesc b = make(TF_DTYPE_BF16, {3});
    set_raw<uint16_t>(h, {0x3c00, 0x7bff, 0x0001});  // 1, 65504, 2^-24
    run_ok(TF_OP_CAST, {&h}, b);
    // 65504 = 1.1111111111b * 2^15 has 11 bits; bf16 keeps 8 and rounds up to 2^16.
    CHECK(get_raw<uint16_t>(b) == std::vector<uint16_t>{0x3f80, 0x4780, 0x3380});

    set_raw<uint16_t>(b, {0x4780, 0x3eab, 0xff80});  // 65536, 171/512, -inf
    run_ok(TF_OP_CAST, {&b}, h);
    CHECK(get_raw<uint16_t>(h) == std::vector<uint16_t>{0x7c00, 0x3558, 0xfc00});
}

TEST_CASE("narrowing from double or a wide integer rounds once, not through f32") {
    // 1 + 2^-11 + 2^-40 is just above an f16 tie; through f32 the 2^-40 is lost and the tie
    // goes down to even. Rounded once it goes up.
    TensorDesc h = make(TF_DTYPE_F16, {});
    const tf_params_fill fh = fill_params(1.0 + 0x1p-11 + 0x1p-40);
    run_ok(TF_OP_FILL, {}, h, &fh);
    CHECK(get_raw<uint16_t>(h) == std::vector<uint16_t>{0x3c01});

    TensorDesc b = make(TF_DTYPE_BF16, {});
    const tf_params_fill fb = fill_params(1.0 + 0x1p-8 + 0x1p-30);
    run_ok(TF_OP_FILL, {}, b, &fb);
    CHECK(get_raw<uint16_t>(b) == std::vector<uint16_t>{0x3f81});

    // 2^24 + 2^16 + 1: f32 rounds it to 2^24 + 2^16 (a bf16 tie, then down to 2^24); the exact
    // value rounds up to 2^24 + 2^17 = 0x4b81.
    TensorDesc i64 = make(TF_DTYPE_I64, {8});
    TensorDesc i32 = make(TF_DTYPE_I32, {1});
    set_raw<int64_t>(i64, {16842753, 2049, 2051, 65519, 65520, -65520, INT64_MAX, 16777217});
    set_raw<int32_t>(i32, {16842753});
    TensorDesc b1 = make(TF_DTYPE_BF16, {1});
    run_ok(TF_OP_CAST, {&i32}, b1);
    CHECK(get_raw<uint16_t>(b1) == std::vector<uint16_t>{0x4b81});

    TensorDesc b8 = make(TF_DTYPE_BF16, {8});
    run_ok(TF_OP_CAST, {&i64}, b8);
    CHECK(get_raw<uint16_t>(b8)[0] == 0x4b81);

    TensorDesc h8 = make(TF_DTYPE_F16, {8});
    run_ok(TF_OP_CAST, {&i64}, h8);
    const auto hb = get_raw<uint16_t>(h8);
    CHECK(hb[1] == 0x6800);  // 2049: tie between 2048 and 2050, to even
    CHECK(hb[2] == 0x6802);  // 2051: tie between 2050 and 2052, to even
    CHECK(hb[3] == 0x7bff);  // 65519 -> 65504
    CHECK(hb[4] == 0x7c00);  // 65520 -> inf
    CHECK(hb[5] == 0xfc00);  // -65520 -> -inf
    CHECK(hb[6] == 0x7c00);

    TensorDesc f8 = make(TF_DTYPE_F32, {8});
    run_ok(TF_OP_CAST, {&i64}, f8);
    const auto fb8 = get_raw<uint32_t>(f8);
    CHECK(fb8[6] == 0x5f000000);  // INT64_MAX -> 2^63
    CHECK(fb8[7] == f32_bits(16777216.0f));  // 2^24 + 1: tie, to even
}

// ---- cast ---------------------------------------------------------------------------------

TEST_CASE("cast: every pair of dtypes") {
    for (int32_t from : k_all) {
        for (int32_t to : k_all) {
            CAPTURE(name_of(from));
            CAPTURE(name_of(to));
            TensorDesc in = make(from, {2, 2});
            const bool from_bool = from == TF_DTYPE_BOOL;
            set(in, from_bool ? std::vector<double>{0, 1, 1, 0} : std::vector<double>{0, 1, 3, -2});
            TensorDesc out = make(to, {2, 2});
            run_ok(TF_OP_CAST, {&in}, out);
            if (to == TF_DTYPE_BOOL)
                check_values(out, {0, 1, 1, from_bool ? 0.0 : 1.0});
            else
                check_values(out, from_bool ? std::vector<double>{0, 1, 1, 0} : std::vector<double>{0, 1, 3, -2});
            CHECK(only_elements_written(out));
        }
    }
}

TEST_CASE("cast: float -> int truncates toward zero and saturates") {
    TensorDesc f = make(TF_DTYPE_F32, {12});
    set_raw<float>(f, {3.7f, -3.7f, 1e10f, -1e10f, NAN, INFINITY, -INFINITY, 2147483520.0f, 2147483648.0f,
                       -2147483648.0f, 0.99f, -0.0f});
    TensorDesc i = make(TF_DTYPE_I32, {12});
    run_ok(TF_OP_CAST, {&f}, i);
    CHECK(get_raw<int32_t>(i) == std::vector<int32_t>{3, -3, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 2147483520,
                                                      INT32_MAX, INT32_MIN, 0, 0});

    TensorDesc f5 = make(TF_DTYPE_F32, {6});
    set_raw<float>(f5, {1e30f, -1e30f, -9223372036854775808.0f, 9223372036854775808.0f, 9223371487098961920.0f, NAN});
    TensorDesc l = make(TF_DTYPE_I64, {6});
    run_ok(TF_OP_CAST, {&f5}, l);
    CHECK(get_raw<int64_t>(l) ==
          std::vector<int64_t>{INT64_MAX, INT64_MIN, INT64_MIN, INT64_MAX, 9223371487098961920LL, 0});

    TensorDesc h = make(TF_DTYPE_F16, {4});
    set_raw<uint16_t>(h, {0xfbff, 0x7c00, 0x7e00, 0x3e00});  // -65504, inf, NaN, 1.5
    TensorDesc hi = make(TF_DTYPE_I32, {4});
    run_ok(TF_OP_CAST, {&h}, hi);
    CHECK(get_raw<int32_t>(hi) == std::vector<int32_t>{-65504, INT32_MAX, 0, 1});

    TensorDesc b = make(TF_DTYPE_BF16, {3});
    set_raw<uint16_t>(b, {0x4f00, 0xcf00, 0xc2f7});  // 2^31, -2^31, -123.5
    TensorDesc bi = make(TF_DTYPE_I32, {3});
    run_ok(TF_OP_CAST, {&b}, bi);
    CHECK(get_raw<int32_t>(bi) == std::vector<int32_t>{INT32_MAX, INT32_MIN, -123});
}

TEST_CASE("cast: bool, and integer narrowing wraps") {
    TensorDesc f = make(TF_DTYPE_F32, {5});
    set_raw<float>(f, {0.0f, -0.0f, 0.5f, NAN, -INFINITY});
    TensorDesc fb = make(TF_DTYPE_BOOL, {5});
    run_ok(TF_OP_CAST, {&f}, fb);
    CHECK(get_raw<uint8_t>(fb) == std::vector<uint8_t>{0, 0, 1, 1, 1});

    TensorDesc i = make(TF_DTYPE_I32, {3});
    set_raw<int32_t>(i, {0, 2, -1});
    TensorDesc ib = make(TF_DTYPE_BOOL, {3});
    run_ok(TF_OP_CAST, {&i}, ib);
    CHECK(get_raw<uint8_t>(ib) == std::vector<uint8_t>{0, 1, 1});

    TensorDesc bools = make(TF_DTYPE_BOOL, {3});
    set_raw<uint8_t>(bools, {1, 0, 2});  // a stray 2 still reads as true, never as 2
    TensorDesc bh = make(TF_DTYPE_F16, {3});
    run_ok(TF_OP_CAST, {&bools}, bh);
    CHECK(get_raw<uint16_t>(bh) == std::vector<uint16_t>{0x3c00, 0x0000, 0x3c00});

    TensorDesc l = make(TF_DTYPE_I64, {4});
    set_raw<int64_t>(l, {4294967301LL, -1, 2147483648LL, -7});
    TensorDesc li = make(TF_DTYPE_I32, {4});
    run_ok(TF_OP_CAST, {&l}, li);
    CHECK(get_raw<int32_t>(li) == std::vector<int32_t>{5, -1, INT32_MIN, -7});
    TensorDesc back = make(TF_DTYPE_I64, {4});
    run_ok(TF_OP_CAST, {&li}, back);
    CHECK(get_raw<int64_t>(back) == std::vector<int64_t>{5, -1, INT32_MIN, -7});

    TensorDesc big = make(TF_DTYPE_I32, {1});
    set_raw<int32_t>(big, {70000});
    TensorDesc bigh = make(TF_DTYPE_F16, {1});
    run_ok(TF_OP_CAST, {&big}, bigh);
    CHECK(get_raw<uint16_t>(bigh) == std::vector<uint16_t>{0x7c00});
}

// ---- contiguous, fill -----------------------------------------------------------------------

TEST_CASE("contiguous copies any layout, every dtype") {
    for (int32_t dt : k_all) {
        CAPTURE(name_of(dt));
        const bool b = dt == TF_DTYPE_BOOL;
        const std::vector<double> v = b ? std::vector<double>{1, 0, 0, 1, 1, 1} : std::vector<double>{1, 2, 3, 4, 5, 6};
        TensorDesc st = make(dt, {3, 2}, v);
        TensorDesc t = transposed(st);
        TensorDesc out = make(dt, {2, 3});
        run_ok(TF_OP_CONTIGUOUS, {&t}, out);
        check_values(out, {v[0], v[2], v[4], v[1], v[3], v[5]});

        TensorDesc line = make(
            dt, {8}, b ? std::vector<double>{0, 1, 0, 0, 0, 1, 0, 1} : std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7});
        TensorDesc sliced = view(line, {2, 2}, {4, 2}, 1);
        TensorDesc out2 = make(dt, {2, 2});
        run_ok(TF_OP_CONTIGUOUS, {&sliced}, out2);
        check_values(out2, b ? std::vector<double>{1, 0, 1, 1} : std::vector<double>{1, 3, 5, 7});

        // A contiguous input into a strided output view: how the core copies into views.
        TensorDesc src = make(dt, {2, 2}, {v[0], v[1], v[2], v[3]});
        TensorDesc gaps = make(dt, {2, 4});
        TensorDesc into = view(gaps, {2, 2}, {4, 2}, 1);
        run_ok(TF_OP_CONTIGUOUS, {&src}, into);
        check_values(into, {v[0], v[1], v[2], v[3]});
        CHECK(only_elements_written(into));

        // A broadcast input into a strided output.
        TensorDesc one = make(dt, {}, {1});
        TensorDesc bcast = view(one, {2, 2}, {0, 0});
        TensorDesc wide = make(dt, {8});
        TensorDesc strided = view(wide, {2, 2}, {4, 2});
        run_ok(TF_OP_CONTIGUOUS, {&bcast}, strided);
        check_values(strided, {1, 1, 1, 1});
        CHECK(only_elements_written(strided));
    }
}

TEST_CASE("fill converts its double to every dtype") {
    // Per row: f32, f16, bf16, i32, bool, then i64 exactly. 1e20 in bf16 is 0x60ad by hand
    // (1e20 / 2^66 = 1.3553, nearest 1 + 45/128).
    struct Row {
        double value;
        std::vector<double> expected;
        int64_t i64;
    };
    const Row rows[] = {
        {2.5, {2.5, 2.5, 2.5, 2, 1}, 2},
        {-2.75, {-2.75, -2.75, -2.75, -2, 1}, -2},
        {0.0, {0, 0, 0, 0, 0}, 0},
        {NAN, {NAN, NAN, NAN, 0, 1}, 0},
        {1e20, {1e20f, INFINITY, 99727710148492263424.0, INT32_MAX, 1}, INT64_MAX},
        {-1e20, {-1e20f, -INFINITY, -99727710148492263424.0, INT32_MIN, 1}, INT64_MIN},
    };
    const int32_t order[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_I32, TF_DTYPE_BOOL};
    for (const Row &r : rows) {
        CAPTURE(r.value);
        for (size_t d = 0; d < std::size(order); ++d) {
            CAPTURE(name_of(order[d]));
            TensorDesc out = make(order[d], {2, 2});
            const tf_params_fill p = fill_params(r.value);
            run_ok(TF_OP_FILL, {}, out, &p);
            check_values(out, std::vector<double>(4, r.expected[d]));
        }
        TensorDesc out = make(TF_DTYPE_I64, {2, 2});
        const tf_params_fill p = fill_params(r.value);
        run_ok(TF_OP_FILL, {}, out, &p);
        CHECK(get_raw<int64_t>(out) == std::vector<int64_t>(4, r.i64));
    }
    // A strided output keeps its gaps.
    TensorDesc wide = make(TF_DTYPE_I32, {3, 4});
    TensorDesc cols = view(wide, {3, 2}, {4, 2}, 1);
    const tf_params_fill p = fill_params(-7);
    run_ok(TF_OP_FILL, {}, cols, &p);
    check_values(cols, {-7, -7, -7, -7, -7, -7});
    CHECK(only_elements_written(cols));

    // Beyond f32's range: infinity in every float type, the limit in the integers.
    TensorDesc huge = make(TF_DTYPE_F32, {1});
    const tf_params_fill ph = fill_params(-1e300);
    run_ok(TF_OP_FILL, {}, huge, &ph);
    CHECK(get_raw<uint32_t>(huge) == std::vector<uint32_t>{0xff800000u});
    TensorDesc huge_bf16 = make(TF_DTYPE_BF16, {1});
    run_ok(TF_OP_FILL, {}, huge_bf16, &ph);
    CHECK(get_raw<uint16_t>(huge_bf16) == std::vector<uint16_t>{0xff80});

    TensorDesc nan16 = make(TF_DTYPE_F16, {1});
    const tf_params_fill pn = fill_params(-NAN);
    run_ok(TF_OP_FILL, {}, nan16, &pn);
    CHECK(get_raw<uint16_t>(nan16) == std::vector<uint16_t>{0xfe00});
}
