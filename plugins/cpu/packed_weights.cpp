// The cache of packed constant weights (packed_weights.hpp): marked buffers, and per marked buffer
// the packed forms of the B operands read from it (a buffer may hold several weights: an arena,
// a folded concatenation), keyed by where B starts and how it is laid out. Like runtime.cpp's,
// every global here is constant-initialised and has no destructor to run at exit: the core may
// free buffers after the plugin's static objects are gone; packed_weights_clear (shutdown) frees
// the map.
#include "packed_weights.hpp"

#include "kernels_gemm.hpp"
#include "runtime.hpp"

#include <tinyfin/plugin_kit/errors.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace tf_cpu {
namespace {

// offset, k, n, strides, isa, form (0: gemm_f32_prepack_b; else prepared_constant's form)
using Key = std::tuple<uint64_t, int64_t, int64_t, int64_t, int64_t, int, int>;
using Packed = std::map<Key, std::shared_ptr<const std::vector<float>>>;
using MarkedBuffers = std::unordered_map<const tf_buffer *, Packed>;

std::mutex g_mutex;
MarkedBuffers *g_marked = nullptr;  // under g_mutex; created by the first mark
std::atomic<uint64_t> g_bytes{0};
// A bit per hash of every buffer marked since the last clear, read without the lock: every op
// reports its outputs (buffer_written), almost never a marked buffer.
std::atomic<uint64_t> g_maybe[64];

std::size_t hash_bit(const tf_buffer *buffer) {
    const auto v = reinterpret_cast<uintptr_t>(buffer);
    return static_cast<std::size_t>((v >> 4 ^ v >> 13) & 4095);
}

bool maybe_marked(const tf_buffer *buffer) {
    const std::size_t bit = hash_bit(buffer);
    return (g_maybe[bit / 64].load(std::memory_order_acquire) >> (bit % 64) & 1) != 0;
}

uint64_t bytes_of(const Packed &p) {
    uint64_t total = 0;
    for (const auto &[key, floats] : p) total += floats->size() * sizeof(float);
    return total;
}

// Finds the marked buffer's entry into it (under g_mutex); false when the buffer is not marked.
bool find_marked(const tf_buffer *buffer, MarkedBuffers::iterator &it) {
    if (!g_marked) return false;
    it = g_marked->find(buffer);
    return it != g_marked->end();
}

// The form of the weight starting at `start` in b's buffer under key (its offset filled in here):
// kept from an earlier call, or made now by prepare() and kept while the buffer stays marked;
// null when the buffer is not marked. Made outside the lock: another thread making the same
// form meanwhile stores the same floats.
// (A template, so that a call that finds the form kept wraps nothing in a std::function.)
template <class Prepare>
std::shared_ptr<const std::vector<float>> kept_form(const tf_tensor_desc &b, const float *start, Key key,
                                                    Prepare &&prepare) {
    if (!b.buffer || !b.data || !maybe_marked(b.buffer)) return nullptr;
    std::get<0>(key) = static_cast<uint64_t>(reinterpret_cast<const char *>(start) - static_cast<const char *>(b.data));
    {
        std::lock_guard lock(g_mutex);
        MarkedBuffers::iterator it;
        if (!find_marked(b.buffer, it)) return nullptr;
        if (auto p = it->second.find(key); p != it->second.end()) return p->second;
    }
    auto made = std::make_shared<const std::vector<float>>(prepare());
    std::lock_guard lock(g_mutex);
    MarkedBuffers::iterator it;
    if (!find_marked(b.buffer, it)) return made;  // written or freed meanwhile: use it this once
    auto [p, inserted] = it->second.try_emplace(key, made);
    if (inserted) {
        const uint64_t bytes = made->size() * sizeof(float);
        const uint64_t total = g_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
        const auto k = static_cast<long long>(std::get<1>(key)), n = static_cast<long long>(std::get<2>(key));
        if (const int form = std::get<6>(key); form == 0)
            tf_kit::log_line(
                TF_LOG_DEBUG,
                "packed a constant %lld x %lld weight once (a matmul B or a conv w^T): %llu bytes (%llu in all)", k, n,
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(total));
        else
            tf_kit::log_line(TF_LOG_DEBUG,
                             "prepared a constant %lld x %lld weight once (form %d): %llu bytes (%llu in all)", k, n,
                             form, static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(total));
    }
    return p->second;
}

}  // namespace

void mark_buffer_constant(tf_buffer *buffer) {
    if (!buffer) return;
    std::lock_guard lock(g_mutex);
    if (!g_marked) g_marked = new MarkedBuffers;
    g_marked->try_emplace(buffer);
    const std::size_t bit = hash_bit(buffer);
    g_maybe[bit / 64].fetch_or(uint64_t{1} << (bit % 64), std::memory_order_release);
}

void buffer_written(tf_buffer *buffer) {
    if (!maybe_marked(buffer)) return;
    std::lock_guard lock(g_mutex);
    MarkedBuffers::iterator it;
    if (!find_marked(buffer, it)) return;
    g_bytes.fetch_sub(bytes_of(it->second), std::memory_order_relaxed);
    it->second.clear();
}

void buffer_freed(tf_buffer *buffer) {
    if (!maybe_marked(buffer)) return;
    std::lock_guard lock(g_mutex);
    MarkedBuffers::iterator it;
    if (!find_marked(buffer, it)) return;
    g_bytes.fetch_sub(bytes_of(it->second), std::memory_order_relaxed);
    g_marked->erase(it);
}

std::shared_ptr<const std::vector<float>> prepared_constant(const tf_tensor_desc &b, const float *start, int form,
                                                            int64_t k, int64_t n,
                                                            const std::function<std::vector<float>()> &prepare) {
    return kept_form(b, start, {0, k, n, 0, 0, isa_level(), form}, prepare);
}

std::shared_ptr<const std::vector<float>> packed_constant_b(const tf_tensor_desc &b, const float *start, int64_t k,
                                                            int64_t n, int64_t row_stride, int64_t col_stride) {
    return kept_form(b, start, {0, k, n, row_stride, col_stride, isa_level(), 0}, [&] {
        std::vector<float> packed(static_cast<std::size_t>(gemm_f32_prepacked_b_floats(k, n)));
        gemm_f32_prepack_b(k, n, F32Matrix{start, row_stride, col_stride}, packed.data());
        return packed;
    });
}

void packed_weights_clear() {
    std::lock_guard lock(g_mutex);
    delete g_marked;
    g_marked = nullptr;
    for (auto &word : g_maybe) word.store(0, std::memory_order_relaxed);
    g_bytes.store(0, std::memory_order_relaxed);
}

uint64_t packed_weight_bytes() { return g_bytes.load(std::memory_order_relaxed); }

}  // namespace tf_cpu
