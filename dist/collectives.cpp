// dist::Context collectives on tensors of any backend: host staging, f16/bf16 widened to f32 for
// reductions, and the MPI calls (blocking without a timeout, nonblocking and polled with one).
// The shape check that starts each one (and may carry a small reduction) is check.cpp.
#include <cstring>

#include "state.hpp"

namespace tinyfin::dist {

namespace {

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

Host acquire(const Tensor &t, std::size_t bytes, std::vector<unsigned char> &staging, bool read) {
    if (t.is_contiguous()) {
        if (void *p = t.host_data()) return {p, true};  // after the device's queued work
    }
    Host h{reserve(staging, bytes), false};
    if (read) t.copy_to_host(h.data, bytes);
    return h;
}

Host acquire(const Tensor &t, std::vector<unsigned char> &staging, bool read) {
    return acquire(t, t.nbytes(), staging, read);
}

// Writes staged results back into the tensor on its device.
void release(const Tensor &t, const Host &h) {
    if (h.in_place) return;
    if (t.nbytes() == 0) return;
    NoGradGuard no_grad;  // a parameter may be broadcast: the write is not part of any graph
    if (t.is_contiguous()) {
        copy_from_host(t, h.data, t.nbytes());
        return;
    }
    const_cast<Tensor &>(t).assign_(from_host(h.data, t.shape(), t.dtype(), t.device()));
}

MPI_Op mpi_op(ReduceOp op) {
    switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    }
    return MPI_SUM;
}

bool is_half(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

void check_reducible(DType dtype, ReduceOp op, const char *what) {
    if (op == ReduceOp::mean && dtype != DType::f32 && !is_half(dtype))
        throw DTypeError(std::string("DTypeError: ") + what +
                         " with mean needs a float tensor (f32, "
                         "f16, bf16), got " +
                         dtype_name(dtype) + "; use sum, or cast first");
    if (!is_half(dtype)) reduce_type(dtype, what);
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
    if (!t.defined()) throw DeviceError(std::string("DeviceError: ") + what + ": the tensor is undefined");
}

}  // namespace

MPI_Datatype reduce_type(DType dtype, const char *op) {
    switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    default: break;
    }
    throw DTypeError(std::string("DTypeError: ") + op + ": MPI cannot reduce " + dtype_name(dtype) +
                     "; cast to f32 or i64 first");
}

namespace {

// f16 and bf16: MPI has no such types. The reductions run on an f32 copy (on the tensor's
// device) and the result is cast back once, so each element is the f32 sum (or mean, max, min)
// of the ranks' values rounded once to the tensor's dtype (round to nearest even), the same on
// every rank. declared is the dtype the shape check compares.
Tensor widened(const Tensor &t) {
    NoGradGuard no_grad;
    return t.to(DType::f32);
}

void narrow_into(const Tensor &t, const Tensor &wide) {
    NoGradGuard no_grad;  // like release(): the write is not part of any graph
    const_cast<Tensor &>(t).assign_(wide);
}

// The element count of a shape, from the shape the caller already holds (0 with a zero axis).
int64_t numel_of(const Shape &shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d == 0) return 0;
        n *= d;
    }
    return n;
}

// dtype is t's (f32, i32 or i64), declared the one the shape check compares. The tensor is asked
// for its shape, contiguity and memory once each: at 1 KB tinyfin's own steps are a visible part
// of the call's time (docs/performance.md).
void all_reduce_as(Context &ctx, Context::State &state, const Tensor &t, DType dtype, DType declared, ReduceOp op) {
    const Shape &shape = t.shape();
    int count = count_of(numel_of(shape), "all_reduce");
    std::size_t bytes = static_cast<std::size_t>(count) * dtype_size(dtype);
    Host h = count ? acquire(t, bytes, state.staging, true) : Host{};
    Payload payload{h.data, bytes, op, dtype};
    bool done = check_collective(ctx, state, Kind::all_reduce, static_cast<int64_t>(op), shape, declared,
                                 count ? &payload : nullptr);
    if (count == 0) return;
    if (!done) {
        MPI_Datatype type = reduce_type(dtype, "all_reduce");
        if (ctx.options().timeout_seconds > 0) {
            MPI_Request req;
            ok(MPI_Iallreduce(MPI_IN_PLACE, h.data, count, type, mpi_op(op), state.comm, &req), "all_reduce");
            ctx.wait_all(&req, 1, "all_reduce of " + shape_str(shape));
        } else {
            ok(MPI_Allreduce(MPI_IN_PLACE, h.data, count, type, mpi_op(op), state.comm), "all_reduce");
        }
    }
    if (op == ReduceOp::mean) scale(h.data, count, 1.0f / static_cast<float>(ctx.world_size()));
    release(t, h);
}

