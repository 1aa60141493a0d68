// grad mode: backward through autograd on each backend against central differences.
#pragma once

#include <vector>

#include "output.hpp"

namespace conform {

void run_grad(const Options &o, const std::vector<Backend> &backends, Results &results);

}  // namespace conform
