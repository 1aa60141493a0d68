// The free byte ranges of one memory block, first fit, coalesced when a range comes back: how
// the vulkan and opengl memory pools carve their large blocks into tensors.
#ifndef TINYFIN_GPU_FREE_LIST_HPP
#define TINYFIN_GPU_FREE_LIST_HPP

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace tf_kernels {

class FreeList {
public:
    // No bytes; a block of size bytes, all free.
    FreeList() = default;
    explicit FreeList(uint64_t size) { free_.emplace(0, size); }

    // Takes size bytes from the first free range that holds them: their offset in *offset, or
    // false when no range does.
    bool take(uint64_t size, uint64_t *offset) {
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->second < size) continue;
            const uint64_t at = it->first, left = it->second - size;
            free_.erase(it);
            if (left > 0) free_.emplace(at + size, left);
            used_ += size;
            *offset = at;
            return true;
        }
        return false;
    }

    // Returns a range take() gave, merged with free neighbours.
    void give(uint64_t offset, uint64_t size) noexcept {
        used_ -= size;
        auto it = free_.emplace(offset, size).first;
        if (it != free_.begin()) {
            auto prev = std::prev(it);
            if (prev->first + prev->second == it->first) {
                prev->second += it->second;
                free_.erase(it);
                it = prev;
            }
        }
        if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
            it->second += next->second;
            free_.erase(next);
        }
    }

    // Bytes taken and not given back.
    uint64_t used() const noexcept { return used_; }

private:
    std::map<uint64_t, uint64_t> free_;  // offset -> size of every free range
    uint64_t used_ = 0;
};

// Where a pool puts need bytes among its blocks (each with `bool dedicated` and a FreeList
// `ranges`): a request above dedicated_above gets a block of its own (dedicated, freed when
// released), so large and small tensors do not fragment each other; others take the first shared
// block with room, else a new block of block_size. new_block(size) adds a block to blocks and
// returns it. Returns the block and the offset of the range.
template <class Block, class NewBlock>
std::pair<Block *, uint64_t> place(const std::vector<std::unique_ptr<Block>> &blocks, uint64_t need,
                                   uint64_t dedicated_above, uint64_t block_size, NewBlock &&new_block) {
    uint64_t offset = 0;
    if (need > dedicated_above) {
        Block &block = new_block(need);
        block.dedicated = true;
        block.ranges.take(need, &offset);
        return {&block, offset};
    }
    for (const auto &block : blocks)
        if (!block->dedicated && block->ranges.take(need, &offset)) return {block.get(), offset};
    Block &block = new_block(block_size);
    block.ranges.take(need, &offset);
    return {&block, offset};
}

// Returns [offset, offset + size) to block, one of blocks (each with `uint64_t size` besides the
// above). The block, if now empty, leaves blocks (destroyed: its memory goes back to the driver)
// when it is dedicated or another empty shared block is already kept as the spare. Returns the
// bytes that left (block.size), or 0.
template <class Block>
uint64_t give_back(std::vector<std::unique_ptr<Block>> &blocks, Block &block, uint64_t offset, uint64_t size) noexcept {
    block.ranges.give(offset, size);
    if (block.ranges.used() != 0) return 0;
    const bool spare_exists = std::any_of(blocks.begin(), blocks.end(), [&](const auto &b) {
        return b.get() != &block && !b->dedicated && b->ranges.used() == 0;
    });
    if (!block.dedicated && !spare_exists) return 0;
    const uint64_t freed = block.size;
    blocks.erase(std::find_if(blocks.begin(), blocks.end(), [&](const auto &b) { return b.get() == &block; }));
    return freed;
}

}  // namespace tf_kernels

#endif
