// grad mode: backward through autograd on each backend against central differences.
#pragma once

#include <vector>

#include "output.hpp"

namespace conform {

// Returns the number of stale --known-failures entries.
int run_grad(const Options &o, const std::vector<Backend> &backends, Results &results);

}  // namespace conform
