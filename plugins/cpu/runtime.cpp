// Thread pool, scratch arenas and instruction-set choice of the cpu
// plugin (runtime.hpp). Every global here is constant-initialised (pointers, atomics, std::mutex):
// loading the plugin runs no constructor, and cpu_shutdown frees what the first use created.
#include "runtime.hpp"

#include "kernel_table.hpp"

#include <tinyfin/env.h>
#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include <sched.h>
#include <sys/mman.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tf_cpu {
namespace {

// ---- Environment ---------------------------------------------------------------------------

using tf_kit::env_integer;
using tf_kit::get_env;

// ---- Instruction set -------------------------------------------------------------------------

// cpuid by hand: __builtin_cpu_supports would link libgcc's static constructor.
int detect_level() {
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX) || !(c & bit_FMA)) return 0;
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6 || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & bit_AVX2)) return 0;
    // AVX-512 state: opmask, upper halves of zmm0-15, zmm16-31 (XCR0 bits 5-7).
    if ((b & bit_AVX512F) && (lo & 0xe0) == 0xe0) return 2;
    return 1;
#else
    return 0;
#endif
}

// The feature "simd": what the CPU and the OS offer, beside the level the kernels use.
const char *simd_level() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return "none";
    const bool sse2 = d & bit_SSE2;
    bool ymm_enabled = false;  // the OS saves the AVX registers (XCR0 bits 1 and 2)
    if ((c & bit_OSXSAVE) && (c & bit_AVX)) {
        unsigned lo = 0, hi = 0;
        __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        ymm_enabled = (lo & 6) == 6;
    }
    if (ymm_enabled && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2)) return "avx2";
    return sse2 ? "sse2" : "none";
#else
    return "none";
#endif
}

std::atomic<int> g_isa{-1};
// bf16_dot_level(): -1 until first asked.
std::atomic<int> g_bf16_dot{-1};

// AVX512_BF16: cpuid leaf 7, subleaf 1, EAX bit 5.
bool detect_bf16_dot() {
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return false;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a >> 5) & 1;
#else
    return false;
#endif
}

// ---- Thread pool -----------------------------------------------------------------------------

thread_local bool t_in_task = false;

int usable_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? static_cast<int>(n) : 1;
}

int threads_from_env() {
    return static_cast<int>(env_integer("TINYFIN_THREADS", 1, 1024, usable_cores(), "the cores this process may use"));
}

// One spin-wait step: tells the core that this thread is spinning (on x86-64 the other threads
// of the core get its resources).
inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// Polls done() until it holds or `budget` has passed; true when it held. The first `pause_for`
// of it with the pause instruction, the rest with sched_yield: on an idle machine a yield returns
// at once (the thread stays ready to run), on a busy one it lets the other runnable threads (the
// caller's own poster among them) have the core instead of burning the time slice.
template <class Done>
bool spin_until(Done done, std::chrono::steady_clock::duration pause_for, std::chrono::steady_clock::duration budget) {
    if (done()) return true;
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        for (int i = 0; i < 32; ++i) {
            if (done()) return true;
            pause();
        }
        const auto spent = std::chrono::steady_clock::now() - start;
        if (spent >= budget) return done();
        if (spent >= pause_for) sched_yield();
    }
}

// A job's tasks are split into one contiguous range per thread of the pool (slot 0: the poster;
// slots 1..: the workers, in the order they join). Each thread runs its own range from the front,
// so it streams its part of an operand in order; a thread whose range is empty takes the last task
// of another slot's range (the largest remaining first), so a worker that joins late, or not at
// all, delays the job by at most one task. A range is one 64-bit word, front in the low half and
// end in the high half, changed by compare-and-swap from either side.
class alignas(64) TaskRange {
public:
    void set(int64_t begin, int64_t end) { word_.store(pack(begin, end), std::memory_order_relaxed); }
    // The next task from the front, or -1 when none is left.
    int64_t take_front() {
        uint64_t w = word_.load(std::memory_order_relaxed);
        for (;;) {
            const int64_t f = front(w), e = end(w);
            if (f >= e) return -1;
            if (word_.compare_exchange_weak(w, pack(f + 1, e), std::memory_order_relaxed)) return f;
        }
    }
    // The last task, or -1 when none is left.
    int64_t take_back() {
        uint64_t w = word_.load(std::memory_order_relaxed);
        for (;;) {
            const int64_t f = front(w), e = end(w);
            if (f >= e) return -1;
            if (word_.compare_exchange_weak(w, pack(f, e - 1), std::memory_order_relaxed)) return e - 1;
        }
    }
    int64_t remaining() const {
        const uint64_t w = word_.load(std::memory_order_relaxed);
        return std::max<int64_t>(0, end(w) - front(w));
    }

private:
    static uint64_t pack(int64_t f, int64_t e) { return static_cast<uint64_t>(f) | static_cast<uint64_t>(e) << 32; }
    static int64_t front(uint64_t w) { return static_cast<int64_t>(w & 0xffffffffu); }
    static int64_t end(uint64_t w) { return static_cast<int64_t>(w >> 32); }
    std::atomic<uint64_t> word_{0};
};

