// The plugin kit's tf_plugin table: a plugin writes its members as the static functions of one
// struct, and plugin_table() fills the table from them, so the table's frame (struct size, ABI
// version, which member goes where, the optional ones left NULL) is written once for every
// plugin. See docs/plugin-kit.md.
#pragma once

#include <tinyfin/plugin_kit/errors.hpp>
#include <tinyfin/plugin_kit/kernel_rows.hpp>

namespace tf_kit TF_KIT_HIDDEN {

// The table of a plugin whose members are Impl's static functions, named as in tf_plugin:
// probe, init, shutdown, device_count, device_info, buffer_alloc, buffer_free, buffer_write,
// buffer_read, buffer_copy, supports, run, synchronize, list_features; buffer_host_ptr and
// get_proc where Impl has them (absent: NULL, as the ABI allows). A host plugin that declares its
// kernels as rows (Impl::kernels, an array of HostRow: kernel_rows.hpp) and writes no supports
// and run gets them derived from the rows (HostKernelTable<Impl>). priority ranks the plugin for
// TINYFIN_BACKEND=auto (docs/plugin-abi.md: 0 unless it beats cpu on the ops it has).
template <class Impl>
constexpr tf_plugin plugin_table(const char *name, const char *version, int32_t priority) {
    tf_plugin t{};
    t.struct_size = sizeof(tf_plugin);
    t.abi_version = TF_ABI_VERSION;
    t.name = name;
    t.version = version;
    t.priority = priority;
    t.probe = Impl::probe;
    t.init = Impl::init;
    t.shutdown = Impl::shutdown;
    t.device_count = Impl::device_count;
    t.device_info = Impl::device_info;
    t.buffer_alloc = Impl::buffer_alloc;
    t.buffer_free = Impl::buffer_free;
    if constexpr (requires { Impl::buffer_host_ptr; }) t.buffer_host_ptr = Impl::buffer_host_ptr;
    t.buffer_write = Impl::buffer_write;
    t.buffer_read = Impl::buffer_read;
    t.buffer_copy = Impl::buffer_copy;
    if constexpr (requires { Impl::supports; }) {
        t.supports = Impl::supports;
        t.run = Impl::run;
    } else {
        t.supports = HostKernelTable<Impl>::supports;
        t.run = HostKernelTable<Impl>::run;
    }
    t.synchronize = Impl::synchronize;
    t.list_features = Impl::list_features;
    if constexpr (requires { Impl::get_proc; }) t.get_proc = Impl::get_proc;
    return t;
}

}  // namespace TF_KIT_HIDDEN