Tensor reduce_scatter_as(Context &ctx, Context::State &state, const Tensor &t, DType declared, ReduceOp op) {
    int world = ctx.world_size();
    Shape shape = t.shape();
    shape[0] /= world;
    Tensor out = empty(shape, t.dtype(), t.device());
    int count = count_of(out.numel(), "reduce_scatter");
    // A small input is reduced whole inside the check and each rank keeps its piece.
    Host in = count ? acquire(t, state.staging, true) : Host{};
    Host result = count ? acquire(out, state.receive, false) : Host{};
    Payload payload{in.data,     t.nbytes(),  op,
                    t.dtype(),   result.data, static_cast<std::size_t>(ctx.rank()) * out.nbytes(),
                    out.nbytes()};
    bool done = check_collective(ctx, state, Kind::reduce_scatter, static_cast<int64_t>(op), t.shape(), declared,
                                 count ? &payload : nullptr);
    if (count == 0) return out;
    if (!done) {
        MPI_Datatype type = reduce_type(t.dtype(), "reduce_scatter");
        if (ctx.options().timeout_seconds > 0) {
            MPI_Request req;
            ok(MPI_Ireduce_scatter_block(in.data, result.data, count, type, mpi_op(op), state.comm, &req),
               "reduce_scatter");
            ctx.wait_all(&req, 1, "reduce_scatter of " + shape_str(t.shape()));
        } else {
            ok(MPI_Reduce_scatter_block(in.data, result.data, count, type, mpi_op(op), state.comm), "reduce_scatter");
        }
    }
    if (op == ReduceOp::mean) scale(result.data, count, 1.0f / static_cast<float>(world));
    release(out, result);
    return out;
}

}  // namespace

void Context::all_reduce(const Tensor &tensor, ReduceOp op) {
    require_defined(tensor, "all_reduce");
    DType dtype = tensor.dtype();
    check_reducible(dtype, op, "all_reduce");
    if (!is_half(dtype)) return all_reduce_as(*this, *state_, tensor, dtype, dtype, op);
    Tensor wide = widened(tensor);
    all_reduce_as(*this, *state_, wide, DType::f32, dtype, op);
    narrow_into(tensor, wide);
}

void Context::broadcast(const Tensor &tensor, int root) {
    require_defined(tensor, "broadcast");
    if (root < 0 || root >= world_size_)
        throw ValueError("ValueError: broadcast: root " + std::to_string(root) + " is not a rank of this world of " +
                         std::to_string(world_size_));
    check_collective(*this, *state_, Kind::broadcast, root, tensor.shape(), tensor.dtype(), nullptr);
    if (tensor.nbytes() == 0) return;
    int bytes = count_of(static_cast<int64_t>(tensor.nbytes()), "broadcast");
    Host h = acquire(tensor, state_->staging, rank_ == root);
    if (options_.timeout_seconds > 0) {
        MPI_Request req;
        ok(MPI_Ibcast(h.data, bytes, MPI_BYTE, root, state_->comm, &req), "broadcast");
        wait_all(&req, 1, "broadcast of " + shape_str(tensor.shape()));
    } else {
        ok(MPI_Bcast(h.data, bytes, MPI_BYTE, root, state_->comm), "broadcast");
    }
    if (rank_ != root) release(tensor, h);
}

Tensor Context::all_gather(const Tensor &tensor) {
    require_defined(tensor, "all_gather");
    check_collective(*this, *state_, Kind::all_gather, 0, tensor.shape(), tensor.dtype(), nullptr);
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
        ok(MPI_Iallgather(in.data, bytes, MPI_BYTE, result.data, bytes, MPI_BYTE, state_->comm, &req), "all_gather");
        wait_all(&req, 1, "all_gather of " + shape_str(tensor.shape()));
    } else {
        ok(MPI_Allgather(in.data, bytes, MPI_BYTE, result.data, bytes, MPI_BYTE, state_->comm), "all_gather");
    }
    release(out, result);
    return out;
}

Tensor Context::reduce_scatter(const Tensor &tensor, ReduceOp op) {
    require_defined(tensor, "reduce_scatter");
    check_reducible(tensor.dtype(), op, "reduce_scatter");
    if (tensor.rank() == 0 || tensor.shape()[0] % world_size_ != 0)
        throw ShapeError("ShapeError: reduce_scatter: axis 0 of " + shape_str(tensor.shape()) + " must divide into " +
                         std::to_string(world_size_) + " equal pieces");
    if (!is_half(tensor.dtype())) return reduce_scatter_as(*this, *state_, tensor, tensor.dtype(), op);
    Tensor piece = reduce_scatter_as(*this, *state_, widened(tensor), tensor.dtype(), op);
    NoGradGuard no_grad;
    return piece.to(tensor.dtype());
}

void Context::barrier() {
    if (options_.timeout_seconds > 0) {
        MPI_Request req;
        ok(MPI_Ibarrier(state_->comm, &req), "barrier");
        wait_all(&req, 1, "barrier");
        return;
    }
    ok(MPI_Barrier(state_->comm), "barrier");
}

}  // namespace tinyfin::dist
