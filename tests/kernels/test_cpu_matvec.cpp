// matmul with few rows per B (the cpu plugin's skinny path, kernels_matvec.hpp) through the plugin
// ABI, at the instruction-set level the process runs under (meson runs it at each level with
// tests/at_isa.py):
//   - f32, f16 and bf16 operands and outputs, B row-major, B seen transposed (linear's W^T), B and
//     A strided, a transposed output, batches sharing a broadcast B and batches with a B each,
//     odd sizes on both sides of the register tile, of the dot kernel's 16-element steps and of
//     the K pieces: against a double reference with the f32 accumulation bound (docs/numerics.md)
//     plus one rounding to the output dtype;
//   - every row bit for bit equal to the same row multiplied alone (M = 1), and the product equal
//     for 1, 2 and 3 threads;
//   - where the product takes the GEMM's tiles (a row-major B, or the portable level), the rows
//     bit for bit equal to the packed GEMM's (the rows again inside a product of more rows than
//     the skinny path takes). A transposed B at the AVX2 level takes the dot kernel, whose order
//     of additions is its own (the double reference bounds it).
#include <doctest/doctest.h>

#include "cpu_plugin_table.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

const tf_plugin &P() { return cpu_plugin_table(); }

// Restarts the plugin with this TINYFIN_THREADS (the ISA level comes from the environment).
void restart_threads(const char *threads) {
    P().shutdown();
    setenv("TINYFIN_THREADS", threads, 1);
    tf_error err{};
    err.struct_size = sizeof err;
    REQUIRE(P().init(&err) == TF_STATUS_OK);
}

using Dims = std::vector<int64_t>;

float bf16_value(float v) {  // v rounded to bf16 (nearest even) as a float
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    std::memcpy(&v, &u, 4);
    return v;
}
uint16_t bf16_bits(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return static_cast<uint16_t>(u >> 16);
}
// f16 <-> f32 for the normal, finite values the test uses (|v| in [2^-14, 65504]) and zero.
uint16_t f16_bits(float v) {
    if (v == 0.0f) return std::signbit(v) ? 0x8000 : 0;
    int e = 0;
    const double m = std::frexp(std::fabs(static_cast<double>(v)), &e);  // v = m 2^e, m in [0.5, 1)
    auto mant = static_cast<uint32_t>(std::nearbyint((m * 2.0 - 1.0) * 1024.0));
    int exp = e - 1 + 15;
    if (mant == 1024) {
        mant = 0;
        ++exp;
    }
    return static_cast<uint16_t>((v < 0 ? 0x8000 : 0) | (exp << 10) | mant);
}
float f16_float(uint16_t h) {
    const int exp = (h >> 10) & 31;
    const int mant = h & 1023;
    double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
    return static_cast<float>((h & 0x8000) ? -v : v);
}
float f16_value(float v) { return f16_float(f16_bits(v)); }

int64_t dtype_bytes(int32_t d) { return d == TF_DTYPE_F32 ? 4 : 2; }

