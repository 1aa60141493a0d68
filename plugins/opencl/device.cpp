// Device enumeration, start-up, buffers, dispatch and waits (see device.hpp).
#include "device.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace tf_cl {

namespace {

// Status words for reporting dispatches between two waits; one more wait when they run out.
constexpr uint64_t report_slots = 64;
// Host writes staged (copied) while the device has not caught up: past this, wait first.
constexpr uint64_t max_staged_bytes = 64ull << 20;
// Freed buffers kept for reuse (device.hpp, cached_).
constexpr uint64_t max_cached_bytes = 256ull << 20;

template <class T>
T device_value(const ClApi &api, cl_device_id id, cl_device_info what) {
    T value{};
    api.clGetDeviceInfo(id, what, sizeof value, &value, nullptr);
    return value;
}

// A text property through a clGet*Info call query(size, value, &size_ret): the size, then the text;
// "" when there is none.
template <class Query>
std::string info_text(Query query) {
    size_t size = 0;
    if (query(0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
    std::string text(size, '\0');
    query(size, text.data(), nullptr);
    text.resize(std::strlen(text.c_str()));
    return text;
}

std::string device_text(const ClApi &api, cl_device_id id, cl_device_info what) {
    return info_text([&](size_t n, void *v, size_t *got) { return api.clGetDeviceInfo(id, what, n, v, got); });
}

std::string platform_text(const ClApi &api, cl_platform_id id, cl_platform_info what) {
    return info_text([&](size_t n, void *v, size_t *got) { return api.clGetPlatformInfo(id, what, n, v, got); });
}

double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void check(cl_int code, const char *what, const char *label) {
    if (code == CL_SUCCESS) return;
    const bool memory = code == CL_MEM_OBJECT_ALLOCATION_FAILURE || code == CL_OUT_OF_RESOURCES ||
                        code == CL_OUT_OF_HOST_MEMORY || code == CL_INVALID_BUFFER_SIZE;
    raise(memory ? TF_STATUS_OUT_OF_MEMORY : TF_STATUS_INTERNAL, "%s: %s failed: %s (%d)", label, what,
          error_name(code), code);
}

std::vector<DeviceTarget> find_devices(const ClApi &api, std::string &why) {
    std::vector<DeviceTarget> out;
    cl_uint platforms = 0;
    cl_int code = api.clGetPlatformIDs(0, nullptr, &platforms);
    if (code != CL_SUCCESS || platforms == 0) {
        why = "no OpenCL platform: the ICD loader " + api.path + " found no driver (" +
              (code == CL_SUCCESS ? std::string("0 platforms") : error_name(code)) +
              "; install one, e.g. pocl-opencl-icd, or check /etc/OpenCL/vendors)";
        return out;
    }
    std::vector<cl_platform_id> ids(platforms);
    api.clGetPlatformIDs(platforms, ids.data(), nullptr);
    for (cl_platform_id platform : ids) {
        cl_uint count = 0;
        const cl_device_type types = CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR | CL_DEVICE_TYPE_CPU;
        if (api.clGetDeviceIDs(platform, types, 0, nullptr, &count) != CL_SUCCESS || count == 0) continue;
        std::vector<cl_device_id> devices(count);
        api.clGetDeviceIDs(platform, types, count, devices.data(), nullptr);
        for (cl_device_id id : devices) {
            if (!device_value<cl_bool>(api, id, CL_DEVICE_AVAILABLE) ||
                !device_value<cl_bool>(api, id, CL_DEVICE_COMPILER_AVAILABLE))
                continue;
            out.push_back(DeviceTarget{platform, id, platform_text(api, platform, CL_PLATFORM_NAME)});
        }
    }
    if (out.empty())
        why = "no available OpenCL device with a compiler on " + std::to_string(platforms) + " platform(s)";
    return out;
}

// ---- Start-up and shutdown ---------------------------------------------------------------------------

std::unique_ptr<Device> Device::create(int index, const ClApi &api, const DeviceTarget &target,
                                       const ClBlastLibrary *blas) {
    std::unique_ptr<Device> d(new Device(api));
    d->index_ = index;
    d->blas_ = blas;
    if (blas) d->rows_.push_back(matmul_library_row());
    for (const tf_gpu::KernelRow &row : tf_gpu::kernels())
        if (tf_shaders::shader_code_of(row.shader).size != 0) d->rows_.push_back(row);
    d->start(target);
    return d;
}

void Device::start(const DeviceTarget &target) {
    const auto begin = std::chrono::steady_clock::now();
    const cl_device_id id = target.id;
    name_ = device_text(api_, id, CL_DEVICE_NAME);
    vendor_ = device_text(api_, id, CL_DEVICE_VENDOR);
    driver_ = device_text(api_, id, CL_DRIVER_VERSION);
    version_ = device_text(api_, id, CL_DEVICE_VERSION);
    c_version_ = device_text(api_, id, CL_DEVICE_OPENCL_C_VERSION);
    extensions_ = device_text(api_, id, CL_DEVICE_EXTENSIONS);
    platform_ = target.platform_name;
    label_ = "opencl:" + std::to_string(index_) + " (" + name_ + ")";
    // A CPU device (pocl, Intel's CPU runtime) runs the kernels on the host: a software device,
    // used under TINYFIN_BACKEND=auto only when named, like lavapipe.
    software_ = (device_value<cl_device_type>(api_, id, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_CPU) != 0;
    memory_total_ = device_value<cl_ulong>(api_, id, CL_DEVICE_GLOBAL_MEM_SIZE);
    max_alloc_ = device_value<cl_ulong>(api_, id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    local_memory_ = device_value<cl_ulong>(api_, id, CL_DEVICE_LOCAL_MEM_SIZE);
    compute_units_ = device_value<cl_uint>(api_, id, CL_DEVICE_MAX_COMPUTE_UNITS);
    max_group_ = device_value<size_t>(api_, id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
    const cl_uint base_align_bits = device_value<cl_uint>(api_, id, CL_DEVICE_MEM_BASE_ADDR_ALIGN);
    if (max_group_ < 256)
        raise(TF_STATUS_UNAVAILABLE, "%s allows %zu work-items per group; the kernels need 256", label(), max_group_);
    if (local_memory_ < 16384)
        raise(TF_STATUS_UNAVAILABLE, "%s has %llu bytes of local memory; the kernels need 16384", label(),
              static_cast<unsigned long long>(local_memory_));
    // Element indices are 32-bit words: one tensor spans at most 2 GiB, and one cl_mem at most
    // what the device allocates at once.
    caps_.max_binding = std::min<uint64_t>(max_alloc_, 1ull << 31);
    caps_.bind_align = std::max<uint64_t>(16, base_align_bits / 8);
    caps_.max_groups[0] = caps_.max_groups[1] = caps_.max_groups[2] = 65535;

    cl_int code = CL_SUCCESS;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                           reinterpret_cast<cl_context_properties>(target.platform), 0};
    context_ = ContextHandle(api_.clCreateContext(props, 1, &id, nullptr, nullptr, &code), {&api_});
    check(code, "clCreateContext", label());
    queue_ = QueueHandle(api_.clCreateCommandQueue(context_.get(), id, 0, &code), {&api_});
    check(code, "clCreateCommandQueue", label());
    const uint64_t status_bytes = (report_slots + 1) * 4;
    status_ = MemHandle(api_.clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, status_bytes, nullptr, &code), {&api_});
    check(code, "clCreateBuffer (status words)", label());
    const cl_uint zero = 0;
    check(
        api_.clEnqueueFillBuffer(queue_.get(), status_.get(), &zero, sizeof zero, 0, status_bytes, 0, nullptr, nullptr),
        "clEnqueueFillBuffer", label());
    target_id_ = id;
    counters_.context_ms = ms_since(begin);
    log_message(TF_LOG_DEBUG, "%s: %s, %s, context in %.1f ms", label(), version_.c_str(), driver_.c_str(),
                counters_.context_ms);
}

Device::~Device() {
    if (queue_) api_.clFinish(queue_.get());
    for (tf_buffer *buffer : live_) {
        api_.clReleaseMemObject(buffer->memory);
        delete buffer;
    }
    live_.clear();
    drop_cache();
    kernels_.clear();
    status_.reset();
    queue_.reset();
    context_.reset();
}

// ---- Information -----------------------------------------------------------------------------------------

void Device::info(tf_device_info &out) const {
    const uint64_t memory_free = 0;  // OpenCL has no portable query
    out = tf_kit::device_info_of(software_ ? TF_DEVICE_KIND_GPU_SOFTWARE : TF_DEVICE_KIND_OTHER, memory_total_,
                                 memory_free, name_.c_str(), "");
}

void Device::list_features(tf_feature_fn emit, void *user) const {
    const tf_kit::FeatureList features(emit, user, index_);
    features.put_all("platform", platform_, "name", name_, "vendor", vendor_, "driver", driver_, "version", version_,
                     "opencl_c", c_version_);
    features.put("kind", software_ ? "software (CPU device; used under auto only when named)" : "hardware");
    features.putf("compute_units", "%u", compute_units_);
    features.putf("global_memory", "%llu bytes (largest allocation %llu)",
                  static_cast<unsigned long long>(memory_total_), static_cast<unsigned long long>(max_alloc_));
    features.putf("local_memory", "%llu bytes", static_cast<unsigned long long>(local_memory_));
    features.putf("max_work_group_size", "%zu", max_group_);
    features.put("gemm", blas_ ? "CLBlast (matmul), own kernels otherwise" : "own kernels (CLBlast not loaded)");
    features.putf("startup_context", "%.1f ms", counters_.context_ms);
    features.putf("programs", "%llu built in %.1f ms, %llu from the cache (%s)",
                  static_cast<unsigned long long>(counters_.built), counters_.build_ms,
                  static_cast<unsigned long long>(counters_.cached),
                  cache_dir_.empty() ? "no cache" : cache_dir_.c_str());
    features.putf("work", "%llu dispatches, %llu CLBlast GEMMs, %llu waits",
                  static_cast<unsigned long long>(counters_.dispatches),
                  static_cast<unsigned long long>(counters_.gemm_library),
                  static_cast<unsigned long long>(counters_.waits));
    features.putf("buffer_cache", "%llu bytes in %zu freed buffers kept for reuse (at most %llu)",
                  static_cast<unsigned long long>(cached_bytes_), cached_.size(),
                  static_cast<unsigned long long>(max_cached_bytes));
}

// ---- Buffers --------------------------------------------------------------------------------------------

tf_buffer *Device::allocate(uint64_t size) {
    // Whole words plus the kernels' rounding (bind_view reads up to the next multiple of 4).
    const uint64_t bytes = tf_gpu::align_up(size, 256);
    // A freed buffer of this size: the in-order queue runs the commands of its last owner first.
    if (auto found = cached_.find(bytes); found != cached_.end()) {
        auto buffer = std::make_unique<tf_buffer>(tf_buffer{this, found->second, size});
        cached_.erase(found);
        cached_bytes_ -= bytes;
        live_.insert(buffer.get());
        allocated_ += bytes;
        return buffer.release();
    }
    if (bytes <= max_alloc_ && bytes > memory_total_ - std::min(allocated_ + cached_bytes_, memory_total_))
        drop_cache();
    if (bytes > max_alloc_ || bytes > memory_total_ - std::min(allocated_, memory_total_))
        raise(TF_STATUS_OUT_OF_MEMORY,
              "%s: cannot allocate %llu bytes: %llu of %llu bytes are in use and one buffer may hold at most %llu",
              label(), static_cast<unsigned long long>(size), static_cast<unsigned long long>(allocated_),
              static_cast<unsigned long long>(memory_total_), static_cast<unsigned long long>(max_alloc_));
    cl_int code = CL_SUCCESS;
    cl_mem memory = api_.clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, bytes, nullptr, &code);
    if (code != CL_SUCCESS && !cached_.empty()) {
        drop_cache();
        memory = api_.clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, bytes, nullptr, &code);
    }
    check(code, "clCreateBuffer", label());
    auto buffer = std::make_unique<tf_buffer>(tf_buffer{this, memory, size});
    live_.insert(buffer.get());
    allocated_ += bytes;
    return buffer.release();
}

void Device::free(tf_buffer *buffer) noexcept {
    live_.erase(buffer);
    const uint64_t bytes = tf_gpu::align_up(buffer->size, 256);
    allocated_ -= std::min(allocated_, bytes);
    if (cached_bytes_ + bytes <= max_cached_bytes) {
        try {
            cached_.emplace(bytes, buffer->memory);
            cached_bytes_ += bytes;
            delete buffer;
            return;
        } catch (...) {
            // No room in the map: release it instead.
        }
    }
    // OpenCL keeps the memory until the commands that use it have finished.
    api_.clReleaseMemObject(buffer->memory);
    delete buffer;
}

void Device::drop_cache() noexcept {
    for (const auto &[bytes, memory] : cached_) api_.clReleaseMemObject(memory);
    cached_.clear();
    cached_bytes_ = 0;
}

cl_mem Device::memory_of(tf_buffer *buffer) const { return buffer->memory; }

void Device::write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size) {
    if (staged_bytes_ + size > max_staged_bytes) wait_all();
    // The copy lives until the next wait, so the write need not block.
    std::vector<char> &copy =
        staged_.emplace_back(static_cast<const char *>(src), static_cast<const char *>(src) + size);
    staged_bytes_ += size;
    check(api_.clEnqueueWriteBuffer(queue_.get(), buffer->memory, CL_FALSE, offset, size, copy.data(), 0, nullptr,
                                    nullptr),
          "clEnqueueWriteBuffer", label());
}

void Device::read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size) {
    check(api_.clEnqueueReadBuffer(queue_.get(), buffer->memory, CL_TRUE, offset, size, dst, 0, nullptr, nullptr),
          "clEnqueueReadBuffer", label());
    wait_all();
    throw_reported();
}

