// What a dist::Context holds beyond its public fields: the MPI communicator and the host
// buffers device tensors are staged through. Shared by the files of libtinyfin-dist.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tinyfin/dist.hpp"
#include "tinyfin/extend.hpp"

namespace tinyfin::dist {

struct Context::State {
    // A duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN: failures become exceptions, and
    // tinyfin's traffic never matches a user's own messages on MPI_COMM_WORLD.
    MPI_Comm comm = MPI_COMM_NULL;
    // Reused across calls, grown as needed: staging for tensors MPI cannot use in place.
    std::vector<unsigned char> staging;
    std::vector<unsigned char> receive;

    // The shape check's record (check.cpp) and the floats of its payload slot: the same on every
    // rank, because every rank derives it from the last signature they all verified.
    std::vector<float> record;
    std::size_t slot = 0;

    // The pairwise check (check.cpp) instead of the record, in a world of a power of two ranks
    // whose MPI has 31-bit tags: set once by the Context, the same on every rank.
    bool pairwise = false;
    // The last signature the check hashed and its fingerprint (check.cpp).
    std::array<int64_t, 10> fingerprinted{};
    uint64_t fingerprint = 0;
    bool has_fingerprint = false;

    // Its reusable requests, statuses, incoming messages and partial sums (ranks beyond two).
    std::vector<MPI_Request> requests;
    std::vector<MPI_Status> statuses;
    std::vector<unsigned char> incoming;
    std::vector<unsigned char> partial;
};

// Decides State::pairwise from the world size and MPI's tag limit (after the communicator exists).
void init_check(Context::State &state, int world);

// The MPI datatype of a dtype for reductions; throws DTypeError naming op when MPI has none.
MPI_Datatype reduce_type(DType dtype, const char *op);

// Which collective a check describes, so that two ranks in different collectives also differ.
enum class Kind : int64_t { all_reduce = 1, broadcast, all_gather, reduce_scatter };

// The data of a reducing collective, which rides inside its shape check when it is an f32 sum or
// mean (f16 and bf16 arrive widened to f32) that fits the record (Options::fuse_bytes).
struct Payload {
    void *data = nullptr;
    std::size_t bytes = 0;
    ReduceOp op = ReduceOp::sum;
    DType dtype = DType::f32;
    // Where the result goes: without out, back into data; with it, out_bytes of the result from
    // out_offset (reduce_scatter keeps only its piece and leaves its input alone).
    void *out = nullptr;
    std::size_t out_offset = 0, out_bytes = 0;
};

// Verifies that every rank calls the same collective (kind, op or root) on a tensor of the same
// shape and declared dtype; throws MismatchError on every rank otherwise (leaving the tensors
// untouched). With a payload that can ride in the record and fits its agreed slot, the same MPI
// call also reduces it: returns true and the result is in place. Returns false when the caller must move the data itself
// (including when the check is off or the world has one rank).
bool check_collective(Context &ctx, Context::State &state, Kind kind, int64_t op_or_root, const Shape &shape,
                      DType declared, Payload *payload);

[[noreturn]] void throw_mpi(int code, const std::string &what);

// Throws DistError naming what when an MPI call failed; unlike Context::check it builds no
// string when the call succeeded (a small collective's path makes several such calls).
inline void ok(int code, const char *what) {
    if (code != MPI_SUCCESS) [[unlikely]]
        throw_mpi(code, what);
}

}  // namespace tinyfin::dist
