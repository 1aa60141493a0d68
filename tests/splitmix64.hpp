// splitmix64: the tests' seeded generator, the same stream on every run and machine (the
// reference values of tests/ops, gradcheck's inputs, the hand-built quantized blocks).
#pragma once

#include <cstdint>

namespace test_support {

// The next 64 random bits of the stream whose state is `state`.
inline uint64_t next(uint64_t &state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// A double uniform in [0, 1) from the top 53 bits of the next draw.
inline double next_unit(uint64_t &state) { return static_cast<double>(next(state) >> 11) * 0x1.0p-53; }

}  // namespace test_support
