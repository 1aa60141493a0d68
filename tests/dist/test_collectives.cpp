// Each collective of dist::Context against a reference every rank computes on its own: rank r's
// tensor is a known function of r, so sums, maxima and gathers are known in closed form. Runs on
// the backend TINYFIN_BACKEND selects (cpu: in place; vulkan: staged through host memory).
#include <cmath>

#include "mpi_main.hpp"

using namespace tinyfin;
using dist::ReduceOp;
using dist_test::ctx;

namespace {

// Rank r's values: r * 10 + i + 0.5 for i in 0..n-1.
std::vector<float> values_of(int r, int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(r * 10 + i) + 0.5f;
    return v;
}

// What a sum over ranks 0..w-1 of values_of gives.
std::vector<float> sum_of_ranks(int w, int64_t n) {
    std::vector<float> expected(static_cast<std::size_t>(n), 0.0f);
    for (int r = 0; r < w; ++r) {
        std::vector<float> v = values_of(r, n);
        for (int64_t i = 0; i < n; ++i) expected[i] += v[i];
    }
    return expected;
}

Tensor rank_tensor(int r, const Shape &shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return from_vector(values_of(r, n), shape);
}

void check_values(const Tensor &t, const std::vector<float> &expected) {
    std::vector<float> got = t.to_vector<float>();
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-6));
}

}  // namespace

TEST_CASE("the launcher's environment gives rank, world size and local rank") {
    int w = ctx().world_size();
    CHECK(w == std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
    CHECK(ctx().rank() == std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
    // One machine: local numbering is the world's.
    CHECK(ctx().local_rank() == ctx().rank());
    CHECK(ctx().local_size() == w);
    CHECK(ctx().launcher() == "mpirun");
    CHECK_FALSE(ctx().cuda_aware());  // Debian's Open MPI is built without CUDA
    // NCCL's version exactly when meson found it (never on Debian, which does not package it).
    CHECK((dist::nccl_version() > 0) == (TINYFIN_TEST_HAVE_NCCL != 0));
    CHECK(default_device().backend == std::string(std::getenv("TINYFIN_BACKEND")));
}

TEST_CASE("all_reduce sum, mean, max, min against the closed form") {
    int w = ctx().world_size();
    Shape shape{3, 5};
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min}) {
        Tensor t = rank_tensor(ctx().rank(), shape);
        ctx().all_reduce(t, op);
        std::vector<float> expected(15);
        for (int64_t i = 0; i < 15; ++i) {
            double sum = 0;
            for (int r = 0; r < w; ++r) sum += r * 10 + i + 0.5;
            double value = op == ReduceOp::sum    ? sum
                           : op == ReduceOp::mean ? sum / w
                           : op == ReduceOp::max  ? (w - 1) * 10 + i + 0.5
                                                  : i + 0.5;
            expected[i] = static_cast<float>(value);
        }
        check_values(t, expected);
    }
}

TEST_CASE("all_reduce of integers and of a strided view writes only the view's elements") {
    int w = ctx().world_size();
    Tensor ints = from_vector<int64_t>({ctx().rank() + 1, 1000000000000ll}, {2});
    ctx().all_reduce(ints);
    CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{w * (w + 1) / 2, 1000000000000ll * w});

    // Column 1 of a [3, 2] tensor: a non-contiguous view, staged and written back.
    Tensor base = from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
    Tensor column = base.slice(1, 1, 2);
    ctx().all_reduce(column);
    float f = static_cast<float>(w);
    check_values(base, {1, 2 * f, 3, 4 * f, 5, 6 * f});
}

TEST_CASE("broadcast copies root's tensor to every rank") {
    int w = ctx().world_size();
    for (int root = 0; root < w; ++root) {
        Tensor t = rank_tensor(ctx().rank(), {4});
        ctx().broadcast(t, root);
        check_values(t, values_of(root, 4));
    }
    Tensor t = rank_tensor(0, {2});
    CHECK_THROWS_AS(ctx().broadcast(t, w), ValueError);
}

