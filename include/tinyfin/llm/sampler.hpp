// Choosing the next token from logits: the sampling rules of GenerationOptions.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <tinyfin/llm/model.hpp>

namespace tinyfin::llm {

// One sequence's sampler: its own seeded generator, so a seed gives the same tokens whatever
// else runs. Rules are applied in llama.cpp's and transformers' order: repetition penalty,
// temperature, top-k, top-p, min-p, then a draw.
class Sampler {
public:
    explicit Sampler(const SamplingOptions &options, uint64_t stream = 0);
    // history: the tokens the repetition penalty applies to.
    int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

private:
    SamplingOptions options_;
    std::mt19937_64 rng_;
};

}  // namespace tinyfin::llm
