// One owner per GL and EGL object: move-only wrappers that delete on destruction. GL objects
// belong to a context: they are created and destroyed on the device's GL thread (worker.hpp)
// while its context is current.
#pragma once

#include <GL/glew.h>
#include <EGL/egl.h>
#include <EGL/eglext.h>

#include <utility>

#include <tinyfin/plugin_kit/gpu/unique_handle.hpp>

namespace tf_gl {

// GLEW's entry points are pointers, not functions: wrapped for tf_kit::gpu::UniqueHandle.
inline void delete_buffer(GLuint name) { glDeleteBuffers(1, &name); }
inline void delete_program(GLuint name) { glDeleteProgram(name); }
inline void delete_shader(GLuint name) { glDeleteShader(name); }

inline void delete_sync(GLsync sync) { glDeleteSync(sync); }
// An initialised EGL display: eglTerminate on destruction.
inline void terminate_display(EGLDisplay display) { eglTerminate(display); }

using BufferHandle = tf_kit::gpu::UniqueHandle<GLuint, delete_buffer>;
using ProgramHandle = tf_kit::gpu::UniqueHandle<GLuint, delete_program>;
using ShaderHandle = tf_kit::gpu::UniqueHandle<GLuint, delete_shader>;
// A fence (GLsync).
using SyncHandle = tf_kit::gpu::UniqueHandle<GLsync, delete_sync>;
using DisplayHandle = tf_kit::gpu::UniqueHandle<EGLDisplay, terminate_display>;

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
