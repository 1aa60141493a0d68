// The reductions: sum, mean, max, min, var over axis masks, argmax and argmin.
// Through the plugin ABI with no core; the harness: cpu_kernel_harness.hpp.
#include "cpu_kernel_harness.hpp"

#include <random>

using namespace cpu_kernel_test;

// ---- sum ------------------------------------------------------------------------------------

TEST_CASE("sum over each axis mask, every dtype") {
    for (int32_t dt : k_numeric) {
        CAPTURE(name_of(dt));
        TensorDesc x = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
        TensorDesc rows = make(dt, {2, 1});
        const tf_params_reduce p1 = reduce_params(0b10);
        run_ok(TF_OP_SUM, {&x}, rows, &p1);
        check_values(rows, {6, 15});

        TensorDesc cols = make(dt, {1, 3});
        const tf_params_reduce p0 = reduce_params(0b01);
        run_ok(TF_OP_SUM, {&x}, cols, &p0);
        check_values(cols, {5, 7, 9});

        TensorDesc all = make(dt, {1, 1});
        const tf_params_reduce p01 = reduce_params(0b11);
        run_ok(TF_OP_SUM, {&x}, all, &p01);
        check_values(all, {21});

        TensorDesc same = make(dt, {2, 3});
        const tf_params_reduce none = reduce_params(0);
        run_ok(TF_OP_SUM, {&x}, same, &none);
        check_values(same, {1, 2, 3, 4, 5, 6});

        // Transposed input: [[1, 3, 5], [2, 4, 6]].
        TensorDesc st = make(dt, {3, 2}, {1, 2, 3, 4, 5, 6});
        TensorDesc t = transposed(st);
        run_ok(TF_OP_SUM, {&t}, rows, &p1);
        check_values(rows, {9, 12});

        // Rank 3, axes 0 and 2: out[0][j][0] = sum over i, k of x[i][j][k].
        TensorDesc cube = make(dt, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
        TensorDesc mid = make(dt, {1, 2, 1});
        const tf_params_reduce p02 = reduce_params(0b101);
        run_ok(TF_OP_SUM, {&cube}, mid, &p02);
        check_values(mid, {10, 18});

        // Strided output: rows of a [3, 4] land at storage 0, 2, 4.
        TensorDesc y = make(dt, {3, 4}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 0, 0, 3});
        TensorDesc storage = make(dt, {6});
        TensorDesc out = view(storage, {3, 1}, {2, 1});
        run_ok(TF_OP_SUM, {&y}, out, &p1);
        check_values(out, {4, 8, 6});
        CHECK(only_elements_written(out));

        // A broadcast input: one element seen three times.
        TensorDesc one = make(dt, {}, {2});
        TensorDesc bcast = view(one, {3}, {0});
        TensorDesc s = make(dt, {1});
        const tf_params_reduce pa = reduce_params(0b1);
        run_ok(TF_OP_SUM, {&bcast}, s, &pa);
        check_values(s, {6});
    }
}

TEST_CASE("sum accumulates floats in double, integers wrap") {
    // In f32, 1e8 + 1 == 1e8 and the total would come out as 1.
    TensorDesc x = make(TF_DTYPE_F32, {4}, {1e8, 1, -1e8, 1});
    TensorDesc s = make(TF_DTYPE_F32, {1});
    const tf_params_reduce p = reduce_params(1);
    run_ok(TF_OP_SUM, {&x}, s, &p);
    check_values(s, {2});

    // f16: 2048 + 1 + 1 + ... in f16 steps would stay at 2048; the double sum is 2052.
    TensorDesc h = make(TF_DTYPE_F16, {5}, {2048, 1, 1, 1, 1});
    TensorDesc hs = make(TF_DTYPE_F16, {1});
    run_ok(TF_OP_SUM, {&h}, hs, &p);
    check_values(hs, {2052});

    TensorDesc i = make(TF_DTYPE_I32, {2});
    set_raw<int32_t>(i, {INT32_MAX, 1});
    TensorDesc is = make(TF_DTYPE_I32, {1});
    run_ok(TF_OP_SUM, {&i}, is, &p);
    CHECK(get_raw<int32_t>(is) == std::vector<int32_t>{INT32_MIN});

    TensorDesc l = make(TF_DTYPE_I64, {3});
    set_raw<int64_t>(l, {INT64_MAX, 1, 5});
    TensorDesc ls = make(TF_DTYPE_I64, {1});
    run_ok(TF_OP_SUM, {&l}, ls, &p);
    CHECK(get_raw<int64_t>(ls) == std::vector<int64_t>{INT64_MIN + 5});
}

