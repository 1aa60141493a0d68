// The plugin kit: header-only C++20 helpers for writing a tinyfin backend plugin in C++.
// <tinyfin/plugin.h> stays the contract (plain C); the kit only implements the parts every
// plugin repeats, so they exist once. docs/plugin-kit.md describes it.
//
//   plugin_kit/errors.hpp       host table, log, environment, fail(), failure, guarded(), enter()
//   plugin_kit/ops.hpp          op names, kinds, arity and params from ops.def; dtype sizes and classes
//   plugin_kit/tensors.hpp      the extent bound, check_tensor(), shapes, density, contiguity
//   plugin_kit/geometry.hpp     conv/pool output sizes and parameter checks, overflow-safe
//   plugin_kit/host_memory.hpp  the host caching allocator (TINYFIN_HOST_CACHE_BYTES)
//   plugin_kit/features.hpp     FeatureList: list_features() keys and printf-style values
//   plugin_kit/rules.hpp        every op's descriptor rule (kinds' and OWN ops'), check_op()
//   plugin_kit/kernel_rows.hpp  kernel tables: rows {op, dtypes, run, accepts} -> supports() and run()
//   plugin_kit/table.hpp        plugin_table<Impl>(): the tf_plugin table from a struct's static members
//   plugin_kit/dtypes.hpp       with_float_dtype<...>() and kin: a dtype switch over the plugin's storage types
//
// Opt-in (defines struct tf_buffer): plugin_kit/host_buffer.hpp, the buffer members of a plugin
// whose device is the host.
//
// Everything is in namespace tf_kit with hidden visibility; build the plugin with
// -fvisibility=hidden (R1: one exported symbol). Nothing in the kit throws across the ABI.
#pragma once

#include <tinyfin/plugin_kit/dtypes.hpp>
#include <tinyfin/plugin_kit/errors.hpp>
#include <tinyfin/plugin_kit/features.hpp>
#include <tinyfin/plugin_kit/geometry.hpp>
#include <tinyfin/plugin_kit/host_memory.hpp>
#include <tinyfin/plugin_kit/kernel_rows.hpp>
#include <tinyfin/plugin_kit/library.hpp>
#include <tinyfin/plugin_kit/ops.hpp>
#include <tinyfin/plugin_kit/rules.hpp>
#include <tinyfin/plugin_kit/table.hpp>
#include <tinyfin/plugin_kit/tensors.hpp>