TEST_CASE("all_gather concatenates along axis 0 in rank order") {
    int w = ctx().world_size();
    Tensor g = ctx().all_gather(rank_tensor(ctx().rank(), {2, 3}));
    CHECK(g.shape() == Shape{2 * w, 3});
    CHECK(g.device() == default_device());
    std::vector<float> expected;
    for (int r = 0; r < w; ++r)
        for (float v : values_of(r, 6)) expected.push_back(v);
    check_values(g, expected);
    // A rank-0 tensor gathers into [world].
    Tensor s = ctx().all_gather(scalar(ctx().rank() * 2.0));
    CHECK(s.shape() == Shape{w});
}

TEST_CASE("reduce_scatter gives each rank its piece of the sum") {
    int w = ctx().world_size();
    Tensor t = rank_tensor(ctx().rank(), {2 * w, 2});
    Tensor piece = ctx().reduce_scatter(t);
    CHECK(piece.shape() == Shape{2, 2});
    std::vector<float> expected(4);
    for (int64_t i = 0; i < 4; ++i) {
        double sum = 0;
        for (int r = 0; r < w; ++r) sum += values_of(r, 4 * w)[4 * ctx().rank() + i];
        expected[i] = static_cast<float>(sum);
    }
    check_values(piece, expected);
    Tensor mean = ctx().reduce_scatter(t, ReduceOp::mean);
    for (float &v : expected) v /= static_cast<float>(w);
    check_values(mean, expected);
    CHECK_THROWS_AS(ctx().reduce_scatter(rank_tensor(0, {2 * w + 1})), ShapeError);
}

TEST_CASE("barrier returns on every rank") {
    ctx().barrier();
    ctx().barrier();
}

TEST_CASE("ranks that pass different shapes or dtypes all get a MismatchError naming both") {
    if (ctx().world_size() < 2) return;
    // The last rank's tensor has one more row.
    int last = ctx().world_size() - 1;
    Tensor t = rank_tensor(ctx().rank(), {ctx().rank() == last ? 3 : 2, 2});
    try {
        ctx().all_reduce(t);
        FAIL("no MismatchError");
    } catch (const dist::MismatchError &e) {
        std::string what = e.what();
        CHECK(what.find("rank 0 calls all_reduce of [2,2] f32") != std::string::npos);
        CHECK(what.find("all_reduce of [3,2] f32") != std::string::npos);
    }
    // Untouched: no data was exchanged.
    check_values(t, values_of(ctx().rank(), t.numel()));

    Tensor d = ctx().rank() == last ? from_vector<int32_t>({1, 2}, {2}) : from_vector<float>({1, 2}, {2});
    CHECK_THROWS_AS(ctx().all_gather(d), dist::MismatchError);
    // Different collectives at the same point are a mismatch too.
    Tensor b = rank_tensor(0, {2});
    if (ctx().rank() == last)
        CHECK_THROWS_AS(ctx().broadcast(b, 0), dist::MismatchError);
    else
        CHECK_THROWS_AS(ctx().all_reduce(b), dist::MismatchError);
    // The communicator is still usable afterwards.
    Tensor ok = rank_tensor(ctx().rank(), {2});
    ctx().all_reduce(ok, ReduceOp::max);
    check_values(ok, values_of(last, 2));
}

TEST_CASE("reductions MPI cannot do are DTypeErrors before any exchange") {
    CHECK_THROWS_AS(ctx().all_reduce(ones({2}, DType::boolean)), DTypeError);
    CHECK_THROWS_AS(ctx().all_reduce(ones({2}, DType::i32), ReduceOp::mean), DTypeError);
    CHECK_THROWS_AS(ctx().reduce_scatter(ones({2 * ctx().world_size()}, DType::i64), ReduceOp::mean), DTypeError);
}

namespace {

// Rank r's f16/bf16 tensor: values with more bits than the dtype keeps, rounded on cpu, then
// moved to the backend under test.
Tensor half_tensor(int r, int64_t n, DType dtype) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = 0.1f * static_cast<float>(r + 1) + 0.37f * static_cast<float>(i) - 1.3f;
    return from_vector(v, {n}, Device{"cpu", 0}).to(dtype).to(default_device());
}

std::vector<float> widen(const Tensor &t) { return t.to(DType::f32).to_vector<float>(); }

// values (exact f32 results) rounded once to dtype by the cpu plugin's cast.
std::vector<float> rounded(const std::vector<float> &values, DType dtype) {
    auto n = static_cast<int64_t>(values.size());
    return from_vector(values, {n}, Device{"cpu", 0}).to(dtype).to(DType::f32).to_vector<float>();
}

}  // namespace

