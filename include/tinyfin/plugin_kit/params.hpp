// The plugin kit's params storage: room for whichever params struct an op takes, sized from
// ops.def's params column, and sized<P>(), a zeroed params struct with its struct_size set. For
// code that builds descriptors for any op (the core's op samples, tinyfin-conform's cases).
#pragma once

#include <tinyfin/plugin_kit/ops.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>

namespace tf_kit TF_KIT_HIDDEN {

// A params struct of type P, zeroed, with struct_size = sizeof(P) (tf_params_none has no members
// to set).
template <class P>
P sized() noexcept {
    static_assert(std::is_trivially_copyable_v<P>);
    P p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    return p;
}

// The largest params struct of ops.def's params column and the strictest alignment.
inline constexpr size_t k_params_bytes = std::max({
#define TF_OP(id, sym, name, kind, n_in, n_out, params, dtypes) sizeof(params),
#include <tinyfin/ops.def>
#undef TF_OP
});
inline constexpr size_t k_params_align = std::max({
#define TF_OP(id, sym, name, kind, n_in, n_out, params, dtypes) alignof(params),
#include <tinyfin/ops.def>
#undef TF_OP
});

// Storage for any op's params struct: set(p) copies one in, as<P>() reads (or writes) it as P,
// data() is what tf_op_desc.params points to. Starts zeroed. A new params struct in ops.def
// grows it without an edit here.
class AnyParams {
public:
    AnyParams() noexcept { std::memset(bytes_, 0, sizeof bytes_); }

    template <class P>
    P &set(const P &p) noexcept {
        static_assert(sizeof(P) <= k_params_bytes && alignof(P) <= k_params_align && std::is_trivially_copyable_v<P>,
                      "a params struct that ops.def's params column does not name");
        return *::new (static_cast<void *>(bytes_)) P(p);
    }
    template <class P>
    P &as() noexcept {
        static_assert(sizeof(P) <= k_params_bytes && alignof(P) <= k_params_align && std::is_trivially_copyable_v<P>);
        return *std::launder(reinterpret_cast<P *>(bytes_));
    }
    template <class P>
    const P &as() const noexcept {
        static_assert(sizeof(P) <= k_params_bytes && alignof(P) <= k_params_align && std::is_trivially_copyable_v<P>);
        return *std::launder(reinterpret_cast<const P *>(bytes_));
    }
    const void *data() const noexcept { return bytes_; }

private:
    alignas(k_params_align) unsigned char bytes_[k_params_bytes];
};

}  // namespace TF_KIT_HIDDEN
