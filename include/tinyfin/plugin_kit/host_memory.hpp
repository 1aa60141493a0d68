// The plugin kit's host caching allocator, shared by every plugin whose buffers are host memory
// (cpu, blas): freed blocks are kept by size class up to TINYFIN_HOST_CACHE_BYTES (default
// 512 MiB) and handed out again, so a steady training loop maps and unmaps no memory. Blocks are
// 64-byte aligned (a cache line, an AVX-512 vector); from 2 MiB on 2 MiB aligned and advised as
// transparent huge pages. docs/performance.md has the measurements behind these choices.
//
// The cache is created on first use (no static constructor) and freed by host_cache_release()
// in the plugin's shutdown; a block freed after that goes straight back to the C library.
#pragma once

#include <tinyfin/plugin_kit/errors.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include <sys/mman.h>

namespace tf_kit TF_KIT_HIDDEN {

namespace detail {

constexpr uint64_t k_huge_block = uint64_t{2} << 20;
constexpr int k_size_classes = 4 * 64;

// Size classes: 64 bytes, then four per power of two (2^e, 1.25, 1.5, 1.75 x 2^e).
constexpr int size_class(uint64_t size, uint64_t *rounded) noexcept {
    if (size <= 64) {
        *rounded = 64;
        return 0;
    }
    const int e = 63 - __builtin_clzll(size - 1);  // 2^e < size <= 2^(e+1)
    const uint64_t base = uint64_t{1} << e;
    const uint64_t quarter = base >> 2;
    const uint64_t q = (size - base + quarter - 1) / quarter;  // 1..4
    *rounded = base + q * quarter;
    return (e - 6) * 4 + static_cast<int>(q);
}

struct HostCache {
    std::mutex m;
    std::vector<void *> free[k_size_classes];
    uint64_t cached = 0;
    uint64_t limit = 0;
};

inline std::atomic<HostCache *> g_host_cache{nullptr};
inline std::mutex g_host_cache_mutex;

inline void *raw_host_alloc(uint64_t bytes) noexcept {
    const uint64_t align = bytes >= k_huge_block ? k_huge_block : 64;
    // aligned_alloc wants a multiple of the alignment (C11; ASan enforces it, glibc does not).
    bytes = (bytes + align - 1) / align * align;
    void *p = std::aligned_alloc(align, bytes);
#if defined(MADV_HUGEPAGE)
    // Advice only: a kernel without transparent huge pages keeps 4 KiB pages.
    if (p && bytes >= k_huge_block) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

}  // namespace detail

// The cache, created on first use with its limit read from TINYFIN_HOST_CACHE_BYTES (a bad value
// is reported through report_bad_setting and the default used). Throws std::bad_alloc.
inline detail::HostCache &host_cache() {
    detail::HostCache *c = detail::g_host_cache.load(std::memory_order_acquire);
    if (c) return *c;
    std::lock_guard<std::mutex> lock(detail::g_host_cache_mutex);
    c = detail::g_host_cache.load(std::memory_order_relaxed);
    if (!c) {
        c = new detail::HostCache;
        c->limit = static_cast<uint64_t>(
            env_integer("TINYFIN_HOST_CACHE_BYTES", 0, INT64_MAX / 2, int64_t{512} << 20, "the default, 512 MiB"));
        detail::g_host_cache.store(c, std::memory_order_release);
    }
    return *c;
}

// A block of at least size bytes (size <= UINT64_MAX / 4); *capacity receives the bytes really
// held, which host_free needs back. NULL when memory is exhausted.
inline void *host_alloc(uint64_t size, uint64_t *capacity) {
    uint64_t rounded = 0;
    const int cls = detail::size_class(size, &rounded);
    if (cls < detail::k_size_classes) {
        detail::HostCache &c = host_cache();
        std::lock_guard<std::mutex> lock(c.m);
        if (!c.free[cls].empty()) {
            void *p = c.free[cls].back();  // newest first: likeliest in cache and TLB
            c.free[cls].pop_back();
            c.cached -= rounded;
            *capacity = rounded;
            return p;
        }
    } else {
        rounded = (size + 63) / 64 * 64;
    }
    *capacity = rounded;
    return detail::raw_host_alloc(rounded);
}

// Gives a block back: to the cache while it has room, else to the C library.
inline void host_free(void *p, uint64_t capacity) noexcept {
    if (!p) return;
    uint64_t rounded = 0;
    const int cls = detail::size_class(capacity, &rounded);
    detail::HostCache *c = detail::g_host_cache.load(std::memory_order_acquire);
    if (c && cls < detail::k_size_classes && rounded == capacity) {
        std::lock_guard<std::mutex> lock(c->m);
        if (c->cached + capacity <= c->limit) {
            try {
                c->free[cls].push_back(p);
                c->cached += capacity;
                return;
            } catch (const std::bad_alloc &) {
            }
        }
    }
    std::free(p);
}

// Frees every cached block; the cache stays.
inline void host_cache_trim() noexcept {
    detail::HostCache *c = detail::g_host_cache.load(std::memory_order_acquire);
    if (!c) return;
    std::lock_guard<std::mutex> lock(c->m);
    for (auto &list : c->free) {
        for (void *p : list) std::free(p);
        list.clear();
        list.shrink_to_fit();
    }
    c->cached = 0;
}

// Frees the cache itself (shutdown); the next host_alloc creates it again, reading the variable.
inline void host_cache_release() noexcept {
    host_cache_trim();
    std::lock_guard<std::mutex> lock(detail::g_host_cache_mutex);
    delete detail::g_host_cache.exchange(nullptr);
}

}  // namespace TF_KIT_HIDDEN
