// What the example programs print the same way: progress lines that only rank 0 of a
// --distributed run shows, and the closing report of which backends ran ops and what fell back.
#ifndef TINYFIN_EXAMPLES_REPORT_HPP
#define TINYFIN_EXAMPLES_REPORT_HPP

#include <cstdarg>
#include <cstdio>

#include "tinyfin/tinyfin.hpp"

namespace example {

// Ranks other than 0 of a --distributed run print only their checksum.
inline bool quiet = false;

inline void say(const char *format, ...) {
    if (quiet) return;
    va_list args;
    va_start(args, format);
    std::vprintf(format, args);
    va_end(args);
}

// "backends that ran ops: ...", "fallbacks: N (op xK, ...)", "default backend: ..." (the lines
// the tests and the Python examples print alike).
inline void print_backend_report() {
    const tinyfin::Stats s = tinyfin::stats();
    say("backends that ran ops:");
    bool any = false;
    for (const tinyfin::Stats::Backend &b : s.backends) {
        if (b.ops == 0) continue;
        say(" %s (%llu ops)", b.name.c_str(), static_cast<unsigned long long>(b.ops));
        any = true;
    }
    say("%s\n", any ? "" : " none");
    say("fallbacks: %llu", static_cast<unsigned long long>(s.total_fallbacks));
    for (std::size_t i = 0; i < s.fallbacks.size(); ++i)
        say("%s%s x%llu", i == 0 ? " (" : ", ", s.fallbacks[i].first.c_str(),
            static_cast<unsigned long long>(s.fallbacks[i].second));
    say("%s\n", s.fallbacks.empty() ? "" : ")");
    say("default backend: %s\n", tinyfin::backend_name().c_str());
}

}  // namespace example

#endif
