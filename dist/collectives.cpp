// dist::Context collectives on tensors of any backend: the shape check, host staging, and the
// MPI calls (blocking without a timeout, nonblocking and polled with one).
#include <cstring>

#include "state.hpp"

namespace tinyfin::dist {

namespace {

// Which collective a header describes, so that two ranks in different collectives also differ.
enum class Kind : int64_t { all_reduce = 1, broadcast, all_gather, reduce_scatter };

const char *kind_name(Kind kind) {
    switch (kind) {
    case Kind::all_reduce: return "all_reduce";
    case Kind::broadcast: return "broadcast";
    case Kind::all_gather: return "all_gather";
    case Kind::reduce_scatter: return "reduce_scatter";
    }
    return "collective";
}

// kind, op (or root), dtype, rank, dims 0..5 (dim 5 holds a hash of dims 5.. for rank > 6).
constexpr int header_words = 10;
constexpr int header_dims = 6;

std::vector<int64_t> make_header(Kind kind, int64_t op, const Tensor &t) {
    std::vector<int64_t> h(header_words, 0);
    h[0] = static_cast<int64_t>(kind);
    h[1] = op;
    h[2] = static_cast<int64_t>(t.dtype());
    h[3] = t.rank();
    uint64_t tail = 1469598103934665603ull;
    for (int i = 0; i < t.rank(); ++i) {
        if (i < header_dims - 1 || t.rank() == header_dims) {
            h[4 + i] = t.shape()[i];
            continue;
        }
        tail = (tail ^ static_cast<uint64_t>(t.shape()[i])) * 1099511628211ull;
        h[4 + header_dims - 1] = static_cast<int64_t>(tail);
    }
    return h;
}

std::string describe_header(const int64_t *h) {
    auto kind = static_cast<Kind>(h[0]);
    std::string text = kind_name(kind);
    if (kind == Kind::broadcast) text += "(root " + std::to_string(h[1]) + ")";
    text += " of ";
    Shape shape;
    int rank = static_cast<int>(h[3]);
    bool hashed = rank > header_dims;
    for (int i = 0; i < rank && i < header_dims - (hashed ? 1 : 0); ++i) shape.push_back(h[4 + i]);
    text += shape_str(shape);
    if (hashed) text.insert(text.size() - 1, ", ... (" + std::to_string(rank) + " axes)");
    auto dtype = static_cast<DType>(h[2]);
    text += " ";
    text += h[2] >= 0 && h[2] <= 5 ? dtype_name(dtype) : "?";
    return text;
}

// Reusable storage for tensors MPI cannot read or write in place.
unsigned char *reserve(std::vector<unsigned char> &buffer, std::size_t bytes) {
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer.data();
}

// Host memory holding tensor's elements contiguously: the tensor itself when host-addressable
// and contiguous, else a staging copy (filled from the tensor when read).
struct Host {
    void *data = nullptr;
    bool in_place = false;
};

Host acquire(const Tensor &t, std::vector<unsigned char> &staging, bool read) {
    if (t.is_contiguous()) {
        if (void *p = t.host_data()) return {p, true}; // after the device's queued work
    }
    Host h{reserve(staging, t.nbytes()), false};
    if (read) t.copy_to_host(h.data, t.nbytes());
    return h;
}

// Writes staged results back into the tensor on its device.
void release(const Tensor &t, const Host &h) {
    if (h.in_place || t.nbytes() == 0) return;
    NoGradGuard no_grad; // a parameter may be broadcast: the write is not part of any graph
    if (t.is_contiguous()) {
        copy_from_host(t, h.data, t.nbytes());
        return;
    }
    const_cast<Tensor &>(t).assign_(from_host(h.data, t.shape(), t.dtype(), t.device()));
}

MPI_Op mpi_op(ReduceOp op) {
    switch (op) {
    case ReduceOp::sum: case ReduceOp::mean: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    }
    return MPI_SUM;
}

void check_reducible(const Tensor &t, ReduceOp op, const char *what) {
    if (op == ReduceOp::mean && t.dtype() != DType::f32)
        throw DTypeError(std::string("DTypeError: ") + what + " with mean needs f32, got " +
                         dtype_name(t.dtype()) + "; use sum, or cast to f32 first");
    reduce_type(t.dtype(), what);
}

void scale(void *data, int64_t n, float factor) {
    auto *p = static_cast<float *>(data);
    for (int64_t i = 0; i < n; ++i) p[i] *= factor;
}

int count_of(int64_t n, const char *what) {
    // MPI counts are int: larger tensors would need chunking, which nothing here needs yet.
    if (n > INT32_MAX)
        throw ValueError(std::string("ValueError: ") + what + ": " + std::to_string(n) +
                         " elements exceed MPI's int count; split the tensor");
    return static_cast<int>(n);
}

void require_defined(const Tensor &t, const char *what) {
    if (!t.defined())
        throw DeviceError(std::string("DeviceError: ") + what + ": the tensor is undefined");
}

} // namespace

MPI_Datatype reduce_type(DType dtype, const char *op) {
    switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    default: break;
    }
    throw DTypeError(std::string("DTypeError: ") + op + ": MPI cannot reduce " + dtype_name(dtype) +
                     "; cast to f32 first");
}

