// The cuda plugin's mapping of matmul descriptors onto cuBLAS strided-batched GEMMs
// (plugins/cuda/matmul_plan.cpp), checked on the host: the planned call is run with cuBLAS's
// column-major semantics (op N/T, leading dimensions, batch strides) over the operands' memory and
// must give the plain matmul of the descriptors, write only the output's elements and pass
// cuBLAS's argument checks. No GPU needed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "matmul_plan.hpp"

using tf_cuda::GemmCall;
using tf_cuda::plan_gemm;

namespace {

// An operand: its descriptor (element strides, offset 0) and the memory it lives in.
struct Operand {
    tf_tensor_desc desc;
    std::vector<double> memory;
};

tf_tensor_desc make_desc(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
    tf_tensor_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.dtype = TF_DTYPE_F32;
    d.rank = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
        d.shape[i] = shape[i];
        d.strides[i] = strides[i];
    }
    return d;
}

int64_t extent(const tf_tensor_desc &d) {
    int64_t end = 1;
    for (int i = 0; i < d.rank; ++i) end += (d.shape[i] - 1) * d.strides[i];
    return end;
}

// Element offset of the multi-index idx (rank entries).
int64_t offset(const tf_tensor_desc &d, const std::vector<int64_t> &idx) {
    int64_t off = 0;
    for (int i = 0; i < d.rank; ++i) off += idx[i] * d.strides[i];
    return off;
}

// Calls fn(idx) for every multi-index of shape (row-major).
template <class Fn>
void for_each_index(const std::vector<int64_t> &shape, Fn fn) {
    std::vector<int64_t> idx(shape.size(), 0);
    for (int64_t s : shape)
        if (s == 0) return;
    for (;;) {
        fn(idx);
        int d = static_cast<int>(shape.size()) - 1;
        for (; d >= 0; --d) {
            if (++idx[d] < shape[d]) break;
            idx[d] = 0;
        }
        if (d < 0) return;
    }
}

// Strides of a [batch..., rows, cols] tensor: each matrix row- or column-major with a leading
// dimension padded by pad, matrices dense one after the other, or broadcast (stride 0) on the
// batch axes listed in broadcast.
std::vector<int64_t> strides_for(const std::vector<int64_t> &shape, bool row_major, int64_t pad,
                                 const std::vector<bool> &broadcast) {
    const size_t r = shape.size();
    const int64_t rows = shape[r - 2], cols = shape[r - 1];
    std::vector<int64_t> s(r);
    const int64_t ld = (row_major ? cols : rows) + pad;
    s[r - 2] = row_major ? ld : 1;
    s[r - 1] = row_major ? 1 : ld;
    int64_t step = ld * (row_major ? rows : cols);
    for (int d = static_cast<int>(r) - 3; d >= 0; --d) {
        s[d] = broadcast[d] ? 0 : step;
        if (!broadcast[d]) step *= shape[d];
    }
    return s;
}

// Runs the GEMM as cuBLAS defines it: C = op(A) op(B), column-major, per batch, once per outer
// iteration with the operands moved as the plugin moves them.
void emulate(const GemmCall &c, const std::vector<double> &a, const std::vector<double> &b, std::vector<double> &out) {
    for (long long outer = 0; outer < c.outer_count; ++outer) {
        long long off[3];
        tf_cuda::outer_offsets(c, outer, off);
        const std::vector<double> &A = c.swapped ? b : a, &B = c.swapped ? a : b;
        const long long oa = c.swapped ? off[1] : off[0], ob = c.swapped ? off[0] : off[1], oc = off[2];
        for (int p = 0; p < c.batch; ++p)
            for (int i = 0; i < c.m; ++i)
                for (int j = 0; j < c.n; ++j) {
                    double acc = 0;
                    for (int l = 0; l < c.k; ++l) {
                        const double x = c.trans_a ? A.at(oa + p * c.stride_a + l + static_cast<int64_t>(i) * c.lda)
                                                   : A.at(oa + p * c.stride_a + i + static_cast<int64_t>(l) * c.lda);
                        const double y = c.trans_b ? B.at(ob + p * c.stride_b + j + static_cast<int64_t>(l) * c.ldb)
                                                   : B.at(ob + p * c.stride_b + l + static_cast<int64_t>(j) * c.ldb);
                        acc += x * y;
                    }
                    out.at(oc + p * c.stride_c + i + static_cast<int64_t>(j) * c.ldc) = acc;
                }
    }
}

