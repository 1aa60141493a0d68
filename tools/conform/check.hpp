// Comparing a backend's outputs with the float64 reference (compare_reference), or with the cpu
// plugin's for an op without one (compare).
#pragma once

#include <string>
#include <vector>

#include "cases.hpp"
#include "reference.hpp"

namespace conform {

// The largest normalised mean squared error accepted for an output of this dtype:
// sum((got - want)^2) / sum(want^2) over the finite elements. Integer and bool outputs
// must match exactly (tolerance 0).
double tolerance(const Case &c, int32_t dtype);

struct Verdict {
    bool pass = true;
    double nmse = 0;
    double tolerance = 0;
    std::string detail;  // why it failed, naming the first bad element
};

// NaN must meet NaN and an infinity the same infinity; the rest is held to the tolerance.
Verdict compare(const Case &c, std::size_t output, const std::vector<double> &got, const std::vector<double> &want);

// The float64 reference's bound for one element of an output of this dtype:
// unit(dtype) |exact| + 2^-24 k scale + the dtype's smallest normal (subnormals may flush).
// unit: 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16), the largest relative error of one rounding
// to nearest; k and scale from the reference (docs/numerics.md, "The float64 reference").
double unit_roundoff(int32_t dtype);
double element_bound(int32_t dtype, double exact, double scale, double k);

// Every element within its bound (integer and bool outputs: equal); NaN where the exact result
// is NaN; an infinity where the exact result rounded to the dtype is that infinity. nmse holds
// the largest error / bound ratio (pass: <= 1), tolerance 1.
Verdict compare_reference(int32_t dtype, const std::vector<double> &got, const RefOutput &want);

}  // namespace conform
