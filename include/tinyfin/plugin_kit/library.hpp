// The one owner of a library a plugin opens with dlopen at run time (a BLAS, a GPU API's loader,
// a vendor library): dlclose when the handle goes. Part of the plugin kit (tinyfin/plugin_kit.hpp).
#pragma once

#include <dlfcn.h>

#include <memory>

// As errors.hpp defines it (the same tokens): every kit symbol is hidden.
#define TF_KIT_HIDDEN __attribute__((visibility("hidden")))

namespace tf_kit TF_KIT_HIDDEN {

struct DlClose {
    void operator()(void *handle) const noexcept { dlclose(handle); }
};
// A dlopen handle: LibraryHandle(dlopen(path, flags)), null when the open failed.
using LibraryHandle = std::unique_ptr<void, DlClose>;

}  // namespace TF_KIT_HIDDEN
