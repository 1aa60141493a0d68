// Prelude for Vulkan: assemble.py puts "#version 450" before it and compiles the result to
// SPIR-V with glslangValidator -V. The contract every prelude honours is in README.md.
#define TF_VULKAN 1
// Descriptor set 0 holds every binding; an array binding is one binding of N descriptors.
#define TF_BINDING(n) set = 0, binding = n
