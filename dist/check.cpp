// The cross-rank shape check of dist::Context's collectives, fused with small f32 sums.
//
// Every checked collective starts with one MPI_Allreduce(MPI_SUM) of a record of floats: a
// header encoding the call's signature (a 64-bit fingerprint of collective, op, dtype and shape,
// and the element count), then a payload slot. The header is cut into small chunks c, and the
// record carries c and c*c; after the sum, sum(c)^2 == W * sum(c*c) holds exactly when all W
// ranks had the same c (Cauchy-Schwarz; every value stays an integer below 2^24, exact in f32).
// So after the call every rank knows whether all ranks agree. When this call is an f32 sum (or
// mean, or an f16/bf16 one widened to f32) and its data fits the slot, the data rides in the
// same record and the check costs only the header's bytes: one builtin allreduce instead of two
// (docs/performance.md). Builtin op and type: MPI reduces the record as fast as raw floats and
// may split it anywhere.
//
// The slot size is what makes this safe: MPI requires every rank to pass the same count, and a
// rank cannot know the other ranks' tensors before the check. So the slot is the payload size
// of the previous checked call, which every rank verified to be the same, or 0 after a
// mismatch, a call that cannot ride in the record, or a payload above Options::fuse_bytes.
// Repeating a call (a training loop's loss allreduce) thus runs fused from the second time on; a
// call that does not fit sends the header (and the slot, unused), learns that every rank
// agrees, and then moves its data in a second collective.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
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

// A 64-bit fingerprint of the signature, a word at a time (splitmix64's finaliser per word):
// cheap next to a 1 KB allreduce, unlike a byte-wise hash.
uint64_t fingerprint_of(const Signature &s) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int64_t word : s) {
        h ^= static_cast<uint64_t>(word) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h;
}

// fingerprint_of(s), remembered for the last signature: a loop repeats its calls, and the hash is
// a chain of multiplies that costs more than comparing the signature.
uint64_t fingerprint(Context::State &state, const Signature &s) {
    static_assert(std::tuple_size_v<decltype(state.fingerprinted)> == signature_words);
    if (!state.has_fingerprint || state.fingerprinted != s) {
        state.fingerprinted = s;
        state.fingerprint = fingerprint_of(s);
        state.has_fingerprint = true;
    }
    return state.fingerprint;
}

// The header's chunking for a world of W ranks: the widest chunks (8, 4, 2 or 1 bits) whose
// sums of squares over W ranks stay below 2^24, so that f32 holds them exactly.
int chunk_bits(int world) {
    for (int bits : {8, 4, 2}) {
        double top = static_cast<double>((1 << bits) - 1);
        if (world * top * top < 16777216.0) return bits;
    }
    return 1;
}

// Header floats of the record: the chunks of the fingerprint and the count, then their squares.
std::size_t header_floats(int world) { return 2 * (128 / static_cast<std::size_t>(chunk_bits(world))); }

void encode(float *out, uint64_t fingerprint, uint64_t numel, int world) {
    int bits = chunk_bits(world);
    std::size_t chunks = 128 / static_cast<std::size_t>(bits);
    uint64_t mask = (uint64_t{1} << bits) - 1;
    for (std::size_t k = 0; k < chunks; ++k) {
        std::size_t at = k * static_cast<std::size_t>(bits);
        uint64_t word = at < 64 ? fingerprint : numel;
        auto c = static_cast<float>((word >> (at % 64)) & mask);
        out[k] = c;
        out[chunks + k] = c * c;
    }
}

// Whether the summed header says that every rank sent the same chunks.
bool all_equal(const float *sum, int world) {
    std::size_t chunks = 128 / static_cast<std::size_t>(chunk_bits(world));
    for (std::size_t k = 0; k < chunks; ++k) {
        auto s = static_cast<int64_t>(sum[k]), q = static_cast<int64_t>(sum[chunks + k]);
        if (s * s != world * q) return false;
    }
    return true;
}