// Storage from the plugin's allocator holding `count` elements of dtype, with a float copy.
struct Tensor {
    tf_buffer *buffer = nullptr;
    char *data = nullptr;
    int32_t dtype = TF_DTYPE_F32;
    tf_tensor_desc d{};
    Tensor(int32_t dt, const Dims &shape, const Dims &strides) : dtype(dt) {
        int64_t last = 0;
        for (size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * strides[i];
        tf_error err{};
        err.struct_size = sizeof err;
        const auto bytes = static_cast<uint64_t>(last + 1) * static_cast<uint64_t>(dtype_bytes(dt));
        REQUIRE(P().buffer_alloc(0, bytes, &buffer, &err) == TF_STATUS_OK);
        data = static_cast<char *>(P().buffer_host_ptr(buffer));
        std::memset(data, 0xff, bytes);  // NaN in every dtype: an element never written shows
        d.struct_size = sizeof d;
        d.dtype = dt;
        d.rank = static_cast<int32_t>(shape.size());
        for (size_t i = 0; i < shape.size(); ++i) {
            d.shape[i] = shape[i];
            d.strides[i] = strides[i];
        }
        d.buffer = buffer;
        d.data = data;
    }
    Tensor(const Tensor &) = delete;
    Tensor &operator=(const Tensor &) = delete;
    ~Tensor() { P().buffer_free(buffer); }
    int64_t offset(const Dims &idx) const {
        int64_t off = 0;
        for (size_t i = 0; i < idx.size(); ++i) off += (d.shape[i] == 1 ? 0 : idx[i]) * d.strides[i];
        return off;
    }
    float get(const Dims &idx) const {
        const char *p = data + offset(idx) * dtype_bytes(dtype);
        if (dtype == TF_DTYPE_F32) {
            float v;
            std::memcpy(&v, p, 4);
            return v;
        }
        uint16_t h;
        std::memcpy(&h, p, 2);
        if (dtype == TF_DTYPE_F16) return f16_float(h);
        const uint32_t u = static_cast<uint32_t>(h) << 16;
        float v;
        std::memcpy(&v, &u, 4);
        return v;
    }
    void set(const Dims &idx, float v) const {
        char *p = data + offset(idx) * dtype_bytes(dtype);
        if (dtype == TF_DTYPE_F32) {
            std::memcpy(p, &v, 4);
            return;
        }
        const uint16_t h = dtype == TF_DTYPE_F16 ? f16_bits(v) : bf16_bits(v);
        std::memcpy(p, &h, 2);
    }
};

// Every index of shape in row-major order.
std::vector<Dims> indices(const Dims &shape) {
    std::vector<Dims> all;
    Dims idx(shape.size(), 0);
    int64_t count = 1;
    for (int64_t s : shape) count *= s;
    for (int64_t t = 0; t < count; ++t) {
        all.push_back(idx);
        for (size_t i = shape.size(); i-- > 0;) {
            if (++idx[i] < shape[i]) break;
            idx[i] = 0;
        }
    }
    return all;
}

// Random values exactly representable in dtype (f16: normal, |v| >= 2^-10).
void fill(const Tensor &t, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
    Dims shape(t.d.shape, t.d.shape + t.d.rank);
    for (const Dims &idx : indices(shape)) {
        float v = pick(rng);
        if (t.dtype == TF_DTYPE_F16) {
            if (std::fabs(v) < 1.0f / 1024) v = 1.0f / 1024;
            v = f16_value(v);
        } else if (t.dtype == TF_DTYPE_BF16) {
            v = bf16_value(v);
        }
        t.set(idx, v);
    }
}

void run_matmul(const Tensor &a, const Tensor &b, const Tensor &out) {
    tf_tensor_desc ins[2] = {a.d, b.d};
    tf_tensor_desc o = out.d;
    tf_op_desc op{};
    op.struct_size = sizeof op;
    op.op = TF_OP_MATMUL;
    op.n_inputs = 2;
    op.n_outputs = 1;
    op.inputs = ins;
    op.outputs = &o;
    REQUIRE(P().supports(0, &op) == 1);
    tf_error err{};
    err.struct_size = sizeof err;
    const tf_status status = P().run(0, &op, &err);
    INFO("message: ", err.message);
    REQUIRE(status == TF_STATUS_OK);
}

struct Case {
    Dims as, ast, bs, bst, os, ost;
};

// out against sum_p a b in double: |got - exact| <= 1.2e-7 (k + 2) sum|a b| + rounding to out's
// dtype (2^-11 f16, 2^-8 bf16 of |exact|).
void check_reference(const Tensor &a, const Tensor &b, const Tensor &out) {
    const int r = out.d.rank;
    const int64_t k = a.d.shape[r - 1];
    const double unit = out.dtype == TF_DTYPE_F32 ? 0.0 : out.dtype == TF_DTYPE_F16 ? 0x1p-11 : 0x1p-8;
    int bad = 0;
    Dims shape(out.d.shape, out.d.shape + r);
    for (const Dims &idx : indices(shape)) {
        double sum = 0, mag = 0;
        Dims ia = idx, ib = idx;
        for (int64_t p = 0; p < k; ++p) {
            ia[r - 1] = p;
            ib[r - 2] = p;
            const double prod = static_cast<double>(a.get(ia)) * b.get(ib);
            sum += prod;
            mag += std::fabs(prod);
        }
        const double got = out.get(idx);
        const double bound = 1.2e-7 * static_cast<double>(k + 2) * mag + unit * std::fabs(sum) + 1e-30;
        if (!(std::fabs(got - sum) <= bound) && bad++ < 5) {
            std::string at;
            for (int64_t v : idx) at += std::to_string(v) + " ";
            FAIL_CHECK("out[", at, "]: got ", got, ", expected ", sum, " (bound ", bound, ")");
        }
    }
    CHECK(bad == 0);
}

// The rows of out again from the packed GEMM: each batch element's A rows are placed first in a
// dense A of `tall` rows (more than the skinny path takes) against the same B.
void check_gemm_bits(const Tensor &a, const Tensor &b, const Tensor &out) {
    const int r = out.d.rank;
    const int64_t m = out.d.shape[r - 2], n = out.d.shape[r - 1], k = a.d.shape[r - 1], tall = 40;
    Dims batch(out.d.shape, out.d.shape + r - 2);
    int bad = 0;
    for (const Dims &bi : indices(batch)) {
        Tensor ta(a.dtype, {tall, k}, {k, 1}), to(out.dtype, {tall, n}, {n, 1});
        fill(ta, 99);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t p = 0; p < k; ++p) {
                Dims ia = bi;
                ia.push_back(i);
                ia.push_back(p);
                ta.set({i, p}, a.get(ia));
            }
        // B of this batch element as a 2-D view of the same memory.
        tf_tensor_desc bd = b.d;
        Dims zero = bi;
        zero.push_back(0);
        zero.push_back(0);
        bd.offset = static_cast<uint64_t>(b.offset(zero) * dtype_bytes(b.dtype));
        bd.rank = 2;
        bd.shape[0] = k;
        bd.shape[1] = n;
        bd.strides[0] = b.d.strides[r - 2];
        bd.strides[1] = b.d.strides[r - 1];
        tf_tensor_desc ins[2] = {ta.d, bd};
        tf_tensor_desc o = to.d;
        tf_op_desc op{};
        op.struct_size = sizeof op;
        op.op = TF_OP_MATMUL;
        op.n_inputs = 2;
        op.n_outputs = 1;
        op.inputs = ins;
        op.outputs = &o;
        tf_error err{};
        err.struct_size = sizeof err;
        REQUIRE(P().run(0, &op, &err) == TF_STATUS_OK);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                Dims io = bi;
                io.push_back(i);
                io.push_back(j);
                const float got = out.get(io), want = to.get({i, j});
                if (std::memcmp(&got, &want, 4) != 0 && bad++ < 5)
                    FAIL_CHECK("row ", i, " col ", j, ": skinny ", got, ", GEMM ", want);
            }
    }
    CHECK(bad == 0);
}

