// Programs: one per kernel and selector values, compiled on first use from the embedded GLSL
// (shaders/ assembled with the OpenGL prelude) and kept for the device's life. OpenGL has no
// specialization constants: each selector is a #define placed right after the #version line;
// the selectors' names and types come from the kernel's own TF_SPEC lines.
#include "device.hpp"
#include "selectors.hpp"
#include "shaders_embedded.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace tf_gl {

namespace {

std::string info_log(GLuint object, bool program) {
    GLint length = 0;
    if (program)
        glGetProgramiv(object, GL_INFO_LOG_LENGTH, &length);
    else
        glGetShaderiv(object, GL_INFO_LOG_LENGTH, &length);
    std::string log(static_cast<size_t>(std::max(length, 1)), '\0');
    if (program)
        glGetProgramInfoLog(object, length, nullptr, log.data());
    else
        glGetShaderInfoLog(object, length, nullptr, log.data());
    log.resize(std::strlen(log.c_str()));
    if (log.size() > 600) log.resize(600);
    return log;
}

}  // namespace

GLuint Device::program_for(const PipelineKey &key) {
    auto found = gl_->programs.find(key);
    if (found != gl_->programs.end()) return found->second.get();
    const auto begin = std::chrono::steady_clock::now();
    const tf_shaders::ShaderCode &code = tf_shaders::shader_code_of(key.kernel);
    const std::string_view text(code.data, code.size);
    // The defines go after the first line (#version 430), before the prelude's defaults.
    const size_t first_line = text.find('\n') + 1;
    std::string source(text.substr(0, first_line));
    for (const tf_gpu::KernelSelector &s : tf_gpu::selectors_of(text)) {
        if (s.id >= key.count) continue;  // the default from assemble.py applies
        const uint32_t v = key.spec[s.id];
        char line[128];
        if (s.type == "bool")
            std::snprintf(line, sizeof line, "#define %s %s\n", s.name.c_str(), v ? "true" : "false");
        else if (s.type == "int")
            std::snprintf(line, sizeof line, "#define %s %d\n", s.name.c_str(), static_cast<int32_t>(v));
        else
            std::snprintf(line, sizeof line, "#define %s %uu\n", s.name.c_str(), v);
        source += line;
    }
    source.append(text.substr(first_line));

    ShaderHandle shader(glCreateShader(GL_COMPUTE_SHADER));
    const char *sources[] = {source.c_str()};
    glShaderSource(shader.get(), 1, sources, nullptr);
    glCompileShader(shader.get());
    GLint ok = 0;
    glGetShaderiv(shader.get(), GL_COMPILE_STATUS, &ok);
    if (!ok)
        raise(TF_STATUS_INTERNAL, "%s: compiling kernel %s failed: %s", label(), code.name,
              info_log(shader.get(), false).c_str());
    ProgramHandle program(glCreateProgram());
    glAttachShader(program.get(), shader.get());
    glLinkProgram(program.get());
    glGetProgramiv(program.get(), GL_LINK_STATUS, &ok);
    if (!ok)
        raise(TF_STATUS_INTERNAL, "%s: linking kernel %s failed: %s", label(), code.name,
              info_log(program.get(), true).c_str());
    const GLuint name = program.get();
    gl_->programs.emplace(key, std::move(program));
    ++counters_.programs;
    counters_.compile_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    return name;
}

}  // namespace tf_gl