// After a mismatch (every rank saw it): gathers the signatures to name rank 0's call and the
// first rank that differs.
[[noreturn]] void throw_mismatch(Context &ctx, MPI_Comm comm, const Signature &mine) {
    std::vector<int64_t> all(static_cast<std::size_t>(signature_words) * ctx.world_size());
    const char *what = "shape check";
    if (ctx.options().timeout_seconds > 0) {
        MPI_Request req;
        ok(MPI_Iallgather(mine.data(), signature_words, MPI_INT64_T, all.data(), signature_words, MPI_INT64_T, comm,
                          &req),
           what);
        ctx.wait_all(&req, 1, what);
    } else {
        ok(MPI_Allgather(mine.data(), signature_words, MPI_INT64_T, all.data(), signature_words, MPI_INT64_T, comm),
           what);
    }
    const int64_t *first = all.data();
    for (int r = 1; r < ctx.world_size(); ++r) {
        const int64_t *other = all.data() + static_cast<std::size_t>(r) * signature_words;
        if (std::memcmp(first, other, signature_words * sizeof(int64_t)) == 0) continue;
        throw MismatchError("MismatchError: ranks disagree: rank 0 calls " + describe_signature(first) + ", rank " +
                            std::to_string(r) + " calls " + describe_signature(other) + " (this is rank " +
                            std::to_string(ctx.rank()) + "); every rank must pass the same shape and dtype");
    }
    throw MismatchError("MismatchError: ranks disagree about the element count or type of " +
                        describe_signature(mine.data()) + " (this is rank " + std::to_string(ctx.rank()) +
                        "); every rank must pass the same tensor");
}

// ---- The pairwise check: a world of 2, 4, 8, ... ranks ----

// The messages of a chain are at most this many bytes: under the 4 KiB eager limit of Open MPI's
// shared-memory transport (vader; its envelope included), so each is delivered at once instead
// of after the rendezvous that a 4 KiB message needs (docs/performance.md).
constexpr std::size_t message_bytes = 4000;
// A message's tag: bit 0 says that another message of the chain follows, bit 1 that the sender
// has seen a mismatch, bits 2..30 hold 29 bits of the signature's fingerprint.
constexpr int more_bit = 1, seen_bit = 2;

std::size_t messages_of(std::size_t bytes) { return bytes == 0 ? 1 : (bytes + message_bytes - 1) / message_bytes; }

unsigned char *room_for(std::vector<unsigned char> &buffer, std::size_t bytes) {
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer.data();
}

// Waits for one request and fills status, honouring the timeout.
void wait_for(Context &ctx, MPI_Request &request, MPI_Status &status) {
    if (ctx.options().timeout_seconds > 0)
        ctx.wait_all(&request, 1, "shape check", &status);
    else
        ok(MPI_Wait(&request, &status), "shape check");
}

