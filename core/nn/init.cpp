// Initialisers (torch.nn.init's formulas), seeded, written in place on the tensor's device; the
// seed helpers (mix_seed, permutation).
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "../errors.hpp"
#include "tinyfin/nn.hpp"

namespace tinyfin::nn {

using detail::raise;

std::vector<int64_t> permutation(int64_t n, uint64_t seed, int epoch) {
    if (n < 0) raise<ValueError>("permutation: n must be >= 0, got " + std::to_string(n));
    std::vector<int64_t> perm(static_cast<std::size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    uint64_t state = mix_seed(seed, 0x5eed0000ull + static_cast<uint64_t>(epoch));
    auto next = [&state] {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    };
    for (int64_t i = n - 1; i > 0; --i) {
        // Multiply-shift: unbiased enough for n < 2^32 (bias below 2^-32).
        auto j = static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(i + 1)) >> 64);
        std::swap(perm[i], perm[j]);
    }
    return perm;
}

uint64_t mix_seed(uint64_t seed, uint64_t stream) {
    // Two rounds of the splitmix64 finaliser over seed and stream.
    auto mix = [](uint64_t z) {
        z += 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    };
    return mix(mix(seed) ^ stream);
}

namespace init {

namespace {

void require_float(const Tensor &t, const char *op) {
    if (!t.defined()) raise<ValueError>(std::string(op) + ": the tensor is undefined");
    if (t.dtype() != DType::f32 && t.dtype() != DType::f16 && t.dtype() != DType::bf16)
        raise<DTypeError>(std::string(op) + ": needs a float tensor, got " + dtype_name(t.dtype()));
}

// Writes values into t without recording history.
Tensor fill_with(const Tensor &t, const Tensor &values) {
    NoGradGuard no_grad;
    Tensor target = t;
    target.assign_(values);
    return t;
}

double fan_of(const Tensor &t, FanMode mode, const char *op) {
    require_float(t, op);
    auto [fan_in, fan_out] = fans(t.shape());
    int64_t fan = mode == FanMode::fan_in ? fan_in : fan_out;
    if (fan == 0) raise<ValueError>(std::string(op) + ": fan is 0 for shape " + shape_str(t.shape()));
    return static_cast<double>(fan);
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, double param) {
    switch (nonlinearity) {
    case Nonlinearity::linear: return 1.0;
    case Nonlinearity::sigmoid: return 1.0;
    case Nonlinearity::tanh: return 5.0 / 3.0;
    case Nonlinearity::relu: return std::sqrt(2.0);
    case Nonlinearity::leaky_relu: return std::sqrt(2.0 / (1.0 + param * param));
    }
    raise<ValueError>("calculate_gain: unknown nonlinearity " + std::to_string(static_cast<int>(nonlinearity)));
}

std::pair<int64_t, int64_t> fans(const Shape &shape) {
    if (shape.size() < 2)
        raise<ShapeError>("fans: fan in and fan out need a tensor of rank >= 2, got shape " + shape_str(shape));
    int64_t receptive = 1;
    for (std::size_t i = 2; i < shape.size(); ++i) receptive *= shape[i];
    return {shape[1] * receptive, shape[0] * receptive};
}

Tensor uniform_(const Tensor &t, double low, double high, uint64_t seed) {
    require_float(t, "uniform_");
    if (!(low <= high)) raise<ValueError>("uniform_: low " + std::to_string(low) + " > high " + std::to_string(high));
    NoGradGuard no_grad;
    Tensor u = rand(t.shape(), seed, t.device());
    return fill_with(t, add(mul(u, scalar_like(u, high - low)), scalar_like(u, low)));
}

Tensor normal_(const Tensor &t, double mean, double std, uint64_t seed) {
    require_float(t, "normal_");
    if (!(std >= 0)) raise<ValueError>("normal_: std must be >= 0, got " + std::to_string(std));
    NoGradGuard no_grad;
    Tensor z = randn(t.shape(), seed, t.device());
    return fill_with(t, add(mul(z, scalar_like(z, std)), scalar_like(z, mean)));
}

Tensor constant_(const Tensor &t, double value) {
    require_float(t, "constant_");
    return fill_with(t, full({}, value, t.dtype(), t.device()));
}

Tensor zeros_(const Tensor &t) { return constant_(t, 0); }
Tensor ones_(const Tensor &t) { return constant_(t, 1); }

Tensor kaiming_uniform_(const Tensor &t, uint64_t seed, double a, FanMode mode, Nonlinearity nonlinearity) {
    double fan = fan_of(t, mode, "kaiming_uniform_");
    double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan);
    return uniform_(t, -bound, bound, seed);
}

Tensor kaiming_normal_(const Tensor &t, uint64_t seed, double a, FanMode mode, Nonlinearity nonlinearity) {
    double fan = fan_of(t, mode, "kaiming_normal_");
    return normal_(t, 0, calculate_gain(nonlinearity, a) / std::sqrt(fan), seed);
}

Tensor xavier_uniform_(const Tensor &t, uint64_t seed, double gain) {
    require_float(t, "xavier_uniform_");
    auto [fan_in, fan_out] = fans(t.shape());
    if (fan_in + fan_out == 0) raise<ValueError>("xavier_uniform_: fans are 0 for shape " + shape_str(t.shape()));
    double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    return uniform_(t, -bound, bound, seed);
}

Tensor xavier_normal_(const Tensor &t, uint64_t seed, double gain) {
    require_float(t, "xavier_normal_");
    auto [fan_in, fan_out] = fans(t.shape());
    if (fan_in + fan_out == 0) raise<ValueError>("xavier_normal_: fans are 0 for shape " + shape_str(t.shape()));
    return normal_(t, 0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), seed);
}

}  // namespace init
}  // namespace tinyfin::nn
