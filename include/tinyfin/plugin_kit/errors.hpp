// The plugin kit's ABI-boundary helpers: the core's host table, log lines, environment, error
// messages into tf_error, the exception type a plugin's C++ code throws, the guarded call that
// turns every exception into a tf_status and a message, and the entry point's version check.
// Nothing here throws across the ABI. See docs/plugin-kit.md.
#pragma once

#include <tinyfin/env.h>
#include <tinyfin/plugin.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

// Every kit symbol is hidden: the kit's globals are per plugin, and a plugin exports only its
// entry point (R1). Inline variables of default visibility would also become STB_GNU_UNIQUE
// symbols, which keep a plugin mapped after dlclose.
#define TF_KIT_HIDDEN __attribute__((visibility("hidden")))

namespace tf_kit TF_KIT_HIDDEN {

// ---- The core's host table ------------------------------------------------------------------------

namespace detail {
// Set once by enter() before any other call; constant-initialised (no static constructor).
inline const tf_host_api *g_host = nullptr;
// The plugin's name ("cpu"), for log lines and messages.
inline const char *g_plugin_name = "plugin";
}  // namespace detail

// The plugin's name as its table gives it; "plugin" before enter().
inline const char *plugin_name() noexcept { return detail::g_plugin_name; }

// Whether the host table has member `member` (ends within its struct_size) and it is set.
#define TF_KIT_HOST_HAS(host, member)                                                                                  \
    ((host) && (host)->struct_size >= offsetof(tf_host_api, member) + sizeof((host)->member) && (host)->member)

// The entry point's whole job: refuse a core of another ABI major (its structs are laid out
// differently), remember the host table, return the plugin's table.
inline const tf_plugin *enter(const tf_host_api *host, const tf_plugin &table) noexcept {
    if (!host || host->struct_size < offsetof(tf_host_api, abi_version) + sizeof host->abi_version ||
        TF_ABI_MAJOR(host->abi_version) != TF_ABI_VERSION_MAJOR)
        return nullptr;
    detail::g_host = host;
    detail::g_plugin_name = table.name;
    return &table;
}

// Defines the plugin's one exported symbol (R1), tf_plugin_entry, as enter(host, table): use once,
// at global scope, in the file that defines the table.
#define TF_KIT_PLUGIN_ENTRY(table)                                                                                     \
    extern "C" TF_PLUGIN_EXPORT const tf_plugin *tf_plugin_entry(const tf_host_api *host) {                            \
        return tf_kit::enter(host, table);                                                                             \
    }                                                                                                                  \
    static_assert(std::is_same_v<decltype(&tf_plugin_entry), tf_plugin_entry_fn>)

// The core's environment lookup (secure_getenv behind TINYFIN_* rules); secure_getenv before
// enter() or with a host table that has none.
inline const char *get_env(const char *name) noexcept {
    const tf_host_api *host = detail::g_host;
    if (TF_KIT_HOST_HAS(host, get_env)) return host->get_env(name);
    return secure_getenv(name);
}

// One line through the core's log (filtered by TINYFIN_LOG); nothing before enter().
inline void log_message(int32_t level, const char *message) noexcept {
    const tf_host_api *host = detail::g_host;
    if (TF_KIT_HOST_HAS(host, log)) host->log(level, detail::g_plugin_name, message);
}

inline void log_line(int32_t level, const char *fmt, ...) noexcept __attribute__((format(printf, 2, 3)));
inline void log_line(int32_t level, const char *fmt, ...) noexcept {
    const tf_host_api *host = detail::g_host;
    if (!TF_KIT_HOST_HAS(host, log)) return;
    char message[TF_TEXT_SIZE * 2];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    host->log(level, detail::g_plugin_name, message);
}

// ---- Messages into tf_error ------------------------------------------------------------------------

// Writes a printf-style message into err (as much as its struct_size has room for) and returns
// status. err may be NULL: supports() runs the same checks as run() without paying for the text.
// Cold: the compiler moves failure branches out of hot checks.
[[gnu::cold]] inline tf_status vfail(tf_error *err, tf_status status, const char *fmt, va_list args) noexcept {
    if (!err || err->struct_size <= offsetof(tf_error, message)) return status;
    const size_t room = std::min<size_t>(err->struct_size - offsetof(tf_error, message), sizeof err->message);
    std::vsnprintf(err->message, room, fmt, args);
    return status;
}

[[gnu::cold]] inline tf_status fail(tf_error *err, tf_status status, const char *fmt, ...) noexcept
    __attribute__((format(printf, 3, 4)));
[[gnu::cold]] inline tf_status fail(tf_error *err, tf_status status, const char *fmt, ...) noexcept {
    va_list args;
    va_start(args, fmt);
    vfail(err, status, fmt, args);
    va_end(args);
    return status;
}

// ---- Exceptions inside a plugin --------------------------------------------------------------------

// A failure inside a plugin: what() is the lower-case message for tf_error, status() its code.
// guarded() turns it into both at the ABI boundary; it never crosses it.
class Failure : public std::runtime_error {
public:
    Failure(tf_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    tf_status status() const noexcept { return status_; }

private:
    tf_status status_;
};

// Throws a failure with a printf-style message.
[[noreturn, gnu::cold]] inline void raise(tf_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
[[noreturn, gnu::cold]] inline void raise(tf_status status, const char *fmt, ...) {
    char message[TF_TEXT_SIZE * 2];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    throw Failure(status, message);
}

// Runs f (returning tf_status) at the ABI boundary: no exception ever crosses into the core. A
// failure keeps its status, bad_alloc is OUT_OF_MEMORY, anything else INTERNAL; the message is
// "<what>: <why>". what is a string, or a function returning one that is called only when f
// threw (run() then looks up the op's name only on failure).
template <class What, class F>
tf_status guarded(tf_error *err, What &&what, F &&f) noexcept {
    auto name = [&]() noexcept -> const char * {
        if constexpr (std::is_invocable_v<What>)
            return what();
        else
            return what;
    };
    try {
        return f();
    } catch (const Failure &e) {
        return fail(err, e.status(), "%s: %s", name(), e.what());
    } catch (const std::bad_alloc &) {
        return fail(err, TF_STATUS_OUT_OF_MEMORY, "%s: out of host memory", name());
    } catch (const std::exception &e) {
        return fail(err, TF_STATUS_INTERNAL, "%s: %s", name(), e.what());
    } catch (...) {
        return fail(err, TF_STATUS_INTERNAL, "%s: unknown exception", name());
    }
}

// supports() at the ABI boundary: f's answer, 0 when it throws.
template <class F>
int32_t guarded_answer(F &&f) noexcept {
    try {
        return f() ? 1 : 0;
    } catch (...) {
        return 0;
    }
}

// ---- Small pieces every table member repeats -------------------------------------------------------

// Copies the plugin's full device info into the caller's struct, which may be an older, shorter
// one (its struct_size says how much it has).
// device_info's answer for a device of kind (a tf_device_kind) with memory_total and memory_free
// bytes (0 when unknown), named name, with uuid ("" when none; both cut to fit), whose buffers
// have host addresses when host_addressable.
inline tf_device_info device_info_of(int32_t kind, uint64_t memory_total, uint64_t memory_free, const char *name,
                                     const char *uuid, bool host_addressable = false) noexcept {
    tf_device_info info{};
    info.kind = kind;
    info.memory_total = memory_total;
    info.memory_free = memory_free;
    info.host_addressable = host_addressable ? 1 : 0;
    std::snprintf(info.name, sizeof info.name, "%s", name);
    std::snprintf(info.uuid, sizeof info.uuid, "%s", uuid);
    return info;
}

inline void copy_device_info(tf_device_info full, tf_device_info *info) noexcept {
    const size_t n = std::min<size_t>(info->struct_size, sizeof full);
    full.struct_size = static_cast<uint32_t>(n);
    std::memcpy(static_cast<void *>(info), &full, n);
}

// offset + size bytes within a buffer of buffer_size bytes, checked without overflow.
inline tf_status check_range(const char *what, uint64_t buffer_size, uint64_t offset, uint64_t size,
                             tf_error *err) noexcept {
    if (offset > buffer_size || size > buffer_size - offset)
        return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: %llu bytes at offset %llu do not fit a buffer of %llu bytes",
                    what, static_cast<unsigned long long>(size), static_cast<unsigned long long>(offset),
                    static_cast<unsigned long long>(buffer_size));
    return TF_STATUS_OK;
}

// A buffer member's arguments, for any plugin's tf_buffer with a `size` in bytes: the buffer
// exists, [offset, offset + size) lies inside it, and host (the host side of a write or read;
// any non-NULL pointer where there is none) is there when bytes move.
template <class Buffer>
tf_status check_buffer_range(const char *what, const Buffer *buffer, uint64_t offset, uint64_t size, const void *host,
                             tf_error *err) noexcept {
    if (!buffer) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: buffer is NULL", what);
    if (tf_status s = check_range(what, buffer->size, offset, size, err); s != TF_STATUS_OK) return s;
    if (size > 0 && !host) return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s: host pointer is NULL", what);
    return TF_STATUS_OK;
}

// ---- Settings from the environment -----------------------------------------------------------------

namespace detail {
// The first bad variable's message since the last settings_reset(), for init under
// TINYFIN_STRICT=1. std::mutex is constant-initialised and trivially destructible.
inline std::mutex g_settings_mutex;
inline char g_settings_problem[TF_TEXT_SIZE] = "";
inline std::atomic<int32_t> g_settings_log_level{TF_LOG_WARN};
}  // namespace detail

// For a plugin that reads variables another plugin already warns about (blas runs cpu's kernels
// and reads cpu's variables; cpu is always initialised first): its messages are logged at debug
// level, so a bad value is still one warning line (tinyfin/env.h, rule 2).
inline void settings_warned_elsewhere() noexcept { detail::g_settings_log_level.store(TF_LOG_DEBUG); }

// Warns about a bad value (tinyfin/env.h, rule 2) and keeps the first message for init.
inline void report_bad_setting(const char *name, const char *text, const char *expected, const char *instead) {
    char message[TF_TEXT_SIZE];
    tf_env_describe_bad(message, sizeof message, name, text, expected, instead);
    log_message(detail::g_settings_log_level.load(), message);
    std::lock_guard<std::mutex> lock(detail::g_settings_mutex);
    if (!detail::g_settings_problem[0])
        std::snprintf(detail::g_settings_problem, sizeof detail::g_settings_problem, "%s", message);
}

// An integer variable in [min, max]; fallback (described by why) when unset or bad.
inline int64_t env_integer(const char *name, int64_t min, int64_t max, int64_t fallback, const char *why) {
    const char *text = get_env(name);
    int64_t v = fallback;
    if (tf_env_parse_integer(text, min, max, &v) == TF_ENV_INVALID) {
        char expected[96], instead[160];
        std::snprintf(expected, sizeof expected, "an integer in [%lld, %lld]", static_cast<long long>(min),
                      static_cast<long long>(max));
        std::snprintf(instead, sizeof instead, "%lld (%s)", static_cast<long long>(fallback), why);
        report_bad_setting(name, text, expected, instead);
    }
    return v;
}

// A switch ("0" or "1"); fallback (described by why) when unset or bad.
inline bool env_flag(const char *name, bool fallback, const char *why) {
    const char *text = get_env(name);
    int on = fallback ? 1 : 0;
    if (tf_env_parse_flag(text, &on) == TF_ENV_INVALID) {
        char instead[160];
        std::snprintf(instead, sizeof instead, "%d (%s)", fallback ? 1 : 0, why);
        report_bad_setting(name, text, "0 or 1", instead);
        on = fallback ? 1 : 0;
    }
    return on != 0;
}

// init's verdict on the settings read so far: OK, or (under TINYFIN_STRICT=1 only) the first
// bad variable's message as INVALID_ARGUMENT.
inline tf_status settings_status(tf_error *err) {
    int strict = 0;
    tf_env_parse_strict(get_env("TINYFIN_STRICT"), &strict);
    std::lock_guard<std::mutex> lock(detail::g_settings_mutex);
    if (!detail::g_settings_problem[0] || !strict) return TF_STATUS_OK;
    return fail(err, TF_STATUS_INVALID_ARGUMENT, "%s (an error because TINYFIN_STRICT=1)", detail::g_settings_problem);
}

// Forgets the first bad variable (shutdown: the next init reads every variable again).
inline void settings_reset() {
    std::lock_guard<std::mutex> lock(detail::g_settings_mutex);
    detail::g_settings_problem[0] = '\0';
}

}  // namespace TF_KIT_HIDDEN
