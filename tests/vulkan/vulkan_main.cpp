// main() of the vulkan suite: the suite must run for real (CI has lavapipe), so a missing
// Vulkan backend fails every binary, with the loader's reason, unless TINYFIN_ALLOW_NO_VULKAN=1
// (then the binary exits 77, which meson reports as skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "tinyfin/tinyfin.hpp"

namespace {

// "" when the vulkan backend is usable, else why not.
std::string unavailable_reason() {
    try {
        for (const std::string &name : tinyfin::available_backends())
            if (name == "vulkan") return "";
        for (const tinyfin::PluginReport &plugin : tinyfin::report().plugins)
            if (plugin.name == "vulkan") return plugin.outcome + ": " + plugin.message;
        return "the vulkan plugin is not on the plugin search path";
    } catch (const std::exception &e) {
        // TINYFIN_STRICT=1 with TINYFIN_BACKEND=vulkan throws when vulkan is unusable.
        return e.what();
    }
}

}  // namespace

int main(int argc, char **argv) {
    const std::string why = unavailable_reason();
    if (!why.empty()) {
        const char *allow = std::getenv("TINYFIN_ALLOW_NO_VULKAN");
        const bool skip = allow && std::strcmp(allow, "1") == 0;
        std::fprintf(stderr, "vulkan backend unavailable: %s\n%s\n", why.c_str(),
                     skip ? "TINYFIN_ALLOW_NO_VULKAN=1: skipping"
                          : "the vulkan suite must run (set TINYFIN_ALLOW_NO_VULKAN=1 to skip on machines without Vulkan)");
        return skip ? 77 : 1;
    }
    doctest::Context context(argc, argv);
    return context.run();
}
