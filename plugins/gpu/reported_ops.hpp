// The ops whose kernels found an index or label outside its range (the status words of
// DispatchArgs::reporting_op, read back by the plugin), kept for the thread that issued the work:
// its next read or synchronize throws them. Shared by the GPU plugins; used under the device's
// lock (or on its thread).
#ifndef TINYFIN_GPU_REPORTED_OPS_HPP
#define TINYFIN_GPU_REPORTED_OPS_HPP

#include <string>
#include <thread>
#include <unordered_map>

namespace tf_kernels {

class ReportedOps {
public:
    // Files op (a static name) for thread; an op already filed for it is named once.
    void add(std::thread::id thread, const char *op);
    // Throws INVALID_ARGUMENT naming the ops filed for thread on the device labelled label, and
    // forgets them; returns when none are.
    void throw_for(std::thread::id thread, const char *label);

private:
    // Comma-separated op names by thread.
    std::unordered_map<std::thread::id, std::string> ops_;
};

}  // namespace tf_kernels

#endif
