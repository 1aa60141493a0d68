// Device start-up, buffers, dispatch, barriers and waits (see device.hpp).
#include "device.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace tf_gl {

namespace {

// Device memory blocks, the stream ring, and the alignment of every range.
constexpr uint64_t block_bytes = 64ull << 20;
constexpr uint64_t ring_bytes = 16ull << 20;
constexpr uint64_t range_align = 256;
// Status words for reporting dispatches between two waits; one more wait when they run out.
constexpr uint64_t report_slots = 64;

double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

const char *gl_text(GLenum name) {
    const auto *s = reinterpret_cast<const char *>(glGetString(name));
    return s ? s : "";
}

// Renderers that run on the CPU.
bool software_renderer(const std::string &renderer) {
    for (const char *name : {"llvmpipe", "softpipe", "SWR", "swrast", "Software Rasterizer"})
        if (renderer.find(name) != std::string::npos) return true;
    return false;
}

}  // namespace

// ---- Start-up and shutdown ---------------------------------------------------------------------------

std::unique_ptr<Device> Device::create(int index, EglTarget target) {
    std::unique_ptr<Device> d(new Device());
    d->index_ = index;
    d->thread_ = std::make_unique<Worker>();
    d->call([&] { d->start(std::move(target)); });
    return d;
}

void Device::start(EglTarget target) {
    const auto begin = std::chrono::steady_clock::now();
    auto state = std::make_unique<GlState>();
    state->context = make_context(target);
    source_ = target.source;
    state->target = std::move(target);
    version_ = gl_text(GL_VERSION);
    renderer_ = gl_text(GL_RENDERER);
    vendor_ = gl_text(GL_VENDOR);
    glsl_ = gl_text(GL_SHADING_LANGUAGE_VERSION);
    software_ = state->target.software || software_renderer(renderer_);
    label_ = "opengl:" + std::to_string(index_) + " (" + renderer_ + ")";

    GLint ssbo_align = 16, max_count[3] = {};
    glGetIntegerv(GL_SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT, &ssbo_align);
    glGetInteger64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &max_block_size_);
    for (GLuint i = 0; i < 3; ++i) {
        glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, i, &max_count[i]);
        glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_SIZE, i, &max_group_size_[i]);
    }
    glGetIntegerv(GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS, &max_invocations_);
    glGetIntegerv(GL_MAX_COMPUTE_SHARED_MEMORY_SIZE, &max_shared_);
    glGetIntegerv(GL_NUM_PROGRAM_BINARY_FORMATS, &binary_formats_);
    caps_.max_binding = static_cast<uint64_t>(std::max<GLint64>(max_block_size_, 0));
    caps_.bind_align = std::max<uint64_t>(static_cast<uint64_t>(std::max(ssbo_align, 1)), 16);
    for (int i = 0; i < 3; ++i) caps_.max_groups[i] = static_cast<uint32_t>(std::max(max_count[i], 0));
    if (caps_.max_binding < 1024 || caps_.max_groups[0] == 0)
        raise(TF_STATUS_UNAVAILABLE, "%s reports no usable compute limits (SSBO %lld bytes)", label(),
              static_cast<long long>(max_block_size_));
    // The kernels use 256 invocations per workgroup.
    if (max_invocations_ < 256)
        raise(TF_STATUS_UNAVAILABLE, "%s allows %d invocations per workgroup; the kernels need 256", label(),
              max_invocations_);

    if (GLEW_EXT_memory_object && glGetUnsignedBytei_vEXT) {
        GLubyte id[GL_UUID_SIZE_EXT] = {};
        glGetUnsignedBytei_vEXT(GL_DEVICE_UUID_EXT, 0, id);
        if (glGetError() == GL_NO_ERROR) {
            char hex[2 * GL_UUID_SIZE_EXT + 1];
            for (int i = 0; i < GL_UUID_SIZE_EXT; ++i) std::snprintf(hex + 2 * i, 3, "%02x", id[i]);
            uuid_ = hex;
        }
    }
    if (GLEW_NVX_gpu_memory_info) {
        GLint kib = 0;
        glGetIntegerv(GL_GPU_MEMORY_INFO_TOTAL_AVAILABLE_MEMORY_NVX, &kib);
        memory_total_ = static_cast<uint64_t>(kib) * 1024;
    } else if (software_) {
        // A software renderer's memory is the host's.
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0) memory_total_ = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
    }

    const uint64_t align = std::max(range_align, caps_.bind_align);
    state->pool = std::make_unique<MemoryPool>(block_bytes, align, label_.c_str());
    state->ring = std::make_unique<StreamRing>(ring_bytes, align);
    state->status = mapped_buffer((report_slots + 1) * caps_.bind_align, &state->status_data);
    std::memset(state->status_data, 0, (report_slots + 1) * caps_.bind_align);
    glGetError();
    gl_ = std::move(state);
    counters_.context_ms = ms_since(begin);
    log_line(TF_LOG_DEBUG, "%s: %s via %s, context in %.1f ms", label(), version_.c_str(), source_.c_str(),
             counters_.context_ms);
}

