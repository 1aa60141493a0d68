// tinyfin-bench --onnx MODEL: one ONNX model on tinyfin's backends against ONNX Runtime's CPU
// provider (onnxruntime-node, through bench_onnx_ort.js) in the same run (bench_onnx.cpp).
#pragma once

#include <cstring>

namespace tfbench {

// True when argv asks for the ONNX benchmark (--onnx anywhere).
inline bool wants_onnx(int argc, char **argv) {
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--onnx") == 0) return true;
    return false;
}
// Parses its own options, runs, prints; returns the exit status.
int run_onnx(int argc, char **argv);

}  // namespace tfbench
