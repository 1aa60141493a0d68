// One owner per GL and EGL object: move-only wrappers that delete on destruction. GL objects
// belong to a context: they are created and destroyed on the device's GL thread (worker.hpp)
// while its context is current.
#ifndef TINYFIN_OPENGL_GL_HANDLES_HPP
#define TINYFIN_OPENGL_GL_HANDLES_HPP

#include <GL/glew.h>
#include <EGL/egl.h>
#include <EGL/eglext.h>

#include <utility>

namespace tf_gl {

// A GLuint name with its delete function.
template <void (*Delete)(GLuint)>
class GlName {
public:
    GlName() = default;
    explicit GlName(GLuint name) : name_(name) {}
    GlName(GlName &&other) noexcept : name_(std::exchange(other.name_, 0)) {}
    GlName &operator=(GlName &&other) noexcept {
        if (this != &other) {
            reset();
            name_ = std::exchange(other.name_, 0);
        }
        return *this;
    }
    GlName(const GlName &) = delete;
    GlName &operator=(const GlName &) = delete;
    ~GlName() { reset(); }

    GLuint get() const noexcept { return name_; }
    explicit operator bool() const noexcept { return name_ != 0; }
    void reset() noexcept {
        if (name_ != 0) Delete(name_);
        name_ = 0;
    }

private:
    GLuint name_ = 0;
};

// GLEW's entry points are pointers, not functions: wrap them for the template above.
inline void delete_buffer(GLuint name) { glDeleteBuffers(1, &name); }
inline void delete_program(GLuint name) { glDeleteProgram(name); }
inline void delete_shader(GLuint name) { glDeleteShader(name); }

using BufferHandle = GlName<delete_buffer>;
using ProgramHandle = GlName<delete_program>;
using ShaderHandle = GlName<delete_shader>;

// A fence (GLsync).
class SyncHandle {
public:
    SyncHandle() = default;
    explicit SyncHandle(GLsync sync) : sync_(sync) {}
    SyncHandle(SyncHandle &&other) noexcept : sync_(std::exchange(other.sync_, nullptr)) {}
    SyncHandle &operator=(SyncHandle &&other) noexcept {
        if (this != &other) {
            reset();
            sync_ = std::exchange(other.sync_, nullptr);
        }
        return *this;
    }
    SyncHandle(const SyncHandle &) = delete;
    SyncHandle &operator=(const SyncHandle &) = delete;
    ~SyncHandle() { reset(); }

    GLsync get() const noexcept { return sync_; }
    explicit operator bool() const noexcept { return sync_ != nullptr; }
    void reset() noexcept {
        if (sync_) glDeleteSync(sync_);
        sync_ = nullptr;
    }

private:
    GLsync sync_ = nullptr;
};

// An initialised EGL display: eglTerminate on destruction.
class DisplayHandle {
public:
    DisplayHandle() = default;
    explicit DisplayHandle(EGLDisplay display) : display_(display) {}
    DisplayHandle(DisplayHandle &&other) noexcept : display_(std::exchange(other.display_, EGL_NO_DISPLAY)) {}
    DisplayHandle &operator=(DisplayHandle &&other) noexcept {
        if (this != &other) {
            reset();
            display_ = std::exchange(other.display_, EGL_NO_DISPLAY);
        }
        return *this;
    }
    DisplayHandle(const DisplayHandle &) = delete;
    DisplayHandle &operator=(const DisplayHandle &) = delete;
    ~DisplayHandle() { reset(); }

    EGLDisplay get() const noexcept { return display_; }
    void reset() noexcept {
        if (display_ != EGL_NO_DISPLAY) eglTerminate(display_);
        display_ = EGL_NO_DISPLAY;
    }

private:
    EGLDisplay display_ = EGL_NO_DISPLAY;
};

// An EGL context, current on the thread that made it so until destroyed: destruction releases
// it from that thread (it must run there) and destroys it.
class ContextHandle {
public:
    ContextHandle() = default;
    ContextHandle(EGLDisplay display, EGLContext context) : display_(display), context_(context) {}
    ContextHandle(ContextHandle &&other) noexcept
        : display_(other.display_), context_(std::exchange(other.context_, EGL_NO_CONTEXT)) {}
    ContextHandle &operator=(ContextHandle &&other) noexcept {
        if (this != &other) {
            reset();
            display_ = other.display_;
            context_ = std::exchange(other.context_, EGL_NO_CONTEXT);
        }
        return *this;
    }
    ContextHandle(const ContextHandle &) = delete;
    ContextHandle &operator=(const ContextHandle &) = delete;
    ~ContextHandle() { reset(); }

    EGLContext get() const noexcept { return context_; }
    void reset() noexcept {
        if (context_ == EGL_NO_CONTEXT) return;
        if (eglGetCurrentContext() == context_)
            eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        eglDestroyContext(display_, context_);
        context_ = EGL_NO_CONTEXT;
    }

private:
    EGLDisplay display_ = EGL_NO_DISPLAY;
    EGLContext context_ = EGL_NO_CONTEXT;
};

}  // namespace tf_gl

#endif
