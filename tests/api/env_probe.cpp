// Runs a little work on the cpu plugin and prints what it ran with, for check_env.py: one line
// "ok threads=N kernels=K scratch=B" (the cpu plugin's features), or "error <what()>" and exit
// status 3 when tinyfin raised.
#include <cstdio>
#include <string>

#include "tinyfin/tinyfin.hpp"

using namespace tinyfin;

int main() {
    try {
        const Device cpu{"cpu", 0};
        Tensor a = rand({64, 64}, 1, cpu);
        float total = sum(matmul(a, a)).item<float>();
        if (!(total > 0)) {
            std::printf("wrong sum %g\n", static_cast<double>(total));
            return 1;
        }
        std::string threads, kernels;
        for (const PluginReport &plugin : report().plugins)
            if (plugin.name == "cpu")
                for (const auto &[key, value] : plugin.features) {
                    if (key == "threads") threads = value;
                    if (key == "kernels") kernels = value;
                }
        std::printf("ok threads=%s kernels=%s\n", threads.c_str(), kernels.c_str());
        return 0;
    } catch (const Error &e) {
        std::printf("error %s\n", e.what());
        return 3;
    }
}