namespace {

// Exchanges every rank's header and throws MismatchError on every rank when any two differ.
void check_same(Context &ctx, MPI_Comm comm, Kind kind, int64_t op, const Tensor &t) {
    if (!ctx.options().check_shapes || ctx.world_size() == 1) return;
    std::vector<int64_t> mine = make_header(kind, op, t);
    std::vector<int64_t> all(static_cast<std::size_t>(header_words) * ctx.world_size());
    std::string what = std::string(kind_name(kind)) + " shape check";
    if (ctx.options().timeout_seconds > 0) {
        MPI_Request req;
        ctx.check(MPI_Iallgather(mine.data(), header_words, MPI_INT64_T, all.data(), header_words,
                                 MPI_INT64_T, comm, &req), what);
        ctx.wait_all(&req, 1, what);
    } else {
        ctx.check(MPI_Allgather(mine.data(), header_words, MPI_INT64_T, all.data(), header_words,
                                MPI_INT64_T, comm), what);
    }
    // Every rank compares against rank 0, so all of them see the same verdict.
    const int64_t *first = all.data();
    for (int r = 1; r < ctx.world_size(); ++r) {
        const int64_t *other = all.data() + static_cast<std::size_t>(r) * header_words;
        if (std::memcmp(first, other, header_words * sizeof(int64_t)) == 0) continue;
        throw MismatchError("MismatchError: ranks disagree: rank 0 calls " + describe_header(first) +
                            ", rank " + std::to_string(r) + " calls " + describe_header(other) +
                            " (this is rank " + std::to_string(ctx.rank()) +
                            "); every rank must pass the same shape and dtype");
    }
}

} // namespace

void Context::all_reduce(const Tensor &tensor, ReduceOp op) {
    require_defined(tensor, "all_reduce");
    check_reducible(tensor, op, "all_reduce");
    check_same(*this, state_->comm, Kind::all_reduce, static_cast<int64_t>(op), tensor);
    int count = count_of(tensor.numel(), "all_reduce");
    if (count == 0) return;
    Host h = acquire(tensor, state_->staging, true);
    MPI_Datatype type = reduce_type(tensor.dtype(), "all_reduce");
    if (options_.timeout_seconds > 0) {
        MPI_Request req;
        check(MPI_Iallreduce(MPI_IN_PLACE, h.data, count, type, mpi_op(op), state_->comm, &req),
              "all_reduce");
        wait_all(&req, 1, "all_reduce of " + shape_str(tensor.shape()));
    } else {
        check(MPI_Allreduce(MPI_IN_PLACE, h.data, count, type, mpi_op(op), state_->comm),
              "all_reduce");
    }
    if (op == ReduceOp::mean) scale(h.data, count, 1.0f / static_cast<float>(world_size_));
    release(tensor, h);
}