// How long an idle worker polls for the next job before it sleeps, and how long the poster polls
// for the workers to finish before it sleeps: a futex sleep and wake-up cost tens of microseconds
// on a virtual machine (an interrupt to a halted virtual CPU), several times a short op, and
// consecutive ops (a generated token is several hundred) come tens of microseconds apart.
constexpr auto k_pause_spin = std::chrono::microseconds(50);
constexpr auto k_worker_spin = std::chrono::microseconds(1000);
constexpr auto k_poster_spin = std::chrono::microseconds(2000);

class ThreadPool {
public:
    explicit ThreadPool(int threads) : threads_(threads), ranges_(new TaskRange[static_cast<size_t>(threads)]) {
        workers_.reserve(static_cast<size_t>(threads - 1));
        for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
    }
    ~ThreadPool() {
        {
            std::lock_guard<std::mutex> l(m_);
            stop_ = true;
        }
        wake_.notify_all();
        for (auto &t : workers_) t.join();
    }
    int threads() const { return threads_; }

    // Runs the job with the workers; false when another thread holds the pool (run inline then).
    bool run(int64_t tasks, TaskFn fn, void *ctx) {
        if (tasks > INT32_MAX) return false;
        std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
        if (!busy.owns_lock()) return false;
        fn_ = fn;
        ctx_ = ctx;
        for (int s = 0; s < threads_; ++s) ranges_[s].set(tasks * s / threads_, tasks * (s + 1) / threads_);
        slots_.store(1, std::memory_order_relaxed);
        error_ = nullptr;
        {
            std::lock_guard<std::mutex> l(m_);
            open_ = true;
            joined_ = 0;
            generation_.fetch_add(1, std::memory_order_release);
        }
        wake_.notify_all();
        t_in_task = true;
        drain(0);
        t_in_task = false;
        // Close the job and wait only for the workers that joined it: they are running its last
        // tasks. A worker the scheduler has not run yet (another process has the core) no longer
        // holds the job up by a time slice; it finds the job closed when it wakes and skips it.
        {
            std::lock_guard<std::mutex> l(m_);
            open_ = false;
        }
        spin_until([this] { return joined_.load(std::memory_order_acquire) == 0; }, k_pause_spin, k_poster_spin);
        {
            std::unique_lock<std::mutex> l(m_);
            done_.wait(l, [this] { return joined_.load(std::memory_order_acquire) == 0; });
        }
        if (error_) std::rethrow_exception(error_);
        return true;
    }

private:
    // Runs slot `own`'s range, then the other slots' last tasks until no task is left.
    void drain(int own) {
        for (;;) {
            int64_t t = ranges_[own].take_front();
            if (t < 0) {
                int victim = -1;
                int64_t most = 0;
                for (int s = 0; s < threads_; ++s)
                    if (const int64_t r = ranges_[s].remaining(); r > most) {
                        most = r;
                        victim = s;
                    }
                if (victim < 0) return;
                t = ranges_[victim].take_back();
                if (t < 0) continue;
            }
            try {
                fn_(ctx_, t);
            } catch (...) {
                std::lock_guard<std::mutex> l(m_);
                if (!error_) error_ = std::current_exception();
            }
        }
    }

    void work() {
        t_in_task = true;
        uint64_t seen = 0;  // the generation at construction: a job posted before this thread ran still counts
        for (;;) {
            // Poll first (see k_worker_spin), then sleep, so an idle pool uses no CPU.
            spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; }, k_pause_spin,
                       k_worker_spin);
            int slot = 0;
            {
                std::unique_lock<std::mutex> l(m_);
                wake_.wait(l, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
                if (stop_) return;
                seen = generation_.load(std::memory_order_relaxed);
                // The job of this generation is still open: join it (the poster waits for us and
                // keeps its fn_, ctx_ and ranges until we leave). Closed: it was done without us.
                if (!open_) continue;
                joined_.fetch_add(1, std::memory_order_relaxed);
                slot = slots_.fetch_add(1, std::memory_order_relaxed);
            }
            drain(slot < threads_ ? slot : 0);
            std::lock_guard<std::mutex> l(m_);
            // Release: the poster that reads 0 without the lock sees this worker's results.
            if (joined_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.notify_one();
        }
    }

