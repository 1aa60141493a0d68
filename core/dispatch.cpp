#include "dispatch.hpp"

#include <climits>
#include <cstring>
#include <span>
#include <vector>

#include "errors.hpp"
#include "log.hpp"
#include "op_samples.hpp"
#include "op_table.hpp"
#include "registry.hpp"

namespace tinyfin::detail {

namespace {

constexpr std::size_t max_operands = 8;

// Fills desc in place: a descriptor returned by value was copied once more per operand. Every
// member is written, zeros beyond rank and in reserved_ (plugin-abi.md promises a zero-filled
// descriptor), without a memset: on this path `rep stos` was the largest cost of a small op.
[[gnu::always_inline]] inline void describe(const TensorImpl &t, tf_tensor_desc &desc) {
    static_assert(sizeof(tf_tensor_desc) ==
                      4 * sizeof(int32_t) + 2 * TF_MAX_RANK * sizeof(int64_t) + sizeof(uint64_t) + 2 * sizeof(void *),
                  "tf_tensor_desc gained a member: describe() must write it");
    const std::size_t rank = t.shape.size();
    desc.struct_size = sizeof desc;
    desc.dtype = static_cast<int32_t>(t.dtype);
    desc.rank = static_cast<int32_t>(rank);
    desc.reserved_ = 0;
    for (std::size_t i = 0; i < TF_MAX_RANK; ++i) {
        desc.shape[i] = i < rank ? t.shape[i] : 0;
        desc.strides[i] = i < rank ? t.strides[i] : 0;
    }
    desc.offset = byte_offset(t.dtype, t.offset);
    desc.buffer = t.storage->buffer;
    desc.data = t.storage->host;
}

}  // namespace

void describe_tensor(const TensorImpl &t, tf_tensor_desc &desc) { describe(t, desc); }

namespace {

// One zero element of dtype on (backend, device): what stands in for an absent input when the
// plugin predates ABI 1.1. Written through buffer_write like any upload from the host, once per
// thread, backend, device and dtype, and kept (as constant_like keeps its constants).
[[gnu::cold]] const Storage &zero_element(Backend &backend, int device, DType dtype) {
    struct Entry {
        const Backend *backend;
        int device;
        DType dtype;
        std::shared_ptr<Storage> storage;
    };
    thread_local std::vector<Entry> kept;
    for (const Entry &e : kept)
        if (e.backend == &backend && e.device == device && e.dtype == dtype) return *e.storage;
    const uint64_t bytes = element_size(dtype);
    std::shared_ptr<Storage> storage = allocate_storage(backend, device, bytes);
    const uint64_t zero = 0;
    tf_error err = make_error();
    tf_status status = guarded(err, "buffer_write",
                               [&] { return backend.table().buffer_write(storage->buffer, 0, &zero, bytes, &err); });
    if (!storage->host) Registry::instance().counters().backends[backend.slot()].bytes_to_device += bytes;
    if (status != TF_STATUS_OK)
        raise_status(status, "writing a zero for an absent input on " + backend.name() + ": " +
                                 error_text(err, "failed without a message"));
    kept.push_back({&backend, device, dtype, std::move(storage)});
    return *kept.back().storage;
}

// Input desc, absent in the call (TensorImpl `absent` has no storage), as `backend` takes it: all
// zero (TF_TENSOR_ABSENT) for a plugin of ABI 1.1 or later, else one zero element on its device
// broadcast to the operand's shape (strides 0).
[[gnu::cold]] void describe_absent(const TensorImpl &absent, Backend &backend, int device, tf_tensor_desc &desc) {
    std::memset(&desc, 0, sizeof desc);
    if (backend.takes_absent_inputs()) return;
    const Storage &zero = zero_element(backend, device, absent.dtype);
    desc.struct_size = sizeof desc;
    desc.dtype = static_cast<int32_t>(absent.dtype);
    desc.rank = static_cast<int32_t>(absent.shape.size());
    for (std::size_t i = 0; i < absent.shape.size(); ++i) desc.shape[i] = absent.shape[i];
    desc.buffer = zero.buffer;
    desc.data = zero.host;
}

// "f32[2,3]", with the layout when it is not the plain contiguous one, since strides and offsets
// are what a plugin often refuses: "f32[3,2] strides [1,3]", "f32[4] offset 8".
std::string describe_operands(std::span<const TensorImpl *const> tensors) {
    std::string text;
    for (const TensorImpl *t : tensors) {
        if (!text.empty()) text += ", ";
        if (!t->storage) {
            text += "absent";
            continue;
        }
        text += std::string(dtype_name(t->dtype)) + shape_str(t->shape);
        if (t->strides != contiguous_strides(t->shape)) text += " strides " + shape_str(t->strides);
        if (t->offset != 0) text += " offset " + std::to_string(t->offset);
    }
    return text;
}

// A host copy of the bytes a view spans, so the cpu plugin can run on it.
struct Staged {
    std::shared_ptr<Storage> host;
    const TensorImpl *original = nullptr;
    uint64_t span_bytes = 0;
};

Staged stage_to_host(Registry &registry, const TensorImpl &t, bool read_contents) {
    Staged staged;
    staged.original = &t;
    staged.span_bytes = byte_offset(t.dtype, extent(t));
    staged.host = allocate_storage(registry.cpu(), 0, staged.span_bytes);
    if (read_contents && staged.span_bytes > 0)
        copy_bytes(*staged.host, 0, *t.storage, byte_offset(t.dtype, t.offset), staged.span_bytes);
    return staged;
}

// supports() answers for recent descriptors, per thread. A plugin answers from op, dtypes, ranks,
// shapes, strides and params alone and without side effects (plugin-abi.md R8), so asking again
// about the same layout only repeats its checks, a measurable part of a small op's cost on cpu
// (docs/performance.md, "Measurements behind code choices").
// Remembered: ops without params, at most 3 operands of rank <= 4 (elementwise, matmul, copies),
// one entry per op and backend (modulo the table size); offsets are part of the key, since R8
// lets a plugin refuse on an offset or alignment.
class SupportsCache {
public:
    // The remembered answer, or -1.
    int find(const Backend &backend, int device, const tf_op_desc &desc) const {
        // Stored entries passed cacheable(): equal counts and ranks imply it for desc.
        if (desc.params) return -1;
        const Entry &e = entries_[index(backend, desc.op)];
        if (e.backend != &backend || e.device != device || e.op != desc.op || e.n_inputs != desc.n_inputs ||
            e.n_outputs != desc.n_outputs)
            return -1;
        for (uint32_t i = 0; i < desc.n_inputs; ++i)
            if (!e.layouts[i].matches(desc.inputs[i])) return -1;
        for (uint32_t i = 0; i < desc.n_outputs; ++i)
            if (!e.layouts[desc.n_inputs + i].matches(desc.outputs[i])) return -1;
        return e.answer;
    }