// Plans a * b -> out and, when planned, checks the emulated call against the plain product.
// Returns whether it was planned.
bool check_product(Operand &a, Operand &b, Operand &out) {
    tf_tensor_desc inputs[2] = {a.desc, b.desc};
    tf_op_desc op{sizeof(tf_op_desc), TF_OP_MATMUL, 2, 1, inputs, &out.desc, nullptr};
    GemmCall call;
    if (!plan_gemm(op, &call)) return false;
    // cuBLAS's own argument checks.
    CHECK(call.lda >= std::max(1, call.trans_a ? call.k : call.m));
    CHECK(call.ldb >= std::max(1, call.trans_b ? call.n : call.k));
    CHECK(call.ldc >= std::max(1, call.m));

    out.memory.assign(static_cast<size_t>(extent(out.desc)) + 8, NAN);  // NaN: untouched
    emulate(call, a.memory, b.memory, out.memory);

    const int r = out.desc.rank;
    const int64_t k = a.desc.shape[r - 1];
    std::vector<int64_t> shape(out.desc.shape, out.desc.shape + r);
    std::vector<bool> written(out.memory.size(), false);
    for_each_index(shape, [&](const std::vector<int64_t> &idx) {
        double want = 0;
        std::vector<int64_t> ia = idx, ib = idx;
        for (int64_t l = 0; l < k; ++l) {
            ia[r - 1] = l;
            ib[r - 2] = l;
            want += a.memory[offset(a.desc, ia)] * b.memory[offset(b.desc, ib)];
        }
        const int64_t at = offset(out.desc, idx);
        written[at] = true;
        REQUIRE(out.memory[at] == doctest::Approx(want));
    });
    for (size_t i = 0; i < out.memory.size(); ++i)
        if (!written[i]) REQUIRE(std::isnan(out.memory[i]));  // nothing outside the output
    return true;
}

Operand make_operand(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides, std::mt19937 &rng) {
    Operand o{make_desc(shape, strides), {}};
    std::uniform_int_distribution<int> values(-4, 4);
    o.memory.resize(static_cast<size_t>(extent(o.desc)));
    for (double &v : o.memory) v = values(rng);
    return o;
}

}  // namespace

TEST_CASE("matmul plan: every combination of row- and column-major operands") {
    std::mt19937 rng(11);
    for (int layouts = 0; layouts < 8; ++layouts)
        for (int pad = 0; pad < 2; ++pad) {
            const int64_t m = 3, k = 4, n = 5;
            Operand a = make_operand({m, k}, strides_for({m, k}, layouts & 1, pad, {}), rng);
            Operand b = make_operand({k, n}, strides_for({k, n}, layouts & 2, pad, {}), rng);
            Operand out{make_desc({m, n}, strides_for({m, n}, layouts & 4, pad, {})), {}};
            CAPTURE(layouts);
            CHECK(check_product(a, b, out));
        }
}

TEST_CASE("matmul plan: batches, broadcast batches and size-1 matrices") {
    std::mt19937 rng(12);
    for (int trial = 0; trial < 400; ++trial) {
        const int batch_rank = static_cast<int>(rng() % 3);
        std::vector<int64_t> batch(static_cast<size_t>(batch_rank));
        for (auto &s : batch) s = 1 + rng() % 3;
        const int64_t m = 1 + rng() % 4, k = 1 + rng() % 4, n = 1 + rng() % 4;
        // Broadcast a or b along all batch axes (a constant stride of 0) or none.
        const int which = static_cast<int>(rng() % 3);  // 0 none, 1 a, 2 b
        std::vector<bool> bc_a(static_cast<size_t>(batch_rank), which == 1),
            bc_b(static_cast<size_t>(batch_rank), which == 2);
        auto shape_of = [&](int64_t rows, int64_t cols) {
            std::vector<int64_t> s = batch;
            s.push_back(rows);
            s.push_back(cols);
            return s;
        };
        Operand a = make_operand(shape_of(m, k), strides_for(shape_of(m, k), rng() % 2, rng() % 2, bc_a), rng);
        Operand b = make_operand(shape_of(k, n), strides_for(shape_of(k, n), rng() % 2, rng() % 2, bc_b), rng);
        Operand out{make_desc(shape_of(m, n), strides_for(shape_of(m, n), rng() % 2, rng() % 2,
                                                          std::vector<bool>(static_cast<size_t>(batch_rank), false))),
                    {}};
        CAPTURE(trial);
        CHECK(check_product(a, b, out));
    }
}

