// GL buffer memory: tensors are ranges of large buffers (first-fit free lists), and host copies
// and kernel parameters go through a persistently mapped stream ring. Nothing calls
// glBufferStorage per tensor in steady state. Everything here runs on the device's GL thread.
#ifndef TINYFIN_OPENGL_MEMORY_HPP
#define TINYFIN_OPENGL_MEMORY_HPP

#include "context.hpp"
#include "free_list.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace tf_gl {

class device;

struct memory_block {
    buffer_handle buffer;
    uint64_t size = 0;
    // One request bigger than the block size: deleted as soon as it is released.
    bool dedicated = false;
    // Its free ranges (first fit) and the bytes in use.
    tf_kernels::free_list ranges;
};

// A range of one block; empty (owner == nullptr) when nothing is held.
struct allocation {
    memory_block *owner = nullptr;
    uint64_t offset = 0;
    uint64_t size = 0;
};

// Device-local buffers (glBufferStorage without client access) carved into ranges.
class memory_pool {
public:
    memory_pool(uint64_t block_size, uint64_t alignment, const char *label)
        : block_size_(block_size), alignment_(alignment), label_(label) {}
    memory_pool(const memory_pool &) = delete;
    memory_pool &operator=(const memory_pool &) = delete;

    // A range of at least size bytes. Throws OUT_OF_MEMORY when the driver refuses a block.
    allocation allocate(uint64_t size);
    // Returns the range (GL orders later commands after earlier ones, so it may be reused at once);
    // deletes a dedicated block, and empty blocks beyond one spare.
    void release(allocation &range) noexcept;
    uint64_t reserved() const noexcept { return reserved_; }
    uint64_t blocks_created() const noexcept { return blocks_created_; }

private:
    memory_block &new_block(uint64_t size);

    uint64_t block_size_, alignment_;
    const char *label_;
    std::vector<std::unique_ptr<memory_block>> blocks_;
    uint64_t reserved_ = 0;
    uint64_t blocks_created_ = 0;
};

// A host-visible buffer mapped persistently and coherently, used as a ring: parameters, upload
// and readback staging. A quarter of the ring is reused only after a fence placed when it was
// left has signalled, so the host waits here only if the device is a whole ring behind. A
// request bigger than a quarter gets a buffer of its own, deleted once its fence has signalled.
class stream_ring {
public:
    struct span {
        GLuint buffer;
        uint64_t offset;
        char *data;
    };

    stream_ring(uint64_t size, uint64_t alignment);
    stream_ring(const stream_ring &) = delete;
    stream_ring &operator=(const stream_ring &) = delete;

    // size bytes the host may write now and the device read in commands issued after.
    span take(uint64_t size);
    // Deletes oversized buffers whose fences have signalled.
    void collect() noexcept;

private:
    struct oversized {
        buffer_handle buffer;
        sync_handle done;
        char *data;
    };
    buffer_handle buffer_;
    char *data_ = nullptr;
    uint64_t size_, quarter_, alignment_;
    uint64_t head_ = 0;           // next free byte, inside quarter quarter_index_
    uint64_t quarter_index_ = 0;  // explicit: head_ may sit exactly on the next quarter's start
    sync_handle fences_[4];
    std::vector<oversized> oversized_;
};

// A buffer of size bytes with persistent coherent read/write mapping (*data); throws OUT_OF_MEMORY.
buffer_handle mapped_buffer(uint64_t size, char **data);

}  // namespace tf_gl

// The ABI's opaque buffer: a range of the device's memory pool.
struct tf_buffer {
    tf_gl::device *owner;
    tf_gl::allocation memory;
    // Bytes the core asked for: reads, writes, copies and views stay inside them.
    uint64_t size;
};

#endif
