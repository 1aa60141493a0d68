// Device memory: the caching allocator, pinned staging buffers and the ABI's buffer members.
// Transfers are ordered on the device's stream like everything else: a write returns once its
// bytes sit in a pinned staging slot (the copy to the device is queued), a read waits for the
// stream to reach its copy.
#include <algorithm>
#include <bit>
#include <cstring>

#include "context.hpp"

namespace tf_cuda {

namespace {

constexpr uint64_t small_limit = uint64_t{1} << 20;  // 1 MiB: power-of-two classes up to here
constexpr uint64_t large_step = uint64_t{2} << 20;  // 2 MiB: multiples above
constexpr uint64_t max_buffer = uint64_t{1} << 48;  // larger requests cannot be real
constexpr size_t staging_slots = 4;
constexpr uint64_t staging_bytes = uint64_t{4} << 20;  // per slot

char *bytes_of(const tf_buffer *buffer, uint64_t offset) { return static_cast<char *>(buffer->ptr) + offset; }

}  // namespace

// ---- Allocator -----------------------------------------------------------------------------------------

Allocator::~Allocator() { release_cache(); }

uint64_t Allocator::size_class(uint64_t size) {
    if (size <= 512) return 512;
    if (size <= small_limit) return std::bit_ceil(size);
    return (size + large_step - 1) / large_step * large_step;
}

cudaError_t Allocator::allocate(uint64_t size, void **out) {
    *out = nullptr;
    const uint64_t bytes = size_class(size);
    auto cached = free_.find(bytes);
    if (cached != free_.end() && !cached->second.empty()) {
        *out = cached->second.back();
        cached->second.pop_back();
        cached_bytes_ -= bytes;
    } else {
        cudaError_t e = cudaMalloc(out, bytes);
        if (e == cudaErrorMemoryAllocation) {
            // Blocks of other sizes may be what stands in the way.
            cudaGetLastError();
            release_cache();
            e = cudaMalloc(out, bytes);
        }
        if (e != cudaSuccess) {
            cudaGetLastError();  // allocation failures are not sticky: clear them
            *out = nullptr;
            return e;
        }
        ++mallocs_;
    }
    live_bytes_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    return cudaSuccess;
}

void Allocator::release(void *block, uint64_t size) {
    if (!block) return;
    const uint64_t bytes = size_class(size);
    free_[bytes].push_back(block);
    cached_bytes_ += bytes;
    live_bytes_ -= std::min(live_bytes_, bytes);
}

void Allocator::release_cache() {
    for (auto &[bytes, blocks] : free_)
        for (void *block : blocks) cudaFree(block);
    free_.clear();
    cached_bytes_ = 0;
}

// ---- Scratch ---------------------------------------------------------------------------------------------

cudaError_t Scratch::allocate(Device &device, uint64_t size) {
    if (size == 0) return cudaSuccess;
    void *block = nullptr;
    const cudaError_t e = device.allocator.allocate(size, &block);
    block_ = std::unique_ptr<void, AllocatorRelease>(block, AllocatorRelease{&device.allocator, size});
    return e;
}

cudaError_t create_staging(Device &device) {
    for (size_t i = 0; i < staging_slots; ++i) {
        StagingSlot slot;
        void *host = nullptr;
        if (cudaError_t e = cudaHostAlloc(&host, staging_bytes, cudaHostAllocPortable); e != cudaSuccess) return e;
        slot.host.reset(host);
        cudaEvent_t event = nullptr;
        if (cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming); e != cudaSuccess) return e;
        slot.done.reset(event);
        device.staging.push_back(std::move(slot));
    }
    return cudaSuccess;
}

// ---- Buffers ------------------------------------------------------------------------------------------

