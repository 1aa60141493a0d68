// tinyfin-bench-dist: the cost of tinyfin-dist against raw MPI, run under mpirun
// (docs/performance.md, "Data parallelism").
//
//   mpirun -np 2 tinyfin-bench-dist allreduce [REPS] [MAX_BYTES]
//       allreduce of f32 cpu tensors of 1 KB to 64 MB: raw MPI_Allreduce on the tensor's own
//       memory, Context::all_reduce with the shape check (the default: fused with the data up to
//       Options::fuse_bytes), with the check as a separate collective, and without it,
//       interleaved in one run; medians and ratios to raw. Sizes up to MAX_BYTES (64 MB).
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
#include <functional>
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

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int bench_allreduce(dist::Context &ctx, int reps, int64_t max_bytes) {
    MPI_Comm comm = *static_cast<MPI_Comm *>(ctx.native_communicator());
    // checked: the default (the check fused with the data up to fuse_bytes); separate: the check
    // as its own collective before the data (fuse_bytes 0); unchecked: no check at all.
    dist::Options checked = ctx.options(), separate = ctx.options(), unchecked = ctx.options();
    checked.check_shapes = separate.check_shapes = true;
    separate.fuse_bytes = 0;
    unchecked.check_shapes = false;
    if (ctx.rank() == 0)
        std::printf("# allreduce, %d ranks, f32 cpu tensors, median of %d, MB/s = bytes / time, "
                    "fuse_bytes %zu\n%10s %10s %10s %6s %10s %6s %10s %6s\n",
                    ctx.world_size(), reps, checked.fuse_bytes, "bytes", "raw MB/s", "tinyfin", "ratio", "separate",
                    "ratio", "unchecked", "ratio");
    for (int64_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
        Tensor t = zeros({bytes / 4});
        void *data = t.host_data();
        int count = static_cast<int>(bytes / 4);
        std::vector<double> raw, tf, tfs, tfu;
        // From 16 MB a call takes tens of milliseconds: 20 repetitions (5 left those rows to the
        // load of a shared machine, docs/performance.md).
        int r = bytes >= (16 << 20) ? std::min(20, reps) : reps;
        auto timed = [&](std::vector<double> &into, auto &&call) {
            MPI_Barrier(comm);
            auto t0 = Clock::now();
            call();
            into.push_back(seconds_since(t0));
        };
        // Each tinyfin call is timed after an untimed one with the same options: the record's
        // slot is the previous checked call's size (dist/check.cpp), so the untimed call leaves
        // the slot that a loop of such calls has: none for separate, this size for checked.
        auto with = [&](const dist::Options &options, std::vector<double> &into) {
            ctx.set_options(options);
            ctx.all_reduce(t);
            timed(into, [&] { ctx.all_reduce(t); });
        };
        std::function<void()> variants[] = {
            [&] { timed(raw, [&] { MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, comm); }); },
            [&] { with(separate, tfs); },
            [&] { with(checked, tf); },
            [&] { with(unchecked, tfu); },
        };
        for (int i = 0; i < r; ++i) {
            // Interleaved in a rotating order, each after a barrier, so that load on the machine
            // and the order of calls hit all of them alike.
            for (int k = 0; k < 4; ++k) variants[(i + k) % 4]();
        }
        // The slowest rank's median: a collective is done when its last rank is.
        double m[4] = {median(raw), median(tf), median(tfs), median(tfu)};
        MPI_Allreduce(MPI_IN_PLACE, m, 4, MPI_DOUBLE, MPI_MAX, comm);
        if (ctx.rank() == 0)
            std::printf("%10lld %10.1f %10.1f %6.2f %10.1f %6.2f %10.1f %6.2f\n", static_cast<long long>(bytes),
                        bytes / m[0] / 1e6, bytes / m[1] / 1e6, m[0] / m[1], bytes / m[2] / 1e6, m[0] / m[2],
                        bytes / m[3] / 1e6, m[0] / m[3]);
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
                    "%zu bucket(s)\n",
                    ctx.world_size(), static_cast<long long>(batch), m * 1e3, static_cast<double>(batch) / m,
                    ddp ? ddp->bucket_layout().size() : 0);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    dist::Context ctx(&argc, &argv);
    std::string mode = argc > 1 ? argv[1] : "";
    try {
        if (mode == "allreduce")
            return bench_allreduce(ctx, argc > 2 ? std::atoi(argv[2]) : 50,
                                   argc > 3 ? std::atoll(argv[3]) : int64_t{64} << 20);
        if (mode == "train")
            return bench_train(ctx, argc > 2 ? std::atoi(argv[2]) : 30, argc > 3 ? std::atoll(argv[3]) : 64);
    } catch (const std::exception &e) {
        ctx.abort(1, e.what());
    }
    if (ctx.rank() == 0)
        std::fprintf(stderr,
                     "usage: [mpirun -np N] tinyfin-bench-dist allreduce [REPS] [MAX_BYTES] | train [STEPS] [BATCH]\n");
    return 2;
}
