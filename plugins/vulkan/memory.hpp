// Device memory: large VkDeviceMemory blocks, each with one VkBuffer over all of it, carved into
// ranges by a first-fit free list. Tensors, staging copies and the per-batch parameter buffers
// are ranges; nothing calls vkAllocateMemory per tensor.
#ifndef TINYFIN_VULKAN_MEMORY_HPP
#define TINYFIN_VULKAN_MEMORY_HPP

#include "context.hpp"
#include "free_list.hpp"

#include <map>
#include <memory>
#include <vector>

namespace tf_vk {

class device;
struct memory_block;

// A range of one block. Empty (owner == nullptr) when nothing is held.
struct allocation {
    memory_block *owner = nullptr;
    uint64_t offset = 0;  // bytes from the start of the block (and of its VkBuffer)
    uint64_t size = 0;    // bytes reserved, a multiple of the pool's alignment
};

struct memory_block {
    memory_handle memory;
    buffer_handle buffer;
    uint64_t size = 0;
    // Host address of byte 0 when the pool maps its memory, else nullptr.
    char *mapped = nullptr;
    // One request bigger than the pool's block size: freed as soon as it is released.
    bool dedicated = false;
    // Its free ranges (first fit) and the bytes in use.
    tf_kernels::free_list ranges;
};

class memory_pool {
public:
    struct options {
        uint32_t type_index;
        // Map every block persistently (the memory type is HOST_VISIBLE and HOST_COHERENT).
        bool map;
        uint64_t heap_size;
        uint64_t max_allocation;  // maxMemoryAllocationSize
        uint64_t block_size;
        uint64_t alignment;       // of every range; >= minStorageBufferOffsetAlignment
        const char *label;        // "vulkan:0 (llvmpipe)" for messages
    };

    memory_pool(VkDevice device, const options &opts) : device_(device), opts_(opts) {}
    memory_pool(const memory_pool &) = delete;
    memory_pool &operator=(const memory_pool &) = delete;

    // A range of at least size bytes. Throws OUT_OF_MEMORY with the sizes involved.
    allocation allocate(uint64_t size);
    // Returns the range; frees a dedicated block, and empty blocks beyond one spare.
    void release(allocation &range) noexcept;

    bool mapped() const noexcept { return opts_.map; }
    // Bytes held in blocks (used or not).
    uint64_t reserved() const noexcept { return reserved_; }

private:
    memory_block &new_block(uint64_t size);

    VkDevice device_;
    options opts_;
    std::vector<std::unique_ptr<memory_block>> blocks_;
    uint64_t reserved_ = 0;
};

using tf_kernels::align_down;
using tf_kernels::align_up;

}  // namespace tf_vk

// The ABI's opaque buffer: a range of the device's memory pool.
struct tf_buffer {
    tf_vk::device *owner;
    tf_vk::allocation memory;
    // Bytes the core asked for: reads, writes, copies and tensor views stay inside them.
    uint64_t size;
    // Serial of the last batch that used the buffer; the buffer is busy while that batch runs.
    uint64_t last_use;
};

#endif
