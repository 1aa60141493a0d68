// The free byte ranges of one memory block, first fit, coalesced when a range comes back, and the
// set of blocks a pool carves into buffers: the part of a GPU plugin's memory pool that does not
// depend on its API (the vulkan and opengl plugins' pools are this and how a block is made).
#pragma once

#include <tinyfin/plugin_kit/errors.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace tf_kit TF_KIT_HIDDEN {
namespace gpu {

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

// A range of one block of a BlockSet; empty (owner == nullptr) when nothing is held.
template <class Block>
struct BlockRange {
    Block *owner = nullptr;
    uint64_t offset = 0;  // bytes from the start of the block
    uint64_t size = 0;  // bytes reserved
};

// The blocks of a memory pool (each a Block with `uint64_t size`, `bool dedicated` and a FreeList
// `ranges`) and the bytes they hold: the part of the vulkan and opengl pools that does not
// depend on the API.
template <class Block>
class BlockSet {
public:
    // Where need bytes go: a request above dedicated_above gets a block of its own (dedicated,
    // freed when released), so large and small tensors do not fragment each other; others take
    // the first shared block with room, else a new block of block_size. new_block(size) makes the
    // API's block of size bytes (a std::unique_ptr<Block>); it may throw.
    template <class NewBlock>
    BlockRange<Block> take(uint64_t need, uint64_t dedicated_above, uint64_t block_size, NewBlock &&new_block) {
        uint64_t offset = 0;
        if (need <= dedicated_above)
            for (const auto &block : blocks_)
                if (!block->dedicated && block->ranges.take(need, &offset)) return {block.get(), offset, need};
        Block &block = add(new_block(need > dedicated_above ? need : block_size));
        block.dedicated = need > dedicated_above;
        block.ranges.take(need, &offset);
        return {&block, offset, need};
    }

    // Returns a range take() gave. The block, if now empty, is destroyed (its memory goes back to
    // the driver) when it is dedicated or another empty shared block is already kept as the spare.
    void give(BlockRange<Block> &range) noexcept {
        if (!range.owner) return;
        Block &block = *range.owner;
        range.owner = nullptr;
        block.ranges.give(range.offset, range.size);
        if (block.ranges.used() != 0) return;
        const bool spare_exists = std::any_of(blocks_.begin(), blocks_.end(), [&](const auto &b) {
            return b.get() != &block && !b->dedicated && b->ranges.used() == 0;
        });
        if (!block.dedicated && !spare_exists) return;
        reserved_ -= block.size;
        blocks_.erase(std::find_if(blocks_.begin(), blocks_.end(), [&](const auto &b) { return b.get() == &block; }));
    }

    // Bytes held in blocks (used or not), and the blocks made so far.
    uint64_t reserved() const noexcept { return reserved_; }
    uint64_t created() const noexcept { return created_; }

private:
    Block &add(std::unique_ptr<Block> block) {
        block->ranges = FreeList(block->size);
        reserved_ += block->size;
        ++created_;
        blocks_.push_back(std::move(block));
        return *blocks_.back();
    }

    std::vector<std::unique_ptr<Block>> blocks_;
    uint64_t reserved_ = 0;
    uint64_t created_ = 0;
};

}  // namespace gpu
}  // namespace TF_KIT_HIDDEN