// One round: sends bytes from send to partner as a chain of messages tagged tag (plus the more
// bit) and receives the partner's chain into receive (room for this rank's chain). Returns
// whether the partner's chain looks like this one: the same fingerprint and number of messages
// in the tags, the same message sizes. seen becomes the partner's mismatch bit. A chain of
// another length is received whole or its missing messages' receives are cancelled, so that no
// message is left to be matched by a later call (the partner, which sees the same difference,
// sends nothing more to this rank before the mismatch's collective exchange).
//
// A chain of one message without a timeout is sent by a blocking MPI_Send: one call instead of
// MPI_Isend and a wait (it cannot deadlock: each rank posts its receive before sending). A longer
// chain is sent nonblocking, so that its messages travel together: Open MPI's shared-memory
// transport completes a send when the partner has taken it, and blocking sends made a 16 KB
// chain wait for each message in turn (docs/performance.md).
bool exchange(Context &ctx, Context::State &state, int partner, int tag, const unsigned char *send, std::size_t bytes,
              unsigned char *receive, bool &seen) {
    std::size_t count = messages_of(bytes);
    bool blocking = count == 1 && ctx.options().timeout_seconds <= 0;
    if (state.requests.size() < 2 * count) state.requests.resize(2 * count);
    MPI_Request *reqs = state.requests.data();
    const char *what = "shape check";
    for (std::size_t i = 0; i < count; ++i)
        ok(MPI_Irecv(receive + i * message_bytes, static_cast<int>(message_bytes), MPI_BYTE, partner, MPI_ANY_TAG,
                     state.comm, &reqs[i]),
           what);
    for (std::size_t i = 0; i < count; ++i) {
        std::size_t at = i * message_bytes, size = std::min(message_bytes, bytes - at);
        int message_tag = tag | (i + 1 < count ? more_bit : 0);
        if (blocking)
            ok(MPI_Send(send + at, static_cast<int>(size), MPI_BYTE, partner, message_tag, state.comm), what);
        else
            ok(MPI_Isend(send + at, static_cast<int>(size), MPI_BYTE, partner, message_tag, state.comm,
                         &reqs[count + i]),
               what);
    }
    bool same = true;
    std::size_t received = 0;
    bool more = true;
    MPI_Status status;
    while (more && received < count) {
        wait_for(ctx, reqs[received], status);
        std::size_t at = received * message_bytes, size = std::min(message_bytes, bytes - at);
        int got = 0;
        MPI_Get_count(&status, MPI_BYTE, &got);
        int expected = tag | (received + 1 < count ? more_bit : 0);
        if ((status.MPI_TAG | seen_bit) != (expected | seen_bit) || static_cast<std::size_t>(got) != size) same = false;
        seen = seen || (status.MPI_TAG & seen_bit) != 0;
        more = (status.MPI_TAG & more_bit) != 0;
        ++received;
    }
    // The partner's chain is longer: take the rest (into receive; the result is not used).
    while (more) {
        same = false;
        ok(MPI_Irecv(receive, static_cast<int>(message_bytes), MPI_BYTE, partner, MPI_ANY_TAG, state.comm, &reqs[0]),
           what);
        wait_for(ctx, reqs[0], status);
        seen = seen || (status.MPI_TAG & seen_bit) != 0;
        more = (status.MPI_TAG & more_bit) != 0;
    }
    // Shorter: nothing will match the remaining receives.
    for (std::size_t i = received; i < count; ++i) {
        same = false;
        MPI_Cancel(&reqs[i]);
        ok(MPI_Wait(&reqs[i], MPI_STATUS_IGNORE), what);
    }
    // The partner takes every message of this chain, whatever its own.
    if (!blocking) ctx.wait_all(reqs + count, static_cast<int>(count), what);
    return same;
}

// x86-64's baseline is SSE2; the add is a visible part of a fused 1 KB sum, so the loader picks an
// AVX2 clone on CPUs that have it.
#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target_clones("avx2", "default")]]
#endif
void add(float *out, const float *a, const float *b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// The check by recursive doubling on point-to-point messages (docs/distributed.md): in round k
// every rank exchanges a chain with rank ^ 2^k; the chains' tags and sizes are the check, and a
// fused call's chain is its data, summed as it goes. A rank's seen bit after round k says
// whether its 2^(k+1) ranks disagree, so after the last round every rank has the same verdict.
// A rank writes its result only then, and only when all agree: a mismatch changes no tensor.
bool pairwise_check(Context &ctx, Context::State &state, const Signature &signature, Payload *payload, bool fused) {
    int world = ctx.world_size(), rank = ctx.rank();
    int tag = static_cast<int>((fingerprint(state, signature) >> 35) << 2);
    const auto *from = fused ? static_cast<const unsigned char *>(payload->data)
                             : reinterpret_cast<const unsigned char *>(signature.data());
    std::size_t bytes = fused ? payload->bytes : sizeof(Signature);
    unsigned char *incoming = room_for(state.incoming, messages_of(bytes) * message_bytes);
    std::size_t floats = bytes / sizeof(float);
    bool seen = false;
    for (int mask = 1; mask < world; mask <<= 1) {
        bool partner_seen = false;
        bool same = exchange(ctx, state, rank ^ mask, tag | (seen ? seen_bit : 0), from, bytes, incoming, partner_seen);
        // Without data the chain is the signature itself, compared whole.
        if (same && !fused) same = std::memcmp(incoming, signature.data(), bytes) == 0;
        seen = seen || partner_seen || !same;
        if (!fused || seen) continue;
        const auto *a = reinterpret_cast<const float *>(from);
        const auto *b = reinterpret_cast<const float *>(incoming);
        if (mask * 2 < world) {  // a partial sum for the next round
            auto *partial = reinterpret_cast<float *>(room_for(state.partial, bytes));
            add(partial, a, b, floats);
            from = reinterpret_cast<const unsigned char *>(partial);
        } else if (payload->out) {  // reduce_scatter keeps its piece
            std::size_t first = payload->out_offset / sizeof(float);
            add(static_cast<float *>(payload->out), a + first, b + first, payload->out_bytes / sizeof(float));
        } else {
            add(static_cast<float *>(payload->data), a, b, floats);
        }
    }
    if (seen) throw_mismatch(ctx, state.comm, signature);
    return fused;
}

}  // namespace

