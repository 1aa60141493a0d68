// Helpers shared by the loader tests: reading the paths meson passes in the
// environment, finding a plugin's record in tinyfin::report(), capturing what
// the core writes to stderr.
#pragma once

#include <doctest/doctest.h>
#include <tinyfin/tinyfin.hpp>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace loader_test {

// A variable meson sets for the test; fails the test when missing.
inline std::string required_env(const char *name) {
    const char *value = std::getenv(name);
    REQUIRE_MESSAGE(value != nullptr, "meson should set " << name);
    return value;
}

inline std::string canonical(const std::string &path) {
    std::error_code ec;
    auto result = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : result.string();
}

// The record of the candidate file `file`, matched on the resolved path.
inline const tinyfin::PluginReport *find_plugin(const tinyfin::Report &report, const std::string &file) {
    const std::string wanted = canonical(file);
    for (const auto &plugin : report.plugins) {
        const std::string &resolved = plugin.resolved_path.empty() ? plugin.path : plugin.resolved_path;
        if (canonical(resolved) == wanted) return &plugin;
    }
    return nullptr;
}

inline bool contains(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

// Redirects file descriptor 2 into a temporary file for its lifetime.
class StderrCapture {
public:
    StderrCapture() {
        std::fflush(stderr);
        file_ = std::tmpfile();
        REQUIRE(file_ != nullptr);
        saved_ = dup(2);
        REQUIRE(saved_ >= 0);
        REQUIRE(dup2(fileno(file_), 2) >= 0);
    }
    ~StderrCapture() {
        restore();
        if (file_) std::fclose(file_);
    }
    StderrCapture(const StderrCapture &) = delete;
    StderrCapture &operator=(const StderrCapture &) = delete;

    // Stops capturing and returns everything written meanwhile (and echoes it to stderr).
    std::string finish() {
        restore();
        std::string text;
        std::rewind(file_);
        char chunk[4096];
        std::size_t n;
        while ((n = std::fread(chunk, 1, sizeof chunk, file_)) > 0) text.append(chunk, n);
        std::fputs(text.c_str(), stderr);
        return text;
    }

private:
    void restore() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        dup2(saved_, 2);
        close(saved_);
        saved_ = -1;
    }

    FILE *file_ = nullptr;
    int saved_ = -1;
};

inline std::string notes_text(const tinyfin::Report &report) {
    std::ostringstream out;
    for (const auto &note : report.selection_notes) out << note << '\n';
    return out.str();
}

}  // namespace loader_test