TEST_CASE("f16 and bf16 reduce in f32 and round once; broadcast and gather move their bits") {
    int w = ctx().world_size();
    const int64_t n = 7;
    for (DType dtype : {DType::f16, DType::bf16}) {
        INFO(dtype_name(dtype));
        // The f32 sums of up to 3 values of 8 or 11 significant bits are exact, so the reference
        // is each exact sum rounded once.
        std::vector<float> sum(n, 0.0f), hi(n, -1e30f), lo(n, 1e30f);
        for (int r = 0; r < w; ++r) {
            std::vector<float> v = widen(half_tensor(r, n, dtype));
            for (int64_t i = 0; i < n; ++i) {
                sum[i] += v[i];
                hi[i] = std::max(hi[i], v[i]);
                lo[i] = std::min(lo[i], v[i]);
            }
        }
        std::vector<float> mean(sum);
        for (float &m : mean) m *= 1.0f / static_cast<float>(w);
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min}) {
            Tensor t = half_tensor(ctx().rank(), n, dtype);
            ctx().all_reduce(t, op);
            CHECK(t.dtype() == dtype);
            CHECK(t.device() == default_device());
            const std::vector<float> &exact = op == ReduceOp::sum    ? sum
                                              : op == ReduceOp::mean ? mean
                                              : op == ReduceOp::max  ? hi
                                                                     : lo;
            CHECK(widen(t) == rounded(exact, dtype));
        }
        // A strided view of a half tensor: only its elements change.
        Tensor base = half_tensor(ctx().rank(), 2 * n, dtype).reshape({n, 2});
        std::vector<float> before = widen(base);
        ctx().all_reduce(base.slice(1, 0, 1));
        std::vector<float> after = widen(base);
        for (int64_t i = 0; i < n; ++i) CHECK(after[2 * i + 1] == before[2 * i + 1]);

        for (int root = 0; root < w; ++root) {
            Tensor b = half_tensor(ctx().rank(), n, dtype);
            ctx().broadcast(b, root);
            CHECK(widen(b) == widen(half_tensor(root, n, dtype)));
        }
        Tensor g = ctx().all_gather(half_tensor(ctx().rank(), n, dtype));
        CHECK(g.dtype() == dtype);
        std::vector<float> gathered;
        for (int r = 0; r < w; ++r)
            for (float v : widen(half_tensor(r, n, dtype))) gathered.push_back(v);
        CHECK(widen(g) == gathered);

        // reduce_scatter: rank r keeps elements [2r, 2r+2) of the rounded sum.
        std::vector<float> whole(2 * static_cast<std::size_t>(w), 0.0f);
        for (int r = 0; r < w; ++r) {
            std::vector<float> v = widen(half_tensor(r, 2 * w, dtype));
            for (int i = 0; i < 2 * w; ++i) whole[i] += v[i];
        }
        Tensor piece = ctx().reduce_scatter(half_tensor(ctx().rank(), 2 * w, dtype));
        CHECK(piece.dtype() == dtype);
        CHECK(piece.shape() == Shape{2});
        std::vector<float> mine(whole.begin() + 2 * ctx().rank(), whole.begin() + 2 * ctx().rank() + 2);
        CHECK(widen(piece) == rounded(mine, dtype));
    }
    // An f16 tensor on one rank and an f32 one on another is a mismatch, as for any dtypes.
    if (w > 1) {
        Tensor t = ctx().rank() == w - 1 ? ones({4}, DType::f32) : ones({4}, DType::f16);
        CHECK_THROWS_AS(ctx().all_reduce(t), dist::MismatchError);
    }
}

