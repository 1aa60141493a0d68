#include "reported_ops.hpp"

#include "kernels.hpp"

namespace tf_kernels {

void ReportedOps::add(std::thread::id thread, const char *op) {
    std::string &ops = ops_[thread];
    if ((", " + ops + ", ").find(std::string(", ") + op + ", ") != std::string::npos) return;
    if (!ops.empty()) ops += ", ";
    ops += op;
}

void ReportedOps::throw_for(std::thread::id thread, const char *label) {
    if (ops_.empty()) return;
    const auto found = ops_.find(thread);
    if (found == ops_.end()) return;
    const std::string ops = std::move(found->second);
    ops_.erase(found);
    raise(TF_STATUS_INVALID_ARGUMENT,
          "%s: an index or label outside its range was found on %s in work this thread issued; the elements "
          "it picks are 0 (NaN for losses)",
          ops.c_str(), label);
}

}  // namespace tf_kernels
