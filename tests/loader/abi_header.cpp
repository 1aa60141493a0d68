// Compiled by the "abi-header-c++20" test with -std=c++20 -pedantic -Werror:
// plugin.h must be usable from C++ plugins (extern "C", no C-only constructs).
#include "tinyfin/plugin.h"

#include <cstddef>
#include <type_traits>

static_assert(TF_ABI_MAJOR(TF_ABI_VERSION) == TF_ABI_VERSION_MAJOR);
static_assert(TF_ABI_MINOR(TF_ABI_VERSION) == TF_ABI_VERSION_MINOR);
static_assert(std::is_standard_layout_v<tf_plugin> && std::is_trivial_v<tf_plugin>);
static_assert(std::is_standard_layout_v<tf_tensor_desc> && std::is_trivial_v<tf_tensor_desc>);
static_assert(std::is_standard_layout_v<tf_op_desc> && std::is_trivial_v<tf_op_desc>);
static_assert(std::is_standard_layout_v<tf_device_info> && std::is_trivial_v<tf_device_info>);
static_assert(std::is_standard_layout_v<tf_host_api> && std::is_trivial_v<tf_host_api>);
static_assert(offsetof(tf_plugin, struct_size) == 0 && offsetof(tf_plugin, abi_version) == 4);
// Op ids are part of the ABI: append-only, never renumbered.
static_assert(TF_OP_ADD == 0 && TF_OP_MATMUL == 8 && TF_OP_FILL == 11 && TF_OP_COUNT_ > TF_OP_FILL);

namespace {

tf_status check_probe(tf_error *) { return TF_STATUS_OK; }

constexpr tf_plugin check_plugin = {
    .struct_size = sizeof(tf_plugin),
    .abi_version = TF_ABI_VERSION,
    .name = "abicheck",
    .version = "0",
    .priority = 0,
    .reserved_ = 0,
    .probe = check_probe,
    .init = nullptr,
    .shutdown = nullptr,
    .device_count = nullptr,
    .device_info = nullptr,
    .buffer_alloc = nullptr,
    .buffer_free = nullptr,
    .buffer_host_ptr = nullptr,
    .buffer_write = nullptr,
    .buffer_read = nullptr,
    .buffer_copy = nullptr,
    .supports = nullptr,
    .run = nullptr,
    .synchronize = nullptr,
    .list_features = nullptr,
    .get_proc = nullptr,
};

}  // namespace

extern "C" TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host);
extern "C" const tf_plugin *tf_plugin_entry(const tf_host_api *) {
    tf_plugin_entry_fn self = tf_plugin_entry;
    static_cast<void>(self);
    return &check_plugin;
}
