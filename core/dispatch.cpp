#include "dispatch.hpp"

#include <climits>
#include <cstring>
#include <span>
#include <vector>

#include "errors.hpp"
#include "log.hpp"
#include "op_table.hpp"
#include "registry.hpp"

namespace tinyfin::detail {

namespace {

constexpr std::size_t max_operands = 8;

// Fills desc in place: a descriptor returned by value was copied once more per operand.
void describe(const TensorImpl &t, tf_tensor_desc &desc) {
    // Zero-filled first: plugin-abi.md promises zeros in reserved_ and beyond rank.
    std::memset(&desc, 0, sizeof desc);
    desc.struct_size = sizeof desc;
    desc.dtype = static_cast<int32_t>(t.dtype);
    desc.rank = static_cast<int32_t>(t.shape.size());
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
        desc.shape[i] = t.shape[i];
        desc.strides[i] = t.strides[i];
    }
    desc.offset = static_cast<uint64_t>(t.offset) * dtype_size(t.dtype);
    desc.buffer = t.storage->buffer;
    desc.data = t.storage->host;
}

// Elements from the view's first element to one past its last (strides are >= 0).
int64_t extent(const TensorImpl &t) {
    int64_t end = 1;
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
        if (t.shape[i] == 0) return 0;
        end += (t.shape[i] - 1) * t.strides[i];
    }
    return end;
}

std::string describe_operands(std::span<const TensorImpl *const> tensors) {
    std::string text;
    for (const TensorImpl *t : tensors) {
        if (!text.empty()) text += ", ";
        text += std::string(dtype_name(t->dtype)) + shape_str(t->shape);
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
    staged.span_bytes = static_cast<uint64_t>(extent(t)) * dtype_size(t.dtype);
    staged.host = allocate_storage(registry.cpu(), 0, staged.span_bytes);
    if (read_contents && staged.span_bytes > 0)
        copy_bytes(*staged.host, 0, *t.storage, static_cast<uint64_t>(t.offset) * dtype_size(t.dtype),
                   staged.span_bytes);
    return staged;
}

void run_or_throw(Backend &backend, int device, const tf_op_desc &desc) {
    ScratchError err;
    tf_status status = backend.table().run(device, &desc, &err.get());
    if (status != TF_STATUS_OK) [[unlikely]]
        raise_status(status, std::string(op_info(static_cast<tf_op>(desc.op)).name) + " on " +
                                 backend.name() + ": " + err.text("failed without a message"));
}

void sync_or_throw(Backend &backend, int device) {
    tf_error err = make_error();
    tf_status status = backend.table().synchronize(device, &err);
    if (status != TF_STATUS_OK)
        raise_status(status, "synchronize on " + backend.name() + ": " +
                                 error_text(err, "failed without a message"));
}

} // namespace

