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
class gl_name {
public:
    gl_name() = default;
    explicit gl_name(GLuint name) : name_(name) {}
    gl_name(gl_name &&other) noexcept : name_(std::exchange(other.name_, 0)) {}
    gl_name &operator=(gl_name &&other) noexcept {
        if (this != &other) {
            reset();
            name_ = std::exchange(other.name_, 0);
        }
        return *this;
    }
    gl_name(const gl_name &) = delete;
    gl_name &operator=(const gl_name &) = delete;
    ~gl_name() { reset(); }

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

using buffer_handle = gl_name<delete_buffer>;
using program_handle = gl_name<delete_program>;
using shader_handle = gl_name<delete_shader>;

// A fence (GLsync).
class sync_handle {
public:
    sync_handle() = default;
    explicit sync_handle(GLsync sync) : sync_(sync) {}
    sync_handle(sync_handle &&other) noexcept : sync_(std::exchange(other.sync_, nullptr)) {}
    sync_handle &operator=(sync_handle &&other) noexcept {
        if (this != &other) {
            reset();
            sync_ = std::exchange(other.sync_, nullptr);
        }
        return *this;
    }
    sync_handle(const sync_handle &) = delete;
    sync_handle &operator=(const sync_handle &) = delete;
    ~sync_handle() { reset(); }

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
class display_handle {
public:
    display_handle() = default;
    explicit display_handle(EGLDisplay display) : display_(display) {}
    display_handle(display_handle &&other) noexcept : display_(std::exchange(other.display_, EGL_NO_DISPLAY)) {}
    display_handle &operator=(display_handle &&other) noexcept {
        if (this != &other) {
            reset();
            display_ = std::exchange(other.display_, EGL_NO_DISPLAY);
        }
        return *this;
    }
    display_handle(const display_handle &) = delete;
    display_handle &operator=(const display_handle &) = delete;
    ~display_handle() { reset(); }

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
class context_handle {
public:
    context_handle() = default;
    context_handle(EGLDisplay display, EGLContext context) : display_(display), context_(context) {}
    context_handle(context_handle &&other) noexcept
        : display_(other.display_), context_(std::exchange(other.context_, EGL_NO_CONTEXT)) {}
    context_handle &operator=(context_handle &&other) noexcept {
        if (this != &other) {
            reset();
            display_ = other.display_;
            context_ = std::exchange(other.context_, EGL_NO_CONTEXT);
        }
        return *this;
    }
    context_handle(const context_handle &) = delete;
    context_handle &operator=(const context_handle &) = delete;
    ~context_handle() { reset(); }

    EGLContext get() const noexcept { return context_; }
    void reset() noexcept {
        if (context_ == EGL_NO_CONTEXT) return;
        if (eglGetCurrentContext() == context_) eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        eglDestroyContext(display_, context_);
        context_ = EGL_NO_CONTEXT;
    }

private:
    EGLDisplay display_ = EGL_NO_DISPLAY;
    EGLContext context_ = EGL_NO_CONTEXT;
};

}  // namespace tf_gl

#endif
