// support mode: which cases each backend's supports() accepts, per op and dtype, and the
// docs/ops.md table made from it.
#pragma once

#include <vector>

#include "output.hpp"

namespace conform {

int run_support(const Options &o, const std::vector<Case> &cases, const Backend &cpu, const std::vector<Backend> &backends);

} // namespace conform