void Device::copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size) {
    if (dst == src && src_offset < dst_offset + size && dst_offset < src_offset + size) {
        // clEnqueueCopyBuffer refuses overlapping ranges of one buffer: through a temporary one.
        cl_int code = CL_SUCCESS;
        MemHandle mid(api_.clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, size, nullptr, &code), {&api_});
        check(code, "clCreateBuffer", label());
        check(api_.clEnqueueCopyBuffer(queue_.get(), src->memory, mid.get(), src_offset, 0, size, 0, nullptr, nullptr),
              "clEnqueueCopyBuffer", label());
        check(api_.clEnqueueCopyBuffer(queue_.get(), mid.get(), dst->memory, 0, dst_offset, size, 0, nullptr, nullptr),
              "clEnqueueCopyBuffer", label());
    } else {
        check(api_.clEnqueueCopyBuffer(queue_.get(), src->memory, dst->memory, src_offset, dst_offset, size, 0, nullptr,
                                       nullptr),
              "clEnqueueCopyBuffer", label());
    }
    flush();
}

void Device::synchronize() {
    wait_all();
    throw_reported();
}

void Device::flush() { api_.clFlush(queue_.get()); }

// ---- Kernels ----------------------------------------------------------------------------------------------

TensorBinding Device::bind(const tf_tensor_desc &t, const char *op, const char *role, uint32_t index) {
    tf_buffer *buffer = t.buffer;
    if (!buffer || buffer->owner != this)
        raise(TF_STATUS_INVALID_ARGUMENT, "%s: %s %u is not a buffer of %s", op, role, index, label());
    return tf_gpu::bind_view(caps_, t, buffer, 0, buffer->size, op, role, index);
}