// Each row of out again from a product of that row of A alone (M = 1) against the same B: the
// skinny path's operations for an output do not depend on the other rows.
void check_rows_alone(const Tensor &a, const Tensor &b, const Tensor &out) {
    const int r = out.d.rank;
    const int64_t m = out.d.shape[r - 2], n = out.d.shape[r - 1], k = a.d.shape[r - 1];
    Dims batch(out.d.shape, out.d.shape + r - 2);
    int bad = 0;
    for (const Dims &bi : indices(batch))
        for (int64_t i = 0; i < m; ++i) {
            Tensor ta(a.dtype, {1, k}, {k, 1}), to(out.dtype, {1, n}, {n, 1});
            for (int64_t p = 0; p < k; ++p) {
                Dims ia = bi;
                ia.push_back(i);
                ia.push_back(p);
                ta.set({0, p}, a.get(ia));
            }
            tf_tensor_desc bd = b.d;
            Dims zero = bi;
            zero.push_back(0);
            zero.push_back(0);
            bd.offset = static_cast<uint64_t>(b.offset(zero) * dtype_bytes(b.dtype));
            bd.rank = 2;
            bd.shape[0] = k;
            bd.shape[1] = n;
            bd.strides[0] = b.d.strides[r - 2];
            bd.strides[1] = b.d.strides[r - 1];
            tf_tensor_desc ins[2] = {ta.d, bd};
            tf_tensor_desc o = to.d;
            tf_op_desc op{};
            op.struct_size = sizeof op;
            op.op = TF_OP_MATMUL;
            op.n_inputs = 2;
            op.n_outputs = 1;
            op.inputs = ins;
            op.outputs = &o;
            tf_error err{};
            err.struct_size = sizeof err;
            REQUIRE(P().run(0, &op, &err) == TF_STATUS_OK);
            for (int64_t j = 0; j < n; ++j) {
                Dims io = bi;
                io.push_back(i);
                io.push_back(j);
                const float got = out.get(io), want = to.get({0, j});
                if (std::memcmp(&got, &want, 4) != 0 && bad++ < 5)
                    FAIL_CHECK("row ", i, " col ", j, ": in the product ", got, ", alone ", want);
            }
        }
    CHECK(bad == 0);
}

std::vector<float> values(const Tensor &t) {
    Dims shape(t.d.shape, t.d.shape + t.d.rank);
    std::vector<float> v;
    for (const Dims &idx : indices(shape)) v.push_back(t.get(idx));
    return v;
}