TEST_CASE("sum is deterministic and matches a row-major double sum") {
    const int n = 10007;
    std::vector<float> v(n);
    uint32_t state = 12345;
    for (float &f : v) {
        state = state * 1664525u + 1013904223u;
        f = static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)) * 0x1p-13f;
    }
    double expected = 0;
    for (float f : v) expected += f;
    TensorDesc x = make(TF_DTYPE_F32, {n});
    set_raw(x, v);
    TensorDesc s1 = make(TF_DTYPE_F32, {1}), s2 = make(TF_DTYPE_F32, {1});
    const tf_params_reduce p = reduce_params(1);
    run_ok(TF_OP_SUM, {&x}, s1, &p);
    run_ok(TF_OP_SUM, {&x}, s2, &p);
    CHECK(f32_bits(get_raw<float>(s1)[0]) == f32_bits(get_raw<float>(s2)[0]));
    CHECK(get_raw<float>(s1)[0] == static_cast<float>(expected));
}

TEST_CASE("sum and mean with many outputs (lockstep lanes) match each output's row-major double sum") {
    // [N, C, H, W] over axes 0, 2, 3 (a conv bias gradient) with C = 13 (a group of 8 lanes and
    // one of 5), and over axis 0 of [N, C] with C = 131; values whose double sums depend on order.
    struct ReduceCase {
        std::vector<int64_t> shape, out_shape;
        uint32_t mask;
    };
    const ReduceCase cases[] = {
        {{5, 13, 6, 7}, {1, 13, 1, 1}, 0b1101}, {{37, 131}, {1, 131}, 0b01}, {{3, 9, 4}, {3, 1, 4}, 0b010}};
    uint32_t state = 777;
    for (const ReduceCase &c : cases) {
        int64_t count = 1;
        for (int64_t d : c.shape) count *= d;
        std::vector<float> v(static_cast<size_t>(count));
        for (float &f : v) {
            state = state * 1664525u + 1013904223u;
            f = std::ldexp(static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)),
                           static_cast<int>(state % 40) - 30);
        }
        // The expected sums: row-major over each output's inputs.
        const int rank = static_cast<int>(c.shape.size());
        std::vector<int64_t> strides(static_cast<size_t>(rank));
        for (int i = rank - 1, st = 1; i >= 0; st *= static_cast<int>(c.shape[static_cast<size_t>(i)]), --i)
            strides[static_cast<size_t>(i)] = st;
        int64_t outputs = 1;
        for (int64_t d : c.out_shape) outputs *= d;
        std::vector<double> sums(static_cast<size_t>(outputs), 0.0);
        std::vector<int64_t> count_in(static_cast<size_t>(outputs), 0);
        for (int64_t e = 0; e < count; ++e) {  // row-major over the input is row-major within each output
            int64_t o = 0, rest = e;
            for (int i = 0; i < rank; ++i) {
                const int64_t idx = rest / strides[static_cast<size_t>(i)];
                rest %= strides[static_cast<size_t>(i)];
                if (!(c.mask >> i & 1)) o = o * c.shape[static_cast<size_t>(i)] + idx;
            }
            sums[static_cast<size_t>(o)] += v[static_cast<size_t>(e)];
            ++count_in[static_cast<size_t>(o)];
        }
        TensorDesc x = make(TF_DTYPE_F32, c.shape);
        set_raw(x, v);
        TensorDesc s = make(TF_DTYPE_F32, c.out_shape), m = make(TF_DTYPE_F32, c.out_shape);
        const tf_params_reduce p = reduce_params(c.mask);
        run_ok(TF_OP_SUM, {&x}, s, &p);
        run_ok(TF_OP_MEAN, {&x}, m, &p);
        const std::vector<float> got_s = get_raw<float>(s), got_m = get_raw<float>(m);
        for (size_t o = 0; o < sums.size(); ++o) {
            CAPTURE(o);
            CHECK(f32_bits(got_s[o]) == f32_bits(static_cast<float>(sums[o])));
            CHECK(f32_bits(got_m[o]) == f32_bits(static_cast<float>(sums[o] / static_cast<double>(count_in[o]))));
        }
    }
}

