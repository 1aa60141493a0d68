// Throwing the public exception types with their class name as message prefix.
#pragma once

#include <string>

#include "tinyfin/plugin.h"
#include "tinyfin/tinyfin.hpp"

namespace tinyfin::detail {

template <typename E>
constexpr const char *error_class();
template <>
constexpr const char *error_class<ShapeError>() {
    return "ShapeError";
}
template <>
constexpr const char *error_class<DTypeError>() {
    return "DTypeError";
}
template <>
constexpr const char *error_class<ValueError>() {
    return "ValueError";
}
template <>
constexpr const char *error_class<DeviceError>() {
    return "DeviceError";
}
template <>
constexpr const char *error_class<BackendError>() {
    return "BackendError";
}
template <>
constexpr const char *error_class<FallbackError>() {
    return "FallbackError";
}
template <>
constexpr const char *error_class<OutOfMemoryError>() {
    return "OutOfMemoryError";
}
template <>
constexpr const char *error_class<PluginError>() {
    return "PluginError";
}
template <>
constexpr const char *error_class<AutogradError>() {
    return "AutogradError";
}

// Throws E with what() = "<Class>: <message>".
template <typename E>
[[noreturn]] void raise(const std::string &message) {
    throw E(std::string(error_class<E>()) + ": " + message);
}

// Throws the exception that matches a plugin's failure status.
[[noreturn]] void raise_status(tf_status status, const std::string &message);

}  // namespace tinyfin::detail
