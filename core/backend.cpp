#include "backend.hpp"

#include <link.h>

#include <cstddef>
#include <cstring>
#include <exception>
#include <type_traits>

#include "log.hpp"

namespace tinyfin::detail {

bool keep_plugins_mapped() {
    return env_switch("TINYFIN_KEEP_PLUGINS_MAPPED", false, "0 (plugins are unloaded at exit)");
}

namespace {

// Pins every shared object now loaded (RTLD_NODELETE), so what a plugin's shutdown unloads, such
// as the Mesa driver the Vulkan loader or libEGL opened, stays mapped: LeakSanitizer then finds
// that library's globals and can name its code instead of "<unknown module>".
void pin_loaded_libraries() {
    dl_iterate_phdr(
        [](dl_phdr_info *info, std::size_t, void *) {
            if (info->dlpi_name && info->dlpi_name[0])
                if (void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE))
                    dlclose(h);  // drops the reference just taken; RTLD_NODELETE stays
            return 0;
        },
        nullptr);
}

}  // namespace

void close_plugin(void *handle) {
    if (!keep_plugins_mapped()) dlclose(handle);
}

std::string escaped_exception(const char *member) {
    try {
        throw;
    } catch (const std::exception &e) {
        return std::string(member) + " threw a C++ exception (" + e.what() +
               "); a plugin must return a tf_status instead (docs/plugin-abi.md)";
    } catch (...) {
        return std::string(member) + " threw a C++ exception of unknown type; a plugin must "
                                     "return a tf_status instead (docs/plugin-abi.md)";
    }
}

void set_error(tf_error &err, const std::string &text) {
    std::size_t n = std::min(text.size(), sizeof err.message - 1);
    std::memcpy(err.message, text.data(), n);
    err.message[n] = '\0';
}

void log_escaped(const std::string &plugin, const char *member) noexcept {
    try {
        log_from(TF_LOG_ERROR, plugin, escaped_exception(member));
    } catch (...) {
    }
}

tf_error make_error() {
    tf_error err;
    std::memset(&err, 0, sizeof err);
    err.struct_size = sizeof err;
    return err;
}

std::string error_text(tf_error &err, const char *fallback) {
    err.message[sizeof err.message - 1] = '\0';
    return err.message[0] ? std::string(err.message) : std::string(fallback);
}

namespace {

struct ThreadError {
    tf_error err;
    bool in_use;
};
// Constant-initialised, so reaching it needs no first-use guard.
constinit thread_local ThreadError thread_error{{sizeof(tf_error), {}}, false};

}  // namespace

ScratchError::ScratchError() : shared_(!thread_error.in_use) {
    if (shared_) {
        thread_error.in_use = true;
        err_ = &thread_error.err;
        return;
    }
    own_ = make_error();
    err_ = &own_;
}

ScratchError::~ScratchError() {
    if (!shared_) return;
    if (err_->message[0] != '\0') *err_ = make_error();
    // err_ is thread_error.err, its first member: reached through it, not a second TLS lookup.
    static_assert(std::is_standard_layout_v<ThreadError> && offsetof(ThreadError, err) == 0);
    reinterpret_cast<ThreadError *>(err_)->in_use = false;
}

std::string ScratchError::text(const char *fallback) {
    std::string text = error_text(*err_, fallback);
    // A failure without text may still have written past the first byte.
    if (err_->message[0] == '\0') *err_ = make_error();
    return text;
}

Backend::Backend(DlHandle handle, const tf_plugin *table, std::string path, int slot)
    : handle_(std::move(handle)), table_(table), path_(std::move(path)), name_(table->name), slot_(slot) {}

Backend::~Backend() {
    if (!init_ok_) return;
    if (keep_plugins_mapped()) pin_loaded_libraries();
    if (!shutdown_quietly()) handle_.release();  // it may have left threads running its code
}

bool Backend::shutdown_quietly() {
    return guarded_value(name_, "shutdown", false, [&] {
        table_->shutdown();
        return true;
    });
}

bool Backend::ensure_init() {
    std::call_once(init_once_, [this] {
        tf_error err = make_error();
        tf_status status = guarded(err, "init", [&] { return table_->init(&err); });
        if (status != TF_STATUS_OK) {
            init_error_ = error_text(err, "init failed without a message");
            log_from(TF_LOG_INFO, name_, "init failed: " + init_error_);
            return;
        }
        int32_t count = guarded_value(name_, "device_count", int32_t{-1}, [&] { return table_->device_count(); });
        if (count < 1 || count > 1024) {
            init_error_ = "plugin reported " + std::to_string(count) + " devices after init";
            shutdown_quietly();
            return;
        }
        for (int32_t i = 0; i < count; ++i) {
            tf_device_info info;
            std::memset(&info, 0, sizeof info);
            info.struct_size = sizeof info;
            tf_error derr = make_error();
            tf_status described = guarded(derr, "device_info", [&] { return table_->device_info(i, &info, &derr); });
            if (described != TF_STATUS_OK) {
                init_error_ = "device_info(" + std::to_string(i) + ") failed: " + error_text(derr, "no message");
                shutdown_quietly();
                devices_.clear();
                return;
            }
            if (info.kind < TF_DEVICE_KIND_CPU || info.kind > TF_DEVICE_KIND_OTHER) {
                init_error_ = "device_info(" + std::to_string(i) + ") reported kind " +
                              std::to_string(static_cast<int>(info.kind)) + ", which is no tf_device_kind";
                shutdown_quietly();
                devices_.clear();
                return;
            }
            // Never trust text from a plugin to be terminated.
            info.name[sizeof info.name - 1] = '\0';
            info.uuid[sizeof info.uuid - 1] = '\0';
            if (!has(&tf_plugin::buffer_host_ptr)) info.host_addressable = 0;
            devices_.push_back(info);
        }
        init_ok_ = true;
        log_from(TF_LOG_DEBUG, name_, "initialised with " + std::to_string(count) + " device(s)");
    });
    return init_ok_;
}

bool Backend::initialised() const { return init_ok_; }

// Device 0 is where the backend's tensors go by default, so it alone decides: a GPU machine
// that also lists Mesa's lavapipe as device 1 keeps its GPU backend under auto.
bool Backend::software_emulated() const {
    return !devices_.empty() && devices_.front().kind == TF_DEVICE_KIND_GPU_SOFTWARE;
}

template <typename Member>
bool Backend::has(Member tf_plugin::*member) const {
    // offsetof through a member pointer: the byte just past the member must be inside the
    // plugin's table, and the pointer set.
    const auto *base = reinterpret_cast<const char *>(table_);
    const auto *field = reinterpret_cast<const char *>(&(table_->*member));
    std::size_t end = static_cast<std::size_t>(field - base) + sizeof(Member);
    return end <= table_->struct_size && table_->*member != nullptr;
}

void *Backend::buffer_host_ptr(tf_buffer *buffer) const {
    if (!has(&tf_plugin::buffer_host_ptr)) return nullptr;
    return guarded_value(name_, "buffer_host_ptr", static_cast<void *>(nullptr),
                         [&] { return table_->buffer_host_ptr(buffer); });
}

void *Backend::get_proc(const char *symbol) const {
    if (!has(&tf_plugin::get_proc)) return nullptr;
    return guarded_value(name_, "get_proc", static_cast<void *>(nullptr), [&] { return table_->get_proc(symbol); });
}

void Backend::list_features(tf_feature_fn emit, void *user) const {
    if (!has(&tf_plugin::list_features)) return;
    guarded_value(name_, "list_features", false, [&] {
        table_->list_features(emit, user);
        return true;
    });
}

}  // namespace tinyfin::detail
