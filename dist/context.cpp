// dist::Context: MPI initialisation from the launcher's environment, finalisation, abort, and
// waiting with a timeout.
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_CUDA_AWARE_SUPPORT and MPIX_Query_cuda_support
#endif

#ifdef TINYFIN_DIST_NCCL
#include <nccl.h>  // only for nccl_version(): see docs/distributed.md, "Mapping to NCCL"
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

#include "state.hpp"

namespace tinyfin::dist {

namespace {

// Whether a Context is alive (MPI allows one initialisation per process).
bool context_alive = false;

// secure_getenv like the core (log.hpp): a setuid program ignores the environment.
double env_double(const char *name, double fallback) {
    const char *text = secure_getenv(name);
    if (!text || !*text) return fallback;
    char *end = nullptr;
    double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || v < 0)
        throw DistError(std::string("DistError: ") + name + "='" + text + "' is not a number of seconds >= 0");
    return v;
}

int env_int(const char *name, int fallback) {
    const char *text = secure_getenv(name);
    if (!text || !*text) return fallback;
    char *end = nullptr;
    long v = std::strtol(text, &end, 10);
    return end != text && *end == '\0' && v >= 0 ? static_cast<int>(v) : fallback;
}

}  // namespace

[[noreturn]] void throw_mpi(int code, const std::string &what) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
    throw DistError("DistError: " + what + " failed: " + std::string(text, length) +
                    " (another rank may have failed; see its error above)");
}

Context::Context(int *argc, char ***argv, Options options)
    : state_(std::make_unique<State>()), options_(options), uncaught_at_start_(std::uncaught_exceptions()) {
    if (context_alive)
        throw DistError("DistError: a dist::Context already exists in this process; MPI is "
                        "initialised once per process, so share that one");
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        throw DistError("DistError: MPI was already finalised in this process (a previous "
                        "dist::Context ended); create one Context for the whole program");
    options_.timeout_seconds = env_double("TINYFIN_DIST_TIMEOUT", options_.timeout_seconds);
    options_.check_shapes = env_int("TINYFIN_DIST_CHECK", options_.check_shapes ? 1 : 0) != 0;
    options_.fuse_bytes =
        static_cast<std::size_t>(env_int("TINYFIN_DIST_FUSE_BYTES", static_cast<int>(options_.fuse_bytes)));

    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        // Funneled: tinyfin calls MPI from the thread that runs backward and the collectives;
        // the cpu plugin's worker threads never do.
        int provided = 0;
        int code = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (code != MPI_SUCCESS) throw DistError("DistError: MPI_Init_thread failed");
    }
    context_alive = true;
    MPI_Comm_dup(MPI_COMM_WORLD, &state_->comm);
    MPI_Comm_set_errhandler(state_->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(state_->comm, &rank_);
    MPI_Comm_size(state_->comm, &world_size_);
    init_check(*state_, world_size_);

    // The launcher's own numbering first (what its GPU binding options use), else the rank among
    // the processes that share memory with this one.
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(state_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
    if (secure_getenv("OMPI_COMM_WORLD_SIZE")) {
        launcher_ = "mpirun";
        local_rank_ = env_int("OMPI_COMM_WORLD_LOCAL_RANK", local_rank_);
        local_size_ = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", local_size_);
    } else if (secure_getenv("SLURM_PROCID")) {
        launcher_ = "slurm";
        local_rank_ = env_int("SLURM_LOCALID", local_rank_);
    } else {
        launcher_ = world_size_ > 1 ? "mpirun" : "singleton";
    }
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    cuda_aware_ = MPIX_Query_cuda_support() == 1;
#endif
}

Context::~Context() {
    context_alive = false;
    if (std::uncaught_exceptions() > uncaught_at_start_) {
        // MPI_Finalize would wait for ranks that are themselves waiting for this one.
        std::fprintf(stderr,
                     "tinyfin-dist: rank %d: an exception is leaving the program; "
                     "aborting every rank\n",
                     rank_);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (state_->comm != MPI_COMM_NULL) MPI_Comm_free(&state_->comm);
    MPI_Finalize();
}

void Context::abort(int code, const std::string &message) {
    std::fprintf(stderr, "tinyfin-dist: rank %d of %d: %s; aborting every rank\n", rank_, world_size_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
    std::_Exit(code == 0 ? 1 : code);  // MPI_Abort does not return; this is for the compiler
}

void *Context::native_communicator() const { return &state_->comm; }

void Context::check(int code, const std::string &what) const {
    if (code != MPI_SUCCESS) throw_mpi(code, what);
}

void Context::wait_all(void *requests, int count, const std::string &what, void *statuses) {
    auto *reqs = static_cast<MPI_Request *>(requests);
    auto *stats = statuses ? static_cast<MPI_Status *>(statuses) : MPI_STATUSES_IGNORE;
    if (options_.timeout_seconds <= 0) {
        check(MPI_Waitall(count, reqs, stats), what);
        return;
    }
    using Clock = std::chrono::steady_clock;
    auto deadline = Clock::now() + std::chrono::duration<double>(options_.timeout_seconds);
    int spins = 0;
    for (;;) {
        int done = 0;
        check(MPI_Testall(count, reqs, &done, stats), what);
        if (done) return;
        if (Clock::now() > deadline) {
            char text[64];
            std::snprintf(text, sizeof text, "%g", options_.timeout_seconds);
            throw TimeoutError("TimeoutError: " + what + " on rank " + std::to_string(rank_) +
                               " did not complete within " + text +
                               " s (TINYFIN_DIST_TIMEOUT): another rank is not taking part (it "
                               "failed, hangs, or called a different collective); abort the job");
        }
        // Spin briefly for latency, then yield the core to the ranks we are waiting for.
        if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

int nccl_version() {
#ifdef TINYFIN_DIST_NCCL
    int version = 0;
    return ncclGetVersion(&version) == ncclSuccess ? version : 0;
#else
    return 0;
#endif
}

}  // namespace tinyfin::dist
