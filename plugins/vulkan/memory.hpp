// Device memory: large VkDeviceMemory blocks, each with one VkBuffer over all of it, carved into
// ranges by a first-fit free list. Tensors, staging copies and the per-batch parameter buffers
// are ranges; nothing calls vkAllocateMemory per tensor.
#pragma once

#include <tinyfin/plugin_kit/gpu/free_list.hpp>

#include "context.hpp"
#include "kernel_device.hpp"

#include <map>
#include <memory>
#include <vector>

namespace tf_vk {

class Device;
struct MemoryBlock;

// A range of one block (offset: also in its VkBuffer; size: a multiple of the pool's alignment).
// Empty (owner == nullptr) when nothing is held.
using Allocation = tf_kit::gpu::BlockRange<MemoryBlock>;

struct MemoryBlock {
    MemoryHandle memory;
    BufferHandle buffer;
    uint64_t size = 0;
    // Host address of byte 0 when the pool maps its memory, else nullptr.
    char *mapped = nullptr;
    // One request bigger than the pool's block size: freed as soon as it is released.
    bool dedicated = false;
    // Its free ranges (first fit) and the bytes in use.
    tf_kit::gpu::FreeList ranges;
};

class MemoryPool {
public:
    struct Options {
        uint32_t type_index;
        // Map every block persistently (the memory type is HOST_VISIBLE and HOST_COHERENT).
        bool map;
        uint64_t heap_size;
        uint64_t max_allocation;  // maxMemoryAllocationSize
        uint64_t block_size;
        uint64_t alignment;  // of every range; >= minStorageBufferOffsetAlignment
        const char *label;  // "vulkan:0 (llvmpipe)" for messages
    };

    MemoryPool(VkDevice device, const Options &opts) : device_(device), opts_(opts) {}
    MemoryPool(const MemoryPool &) = delete;
    MemoryPool &operator=(const MemoryPool &) = delete;

    // A range of at least size bytes. Throws OUT_OF_MEMORY with the sizes involved.
    Allocation allocate(uint64_t size);
    // Returns the range; frees a dedicated block, and empty blocks beyond one spare.
    void release(Allocation &range) noexcept;

    bool mapped() const noexcept { return opts_.map; }
    // Bytes held in blocks (used or not).
    uint64_t reserved() const noexcept { return blocks_.reserved(); }

private:
    std::unique_ptr<MemoryBlock> new_block(uint64_t size);

    VkDevice device_;
    Options opts_;
    tf_kit::gpu::BlockSet<MemoryBlock> blocks_;
};

using tf_gpu::align_down;
using tf_gpu::align_up;

}  // namespace tf_vk

// The ABI's opaque buffer: a range of the device's memory pool.
struct tf_buffer {
    tf_vk::Device *owner;
    tf_vk::Allocation memory;
    // Bytes the core asked for: reads, writes, copies and tensor views stay inside them.
    uint64_t size;
    // Serial of the last batch that used the buffer; the buffer is busy while that batch runs.
    uint64_t last_use;
};
