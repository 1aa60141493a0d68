// Grouping of shared-input matrices into products (fusion.hpp).
#include "fusion.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

namespace tinyfin::llm {

namespace {

bool same_storage(const FusionCandidate &a, const FusionCandidate &b) {
    const TensorData &x = *a.tensor, &y = *b.tensor;
    return x.type == y.type && x.shape.size() == 2 && y.shape.size() == 2 && x.shape[1] == y.shape[1] &&
           a.stored_as == b.stored_as;
}

bool follows(const TensorData &before, const TensorData &after) {
    return before.bytes.data() + before.bytes.size() == after.bytes.data();
}

}  // namespace

std::vector<std::vector<int>> group_products(const std::vector<FusionCandidate> &members, bool fuse) {
    std::vector<int> order(members.size());
    std::iota(order.begin(), order.end(), 0);
    std::vector<std::vector<int>> groups;
    if (!fuse) {
        for (int i : order) groups.push_back({i});
        return groups;
    }
    // File order: a group's rows are stacked as the file stores them.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return std::less<const std::byte *>()(members[static_cast<std::size_t>(a)].tensor->bytes.data(),
                                              members[static_cast<std::size_t>(b)].tensor->bytes.data());
    });
    auto copied = [&](int i) { return members[static_cast<std::size_t>(i)].copied; };
    for (int i : order) {
        const FusionCandidate &m = members[static_cast<std::size_t>(i)];
        auto joins = [&](const std::vector<int> &g) {
            if (!same_storage(members[static_cast<std::size_t>(g.front())], m)) return false;
            return follows(*members[static_cast<std::size_t>(g.back())].tensor, *m.tensor) ||
                   (m.copied && std::all_of(g.begin(), g.end(), copied));
        };
        const auto g = std::find_if(groups.begin(), groups.end(), joins);
        if (g != groups.end())
            g->push_back(i);
        else
            groups.push_back({i});
    }
    return groups;
}

bool back_to_back(const std::vector<FusionCandidate> &members, const std::vector<int> &group) {
    for (std::size_t i = 1; i < group.size(); ++i)
        if (!follows(*members[static_cast<std::size_t>(group[i - 1])].tensor,
                     *members[static_cast<std::size_t>(group[i])].tensor))
            return false;
    return true;
}

}  // namespace tinyfin::llm