std::vector<Case> cases() {
    std::vector<Case> all;
    for (int64_t m : {1, 2, 5, 16})
        for (int64_t n : {1, 7, 17, 40})
            for (int64_t k : {1, 9, 64, 300}) {
                all.push_back({{m, k}, {k, 1}, {k, n}, {n, 1}, {m, n}, {n, 1}});  // B row-major
                all.push_back({{m, k}, {k, 1}, {k, n}, {1, k}, {m, n}, {n, 1}});  // B = W^T, W [n, k]
            }
    // Longer K (several K pieces whatever the tile width) and wider N, W^T as linear has it.
    all.push_back({{1, 1100}, {1100, 1}, {1100, 70}, {1, 1100}, {1, 70}, {70, 1}});
    all.push_back({{3, 777}, {777, 1}, {777, 129}, {1, 780}, {3, 129}, {129, 1}});  // W rows padded
    // The dot kernel's K pieces for more than three rows (an odd count of 16-element steps, a
    // tail), W's rows not a multiple of its blocks of 4 and 16.
    all.push_back({{5, 1040}, {1040, 1}, {1040, 37}, {1, 1040}, {5, 37}, {37, 1}});
    all.push_back({{16, 2100}, {2100, 1}, {2100, 6}, {1, 2100}, {16, 6}, {6, 1}});
    // A row-major B read in place for up to 3 rows (a recurrent step's h R^T): one full unit of 64
    // columns for one row, 3 and 2 rows with a partial vector; more rows (the sliver path) with a
    // padded row stride.
    all.push_back({{1, 128}, {128, 1}, {128, 512}, {512, 1}, {1, 512}, {512, 1}});
    all.push_back({{7, 200}, {200, 1}, {200, 133}, {133, 1}, {7, 133}, {133, 1}});
    all.push_back({{16, 256}, {256, 1}, {256, 72}, {80, 1}, {16, 72}, {72, 1}});
    all.push_back({{3, 100}, {100, 1}, {100, 70}, {70, 1}, {3, 70}, {70, 1}});
    all.push_back({{4, 64}, {64, 1}, {64, 24}, {24, 1}, {4, 24}, {24, 1}});
    // Two batch elements of two rows sharing one broadcast row-major B: four rows per B.
    all.push_back({{2, 2, 90}, {180, 90, 1}, {2, 90, 50}, {0, 50, 1}, {2, 2, 50}, {100, 50, 1}});
    // Strided A and B (every other element), a transposed output.
    all.push_back({{3, 65}, {2, 9}, {65, 33}, {70, 2}, {3, 33}, {1, 3}});
    all.push_back({{2, 130}, {1, 2}, {130, 20}, {3, 400}, {2, 20}, {20, 1}});
    // A batch sharing one broadcast B (the core's stride 0): 3 x 2 rows; one B per batch element.
    all.push_back({{3, 2, 90}, {180, 90, 1}, {3, 90, 50}, {0, 1, 90}, {3, 2, 50}, {100, 50, 1}});
    all.push_back({{4, 1, 70}, {70, 70, 1}, {4, 70, 19}, {70 * 19, 19, 1}, {4, 1, 19}, {19, 19, 1}});
    // A broadcast A row against four B (attention's q k^T in decoding).
    all.push_back(
        {{2, 2, 1, 64}, {0, 64, 64, 1}, {2, 2, 64, 33}, {2 * 33 * 64, 33 * 64, 1, 64}, {2, 2, 1, 33}, {66, 33, 33, 1}});
    return all;
}

void run_suite(int32_t dtype) {
    uint32_t seed = 1;
    for (const Case &c : cases()) {
        CAPTURE(c.as[0]);
        CAPTURE(c.bs[c.bs.size() - 1]);
        CAPTURE(c.as[c.as.size() - 1]);
        CAPTURE(c.bst[c.bst.size() - 1]);
        Tensor a(dtype, c.as, c.ast), b(dtype, c.bs, c.bst), o(dtype, c.os, c.ost);
        fill(a, seed++);
        fill(b, seed++);
        run_matmul(a, b, o);
        check_reference(a, b, o);
        check_rows_alone(a, b, o);
        // The dot kernel (a transposed B, dense along K, above the portable level) has its own
        // order of additions; every other product takes the GEMM's tiles.
        const bool dot = cpu_plugin_feature("kernels") != "generic" && c.bst[c.bst.size() - 2] == 1;
        if (!dot) check_gemm_bits(a, b, o);
    }
}

}  // namespace

TEST_CASE("skinny matmul: f32, f16 and bf16 against a double reference, rows as alone, the GEMM's rows") {
    restart_threads("1");
    SUBCASE("f32") { run_suite(TF_DTYPE_F32); }
    SUBCASE("f16") { run_suite(TF_DTYPE_F16); }
    SUBCASE("bf16") { run_suite(TF_DTYPE_BF16); }
}