Device::~Device() {
    if (!thread_) return;
    try {
        call([&] {
            if (!gl_) return;
            glFinish();
            for (tf_buffer *buffer : live_) {
                gl_->pool->release(buffer->memory);
                delete buffer;
            }
            live_.clear();
            gl_.reset();
            // The thread's EGL state (bound API, last error) ends with it.
            eglReleaseThread();
        });
    } catch (...) {
        // Shutdown goes on: the context dies with the thread's process state.
    }
}

// ---- Information (immutable after start) ---------------------------------------------------------------

void Device::info(tf_device_info &out) const {
    const uint64_t memory_free = 0;  // GL has no portable query
    out = tf_kit::device_info_of(software_ ? TF_DEVICE_KIND_GPU_SOFTWARE : TF_DEVICE_KIND_OTHER, memory_total_,
                                 memory_free, renderer_.c_str(), uuid_.c_str());
}

void Device::list_features(tf_feature_fn emit, void *user) const {
    const tf_kit::FeatureList features(emit, user, index_);
    features.put_all("gl_version", version_, "gl_renderer", renderer_, "gl_vendor", vendor_, "glsl_version", glsl_,
                     "egl", source_);
    features.put("kind", software_ ? "software (runs on the CPU)" : "hardware");
    features.putf("max_work_group_size", "%d x %d x %d (%d invocations)", max_group_size_[0], max_group_size_[1],
                  max_group_size_[2], max_invocations_);
    features.putf("max_work_group_count", "%u x %u x %u", caps_.max_groups[0], caps_.max_groups[1],
                  caps_.max_groups[2]);
    features.putf("max_ssbo_size", "%lld", static_cast<long long>(max_block_size_));
    features.putf("ssbo_offset_alignment", "%llu", static_cast<unsigned long long>(caps_.bind_align));
    features.putf("max_shared_memory", "%d", max_shared_);
    features.putf("startup_context", "%.1f ms", counters_.context_ms);
    features.putf("programs_compiled", "%llu in %.1f ms", static_cast<unsigned long long>(counters_.programs),
                  counters_.compile_ms);
    // Where 0, glGetProgramBinary cannot cache programs (the driver's own shader cache may).
    features.putf("program_binary_formats", "%d", binary_formats_);
    features.putf("dispatches", "%llu dispatches, %llu barriers", static_cast<unsigned long long>(counters_.dispatches),
                  static_cast<unsigned long long>(counters_.barriers));
}

// ---- Buffers --------------------------------------------------------------------------------------------

tf_buffer *Device::allocate(uint64_t size) {
    Allocation range = gl_->pool->allocate(size);
    auto buffer = std::make_unique<tf_buffer>(tf_buffer{this, range, size});
    live_.insert(buffer.get());
    return buffer.release();
}

void Device::free(tf_buffer *buffer) noexcept {
    live_.erase(buffer);
    // GL runs commands in order: work issued before keeps its data, later work gets the range.
    gl_->pool->release(buffer->memory);
    delete buffer;
}

void Device::write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size) {
    const StreamRing::Span staging = gl_->ring->take(size);
    std::memcpy(staging.data, src, size);
    const GLuint target = buffer->memory.owner->buffer.get();
    const uint64_t at = buffer->memory.offset + offset;
    access(target, at, at + size, true);
    glBindBuffer(GL_COPY_READ_BUFFER, staging.buffer);
    glBindBuffer(GL_COPY_WRITE_BUFFER, target);
    glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(staging.offset),
                        static_cast<GLintptr>(at), static_cast<GLsizeiptr>(size));
}

void Device::read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size) {
    const StreamRing::Span staging = gl_->ring->take(size);
    const GLuint source = buffer->memory.owner->buffer.get();
    const uint64_t at = buffer->memory.offset + offset;
    access(source, at, at + size, false);
    glBindBuffer(GL_COPY_READ_BUFFER, source);
    glBindBuffer(GL_COPY_WRITE_BUFFER, staging.buffer);
    glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(at),
                        static_cast<GLintptr>(staging.offset), static_cast<GLsizeiptr>(size));
    wait_all();
    std::memcpy(dst, staging.data, size);
    throw_reported();
}

void Device::copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size) {
    const GLuint from = src->memory.owner->buffer.get(), to = dst->memory.owner->buffer.get();
    const uint64_t a = src->memory.offset + src_offset, b = dst->memory.offset + dst_offset;
    access(from, a, a + size, false);
    access(to, b, b + size, true);
    if (from == to && a < b + size && b < a + size) {
        // glCopyBufferSubData refuses overlapping ranges of one buffer: go through the ring.
        const StreamRing::Span mid = gl_->ring->take(size);
        glBindBuffer(GL_COPY_READ_BUFFER, from);
        glBindBuffer(GL_COPY_WRITE_BUFFER, mid.buffer);
        glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(a),
                            static_cast<GLintptr>(mid.offset), static_cast<GLsizeiptr>(size));
        glBindBuffer(GL_COPY_READ_BUFFER, mid.buffer);
        glBindBuffer(GL_COPY_WRITE_BUFFER, to);
        glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(mid.offset),
                            static_cast<GLintptr>(b), static_cast<GLsizeiptr>(size));
        return;
    }
    glBindBuffer(GL_COPY_READ_BUFFER, from);
    glBindBuffer(GL_COPY_WRITE_BUFFER, to);
    glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, static_cast<GLintptr>(a), static_cast<GLintptr>(b),
                        static_cast<GLsizeiptr>(size));
}