    void remember(const Backend &backend, int device, const tf_op_desc &desc, bool answer) {
        if (!cacheable(desc)) return;
        Entry &e = entries_[index(backend, desc.op)];
        e.backend = &backend;
        e.device = device;
        e.op = desc.op;
        e.n_inputs = static_cast<uint8_t>(desc.n_inputs);
        e.n_outputs = static_cast<uint8_t>(desc.n_outputs);
        for (uint32_t i = 0; i < desc.n_inputs; ++i) e.layouts[i].set(desc.inputs[i]);
        for (uint32_t i = 0; i < desc.n_outputs; ++i) e.layouts[desc.n_inputs + i].set(desc.outputs[i]);
        e.answer = answer;
    }

private:
    static constexpr std::size_t size = 32, max_rank = 4, max_tensors = 3;

    // Spread by backend too: a fallback asks the device's plugin and then cpu about the same op,
    // and with one entry per op the two answers evicted each other on every call.
    static std::size_t index(const Backend &backend, uint32_t op) {
        return (op + 13 * static_cast<std::size_t>(backend.slot())) % size;
    }

    struct Layout {
        int32_t dtype, rank;
        uint64_t offset;
        int64_t shape[max_rank], strides[max_rank];

        bool matches(const tf_tensor_desc &t) const {
            if (t.dtype != dtype || t.rank != rank || t.offset != offset) return false;
            for (int32_t i = 0; i < rank; ++i)
                if (t.shape[i] != shape[i] || t.strides[i] != strides[i]) return false;
            return true;
        }
        void set(const tf_tensor_desc &t) {
            dtype = t.dtype;
            rank = t.rank;
            offset = t.offset;
            for (int32_t i = 0; i < rank; ++i) {
                shape[i] = t.shape[i];
                strides[i] = t.strides[i];
            }
        }
    };
    struct Entry {
        const Backend *backend;
        int32_t device;
        uint32_t op;
        // Narrower than the descriptor's counts on purpose: with the same layout the compiler
        // compares both in one 8-byte load of the descriptor the caller just wrote as two 4-byte
        // stores, and that store-forwarding stall was a quarter of the lookup.
        uint8_t n_inputs, n_outputs;
        Layout layouts[max_tensors];
        bool answer;
    };