TEST_CASE("skinny matmul: the same bits for 1, 2 and 3 threads") {
    for (int32_t dtype : {TF_DTYPE_F32, TF_DTYPE_BF16}) {
        CAPTURE(dtype);
        std::vector<std::vector<float>> results;
        for (const char *threads : {"1", "2", "3"}) {
            restart_threads(threads);
            // Big enough to be split over the threads: W^T of a 512 x 700 weight, 3 rows; then the
            // same B row-major (read in place).
            Tensor a(dtype, {3, 700}, {700, 1}), b(dtype, {700, 512}, {1, 700}), o(dtype, {3, 512}, {512, 1});
            fill(a, 5);
            fill(b, 6);
            run_matmul(a, b, o);
            check_reference(a, b, o);
            results.push_back(values(o));
            Tensor br(dtype, {700, 512}, {512, 1}), orow(dtype, {3, 512}, {512, 1});
            fill(br, 7);
            run_matmul(a, br, orow);
            check_reference(a, br, orow);
            const std::vector<float> rowmajor = values(orow);
            results.back().insert(results.back().end(), rowmajor.begin(), rowmajor.end());
        }
        CHECK(results[1] == results[0]);
        CHECK(results[2] == results[0]);
    }
    restart_threads("1");
}

TEST_CASE("skinny matmul: f16 and bf16 rows are the f32 product of the converted operands, rounded once") {
    // W^T (linear's layout) with rows whose sums nearly cancel: x's last four elements are 1 and
    // W's last four elements of each row cancel the rest of the row's sum step by step (each one
    // minus what is left, rounded to the dtype), so the result is far smaller than its terms and
    // its bits show the order of the f32 additions even after the rounding to f16/bf16.
    restart_threads("1");
    for (int32_t dtype : {TF_DTYPE_F16, TF_DTYPE_BF16}) {
        CAPTURE(dtype);
        for (int64_t m : {1, 5}) {
            const int64_t k = 301, n = 23;
            Tensor a(dtype, {m, k}, {k, 1}), b(dtype, {k, n}, {1, k}), o(dtype, {m, n}, {n, 1});
            Tensor a32(TF_DTYPE_F32, {m, k}, {k, 1}), b32(TF_DTYPE_F32, {k, n}, {1, k});
            Tensor o32(TF_DTYPE_F32, {m, n}, {n, 1});
            fill(a, 21);
            fill(b, 22);
            for (int64_t i = 0; i < m; ++i)
                for (int64_t p = k - 4; p < k; ++p) a.set({i, p}, 1.0f);
            for (int64_t j = 0; j < n; ++j) {
                double left = 0;
                for (int64_t p = 0; p + 4 < k; ++p) left += static_cast<double>(a.get({0, p})) * b.get({p, j});
                for (int64_t p = k - 4; p < k; ++p) {
                    const float v = dtype == TF_DTYPE_BF16 ? bf16_value(static_cast<float>(-left))
                                                           : f16_value(static_cast<float>(-left));
                    b.set({p, j}, std::fabs(v) >= 0x1p-14f ? v : 0.0f);  // f16_value takes normal values
                    left += b.get({p, j});
                }
            }
            for (int64_t i = 0; i < m; ++i)
                for (int64_t p = 0; p < k; ++p) a32.set({i, p}, a.get({i, p}));
            for (int64_t p = 0; p < k; ++p)
                for (int64_t j = 0; j < n; ++j) b32.set({p, j}, b.get({p, j}));
            run_matmul(a, b, o);
            run_matmul(a32, b32, o32);
            int bad = 0;
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j) {
                    const float exact32 = o32.get({i, j});  // rounded once to the dtype (nearest even)
                    // f16: subnormal below 2^-14 (units of 2^-24), which f16_value does not take.
                    const float f16 = std::fabs(exact32) < 0x1p-14f
                                          ? static_cast<float>(std::nearbyint(exact32 * 0x1p24f) * 0x1p-24f)
                                          : f16_value(exact32);
                    const float got = o.get({i, j}), want = dtype == TF_DTYPE_BF16 ? bf16_value(exact32) : f16;
                    if (std::memcmp(&got, &want, 4) != 0 && bad++ < 5)
                        FAIL_CHECK("m ", m, " out[", i, ", ", j, "] = ", got, ", the f32 product rounded ", want,
                                   " (f32 ", o32.get({i, j}), ")");
                }
            CHECK(bad == 0);
        }
    }
}
