#include "added_tokens.hpp"

#include <algorithm>

namespace tinyfin::llm::detail {

namespace {
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
    std::erase_if(tokens_, [](const AddedToken &t) { return t.content.empty(); });
    std::stable_sort(tokens_.begin(), tokens_.end(),
                     [](const AddedToken &a, const AddedToken &b) { return a.content.size() > b.content.size(); });
    by_first_byte_.resize(256);
    for (uint32_t i = 0; i < tokens_.size(); ++i)
        by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
}

std::vector<Fragment> AddedTokenMatcher::split(std::string_view text, bool parse_special) const {
    std::vector<Fragment> out;
    if (tokens_.empty()) {
        if (!text.empty()) out.push_back({text, -1});
        return out;
    }
    std::size_t run_start = 0, i = 0;
    while (i < text.size()) {
        const AddedToken *found = nullptr;
        for (const uint32_t k : by_first_byte_[static_cast<unsigned char>(text[i])]) {
            const AddedToken &t = tokens_[k];
            if (t.special && !parse_special) continue;
            if (text.compare(i, t.content.size(), t.content) == 0) {
                found = &t;
                break;
            }
        }
        if (!found) {
            ++i;
            continue;
        }
        std::size_t run_end = i;
        if (found->lstrip)
            while (run_end > run_start && is_space(text[run_end - 1])) --run_end;
        if (run_end > run_start) out.push_back({text.substr(run_start, run_end - run_start), -1});
        out.push_back({text.substr(i, found->content.size()), found->id});
        i += found->content.size();
        if (found->rstrip)
            while (i < text.size() && is_space(text[i])) ++i;
        run_start = i;
    }
    if (run_start < text.size()) out.push_back({text.substr(run_start), -1});
    return out;
}

}  // namespace tinyfin::llm::detail
