// tinyfin-bench-dist: the cost of tinyfin-dist against raw MPI, run under mpirun
// (docs/performance.md, "Data parallelism").
//
//   mpirun -np 2 tinyfin-bench-dist allreduce [REPS]
//       allreduce of f32 cpu tensors of 1 KB to 64 MB: raw MPI_Allreduce on the tensor's own
//       memory, Context::all_reduce with the shape check (the default) and without, interleaved
//       in one run; medians and ratios to raw.
//   [mpirun -np N] tinyfin-bench-dist train [STEPS] [BATCH]
//       the Fashion-MNIST CNN training step (tools/bench_train.cpp's model, AdamW) on random
//       images, global batch BATCH (default 64) split over the ranks by DistributedDataParallel;
//       rank 0 prints the median step's images/s of the global batch. One process (no mpirun)
//       trains without DDP: the peer of N ranks x 1 thread is 1 process x N threads.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_train.hpp"
#include "tinyfin/dist.hpp"
#include "tinyfin/extend.hpp"

using namespace tinyfin;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

int bench_allreduce(dist::Context &ctx, int reps) {
    MPI_Comm comm = *static_cast<MPI_Comm *>(ctx.native_communicator());
    dist::Options checked = ctx.options(), unchecked = ctx.options();
    checked.check_shapes = true;
    unchecked.check_shapes = false;
    if (ctx.rank() == 0)
        std::printf("# allreduce, %d ranks, f32 cpu tensors, median of %d, MB/s = bytes / time\n"
                    "%10s %12s %12s %12s %8s %8s\n",
                    ctx.world_size(), reps, "bytes", "raw MB/s", "tinyfin", "unchecked",
                    "ratio", "ratio_u");
    for (int64_t bytes = 1024; bytes <= (64 << 20); bytes *= 4) {
        Tensor t = zeros({bytes / 4});
        void *data = t.host_data();
        int count = static_cast<int>(bytes / 4);
        std::vector<double> raw, tf, tfu;
        int r = bytes >= (16 << 20) ? std::max(5, reps / 5) : reps;
        for (int i = 0; i < r; ++i) {
            // Interleaved, each after a barrier, so load on the machine hits all three alike.
            MPI_Barrier(comm);
            auto t0 = Clock::now();
            MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, comm);
            raw.push_back(seconds_since(t0));
            ctx.set_options(checked);
            MPI_Barrier(comm);
            t0 = Clock::now();
            ctx.all_reduce(t);
            tf.push_back(seconds_since(t0));
            ctx.set_options(unchecked);
            MPI_Barrier(comm);
            t0 = Clock::now();
            ctx.all_reduce(t);
            tfu.push_back(seconds_since(t0));
        }
        // The slowest rank's median: a collective is done when its last rank is.
        double m[3] = {median(raw), median(tf), median(tfu)};
        MPI_Allreduce(MPI_IN_PLACE, m, 3, MPI_DOUBLE, MPI_MAX, comm);
        if (ctx.rank() == 0)
            std::printf("%10lld %12.1f %12.1f %12.1f %8.2f %8.2f\n", static_cast<long long>(bytes),
                        bytes / m[0] / 1e6, bytes / m[1] / 1e6, bytes / m[2] / 1e6, m[0] / m[1],
                        m[0] / m[2]);
    }
    ctx.set_options(checked);
    return 0;
}

int bench_train(dist::Context &ctx, int steps, int64_t batch) {
    auto model = tfbench::make_cnn();
    // One process trains plainly: the peer of N ranks is training without data parallelism.
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    if (ctx.world_size() > 1) ddp = std::make_unique<dist::DistributedDataParallel>(ctx, model);
    optim::AdamW optimizer(model->parameters(), 1e-3);
    // This rank's share of the global batch.
    int64_t local = batch * (ctx.rank() + 1) / ctx.world_size() - batch * ctx.rank() / ctx.world_size();
    std::mt19937 rng(static_cast<unsigned>(ctx.rank()));
    std::normal_distribution<float> pixel(0.0f, 1.0f);
    std::uniform_int_distribution<int64_t> label(0, 9);
    std::vector<float> x(static_cast<std::size_t>(local) * 28 * 28);
    std::vector<int64_t> y(static_cast<std::size_t>(local));
    for (float &v : x) v = pixel(rng);
    for (int64_t &v : y) v = label(rng);
    auto step = [&] {
        Tensor xb = from_host(x.data(), {local, 1, 28, 28}, DType::f32);
        Tensor yb = from_host(y.data(), {local}, DType::i64);
        optimizer.zero_grad();
        if (!ddp) {
            cross_entropy((*model)(xb), yb).backward();
        } else {
            ddp->set_batch_size(local);
            ddp->backward(cross_entropy((*ddp)(xb), yb));
        }
        optimizer.step();
        synchronize();
    };
    for (int i = 0; i < 3; ++i) step();
    std::vector<double> times;
    for (int i = 0; i < steps; ++i) {
        auto t0 = Clock::now();
        step();
        times.push_back(seconds_since(t0));
    }
    double m = median(times);
    if (ctx.rank() == 0)
        std::printf("train: %d rank(s), global batch %lld, median step %.2f ms, %.0f images/s, "
                    "%zu bucket(s)\n", ctx.world_size(), static_cast<long long>(batch), m * 1e3,
                    static_cast<double>(batch) / m, ddp ? ddp->bucket_layout().size() : 0);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    dist::Context ctx(&argc, &argv);
    std::string mode = argc > 1 ? argv[1] : "";
    try {
        if (mode == "allreduce") return bench_allreduce(ctx, argc > 2 ? std::atoi(argv[2]) : 50);
        if (mode == "train")
            return bench_train(ctx, argc > 2 ? std::atoi(argv[2]) : 30, argc > 3 ? std::atoll(argv[3]) : 64);
    } catch (const std::exception &e) {
        ctx.abort(1, e.what());
    }
    if (ctx.rank() == 0)
        std::fprintf(stderr, "usage: [mpirun -np N] tinyfin-bench-dist allreduce [REPS] | train [STEPS] [BATCH]\n");
    return 2;
}
