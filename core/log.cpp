#include "log.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "tinyfin/env.h"

namespace tinyfin::detail {

namespace {

struct LogConfig {
    tf_log_level threshold = TF_LOG_WARN;
    bool fallbacks = false;
    std::string problem;  // the warning about a bad value, "" when none
};

LogConfig parse_log_config() {
    LogConfig config;
    const char *text = env_cstr("TINYFIN_LOG");
    if (!text || !*text) return config;
    static const char *const words[] = {"debug", "info", "warn", "error", "fallback"};
    std::string spec = text, bad;
    size_t start = 0;
    // Empty words ("warn,,fallback", a trailing comma) are skipped, as in TINYFIN_BACKEND.
    while (start <= spec.size()) {
        size_t end = spec.find(',', start);
        if (end == std::string::npos) end = spec.size();
        std::string word = spec.substr(start, end - start);
        int index = 0;
        tf_env_result result = tf_env_parse_word(word.c_str(), words, 5, &index);
        if (result == TF_ENV_INVALID)
            bad = word;
        else if (result == TF_ENV_VALID && index == 4)
            config.fallbacks = true;
        else if (result == TF_ENV_VALID)
            config.threshold = static_cast<tf_log_level>(index);
        start = end + 1;
    }
    if (!bad.empty()) {
        std::string instead = std::string(config.threshold == TF_LOG_DEBUG   ? "debug"
                                          : config.threshold == TF_LOG_INFO  ? "info"
                                          : config.threshold == TF_LOG_ERROR ? "error"
                                                                             : "warn") +
                              (config.fallbacks ? ",fallback" : "") + " ('" + bad + "' ignored)";
        char message[TF_TEXT_SIZE];
        tf_env_describe_bad(message, sizeof message, "TINYFIN_LOG", text,
                            "a comma list of debug, info, warn, error, fallback", instead.c_str());
        config.problem = message;
        // Straight to stderr, whatever the level: log() would ask for this very configuration.
        log_line("warning", "", message);
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

}  // namespace

const char *env_cstr(const char *name) { return secure_getenv(name); }

std::string env(const char *name) {
    const char *value = env_cstr(name);
    return value ? value : "";
}

bool env_switch(const char *name, bool if_invalid, const char *meaning_if_invalid) {
    const char *text = env_cstr(name);
    int on = 0;
    switch (tf_env_parse_flag(text, &on)) {
    case TF_ENV_VALID: return on != 0;
    case TF_ENV_UNSET: return false;
    case TF_ENV_INVALID: break;
    }
    static std::mutex mutex;
    static std::set<std::string> warned;
    bool first = false;
    {
        std::lock_guard lock(mutex);
        first = warned.insert(name).second;
    }
    if (first) {
        char message[TF_TEXT_SIZE];
        tf_env_describe_bad(message, sizeof message, name, text, "0 or 1", meaning_if_invalid);
        log(TF_LOG_WARN, message);
    }
    return if_invalid;
}

const std::string &log_config_problem() { return log_config().problem; }

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

}  // namespace tinyfin::detail