// The shape check is one allreduce of a record whose payload slot has the size of the previous
// checked call (check.cpp). These cases run with a 64-byte limit, so small tensors cross it.
TEST_CASE("the shape check carries small reductions and still catches every mismatch") {
    int w = ctx().world_size();
    int last = w - 1;
    dist::Options saved = ctx().options();
    dist::Options small = saved;
    small.fuse_bytes = 64;
    ctx().set_options(small);
    auto sum_of = [&](int64_t n) { return sum_of_ranks(w, n); };
    // Sizes in and out of the slot, each repeated (the repeat runs fused when it fits); with the
    // suite's timeout (nonblocking MPI calls) and without one (blocking calls).
    for (double timeout : {saved.timeout_seconds, 0.0}) {
        small.timeout_seconds = timeout;
        ctx().set_options(small);
        for (int64_t n : {1, 3, 3, 16, 16, 17, 17, 40, 5, 5, 16, 3}) {
            INFO("n = " << n << ", timeout " << timeout);
            Tensor t = rank_tensor(ctx().rank(), {n});
            ctx().all_reduce(t);
            check_values(t, sum_of(n));
            Tensor m = rank_tensor(ctx().rank(), {n});
            ctx().all_reduce(m, ReduceOp::max);
            check_values(m, values_of(last, n));
        }
        if (w > 1) {  // a mismatch on the fused path, blocking and not
            Tensor a = rank_tensor(ctx().rank(), {3});
            ctx().all_reduce(a);
            Tensor b = rank_tensor(ctx().rank(), {ctx().rank() == last ? 2 : 3});
            CHECK_THROWS_AS(ctx().all_reduce(b), dist::MismatchError);
            check_values(b, values_of(ctx().rank(), b.numel()));
        }
    }
    small.timeout_seconds = saved.timeout_seconds;
    ctx().set_options(small);
    Tensor ints = from_vector<int64_t>({ctx().rank() + 1, 5}, {2});
    ctx().all_reduce(ints);
    ctx().all_reduce(ints);  // integers never ride in the f32 record
    CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{w * (w * (w + 1) / 2), 5 * w * w});
    Tensor pieces = rank_tensor(ctx().rank(), {2 * w});
    for (int i = 0; i < 2; ++i) {
        Tensor piece = ctx().reduce_scatter(pieces);
        std::vector<float> whole = sum_of(2 * w);
        check_values(piece, {whole[2 * ctx().rank()], whole[2 * ctx().rank() + 1]});
        check_values(pieces, values_of(ctx().rank(), 2 * w));  // the input stays as it was
    }

    if (w > 1) {
        // Each mismatch after two calls of [4,4] f32, which leave a 64-byte slot on every rank.
        auto prime = [&] {
            for (int i = 0; i < 2; ++i) {
                Tensor t = rank_tensor(ctx().rank(), {4, 4});
                ctx().all_reduce(t);
            }
        };
        auto expect_mismatch = [&](const Tensor &t, const char *theirs) {
            try {
                ctx().all_reduce(t);
                FAIL("no MismatchError");
            } catch (const dist::MismatchError &e) {
                std::string what = e.what();
                CHECK(what.find("rank 0 calls all_reduce of [4,4] f32") != std::string::npos);
                CHECK(what.find(theirs) != std::string::npos);
            }
        };
        // The same bytes in another shape.
        prime();
        Tensor t = rank_tensor(ctx().rank(), ctx().rank() == last ? Shape{2, 8} : Shape{4, 4});
        expect_mismatch(t, "all_reduce of [2,8] f32");
        check_values(t, values_of(ctx().rank(), 16));  // untouched
        // The same bytes in another dtype.
        prime();
        Tensor d = ctx().rank() == last ? zeros({4, 4}, DType::i32) : rank_tensor(ctx().rank(), {4, 4});
        expect_mismatch(d, "all_reduce of [4,4] i32");
        // More bytes than the slot on one rank only.
        prime();
        Tensor big = rank_tensor(ctx().rank(), ctx().rank() == last ? Shape{5, 4} : Shape{4, 4});
        expect_mismatch(big, "all_reduce of [5,4] f32");
        check_values(big, values_of(ctx().rank(), big.numel()));
        // Fewer bytes, which would fit.
        prime();
        Tensor few = rank_tensor(ctx().rank(), ctx().rank() == last ? Shape{2} : Shape{4, 4});
        expect_mismatch(few, "all_reduce of [2] f32");
        // Another collective at the same point.
        prime();
        Tensor b = rank_tensor(ctx().rank(), {4, 4});
        if (ctx().rank() == last)
            CHECK_THROWS_AS(ctx().broadcast(b, 0), dist::MismatchError);
        else
            expect_mismatch(b, "broadcast(root 0) of [4,4] f32");
        // Another op.
        prime();
        Tensor o = rank_tensor(ctx().rank(), {4, 4});
        if (ctx().rank() == last)
            CHECK_THROWS_AS(ctx().all_reduce(o, ReduceOp::max), dist::MismatchError);
        else
            expect_mismatch(o, "all_reduce(max) of [4,4] f32");
        prime();
    }
    // Without fusion (fuse_bytes 0) every call checks first and then moves its data.
    dist::Options separate = saved;
    separate.fuse_bytes = 0;
    ctx().set_options(separate);
    for (int i = 0; i < 2; ++i) {
        Tensor t = rank_tensor(ctx().rank(), {3});
        ctx().all_reduce(t);
        check_values(t, sum_of(3));
    }
    ctx().set_options(saved);
}