    static bool cacheable(const tf_op_desc &desc) {
        if (desc.params || desc.n_inputs + desc.n_outputs > max_tensors) return false;
        // An absent input (struct_size 0) would match a scalar's layout.
        for (uint32_t i = 0; i < desc.n_inputs; ++i)
            if (desc.inputs[i].rank > static_cast<int32_t>(max_rank) || desc.inputs[i].struct_size == 0) return false;
        for (uint32_t i = 0; i < desc.n_outputs; ++i)
            if (desc.outputs[i].rank > static_cast<int32_t>(max_rank)) return false;
        return true;
    }

    Entry entries_[size];
};

// Zero-initialised (no backend matches a null entry), so reaching it needs no first-use guard.
constinit thread_local SupportsCache supports_cache{};

// Whether a descriptor has a block-quantized operand (ABI 1.2), which older plugins never see.
[[gnu::cold]] bool has_quantized_operand(const tf_op_desc &desc) {
    for (uint32_t i = 0; i < desc.n_inputs; ++i)
        if (desc.inputs[i].struct_size && desc.inputs[i].dtype >= TF_DTYPE_Q8_0) return true;
    for (uint32_t i = 0; i < desc.n_outputs; ++i)
        if (desc.outputs[i].dtype >= TF_DTYPE_Q8_0) return true;
    return false;
}

bool supports(Backend &backend, int device, const tf_op_desc &desc) {
    if (!backend.takes_quantized() && has_quantized_operand(desc)) [[unlikely]]
        return false;
    // An opaque copy of the address: GCC otherwise recomputes it (a TLS descriptor call) at
    // every use, once per compared operand.
    SupportsCache *address = &supports_cache;
    asm("" : "+r"(address));
    SupportsCache &cache = *address;
    if (int known = cache.find(backend, device, desc); known >= 0) [[likely]]
        return known != 0;
    bool answer = guarded_value(backend.name(), "supports", int32_t{0},
                                [&] { return backend.table().supports(device, &desc); }) != 0;
    cache.remember(backend, device, desc, answer);
    return answer;
}

void run_or_throw(Backend &backend, int device, const tf_op_desc &desc) {
    ScratchError err;
    tf_error &e = err.get();
    tf_status status = guarded(e, "run", [&] { return backend.table().run(device, &desc, &e); });
    if (status != TF_STATUS_OK) [[unlikely]]
        raise_status(status, std::string(op_info(static_cast<tf_op>(desc.op)).name) + " on " + backend.name() + ": " +
                                 err.text("failed without a message"));
}

void sync_or_throw(Backend &backend, int device) {
    ScratchError err;
    tf_error &e = err.get();
    tf_status status = guarded(e, "synchronize", [&] { return backend.table().synchronize(device, &e); });
    if (status != TF_STATUS_OK) [[unlikely]]
        raise_status(status, "synchronize on " + backend.name() + ": " + err.text("failed without a message"));
}

// The dtypes column of ops.def: every operand within its class, before any plugin is asked.
[[gnu::noinline, gnu::cold]] void refuse_dtype(const OpInfo &info, std::size_t operand, bool input, DType dtype) {
    const uint16_t mask = info.dtypes[operand];
    std::string allowed;
    for (int d = 0; d < TF_DTYPE_COUNT_; ++d)
        if (mask >> d & 1) allowed += std::string(allowed.empty() ? "" : ", ") + dtype_name(static_cast<DType>(d));
    const std::size_t index = input ? operand : operand - static_cast<std::size_t>(info.n_inputs);
    raise<DTypeError>(std::string(info.name) + ": " + (input ? "input " : "output ") + std::to_string(index) + " is " +
                      dtype_name(dtype) + ", but " + info.name + " takes " + allowed + " there");
}

[[gnu::always_inline]] inline void check_dtypes(const OpInfo &info, std::span<const TensorImpl *const> inputs,
                                                std::span<const TensorImpl *const> outputs) {
    std::size_t operand = 0;
    for (const TensorImpl *t : inputs) {
        if (operand < max_op_operands && !(info.dtypes[operand] >> static_cast<int>(t->dtype) & 1)) [[unlikely]]
            refuse_dtype(info, operand, true, t->dtype);
        ++operand;
    }
    for (const TensorImpl *t : outputs) {
        if (operand < max_op_operands && !(info.dtypes[operand] >> static_cast<int>(t->dtype) & 1)) [[unlikely]]
            refuse_dtype(info, operand, false, t->dtype);
        ++operand;
    }
}

}  // namespace

void copy_bytes(Storage &dst, uint64_t dst_offset, Storage &src, uint64_t src_offset, uint64_t nbytes) {
    if (nbytes == 0) return;
    Counters &counters = Registry::instance().counters();
    tf_error err = make_error();
    tf_status status = TF_STATUS_OK;
    const tf_plugin &from = src.backend->table();
    const tf_plugin &to = dst.backend->table();
    if (dst.backend == src.backend && dst.device == src.device) {
        status = guarded(err, "buffer_copy", [&] {
            return from.buffer_copy(dst.buffer, dst_offset, src.buffer, src_offset, nbytes, &err);
        });
    } else if (dst.host) {
        // buffer_read waits for the source's pending work.
        status = guarded(err, "buffer_read", [&] {
            return from.buffer_read(src.buffer, src_offset, static_cast<char *>(dst.host) + dst_offset, nbytes, &err);
        });
        if (!src.host) counters.backends[src.backend->slot()].bytes_to_host += nbytes;
    } else if (src.host) {
        sync_or_throw(*src.backend, src.device);
        status = guarded(err, "buffer_write", [&] {
            return to.buffer_write(dst.buffer, dst_offset, static_cast<const char *>(src.host) + src_offset, nbytes,
                                   &err);
        });
        counters.backends[dst.backend->slot()].bytes_to_device += nbytes;
    } else {
        std::vector<char> bounce(nbytes);
        status = guarded(err, "buffer_read",
                         [&] { return from.buffer_read(src.buffer, src_offset, bounce.data(), nbytes, &err); });
        counters.backends[src.backend->slot()].bytes_to_host += nbytes;
        if (status == TF_STATUS_OK) {
            status = guarded(err, "buffer_write",
                             [&] { return to.buffer_write(dst.buffer, dst_offset, bounce.data(), nbytes, &err); });
            counters.backends[dst.backend->slot()].bytes_to_device += nbytes;
        }
    }
    if (status != TF_STATUS_OK)
        raise_status(status, "copying " + std::to_string(nbytes) + " bytes from " + src.backend->name() + " to " +
                                 dst.backend->name() + ": " + error_text(err, "failed without a message"));
}

Device common_device(std::initializer_list<const Tensor *> operands) {
    const Tensor *best = nullptr;
    for (const Tensor *t : operands) {
        if (!t->defined()) continue;
        if (!best) {
            best = t;
            continue;
        }
        Backend &a = backend_of(*best), &b = backend_of(*t);
        if (&a == &b) continue;
        int rank_a = a.name() == "cpu" ? INT32_MIN : a.table().priority;
        int rank_b = b.name() == "cpu" ? INT32_MIN : b.table().priority;
        if (rank_b > rank_a) best = t;
    }
    if (!best) raise<DeviceError>("no defined operand to place the op on");
    return best->device();
}

namespace {
thread_local bool helper_work = false;
}  // namespace

HelperScope::HelperScope() : previous_(helper_work) { helper_work = true; }
HelperScope::~HelperScope() { helper_work = previous_; }

TensorImpl absent_input(DType dtype, const Shape &shape) {
    TensorImpl absent;
    absent.dtype = dtype;
    absent.shape = shape;
    absent.strides.assign(shape.size(), 0);
    return absent;
}

void dispatch(tf_op op, std::initializer_list<Tensor> inputs, std::initializer_list<Tensor> outputs,
              const void *params) {
    const TensorImpl *in[max_operands], *out[max_operands];
    if (inputs.size() > max_operands || outputs.size() > max_operands)
        raise<ValueError>(std::string(op_info(op).name) + ": too many operands");
    std::size_t n = 0;
    for (const Tensor &t : inputs) in[n++] = t.impl();
    n = 0;
    for (const Tensor &t : outputs) out[n++] = t.impl();
    dispatch(op, std::span(in, inputs.size()), std::span(out, outputs.size()), params);
}

namespace {

// One call's descriptor, after the checks every dispatch makes first (operand count, the dtype
// column of ops.def). The operand descriptors live inside: desc is valid while this lives.
struct DescribedCall {
    tf_tensor_desc in_desc[max_operands], out_desc[max_operands];
    tf_op_desc desc;
    // Bit i set: input i is absent (absent_input()); in_desc[i] is then set per plugin by
    // give_absent_to before that plugin is asked.
    uint32_t absent = 0;

