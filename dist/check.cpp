// The cross-rank shape check of dist::Context's collectives, fused with small reductions.
//
// Every checked collective starts with one MPI_Allreduce of a record: a header (a fingerprint of
// the call's signature, its element count, op and dtype) followed by a payload slot. The
// record's MPI_Op keeps a header only where both operands' headers agree and marks a mismatch
// otherwise, so after the call every rank knows whether all ranks agree. When this call's data
// fits the slot, the same MPI_Op also reduces it in the record, and the check costs nothing
// beyond the header's bytes: one collective instead of two (docs/performance.md).
//
// The slot size is what makes this safe: MPI requires every rank to pass the same count, and a
// rank cannot know the other ranks' tensors before the check. So the slot is the payload size
// of the previous checked call, which every rank verified to be the same, or 0 after a
// mismatch, a non-reducing collective or a payload above Options::fuse_bytes. Repeating a call
// (a training loop's scalar allreduce) then runs fused from the second time on; a call that
// does not fit sends the header (and the unused slot), learns that everyone agrees, and then
// moves its data in a second collective.
#include <array>
#include <cstring>

#include "state.hpp"

namespace tinyfin::dist {

namespace {

const char *kind_name(Kind kind) {
    switch (kind) {
    case Kind::all_reduce: return "all_reduce";
    case Kind::broadcast: return "broadcast";
    case Kind::all_gather: return "all_gather";
    case Kind::reduce_scatter: return "reduce_scatter";
    }
    return "collective";
}

// The signature that the mismatch message describes: kind, op (or root), dtype, rank, dims
// 0..5 (dim 5 holds a hash of dims 5.. for rank > 6).
constexpr int signature_words = 10;
constexpr int signature_dims = 6;
using Signature = std::array<int64_t, signature_words>;

Signature make_signature(Kind kind, int64_t op, DType dtype, const Shape &shape) {
    Signature h{};
    h[0] = static_cast<int64_t>(kind);
    h[1] = op;
    h[2] = static_cast<int64_t>(dtype);
    auto rank = static_cast<int>(shape.size());
    h[3] = rank;
    uint64_t tail = 1469598103934665603ull;
    for (int i = 0; i < rank; ++i) {
        if (i < signature_dims - 1 || rank == signature_dims) {
            h[4 + i] = shape[i];
            continue;
        }
        tail = (tail ^ static_cast<uint64_t>(shape[i])) * 1099511628211ull;
        h[4 + signature_dims - 1] = static_cast<int64_t>(tail);
    }
    return h;
}

std::string describe_signature(const int64_t *h) {
    auto kind = static_cast<Kind>(h[0]);
    std::string text = kind_name(kind);
    if (kind == Kind::broadcast) text += "(root " + std::to_string(h[1]) + ")";
    // The op when it is not sum, the usual case: "all_reduce(max) of [4] f32".
    static const char *const ops[] = {"sum", "mean", "max", "min"};
    bool reduces = kind == Kind::all_reduce || kind == Kind::reduce_scatter;
    if (reduces && h[1] > 0 && h[1] < 4) text += std::string("(") + ops[h[1]] + ")";
    text += " of ";
    Shape shape;
    int rank = static_cast<int>(h[3]);
    bool hashed = rank > signature_dims;
    for (int i = 0; i < rank && i < signature_dims - (hashed ? 1 : 0); ++i) shape.push_back(h[4 + i]);
    text += shape_str(shape);
    if (hashed) text.insert(text.size() - 1, ", ... (" + std::to_string(rank) + " axes)");
    text += " ";
    text += h[2] >= 0 && h[2] <= 5 ? dtype_name(static_cast<DType>(h[2])) : "?";
    return text;
}

// The record's header. Two ranks agree when their headers are bytewise equal; the reduction
// writes fingerprint 0 (which no signature hashes to) where they do not.
struct Header {
    uint64_t fingerprint;   // FNV-1a of the Signature, never 0
    uint64_t numel;         // elements of the tensor: the count of any second collective
    uint64_t record_bytes;  // header plus slot: the extent of one record
    uint64_t payload_bytes; // bytes of payload reduced in this record (0: none)
    uint32_t op;            // ReduceOp of the payload
    uint32_t dtype;         // DType of the payload's elements (f32, i32 or i64)
};
static_assert(sizeof(Header) == 40 && sizeof(Header) % 8 == 0, "the payload stays 8-aligned");

uint64_t fingerprint_of(const Signature &s) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t word : s)
        for (int i = 0; i < 8; ++i)
            h = (h ^ ((static_cast<uint64_t>(word) >> (8 * i)) & 0xff)) * 1099511628211ull;
    return h == 0 ? 1 : h;
}

