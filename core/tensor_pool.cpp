// Fresh tensors for make_tensor, from a small per-thread pool of recently freed ones.
//
// A small op's result used to cost five heap allocations and a round trip through the plugin
// (the TensorImpl, its shape and strides, the Storage, the plugin's buffer and its cache lock),
// more than the op itself (docs/performance.md). A tensor that make_tensor created is owned
// through a deleter that, when the last handle goes, keeps the TensorImpl whole, storage and
// buffer included, in the releasing thread's pool instead of freeing it, provided nothing else
// refers to its storage (no view, no autograd record) and the buffer is small host memory. The
// next make_tensor of the same byte size on the same device takes it back and only rewrites
// dtype, shape and strides. For the plugin this is the free-then-allocate of one block its own
// caching allocator would also do; stats() count the reuse as an allocation, and a pooled buffer
// is not in bytes_in_use.
//
// The pool is a fixed array in trivially destructible thread-local storage, so a tensor freed
// by another thread-local's destructor after the pool was emptied at thread exit still finds it
// and is freed at once.
#include <array>

#include "registry.hpp"
#include "tensor_impl.hpp"

namespace tinyfin::detail {

namespace {

// Small buffers only: above this the op's own work dwarfs the allocation.
constexpr uint64_t pooled_bytes_max = 16 * 1024;
constexpr std::size_t pool_capacity = 16;

struct Pool {
    std::array<TensorImpl *, pool_capacity> impls;
    std::size_t count;
    // Set when the thread's drain has run: no more tensors are kept.
    bool closed;
    // Whether this thread registered its drain.
    bool draining;
};

constinit thread_local Pool freed{};

void drain_pool() noexcept {
    freed.closed = true;
    while (freed.count > 0) {
        TensorImpl *impl = freed.impls[--freed.count];
        // A pooled buffer is already out of bytes_in_use (Recycle) and ~Storage takes it out
        // again: put it back first, or each drained buffer wraps the unsigned count below zero.
        const Storage *storage = impl->storage.get();
        if (storage && storage->buffer && Registry::alive())
            Registry::instance().counters().backends[storage->backend->slot()].bytes_in_use.fetch_add(
                storage->nbytes, std::memory_order_relaxed);
        delete impl;
    }
}

// Empties the pool when its thread ends (the main thread's before static destructors, while
// the plugins are loaded).
struct Drain {
    ~Drain() { drain_pool(); }
};

Pool &pool_of_this_thread() {
    // An opaque copy of the address: GCC otherwise recomputes it (a TLS descriptor call) at
    // each use.
    Pool *address = &freed;
    asm("" : "+r"(address));
    return *address;
}

void count_reuse(const Backend &backend, uint64_t nbytes) {
    count_allocation(Registry::instance().counters().backends[backend.slot()], nbytes);
}

// The deleter of make_tensor's tensors: into the pool when the tensor can be reused whole.
struct Recycle {
    void operator()(TensorImpl *impl) const noexcept {
        Pool &p = pool_of_this_thread();
        const Storage *storage = impl->storage.get();
        const bool keep = p.count < pool_capacity && !p.closed && !impl->autograd && !impl->view_base && storage &&
                          impl->storage.use_count() == 1 && storage->host && !storage->release && !storage->constant &&
                          storage->nbytes <= pooled_bytes_max && Registry::alive();
        if (!keep) {
            delete impl;
            return;
        }
        if (!p.draining) {
            thread_local Drain drain;
            p.draining = true;
        }
        Registry::instance().counters().backends[storage->backend->slot()].bytes_in_use.fetch_sub(
            storage->nbytes, std::memory_order_relaxed);
        p.impls[p.count++] = impl;
    }
};

// A pooled tensor of nbytes on backend's device, taken out of the pool; nullptr when none.
TensorImpl *take(const Backend &backend, int device, uint64_t nbytes) {
    Pool &p = pool_of_this_thread();
    for (std::size_t i = p.count; i-- > 0;) {
        const Storage &s = *p.impls[i]->storage;
        if (s.nbytes != nbytes || s.backend != &backend || s.device != device) continue;
        TensorImpl *impl = p.impls[i];
        p.impls[i] = p.impls[--p.count];
        return impl;
    }
    return nullptr;
}

void set_layout(TensorImpl &impl, const Shape &shape, DType dtype) {
    impl.dtype = dtype;
    impl.shape = shape;
    impl.strides.resize(shape.size());
    contiguous_strides(shape, impl.strides);
    impl.offset = 0;
}

}  // namespace

std::shared_ptr<TensorImpl> fresh_tensor_impl(Backend &backend, int device, const Shape &shape, DType dtype,
                                              uint64_t nbytes) {
    if (nbytes > pooled_bytes_max) {
        auto impl = std::make_shared<TensorImpl>();
        set_layout(*impl, shape, dtype);
        impl->storage = allocate_storage(backend, device, nbytes);
        return impl;
    }
    if (TensorImpl *reused = take(backend, device, nbytes)) {
        // Counted first: should set_layout throw, the tensor is freed as a live one.
        count_reuse(backend, nbytes);
        std::unique_ptr<TensorImpl> impl(reused);
        set_layout(*impl, shape, dtype);
        return std::shared_ptr<TensorImpl>(impl.release(), Recycle{});
    }
    auto impl = std::make_unique<TensorImpl>();
    set_layout(*impl, shape, dtype);
    impl->storage = allocate_storage(backend, device, nbytes);
    return std::shared_ptr<TensorImpl>(impl.release(), Recycle{});
}

}  // namespace tinyfin::detail
