// One OpenGL device: an EGL display, its context on the device's own GL thread, the memory
// pool, the stream ring, the compiled programs and the status word of the kernels.
//
// Execution model. Every ABI call that touches GL runs on the device's thread (worker.hpp); the
// core's thread waits for the call, not for the GPU. An op issues its dispatches at once; GL
// executes commands in issue order, so a buffer range freed by the core is reused at once and a
// host write is a copy from the stream ring placed in the command stream (no wait). Shader writes
// are made visible by glMemoryBarrier, issued only before a dispatch or copy that touches a range
// written (or read, for a write) since the last barrier. The host waits on a fence only in
// buffer_read and synchronize (and when the stream ring laps the device, see memory.hpp).
#pragma once

#include <tinyfin/plugin_kit/gpu/reported_ops.hpp>

#include "kernel_device.hpp"
#include "memory.hpp"
#include "worker.hpp"

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tf_gl {

using tf_gpu::DeviceCaps;
using tf_gpu::DispatchArgs;
using tf_gpu::PipelineKey;
using tf_gpu::Shader;
using tf_gpu::tensor_slots;
using tf_gpu::TensorBinding;

// Start-up costs and counters shown by tinyfin-info.
struct DeviceCounters {
    double context_ms = 0;  // EGL context, GLEW, limits
    double compile_ms = 0;  // programs compiled so far, in total
    uint64_t programs = 0;  // programs compiled
    uint64_t dispatches = 0;
    uint64_t barriers = 0;  // glMemoryBarrier calls
};

class Device final : public tf_gpu::KernelDevice {
public:
    // Starts the device's GL thread and makes the context there. Throws a failure.
    static std::unique_ptr<Device> create(int index, EglTarget target);
    // Ends the work, deletes every GL object on the GL thread, then stops the thread.
    ~Device();
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;

    // Runs f on the device's GL thread (every member below except caps(), label(), info() and
    // list_features() must be called that way).
    template <class F>
    auto call(F &&f) {
        const std::thread::id caller = std::this_thread::get_id();
        return thread_->call([&]() -> decltype(auto) {
            caller_ = caller;
            return f();
        });
    }

    const DeviceCaps &caps() const noexcept override { return caps_; }
    // "opengl:0 (llvmpipe (LLVM 15.0.6, 256 bits))", for messages.
    const char *label() const noexcept { return label_.c_str(); }
    void info(tf_device_info &out) const;
    void list_features(tf_feature_fn emit, void *user) const;

    // ---- Buffers ----
    tf_buffer *allocate(uint64_t size) override;
    void free(tf_buffer *buffer) noexcept override;
    void write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size) override;
    // Waits for the work before it, then copies out.
    void read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size);
    void copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size);
    // Waits for everything issued so far.
    void synchronize();

    // ---- Kernels (tf_gpu::KernelDevice) ----
    TensorBinding bind(const tf_tensor_desc &tensor, const char *op, const char *role, uint32_t index) override;
    void dispatch(const DispatchArgs &args) override;

private:
    // A byte range of a GL buffer touched since the last barrier.
    struct Touched {
        GLuint buffer;
        uint64_t begin, end;
        bool written;
    };
    // Everything that lives in the context; created and destroyed on the GL thread.
    struct GlState {
        EglTarget target;
        ContextHandle context;
        std::unique_ptr<MemoryPool> pool;
        std::unique_ptr<StreamRing> ring;
        // Mapped words, bind_align apart, for the kernels' TF_ERR_* bits: word 0 for kernels that
        // never report, word i + 1 for the i-th reporting dispatch since the last wait.
        BufferHandle status;
        char *status_data = nullptr;
        std::map<PipelineKey, ProgramHandle> programs;
        GLuint bound_program = 0;

        ~GlState() {
            // GL objects before the context they belong to, and the context before the display.
            programs.clear();
            ring.reset();
            pool.reset();
            status.reset();
            context.reset();
        }
    };

    Device() = default;
    void start(EglTarget target);  // on the GL thread
    GLuint program_for(const PipelineKey &key);
    // Issues a barrier when the range [begin, end) of buffer was written (or, when write is
    // true, touched at all) since the last one, then records the access.
    void access(GLuint buffer, uint64_t begin, uint64_t end, bool write);
    void barrier();
    // Fence after everything issued, waited for; then the kernels' status bits are read.
    void wait_all();
    // Throws INVALID_ARGUMENT for bad data the kernels of ops the calling thread issued reported.
    void throw_reported();

    int index_ = 0;
    std::string label_;
    DeviceCaps caps_{};
    // Immutable after start(): read by info() and list_features() on any thread.
    std::string source_, version_, renderer_, vendor_, glsl_, uuid_;
    bool software_ = false;
    uint64_t memory_total_ = 0;
    GLint max_group_size_[3] = {}, max_invocations_ = 0, max_shared_ = 0, binary_formats_ = 0;
    GLint64 max_block_size_ = 0;
    DeviceCounters counters_;  // written on the GL thread, read by list_features

    std::unique_ptr<GlState> gl_;
    std::vector<Touched> touched_;
    std::unordered_set<tf_buffer *> live_;  // not yet freed by the core: released at shutdown
    std::thread::id caller_;  // the core's thread whose call runs now
    // The reporting dispatches since the last wait: op and calling thread, by status word.
    std::vector<std::pair<const char *, std::thread::id>> reports_;
    // Ops whose kernels reported bad data, comma-separated, by the thread that issued them;
    // thrown at that thread's next read or synchronize.
    tf_kit::gpu::ReportedOps reported_;
    std::unique_ptr<Worker> thread_;  // last: destroyed first, after ~device emptied gl_ on it
};

}  // namespace tf_gl