    DescribedCall(tf_op op, std::span<const TensorImpl *const> inputs, std::span<const TensorImpl *const> outputs,
                  const void *params) {
        const OpInfo &info = op_info(op);
        if (inputs.size() > max_operands || outputs.size() > max_operands)
            raise<ValueError>(std::string(info.name) + ": too many operands");
        check_dtypes(info, inputs, outputs);
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            if (!inputs[i]->storage) [[unlikely]] {
                if (!(info.optional_inputs >> i & 1))
                    raise<ValueError>(std::string(info.name) + ": input " + std::to_string(i) +
                                      " is required (ops.def does not mark it optional)");
                absent |= 1u << i;
                continue;
            }
            describe(*inputs[i], in_desc[i]);
        }
        for (std::size_t i = 0; i < outputs.size(); ++i) describe(*outputs[i], out_desc[i]);
        desc.struct_size = sizeof desc;
        desc.op = static_cast<uint32_t>(op);
        desc.n_inputs = static_cast<uint32_t>(inputs.size());
        desc.n_outputs = static_cast<uint32_t>(outputs.size());
        desc.inputs = in_desc;
        desc.outputs = out_desc;
        desc.params = params;
    }
    DescribedCall(const DescribedCall &) = delete;
    DescribedCall &operator=(const DescribedCall &) = delete;

