// tinyfin-dist — data-parallel training over MPI (libtinyfin-dist.so; docs/distributed.md).
//
// A separate library so that libtinyfin.so itself never depends on MPI: a program that trains
// on several processes links tinyfin-dist (pkg-config tinyfin-dist) and starts under a launcher
// (mpirun, Slurm's srun). Everything here is collective: every rank makes the same calls in the
// same order, as with MPI itself. Errors are exceptions derived from tinyfin::Error; a rank that
// fails should call Context::abort (or let the exception leave main) so that the launcher stops
// the other ranks instead of leaving them waiting (docs/distributed.md, "When a rank fails").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tinyfin/nn.hpp"
#include "tinyfin/tinyfin.hpp"

namespace tinyfin::dist {

// ---- Errors -----------------------------------------------------------------------------

// Base of the errors below; also MPI failures (a peer's connection lost, MPI not initialised).
class DistError : public Error {
public:
    using Error::Error;
};
// The ranks passed tensors of different shapes or dtypes (or models of different layouts) to one
// collective; every rank throws it, naming its own tensor and the first rank that differs.
class MismatchError : public DistError {
public:
    using DistError::DistError;
};
// A collective did not complete within Options::timeout_seconds: another rank is not taking
// part (it failed, hangs, or called a different collective). Only Context::abort is safe after.
class TimeoutError : public DistError {
public:
    using DistError::DistError;
};

// ---- Context ----------------------------------------------------------------------------

enum class ReduceOp { sum, mean, max, min };

struct Options {
    // Seconds a collective may wait for the other ranks before throwing TimeoutError; 0 waits
    // forever (blocking MPI calls, the fastest). The environment variable TINYFIN_DIST_TIMEOUT
    // overrides it.
    double timeout_seconds = 0;
    // Verify each collective's shape and dtype across ranks, so that a mismatch is a
    // MismatchError rather than wrong results or memory corruption. With 2, 4, 8... ranks the
    // check is a pairwise exchange that carries small f32 sums itself; otherwise one small
    // allreduce that carries them when the call repeats the previous checked call's size
    // (docs/distributed.md, "Shape check"). Larger calls check first and then move their data.
    // DistributedDataParallel checks its layout once instead. TINYFIN_DIST_CHECK=0 turns it off.
    bool check_shapes = true;
    // Largest f32 sum or mean (in bytes) carried by the shape check itself; every rank must use
    // the same value. TINYFIN_DIST_FUSE_BYTES overrides it.
    std::size_t fuse_bytes = 16u << 10;
};

// MPI for this process: initialised by the constructor from the launcher's environment,
// finalised by the destructor. One Context per process (MPI cannot be initialised twice).
// The destructor calls MPI_Abort instead of MPI_Finalize when an exception is unwinding through
// it, so the other ranks stop rather than wait in a collective for this one.
class Context {
public:
    explicit Context(int *argc = nullptr, char ***argv = nullptr, Options options = {});
    ~Context();
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;

    int rank() const { return rank_; }
    int world_size() const { return world_size_; }
    // Rank among the processes of this machine (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, or a
    // shared-memory split of the world): pick the GPU with it.
    int local_rank() const { return local_rank_; }
    int local_size() const { return local_size_; }
    // "mpirun", "slurm" or "singleton" (started without a launcher: one rank).
    const std::string &launcher() const { return launcher_; }
    // Whether the MPI library reads CUDA device memory directly (MPIX_Query_cuda_support where
    // Open MPI provides it; false otherwise). Device tensors are staged through host memory
    // either way today: see docs/distributed.md.
    bool cuda_aware() const { return cuda_aware_; }
    const Options &options() const { return options_; }
    // Changes the options for the following calls; every rank must make the same change at the
    // same point (tinyfin-bench-dist measures with and without the shape check in one run).
    void set_options(const Options &options) { options_ = options; }

    // Collectives. Each takes the tensor of this rank; all ranks must pass tensors of one dtype
    // and shape (MismatchError otherwise, when check_shapes). Host-addressable contiguous
    // tensors are used in place; others (device memory, strided views) are staged through a
    // reusable host buffer and written back on their device.

    // Every rank's tensor becomes the elementwise reduction of all of them: f32, i32, i64, and
    // f16/bf16 reduced in f32 and rounded once to their dtype; mean only for the float dtypes.
    void all_reduce(const Tensor &tensor, ReduceOp op = ReduceOp::sum);
    // Every rank's tensor becomes root's.
    void broadcast(const Tensor &tensor, int root = 0);
    // The ranks' tensors concatenated along axis 0, in rank order (a rank-0 tensor becomes
    // [world_size]); a new tensor on the input's device.
    Tensor all_gather(const Tensor &tensor);
    // Reduces the ranks' tensors and gives rank r the r-th of world_size equal pieces along
    // axis 0 (whose size must divide by world_size); a new tensor on the input's device.
    Tensor reduce_scatter(const Tensor &tensor, ReduceOp op = ReduceOp::sum);
    void barrier();

    // Prints message (prefixed with this rank) to stderr and stops every rank of the job with
    // exit status code (MPI_Abort). For a rank that cannot go on.
    [[noreturn]] void abort(int code, const std::string &message);

    // For DistributedDataParallel and tools: the MPI communicator (an MPI_Comm) of the world.
    void *native_communicator() const;
    // Waits for nonblocking requests (MPI_Request *) honouring the timeout; what names the
    // operation in a TimeoutError. statuses (MPI_Status *, count of them) receives their
    // statuses when not null.
    void wait_all(void *requests, int count, const std::string &what, void *statuses = nullptr);
    // Throws DistError naming what when an MPI call returned code.
    void check(int code, const std::string &what) const;