template <typename T> void reduce(const void *in, void *inout, std::size_t bytes, ReduceOp op) {
    const T *a = static_cast<const T *>(in);
    T *b = static_cast<T *>(inout);
    std::size_t n = bytes / sizeof(T);
    switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean:
        for (std::size_t i = 0; i < n; ++i) b[i] += a[i];
        return;
    case ReduceOp::max:
        for (std::size_t i = 0; i < n; ++i) b[i] = a[i] > b[i] ? a[i] : b[i];
        return;
    case ReduceOp::min:
        for (std::size_t i = 0; i < n; ++i) b[i] = a[i] < b[i] ? a[i] : b[i];
        return;
    }
}

// The record's MPI_Op (commutative): inout = combine(in, inout) per record. It calls no MPI
// function (MPI forbids communication inside a user op) and trusts nothing in the records
// beyond what both headers agree on.
void combine(void *in, void *inout, int *len, MPI_Datatype *) {
    auto *a = static_cast<unsigned char *>(in);
    auto *b = static_cast<unsigned char *>(inout);
    for (int r = 0; r < *len; ++r) {
        Header ha, hb;
        std::memcpy(&ha, a, sizeof ha);
        std::memcpy(&hb, b, sizeof hb);
        std::size_t extent = hb.record_bytes;
        if (hb.fingerprint == 0 || std::memcmp(&ha, &hb, sizeof ha) != 0 || extent < sizeof hb ||
            hb.payload_bytes > extent - sizeof hb) {
            hb.fingerprint = 0;
            std::memcpy(b, &hb, sizeof hb);
        } else if (hb.payload_bytes > 0) {
            auto op = static_cast<ReduceOp>(hb.op);
            const void *pa = a + sizeof ha;
            void *pb = b + sizeof hb;
            switch (static_cast<DType>(hb.dtype)) {
            case DType::f32: reduce<float>(pa, pb, hb.payload_bytes, op); break;
            case DType::i32: reduce<int32_t>(pa, pb, hb.payload_bytes, op); break;
            case DType::i64: reduce<int64_t>(pa, pb, hb.payload_bytes, op); break;
            default: break;
            }
        }
        if (extent < sizeof hb) return; // a corrupt record: no extent to step by
        a += extent;
        b += extent;
    }
}

// The record type for a slot: one contiguous element, so that no MPI algorithm splits a record
// between header and payload. Recreated only when the slot changes.
MPI_Datatype record_type(Context &ctx, Context::State &state, std::size_t record_bytes) {
    if (state.record_type != MPI_DATATYPE_NULL && state.record_bytes == record_bytes)
        return state.record_type;
    if (state.record_type != MPI_DATATYPE_NULL) MPI_Type_free(&state.record_type);
    state.record_bytes = 0;
    ctx.check(MPI_Type_contiguous(static_cast<int>(record_bytes), MPI_BYTE, &state.record_type),
              "shape check record type");
    ctx.check(MPI_Type_commit(&state.record_type), "shape check record type");
    state.record_bytes = record_bytes;
    return state.record_type;
}