// ---- Reductions -----------------------------------------------------------------------------

// x[i][j][k] of a [2, 3, 4] tensor: small integers, exact in every dtype.
double cube_value(int64_t i, int64_t j, int64_t k) { return static_cast<double>((i * 12 + j * 4 + k) * 7 % 11 - 5); }

TEST_CASE("mean, max and min over axis masks, permuted input, strided output") {
    const Dims shape = {2, 3, 4};
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        // Storage [4, 3, 2] seen as [2, 3, 4]: element [i][j][k] at k * 6 + j * 2 + i.
        TensorDesc storage = make(dt, {4, 3, 2});
        TensorDesc x = view(storage, shape, {1, 2, 6});
        std::vector<double> values;
        for (int64_t e = 0; e < 24; ++e) {
            const auto idx = index_of(e, shape);
            values.push_back(cube_value(idx[0], idx[1], idx[2]));
        }
        set(x, values);

        for (uint32_t mask : {0b000u, 0b001u, 0b010u, 0b100u, 0b101u, 0b111u}) {
            CAPTURE(mask);
            Dims out_shape = shape;
            for (int a = 0; a < 3; ++a)
                if (mask >> a & 1) out_shape[static_cast<size_t>(a)] = 1;
            // Output in every other element of a larger buffer, with a wild stride on size-1 axes.
            const int64_t out_n = count_of(out_shape);
            TensorDesc out_storage = make(dt, {2 * out_n});
            Dims out_strides = contiguous_strides(out_shape);
            for (size_t a = 0; a < 3; ++a) out_strides[a] = out_shape[a] == 1 ? 1000 : out_strides[a] * 2;
            TensorDesc out = view(out_storage, out_shape, out_strides);

            std::vector<double> sum(static_cast<size_t>(out_n), 0), hi(static_cast<size_t>(out_n), -INFINITY),
                lo(static_cast<size_t>(out_n), INFINITY);
            std::vector<int> count(static_cast<size_t>(out_n), 0);
            for (int64_t e = 0; e < 24; ++e) {
                const size_t u = reduced_index(e, shape, out_shape, mask);
                sum[u] += values[static_cast<size_t>(e)];
                hi[u] = std::max(hi[u], values[static_cast<size_t>(e)]);
                lo[u] = std::min(lo[u], values[static_cast<size_t>(e)]);
                ++count[u];
            }
            const tf_params_reduce p = reduce_params(mask);
            run_ok(TF_OP_MAX, {&x}, out, &p);
            check_values(out, hi);
            run_ok(TF_OP_MIN, {&x}, out, &p);
            check_values(out, lo);
            if (is_float(dt)) {
                std::vector<double> mean;
                for (size_t u = 0; u < sum.size(); ++u) mean.push_back(sum[u] / count[u]);
                run_ok(TF_OP_MEAN, {&x}, out, &p);
                check_close(out, mean);
            }
            CHECK(only_elements_written(out));
        }
    }
}

