// The cache of packed constant weights (packed_weights.hpp): marked buffers, and per marked buffer
// the packed forms of the B operands read from it (a buffer may hold several weights: an arena,
// a folded concatenation), keyed by where B starts and how it is laid out.
#include "packed_weights.hpp"

#include "kernels_gemm.hpp"
#include "runtime.hpp"

#include <tinyfin/plugin_kit/errors.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace tf_cpu {
namespace {

using Key = std::tuple<uint64_t, int64_t, int64_t, int64_t, int64_t, int>;  // offset, k, n, strides, isa

struct Marked {
    std::map<Key, std::shared_ptr<const std::vector<float>>> packed;
};

struct Cache {
    std::mutex mutex;
    std::unordered_map<const tf_buffer *, Marked> marked;
    std::atomic<uint64_t> bytes{0};
    // A bit per hash of every buffer marked since the last clear, read without the lock: every op
    // reports its outputs (buffer_written), almost never a marked buffer.
    std::atomic<uint64_t> maybe[64] = {};
};

std::size_t hash_bit(const tf_buffer *buffer) {
    const auto v = reinterpret_cast<uintptr_t>(buffer);
    return static_cast<std::size_t>((v >> 4 ^ v >> 13) & 4095);
}

bool maybe_marked(Cache &c, const tf_buffer *buffer) {
    const std::size_t bit = hash_bit(buffer);
    return (c.maybe[bit / 64].load(std::memory_order_acquire) >> (bit % 64) & 1) != 0;
}

Cache &cache() {
    static Cache c;
    return c;
}

uint64_t bytes_of(const Marked &m) {
    uint64_t total = 0;
    for (const auto &[key, p] : m.packed) total += p->size() * sizeof(float);
    return total;
}

}  // namespace

void mark_buffer_constant(tf_buffer *buffer) {
    if (!buffer) return;
    Cache &c = cache();
    std::lock_guard lock(c.mutex);
    c.marked.try_emplace(buffer);
    const std::size_t bit = hash_bit(buffer);
    c.maybe[bit / 64].fetch_or(uint64_t{1} << (bit % 64), std::memory_order_release);
}

void buffer_written(tf_buffer *buffer) {
    Cache &c = cache();
    if (!maybe_marked(c, buffer)) return;
    std::lock_guard lock(c.mutex);
    auto it = c.marked.find(buffer);
    if (it == c.marked.end()) return;
    c.bytes.fetch_sub(bytes_of(it->second), std::memory_order_relaxed);
    it->second.packed.clear();
}

void buffer_freed(tf_buffer *buffer) {
    Cache &c = cache();
    if (!maybe_marked(c, buffer)) return;
    std::lock_guard lock(c.mutex);
    auto it = c.marked.find(buffer);
    if (it == c.marked.end()) return;
    c.bytes.fetch_sub(bytes_of(it->second), std::memory_order_relaxed);
    c.marked.erase(it);
}

std::shared_ptr<const std::vector<float>> packed_constant_b(const tf_tensor_desc &b, const float *start, int64_t k,
                                                            int64_t n, int64_t row_stride, int64_t col_stride) {
    Cache &c = cache();
    if (!b.buffer || !b.data || !maybe_marked(c, b.buffer)) return nullptr;
    const auto offset =
        static_cast<uint64_t>(reinterpret_cast<const char *>(start) - static_cast<const char *>(b.data));
    const Key key{offset, k, n, row_stride, col_stride, isa_level()};
    {
        std::lock_guard lock(c.mutex);
        auto it = c.marked.find(b.buffer);
        if (it == c.marked.end()) return nullptr;
        if (auto p = it->second.packed.find(key); p != it->second.packed.end()) return p->second;
    }
    // Packed outside the lock; another thread packing the same B meanwhile stores the same floats.
    auto packed = std::make_shared<std::vector<float>>(static_cast<std::size_t>(gemm_f32_prepacked_b_floats(k, n)));
    gemm_f32_prepack_b(k, n, F32Matrix{start, row_stride, col_stride}, packed->data());
    std::lock_guard lock(c.mutex);
    auto it = c.marked.find(b.buffer);
    if (it == c.marked.end()) return packed;  // unmarked (freed) meanwhile: use it this once
    auto [p, inserted] = it->second.packed.try_emplace(key, packed);
    if (inserted) {
        const uint64_t bytes = packed->size() * sizeof(float);
        const uint64_t total = c.bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
        tf_kit::log_line(TF_LOG_DEBUG, "packed a constant %lld x %lld matmul weight once: %llu bytes (%llu in all)",
                         static_cast<long long>(k), static_cast<long long>(n), static_cast<unsigned long long>(bytes),
                         static_cast<unsigned long long>(total));
    }
    return p->second;
}

void packed_weights_clear() {
    Cache &c = cache();
    std::lock_guard lock(c.mutex);
    c.marked.clear();
    for (auto &word : c.maybe) word.store(0, std::memory_order_relaxed);
    c.bytes.store(0, std::memory_order_relaxed);
}

uint64_t packed_weight_bytes() { return cache().bytes.load(std::memory_order_relaxed); }

}  // namespace tf_cpu
