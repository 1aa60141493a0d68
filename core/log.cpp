#include "log.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace tinyfin::detail {

namespace {

struct LogConfig {
    tf_log_level threshold = TF_LOG_WARN;
    bool fallbacks = false;
};

LogConfig parse_log_config() {
    LogConfig config;
    std::string spec = env("TINYFIN_LOG");
    size_t start = 0;
    while (start <= spec.size()) {
        size_t end = spec.find(',', start);
        if (end == std::string::npos) end = spec.size();
        std::string_view word(spec.data() + start, end - start);
        if (word == "debug") config.threshold = TF_LOG_DEBUG;
        else if (word == "info") config.threshold = TF_LOG_INFO;
        else if (word == "warn") config.threshold = TF_LOG_WARN;
        else if (word == "error") config.threshold = TF_LOG_ERROR;
        else if (word == "fallback") config.fallbacks = true;
        start = end + 1;
    }
    return config;
}

const LogConfig &log_config() {
    static const LogConfig config = parse_log_config();
    return config;
}

const char *level_name(tf_log_level level) {
    switch (level) {
    case TF_LOG_DEBUG: return "debug";
    case TF_LOG_INFO: return "info";
    case TF_LOG_WARN: return "warning";
    case TF_LOG_ERROR: return "error";
    }
    return "log";
}

} // namespace

const char *env_cstr(const char *name) { return secure_getenv(name); }

std::string env(const char *name) {
    const char *value = env_cstr(name);
    return value ? value : "";
}

bool log_enabled(tf_log_level level) { return level >= log_config().threshold; }
bool log_fallbacks_enabled() { return log_config().fallbacks; }

void log_line(const char *tag, std::string_view source, std::string_view message) {
    // One fprintf per line so lines from several threads do not interleave.
    static std::mutex mutex;
    std::lock_guard lock(mutex);
    std::fprintf(stderr, "tinyfin: %s: %.*s%s%.*s\n", tag, (int)source.size(), source.data(),
                 source.empty() ? "" : ": ", (int)message.size(), message.data());
}

void log_from(tf_log_level level, std::string_view source, std::string_view message) {
    if (log_enabled(level)) log_line(level_name(level), source, message);
}

void log(tf_log_level level, std::string_view message) { log_from(level, "", message); }

} // namespace tinyfin::detail
