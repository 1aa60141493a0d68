// JSON reading for the formats and configs: nlohmann-json with hostile input in mind.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tinyfin::llm {

// Parses text (at most 64 levels of nesting); FormatError naming `what` when it is not JSON.
nlohmann::json parse_json(std::string_view text, const std::string &what);
// Maps and parses a regular file of at most 64 MB (FileError, FormatError).
nlohmann::json read_json_file(const std::string &path);

}  // namespace tinyfin::llm
