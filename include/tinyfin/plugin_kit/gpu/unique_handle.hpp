// One owner for a handle of a C API (GL names, GL fences, EGL displays, Vulkan instances and
// devices): move-only, Release(handle) exactly once, on destruction or reset(), unless it holds
// the null handle Handle{} (0, nullptr; EGL_NO_DISPLAY and VK_NULL_HANDLE are both that).
#pragma once

#include <tinyfin/plugin_kit/errors.hpp>

#include <utility>

namespace tf_kit TF_KIT_HIDDEN {
namespace gpu {

template <class Handle, void (*Release)(Handle)>
class UniqueHandle {
public:
    UniqueHandle() noexcept = default;
    explicit UniqueHandle(Handle handle) noexcept : handle_(handle) {}
    UniqueHandle(UniqueHandle &&other) noexcept : handle_(std::exchange(other.handle_, Handle{})) {}
    UniqueHandle &operator=(UniqueHandle &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, Handle{});
        }
        return *this;
    }
    UniqueHandle(const UniqueHandle &) = delete;
    UniqueHandle &operator=(const UniqueHandle &) = delete;
    ~UniqueHandle() { reset(); }

    Handle get() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != Handle{}; }
    void reset() noexcept {
        if (handle_ != Handle{}) Release(handle_);
        handle_ = Handle{};
    }

private:
    Handle handle_{};
};

}  // namespace gpu
}  // namespace TF_KIT_HIDDEN
