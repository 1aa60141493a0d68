// The cache of packed constant weights (packed_weights.hpp): marked buffers, and per marked buffer
// the packed forms of the B operands read from it (a buffer may hold several weights: an arena,
// a folded concatenation), keyed by where B starts and how it is laid out.
#include "packed_weights.hpp"

#include "kernels_gemm.hpp"
#include "runtime.hpp"

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
    std::atomic<std::size_t> count{0};  // marked.size(), read without the lock
    std::atomic<uint64_t> bytes{0};
};

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
    c.count.store(c.marked.size(), std::memory_order_relaxed);
}

void buffer_written(tf_buffer *buffer) {
    Cache &c = cache();
    if (c.count.load(std::memory_order_relaxed) == 0) return;
    std::lock_guard lock(c.mutex);
    auto it = c.marked.find(buffer);
    if (it == c.marked.end()) return;
    c.bytes.fetch_sub(bytes_of(it->second), std::memory_order_relaxed);
    it->second.packed.clear();
}

void buffer_freed(tf_buffer *buffer) {
    Cache &c = cache();
    if (c.count.load(std::memory_order_relaxed) == 0) return;
    std::lock_guard lock(c.mutex);
    auto it = c.marked.find(buffer);
    if (it == c.marked.end()) return;
    c.bytes.fetch_sub(bytes_of(it->second), std::memory_order_relaxed);
    c.marked.erase(it);
    c.count.store(c.marked.size(), std::memory_order_relaxed);
}

std::shared_ptr<const std::vector<float>> packed_constant_b(const tf_tensor_desc &b, const float *start, int64_t k,
                                                            int64_t n, int64_t row_stride, int64_t col_stride) {
    Cache &c = cache();
    if (!b.buffer || !b.data || c.count.load(std::memory_order_relaxed) == 0) return nullptr;
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
    if (inserted) c.bytes.fetch_add(packed->size() * sizeof(float), std::memory_order_relaxed);
    return p->second;
}

void packed_weights_clear() {
    Cache &c = cache();
    std::lock_guard lock(c.mutex);
    c.marked.clear();
    c.count.store(0, std::memory_order_relaxed);
    c.bytes.store(0, std::memory_order_relaxed);
}

uint64_t packed_weight_bytes() { return cache().bytes.load(std::memory_order_relaxed); }

}  // namespace tf_cpu
