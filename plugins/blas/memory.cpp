// Host memory: the blocks behind buffers and the scratch arena of the kernels.
//
// Buffers are 64-byte aligned host memory, like the cpu plugin's, so cpu runs ops on them in
// place. Blocks of 2 MiB and more are 2 MiB aligned and advised as transparent huge pages: a
// fresh 64 MiB tensor then faults 32 pages in, not 16,384. They also go to a bounded cache when
// freed and are handed out again, newest first, for the same rounded size: a loop that
// allocates the same shapes every iteration (a training step, a benchmark) stops faulting and
// zeroing pages after its first pass. So do blocks from 128 KiB: glibc maps and unmaps those
// (or trims its heap under them), and a Fashion-MNIST step on blas faulted ~300 pages in each
// step through its 1.6 MB moments and masks. Smaller blocks are glibc's, which reuses them.
#include "blas.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <vector>

#include <sys/mman.h>

namespace tf_blas {
namespace {

constexpr uint64_t k_align = 64;
constexpr uint64_t k_huge = uint64_t(2) << 20;
// Freed blocks of k_cache_min bytes and more kept for reuse: at most k_cache_blocks of them and
// k_cache_bytes in all.
constexpr size_t k_cache_blocks = 256;
constexpr uint64_t k_cache_min = uint64_t(128) << 10;
constexpr uint64_t k_cache_bytes = uint64_t(256) << 20;
constexpr size_t k_scratch_slots = 3;

struct free_deleter {
    void operator()(void *p) const noexcept { std::free(p); }
};
using block = std::unique_ptr<void, free_deleter>;

struct host_memory {
    // Guards cache and cached_bytes; buffer_alloc and buffer_free come from any thread.
    std::mutex lock;
    std::vector<std::pair<uint64_t, block>> cache;
    uint64_t cached_bytes = 0;
    // Only under the BLAS lock (see scratch()).
    block scratch[k_scratch_slots];
    size_t scratch_floats[k_scratch_slots] = {};
};

// Created by memory_init (init), destroyed by memory_release (shutdown). A plain pointer: a global
// with a destructor would add a static constructor (its atexit registration).
host_memory *g_memory = nullptr;

uint64_t round_up(uint64_t size, uint64_t to) { return (size + to - 1) / to * to; }

// The size a request of size bytes really gets (its size class); 0 when it cannot be represented.
uint64_t capacity_for(uint64_t size) {
    if (size == 0 || size > SIZE_MAX - k_huge) return 0;
    return round_up(size, size >= k_huge ? k_huge : k_align);
}

void *fresh_block(uint64_t capacity) {
    const bool huge = capacity >= k_huge;
    void *p = std::aligned_alloc(huge ? k_huge : k_align, capacity);
    // Advice only: a kernel without transparent huge pages keeps 4 KiB pages.
    if (p && huge) madvise(p, capacity, MADV_HUGEPAGE);
    return p;
}

}  // namespace

void memory_init() {
    if (!g_memory) g_memory = new host_memory();
}

void memory_release() noexcept {
    delete g_memory;
    g_memory = nullptr;
}

void *host_alloc(uint64_t size, uint64_t *capacity) {
    const uint64_t cap = capacity_for(size);
    *capacity = cap;
    if (cap == 0) return nullptr;
    if (cap >= k_cache_min && g_memory) {
        std::lock_guard<std::mutex> lock(g_memory->lock);
        auto &cache = g_memory->cache;
        // Newest first: its pages are the likeliest to be in cache and TLB.
        for (auto it = cache.rbegin(); it != cache.rend(); ++it) {
            if (it->first != cap) continue;
            void *p = it->second.release();
            cache.erase(std::next(it).base());
            g_memory->cached_bytes -= cap;
            return p;
        }
    }
    return fresh_block(cap);
}

void host_free(void *p, uint64_t capacity) noexcept {
    if (!p) return;
    block owned(p);
    if (capacity < k_cache_min || !g_memory) return;
    try {
        std::lock_guard<std::mutex> lock(g_memory->lock);
        if (g_memory->cache.size() >= k_cache_blocks || g_memory->cached_bytes + capacity > k_cache_bytes) return;
        g_memory->cache.emplace_back(capacity, std::move(owned));
        g_memory->cached_bytes += capacity;
    } catch (...) {
        // No room to remember the block (bad_alloc): owned frees it.
    }
}

float *scratch(size_t floats, size_t slot) {
    if (slot >= k_scratch_slots) throw std::logic_error("scratch slot out of range");
    host_memory &m = *g_memory;
    if (floats > m.scratch_floats[slot]) {
        m.scratch[slot].reset();
        m.scratch_floats[slot] = 0;
        const uint64_t cap = floats <= SIZE_MAX / sizeof(float) ? capacity_for(floats * sizeof(float)) : 0;
        void *p = cap ? fresh_block(cap) : nullptr;
        if (!p) throw std::bad_alloc();
        m.scratch[slot].reset(p);
        m.scratch_floats[slot] = floats;
    }
    return static_cast<float *>(m.scratch[slot].get());
}

}  // namespace tf_blas
