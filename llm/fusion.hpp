// Matrices that multiply the same activations (a layer's q/k/v, its gate/up) run as one product
// over their rows stacked (private to libtinyfin-llm): one pass over the activations, one pool
// job, one cast of the output instead of one per matrix. docs/llm.md "Fused products".
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <tinyfin/llm/tensor_data.hpp>
#include <tinyfin/tinyfin.hpp>

namespace tinyfin::llm {

// One product of a set of matrices sharing their input: `weight` is the rows of `members`
// (indices into the set) stacked in that order; its output's columns are theirs in that order,
// `rows[i]` of them for members[i].
struct Product {
    Tensor weight;
    std::vector<int> members;
    std::vector<int64_t> rows;
};

// The products that compute a set of `members` matrices sharing their input; each member is in
// exactly one product.
struct SharedInput {
    std::vector<Product> products;
    int members = 0;
};

// A matrix of the set as the loader will store it.
struct FusionCandidate {
    const TensorData *tensor;  // 2-D [rows, input width], type and shape already checked
    std::optional<DType> stored_as;  // the type it is quantized to on load, if any
    bool copied;  // the loader copies it anyway (no use in place: a GPU upload, map_weights=false, ...)
};

// How a set of matrices groups into products (each group's members in the order their rows are
// stacked). Members of one group share the file type, the input width and stored_as, and
// - lie back to back in the file (each one's bytes begin where the previous one's end), so that
//   the group is one matrix over the file's bytes, used in place or copied in one piece; or
// - are all copied anyway: they are stacked into one buffer (their file order).
// Anything else is a product of its own. `fuse` false: every member is a product of its own.
std::vector<std::vector<int>> group_products(const std::vector<FusionCandidate> &members, bool fuse);

// Whether a group's members (in its order) lie back to back in the file.
bool back_to_back(const std::vector<FusionCandidate> &members, const std::vector<int> &group);

}  // namespace tinyfin::llm