TEST_CASE("matmul plan: layouts cuBLAS cannot read are refused") {
    std::mt19937 rng(13);
    // Every other column: no unit stride on either axis.
    Operand a = make_operand({3, 4}, {8, 2}, rng);
    Operand b = make_operand({4, 2}, {2, 1}, rng);
    Operand out{make_desc({3, 2}, {2, 1}), {}};
    CHECK_FALSE(check_product(a, b, out));
    // A row broadcast down the rows (stride 0, ld 0) is not a BLAS matrix either.
    Operand rows = make_operand({3, 4}, {0, 1}, rng);
    CHECK_FALSE(check_product(rows, b, out));
    // An output whose batches overlap.
    Operand ov{make_desc({2, 3, 2}, {0, 2, 1}), {}};
    Operand a3 = make_operand({2, 3, 4}, {12, 4, 1}, rng);
    Operand b3 = make_operand({2, 4, 2}, {8, 2, 1}, rng);
    CHECK_FALSE(check_product(a3, b3, ov));
}

TEST_CASE("matmul plan: batch axes that do not collapse become an outer loop") {
    std::mt19937 rng(15);
    // Broadcast along the outer batch axis only (attention's [B, 1, L, D] values against
    // [B, H, ...] scores, expanded): one strided-batched call per outer index.
    Operand ab = make_operand({2, 3, 3, 4}, {0, 12, 4, 1}, rng);
    Operand bb = make_operand({2, 3, 4, 2}, {24, 8, 2, 1}, rng);
    Operand ob{make_desc({2, 3, 3, 2}, {18, 6, 2, 1}), {}};
    CHECK(check_product(ab, bb, ob));
    // Broadcast along the inner batch axis only, transposed operand, three batch axes.
    Operand a4 = make_operand({2, 2, 3, 3, 4}, {24, 12, 0, 1, 3}, rng);
    Operand b4 = make_operand({2, 2, 3, 4, 2}, {48, 24, 8, 2, 1}, rng);
    Operand o4{make_desc({2, 2, 3, 3, 2}, {36, 18, 6, 2, 1}), {}};
    CHECK(check_product(a4, b4, o4));
    tf_tensor_desc inputs[2] = {a4.desc, b4.desc};
    tf_op_desc op{sizeof(tf_op_desc), TF_OP_MATMUL, 2, 1, inputs, &o4.desc, nullptr};
    GemmCall call;
    REQUIRE(plan_gemm(op, &call));
    CHECK(call.batch == 3);  // the innermost batch axis, a's stride 0 there
    CHECK(call.outer_count == 4);  // the two outer axes: a's stride 12 is not 0 x 3
    // Random batch broadcasts on each axis independently.
    for (int trial = 0; trial < 300; ++trial) {
        const int batch_rank = 1 + static_cast<int>(rng() % 3);
        std::vector<int64_t> batch(static_cast<size_t>(batch_rank));
        for (auto &s : batch) s = 1 + rng() % 3;
        std::vector<bool> bc_a(static_cast<size_t>(batch_rank)), bc_b(static_cast<size_t>(batch_rank));
        for (int d = 0; d < batch_rank; ++d) {
            bc_a[static_cast<size_t>(d)] = rng() % 3 == 0;
            bc_b[static_cast<size_t>(d)] = !bc_a[static_cast<size_t>(d)] && rng() % 3 == 0;
        }
        auto shape_of = [&](int64_t rows, int64_t cols) {
            std::vector<int64_t> s = batch;
            s.push_back(rows);
            s.push_back(cols);
            return s;
        };
        const int64_t m = 1 + rng() % 3, k = 1 + rng() % 3, n = 1 + rng() % 3;
        Operand a = make_operand(shape_of(m, k), strides_for(shape_of(m, k), rng() % 2, 0, bc_a), rng);
        Operand b = make_operand(shape_of(k, n), strides_for(shape_of(k, n), rng() % 2, 0, bc_b), rng);
        Operand out{make_desc(shape_of(m, n), strides_for(shape_of(m, n), true, 0,
                                                          std::vector<bool>(static_cast<size_t>(batch_rank), false))),
                    {}};
        CAPTURE(trial);
        CHECK(check_product(a, b, out));
    }
}

TEST_CASE("matmul plan: nothing to plan for empty products") {
    std::mt19937 rng(14);
    Operand a = make_operand({3, 1}, {1, 1}, rng);
    a.desc.shape[1] = 0;
    Operand b = make_operand({1, 2}, {2, 1}, rng);
    b.desc.shape[0] = 0;
    Operand out{make_desc({3, 2}, {2, 1}), {}};
    tf_tensor_desc inputs[2] = {a.desc, b.desc};
    tf_op_desc op{sizeof(tf_op_desc), TF_OP_MATMUL, 2, 1, inputs, &out.desc, nullptr};
    GemmCall call;
    CHECK_FALSE(plan_gemm(op, &call));  // K == 0: the plugin writes zeros instead
}
