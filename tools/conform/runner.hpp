// Running one case on one plugin through plugin.h: buffers with sentinel bytes around every
// tensor, the call, and the checks that need no reference (no write outside the outputs' elements,
// inputs unchanged).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cases.hpp"

namespace conform {

// A loaded, initialised backend as the core holds it; device 0 is the one tested.
struct Target {
    std::string name;
    const tf_plugin *table = nullptr;
    int32_t device = 0;
    bool host_addressable = false;
};

// Both sides of the comparison: every tensor's buffer contents, sentinels included.
struct Images {
    std::vector<std::vector<uint8_t>> inputs, outputs;
};

// The inputs' bytes (deterministic from the case's seed) and outputs full of sentinels.
Images make_images(const Case &c);

// A descriptor of the case, memory left NULL: what supports() is asked.
bool claims(const Target &target, const Case &c);

struct RunResult {
    bool ok = false;
    std::string error;  // a failed call or a broken rule, when !ok
    Images after;  // buffers read back after the run
    double seconds = 0;  // wall time of the last run + synchronize
};

// Allocates, writes, runs (repeat times; the last is timed alone when repeat == 1, else all
// are averaged), synchronises and reads everything back. Checks the sentinels and the inputs.
RunResult run_case(const Target &target, const Case &c, const Images &before, int repeat = 1);

// Row-major values of output `index` decoded to double.
std::vector<double> output_values(const Case &c, std::size_t index, const std::vector<uint8_t> &image);

// Row-major values of any tensor of the case (input or output image) decoded to double.
std::vector<double> tensor_values(const TensorSpec &t, const std::vector<uint8_t> &image);

// v rounded to dtype (round to nearest even for floats; integers and bool as encode stores them).
double round_to(double v, int32_t dtype);

// Bytes before a tensor's storage in its image: k_pad, or for a quantized tensor the whole blocks
// that cover k_pad.
std::size_t quant_pad(const TensorSpec &t);

// Bytes of padding before and after every tensor's storage.
inline constexpr std::size_t k_pad = 64;
inline constexpr uint8_t k_output_sentinel = 0xC3;
inline constexpr uint8_t k_input_sentinel = 0x5A;

}  // namespace conform
