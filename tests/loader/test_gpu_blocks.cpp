// The memory bookkeeping of the plugin kit's GPU shell (plugin_kit/gpu/free_list.hpp) on its own, against
// hand-worked offsets: first-fit ranges that coalesce, and BlockSet's policy (a request above the
// dedicated limit gets a block of its own, freed at once; one empty shared block stays as the
// spare; a block that cannot be made leaves the set as it was). vulkan's and opengl's memory pools
// keep only how a block is made.
#include <doctest/doctest.h>

#include <tinyfin/plugin_kit/gpu/free_list.hpp>

#include <cstdint>
#include <memory>
#include <new>

namespace {

struct Block {
    uint64_t size = 0;
    bool dedicated = false;
    tf_kit::gpu::FreeList ranges;
};

}  // namespace

TEST_CASE("gpu: FreeList takes first fit and coalesces what comes back") {
    tf_kit::gpu::FreeList list(100);
    uint64_t a = 0, b = 0, c = 0;
    REQUIRE(list.take(30, &a));
    REQUIRE(list.take(30, &b));
    REQUIRE(list.take(40, &c));
    CHECK(a == 0);
    CHECK(b == 30);
    CHECK(c == 60);
    uint64_t none = 0;
    CHECK_FALSE(list.take(1, &none));
    list.give(b, 30);
    CHECK(list.used() == 70);
    list.give(a, 30);  // merges with b's range
    uint64_t d = 0;
    REQUIRE(list.take(60, &d));
    CHECK(d == 0);
    list.give(d, 60);
    list.give(c, 40);  // all one range again
    CHECK(list.used() == 0);
    REQUIRE(list.take(100, &d));
    CHECK(d == 0);
}

TEST_CASE("gpu: BlockSet shares blocks, dedicates large requests and keeps one spare") {
    tf_kit::gpu::BlockSet<Block> set;
    auto make = [](uint64_t n) {
        auto block = std::make_unique<Block>();
        block->size = n;
        return block;
    };
    auto a = set.take(100, 1000, 1000, make);
    REQUIRE(a.owner);
    CHECK(a.offset == 0);
    CHECK(a.size == 100);
    CHECK(set.reserved() == 1000);
    auto b = set.take(200, 1000, 1000, make);
    CHECK(b.owner == a.owner);
    CHECK(b.offset == 100);

    auto big = set.take(5000, 1000, 1000, make);  // above the limit: a block of its own
    CHECK(big.owner != a.owner);
    CHECK(big.owner->dedicated);
    CHECK(big.owner->size == 5000);
    CHECK(set.reserved() == 6000);
    set.give(big);  // freed at once
    CHECK(big.owner == nullptr);
    CHECK(set.reserved() == 1000);
    set.give(big);  // an empty range: nothing

    set.give(a);
    set.give(b);  // the block is empty and the only one: kept as the spare
    CHECK(set.reserved() == 1000);
    CHECK(set.created() == 2);
    auto c = set.take(900, 1000, 1000, make);  // the spare, no new block
    CHECK(set.created() == 2);
    auto d = set.take(900, 1000, 1000, make);  // no room: a second shared block
    CHECK(set.created() == 3);
    CHECK(d.owner != c.owner);
    CHECK(set.reserved() == 2000);
    set.give(c);  // empty, no other empty shared block: the spare
    CHECK(set.reserved() == 2000);
    set.give(d);  // empty beside the spare: destroyed
    CHECK(set.reserved() == 1000);
}

TEST_CASE("gpu: BlockSet is unchanged when a block cannot be made") {
    tf_kit::gpu::BlockSet<Block> set;
    auto refuse = [](uint64_t) -> std::unique_ptr<Block> { throw std::bad_alloc(); };
    CHECK_THROWS_AS(set.take(10, 1000, 1000, refuse), std::bad_alloc);
    CHECK_THROWS_AS(set.take(5000, 1000, 1000, refuse), std::bad_alloc);
    CHECK(set.reserved() == 0);
    CHECK(set.created() == 0);
}
