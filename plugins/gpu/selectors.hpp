// A kernel's selectors, read from its source: the TF_SPEC(id, type, NAME, default) lines that
// start a line of shaders/*.comp and shaders/opencl/*.cl. Vulkan turns them into specialization
// constants at SPIR-V build time; the opengl and opencl plugins, whose drivers compile source at
// run time, turn each into a #define (opengl) or a -D build option (opencl) from this list.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace tf_gpu {

struct KernelSelector {
    uint32_t id;  // the index into PipelineKey::spec
    std::string type, name;  // GLSL type (uint, int, bool) and macro name
    std::string value;  // the default, as written (used when a dispatch leaves it out)
};

// The selectors in the order of their lines. A line that does not parse is skipped (the kernel
// then fails to build, naming the macro it lacks).
inline std::vector<KernelSelector> selectors_of(std::string_view text) {
    std::vector<KernelSelector> out;
    size_t at = 0;
    while ((at = text.find("\nTF_SPEC(", at)) != std::string_view::npos) {
        at += 9;
        const size_t end = text.find(')', at);
        if (end == std::string_view::npos) break;
        std::string args(text.substr(at, end - at));
        for (char &c : args)
            if (c == ',') c = ' ';
        unsigned id = 0;
        char type[32] = {}, name[64] = {}, value[32] = {};
        if (std::sscanf(args.c_str(), "%u %31s %63s %31s", &id, type, name, value) == 4)
            out.push_back({id, type, name, value});
    }
    return out;
}

}  // namespace tf_gpu