// After a mismatch (every rank saw it): gathers the signatures to name rank 0's call and the
// first rank that differs.
[[noreturn]] void throw_mismatch(Context &ctx, MPI_Comm comm, const Signature &mine) {
    std::vector<int64_t> all(static_cast<std::size_t>(signature_words) * ctx.world_size());
    std::string what = "shape check";
    if (ctx.options().timeout_seconds > 0) {
        MPI_Request req;
        ctx.check(MPI_Iallgather(mine.data(), signature_words, MPI_INT64_T, all.data(),
                                 signature_words, MPI_INT64_T, comm, &req), what);
        ctx.wait_all(&req, 1, what);
    } else {
        ctx.check(MPI_Allgather(mine.data(), signature_words, MPI_INT64_T, all.data(),
                                signature_words, MPI_INT64_T, comm), what);
    }
    const int64_t *first = all.data();
    for (int r = 1; r < ctx.world_size(); ++r) {
        const int64_t *other = all.data() + static_cast<std::size_t>(r) * signature_words;
        if (std::memcmp(first, other, signature_words * sizeof(int64_t)) == 0) continue;
        throw MismatchError("MismatchError: ranks disagree: rank 0 calls " + describe_signature(first) +
                            ", rank " + std::to_string(r) + " calls " + describe_signature(other) +
                            " (this is rank " + std::to_string(ctx.rank()) +
                            "); every rank must pass the same shape and dtype");
    }
    throw MismatchError("MismatchError: ranks disagree about the element count or type of " +
                        describe_signature(mine.data()) + " (this is rank " +
                        std::to_string(ctx.rank()) + "); every rank must pass the same tensor");
}

} // namespace

void create_check(Context::State &state) {
    MPI_Op_create(&combine, 1, &state.record_op);
}

void free_check(Context::State &state) {
    if (state.record_type != MPI_DATATYPE_NULL) MPI_Type_free(&state.record_type);
    if (state.record_op != MPI_OP_NULL) MPI_Op_free(&state.record_op);
}

bool check_collective(Context &ctx, Context::State &state, Kind kind, int64_t op_or_root,
                      const Shape &shape, DType declared, Payload *payload) {
    if (!ctx.options().check_shapes || ctx.world_size() == 1) return false;
    Signature signature = make_signature(kind, op_or_root, declared, shape);
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    std::size_t slot = state.slot;
    bool fused = payload && payload->bytes > 0 && payload->bytes <= slot;

    Header header{};
    header.fingerprint = fingerprint_of(signature);
    header.numel = static_cast<uint64_t>(numel);
    header.record_bytes = sizeof(Header) + slot;
    header.payload_bytes = fused ? payload->bytes : 0;
    header.op = payload ? static_cast<uint32_t>(payload->op) : 0;
    header.dtype = payload ? static_cast<uint32_t>(payload->dtype) : 0;
    if (state.record.size() < header.record_bytes) state.record.resize(header.record_bytes);
    unsigned char *record = state.record.data();
    std::memcpy(record, &header, sizeof header);
    if (fused) std::memcpy(record + sizeof header, payload->data, payload->bytes);

    MPI_Datatype type = record_type(ctx, state, header.record_bytes);
    std::string what = std::string(kind_name(kind)) + " shape check";
    if (ctx.options().timeout_seconds > 0) {
        MPI_Request req;
        ctx.check(MPI_Iallreduce(MPI_IN_PLACE, record, 1, type, state.record_op, state.comm, &req),
                  what);
        ctx.wait_all(&req, 1, what + " of " + shape_str(shape));
    } else {
        ctx.check(MPI_Allreduce(MPI_IN_PLACE, record, 1, type, state.record_op, state.comm), what);
    }

    Header result;
    std::memcpy(&result, record, sizeof result);
    if (result.fingerprint == 0) {
        state.slot = 0; // every rank saw the mismatch, so every rank resets
        throw_mismatch(ctx, state.comm, signature);
    }
    // The next record's slot: this call's payload size, now known to be every rank's.
    std::size_t next = payload ? payload->bytes : 0;
    state.slot = next <= ctx.options().fuse_bytes ? next : 0;
    if (!fused) return false;
    const unsigned char *reduced = record + sizeof header;
    if (payload->out) std::memcpy(payload->out, reduced + payload->out_offset, payload->out_bytes);
    else std::memcpy(payload->data, reduced, payload->bytes);
    return true;
}

} // namespace tinyfin::dist
