// Comparing a backend's outputs with the cpu reference's.
#pragma once

#include <string>
#include <vector>

#include "cases.hpp"

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

}  // namespace conform