void Context::broadcast(const Tensor &tensor, int root) {
    require_defined(tensor, "broadcast");
    if (root < 0 || root >= world_size_)
        throw ValueError("ValueError: broadcast: root " + std::to_string(root) +
                         " is not a rank of this world of " + std::to_string(world_size_));
    check_same(*this, state_->comm, Kind::broadcast, root, tensor);
    if (tensor.nbytes() == 0) return;
    int bytes = count_of(static_cast<int64_t>(tensor.nbytes()), "broadcast");
    Host h = acquire(tensor, state_->staging, rank_ == root);
    if (options_.timeout_seconds > 0) {
        MPI_Request req;
        check(MPI_Ibcast(h.data, bytes, MPI_BYTE, root, state_->comm, &req), "broadcast");
        wait_all(&req, 1, "broadcast of " + shape_str(tensor.shape()));
    } else {
        check(MPI_Bcast(h.data, bytes, MPI_BYTE, root, state_->comm), "broadcast");
    }
    if (rank_ != root) release(tensor, h);
}

Tensor Context::all_gather(const Tensor &tensor) {
    require_defined(tensor, "all_gather");
    check_same(*this, state_->comm, Kind::all_gather, 0, tensor);
    Shape shape = tensor.shape();
    if (shape.empty()) shape = {1};
    shape[0] *= world_size_;
    Tensor out = empty(shape, tensor.dtype(), tensor.device());
    if (tensor.nbytes() == 0) return out;
    int bytes = count_of(static_cast<int64_t>(tensor.nbytes()), "all_gather");
    Host in = acquire(tensor, state_->staging, true);
    Host result = acquire(out, state_->receive, false);
    if (options_.timeout_seconds > 0) {
        MPI_Request req;
        check(MPI_Iallgather(in.data, bytes, MPI_BYTE, result.data, bytes, MPI_BYTE, state_->comm,
                             &req), "all_gather");
        wait_all(&req, 1, "all_gather of " + shape_str(tensor.shape()));
    } else {
        check(MPI_Allgather(in.data, bytes, MPI_BYTE, result.data, bytes, MPI_BYTE, state_->comm),
              "all_gather");
    }
    release(out, result);
    return out;
}

Tensor Context::reduce_scatter(const Tensor &tensor, ReduceOp op) {
    require_defined(tensor, "reduce_scatter");
    check_reducible(tensor, op, "reduce_scatter");
    if (tensor.rank() == 0 || tensor.shape()[0] % world_size_ != 0)
        throw ShapeError("ShapeError: reduce_scatter: axis 0 of " + shape_str(tensor.shape()) +
                         " must divide into " + std::to_string(world_size_) + " equal pieces");
    check_same(*this, state_->comm, Kind::reduce_scatter, static_cast<int64_t>(op), tensor);
    Shape shape = tensor.shape();
    shape[0] /= world_size_;
    Tensor out = empty(shape, tensor.dtype(), tensor.device());
    int count = count_of(out.numel(), "reduce_scatter");
    if (count == 0) return out;
    Host in = acquire(tensor, state_->staging, true);
    Host result = acquire(out, state_->receive, false);
    MPI_Datatype type = reduce_type(tensor.dtype(), "reduce_scatter");
    if (options_.timeout_seconds > 0) {
        MPI_Request req;
        check(MPI_Ireduce_scatter_block(in.data, result.data, count, type, mpi_op(op), state_->comm,
                                        &req), "reduce_scatter");
        wait_all(&req, 1, "reduce_scatter of " + shape_str(tensor.shape()));
    } else {
        check(MPI_Reduce_scatter_block(in.data, result.data, count, type, mpi_op(op), state_->comm),
              "reduce_scatter");
    }
    if (op == ReduceOp::mean) scale(result.data, count, 1.0f / static_cast<float>(world_size_));
    release(out, result);
    return out;
}

void Context::barrier() {
    if (options_.timeout_seconds > 0) {
        MPI_Request req;
        check(MPI_Ibarrier(state_->comm, &req), "barrier");
        wait_all(&req, 1, "barrier");
        return;
    }
    check(MPI_Barrier(state_->comm), "barrier");
}

} // namespace tinyfin::dist
