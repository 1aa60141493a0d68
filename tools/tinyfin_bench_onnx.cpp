// tinyfin-bench-onnx: the ONNX benchmark (bench_onnx.cpp) as a program of its own, which
// `tinyfin-bench --onnx ...` runs. Debian's libsentencepiece (libtinyfin-llm's tokenizer) carries
// its own protobuf-lite whose exported symbols take the place of libprotobuf's when both are in one
// executable, and libonnx_proto then crashes while registering its descriptors at start-up: one
// program must not link libtinyfin-llm and libtinyfin-onnx together (docs/onnx.md, "Limits").
#include "bench_onnx.hpp"

int main(int argc, char **argv) { return tfbench::run_onnx(argc, argv); }
