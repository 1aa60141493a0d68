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

} // namespace

TEST_CASE("the launcher's environment gives rank, world size and local rank") {
    int w = ctx().world_size();
    CHECK(w == std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
    CHECK(ctx().rank() == std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
    // One machine: local numbering is the world's.
    CHECK(ctx().local_rank() == ctx().rank());
    CHECK(ctx().local_size() == w);
    CHECK(ctx().launcher() == "mpirun");
    CHECK_FALSE(ctx().cuda_aware()); // Debian's Open MPI is built without CUDA
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
            double value = op == ReduceOp::sum ? sum
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
    if (ctx().rank() == last) CHECK_THROWS_AS(ctx().broadcast(b, 0), dist::MismatchError);
    else CHECK_THROWS_AS(ctx().all_reduce(b), dist::MismatchError);
    // The communicator is still usable afterwards.
    Tensor ok = rank_tensor(ctx().rank(), {2});
    ctx().all_reduce(ok, ReduceOp::max);
    check_values(ok, values_of(last, 2));
}

TEST_CASE("reductions MPI cannot do are DTypeErrors before any exchange") {
    CHECK_THROWS_AS(ctx().all_reduce(ones({2}, DType::f16)), DTypeError);
    CHECK_THROWS_AS(ctx().all_reduce(ones({2}, DType::i32), ReduceOp::mean), DTypeError);
    // Broadcast and gather move bytes: any dtype.
    Tensor h = ones({2}, DType::f16);
    ctx().broadcast(h, 0);
    CHECK(ctx().all_gather(h).shape() == Shape{2 * ctx().world_size()});
}
