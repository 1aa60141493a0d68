// Where the GPU plugins keep their caches (the vulkan pipeline cache, the opencl program
// binaries): $XDG_CACHE_HOME/tinyfin, else $HOME/.cache/tinyfin, through the core's environment.
#pragma once

#include <tinyfin/plugin_kit/errors.hpp>

#include <string>

namespace tf_kit TF_KIT_HIDDEN {
namespace gpu {

// The directory for subdir ("" for tinyfin's own), not created here; "" when there is no
// absolute home to put it in.
inline std::string cache_directory(const char *subdir) {
    std::string base;
    const char *xdg = get_env("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') {
        base = xdg;
    } else {
        const char *home = get_env("HOME");
        if (!home || home[0] != '/') return "";
        base = std::string(home) + "/.cache";
    }
    base += "/tinyfin";
    if (subdir[0]) base = base + "/" + subdir;
    return base;
}

}  // namespace gpu
}  // namespace TF_KIT_HIDDEN