    // Describes the absent inputs as the plugin about to be asked takes them (describe_absent).
    void give_absent_to(std::span<const TensorImpl *const> inputs, Backend &backend, int device) {
        for (std::size_t i = 0; i < inputs.size(); ++i)
            if (absent >> i & 1) describe_absent(*inputs[i], backend, device, in_desc[i]);
    }
};

// Whether the cpu plugin addresses every operand in place (an absent input needs no memory).
bool all_host(std::span<const TensorImpl *const> tensors) {
    for (const TensorImpl *t : tensors)
        if (t->storage && !t->storage->host) return false;
    return true;
}

}  // namespace

bool dispatch_if_claimed(tf_op op, std::span<const TensorImpl *const> inputs,
                         std::span<const TensorImpl *const> outputs, const void *params) {
    DescribedCall call(op, inputs, outputs, params);
    const tf_op_desc &desc = call.desc;
    Registry &registry = Registry::checked();
    const Storage &home = *outputs.front()->storage;
    Backend &backend = *home.backend;
    Counters &counters = registry.counters();
    if (call.absent) [[unlikely]]
        call.give_absent_to(inputs, backend, home.device);
    if (supports(backend, home.device, desc)) {
        run_or_throw(backend, home.device, desc);
        counters.backends[backend.slot()].ops.fetch_add(1, std::memory_order_relaxed);
        return true;
    }
    Backend &cpu = registry.cpu();
    if (&backend == &cpu) return false;
    if (!all_host(inputs) || !all_host(outputs)) return false;
    if (call.absent) [[unlikely]]
        call.give_absent_to(inputs, cpu, 0);
    if (!supports(cpu, 0, desc)) return false;
    // Host memory of another plugin: its queued work on these buffers finishes first.
    sync_or_throw(backend, home.device);
    run_or_throw(cpu, 0, desc);
    counters.backends[cpu.slot()].ops.fetch_add(1, std::memory_order_relaxed);
    return true;
}

bool may_claim(tf_op op, const TensorImpl &like, DType dtype) {
    const Storage &home = *like.storage;
    if (claims(*home.backend, home.device, op, dtype)) return true;
    Backend &cpu = Registry::checked().cpu();
    return home.backend != &cpu && home.host != nullptr && claims(cpu, 0, op, dtype);
}

