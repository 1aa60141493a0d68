// The cpu plugin's run-time services: one thread pool (TINYFIN_THREADS), per-thread scratch
// arenas for packing and im2col buffers (TINYFIN_SCRATCH_BYTES) and the instruction set the
// kernels may use (TINYFIN_CPU_ISA). Private to each plugin that links cpu's kernels (cpu, blas):
// each .so has its own copy (hidden symbols), so two loaded plugins never share a pool or an arena.
//
// Nothing here has a static constructor or destructor: the pool is created on the first call
// that wants threads and destroyed by cpu_shutdown (after which a later call creates a new one,
// reading the variables again, which is how tests change the thread count).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tf_cpu {

// ---- Environment ---------------------------------------------------------------------------

// Reads every variable below now (the first read of each warns about a bad value, tinyfin/env.h;
// the kit keeps the first bad one's message for settings_status(), which cpu_init fails with
// under TINYFIN_STRICT=1).
void read_settings();

// ---- Instruction set -------------------------------------------------------------------------

// What the f32 kernels use: 0 portable (SSE2 on x86-64, plain C++ elsewhere), 1 AVX2 + FMA,
// 2 AVX-512F. The best the CPU and the OS support, capped by
// TINYFIN_CPU_ISA=generic|avx2|avx512|avx512bf16 (avx512bf16: AVX-512 with bf16_dot_level()).
// Detected with cpuid on first use, never at load time.
int isa_level();
const char *isa_name(int level);
// 1 when bf16 x bf16 products may use AVX512-BF16 (vdpbf16ps): the CPU has it, isa_level() is
// AVX-512 and TINYFIN_CPU_ISA is unset or avx512bf16; else 0 (f16/bf16 go through the f32 GEMM).
int bf16_dot_level();

// ---- Thread pool -----------------------------------------------------------------------------

// Threads the pool runs work on, the calling thread included: TINYFIN_THREADS, else the cores in
// this process's affinity mask.
int thread_count();

// Calls fn(ctx, task) once for every task in [0, tasks), spread over the pool's threads, and
// returns when all are done. Which thread runs which task is not fixed, so every task must
// write its own outputs: results then do not depend on the thread count. Called from inside a
// task (nested), or with one thread, or with tasks < 2, it runs every task on the calling thread
// in order. The first exception a task throws is rethrown here after all tasks finished.
using TaskFn = void (*)(void *ctx, int64_t task);
void parallel_for(int64_t tasks, TaskFn fn, void *ctx);

template <class F>
void parallel_for(int64_t tasks, F &&f) {
    parallel_for(
        tasks, [](void *ctx, int64_t t) { (*static_cast<F *>(ctx))(t); }, &f);
}

// The number of tasks worth splitting `work` units into when one task should hold at least
// `grain` units: 1 below 2 * grain, else at most 4 tasks per thread. Only a scheduling hint: the
// kernels' results never depend on it.
int64_t split_count(int64_t work, int64_t grain);

// Stops and joins the pool's threads and frees every arena; the next call starts over.
void runtime_shutdown();

// ---- Scratch arena ---------------------------------------------------------------------------

// Per-thread scratch memory, 64-byte aligned, in numbered slots so a kernel can hold several
// buffers at once. A thread keeps its slots between ops up to TINYFIN_SCRATCH_BYTES in all
// (default 64 MiB per thread); a bigger request is served and given back when the next request
// for that slot comes. A thread's arena is freed when the thread ends (or at shutdown). Throws
// std::bad_alloc when memory cannot be had.
// Arenas alive (one per thread that asked for scratch and has not ended) and the bytes they hold.
void scratch_stats(uint64_t *arenas, uint64_t *bytes);

// k_slot_stage0..3: the f32 staging of f16/bf16 operands (F32Input, F32Output), taken and given
// back through StagingSlot (kernels_nn.hpp) so that a kernel's staged operands never share one.
enum ScratchSlot : int {
    k_slot_pack_a,
    k_slot_pack_b,
    k_slot_col,
    k_slot_temp,
    k_slot_temp2,
    k_slot_stage0,
    k_slot_stage1,
    k_slot_stage2,
    k_slot_stage3,
    k_slot_count
};
float *scratch_floats(ScratchSlot slot, size_t floats);

// Host buffers come from the plugin kit's caching allocator (plugin_kit/host_memory.hpp), which
// runtime_shutdown releases.

}  // namespace tf_cpu