void copy_bytes(Storage &dst, uint64_t dst_offset, Storage &src, uint64_t src_offset,
                uint64_t nbytes) {
    if (nbytes == 0) return;
    Counters &counters = Registry::instance().counters();
    tf_error err = make_error();
    tf_status status = TF_STATUS_OK;
    if (dst.backend == src.backend && dst.device == src.device) {
        status = src.backend->table().buffer_copy(dst.buffer, dst_offset, src.buffer, src_offset,
                                                  nbytes, &err);
    } else if (dst.host) {
        // buffer_read waits for the source's pending work.
        status = src.backend->table().buffer_read(src.buffer, src_offset,
                                                  static_cast<char *>(dst.host) + dst_offset, nbytes,
                                                  &err);
        if (!src.host) counters.backends[src.backend->slot()].bytes_to_host += nbytes;
    } else if (src.host) {
        sync_or_throw(*src.backend, src.device);
        status = dst.backend->table().buffer_write(
            dst.buffer, dst_offset, static_cast<const char *>(src.host) + src_offset, nbytes, &err);
        counters.backends[dst.backend->slot()].bytes_to_device += nbytes;
    } else {
        std::vector<char> bounce(nbytes);
        status = src.backend->table().buffer_read(src.buffer, src_offset, bounce.data(), nbytes, &err);
        counters.backends[src.backend->slot()].bytes_to_host += nbytes;
        if (status == TF_STATUS_OK) {
            status = dst.backend->table().buffer_write(dst.buffer, dst_offset, bounce.data(), nbytes,
                                                       &err);
            counters.backends[dst.backend->slot()].bytes_to_device += nbytes;
        }
    }
    if (status != TF_STATUS_OK)
        raise_status(status, "copying " + std::to_string(nbytes) + " bytes from " +
                                 src.backend->name() + " to " + dst.backend->name() + ": " +
                                 error_text(err, "failed without a message"));
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

void dispatch(tf_op op, std::initializer_list<Tensor> inputs,
              std::initializer_list<Tensor> outputs, const void *params) {
    const TensorImpl *in[max_operands], *out[max_operands];
    if (inputs.size() > max_operands || outputs.size() > max_operands)
        raise<ValueError>(std::string(op_info(op).name) + ": too many operands");
    std::size_t n = 0;
    for (const Tensor &t : inputs) in[n++] = t.impl();
    n = 0;
    for (const Tensor &t : outputs) out[n++] = t.impl();
    dispatch(op, std::span(in, inputs.size()), std::span(out, outputs.size()), params);
}

void dispatch(tf_op op, std::span<const TensorImpl *const> inputs,
              std::span<const TensorImpl *const> outputs, const void *params) {
    const OpInfo &info = op_info(op);
    if (inputs.size() > max_operands || outputs.size() > max_operands)
        raise<ValueError>(std::string(info.name) + ": too many operands");
    Registry &registry = Registry::checked();
    const TensorImpl &first = *outputs.front();
    Backend &backend = *first.storage->backend;
    int device = first.storage->device;

    tf_tensor_desc in_desc[max_operands], out_desc[max_operands];
    for (std::size_t i = 0; i < inputs.size(); ++i) describe(*inputs[i], in_desc[i]);
    for (std::size_t i = 0; i < outputs.size(); ++i) describe(*outputs[i], out_desc[i]);
    tf_op_desc desc;
    desc.struct_size = sizeof desc;
    desc.op = static_cast<uint32_t>(op);
    desc.n_inputs = static_cast<uint32_t>(inputs.size());
    desc.n_outputs = static_cast<uint32_t>(outputs.size());
    desc.inputs = in_desc;
    desc.outputs = out_desc;
    desc.params = params;

    Counters &counters = registry.counters();
    if (backend.table().supports(device, &desc)) [[likely]] {
        run_or_throw(backend, device, desc);
        counters.backends[backend.slot()].ops.fetch_add(1, std::memory_order_relaxed);
        return;
    }

    Backend &cpu = registry.cpu();
    if (&backend == &cpu || !cpu.table().supports(0, &desc))
        raise<DTypeError>(std::string(info.name) + ": no backend supports these operands (" +
                          describe_operands(inputs) + " -> " + describe_operands(outputs) + ")");
    if (registry.fallback_is_error())
        raise<FallbackError>(std::string(info.name) + " is not supported by " + backend.name() +
                             " for " + describe_operands(inputs) + " -> " +
                             describe_operands(outputs) +
                             " and TINYFIN_FALLBACK=error forbids running it on cpu");

    counters.fallbacks[op].fetch_add(1, std::memory_order_relaxed);
    if (log_fallbacks_enabled() && !counters.fallback_logged[op].exchange(true))
        log_line("fallback", info.name,
                 "ran on cpu: " + backend.name() + " does not support " + describe_operands(inputs));

    // Operands the cpu plugin cannot address are staged through host memory.
    std::vector<Staged> staged_outputs;
    std::size_t n = 0;
    for (const TensorImpl *t : inputs) {
        const TensorImpl &impl = *t;
        if (impl.storage->host) {
            if (impl.storage->backend != &cpu) sync_or_throw(*impl.storage->backend, impl.storage->device);
            ++n;
            continue;
        }
        Staged staged = stage_to_host(registry, impl, true);
        in_desc[n].buffer = staged.host->buffer;
        in_desc[n].data = staged.host->host;
        in_desc[n].offset = 0;
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
            out_desc[n].buffer = staged.host->buffer;
            out_desc[n].data = staged.host->host;
            out_desc[n].offset = 0;
            staged_outputs.push_back(std::move(staged));
        }
        ++n;
    }
    run_or_throw(cpu, 0, desc);
    counters.backends[cpu.slot()].ops.fetch_add(1, std::memory_order_relaxed);
    for (Staged &staged : staged_outputs) {
        if (!staged.original) continue;
        const TensorImpl &impl = *staged.original;
        copy_bytes(*impl.storage, static_cast<uint64_t>(impl.offset) * dtype_size(impl.dtype),
                   *staged.host, 0, staged.span_bytes);
    }
}

} // namespace tinyfin::detail