    struct State;

private:
    std::unique_ptr<State> state_;
    Options options_;
    int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1;
    std::string launcher_;
    bool cuda_aware_ = false;
    int uncaught_at_start_ = 0;
};

// ---- DistributedDataParallel --------------------------------------------------------------

struct DDPOptions {
    // Gradients are averaged in buckets of about this many bytes, each allreduced as soon as
    // its last gradient is ready in backward (PyTorch's default: 25 MB).
    std::size_t bucket_bytes = 25u << 20;
    // Copy rank 0's parameters to every rank at construction.
    bool broadcast_parameters = true;
};

// Wraps a module for data-parallel training: forward is the module's; during backward each
// parameter's gradient is copied into its bucket as soon as it is final (a post-accumulate grad
// hook), and a full bucket starts a nonblocking allreduce, so communication overlaps the rest of
// backward. synchronize_gradients() (or backward()) finishes the exchange and leaves every rank
// with the same averaged gradients before optimizer.step().
//
// The average is weighted by the sample counts given to set_batch_size, so a global batch split
// unevenly (the last batch of an epoch, a rank with no samples at all) gives the gradient of the
// mean loss over the whole batch, as one process would compute it. Build it after moving the
// module to its device (Module::to makes new parameters).
class DistributedDataParallel : public nn::Module {
public:
    DistributedDataParallel(Context &context, std::shared_ptr<nn::Module> module, DDPOptions options = {});
    ~DistributedDataParallel() override;

    Tensor forward(const Tensor &x) override { return module_->forward(x); }
    std::string describe() const override;
    nn::Module &module() const { return *module_; }

    // The number of samples this rank's loss averages over in the coming backward (0 for a rank
    // that has none this step: it skips forward and backward and calls synchronize_gradients
    // alone). Without it every rank weighs the same.
    void set_batch_size(int64_t local_samples);
    // Finishes the gradient exchange: starts buckets not started in backward (parameters unused
    // this step contribute zeros), waits for all, and writes the weighted average into every
    // parameter's grad(). A no-op inside no_sync().
    void synchronize_gradients();
    // loss.backward() then synchronize_gradients().
    void backward(const Tensor &loss);

    // While the returned guard lives, backward only accumulates local gradients (gradient
    // accumulation); the first backward after it averages the accumulated sum.
    class NoSync {
    public:
        explicit NoSync(DistributedDataParallel &ddp);
        ~NoSync();
        NoSync(const NoSync &) = delete;
        NoSync &operator=(const NoSync &) = delete;

    private:
        DistributedDataParallel &ddp_;
        bool previous_;
    };
    NoSync no_sync() { return NoSync(*this); }

    // Bucket layout, for tests and docs: parameter indices (into parameters()) of each bucket,
    // in the order buckets are reduced.
    std::vector<std::vector<std::size_t>> bucket_layout() const;
    // Buckets whose allreduce was started inside backward (by the hooks) in the last exchange.
    std::size_t buckets_started_in_backward() const { return started_in_backward_; }

    struct Bucket;

private:
    void on_gradient(std::size_t param);
    void stage(std::size_t param);
    void launch_ready();

    Context &context_;
    std::shared_ptr<nn::Module> module_;
    DDPOptions options_;
    std::vector<Tensor> params_;
    std::vector<uint64_t> hook_ids_;
    std::vector<std::unique_ptr<Bucket>> buckets_;
    std::vector<std::pair<std::size_t, std::size_t>> slot_of_;  // param -> (bucket, slot)
    std::size_t next_launch_ = 0;
    std::size_t started_in_backward_ = 0;
    double weight_ = 1;
    bool syncing_ = true;
};

// ---- ShardedSampler ---------------------------------------------------------------------

// Splits each epoch's batches over the ranks. Every epoch the dataset's indices are shuffled by
// one permutation common to all ranks (nn::permutation of seed and the epoch, as
// examples/fashion_mnist shuffles, so N ranks see the batches one process would), cut into
// global batches of global_batch, and rank r reads only its own contiguous slice of each: sizes
// differ by at most one, a rank's slice may be empty in a short last batch, and every rank has the
// same number of steps. The union of the slices of one step is exactly that global batch.
class ShardedSampler {
public:
    ShardedSampler(int64_t dataset_size, int64_t global_batch, int world_size, int rank, uint64_t seed,
                   bool shuffle = true);
    ShardedSampler(const Context &context, int64_t dataset_size, int64_t global_batch, uint64_t seed,
                   bool shuffle = true)
        : ShardedSampler(dataset_size, global_batch, context.world_size(), context.rank(), seed, shuffle) {}

    // Reshuffles for epoch (epochs count from 1 in the example; any integer works).
    void set_epoch(int epoch);
    int64_t steps() const;
    // This rank's sample indices of step (0 <= step < steps()); may be empty.
    std::vector<int64_t> batch(int64_t step) const;
    // Samples of the whole global batch of step (for a single-process reference).
    int64_t global_batch_size(int64_t step) const;
    // This rank's indices over the whole epoch.
    int64_t shard_size() const;

private:
    int64_t n_, global_batch_;
    int world_, rank_;
    uint64_t seed_;
    bool shuffle_;
    std::vector<int64_t> order_;
};

// NCCL at build time: the version of the NCCL library libtinyfin-dist was built against
// (ncclGetVersion, e.g. 22105 for 2.21.5) when meson found libnccl and nccl.h, else 0. No
// collective runs on NCCL yet: every collective uses MPI (docs/distributed.md, "Mapping to NCCL").
int nccl_version();

// FNV-1a 64 of every parameter's bytes in order (the examples print it as "weights checksum").
uint64_t checksum(const std::vector<Tensor> &tensors);

}  // namespace tinyfin::dist