    const int threads_;
    std::unique_ptr<TaskRange[]> ranges_;  // one per slot
    std::vector<std::thread> workers_;
    std::mutex busy_;  // one parallel_for at a time; other callers run inline
    std::mutex m_;
    std::condition_variable wake_, done_;
    std::atomic<uint64_t> generation_{0};
    bool stop_ = false;
    bool open_ = false;  // the posted job still takes workers (under m_)
    std::atomic<int> joined_{0};  // workers inside the posted job's drain() (changed under m_)
    std::atomic<int> slots_{1};  // the next worker's slot (slot 0 is the poster's)
    TaskFn fn_ = nullptr;
    void *ctx_ = nullptr;
    std::exception_ptr error_;
};

std::mutex g_pool_mutex;
std::atomic<ThreadPool *> g_pool{nullptr};
std::atomic<int> g_threads{0};  // 0: not read yet

ThreadPool *get_pool() {
    ThreadPool *p = g_pool.load(std::memory_order_acquire);
    if (p) return p;
    std::lock_guard<std::mutex> l(g_pool_mutex);
    p = g_pool.load(std::memory_order_relaxed);
    if (!p) {
        p = new ThreadPool(thread_count());
        g_pool.store(p, std::memory_order_release);
    }
    return p;
}

// ---- Scratch arenas --------------------------------------------------------------------------

struct Arena {
    float *data[k_slot_count] = {};
    size_t floats[k_slot_count] = {};
    size_t total = 0;  // floats held in all slots
    Arena *next = nullptr;
};

std::mutex g_arena_mutex;
Arena *g_arenas = nullptr;  // every live thread's arena, freed by runtime_shutdown
size_t g_arena_count = 0;  // arenas in g_arenas (under g_arena_mutex)
std::atomic<uint64_t> g_epoch{1};  // bumped by runtime_shutdown: stale thread pointers
std::atomic<size_t> g_scratch_limit{0};  // floats; 0: not read yet

void free_arena(Arena *a) {
    for (float *p : a->data) std::free(p);
    delete a;
}

// The calling thread's arena, freed when the thread ends: a short-lived thread that ran one op
// gives its scratch back instead of leaving it until shutdown. The destructor is registered
// with __cxa_thread_atexit on a thread's first scratch request, which holds a reference on this
// plugin until it ran, so dlclose never unmaps the code a late-exiting thread still calls
// (docs/architecture.md). After runtime_shutdown (epoch bumped) the arena is already freed and
// the destructor only forgets it. Constant-initialised: the plugin still runs nothing at load.
struct ThreadArena {
    Arena *a = nullptr;
    uint64_t epoch = 0;
    ~ThreadArena() {
        if (!a) return;
        std::lock_guard<std::mutex> l(g_arena_mutex);
        if (epoch != g_epoch.load(std::memory_order_relaxed)) return;
        for (Arena **p = &g_arenas; *p; p = &(*p)->next)
            if (*p == a) {
                *p = a->next;
                --g_arena_count;
                break;
            }
        free_arena(a);
    }
};
thread_local ThreadArena t_arena;

size_t scratch_limit() {
    size_t v = g_scratch_limit.load(std::memory_order_relaxed);
    if (v == 0) {
        const int64_t bytes =
            env_integer("TINYFIN_SCRATCH_BYTES", 0, INT64_MAX / 2, int64_t{64} << 20, "the default, 64 MiB");
        v = std::max<size_t>(1, static_cast<size_t>(bytes) / sizeof(float));
        g_scratch_limit.store(v, std::memory_order_relaxed);
    }
    return v;
}

Arena &my_arena() {
    ThreadArena &mine = t_arena;
    const uint64_t epoch = g_epoch.load(std::memory_order_acquire);
    if (mine.a && mine.epoch == epoch) return *mine.a;
    auto *a = new Arena;
    std::lock_guard<std::mutex> l(g_arena_mutex);
    a->next = g_arenas;
    g_arenas = a;
    ++g_arena_count;
    // Read under the mutex: a shutdown between the load above and here freed the list this
    // arena joined after it, so the epoch it belongs to is the current one.
    mine.a = a;
    mine.epoch = g_epoch.load(std::memory_order_relaxed);
    return *a;
}

}  // namespace

// ---- Public functions ------------------------------------------------------------------------

