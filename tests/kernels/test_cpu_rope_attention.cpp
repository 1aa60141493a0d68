// rope in both layouts and attention (causal, masks, broadcast) against their formulas.
// Through the plugin ABI with no core; the harness: cpu_kernel_harness.hpp.
#include "cpu_kernel_harness.hpp"

using namespace cpu_kernel_test;

// ---- rope -----------------------------------------------------------------------------------

TEST_CASE("rope in both layouts matches the formula, and inverse undoes it") {
    const int64_t b = 2, t = 3, d = 8;
    const Values xv = random_f32(static_cast<size_t>(b * t * d), 31);
    for (int interleaved : {0, 1}) {
        INFO("interleaved ", interleaved);
        const tf_params_rope p{sizeof(tf_params_rope), interleaved, 0, 100.0, 5};
        const tf_params_rope inv{sizeof(tf_params_rope), interleaved, 1, 100.0, 5};
        // x viewed with the batch axis outermost in memory but T and D swapped.
        const TensorDesc x = strided(TF_DTYPE_F32, {b, t, d}, {t * d, 1, t}, 0, b * t * d);
        set(x, xv);
        const TensorDesc y = make(TF_DTYPE_F32, {b, t, d}), back = make(TF_DTYPE_F32, {b, t, d});
        run_ok(TF_OP_ROPE, {&x}, y, &p);
        run_ok(TF_OP_ROPE, {&y}, back, &inv);
        Values ref(xv.size());
        for (int64_t bb = 0; bb < b; ++bb)
            for (int64_t tt = 0; tt < t; ++tt)
                for (int64_t i = 0; i < d / 2; ++i) {
                    const double angle =
                        static_cast<double>(5 + tt) * std::pow(100.0, -2.0 * static_cast<double>(i) / d);
                    const int64_t j0 = interleaved ? 2 * i : i, j1 = interleaved ? 2 * i + 1 : i + d / 2;
                    const size_t base = static_cast<size_t>((bb * t + tt) * d);
                    const double x0 = xv[base + static_cast<size_t>(j0)], x1 = xv[base + static_cast<size_t>(j1)];
                    ref[base + static_cast<size_t>(j0)] = x0 * std::cos(angle) - x1 * std::sin(angle);
                    ref[base + static_cast<size_t>(j1)] = x0 * std::sin(angle) + x1 * std::cos(angle);
                }
        check_close(get(y), ref, 1e-6);
        check_close(get(back), xv, 1e-6);
    }
    const tf_params_rope p{sizeof(tf_params_rope), 0, 0, 10000.0, 0};
    CHECK(Call(TF_OP_ROPE, {no_data_desc(TF_DTYPE_F32, {2, 4})}, no_data_desc(TF_DTYPE_F32, {2, 4}), &p).supports() ==
          1);
    CHECK(Call(TF_OP_ROPE, {no_data_desc(TF_DTYPE_F32, {2, 5})}, no_data_desc(TF_DTYPE_F32, {2, 5}), &p).supports() ==
          0);
    CHECK(Call(TF_OP_ROPE, {no_data_desc(TF_DTYPE_F32, {4})}, no_data_desc(TF_DTYPE_F32, {4}), &p).supports() == 0);
    const tf_params_rope zero_theta{sizeof(tf_params_rope), 0, 0, 0.0, 0};
    CHECK(Call(TF_OP_ROPE, {no_data_desc(TF_DTYPE_F32, {2, 4})}, no_data_desc(TF_DTYPE_F32, {2, 4}), &zero_theta)
              .supports() == 0);
}

// ---- attention ------------------------------------------------------------------------------

namespace {

// softmax(q k^T * scale + mask [+ causal]) v for one [..., T, D] batch laid out densely.
Values naive_attention(int64_t batches, int64_t tq, int64_t tk, int64_t d, int64_t dv, const Values &q, const Values &k,
                       const Values &v, const Values &mask, bool causal, double scale) {
    Values out(static_cast<size_t>(batches * tq * dv));
    for (int64_t b = 0; b < batches; ++b)
        for (int64_t i = 0; i < tq; ++i) {
            std::vector<double> s(static_cast<size_t>(tk));
            double max = -INFINITY;
            for (int64_t j = 0; j < tk; ++j) {
                double dotp = 0;
                for (int64_t e = 0; e < d; ++e)
                    dotp += q[static_cast<size_t>((b * tq + i) * d + e)] * k[static_cast<size_t>((b * tk + j) * d + e)];
                s[static_cast<size_t>(j)] = dotp * scale + mask[static_cast<size_t>((b * tq + i) * tk + j)];
                if (causal && j > i + (tk - tq)) s[static_cast<size_t>(j)] = -INFINITY;
                max = std::max(max, s[static_cast<size_t>(j)]);
            }
            double sum = 0;
            for (double &x : s) sum += (x = std::exp(x - max));
            for (int64_t e = 0; e < dv; ++e) {
                double acc = 0;
                for (int64_t j = 0; j < tk; ++j)
                    acc += s[static_cast<size_t>(j)] / sum * v[static_cast<size_t>((b * tk + j) * dv + e)];
                out[static_cast<size_t>((b * tq + i) * dv + e)] = max == -INFINITY ? NAN : acc;
            }
        }
    return out;
}

}  // namespace

