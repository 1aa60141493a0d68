// A compiled PCRE2 pattern (UTF, Unicode properties, JIT when available) for the pre-tokenizers'
// splitting rules: tokenizer.json's Split/ByteLevel patterns and GGUF's named pre-tokenizers.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tinyfin::llm::detail {

class Regex {
public:
    // Compiles `pattern`; TokenizerError naming `what` and PCRE2's message when it does not compile.
    Regex(std::string_view pattern, std::string_view what);
    ~Regex();
    Regex(Regex &&) noexcept;
    Regex &operator=(Regex &&) noexcept;
    Regex(const Regex &) = delete;
    Regex &operator=(const Regex &) = delete;

    // [begin, end) byte ranges of every non-overlapping match in `text` (valid UTF-8), in order.
    std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;
    const std::string &pattern() const { return pattern_; }

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::string pattern_;
};

}  // namespace tinyfin::llm::detail