TEST_CASE("max and min: NaN propagates, extremes of every integer") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc x = make(dt, {3, 3}, {1, NAN, 3, 4, 2, NAN, -INFINITY, -INFINITY, -INFINITY});
        TensorDesc out = make(dt, {3, 1});
        const tf_params_reduce p = reduce_params(0b10);
        run_ok(TF_OP_MAX, {&x}, out, &p);
        check_values(out, {NAN, NAN, -INFINITY});
        run_ok(TF_OP_MIN, {&x}, out, &p);
        check_values(out, {NAN, NAN, -INFINITY});
    }
    TensorDesc l = make(TF_DTYPE_I64, {4});
    set_raw<int64_t>(l, {9007199254740992LL, INT64_MIN, 9007199254740993LL, INT64_MAX});
    TensorDesc pairs = view(l, {2, 2}, {1, 2});  // rows {2^53, 2^53 + 1} and {MIN, MAX}
    const tf_params_reduce p = reduce_params(0b10);
    TensorDesc rows = make(TF_DTYPE_I64, {2, 1});
    run_ok(TF_OP_MAX, {&pairs}, rows, &p);
    CHECK(get_raw<int64_t>(rows) == std::vector<int64_t>{9007199254740993LL, INT64_MAX});
    run_ok(TF_OP_MIN, {&pairs}, rows, &p);
    CHECK(get_raw<int64_t>(rows) == std::vector<int64_t>{9007199254740992LL, INT64_MIN});

    TensorDesc i = make(TF_DTYPE_I32, {3});
    set_raw<int32_t>(i, {INT32_MAX, INT32_MIN, 0});
    TensorDesc io = make(TF_DTYPE_I32, {1});
    const tf_params_reduce all = reduce_params(1);
    run_ok(TF_OP_MAX, {&i}, io, &all);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{INT32_MAX});
    run_ok(TF_OP_MIN, {&i}, io, &all);
    CHECK(get_raw<int32_t>(io) == std::vector<int32_t>{INT32_MIN});
}