void Device::dispatch(const tf_gpu::DispatchArgs &args) {
    const PipelineKey &key = args.kernel;
    const TensorBinding *tensors = args.tensors;
    const size_t count = args.count;
    const uint32_t groups_x = args.groups[0], groups_y = args.groups[1], groups_z = args.groups[2];
    if (groups_x == 0 || groups_y == 0 || groups_z == 0) return;
    // A reporting kernel gets a word of its own, so its bits name its op and thread.
    cl_uint status_word = 0;
    if (args.reporting_op) {
        if (reports_.size() == report_slots) wait_all();
        reports_.emplace_back(args.reporting_op, caller_);
        status_word = static_cast<cl_uint>(reports_.size());
    }
    const cl_kernel kernel = kernel_for(key);
    cl_uint offsets[8] = {};
    offsets[5] = status_word;
    cl_int code = api_.clSetKernelArg(kernel, 0, args.params_size, args.params);
    if (code == CL_SUCCESS) {
        cl_mem status = status_.get();
        code = api_.clSetKernelArg(kernel, 1, sizeof status, &status);
    }
    for (uint32_t s = 0; s < tensor_slots && code == CL_SUCCESS; ++s) {
        // Unused slots still need a buffer: the status words, never touched.
        cl_mem memory = s < count && tensors[s].buffer ? tensors[s].buffer->memory : status_.get();
        if (s < count && tensors[s].buffer) offsets[s] = static_cast<cl_uint>(tensors[s].offset / 4);
        code = api_.clSetKernelArg(kernel, 2 + s, sizeof memory, &memory);
    }
    if (code == CL_SUCCESS) code = api_.clSetKernelArg(kernel, 7, sizeof offsets, offsets);
    check(code, "clSetKernelArg", label());
    size_t local[3] = {256, 1, 1};
    if (key.kernel == Shader::gemm) local[0] = local[1] = 8;
    if (key.kernel == Shader::attention) local[0] = 64;
    const size_t global[3] = {groups_x * local[0], groups_y * local[1], groups_z * local[2]};
    check(api_.clEnqueueNDRangeKernel(queue_.get(), kernel, 3, nullptr, global, local, 0, nullptr, nullptr),
          "clEnqueueNDRangeKernel", label());
    ++counters_.dispatches;
}

void Device::wait_all() {
    ++counters_.waits;
    check(api_.clFinish(queue_.get()), "clFinish", label());
    staged_.clear();
    staged_bytes_ = 0;
    if (reports_.empty()) return;
    std::vector<cl_uint> words(reports_.size() + 1);
    check(api_.clEnqueueReadBuffer(queue_.get(), status_.get(), CL_TRUE, 0, words.size() * 4, words.data(), 0, nullptr,
                                   nullptr),
          "clEnqueueReadBuffer (status words)", label());
    const cl_uint zero = 0;
    check(api_.clEnqueueFillBuffer(queue_.get(), status_.get(), &zero, sizeof zero, 0, words.size() * 4, 0, nullptr,
                                   nullptr),
          "clEnqueueFillBuffer", label());
    // The bits each reporting kernel set, kept for the thread that issued it.
    for (size_t i = 0; i < reports_.size(); ++i) {
        if (words[i + 1] == 0) continue;
        reported_.add(reports_[i].second, reports_[i].first);
    }
    reports_.clear();
}

void Device::throw_reported() { reported_.throw_for(caller_, label()); }

}  // namespace tf_cl
