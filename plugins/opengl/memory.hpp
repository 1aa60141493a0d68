// GL buffer memory: tensors are ranges of large buffers (first-fit free lists), and host copies
// and kernel parameters go through a persistently mapped stream ring. Nothing calls
// glBufferStorage per tensor in steady state. Everything here runs on the device's GL thread.
#pragma once

#include <tinyfin/plugin_kit/gpu/free_list.hpp>

#include "context.hpp"
#include "kernel_device.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace tf_gl {

class Device;

struct MemoryBlock {
    BufferHandle buffer;
    uint64_t size = 0;
    // One request bigger than the block size: deleted as soon as it is released.
    bool dedicated = false;
    // Its free ranges (first fit) and the bytes in use.
    tf_kit::gpu::FreeList ranges;
};

// A range of one block; empty (owner == nullptr) when nothing is held.
using Allocation = tf_kit::gpu::BlockRange<MemoryBlock>;

// Device-local buffers (glBufferStorage without client access) carved into ranges.
class MemoryPool {
public:
    MemoryPool(uint64_t block_size, uint64_t alignment, const char *label)
        : block_size_(block_size), alignment_(alignment), label_(label) {}
    MemoryPool(const MemoryPool &) = delete;
    MemoryPool &operator=(const MemoryPool &) = delete;

    // A range of at least size bytes. Throws OUT_OF_MEMORY when the driver refuses a block.
    Allocation allocate(uint64_t size);
    // Returns the range (GL orders later commands after earlier ones, so it may be reused at once);
    // deletes a dedicated block, and empty blocks beyond one spare.
    void release(Allocation &range) noexcept;
    uint64_t reserved() const noexcept { return blocks_.reserved(); }
    uint64_t blocks_created() const noexcept { return blocks_.created(); }

private:
    std::unique_ptr<MemoryBlock> new_block(uint64_t size);

    uint64_t block_size_, alignment_;
    const char *label_;
    tf_kit::gpu::BlockSet<MemoryBlock> blocks_;
};

// A host-visible buffer mapped persistently and coherently, used as a ring: parameters, upload
// and readback staging. A quarter of the ring is reused only after a fence placed when it was
// left has signalled, so the host waits here only if the device is a whole ring behind. A
// request bigger than a quarter gets a buffer of its own, deleted once its fence has signalled.
class StreamRing {
public:
    struct Span {
        GLuint buffer;
        uint64_t offset;
        char *data;
    };

    StreamRing(uint64_t size, uint64_t alignment);
    StreamRing(const StreamRing &) = delete;
    StreamRing &operator=(const StreamRing &) = delete;

    // size bytes the host may write now and the device read in commands issued after.
    Span take(uint64_t size);
    // Deletes oversized buffers whose fences have signalled.
    void collect() noexcept;

private:
    struct Oversized {
        BufferHandle buffer;
        SyncHandle done;
        char *data;
    };
    BufferHandle buffer_;
    char *data_ = nullptr;
    uint64_t size_, quarter_, alignment_;
    uint64_t head_ = 0;  // next free byte, inside quarter quarter_index_
    uint64_t quarter_index_ = 0;  // explicit: head_ may sit exactly on the next quarter's start
    SyncHandle fences_[4];
    std::vector<Oversized> oversized_;
};

// A buffer of size bytes with persistent coherent read/write mapping (*data); throws OUT_OF_MEMORY.
BufferHandle mapped_buffer(uint64_t size, char **data);

}  // namespace tf_gl

// The ABI's opaque buffer: a range of the device's memory pool.
struct tf_buffer {
    tf_gl::Device *owner;
    tf_gl::Allocation memory;
    // Bytes the core asked for: reads, writes, copies and views stay inside them.
    uint64_t size;
};