namespace {
// check_values as one assertion: these tensors have thousands of elements.
void check_all(const Tensor &t, const std::vector<float> &expected) {
    std::vector<float> got = t.to_vector<float>();
    REQUIRE(got.size() == expected.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        if (std::fabs(got[i] - expected[i]) > 1e-6f * std::fabs(expected[i]) + 1e-6f) ++wrong;
    CHECK(wrong == 0);
}
}  // namespace

// In a world of 2, 4, 8... ranks the check is a pairwise exchange whose messages carry at most
// 4000 bytes (dist/check.cpp): a fused sum of more goes as a chain of messages, and chains of
// different lengths on two ranks must still end in a MismatchError on every rank, with no
// message left over for the next call.
TEST_CASE("fused sums in chains of messages, and chains of different lengths") {
    int w = ctx().world_size();
    int last = w - 1;
    dist::Options saved = ctx().options();
    dist::Options wide = saved;
    wide.fuse_bytes = 16u << 10;
    auto sum_of = [&](int64_t n) { return sum_of_ranks(w, n); };
    for (double timeout : {saved.timeout_seconds, 0.0}) {
        wide.timeout_seconds = timeout;
        ctx().set_options(wide);
        // One message (1000 floats are 4000 bytes), two, three, five; and above fuse_bytes.
        for (int64_t n : {1000, 1001, 2500, 4096, 4097}) {
            INFO("n = " << n << ", timeout " << timeout);
            Tensor t = rank_tensor(ctx().rank(), {n});
            ctx().all_reduce(t);
            check_all(t, sum_of(n));
            Tensor m = rank_tensor(ctx().rank(), {n});
            ctx().all_reduce(m, ReduceOp::mean);
            std::vector<float> mean = sum_of(n);
            for (float &v : mean) v /= static_cast<float>(w);
            check_all(m, mean);
        }
        Tensor pieces = rank_tensor(ctx().rank(), {1500 * w});
        Tensor piece = ctx().reduce_scatter(pieces);
        std::vector<float> whole = sum_of(1500 * w);
        check_all(piece,
                  std::vector<float>(whole.begin() + 1500 * ctx().rank(), whole.begin() + 1500 * (ctx().rank() + 1)));
        if (w < 2) continue;
        // The last rank's chain is longer, shorter, or its call does not carry data at all.
        for (auto [mine, theirs] : {std::pair<int64_t, int64_t>{1000, 1001},
                                    {2500, 1000},
                                    {1001, 3},
                                    {3, 2500},
                                    {1000, 5000},
                                    {5000, 1000}}) {
            INFO("others " << mine << ", last rank " << theirs << ", timeout " << timeout);
            Tensor t = rank_tensor(ctx().rank(), {ctx().rank() == last ? theirs : mine});
            try {
                ctx().all_reduce(t);
                FAIL("no MismatchError");
            } catch (const dist::MismatchError &e) {
                std::string what = e.what();
                CHECK(what.find("rank 0 calls all_reduce of [" + std::to_string(mine) + "] f32") != std::string::npos);
                CHECK(what.find("all_reduce of [" + std::to_string(theirs) + "] f32") != std::string::npos);
            }
            check_all(t, values_of(ctx().rank(), t.numel()));  // untouched
            // Nothing is left over: the next call matches on every rank.
            Tensor next = rank_tensor(ctx().rank(), {1001});
            ctx().all_reduce(next);
            check_all(next, sum_of(1001));
        }
    }
    ctx().set_options(saved);
}