TEST_CASE("max and min of dense f32 (the vectorized path): bits of a row-major fold, -0 below +0, the first NaN") {
    // The definition, element by element in row-major order: IEEE 754-2019 maximum / minimum
    // (-0 < +0; a NaN operand gives NaN), the first NaN met kept with its payload.
    const auto fold = [](bool max, float acc, float x) {
        if (acc != acc) return acc;
        if (x != x) return x;
        if (x == acc) return (max ? std::signbit(acc) : !std::signbit(acc)) ? x : acc;  // +-0
        return (max ? x > acc : x < acc) ? x : acc;
    };
    const auto bits = [](float v) { return std::bit_cast<uint32_t>(v); };
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
    struct Shape {
        Dims dims;
        std::vector<uint32_t> masks;
    };
    // [A, C, B] views of every kind: trailing runs, leading runs (B = 1), both, all in one run, a
    // run longer than a task's split (70000), size-1 axes between.
    const Shape shapes[] = {{{5, 7, 33}, {0b001, 0b010, 0b100, 0b011, 0b110, 0b101, 0b111}},
                            {{3, 1, 70000}, {0b100, 0b111}},
                            {{70000, 3}, {0b01}},
                            {{4, 2, 3, 2}, {0b1001, 0b0110, 0b1000}}};
    for (const Shape &shape : shapes)
        for (int mode = 0; mode < 3; ++mode) {  // 0: plain, 1: signed zeros and infinities, 2: NaNs
            const int64_t n = count_of(shape.dims);
            std::vector<float> v(static_cast<size_t>(n));
            for (auto &e : v) e = uniform(rng);
            for (int64_t i = 0; i < n; i += 7) {
                const uint32_t r = static_cast<uint32_t>(rng());
                if (mode == 1)
                    v[static_cast<size_t>(i)] = r % 3 == 0 ? -0.0f : r % 3 == 1 ? 0.0f : (r & 8 ? INFINITY : -INFINITY);
                if (mode == 2 && r % 5 == 0)  // quiet NaNs with their own payload and sign
                    v[static_cast<size_t>(i)] = std::bit_cast<float>(0x7fc00000u | (r >> 12) | (r & 1u) << 31);
            }
            if (mode == 1) std::fill(v.begin(), v.begin() + std::min<int64_t>(n, 40), 0.0f), v[3] = -0.0f;
            std::vector<double> as_double(v.begin(), v.end());
            const TensorDesc x = make(TF_DTYPE_F32, shape.dims, as_double);
            for (uint32_t mask : shape.masks) {
                INFO("shape rank ", shape.dims.size(), " mask ", mask, " mode ", mode);
                Dims out_shape = shape.dims;
                for (size_t a = 0; a < out_shape.size(); ++a)
                    if (mask >> a & 1) out_shape[a] = 1;
                const int64_t out_n = count_of(out_shape);
                for (const bool max : {true, false}) {
                    std::vector<float> want(static_cast<size_t>(out_n));
                    std::vector<char> started(static_cast<size_t>(out_n), 0);
                    for (int64_t e = 0; e < n; ++e) {
                        const size_t u = reduced_index(e, shape.dims, out_shape, mask);
                        const float xv = v[static_cast<size_t>(e)];
                        want[u] = started[u] ? fold(max, want[u], xv) : xv;
                        started[u] = 1;
                    }
                    const TensorDesc out = make(TF_DTYPE_F32, out_shape);
                    const tf_params_reduce p = reduce_params(mask);
                    run_ok(max ? TF_OP_MAX : TF_OP_MIN, {&x}, out, &p);
                    const std::vector<float> got = get_raw<float>(out);
                    size_t differ = 0;
                    for (size_t u = 0; u < got.size(); ++u) differ += bits(got[u]) != bits(want[u]);
                    CHECK(differ == 0);
                }
            }
        }
}

TEST_CASE("mean accumulates in double, in a fixed order") {
    // In f32, 1e8 + 1 == 1e8: a float accumulator gives 0.25, double gives 0.5.
    TensorDesc x = make(TF_DTYPE_F32, {4}, {1e8, 1, -1e8, 1});
    TensorDesc out = make(TF_DTYPE_F32, {1});
    const tf_params_reduce p = reduce_params(1);
    run_ok(TF_OP_MEAN, {&x}, out, &p);
    check_values(out, {0.5});
    TensorDesc v = make(TF_DTYPE_F32, {1});
    const tf_params_var pv = var_params(1, 0);
    run_ok(TF_OP_VAR, {&x}, v, &pv);
    // mean 0.5; deviations 1e8 - 0.5, 0.5, -1e8 - 0.5, 0.5 -> (2 (1e8 - .5)^2... ) / 4, by hand:
    // ((1e8 - 0.5)^2 + (1e8 + 0.5)^2 + 2 * 0.25) / 4 = (2e16 + 0.5 + 0.5) / 4 = 5e15 + 0.25
    check_close(v, {5e15 + 0.25});

    TensorDesc b = make(TF_DTYPE_BF16, {4}, {1, 2, 4, 8});
    TensorDesc bo = make(TF_DTYPE_BF16, {1});
    run_ok(TF_OP_MEAN, {&b}, bo, &p);
    check_values(bo, {3.75});
}

