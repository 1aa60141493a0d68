// Checking quantize's output (a block-quantized tensor) from the formats' definitions, with
// conform's own reading of the blocks (docs/quantization.md's table), never a plugin's codec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cases.hpp"
#include "check.hpp"

namespace conform {

// Every block of `out` (its image as run_case reads it back) against `x`, the input's values in
// row-major order:
// - the fields the definition fixes exactly: q8_0's d = f16(amax / 127); q4_0's and q5_0's
//   d = f16(max / -8) and f16(max / -16) (max: the value of largest magnitude, sign kept);
//   q4_1's and q5_1's d = f16((max - min) / 15 or 31) and m = f16(min); q8_k's f32 d =
//   1 / (-127 / max) and bsums = the sums of 16 quants; the k-quants' scale search ends with
//   its largest 6-bit scale and min at 63 (q4_k, q5_k) and its largest int8 scale at -128 (q6_k);
// - every level is the nearest on its grid (clamped to the format's range): the 32-formats
//   round x / d with the unrounded d of the definition, the k-quants round with the scales the
//   block stores (the reference encoders' last step);
// - the round trip: each value dequantized (from the stored fields) within |step| / 2 of x, plus
//   the distance of x outside the grid's range and the f16 rounding of the stored scale and min;
//   the k-quants' scales (a search) are held to a looser bound from the super-block's range.
// nmse holds the largest error / bound ratio of the round trip (pass: <= 1), tolerance 1.
Verdict check_quantized(const TensorSpec &out, const std::vector<uint8_t> &image, const std::vector<double> &x);

// Bit for bit: the blocks of `got` equal those of `want` (the cpu plugin's).
Verdict compare_blocks(const TensorSpec &out, const std::vector<uint8_t> &got, const std::vector<uint8_t> &want);

}  // namespace conform
