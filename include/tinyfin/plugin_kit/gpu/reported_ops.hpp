// The ops whose kernels found an index or label outside its range (status words a GPU plugin's
// kernels set and the plugin reads back), kept for the thread that issued the work: its next read
// or synchronize throws them. Used under the device's lock (or on its thread).
#pragma once

#include <tinyfin/plugin_kit/errors.hpp>

#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

namespace tf_kit TF_KIT_HIDDEN {
namespace gpu {

class ReportedOps {
public:
    // Files op (a static name) for thread; an op already filed for it is named once.
    void add(std::thread::id thread, const char *op) {
        std::string &ops = ops_[thread];
        if ((", " + ops + ", ").find(std::string(", ") + op + ", ") != std::string::npos) return;
        if (!ops.empty()) ops += ", ";
        ops += op;
    }

    // Throws INVALID_ARGUMENT naming the ops filed for thread on the device labelled label, and
    // forgets them; returns when none are.
    void throw_for(std::thread::id thread, const char *label) {
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

private:
    // Comma-separated op names by thread.
    std::unordered_map<std::thread::id, std::string> ops_;
};

}  // namespace gpu
}  // namespace TF_KIT_HIDDEN
