// support mode: which cases each backend's supports() accepts, per op and dtype, and the
// docs/ops.md table made from it.
#pragma once

#include <vector>

#include "output.hpp"

namespace conform {

// The cases counted are those inside each op's dtypes column of ops.def that the cpu reference
// takes (the others are invalid descriptors).
int run_support(const Options &o, const std::vector<Case> &cases, const Backend &cpu,
                const std::vector<Backend> &backends);

}  // namespace conform