void Device::synchronize() {
    wait_all();
    // Staging buffers of their own (larger than a quarter of the ring) are done with now.
    gl_->ring->collect();
    throw_reported();
}

// ---- Kernels ----------------------------------------------------------------------------------------------

TensorBinding Device::bind(const tf_tensor_desc &t, const char *op, const char *role, uint32_t index) {
    return tf_gpu::bind_pooled(caps_, this, label(), t, op, role, index);
}

void Device::dispatch(const DispatchArgs &args) {
    if (args.empty()) return;
    // A reporting kernel gets a word of its own, so its bits name its op and thread. All words
    // taken: wait once for the work so far and read them (before this dispatch's accesses are
    // recorded, which the wait's barrier would forget).
    uint64_t status_at = 0;
    if (args.reporting_op) {
        if (reports_.size() == report_slots) wait_all();
        reports_.emplace_back(args.reporting_op, caller_);
        status_at = reports_.size() * caps_.bind_align;
    }
    const GLuint program = program_for(args.kernel);
    const StreamRing::Span p = gl_->ring->take(args.params_size);
    std::memcpy(p.data, args.params, args.params_size);
    // Slot 0 is the output (written); the others are read.
    for (size_t s = 0; s < args.count; ++s)
        if (args.tensors[s].buffer)
            access(args.tensors[s].buffer->memory.owner->buffer.get(), args.tensors[s].offset,
                   args.tensors[s].offset + args.tensors[s].range, s == 0);
    if (gl_->bound_program != program) {
        glUseProgram(program);
        gl_->bound_program = program;
    }
    glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 0, p.buffer, static_cast<GLintptr>(p.offset),
                      static_cast<GLsizeiptr>(args.params_size));
    glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 1, gl_->status.get(), static_cast<GLintptr>(status_at), 4);
    for (uint32_t s = 0; s < tensor_slots; ++s) {
        if (s < args.count && args.tensors[s].buffer)
            glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 2 + s, args.tensors[s].buffer->memory.owner->buffer.get(),
                              static_cast<GLintptr>(args.tensors[s].offset),
                              static_cast<GLsizeiptr>(args.tensors[s].range));
        else
            glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 2 + s, gl_->status.get(), 0, 4);  // unused slots still need one
    }
    glDispatchCompute(args.groups[0], args.groups[1], args.groups[2]);
    ++counters_.dispatches;
}

void Device::access(GLuint buffer, uint64_t begin, uint64_t end, bool write) {
    for (const Touched &t : touched_) {
        if (t.buffer != buffer || t.end <= begin || end <= t.begin) continue;
        if (t.written || write) {
            barrier();
            break;
        }
    }
    touched_.push_back(Touched{buffer, begin, end, write});
    // A long run of independent work: one barrier is cheaper than scanning a long list.
    if (touched_.size() > 256) barrier();
}

void Device::barrier() {
    // Shader storage writes become visible to later dispatches (SSBO reads) and copies.
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT);
    touched_.clear();
    ++counters_.barriers;
}

void Device::wait_all() {
    // Shader writes, the status word's included, reach the mapped buffers before the fence.
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT | GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT);
    touched_.clear();
    ++counters_.barriers;
    SyncHandle fence(glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0));
    if (!fence) raise(TF_STATUS_INTERNAL, "%s: glFenceSync failed (GL error 0x%04x)", label(), glGetError());
    const GLenum result = glClientWaitSync(fence.get(), GL_SYNC_FLUSH_COMMANDS_BIT, GL_TIMEOUT_IGNORED);
    if (result == GL_WAIT_FAILED)
        raise(TF_STATUS_DEVICE_LOST, "%s: glClientWaitSync failed (GL error 0x%04x)", label(), glGetError());
    // The bits each reporting kernel set, kept for the thread that issued it.
    for (size_t i = 0; i < reports_.size(); ++i) {
        auto *word = reinterpret_cast<uint32_t *>(gl_->status_data + (i + 1) * caps_.bind_align);
        if (__atomic_exchange_n(word, 0u, __ATOMIC_SEQ_CST) == 0) continue;
        reported_.add(reports_[i].second, reports_[i].first);
    }
    reports_.clear();
    if (const GLenum error = glGetError(); error != GL_NO_ERROR) {
        raise(error == GL_OUT_OF_MEMORY ? TF_STATUS_OUT_OF_MEMORY : TF_STATUS_INTERNAL,
              "%s: GL error 0x%04x in the work since the last wait", label(), error);
    }
}

void Device::throw_reported() { reported_.throw_for(caller_, label()); }

}  // namespace tf_gl