TEST_CASE("f32 sum and mean of dense tensors over every axis mask match double sums") {
    // Odd sizes put elements in every lane of the vectorized path and leave remainders; the
    // [2, 40000] rows cross its 16384-element chunks; masks that interleave take the walk.
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
    for (const Dims &shape : {Dims{3, 37, 5, 41}, Dims{2, 40000}, Dims{64, 1, 9}}) {
        const int rank = static_cast<int>(shape.size());
        const int64_t n = count_of(shape);
        std::vector<double> values(static_cast<size_t>(n));
        for (double &v : values) v = pick(rng);
        TensorDesc x = make(TF_DTYPE_F32, shape, values);
        for (uint32_t mask = 0; mask < (1u << rank); ++mask) {
            CAPTURE(shape.size());
            CAPTURE(mask);
            Dims out_shape = shape;
            for (int a = 0; a < rank; ++a)
                if (mask >> a & 1) out_shape[static_cast<size_t>(a)] = 1;
            std::vector<double> sum(static_cast<size_t>(count_of(out_shape)), 0);
            for (int64_t e = 0; e < n; ++e)
                sum[reduced_index(e, shape, out_shape, mask)] += values[static_cast<size_t>(e)];
            const double per_output = static_cast<double>(n) / static_cast<double>(sum.size());
            std::vector<double> mean;
            for (double v : sum) mean.push_back(v / per_output);
            TensorDesc out = make(TF_DTYPE_F32, out_shape);
            const tf_params_reduce p = reduce_params(mask);
            run_ok(TF_OP_SUM, {&x}, out, &p);
            check_close(out, sum);
            run_ok(TF_OP_MEAN, {&x}, out, &p);
            check_close(out, mean);
        }
    }
}

TEST_CASE("var: corrections 0 and 1, fractional, and n - correction <= 0") {
    const std::vector<double> values = {1, 2, 3, 4, 5, 7};  // [2, 3]
    auto host_var = [&](const std::vector<double> &xs, double correction) {
        long double mean = 0, squares = 0;
        for (double v : xs) mean += v;
        mean /= static_cast<long double>(xs.size());
        for (double v : xs) squares += (v - mean) * (v - mean);
        return static_cast<double>(
            squares / static_cast<long double>(std::max(static_cast<double>(xs.size()) - correction, 0.0)));
    };
    for (int32_t dt : k_float) {
        for (double correction : {0.0, 1.0, 0.5}) {
            INFO("dtype ", name_of(dt));
            CAPTURE(correction);
            TensorDesc st = make(dt, {3, 2}, {1, 4, 2, 5, 3, 7});
            TensorDesc x = transposed(st);  // [[1, 2, 3], [4, 5, 7]]
            TensorDesc wide = make(dt, {4});
            TensorDesc rows = view(wide, {2, 1}, {2, 7}, 1);
            const tf_params_var pr = var_params(0b10, correction);
            run_ok(TF_OP_VAR, {&x}, rows, &pr);
            check_close(rows, {host_var({1, 2, 3}, correction), host_var({4, 5, 7}, correction)});
            CHECK(only_elements_written(rows));

            TensorDesc cols = make(dt, {1, 3});
            const tf_params_var pc = var_params(0b01, correction);
            run_ok(TF_OP_VAR, {&x}, cols, &pc);
            check_close(cols,
                        {host_var({1, 4}, correction), host_var({2, 5}, correction), host_var({3, 7}, correction)});

            TensorDesc all = make(dt, {1, 1});
            const tf_params_var pa = var_params(0b11, correction);
            run_ok(TF_OP_VAR, {&x}, all, &pa);
            check_close(all, {host_var(values, correction)});
        }
        // The divisor max(n - correction, 0) hits 0: inf, or NaN when the deviations are 0 too.
        TensorDesc x = make(dt, {2, 3}, {1, 2, 3, 2, 2, 2});
        TensorDesc rows = make(dt, {2, 1});
        for (double correction : {3.0, 4.0}) {
            const tf_params_var p = var_params(0b10, correction);
            run_ok(TF_OP_VAR, {&x}, rows, &p);
            check_values(rows, {INFINITY, NAN});
        }
        // One element, correction 1: 0 / 0.
        TensorDesc one = make(dt, {1}, {5});
        TensorDesc o = make(dt, {1});
        const tf_params_var p1 = var_params(1, 1);
        run_ok(TF_OP_VAR, {&one}, o, &p1);
        check_values(o, {NAN});
        const tf_params_var p0 = var_params(1, 0);
        run_ok(TF_OP_VAR, {&one}, o, &p0);
        check_values(o, {0});
        // NaN and inf inputs give NaN.
        TensorDesc bad = make(dt, {2, 2}, {1, NAN, INFINITY, 1});
        TensorDesc bo = make(dt, {2, 1});
        const tf_params_var pb = var_params(0b10, 0);
        run_ok(TF_OP_VAR, {&bad}, bo, &pb);
        check_values(bo, {NAN, NAN});
    }
}

