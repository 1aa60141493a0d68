#define PCRE2_CODE_UNIT_WIDTH 8
#include "regex.hpp"

#include <pcre2.h>

#include "tinyfin/llm/tokenizer.hpp"

namespace tinyfin::llm::detail {

namespace {
struct CodeDeleter {
    void operator()(pcre2_code *c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
    void operator()(pcre2_match_data *m) const { pcre2_match_data_free(m); }
};
struct MatchContextDeleter {
    void operator()(pcre2_match_context *m) const { pcre2_match_context_free(m); }
};

std::string pcre2_message(int code) {
    PCRE2_UCHAR buffer[256];
    if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "error " + std::to_string(code);
    return reinterpret_cast<const char *>(buffer);
}
}  // namespace

struct Regex::Impl {
    std::unique_ptr<pcre2_code, CodeDeleter> code;
    // Bounds backtracking so that a hostile pattern from a file cannot hang encode().
    std::unique_ptr<pcre2_match_context, MatchContextDeleter> context;
};

Regex::Regex(std::string_view pattern, std::string_view what) : impl_(std::make_unique<Impl>()), pattern_(pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    // PCRE2_UCP: \s, \d, \w and [[:classes:]] follow Unicode, as Oniguruma's do in Hugging Face tokenizers.
    impl_->code.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                    PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr));
    if (!impl_->code)
        throw TokenizerError(std::string(what) + ": the regular expression does not compile at offset " +
                             std::to_string(offset) + ": " + pcre2_message(error));
    pcre2_jit_compile(impl_->code.get(), PCRE2_JIT_COMPLETE);  // falls back to the interpreter when unavailable
    impl_->context.reset(pcre2_match_context_create(nullptr));
    if (!impl_->context) throw std::bad_alloc();
    pcre2_set_match_limit(impl_->context.get(), 10'000'000);
    pcre2_set_depth_limit(impl_->context.get(), 100'000);
}

Regex::~Regex() = default;
Regex::Regex(Regex &&) noexcept = default;
Regex &Regex::operator=(Regex &&) noexcept = default;

std::vector<std::pair<std::size_t, std::size_t>> Regex::find_all(std::string_view text) const {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
        pcre2_match_data_create_from_pattern(impl_->code.get(), nullptr));
    if (!match) throw std::bad_alloc();
    std::vector<std::pair<std::size_t, std::size_t>> out;
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t start = 0;
    uint32_t options = 0;
    while (start <= text.size()) {
        const int rc = pcre2_match(impl_->code.get(), subject, text.size(), start, options, match.get(),
                                   impl_->context.get());
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (options == 0) break;
            // After an empty match: advance one code point and retry without the empty-match flags.
            std::size_t next = start + 1;
            while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
            start = next;
            options = 0;
            continue;
        }
        if (rc < 0)
            throw TokenizerError("pre-tokenizer regular expression failed on the input (" + pcre2_message(rc) +
                                 "); the pattern may backtrack too much: " + pattern_.substr(0, 80));
        const PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(match.get());
        const std::size_t b = ovector[0], e = ovector[1];
        if (e > b) out.emplace_back(b, e);
        start = e;
        options = e == b ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
    }
    return out;
}

}  // namespace tinyfin::llm::detail