bool check_collective(Context &ctx, Context::State &state, Kind kind, int64_t op_or_root, const Shape &shape,
                      DType declared, Payload *payload) {
    if (!ctx.options().check_shapes || ctx.world_size() == 1) return false;
    Signature signature = make_signature(kind, op_or_root, declared, shape);
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    int world = ctx.world_size();
    // Only f32 sums ride in the record (its op is MPI_SUM over floats).
    bool rides =
        payload && payload->dtype == DType::f32 && (payload->op == ReduceOp::sum || payload->op == ReduceOp::mean);
    std::size_t floats = rides ? payload->bytes / sizeof(float) : 0;
    if (state.pairwise)
        return pairwise_check(ctx, state, signature, payload,
                              rides && floats > 0 && payload->bytes <= ctx.options().fuse_bytes);
    std::size_t slot = state.slot;
    bool fused = rides && floats > 0 && floats <= slot;

    std::size_t head = header_floats(world);
    std::size_t count = head + slot;
    if (state.record.size() < count) state.record.resize(count);
    float *record = state.record.data();
    encode(record, fingerprint(state, signature), static_cast<uint64_t>(numel), world);
    if (fused) std::memcpy(record + head, payload->data, payload->bytes);
    std::memset(record + head + (fused ? floats : 0), 0, (slot - (fused ? floats : 0)) * sizeof(float));

    const char *what = "shape check";
    if (ctx.options().timeout_seconds > 0) {
        MPI_Request req;
        ok(MPI_Iallreduce(MPI_IN_PLACE, record, static_cast<int>(count), MPI_FLOAT, MPI_SUM, state.comm, &req), what);
        ctx.wait_all(&req, 1, std::string(kind_name(kind)) + " shape check of " + shape_str(shape));
    } else {
        ok(MPI_Allreduce(MPI_IN_PLACE, record, static_cast<int>(count), MPI_FLOAT, MPI_SUM, state.comm), what);
    }

    if (!all_equal(record, world)) {
        state.slot = 0;  // every rank saw the mismatch, so every rank resets
        throw_mismatch(ctx, state.comm, signature);
    }
    // The next record's slot: this call's payload size, now known to be every rank's.
    state.slot = rides && payload->bytes <= ctx.options().fuse_bytes ? floats : 0;
    if (!fused) return false;
    const float *reduced = record + head;
    if (payload->out)
        std::memcpy(payload->out, reinterpret_cast<const unsigned char *>(reduced) + payload->out_offset,
                    payload->out_bytes);
    else
        std::memcpy(payload->data, reduced, payload->bytes);
    return true;
}

void init_check(Context::State &state, int world) {
    // Both ends of the pairwise check need 31-bit tags (Open MPI's ob1 has them; MPI only
    // promises 15) and a partner in every round (a power of two); else the record.
    int *tag_ub = nullptr, found = 0;
    MPI_Comm_get_attr(state.comm, MPI_TAG_UB, &tag_ub, &found);
    bool power_of_two = world > 1 && (world & (world - 1)) == 0;
    state.pairwise = power_of_two && found && tag_ub && *tag_ub >= INT32_MAX;
}

}  // namespace tinyfin::dist
