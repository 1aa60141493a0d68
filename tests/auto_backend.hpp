// The backend TINYFIN_BACKEND=auto selects in this build, as tests/meson.build computed it
// from the plugins it built (TINYFIN_TEST_AUTO_BACKEND); cpu when run outside meson.
#pragma once

#include <cstdlib>
#include <string>

namespace test_support {

inline std::string auto_backend() {
    const char *name = std::getenv("TINYFIN_TEST_AUTO_BACKEND");
    return name && *name ? name : "cpu";
}

}  // namespace test_support
