// The plugin kit's headers stand on their own: each compiles first in a translation unit, with
// every warning an error (meson compiles this file with -std=c++20 -Wall -Wextra -Werror).
#include <tinyfin/plugin_kit/host_buffer.hpp>
#include <tinyfin/plugin_kit/features.hpp>
#include <tinyfin/plugin_kit/errors.hpp>
#include <tinyfin/plugin_kit/ops.hpp>
#include <tinyfin/plugin_kit/tensors.hpp>
#include <tinyfin/plugin_kit/geometry.hpp>
#include <tinyfin/plugin_kit/host_memory.hpp>
#include <tinyfin/plugin_kit/table.hpp>
#include <tinyfin/plugin_kit/dtypes.hpp>
#include <tinyfin/plugin_kit/library.hpp>
#include <tinyfin/plugin_kit.hpp>
#include <tinyfin/plugin_kit/gpu/plugin_shell.hpp>
#include <tinyfin/plugin_kit/gpu/free_list.hpp>
#include <tinyfin/plugin_kit/gpu/reported_ops.hpp>
#include <tinyfin/plugin_kit/gpu/unique_handle.hpp>
#include <tinyfin/plugin_kit/gpu/cache_directory.hpp>

static_assert(tf_kit::op_name(TF_OP_ADD)[0] == 'a');
static_assert(tf_kit::dtype_size(TF_DTYPE_BF16) == 2);
static_assert(tf_kit::window_count(28, 2, 2, 0, 1) == 14);
