// Prelude for OpenGL 4.3+: assemble.py puts "#version 430" before it; the plugin compiles the
// text with glCompileShader. The contract every prelude honours is in README.md.
#define TF_OPENGL 1
// No descriptor sets: an array of blocks at binding n takes binding points n, n+1, ...
#define TF_BINDING(n) binding = n
