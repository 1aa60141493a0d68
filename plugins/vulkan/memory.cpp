// The block allocator behind every buffer.
#include "memory.hpp"

#include <algorithm>

namespace tf_vk {

std::unique_ptr<MemoryBlock> MemoryPool::new_block(uint64_t size) {
    if (size > opts_.heap_size)
        raise(TF_STATUS_OUT_OF_MEMORY, "cannot allocate %llu bytes on %s: the device heap has %llu bytes",
              static_cast<unsigned long long>(size), opts_.label, static_cast<unsigned long long>(opts_.heap_size));
    if (size > opts_.max_allocation)
        raise(TF_STATUS_OUT_OF_MEMORY, "cannot allocate %llu bytes on %s: one allocation may have at most %llu bytes",
              static_cast<unsigned long long>(size), opts_.label,
              static_cast<unsigned long long>(opts_.max_allocation));

    auto block = std::make_unique<MemoryBlock>();
    VkBufferCreateInfo buffer_info{};
    buffer_info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    buffer_info.size = size;
    buffer_info.usage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    buffer_info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkBuffer buffer = VK_NULL_HANDLE;
    check(vkCreateBuffer(device_, &buffer_info, nullptr, &buffer), "vkCreateBuffer");
    block->buffer = BufferHandle(device_, buffer);

    VkMemoryRequirements needs;
    vkGetBufferMemoryRequirements(device_, buffer, &needs);
    if (!(needs.memoryTypeBits & (1u << opts_.type_index)))
        raise(TF_STATUS_INTERNAL, "%s: storage buffers cannot use memory type %u", opts_.label, opts_.type_index);
    VkMemoryAllocateInfo alloc_info{};
    alloc_info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    alloc_info.allocationSize = needs.size;
    alloc_info.memoryTypeIndex = opts_.type_index;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkResult result = vkAllocateMemory(device_, &alloc_info, nullptr, &memory);
    if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY)
        raise(TF_STATUS_OUT_OF_MEMORY,
              "cannot allocate %llu bytes on %s: vkAllocateMemory failed with %s (%llu bytes held in blocks)",
              static_cast<unsigned long long>(needs.size), opts_.label, result_name(result),
              static_cast<unsigned long long>(blocks_.reserved()));
    check(result, "vkAllocateMemory");
    block->memory = MemoryHandle(device_, memory);
    check(vkBindBufferMemory(device_, buffer, memory, 0), "vkBindBufferMemory");
    if (opts_.map) {
        void *host = nullptr;
        check(vkMapMemory(device_, memory, 0, VK_WHOLE_SIZE, 0, &host), "vkMapMemory");
        block->mapped = static_cast<char *>(host);  // unmapped by vkFreeMemory
    }
    block->size = size;
    return block;
}

Allocation MemoryPool::allocate(uint64_t size) {
    if (size == 0) size = 1;
    if (size > UINT64_MAX - opts_.alignment)
        raise(TF_STATUS_OUT_OF_MEMORY, "cannot allocate %llu bytes on %s", static_cast<unsigned long long>(size),
              opts_.label);
    const uint64_t need = align_up(size, opts_.alignment);
    return blocks_.take(need, opts_.block_size / 2, opts_.block_size, [&](uint64_t n) { return new_block(n); });
}

void MemoryPool::release(Allocation &range) noexcept { blocks_.give(range); }

}  // namespace tf_vk
