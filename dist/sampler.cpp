// ShardedSampler: each rank's slice of every global batch of a common per-epoch permutation;
// checksum of parameters.
#include <algorithm>
#include <numeric>

#include "tinyfin/dist.hpp"

namespace tinyfin::dist {

ShardedSampler::ShardedSampler(int64_t dataset_size, int64_t global_batch, int world_size, int rank, uint64_t seed,
                               bool shuffle)
    : n_(dataset_size), global_batch_(global_batch), world_(world_size), rank_(rank), seed_(seed), shuffle_(shuffle) {
    if (dataset_size < 0 || global_batch < 1)
        throw ValueError("ValueError: ShardedSampler: dataset size " + std::to_string(dataset_size) +
                         " and global batch " + std::to_string(global_batch) + " must be >= 0 and >= 1");
    if (world_size < 1 || rank < 0 || rank >= world_size)
        throw ValueError("ValueError: ShardedSampler: rank " + std::to_string(rank) + " is not in a world of " +
                         std::to_string(world_size));
    set_epoch(0);
}

void ShardedSampler::set_epoch(int epoch) {
    if (shuffle_) {
        order_ = nn::permutation(n_, seed_, epoch);
        return;
    }
    order_.resize(static_cast<std::size_t>(n_));
    std::iota(order_.begin(), order_.end(), 0);
}

int64_t ShardedSampler::steps() const { return (n_ + global_batch_ - 1) / global_batch_; }

int64_t ShardedSampler::global_batch_size(int64_t step) const {
    if (step < 0 || step >= steps())
        throw ValueError("ValueError: ShardedSampler: step " + std::to_string(step) + " is outside 0.." +
                         std::to_string(steps() - 1));
    return std::min(global_batch_, n_ - step * global_batch_);
}

std::vector<int64_t> ShardedSampler::batch(int64_t step) const {
    int64_t size = global_batch_size(step);
    // Balanced split: rank r takes [r*size/W, (r+1)*size/W).
    int64_t begin = step * global_batch_ + size * rank_ / world_;
    int64_t end = step * global_batch_ + size * (rank_ + 1) / world_;
    return {order_.begin() + begin, order_.begin() + end};
}

int64_t ShardedSampler::shard_size() const {
    int64_t total = 0;
    for (int64_t s = 0; s < steps(); ++s) {
        int64_t size = global_batch_size(s);
        total += size * (rank_ + 1) / world_ - size * rank_ / world_;
    }
    return total;
}

uint64_t checksum(const std::vector<Tensor> &tensors) {
    uint64_t h = 1469598103934665603ull;
    std::vector<unsigned char> bytes;
    for (const Tensor &t : tensors) {
        bytes.resize(t.nbytes());
        t.copy_to_host(bytes.data(), bytes.size());
        for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
    }
    return h;
}

}  // namespace tinyfin::dist
