// Autocast (tinyfin.hpp, AutocastGuard): the thread's scope and the hook the listed ops call.
#pragma once

#include <initializer_list>
#include <vector>

#include "tinyfin/tinyfin.hpp"

namespace tinyfin::detail {

// The innermost scope's dtype as its int32_t value; -1 when autocast is off on this thread.
extern constinit thread_local int32_t autocast_scope;

// The autocast hook of the op named `op` (a row of the table in autocast.cpp). Off (false) when
// no scope is active, or when the table leaves every operand as it is. On, it holds the cast
// operands (undefined ones stay undefined, integer and bool ones untouched) and suspends
// autocast on this thread while it lives, so the op, called again with them, runs them as they
// are. Every listed op starts:
//   if (Autocast cast{"matmul", {&a, &b}}) return matmul(cast[0], cast[1]);
class Autocast {
public:
    Autocast(const char *op, std::initializer_list<const Tensor *> operands);
    ~Autocast();
    Autocast(const Autocast &) = delete;
    Autocast &operator=(const Autocast &) = delete;
    explicit operator bool() const { return engaged_; }
    const Tensor &operator[](std::size_t i) const { return operands_[i]; }

private:
    bool engaged_ = false;
    int32_t previous_ = -1;
    std::vector<Tensor> operands_;
};

// Suspends autocast on this thread while alive (backward runs under it).
class AutocastOff {
public:
    AutocastOff() : previous_(autocast_scope) { autocast_scope = -1; }
    ~AutocastOff() { autocast_scope = previous_; }
    AutocastOff(const AutocastOff &) = delete;
    AutocastOff &operator=(const AutocastOff &) = delete;

private:
    int32_t previous_;
};

}  // namespace tinyfin::detail