tf_status CudaPlugin::buffer_alloc(int32_t index, uint64_t size, tf_buffer **out, tf_error *err) {
    return guarded(err, "buffer_alloc", [&]() -> tf_status {
        if (!out) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: out is NULL");
        *out = nullptr;
        Device *device = device_at(index, err);
        if (!device) return TF_STATUS_INVALID_ARGUMENT;
        if (size == 0) return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_alloc: size is 0");
        if (size > max_buffer)
            return fail(err, TF_STATUS_OUT_OF_MEMORY, "buffer_alloc: %llu bytes on cuda:%d is beyond any device",
                        static_cast<unsigned long long>(size), index);
        auto buffer = std::make_unique<tf_buffer>(tf_buffer{device, nullptr, size});
        std::lock_guard lock(device->mutex);
        if (cudaError_t e = make_current(*device); e != cudaSuccess)
            return cuda_fail(err, "buffer_alloc: cudaSetDevice", e);
        if (cudaError_t e = device->allocator.allocate(size, &buffer->ptr); e != cudaSuccess) {
            char what[TF_TEXT_SIZE];
            std::snprintf(what, sizeof what, "buffer_alloc: %llu bytes on cuda:%d (%llu in use, %llu cached)",
                          static_cast<unsigned long long>(size), index,
                          static_cast<unsigned long long>(device->allocator.live_bytes()),
                          static_cast<unsigned long long>(device->allocator.cached_bytes()));
            return cuda_fail(err, what, e);
        }
        device->live_buffers.insert(buffer.get());
        *out = buffer.release();
        return TF_STATUS_OK;
    });
}

void CudaPlugin::buffer_free(tf_buffer *buffer) {
    if (!buffer) return;
    Device *device = buffer->device;
    {
        std::lock_guard lock(device->mutex);
        // No wait: the block only goes back to the cache, and whoever gets it next queues behind
        // the work that still uses it.
        device->allocator.release(buffer->ptr, buffer->size);
        device->live_buffers.erase(buffer);
    }
    delete buffer;
}

