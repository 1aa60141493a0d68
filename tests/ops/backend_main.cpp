// main() of the vulkan suite (and of the opengl suite, built with TF_TEST_BACKEND "opengl" and
// TF_TEST_ALLOW "TINYFIN_ALLOW_NO_OPENGL"): the suite must run for real (CI has lavapipe and
// llvmpipe), so a missing backend fails every binary, with the loader's reason, unless TF_TEST_ALLOW=1
// (then the binary exits 77, which meson reports as skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "tinyfin/tinyfin.hpp"

#ifndef TF_TEST_BACKEND
#define TF_TEST_BACKEND "vulkan"
#endif
#ifndef TF_TEST_ALLOW
#define TF_TEST_ALLOW "TINYFIN_ALLOW_NO_VULKAN"
#endif

namespace {

// "" when the backend under test is usable, else why not.
std::string unavailable_reason() {
    try {
        for (const std::string &name : tinyfin::available_backends())
            if (name == TF_TEST_BACKEND) return "";
        for (const tinyfin::PluginReport &plugin : tinyfin::report().plugins)
            if (plugin.name == TF_TEST_BACKEND) return plugin.outcome + ": " + plugin.message;
        return "the " TF_TEST_BACKEND " plugin is not on the plugin search path";
    } catch (const std::exception &e) {
        // TINYFIN_STRICT=1 with TINYFIN_BACKEND=<backend> throws when it is unusable.
        return e.what();
    }
}

}  // namespace

int main(int argc, char **argv) {
    const std::string why = unavailable_reason();
    if (!why.empty()) {
        const char *allow = std::getenv(TF_TEST_ALLOW);
        const bool skip = allow && std::strcmp(allow, "1") == 0;
        std::fprintf(stderr, TF_TEST_BACKEND " backend unavailable: %s\n%s\n", why.c_str(),
                     skip ? TF_TEST_ALLOW "=1: skipping"
                          : "the " TF_TEST_BACKEND " suite must run (set " TF_TEST_ALLOW
                            "=1 to skip on machines without it)");
        return skip ? 77 : 1;
    }
    doctest::Context context(argc, argv);
    return context.run();
}
