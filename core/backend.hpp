// One loaded plugin: its dlopen handle, its table, lazy init and device facts.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tinyfin/plugin.h"

namespace tinyfin::detail {

// dlclose unless TINYFIN_KEEP_PLUGINS_MAPPED=1 (sanitizer runs: LeakSanitizer can only name the
// code of a leak, and match it against suppressions, while its library is still mapped). The
// same setting pins the libraries a plugin loaded before its shutdown can unload them.
void close_plugin(void *handle);
bool keep_plugins_mapped();
// With TINYFIN_KEEP_PLUGINS_MAPPED=1, loads the libraries of TINYFIN_PIN_LIBRARIES (colon list)
// for good before any plugin runs: drivers a plugin's probe loads and unloads again (the Vulkan
// loader's ICDs, Mesa's DRI driver) keep their globals visible to LeakSanitizer.
void pin_listed_libraries();
struct DlCloser {
    void operator()(void *handle) const {
        if (handle) close_plugin(handle);
    }
};
using DlHandle = std::unique_ptr<void, DlCloser>;

// Size of tf_plugin as ABI 1.0 defined it: the smallest table the core accepts.
inline constexpr std::size_t plugin_table_size_1_0 = offsetof(tf_plugin, get_proc) + sizeof(void *);

class Backend {
public:
    Backend(DlHandle handle, const tf_plugin *table, std::string path, int slot);
    ~Backend();
    Backend(const Backend &) = delete;
    Backend &operator=(const Backend &) = delete;

    const std::string &name() const { return name_; }
    const std::string &path() const { return path_; }
    const tf_plugin &table() const { return *table_; }
    // Index into the stats arrays.
    int slot() const { return slot_; }

    // Runs the plugin's init once (thread-safe); false when it failed (see init_error()).
    bool ensure_init();
    bool initialised() const;
    const std::string &init_error() const { return init_error_; }

    // Valid after a successful ensure_init().
    int device_count() const { return static_cast<int>(devices_.size()); }
    const tf_device_info &device(int index) const { return devices_.at(index); }
    bool host_addressable(int index) const { return devices_.at(index).host_addressable != 0; }
    // True when device 0, the default placement, is a software-emulated GPU (lavapipe, llvmpipe).
    bool software_emulated() const;

    // Whether the plugin was built against ABI 1.1 or later and so takes absent optional inputs
    // (TF_TENSOR_ABSENT in plugin.h); an older plugin gets zeros in their place (dispatch.cpp).
    bool takes_absent_inputs() const { return TF_ABI_MINOR(table_->abi_version) >= 1; }
    // Whether the plugin knows the block-quantized dtypes (ABI 1.2); older ones never see them.
    bool takes_quantized() const { return TF_ABI_MINOR(table_->abi_version) >= 2; }

    // Optional members: present when the plugin's table reaches them and they are set.
    void *buffer_host_ptr(tf_buffer *buffer) const;
    void *get_proc(const char *symbol) const;
    void list_features(tf_feature_fn emit, void *user) const;

private:
    template <typename Member>
    bool has(Member tf_plugin::*member) const;
    // The plugin's shutdown; false when it threw (logged).
    bool shutdown_quietly();

    DlHandle handle_;
    const tf_plugin *table_;
    std::string path_;
    std::string name_;
    int slot_;
    std::once_flag init_once_;
    bool init_ok_ = false;
    std::string init_error_;
    std::vector<tf_device_info> devices_;
};

// The text of the C++ exception a plugin let escape through the C ABI (a plugin written in C++
// can throw; the ABI has no exceptions); call inside a catch block.
std::string escaped_exception(const char *member);
// Writes `text` into err's message (cut to fit, terminated).
void set_error(tf_error &err, const std::string &text);
// Calls a plugin member that reports failure through a tf_status: an exception escaping it
// becomes TF_STATUS_INTERNAL with its text in err, so it reaches the user as that op's
// PluginError and every other call keeps working.
template <typename Call>
tf_status guarded(tf_error &err, const char *member, Call &&call) noexcept {
    try {
        return call();
    } catch (...) {
        set_error(err, escaped_exception(member));
        return TF_STATUS_INTERNAL;
    }
}
// Logs an escaped exception of a member that has no way to report failure; inside a catch.
void log_escaped(const std::string &plugin, const char *member) noexcept;
// For a member that returns a value and cannot report failure (supports, device_count,
// buffer_free, shutdown): an escaping exception is logged and `fallback` returned.
template <typename Result, typename Call>
Result guarded_value(const std::string &plugin, const char *member, Result fallback, Call &&call) noexcept {
    try {
        return call();
    } catch (...) {
        log_escaped(plugin, member);
        return fallback;
    }
}

// A zeroed tf_error with struct_size set.
tf_error make_error();
// The plugin's message (forced to be terminated), or fallback when it left none.
std::string error_text(tf_error &err, const char *fallback);

// A zeroed tf_error for the calls every op makes (buffer_alloc, run): one per thread, zeroed
// again only after a plugin wrote into it, because zeroing 516 bytes per call was a visible
// share of a small op's cost. Plugins write a message only on failure (plugin-abi.md R11) and
// from its first byte, so a zero first byte after the call means the rest is zero too. A nested
// use on the same thread gets a fresh zeroed error of its own.
class ScratchError {
public:
    ScratchError();
    ~ScratchError();
    ScratchError(const ScratchError &) = delete;
    ScratchError &operator=(const ScratchError &) = delete;
    tf_error &get() { return *err_; }
    // error_text() of it; the error is zeroed again when this scope ends.
    std::string text(const char *fallback);

private:
    tf_error *err_;
    bool shared_;
    tf_error own_;
};

}  // namespace tinyfin::detail
