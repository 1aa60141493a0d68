// Where the GPU plugins keep their caches (the vulkan pipeline cache, the opencl program
// binaries): $XDG_CACHE_HOME/tinyfin, else $HOME/.cache/tinyfin, through the core's environment.
#ifndef TINYFIN_GPU_CACHE_DIRECTORY_HPP
#define TINYFIN_GPU_CACHE_DIRECTORY_HPP

#include <tinyfin/plugin_kit/errors.hpp>

#include <string>

namespace tf_gpu {

// The directory for subdir ("" for tinyfin's own), not created here; "" when there is no
// absolute home to put it in.
inline std::string cache_directory(const char *subdir) {
    std::string base;
    const char *xdg = tf_kit::get_env("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') {
        base = xdg;
    } else {
        const char *home = tf_kit::get_env("HOME");
        if (!home || home[0] != '/') return "";
        base = std::string(home) + "/.cache";
    }
    base += "/tinyfin";
    if (subdir[0]) base = base + "/" + subdir;
    return base;
}

}  // namespace tf_gpu

#endif  // TINYFIN_GPU_CACHE_DIRECTORY_HPP
