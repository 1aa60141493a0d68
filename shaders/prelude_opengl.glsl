// Prelude for OpenGL 4.3+: assemble.py puts "#version 430" before it; the plugin compiles the
// text with glCompileShader. The contract every prelude honours is in README.md.
#define TF_OPENGL 1
// No descriptor sets: an array of blocks at binding n takes binding points n, n+1, ...
#define TF_BINDING(n) binding = n
// Selectors are macros here: assemble.py defines each one's default after this prelude unless
// the plugin defined it first (right after the #version line), so the declaration is empty.
#define TF_SPEC(id, type, name, value)