// ---- argmax, argmin -------------------------------------------------------------------------

TEST_CASE("argmax and argmin: first index of ties, every numeric dtype") {
    for (int32_t dt : k_numeric) {
        INFO("dtype ", name_of(dt));
        TensorDesc x = make(dt, {3, 4}, {1, 3, 3, 2, 5, -1, 7, 7, -2, -2, -2, -2});
        TensorDesc out = make(TF_DTYPE_I64, {3, 1});
        const tf_params_axis p1 = axis_params(1);
        run_ok(TF_OP_ARGMAX, {&x}, out, &p1);
        CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{1, 2, 0});
        run_ok(TF_OP_ARGMIN, {&x}, out, &p1);
        CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{0, 1, 0});

        TensorDesc cols = make(TF_DTYPE_I64, {1, 4});
        const tf_params_axis p0 = axis_params(0);
        run_ok(TF_OP_ARGMAX, {&x}, cols, &p0);
        CHECK(get_raw<int64_t>(cols) == std::vector<int64_t>{1, 0, 1, 1});
        run_ok(TF_OP_ARGMIN, {&x}, cols, &p0);
        CHECK(get_raw<int64_t>(cols) == std::vector<int64_t>{2, 2, 2, 2});
    }
}

TEST_CASE("argmax and argmin: rank 3 on a permuted input, strided output, every axis") {
    const Dims shape = {2, 3, 4};
    for (int32_t dt : k_numeric) {
        TensorDesc storage = make(dt, {4, 3, 2});
        TensorDesc x = view(storage, shape, {1, 2, 6});
        std::vector<double> values;
        for (int64_t e = 0; e < 24; ++e) {
            const auto idx = index_of(e, shape);
            values.push_back(cube_value(idx[0], idx[1], idx[2]));
        }
        set(x, values);
        for (int32_t axis = 0; axis < 3; ++axis) {
            INFO("dtype ", name_of(dt));
            CAPTURE(axis);
            Dims out_shape = shape;
            out_shape[static_cast<size_t>(axis)] = 1;
            const int64_t out_n = count_of(out_shape);
            TensorDesc out_storage = make(TF_DTYPE_I64, {3 * out_n});
            Dims strides = contiguous_strides(out_shape);
            for (int64_t &s : strides) s *= 3;
            TensorDesc out = view(out_storage, out_shape, strides, 2);

            // The host's own scan: lowest index of the largest / smallest value along the axis.
            std::vector<double> best_max, best_min;
            for (int64_t o = 0; o < out_n; ++o) {
                auto idx = index_of(o, out_shape);
                int64_t imax = 0, imin = 0;
                double vmax = -INFINITY, vmin = INFINITY;
                for (int64_t j = 0; j < shape[static_cast<size_t>(axis)]; ++j) {
                    idx[static_cast<size_t>(axis)] = j;
                    const double v = cube_value(idx[0], idx[1], idx[2]);
                    if (v > vmax) {
                        vmax = v;
                        imax = j;
                    }
                    if (v < vmin) {
                        vmin = v;
                        imin = j;
                    }
                }
                best_max.push_back(static_cast<double>(imax));
                best_min.push_back(static_cast<double>(imin));
            }
            const tf_params_axis p = axis_params(axis);
            run_ok(TF_OP_ARGMAX, {&x}, out, &p);
            check_values(out, best_max);
            run_ok(TF_OP_ARGMIN, {&x}, out, &p);
            check_values(out, best_min);
            CHECK(only_elements_written(out));
        }
    }
}

