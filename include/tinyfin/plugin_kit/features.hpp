// The features a plugin lists in list_features(): one key and one text value per emit, printed
// printf-style. Part of the plugin kit (tinyfin/plugin_kit.hpp).
#pragma once

#include <tinyfin/plugin.h>

#include <cstdarg>
#include <cstdio>
#include <string>

namespace tf_kit {

// Emits features through the host's callback: a device's as "device<N>.<name>", the plugin's own
// (device < 0) as "<name>". Keys longer than 63 and values longer than 255 bytes are cut.
class FeatureList {
public:
    FeatureList(tf_feature_fn emit, void *user, int device = -1) noexcept : emit_(emit), user_(user), device_(device) {}

    void put(const char *name, const char *text) const noexcept {
        char key[64];
        if (device_ >= 0)
            std::snprintf(key, sizeof key, "device%d.%s", device_, name);
        else
            std::snprintf(key, sizeof key, "%s", name);
        emit_(user_, key, text);
    }

    // put(name, text) for each name, text pair of arguments: the strings a device read once, at
    // start-up.
    template <class... More>
    void put_all(const char *name, const std::string &text, const More &...more) const noexcept {
        put(name, text.c_str());
        if constexpr (sizeof...(more) > 0) put_all(more...);
    }

    [[gnu::format(printf, 3, 4)]] void putf(const char *name, const char *format, ...) const noexcept {
        char value[256];
        va_list args;
        va_start(args, format);
        std::vsnprintf(value, sizeof value, format, args);
        va_end(args);
        put(name, value);
    }

private:
    tf_feature_fn emit_;
    void *user_;
    int device_;
};

}  // namespace tf_kit
