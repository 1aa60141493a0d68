// Prelude for Vulkan: assemble.py puts "#version 450" before it and compiles the result to
// SPIR-V with glslangValidator -V. The contract every prelude honours is in README.md.
#define TF_VULKAN 1
// Descriptor set 0 holds every binding; an array binding is one binding of N descriptors.
#define TF_BINDING(n) set = 0, binding = n
// A compile-time selector (op, dtype, mode): a specialization constant, set per pipeline.
#define TF_SPEC(id, type, name, value) layout(constant_id = id) const type name = value;
