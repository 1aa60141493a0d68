// main() of the op tests (tests/ops) and of the GPU backends' own tests. The backend under test
// is TINYFIN_BACKEND's: a GPU backend must run for real (CI has lavapipe, llvmpipe and pocl), so
// when it is unusable every binary fails with the loader's reason, unless
// TINYFIN_ALLOW_NO_<BACKEND>=1 (then it exits 77, which meson reports as skipped). cpu and auto
// need no check.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "tinyfin/tinyfin.hpp"

namespace {

// "" when the backend is usable, else why not.
std::string unavailable_reason(const std::string &backend) {
    try {
        for (const std::string &name : tinyfin::available_backends())
            if (name == backend) return "";
        for (const tinyfin::PluginReport &plugin : tinyfin::report().plugins)
            if (plugin.name == backend) return plugin.outcome + ": " + plugin.message;
        return "the " + backend + " plugin is not on the plugin search path";
    } catch (const std::exception &e) {
        // TINYFIN_STRICT=1 with TINYFIN_BACKEND=<backend> throws when it is unusable.
        return e.what();
    }
}

}  // namespace

int main(int argc, char **argv) {
    const char *selected = std::getenv("TINYFIN_BACKEND");
    const std::string backend = selected ? selected : "";
    if (!backend.empty() && backend != "auto" && backend != "cpu") {
        const std::string why = unavailable_reason(backend);
        if (!why.empty()) {
            std::string allow = "TINYFIN_ALLOW_NO_";
            for (char c : backend) allow += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            const char *allowed = std::getenv(allow.c_str());
            const bool skip = allowed && std::strcmp(allowed, "1") == 0;
            std::fprintf(stderr, "%s backend unavailable: %s\n", backend.c_str(), why.c_str());
            if (skip)
                std::fprintf(stderr, "%s=1: skipping\n", allow.c_str());
            else
                std::fprintf(stderr, "the %s tests must run (set %s=1 to skip on machines without it)\n",
                             backend.c_str(), allow.c_str());
            return skip ? 77 : 1;
        }
    }
    doctest::Context context(argc, argv);
    return context.run();
}
