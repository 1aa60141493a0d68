// EGL displays without a window system, the GL context, and the check of GLEW's entry points.
#include "context.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace tf_gl {

namespace {

bool has_word(const char *list, const char *word) {
    if (!list) return false;
    const size_t n = std::strlen(word);
    for (const char *p = list; (p = std::strstr(p, word)) != nullptr; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

const char *egl_error_name(EGLint error) {
    switch (error) {
    case EGL_SUCCESS: return "EGL_SUCCESS";
    case EGL_NOT_INITIALIZED: return "EGL_NOT_INITIALIZED";
    case EGL_BAD_ACCESS: return "EGL_BAD_ACCESS";
    case EGL_BAD_ALLOC: return "EGL_BAD_ALLOC";
    case EGL_BAD_ATTRIBUTE: return "EGL_BAD_ATTRIBUTE";
    case EGL_BAD_CONFIG: return "EGL_BAD_CONFIG";
    case EGL_BAD_CONTEXT: return "EGL_BAD_CONTEXT";
    case EGL_BAD_DISPLAY: return "EGL_BAD_DISPLAY";
    case EGL_BAD_MATCH: return "EGL_BAD_MATCH";
    case EGL_BAD_PARAMETER: return "EGL_BAD_PARAMETER";
    default: return "EGL error";
    }
}

// Initialises display; false (and a reason) when EGL refuses it.
bool initialise(EGLDisplay display, std::string &why) {
    if (display == EGL_NO_DISPLAY) {
        why = std::string("no display (") + egl_error_name(eglGetError()) + ")";
        return false;
    }
    EGLint major = 0, minor = 0;
    if (!eglInitialize(display, &major, &minor)) {
        why = std::string("eglInitialize failed (") + egl_error_name(eglGetError()) + ")";
        return false;
    }
    return true;
}

// The EGL devices' displays, one per distinct device.
void add_devices(const char *client, std::vector<EglTarget> &out, std::string &why) {
    if (!has_word(client, "EGL_EXT_device_enumeration") && !has_word(client, "EGL_EXT_device_base")) {
        why = "EGL has no EGL_EXT_device_enumeration";
        return;
    }
    if (!has_word(client, "EGL_EXT_platform_device")) {
        why = "EGL has no EGL_EXT_platform_device";
        return;
    }
    auto query_devices = reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(eglGetProcAddress("eglQueryDevicesEXT"));
    auto query_string = reinterpret_cast<PFNEGLQUERYDEVICESTRINGEXTPROC>(eglGetProcAddress("eglQueryDeviceStringEXT"));
    if (!query_devices || !query_string) {
        why = "EGL does not export eglQueryDevicesEXT";
        return;
    }
    EGLint count = 0;
    if (!query_devices(0, nullptr, &count) || count <= 0) {
        why = "EGL lists no devices";
        return;
    }
    std::vector<EGLDeviceEXT> devices(static_cast<size_t>(count));
    query_devices(count, devices.data(), &count);
    std::set<EGLDisplay> seen;
    std::string last;
    for (EGLint i = 0; i < count; ++i) {
        const char *extensions = query_string(devices[i], EGL_EXTENSIONS);
        std::string node;
        if (has_word(extensions, "EGL_EXT_device_drm_render_node"))
            if (const char *s = query_string(devices[i], EGL_DRM_RENDER_NODE_FILE_EXT)) node = s;
        if (node.empty() && has_word(extensions, "EGL_EXT_device_drm"))
            if (const char *s = query_string(devices[i], EGL_DRM_DEVICE_FILE_EXT)) node = s;
        const bool software = has_word(extensions, "EGL_MESA_device_software");
        EGLDisplay display = eglGetPlatformDisplay(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr);
        // Two EGL devices can lead to one display (the same driver seen twice): keep one.
        if (display != EGL_NO_DISPLAY && seen.count(display)) continue;
        if (!initialise(display, last)) {
            log_line(TF_LOG_DEBUG, "EGL device %d: %s", i, last.c_str());
            continue;
        }
        seen.insert(display);
        EglTarget t;
        t.display = DisplayHandle(display);
        t.source = "EGL device " + std::to_string(i) + " (" +
                   (software       ? "software"
                    : node.empty() ? "no DRM node"
                                   : node) +
                   ")";
        t.software = software;
        out.push_back(std::move(t));
    }
    if (out.empty()) why = "no EGL device could be initialised" + (last.empty() ? "" : " (" + last + ")");
}

void add_surfaceless(const char *client, std::vector<EglTarget> &out, std::string &why) {
    if (!has_word(client, "EGL_MESA_platform_surfaceless")) {
        why = "EGL has no EGL_MESA_platform_surfaceless";
        return;
    }
    EGLDisplay display = eglGetPlatformDisplay(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    std::string reason;
    if (!initialise(display, reason)) {
        why = "the surfaceless platform: " + reason;
        return;
    }
    EglTarget t;
    t.display = DisplayHandle(display);
    t.source = "surfaceless platform";
    out.push_back(std::move(t));
}

// Every entry point beyond GL 1.1 the plugin calls; GLEW leaves a pointer NULL when the driver
// lacks it. (GL 1.1 functions such as glGetString come from libGL itself.)
struct Entry {
    const char *name;
    const void *pointer;
};
#define TF_GL_ENTRY(f)                                                                                                 \
    Entry { #f, reinterpret_cast < const void *>(f) }

std::vector<Entry> required_entries() {
    return {
        TF_GL_ENTRY(glAttachShader),      TF_GL_ENTRY(glBindBuffer),      TF_GL_ENTRY(glBindBufferRange),
        TF_GL_ENTRY(glBufferStorage),     TF_GL_ENTRY(glClientWaitSync),  TF_GL_ENTRY(glCompileShader),
        TF_GL_ENTRY(glCopyBufferSubData), TF_GL_ENTRY(glCreateProgram),   TF_GL_ENTRY(glCreateShader),
        TF_GL_ENTRY(glDeleteBuffers),     TF_GL_ENTRY(glDeleteProgram),   TF_GL_ENTRY(glDeleteShader),
        TF_GL_ENTRY(glDeleteSync),        TF_GL_ENTRY(glDispatchCompute), TF_GL_ENTRY(glFenceSync),
        TF_GL_ENTRY(glGenBuffers),        TF_GL_ENTRY(glGetInteger64v),   TF_GL_ENTRY(glGetIntegeri_v),
        TF_GL_ENTRY(glGetProgramInfoLog), TF_GL_ENTRY(glGetProgramiv),    TF_GL_ENTRY(glGetShaderInfoLog),
        TF_GL_ENTRY(glGetShaderiv),       TF_GL_ENTRY(glGetStringi),      TF_GL_ENTRY(glLinkProgram),
        TF_GL_ENTRY(glMapBufferRange),    TF_GL_ENTRY(glMemoryBarrier),   TF_GL_ENTRY(glShaderSource),
        TF_GL_ENTRY(glUnmapBuffer),       TF_GL_ENTRY(glUseProgram),
    };
}

}  // namespace

std::vector<EglTarget> find_egl_targets(std::string &why) {
    const char *client = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (!client) {
        why = "EGL has no client extensions (EGL 1.5 or EGL_EXT_client_extensions is needed)";
        return {};
    }
    const char *only = get_env("TINYFIN_OPENGL_EGL");
    const bool devices = !only || std::strcmp(only, "device") == 0;
    const bool surfaceless = !only || std::strcmp(only, "surfaceless") == 0;
    if (!devices && !surfaceless) {
        why = std::string("TINYFIN_OPENGL_EGL='") + only + "' is neither 'device' nor 'surfaceless'";
        return {};
    }
    std::vector<EglTarget> out;
    std::string why_devices, why_surfaceless;
    if (devices) add_devices(client, out, why_devices);
    if (out.empty() && surfaceless) add_surfaceless(client, out, why_surfaceless);
    if (out.empty()) {
        why = "no EGL display without a window system: ";
        if (devices) why += why_devices;
        if (devices && surfaceless) why += "; ";
        if (surfaceless) why += why_surfaceless;
    }
    return out;
}

int gl_version() {
    GLint major = 0, minor = 0;
    glGetIntegerv(GL_MAJOR_VERSION, &major);
    glGetIntegerv(GL_MINOR_VERSION, &minor);
    return major * 10 + minor;
}

ContextHandle make_context(const EglTarget &target) {
    EGLDisplay display = target.display.get();
    const char *extensions = eglQueryString(display, EGL_EXTENSIONS);
    if (!has_word(extensions, "EGL_KHR_surfaceless_context"))
        raise(TF_STATUS_UNAVAILABLE, "%s has no EGL_KHR_surfaceless_context", target.source.c_str());
    if (!has_word(extensions, "EGL_KHR_create_context") && !has_word(eglQueryString(display, EGL_VERSION), "1.5"))
        raise(TF_STATUS_UNAVAILABLE, "%s cannot make versioned contexts (EGL_KHR_create_context)",
              target.source.c_str());
    // The API is per thread: this thread's contexts are desktop OpenGL.
    if (!eglBindAPI(EGL_OPENGL_API))
        raise(TF_STATUS_UNAVAILABLE, "%s has no desktop OpenGL (eglBindAPI: %s)", target.source.c_str(),
              egl_error_name(eglGetError()));
    EGLConfig config = nullptr;
    if (!has_word(extensions, "EGL_KHR_no_config_context")) {
        const EGLint want[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE};
        EGLint n = 0;
        if (!eglChooseConfig(display, want, &config, 1, &n) || n == 0)
            raise(TF_STATUS_UNAVAILABLE, "%s has no EGL config for OpenGL", target.source.c_str());
    }
    const EGLint attributes[] = {
        EGL_CONTEXT_MAJOR_VERSION,           4,       EGL_CONTEXT_MINOR_VERSION, 3, EGL_CONTEXT_OPENGL_PROFILE_MASK,
        EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
    EGLContext context = eglCreateContext(display, config, EGL_NO_CONTEXT, attributes);
    if (context == EGL_NO_CONTEXT)
        raise(TF_STATUS_UNAVAILABLE, "%s gives no OpenGL 4.3 core context (%s)", target.source.c_str(),
              egl_error_name(eglGetError()));
    ContextHandle owned(display, context);
    if (!eglMakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, context))
        raise(TF_STATUS_UNAVAILABLE, "%s: eglMakeCurrent without a surface failed (%s)", target.source.c_str(),
              egl_error_name(eglGetError()));
    // Core profiles hide glGetString(GL_EXTENSIONS): without glewExperimental GLEW loads nothing.
    glewExperimental = GL_TRUE;
    const GLenum glew = glewInit();
    // Under EGL, GLEW's GLX part fails (GLEW_ERROR_NO_GLX_DISPLAY) after the GL pointers are
    // loaded; the entry points are checked one by one below instead.
    if (glew != GLEW_OK && glew != GLEW_ERROR_NO_GLX_DISPLAY)
        raise(TF_STATUS_UNAVAILABLE, "%s: glewInit failed (%u: %s)", target.source.c_str(), glew,
              reinterpret_cast<const char *>(glewGetErrorString(glew)));
    glGetError();  // glewInit's probing may leave an error behind
    const int version = gl_version();
    const char *text = reinterpret_cast<const char *>(glGetString(GL_VERSION));
    if (version < 43)
        raise(TF_STATUS_UNAVAILABLE, "%s: OpenGL %s, compute shaders need 4.3", target.source.c_str(),
              text ? text : "?");
    std::string missing;
    for (const Entry &e : required_entries())
        if (!e.pointer) missing += (missing.empty() ? "" : ", ") + std::string(e.name);
    if (!missing.empty())
        raise(TF_STATUS_UNAVAILABLE, "%s: OpenGL %s lacks %s", target.source.c_str(), text ? text : "?",
              missing.c_str());
    return owned;
}

}  // namespace tf_gl
