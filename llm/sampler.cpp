// Sampler (sampler.hpp).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include <tinyfin/llm/sampler.hpp>

namespace tinyfin::llm {

Sampler::Sampler(const SamplingOptions &options, uint64_t stream)
    : options_(options), rng_(options.seed * 0x9E3779B97F4A7C15ull + stream) {
    if (!(options.temperature >= 0) || !(options.top_p > 0 && options.top_p <= 1) ||
        !(options.min_p >= 0 && options.min_p <= 1) || !(options.repetition_penalty > 0) || options.top_k < 0)
        throw ValueError("ValueError: sampling: temperature >= 0, 0 < top_p <= 1, 0 <= min_p <= 1, top_k >= 0 and "
                         "repetition_penalty > 0 are required");
}

int32_t Sampler::sample(std::span<const float> logits_in, std::span<const int32_t> history) {
    std::vector<float> logits(logits_in.begin(), logits_in.end());
    const auto vocab = static_cast<int64_t>(logits.size());
    if (options_.repetition_penalty != 1) {
        std::unordered_set<int32_t> seen(history.begin(), history.end());
        for (int32_t t : seen)
            if (t >= 0 && t < vocab) {
                float &l = logits[static_cast<std::size_t>(t)];
                l = l > 0 ? static_cast<float>(l / options_.repetition_penalty)
                          : static_cast<float>(l * options_.repetition_penalty);
            }
    }
    if (options_.temperature == 0)
        return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    // Candidates sorted by logit (ties by id, so the order is deterministic).
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    auto by_logit = [&](int32_t a, int32_t b) {
        const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
        return la > lb || (la == lb && a < b);
    };
    std::size_t n = ids.size();
    if (options_.top_k > 0 && static_cast<std::size_t>(options_.top_k) < n) {
        n = static_cast<std::size_t>(options_.top_k);
        std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), by_logit);
    } else {
        std::sort(ids.begin(), ids.end(), by_logit);
    }
    ids.resize(n);
    // Softmax of logit / temperature over the candidates, in double.
    std::vector<double> p(n);
    const double top = logits[static_cast<std::size_t>(ids[0])];
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = std::exp((logits[static_cast<std::size_t>(ids[i])] - top) / options_.temperature);
        total += p[i];
    }
    for (double &x : p) x /= total;
    if (options_.top_p < 1) {
        // The smallest prefix whose probability reaches top_p.
        double cum = 0;
        std::size_t keep = 0;
        while (keep < n) {
            cum += p[keep++];
            if (cum >= options_.top_p) break;
        }
        n = keep;
    }
    if (options_.min_p > 0) {
        const double floor = options_.min_p * p[0];
        std::size_t keep = 1;
        while (keep < n && p[keep] >= floor) ++keep;
        n = keep;
    }
    double mass = 0;
    for (std::size_t i = 0; i < n; ++i) mass += p[i];
    // A uniform double in [0, mass) from 53 random bits.
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * mass;
    double cum = 0;
    for (std::size_t i = 0; i < n; ++i) {
        cum += p[i];
        if (u < cum) return ids[i];
    }
    return ids[n - 1];
}

}  // namespace tinyfin::llm
