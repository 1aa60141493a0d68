// What every part of the opengl plugin shares: failures (the shared kernels' exceptions, turned
// into a tf_status and a message at the ABI boundary), the core's logging and environment, and
// EGL: finding displays without a window system and making a desktop GL 4.3+ core context on one.
#pragma once

#include <tinyfin/plugin.h>
#include <tinyfin/plugin_kit/errors.hpp>

#include "gl_handles.hpp"

#include <string>
#include <vector>

namespace tf_gl {

using tf_kit::Failure;
using tf_kit::raise;

// ---- The core's services: the plugin kit's (include/tinyfin/plugin_kit/errors.hpp) --------------

using tf_kit::get_env;
using tf_kit::log_line;

// ---- EGL ------------------------------------------------------------------------------------------

// An initialised EGL display on which the plugin can make a context: one per EGL device.
struct EglTarget {
    DisplayHandle display;
    // "EGL device 1 (/dev/dri/renderD128)", "EGL device 0 (software)", "surfaceless platform".
    std::string source;
    // EGL_MESA_device_software, or a software renderer found later.
    bool software = false;
};

// Every EGL device (EGL_EXT_device_enumeration + EGL_EXT_platform_device), one display per
// distinct device; when there is none, the surfaceless platform (EGL_MESA_platform_surfaceless).
// TINYFIN_OPENGL_EGL=device or =surfaceless uses only that way. Empty, with why, when neither
// gives a display.
std::vector<EglTarget> find_egl_targets(std::string &why);

// A desktop OpenGL 4.3+ core context on target, current on the calling thread (no surface), with
// GLEW's entry points loaded and every one the plugin needs checked. Throws UNAVAILABLE naming
// what is missing (an EGL extension, the GL version, the entry points).
ContextHandle make_context(const EglTarget &target);

// The GL version of the current context as major * 10 + minor.
int gl_version();

}  // namespace tf_gl
