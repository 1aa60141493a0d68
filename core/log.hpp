// Logging and environment access for the core.
#pragma once

#include <string>
#include <string_view>

#include "tinyfin/plugin.h"

namespace tinyfin::detail {

// Environment lookup through secure_getenv: a setuid program ignores TINYFIN_*.
// Returns "" for unset variables.
std::string env(const char *name);
const char *env_cstr(const char *name);
// A "0"/"1" switch (tinyfin/env.h rules). Any other text warns once per variable, naming the
// value, and counts as `if_invalid`: off for switches that weaken a check, so a typo never does.
bool env_switch(const char *name, bool if_invalid, const char *meaning_if_invalid);

// TINYFIN_LOG is a comma list of: debug, info, warn (the default), error, fallback.
bool log_enabled(tf_log_level level);
// The warning about a bad TINYFIN_LOG (already written), "" when it was valid or unset.
const std::string &log_config_problem();
bool log_fallbacks_enabled();
void log(tf_log_level level, std::string_view message);
// Writes one line unconditionally: "tinyfin: <tag>: <source>: <message>".
void log_line(const char *tag, std::string_view source, std::string_view message);
void log_from(tf_log_level level, std::string_view source, std::string_view message);

}  // namespace tinyfin::detail
