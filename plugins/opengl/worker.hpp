// The thread that owns a device's GL context. A GL context is current on at most one thread, and
// the core calls the plugin from any thread: every call that touches GL is handed to this thread
// and the caller waits for it (one call at a time per device). The caller's own thread never has
// its current context changed, so an application's own GL context stays as it was.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

namespace tf_gl {

class Worker {
public:
    Worker();
    // Finishes the call in progress, then joins the thread.
    ~Worker();
    Worker(const Worker &) = delete;
    Worker &operator=(const Worker &) = delete;

    // Runs f on the thread and returns its result; an exception f throws is rethrown here.
    // Called from the thread itself, f runs at once.
    template <class F>
    auto call(F &&f) -> std::invoke_result_t<F &> {
        using R = std::invoke_result_t<F &>;
        if constexpr (std::is_void_v<R>) {
            run([&] { f(); });
        } else {
            std::optional<R> result;
            run([&] { result.emplace(f()); });
            return std::move(*result);
        }
    }

private:
    void run(const std::function<void()> &job);
    void loop();

    std::mutex callers_;  // one call at a time
    std::mutex mutex_;
    std::condition_variable wake_, finished_;
    const std::function<void()> *job_ = nullptr;
    std::exception_ptr error_;
    bool done_ = false;
    bool stop_ = false;
    std::thread thread_;  // last: started once the members above exist
};

}  // namespace tf_gl