void dispatch(tf_op op, std::span<const TensorImpl *const> inputs, std::span<const TensorImpl *const> outputs,
              const void *params) {
    const OpInfo &info = op_info(op);
    DescribedCall call(op, inputs, outputs, params);
    tf_op_desc &desc = call.desc;
    Registry &registry = Registry::checked();
    const TensorImpl &first = *outputs.front();
    Backend &backend = *first.storage->backend;
    int device = first.storage->device;

    Counters &counters = registry.counters();
    if (call.absent) [[unlikely]]
        call.give_absent_to(inputs, backend, device);
    if (supports(backend, device, desc)) [[likely]] {
        run_or_throw(backend, device, desc);
        counters.backends[backend.slot()].ops.fetch_add(1, std::memory_order_relaxed);
        return;
    }

    Backend &cpu = registry.cpu();
    if (call.absent && &backend != &cpu) [[unlikely]]
        call.give_absent_to(inputs, cpu, 0);
    if (&backend == &cpu || !supports(cpu, 0, desc))
        raise<DTypeError>(std::string(info.name) + ": no backend supports these operands (" +
                          describe_operands(inputs) + " -> " + describe_operands(outputs) + ")");
    const bool in_place_helper = helper_work && all_host(inputs) && all_host(outputs);
    if (registry.fallback_is_error() && !in_place_helper)
        raise<FallbackError>(std::string(info.name) + " is not supported by " + backend.name() + " for " +
                             describe_operands(inputs) + " -> " + describe_operands(outputs) +
                             " and TINYFIN_FALLBACK=error forbids running it on cpu");

    if (!in_place_helper) counters.fallbacks[op].fetch_add(1, std::memory_order_relaxed);
    if (!in_place_helper && log_fallbacks_enabled() && !counters.fallback_logged[op].exchange(true))
        log_line("fallback", info.name,
                 "ran on cpu: " + backend.name() + " does not support " + describe_operands(inputs));

    // Operands the cpu plugin cannot address are staged through host memory.
    std::vector<Staged> staged_outputs;
    std::size_t n = 0;
    // Host-addressable inputs of another plugin (blas) are read in place once its queue is done:
    // one synchronize per device, not per operand.
    const Storage *synced = nullptr;
    for (const TensorImpl *t : inputs) {
        const TensorImpl &impl = *t;
        if (!impl.storage) {
            // Absent: described for cpu above, no memory to reach.
            ++n;
            continue;
        }
        if (impl.storage->host) {
            const Storage &storage = *impl.storage;
            bool done = synced && synced->backend == storage.backend && synced->device == storage.device;
            if (storage.backend != &cpu && !done) {
                sync_or_throw(*storage.backend, storage.device);
                synced = &storage;
            }
            ++n;
            continue;
        }
        Staged staged = stage_to_host(registry, impl, true);
        call.in_desc[n].buffer = staged.host->buffer;
        call.in_desc[n].data = staged.host->host;
        call.in_desc[n].offset = 0;
        // The staged copy must outlive the run: keep it with the outputs' list.
        staged_outputs.push_back(std::move(staged));
        staged_outputs.back().original = nullptr;
        ++n;
    }
    n = 0;
    for (const TensorImpl *t : outputs) {
        const TensorImpl &impl = *t;
        if (!impl.storage->host) {
            // A view with gaps keeps the bytes between its elements: read them first.
            bool dense = extent(impl) == checked_numel(impl.shape, info.name);
            Staged staged = stage_to_host(registry, impl, !dense);
            call.out_desc[n].buffer = staged.host->buffer;
            call.out_desc[n].data = staged.host->host;
            call.out_desc[n].offset = 0;
            staged_outputs.push_back(std::move(staged));
        }
        ++n;
    }
    run_or_throw(cpu, 0, desc);
    counters.backends[cpu.slot()].ops.fetch_add(1, std::memory_order_relaxed);
    for (Staged &staged : staged_outputs) {
        if (!staged.original) continue;
        const TensorImpl &impl = *staged.original;
        copy_bytes(*impl.storage, byte_offset(impl.dtype, impl.offset), *staged.host, 0, staged.span_bytes);
    }
}

}  // namespace tinyfin::detail
