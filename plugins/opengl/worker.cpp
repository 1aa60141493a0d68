// The GL thread of a device (see worker.hpp).
#include "worker.hpp"

#include <utility>

namespace tf_gl {

Worker::Worker() : thread_([this] { loop(); }) {}

Worker::~Worker() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
}

void Worker::run(const std::function<void()> &job) {
    if (std::this_thread::get_id() == thread_.get_id()) {
        job();
        return;
    }
    std::lock_guard caller(callers_);
    std::unique_lock lock(mutex_);
    job_ = &job;
    done_ = false;
    error_ = nullptr;
    wake_.notify_one();
    finished_.wait(lock, [&] { return done_; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void Worker::loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || (job_ && !done_); });
        if (job_ && !done_) {
            const std::function<void()> *job = job_;
            lock.unlock();
            std::exception_ptr error;
            try {
                (*job)();
            } catch (...) {
                error = std::current_exception();
            }
            lock.lock();
            error_ = error;
            done_ = true;
            finished_.notify_one();
            continue;
        }
        if (stop_) return;
    }
}

}  // namespace tf_gl