TEST_CASE("argmax and argmin: the first NaN wins, -0 ties +0, i64 exact, broadcast input") {
    for (int32_t dt : k_float) {
        INFO("dtype ", name_of(dt));
        TensorDesc x =
            make(dt, {4, 4},
                 {5, NAN, 7, NAN, 1, 2, 3, NAN, NAN, -INFINITY, 0, 1, -INFINITY, -INFINITY, -INFINITY, -INFINITY});
        TensorDesc out = make(TF_DTYPE_I64, {4, 1});
        const tf_params_axis p = axis_params(1);
        run_ok(TF_OP_ARGMAX, {&x}, out, &p);
        CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{1, 3, 0, 0});
        run_ok(TF_OP_ARGMIN, {&x}, out, &p);
        CHECK(get_raw<int64_t>(out) == std::vector<int64_t>{1, 3, 0, 0});
    }
    TensorDesc z = make(TF_DTYPE_F32, {2});
    set_raw<float>(z, {-0.0f, 0.0f});
    TensorDesc zo = make(TF_DTYPE_I64, {1});
    const tf_params_axis p0 = axis_params(0);
    run_ok(TF_OP_ARGMAX, {&z}, zo, &p0);
    CHECK(get_raw<int64_t>(zo) == std::vector<int64_t>{0});
    run_ok(TF_OP_ARGMIN, {&z}, zo, &p0);
    CHECK(get_raw<int64_t>(zo) == std::vector<int64_t>{0});

    TensorDesc l = make(TF_DTYPE_I64, {3});
    set_raw<int64_t>(l, {9007199254740992LL, 9007199254740993LL, 9007199254740992LL});
    TensorDesc lo = make(TF_DTYPE_I64, {1});
    run_ok(TF_OP_ARGMAX, {&l}, lo, &p0);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{1});
    run_ok(TF_OP_ARGMIN, {&l}, lo, &p0);
    CHECK(get_raw<int64_t>(lo) == std::vector<int64_t>{0});

    // A broadcast axis: every element equal, so index 0.
    TensorDesc one = make(TF_DTYPE_I32, {2}, {4, 9});
    TensorDesc b = view(one, {2, 5}, {1, 0});
    TensorDesc bo = make(TF_DTYPE_I64, {2, 1});
    const tf_params_axis p1 = axis_params(1);
    run_ok(TF_OP_ARGMAX, {&b}, bo, &p1);
    CHECK(get_raw<int64_t>(bo) == std::vector<int64_t>{0, 0});
}

TEST_CASE("argmax and argmin: empty axes fail cleanly, other empty axes are fine") {
    for (uint32_t op : {TF_OP_ARGMAX, TF_OP_ARGMIN}) {
        CAPTURE(op);
        TensorDesc x = no_data(TF_DTYPE_F32, {2, 0});
        TensorDesc out = make(TF_DTYPE_I64, {2, 1});
        const tf_params_axis p1 = axis_params(1);
        const Call c(op, {&x}, out, &p1);
        CHECK(c.supports() == 0);
        std::string message;
        CHECK(c.run(&message) == TF_STATUS_INVALID_ARGUMENT);
        CHECK(message.find("size 0") != std::string::npos);
        CHECK(untouched(out));
        TensorDesc both = no_data(TF_DTYPE_F32, {0, 0});
        TensorDesc none_out = no_data(TF_DTYPE_I64, {0, 1});
        CHECK(run_fail(op, {&both}, none_out, &p1, &message) == TF_STATUS_INVALID_ARGUMENT);

        TensorDesc rows = no_data(TF_DTYPE_I32, {0, 3});
        TensorDesc rows_out = no_data(TF_DTYPE_I64, {0, 1});
        run_ok(op, {&rows}, rows_out, &p1);
    }
}