tf_status CudaPlugin::buffer_write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size, tf_error *err) {
    if (tf_status s = check_buffer_range("buffer_write", buffer, offset, size, src, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    Device &device = *buffer->device;
    std::lock_guard lock(device.mutex);
    if (cudaError_t e = make_current(device); e != cudaSuccess) return cuda_fail(err, "buffer_write: cudaSetDevice", e);
    const auto *from = static_cast<const char *>(src);
    for (uint64_t done = 0; done < size;) {
        const uint64_t n = std::min(size - done, staging_bytes);
        StagingSlot &slot = device.staging[device.next_slot];
        device.next_slot = (device.next_slot + 1) % device.staging.size();
        // The slot's previous copy must have left it; in steady state it has long since.
        if (cudaError_t e = cudaEventSynchronize(slot.done.get()); e != cudaSuccess)
            return cuda_fail(err, "buffer_write: waiting for a staging buffer", e);
        std::memcpy(slot.host.get(), from + done, n);
        if (cudaError_t e = cudaMemcpyAsync(bytes_of(buffer, offset + done), slot.host.get(), n, cudaMemcpyHostToDevice,
                                            device.stream.get());
            e != cudaSuccess)
            return cuda_fail(err, "buffer_write: cudaMemcpyAsync", e);
        if (cudaError_t e = cudaEventRecord(slot.done.get(), device.stream.get()); e != cudaSuccess)
            return cuda_fail(err, "buffer_write: cudaEventRecord", e);
        done += n;
    }
    return TF_STATUS_OK;
}

tf_status CudaPlugin::buffer_read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size, tf_error *err) {
    if (tf_status s = check_buffer_range("buffer_read", buffer, offset, size, dst, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    Device &device = *buffer->device;
    std::lock_guard lock(device.mutex);
    if (cudaError_t e = make_current(device); e != cudaSuccess) return cuda_fail(err, "buffer_read: cudaSetDevice", e);
    // Chunks through the slots in turn, up to one per slot in flight: the copy of chunk k + slots
    // is queued as soon as the host has taken chunk k out of its slot.
    const size_t slots = device.staging.size();
    const uint64_t chunks = (size + staging_bytes - 1) / staging_bytes;
    auto chunk_size = [&](uint64_t k) { return std::min(size - k * staging_bytes, staging_bytes); };
    auto enqueue = [&](uint64_t k) -> cudaError_t {
        StagingSlot &slot = device.staging[k % slots];
        if (cudaError_t e = cudaMemcpyAsync(slot.host.get(), bytes_of(buffer, offset + k * staging_bytes),
                                            chunk_size(k), cudaMemcpyDeviceToHost, device.stream.get());
            e != cudaSuccess)
            return e;
        return cudaEventRecord(slot.done.get(), device.stream.get());
    };
    for (uint64_t k = 0; k < chunks && k < slots; ++k)
        if (cudaError_t e = enqueue(k); e != cudaSuccess) return cuda_fail(err, "buffer_read: cudaMemcpyAsync", e);
    auto *to = static_cast<char *>(dst);
    for (uint64_t k = 0; k < chunks; ++k) {
        StagingSlot &slot = device.staging[k % slots];
        // The first wait also drains every op queued before the read: a kernel's error shows here.
        if (cudaError_t e = cudaEventSynchronize(slot.done.get()); e != cudaSuccess)
            return cuda_fail(err, "buffer_read: waiting for the device", e);
        if (k == 0)
            if (tf_status s = take_data_error(device, err); s != TF_STATUS_OK) return s;
        std::memcpy(to + k * staging_bytes, slot.host.get(), chunk_size(k));
        if (k + slots < chunks)
            if (cudaError_t e = enqueue(k + slots); e != cudaSuccess)
                return cuda_fail(err, "buffer_read: cudaMemcpyAsync", e);
    }
    return TF_STATUS_OK;
}

tf_status CudaPlugin::buffer_copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset,
                                  uint64_t size, tf_error *err) {
    const char *any = "";  // no host memory in a copy
    if (tf_status s = check_buffer_range("buffer_copy", dst, dst_offset, size, any, err); s != TF_STATUS_OK) return s;
    if (tf_status s = check_buffer_range("buffer_copy", src, src_offset, size, any, err); s != TF_STATUS_OK) return s;
    if (size == 0) return TF_STATUS_OK;
    if (dst->device != src->device)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "buffer_copy: buffers on cuda:%d and cuda:%d", dst->device->index,
                    src->device->index);
    Device &device = *dst->device;
    std::lock_guard lock(device.mutex);
    if (cudaError_t e = make_current(device); e != cudaSuccess) return cuda_fail(err, "buffer_copy: cudaSetDevice", e);
    cudaStream_t stream = device.stream.get();
    const bool overlap = dst == src && dst_offset < src_offset + size && src_offset < dst_offset + size;
    if (!overlap) {
        if (cudaError_t e = cudaMemcpyAsync(bytes_of(dst, dst_offset), bytes_of(src, src_offset), size,
                                            cudaMemcpyDeviceToDevice, stream);
            e != cudaSuccess)
            return cuda_fail(err, "buffer_copy: cudaMemcpyAsync", e);
        return TF_STATUS_OK;
    }
    // memmove semantics through a scratch block: cudaMemcpy does not promise them.
    Scratch scratch;
    if (cudaError_t e = scratch.allocate(device, size); e != cudaSuccess)
        return cuda_fail(err, "buffer_copy: scratch for an overlapping copy", e);
    cudaError_t e = cudaMemcpyAsync(scratch.get(), bytes_of(src, src_offset), size, cudaMemcpyDeviceToDevice, stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(bytes_of(dst, dst_offset), scratch.get(), size, cudaMemcpyDeviceToDevice, stream);
    return e == cudaSuccess ? TF_STATUS_OK : cuda_fail(err, "buffer_copy: cudaMemcpyAsync", e);
}

}  // namespace tf_cuda
