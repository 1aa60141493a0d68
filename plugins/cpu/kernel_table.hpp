// The cpu plugin's kernels as data, for every plugin that links the tinyfin-cpu-kernels library
// (meson.build): the cpu plugin, whose whole table they are, and the blas plugin, which puts its
// OpenBLAS rows before them. Such a plugin owns a copy of cpu's runtime (runtime.hpp: thread pool,
// scratch arenas, instruction set), private to its .so: its init calls read_settings() (and
// settings_status()), its shutdown runtime_shutdown(), its list_features list_runtime_features().
#pragma once

#include <tinyfin/plugin_kit.hpp>

#include <span>

namespace tf_cpu {

// A kernel for every op and dtype tinyfin defines (ops.def's dtypes column and the op's rule),
// with no limits of their own but the optimizer steps' dense f32: every row of every kernel file,
// gathered on first use.
std::span<const tf_kit::HostRow> cpu_kernels();

// The runtime's list_features entries (runtime.cpp): simd (what the CPU has), threads, kernels
// (isa_name), bf16_matmul ("avx512bf16" or "f32"), scratch_arenas and scratch_bytes (live, for
// tests and tinyfin-info).
void list_runtime_features(tf_feature_fn emit, void *user);

}  // namespace tf_cpu
