// Added and special tokens spelled in the text ("<|eot_id|>", "<|im_start|>", user-defined
// pieces): split a prompt into runs of ordinary text and matched tokens, longest match first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tinyfin::llm::detail {

struct AddedToken {
    int32_t id = -1;
    std::string content;
    bool special = false;  // matched only when EncodeOptions::parse_special; dropped by decode(skip_special)
    bool lstrip = false;   // absorbs the whitespace before it
    bool rstrip = false;   // absorbs the whitespace after it
};

// A run of the prompt: ordinary text (id < 0) or one matched added token.
struct Fragment {
    std::string_view text;
    int32_t id = -1;
};

class AddedTokenMatcher {
public:
    AddedTokenMatcher() = default;
    explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
    // Splits `text`; special tokens count only when `parse_special`.
    std::vector<Fragment> split(std::string_view text, bool parse_special) const;
    const std::vector<AddedToken> &tokens() const { return tokens_; }

private:
    std::vector<AddedToken> tokens_;            // longest content first
    std::vector<std::vector<uint32_t>> by_first_byte_;  // indices into tokens_, per first byte
};

}  // namespace tinyfin::llm::detail
