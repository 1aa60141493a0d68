// JSON helpers (json_util.hpp).
#include <tinyfin/llm/errors.hpp>
#include <tinyfin/llm/mapped_file.hpp>

#include "json_util.hpp"

namespace tinyfin::llm {

nlohmann::json parse_json(std::string_view text, const std::string &what) {
    constexpr int kMaxDepth = 64;
    // The callback sees each value's depth as the parser reaches it: deeper nesting stops the
    // parse before the document grows.
    bool too_deep = false;
    auto limit_depth = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json &) {
        if (depth > kMaxDepth) too_deep = true;
        return !too_deep;
    };
    try {
        nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), limit_depth);
        if (too_deep) throw FormatError("FormatError: " + what + " nests deeper than 64 levels");
        return j;
    } catch (const nlohmann::json::exception &e) {
        // nlohmann quotes the bytes it read, which may be anything: only printable ASCII passes.
        std::string detail = e.what();
        for (char &ch : detail)
            if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
        throw FormatError("FormatError: " + what + " is not valid JSON: " + detail);
    }
}

nlohmann::json read_json_file(const std::string &path) {
    MappedFile file(path);
    if (file.size() > (64u << 20))
        throw FormatError("FormatError: '" + path + "' is " + std::to_string(file.size()) + " bytes, more than 64 MB");
    const auto bytes = file.bytes();
    return parse_json(std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size()), "'" + path + "'");
}

}  // namespace tinyfin::llm