int isa_level() {
    int l = g_isa.load(std::memory_order_relaxed);
    if (l >= 0) return l;
    l = detect_level();
    static const char *const k_words[] = {"generic", "sse2", "avx2", "avx512", "avx512bf16"};
    static const int k_levels[] = {0, 0, 1, 2, 2};
    const char *want = get_env("TINYFIN_CPU_ISA");
    int index = 0;
    bool bf16_allowed = true;
    switch (tf_env_parse_word(want, k_words, 5, &index)) {
    case TF_ENV_VALID:
        l = std::min(l, k_levels[index]);
        bf16_allowed = index == 4;
        break;
    case TF_ENV_INVALID: {
        char instead[64];
        std::snprintf(instead, sizeof instead, "%s (the best this CPU has)", isa_name(l));
        tf_kit::report_bad_setting("TINYFIN_CPU_ISA", want, "generic, sse2, avx2, avx512 or avx512bf16", instead);
        break;
    }
    case TF_ENV_UNSET: break;
    }
    g_bf16_dot.store(bf16_allowed && l == 2 && detect_bf16_dot() ? 1 : 0, std::memory_order_relaxed);
    g_isa.store(l, std::memory_order_relaxed);
    return l;
}

int bf16_dot_level() {
    int v = g_bf16_dot.load(std::memory_order_relaxed);
    if (v >= 0) return v;
    isa_level();
    return g_bf16_dot.load(std::memory_order_relaxed);
}

const char *isa_name(int level) {
    switch (level) {
    case 2: return "avx512";
    case 1: return "avx2";
    default: return "generic";
    }
}

int thread_count() {
    int n = g_threads.load(std::memory_order_relaxed);
    if (n == 0) {
        n = threads_from_env();
        g_threads.store(n, std::memory_order_relaxed);
    }
    return n;
}

int64_t split_count(int64_t work, int64_t grain) {
    const int threads = thread_count();
    if (threads <= 1 || work < 2 * grain) return 1;
    return std::min<int64_t>(work / grain, int64_t{4} * threads);
}

void parallel_for(int64_t tasks, TaskFn fn, void *ctx) {
    if (tasks <= 0) return;
    if (tasks > 1 && !t_in_task && thread_count() > 1 && get_pool()->run(tasks, fn, ctx)) return;
    for (int64_t t = 0; t < tasks; ++t) fn(ctx, t);
}

void runtime_shutdown() {
    {
        std::lock_guard<std::mutex> l(g_pool_mutex);
        delete g_pool.exchange(nullptr);
    }
    g_threads.store(0);
    g_isa.store(-1);
    g_bf16_dot.store(-1);
    g_scratch_limit.store(0);
    tf_kit::settings_reset();
    {
        std::lock_guard<std::mutex> l(g_arena_mutex);
        g_epoch.fetch_add(1);
        for (Arena *a = g_arenas; a;) {
            Arena *next = a->next;
            free_arena(a);
            a = next;
        }
        g_arenas = nullptr;
        g_arena_count = 0;
    }
    tf_kit::host_cache_release();
}

void scratch_stats(uint64_t *arenas, uint64_t *bytes) {
    std::lock_guard<std::mutex> l(g_arena_mutex);
    uint64_t floats = 0;
    for (const Arena *a = g_arenas; a; a = a->next) floats += a->total;
    *arenas = g_arena_count;
    *bytes = floats * sizeof(float);
}

void list_runtime_features(tf_feature_fn emit, void *user) {
    if (!emit) return;
    emit(user, "simd", simd_level());
    char threads[16];
    std::snprintf(threads, sizeof threads, "%d", thread_count());
    emit(user, "threads", threads);
    emit(user, "kernels", isa_name(isa_level()));
    // bf16 x bf16 matmul: "avx512bf16" (vdpbf16ps) or "f32" (converted, the f32 GEMM).
    emit(user, "bf16_matmul", bf16_dot_level() > 0 ? "avx512bf16" : "f32");
    uint64_t arenas = 0, bytes = 0;
    scratch_stats(&arenas, &bytes);
    char text[32];
    std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(arenas));
    emit(user, "scratch_arenas", text);
    std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(bytes));
    emit(user, "scratch_bytes", text);
}

void read_settings() {
    thread_count();
    isa_level();
    scratch_limit();
    tf_kit::host_cache();
}

float *scratch_floats(ScratchSlot slot, size_t floats) {
    Arena &a = my_arena();
    const size_t limit = scratch_limit();
    size_t &have = a.floats[slot];
    // Keep the slot when it is big enough, unless it is far bigger than asked and the arena went
    // over its limit (a one-off large request).
    if (have >= floats && !(a.total > limit && have > 2 * floats + 1024)) return a.data[slot];
    std::free(a.data[slot]);
    a.total -= have;
    a.data[slot] = nullptr;
    have = 0;
    // Round up so slowly growing requests do not reallocate every time.
    size_t want = floats < 1024 ? 1024 : floats + floats / 8;
    want = (want + 15) / 16 * 16;
    void *p = std::aligned_alloc(64, want * sizeof(float));
    if (!p) throw std::bad_alloc();
    a.data[slot] = static_cast<float *>(p);
    have = want;
    a.total += want;
    return a.data[slot];
}

}  // namespace tf_cpu
