// What a dist::Context holds beyond its public fields: the MPI communicator and the host
// buffers device tensors are staged through. Shared by the files of libtinyfin-dist.
#pragma once

#include <mpi.h>

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
};

// The MPI datatype of a dtype for reductions; throws DTypeError naming op when MPI has none.
MPI_Datatype reduce_type(DType dtype, const char *op);

[[noreturn]] void throw_mpi(int code, const std::string &what);

} // namespace tinyfin::dist