TEST_CASE("attention matches softmax(q k^T) v, with causal and a broadcast mask") {
    const int64_t heads = 2, batch = 2, d = 5, dv = 3;
    // Key counts past 16 (attention_probabilities_avx2 takes 16 keys a block, a shorter tail
    // through a buffer; causal rows see every count from 1 to Tk).
    for (const std::pair<int64_t, int64_t> &sizes :
         {std::pair<int64_t, int64_t>{4, 4}, {3, 6}, {1, 5}, {7, 37}, {40, 40}, {2, 48}}) {
        const int64_t tq = sizes.first, tk = sizes.second;
        for (int causal : {0, 1}) {
            INFO("Tq ", tq, " Tk ", tk, " causal ", causal);
            const int64_t nb = heads * batch;
            const Values qv = random_f32(static_cast<size_t>(nb * tq * d), 41),
                         kv = random_f32(static_cast<size_t>(nb * tk * d), 42),
                         vv = random_f32(static_cast<size_t>(nb * tk * dv), 43),
                         mrow = random_f32(static_cast<size_t>(tk), 44);
            // The mask is one row [Tk] broadcast to [batch, heads, Tq, Tk] with stride 0.
            const TensorDesc mask_row = f32({tk}, mrow);
            TensorDesc mask = mask_row;
            mask.d = describe(TF_DTYPE_F32, {batch, heads, tq, tk}, {0, 0, 0, 1}, 0);
            mask.d.data = mask_row.d.data;
            mask.d.buffer = mask_row.d.buffer;
            Values mv;
            for (int64_t r = 0; r < nb * tq; ++r) mv.insert(mv.end(), mrow.begin(), mrow.end());
            // k as a transposed view: stored [batch, heads, D, Tk].
            const TensorDesc q = f32({batch, heads, tq, d}, qv);
            const TensorDesc k =
                strided(TF_DTYPE_F32, {batch, heads, tk, d}, {heads * d * tk, d * tk, 1, tk}, 0, nb * tk * d);
            set(k, kv);
            const TensorDesc v = f32({batch, heads, tk, dv}, vv);
            const TensorDesc out = make(TF_DTYPE_F32, {batch, heads, tq, dv});
            const tf_params_attention p{sizeof(tf_params_attention), causal, 0, 0.5};
            run_ok(TF_OP_ATTENTION, {&q, &k, &v, &mask}, out, &p);
            check_close(get(out), naive_attention(nb, tq, tk, d, dv, qv, kv, vv, mv, causal != 0, 0.5), 1e-5);
        }
    }

    // The transformer's layout: q, k and v are the heads' column blocks of one [B, T, 3 H D]
    // projection (rows 3 H D floats apart, copied row by row), the mask one scalar broadcast to
    // every axis (stride 0 everywhere, filled once). A constant mask cancels in the softmax; -inf
    // hides every key, so every output is NaN, which tells the fill from a zero one.
    {
        const int64_t b = 2, h = 2, t = 5, dd = 4, row = 3 * h * dd;
        const Values all = random_f32(static_cast<size_t>(b * t * row), 45);
        const TensorDesc qkv = f32({b, t, row}, all);
        auto head_view = [&](int64_t part) {
            TensorDesc x = qkv;
            x.d = describe(TF_DTYPE_F32, {b, h, t, dd}, {t * row, dd, row, 1}, part * h * dd);
            x.d.data = qkv.d.data;
            x.d.buffer = qkv.d.buffer;
            return x;
        };
        const TensorDesc q = head_view(0), k = head_view(1), v = head_view(2);
        Values qd, kd, vd;  // the same heads dense, [b, h, t, dd]
        for (int64_t bb = 0; bb < b; ++bb)
            for (int64_t hh = 0; hh < h; ++hh)
                for (int64_t tt = 0; tt < t; ++tt)
                    for (int64_t e = 0; e < dd; ++e) {
                        const size_t at = static_cast<size_t>((bb * t + tt) * row + hh * dd + e);
                        qd.push_back(all[at]);
                        kd.push_back(all[at + static_cast<size_t>(h * dd)]);
                        vd.push_back(all[at + static_cast<size_t>(2 * h * dd)]);
                    }
        for (const double value : {0.75, static_cast<double>(-INFINITY)}) {
            INFO("scalar mask ", value);
            const TensorDesc scalar = f32({1}, {value});
            TensorDesc mask = scalar;
            mask.d = describe(TF_DTYPE_F32, {b, h, t, t}, {0, 0, 0, 0}, 0);
            mask.d.data = scalar.d.data;
            mask.d.buffer = scalar.d.buffer;
            const TensorDesc out = make(TF_DTYPE_F32, {b, h, t, dd});
            const tf_params_attention p{sizeof(tf_params_attention), 1, 0, 0.5};
            run_ok(TF_OP_ATTENTION, {&q, &k, &v, &mask}, out, &p);
            const Values mv(static_cast<size_t>(b * h * t * t), value);
            const Values ref = naive_attention(b * h, t, t, dd, dd, qd, kd, vd, mv, true, 0.5);
            const Values got = get(out);
            if (value == -INFINITY) {
                for (const double g : got) CHECK(std::isnan(g));
            } else {
                check_close(got, ref, 1e-5);
            }
        }
    }

    // A mask of its own per query row, read in place through a row stride that is not Tk (a
    // [B, H, Tq, Tk] view of wider rows), and an output that is a strided view (rows 2 Dv apart):
    // both read and written through their strides.
    {
        const int64_t b = 2, h = 2, t = 6, dd = 4, nb = b * h, pad = 3;
        const Values qv = random_f32(static_cast<size_t>(nb * t * dd), 46),
                     kv = random_f32(static_cast<size_t>(nb * t * dd), 47),
                     vv = random_f32(static_cast<size_t>(nb * t * dd), 48),
                     mv = random_f32(static_cast<size_t>(nb * t * t), 49);
        const TensorDesc q = f32({b, h, t, dd}, qv), k = f32({b, h, t, dd}, kv), v = f32({b, h, t, dd}, vv);
        const TensorDesc mask =
            strided(TF_DTYPE_F32, {b, h, t, t}, {h * t * (t + pad), t * (t + pad), t + pad, 1}, 0, nb * t * (t + pad));
        set(mask, mv);
        const TensorDesc out =
            strided(TF_DTYPE_F32, {b, h, t, dd}, {h * t * 2 * dd, t * 2 * dd, 2 * dd, 1}, 0, nb * t * 2 * dd);
        const tf_params_attention p{sizeof(tf_params_attention), 0, 0, 0.5};
        run_ok(TF_OP_ATTENTION, {&q, &k, &v, &mask}, out, &p);
        check_close(get(out), naive_attention(nb, t, t, dd, dd, qv, kv, vv, mv, false, 0.5), 1e-5);
    }

    // bert's padding mask: 0 or -10000 per key (half the keys hidden; their exp is computed from
    // a far negative argument and must come out 0, not a subnormal or NaN), 128 keys.
    {
        const int64_t nb = 2, t = 128, dd = 8;
        const Values qv = random_f32(static_cast<size_t>(nb * t * dd), 50),
                     kv = random_f32(static_cast<size_t>(nb * t * dd), 51),
                     vv = random_f32(static_cast<size_t>(nb * t * dd), 52);
        Values mrow(static_cast<size_t>(t));
        for (int64_t j = 0; j < t; ++j) mrow[static_cast<size_t>(j)] = (j * 7 + 3) % 5 < 2 ? -10000.0 : 0.0;
        const TensorDesc mask_row = f32({t}, mrow);
        TensorDesc mask = mask_row;
        mask.d = describe(TF_DTYPE_F32, {nb, t, t}, {0, 0, 1}, 0);
        mask.d.data = mask_row.d.data;
        mask.d.buffer = mask_row.d.buffer;
        Values mv;
        for (int64_t r = 0; r < nb * t; ++r) mv.insert(mv.end(), mrow.begin(), mrow.end());
        const TensorDesc q = f32({nb, t, dd}, qv), k = f32({nb, t, dd}, kv), v = f32({nb, t, dd}, vv);
        const TensorDesc out = make(TF_DTYPE_F32, {nb, t, dd});
        const tf_params_attention p{sizeof(tf_params_attention), 0, 0, 0.35};
        run_ok(TF_OP_ATTENTION, {&q, &k, &v, &mask}, out, &p);
        check_close(get(out), naive_attention(nb, t, t, dd, dd, qv, kv, vv, mv, false, 0.35), 1e-5);
    }

    // Heads of size 0: every score is 0, so each output row is the mean of v's rows.
    {
        const TensorDesc q = make(TF_DTYPE_F32, {2, 0}), k = make(TF_DTYPE_F32, {3, 0});
        const TensorDesc v = f32({3, 2}, {1, 2, 3, 4, 5, 9});
        const TensorDesc out = make(TF_DTYPE_F32, {2, 2}), no_mask = f32({2, 3}, {0, 0, 0, 0, 0, 0});
        const tf_params_attention p{sizeof(tf_params_attention), 0, 0, 1.0};
        run_ok(TF_OP_ATTENTION, {&q, &k, &v, &no_mask}, out, &p);
        check_close(get(out), {3, 5, 3, 5}, 1e-6);
    }

    // Causal with Tq > Tk: the first Tq - Tk queries see no key and give NaN; so does a row
    // masked entirely with -inf.
    const TensorDesc q = f32({3, 2}, {1, 0, 0, 1, 1, 1}), k = f32({2, 2}, {1, 0, 0, 1}), v = f32({2, 1}, {10, 20});
    const TensorDesc mask = f32({3, 2}, {0, 0, -INFINITY, -INFINITY, 0, 0});
    const TensorDesc out = make(TF_DTYPE_F32, {3, 1});
    const tf_params_attention causal{sizeof(tf_params_attention), 1, 0, 1.0};
    const TensorDesc zeros = f32({3, 2}, {0, 0, 0, 0, 0, 0});
    run_ok(TF_OP_ATTENTION, {&q, &k, &v, &zeros}, out, &causal);
    Values got = get(out);
    CHECK(std::isnan(got[0]));
    CHECK(got[1] == doctest::Approx(10.0));  // sees key 0 only
    CHECK(got[2] == doctest::Approx(15.0));  // equal scores
    const tf_params_attention plain{sizeof(tf_params_attention), 0, 0, 1.0};
    run_ok(TF_OP_ATTENTION, {&q, &k, &v, &mask}, out, &plain);
    got = get(out);
    CHECK(got[0] == doctest::Approx((10 * std::exp(1.0) + 20) / (std::exp(1.0) + 1)));
    CHECK(std::isnan(got[1]));

    const auto qd = no_data_desc(TF_DTYPE_F32, {2, 4}), kd = no_data_desc(TF_DTYPE_F32, {3, 4}),
               vd = no_data_desc(TF_DTYPE_F32, {3, 5}), md = no_data_desc(TF_DTYPE_F32, {2, 3}),
               od = no_data_desc(TF_DTYPE_F32, {2, 5});
    CHECK(Call(TF_OP_ATTENTION, {qd, kd, vd, md}, od, &plain).supports() == 1);
    CHECK(Call(TF_OP_ATTENTION, {qd, kd, vd, no_data_desc(TF_DTYPE_F32, {2, 4})}, od, &plain).supports() == 0);
    CHECK(Call(TF_OP_ATTENTION, {qd, no_data_desc(TF_DTYPE_F32, {3, 3}), vd, md}, od, &plain).supports() == 0);
    CHECK(Call(TF_OP_ATTENTION, {qd, kd, vd, md}, no_data_desc(TF_DTYPE_F32, {2, 4}), &plain).supports() == 0);
    CHECK(Call(TF_OP_ATTENTION,
               {no_data_desc(TF_DTYPE_F32, {2, 2, 4}), no_data_desc(TF_DTYPE_F32, {1, 3, 4}),
                no_data_desc(TF_DTYPE_F32, {2, 3, 5}), no_data_desc(TF_DTYPE_F32, {2, 2, 3})},
               no_data_desc(TF_DTYPE_F32, {2, 2, 5}), &plain)
              .supports() == 0);  // batch dims not expanded
    CHECK(Call(TF_OP_ATTENTION, {qd, kd, vd, no_data_desc(TF_DTYPE_F16, {2, 3})}, od, &plain).supports() == 0);
}
